"""Runs in watched folders: which files belong to which run, the run id each gets, and whether a
run's marts and report are behind its store.

Why in the library: the Prefect flows (:mod:`commscope.pipeline.flows`) only wrap these; the
same discovery serves ``serve``, ``demo`` and any scheduler.

Run layout (how files map to runs), chosen by ``run_layout``:

- ``"subfolder"`` (default): every non-hidden sub-folder of a watched folder is one run; its
  name is the run id when it is a valid one, else a slug of it plus a short hash of the exact
  name (``run 1`` -> ``run_1-<hash>``), so distinct folders never share a run (see
  :func:`safe_run_id`; two names that still map to one id are refused with a warning naming
  both). Files directly in the watched folder belong to no run and are skipped with a warning.
- ``"pattern"``: ``run_pattern`` is a regular expression searched in each file's path relative
  to the watched folder (``/``-separated); the named group ``run`` (else group 1) is the run
  id (mapped as above). Files that do not match are skipped. Example: ``^(?P<run>[^/]+)/logs/`` or
  ``job-(?P<run>\\d+)``.
"""

from __future__ import annotations

import hashlib
import logging
import re
from datetime import datetime
from pathlib import Path

from commscope.pipeline.ingest import discover
from commscope.pipeline.store import Store, StoreError, validate_run_id

log = logging.getLogger(__name__)

RUN_LAYOUTS = ("subfolder", "pattern")
"""How files map to runs (see the module docstring)."""


def safe_run_id(name: str) -> str:
    """The run id of a folder name or pattern match: the name itself if it is a valid run id,
    else a readable slug plus a short hash of the exact name.

    Why: replacing invalid characters alone merged distinct folders into one run ("run 1" and
    "run_1", or "実験1" and "試験1" both "1"), silently mixing two experiments. The hash keeps
    every distinct name distinct; names that are valid run ids (every existing store's runs)
    keep their id.
    """
    try:
        return validate_run_id(name)
    except StoreError:
        pass
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")[:100]
    return f"{slug}-{digest}" if slug else f"run-{digest}"


class _RunIds:
    """Folder names to run ids, refusing two names that map to one id."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def get(self, name: str, where: Path, skipped: list[str]) -> str | None:
        """The run id of ``name`` (found at ``where``); None, with a skipped entry, on a clash."""
        rid = safe_run_id(name)
        other = self.names.setdefault(rid, name)
        if other != name:
            msg = (
                f"{where}: run id {rid!r} of {name!r} is already the run id of {other!r}: "
                "skipped so the two are not mixed (rename one of them)"
            )
            log.warning("%s", msg)
            skipped.append(msg)
            return None
        return rid


PACKAGE_ENTRIES = frozenset({"__init__.py", "__pycache__"})
"""Entries of a watched folder that are Python package files, not runs: the bundled
``sample_traces`` is package data of an installed commscope (:mod:`commscope.resources`)."""


def discover_runs(
    roots: list[Path], run_layout: str = "subfolder", run_pattern: str | None = None
) -> tuple[dict[str, list[Path]], dict[str, list[Path]], list[str]]:
    """Map the files under the watched folders to runs.

    Args:
        roots: watched folders.
        run_layout: ``"subfolder"`` or ``"pattern"`` (see the module docstring).
        run_pattern: the regex for ``"pattern"``.

    Returns:
        (files per run id, source folders per run id for the run manifest, skipped paths).
        Symlinked run folders are skipped with a note, never walked (the policy of
        :mod:`commscope.pipeline.fs_policy`, rule 3).

    Raises:
        ValueError: unknown layout, missing/invalid pattern, or a watched folder that is not a
            folder.
    """
    if run_layout not in RUN_LAYOUTS:
        raise ValueError(f"unknown run layout {run_layout!r} (use {' or '.join(RUN_LAYOUTS)})")
    regex: re.Pattern[str] | None = None
    if run_layout == "pattern":
        if not run_pattern:
            raise ValueError("run layout 'pattern' needs a run pattern (a regex)")
        regex = re.compile(run_pattern)
        if "run" not in regex.groupindex and regex.groups < 1:
            raise ValueError(f"run pattern {run_pattern!r} has no group (?P<run>...) or (...)")
    files: dict[str, list[Path]] = {}
    folders: dict[str, list[Path]] = {}
    skipped: list[str] = []
    ids = _RunIds()
    for root in roots:
        if not root.is_dir():
            raise ValueError(f"{root}: not a folder")
        if regex is None:
            for entry in sorted(root.iterdir()):
                if entry.name.startswith(".") or entry.name in PACKAGE_ENTRIES:
                    continue
                if entry.is_symlink():  # fs_policy rule 3: a symlinked run folder is not walked
                    kind = "folder" if entry.is_dir() else "file"
                    skipped.append(f"{entry} (symlinked {kind} not followed)")
                    continue
                if not entry.is_dir():
                    skipped.append(str(entry))
                    continue
                rid = ids.get(entry.name, entry, skipped)
                if rid is None:
                    continue
                found, errs = discover([entry])
                skipped.extend(f"{e.path} ({e.message})" for e in errs)
                files.setdefault(rid, []).extend(found)
                folders.setdefault(rid, []).append(entry)
        else:
            found, errs = discover([root])
            skipped.extend(f"{e.path} ({e.message})" for e in errs)
            for f in found:
                m = regex.search(f.relative_to(root).as_posix())
                name = (m.group("run") if "run" in regex.groupindex else m.group(1)) if m else None
                if not name:
                    skipped.append(str(f))
                    continue
                rid = ids.get(name, f, skipped)
                if rid is None:
                    continue
                files.setdefault(rid, []).append(f)
                if f.parent not in folders.setdefault(rid, []):
                    folders[rid].append(f.parent)
    return files, folders, skipped


def run_update_reason(
    st: Store, run_id: str, *, new_files: int, out: Path, report: bool = True
) -> str | None:
    """Why ``process_cluster_logs`` must derive (and report) this run now, or None.

    Why: a cycle interrupted after its ingest committed (killed, or its derive failed) leaves
    marts older than the store; the next cycle ingests nothing new, so "did this cycle ingest
    anything" alone would leave them stale forever. What a run's marts were derived from is
    recorded at publication (``derived/<run_id>.parquet``), so each cycle compares it with
    the committed store, and the report with the marts, whatever it ingested.

    Args:
        st: the store.
        run_id: the run.
        new_files: files this cycle committed for the run.
        out: the run's report file.
        report: whether reports are kept (a missing or older report then counts).
    """
    from commscope.pipeline.derive import derive_stale

    if new_files:
        return f"{new_files} new file(s)"
    stale = derive_stale(st, run_id)
    if stale is not None:
        return f"marts stale: {stale}"
    if report:
        if not out.exists():
            return "no report yet"
        row = st.derived(run_id)
        derived_at = row.get("derived_at") if row is not None else None
        if isinstance(derived_at, datetime) and out.stat().st_mtime < derived_at.timestamp():
            return "report older than the marts"
    return None
