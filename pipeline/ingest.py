"""Ingest: discover input files, parse each with its registered parser, commit to the store.

One file is one batch: parsed chunk by chunk into staged Parquet (bounded memory), then
committed atomically (see ``pipeline.store``). A file that fails leaves nothing behind and
does not stop the others.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from parsers._io import Source
from parsers.registry import (
    REGISTRY,
    LineCounts,
    ParseError,
    Parser,
    is_resumable,
    load_all,
    sniff,
)
from parsers.schema import DATA_TABLES, SCHEMA_VERSION
from pipeline import run_config as rc
from pipeline.fs_policy import check_file, not_regular, symlink_problem
from pipeline.store import Store, StoreError, batch_id_for, validate_run_id

log = logging.getLogger(__name__)

SIDECAR_SUFFIXES = (".source.txt", "manifest.json", "truth.json", "ds_comms_logger.json")
"""Files never parsed in a folder walk: provenance sidecars of samples, run manifests (read as
config), the synthetic generator's ground truth (``truth.json``) and the DeepSpeed config
snippet ``commscope collect`` writes."""

TRUTH_DIR = "truth"
"""Folder name skipped in a folder walk: the generator's ground-truth Parquet
(``pipeline.synthetic.generator`` writes ``truth.json`` and ``truth/``)."""


def _skipped_name(name: str) -> bool:
    """True for a file a folder walk never parses (hidden, sidecar, manifest, ground truth)."""
    return (
        name.startswith(".")
        or name.endswith(SIDECAR_SUFFIXES)
        or ".truth." in name
        or name.startswith("truth.")
    )


STATUS_OK = "ingested"
STATUS_SKIPPED = "already ingested"
STATUS_UNKNOWN = "not recognised"
STATUS_ERROR = "error"


@dataclass
class FileResult:
    """What happened to one input file."""

    path: str
    status: str
    format: str | None = None
    counts: LineCounts = field(default_factory=LineCounts)
    rows: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    message: str | None = None
    warnings: list[str] = field(default_factory=list)
    reject_reasons: dict[str, int] = field(default_factory=dict)
    """Rejected lines per reason (the first :data:`MAX_REASONS` distinct reasons)."""

    @property
    def ok(self) -> bool:
        """True if the file's content is in the store (now or from before)."""
        return self.status in {STATUS_OK, STATUS_SKIPPED}


def discover(paths: Iterable[Path]) -> tuple[list[Path], list[FileResult]]:
    """Expand files and directories (recursively) into input files, in a stable order.

    Hidden files and folders, sample sidecars, run manifests, a synthetic run's ground truth
    (``truth.json``, ``truth/``, any ``*.truth.*`` file) and symlink loops are skipped inside
    folders (a file named explicitly is kept). Symlinks and non-regular files follow the one
    policy of :mod:`pipeline.fs_policy`. Missing paths, named devices/FIFOs/sockets and links
    out of a walked folder are reported as error results instead of raising; a device, FIFO
    or socket met in a walk is a per-path note (status "not recognised").
    """
    found, errors, _links = discover_checked(paths)
    return found, errors


def discover_checked(
    paths: Iterable[Path],
) -> tuple[list[Path], list[FileResult], frozenset[Path]]:
    """:func:`discover`, plus the found paths that were symlinks when found.

    Why: a path found as a plain file must still be one when it is opened (policy rule 5);
    :func:`ingest_paths` passes ``symlink_ok`` to :func:`ingest_file` from this set.
    """
    found: list[Path] = []
    links: set[Path] = set()
    errors: list[FileResult] = []
    seen: set[Path] = set()
    for p in paths:
        if not p.exists():
            errors.append(FileResult(str(p), STATUS_ERROR, message="no such file or directory"))
            continue
        if not p.is_dir():
            problem = _not_regular(p)
            if problem is not None:  # /dev/zero, a FIFO: refused by name, never opened
                errors.append(FileResult(str(p), STATUS_ERROR, message=problem))
                continue
            found.append(p)
            if p.is_symlink():
                links.add(p)
            continue
        tree = p.resolve()
        for dirpath, dirnames, filenames in os.walk(p, followlinks=False):
            real = Path(dirpath).resolve()
            if real in seen:
                dirnames[:] = []
                continue
            seen.add(real)
            for d in sorted(dirnames):
                if not d.startswith(".") and (Path(dirpath) / d).is_symlink():
                    errors.append(
                        FileResult(
                            str(Path(dirpath) / d),
                            STATUS_ERROR,
                            message="symlinked folder not followed (name it to ingest it)",
                        )
                    )
            dirnames[:] = [d for d in dirnames if not (Path(dirpath) / d).is_symlink()]
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != TRUTH_DIR)
            for name in sorted(filenames):
                if _skipped_name(name):
                    continue
                f = Path(dirpath) / name
                problem = _symlink_problem(f, tree)
                if problem is not None:
                    errors.append(FileResult(str(f), STATUS_ERROR, message=problem))
                    continue
                problem = _not_regular(f)
                if problem is not None:
                    errors.append(FileResult(str(f), STATUS_UNKNOWN, message=problem + ", skipped"))
                    continue
                found.append(f)
                if f.is_symlink():
                    links.add(f)
    unique: dict[Path, Path] = {}
    for f in found:
        unique.setdefault(f.resolve(), f)
    return list(unique.values()), errors, frozenset(links)


def _not_regular(f: Path) -> str | None:
    """Why ``f`` (followed if a link) is not read as a file: not a regular file, or gone."""
    try:
        return not_regular(f.stat().st_mode)
    except OSError as exc:
        return exc.strerror or str(exc)


def _symlink_problem(f: Path, tree: Path) -> str | None:
    """Why a symlink met inside an input folder is not followed; None for anything else.

    Security default (:mod:`pipeline.fs_policy`, rule 2): inside a folder, only links that
    resolve inside that folder are read, so an input tree cannot make commscope read (and
    store) files elsewhere.
    """
    return symlink_problem(f, tree)


def file_sha256(path: Path, start: int = 0, end: int | None = None) -> str:
    """SHA-256 of the bytes of ``path`` in ``[start, end)``."""
    return prefix_sha256s(path, [end], start=start)[0]


def prefix_sha256s(path: Path, cuts: Sequence[int | None], *, start: int = 0) -> list[str]:
    """SHA-256 of ``path``'s bytes ``[start, cut)`` for each cut, in one read of the file.

    Why: an incremental ingest checks the stored prefix ``[0, byte_end)`` and needs the hash
    of the new prefix ``[0, new_end)`` too; both come from one pass. ``None`` means the end.
    """
    h = hashlib.sha256()
    out: list[str | None] = [None] * len(cuts)
    order = sorted(range(len(cuts)), key=lambda i: float("inf") if cuts[i] is None else cuts[i])
    pos = start
    with path.open("rb") as fh:
        fh.seek(start)
        for i in order:
            cut = cuts[i]
            while cut is None or pos < cut:
                n = 8 * 1024 * 1024 if cut is None else min(8 * 1024 * 1024, cut - pos)
                data = fh.read(n)
                if not data:
                    break
                h.update(data)
                pos += len(data)
            out[i] = h.copy().hexdigest()
    return [o or "" for o in out]


def _last_newline_end(path: Path, start: int, end: int) -> int:
    """Offset just after the last ``\\n`` in ``[start, end)``, or ``start`` if there is none."""
    step = 64 * 1024
    with path.open("rb") as fh:
        hi = end
        while hi > start:
            lo = max(start, hi - step)
            fh.seek(lo)
            k = fh.read(hi - lo).rfind(b"\n")
            if k >= 0:
                return lo + k + 1
            hi = lo
    return start


def _size_or_zero(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _byte_at(path: Path, offset: int) -> bytes:
    with path.open("rb") as fh:
        fh.seek(offset)
        return fh.read(1)


@dataclass
class _Plan:
    """What part of a file an ingest reads, and why."""

    start: int = 0
    end: int = 0
    first_line_no: int = 1
    sha: str = ""
    head: dict[str, Any] | None = None
    resume: dict[str, Any] | None = None
    rebuild_state: bool = False
    note: str | None = None
    skip: str | None = None


def _plan(
    store: Store, path: Path, size: int, parser: Parser, run_id: str, *, plain: bool, follow: bool
) -> _Plan:
    """Decide the byte range to ingest from the file's last commit in this run.

    A plain text file read by a resumable parser continues at the stored ``byte_end`` if the
    stored prefix is unchanged; a file that shrank, was rewritten, or whose last ingest ended
    in a cut line that has since grown is read again from the start as new content.
    Compressed files and other formats are read whole, and only when their content changed.
    With ``follow``, a final line without newline waits for the next ingest.
    """
    plan = _Plan(end=size)
    plan.head = store.path_head(run_id, str(path))
    incremental = plain and is_resumable(parser)
    if incremental and follow:
        plan.end = _last_newline_end(path, 0, size)
    head = plan.head
    if head is not None and incremental:
        prev_end = int(head["byte_end"] or 0)
        if size < prev_end:
            plan.note = f"file shrank below the {prev_end} bytes stored: ingested as new content"
        else:
            if follow:
                plan.end = _last_newline_end(path, prev_end, size)
            old, new = prefix_sha256s(path, [prev_end, plan.end])
            if old != head["sha256"]:
                plan.note = "file rewritten since its last ingest: ingested as new content"
            elif plan.end == prev_end:
                plan.skip = "no new complete line since the last ingest" if size > prev_end else ""
                return plan
            elif prev_end > 0 and _byte_at(path, prev_end - 1) != b"\n":
                plan.note = (
                    "the last ingest ended in a line without newline that has grown since: "
                    "ingested as new content"
                )
            else:
                plan.start, plan.sha = prev_end, new
                plan.first_line_no = int(head["first_line_no"] or 1) + int(head["lines_total"] or 0)
                state = head.get("parser_state")
                plan.resume = json.loads(state) if state else None
                plan.rebuild_state = state is None
                return plan
    if incremental and plan.end == 0 and size > 0:
        plan.skip = "no complete line yet"
        return plan
    plan.sha = file_sha256(path, 0, plan.end)
    if head is not None and plan.note is None and head["sha256"] != plan.sha:
        plan.note = "file changed since its last ingest: ingested as new content"
    return plan


def ingest_file(
    store: Store,
    path: Path,
    *,
    run_id: str,
    fmt: str | None = None,
    rank: int | None = None,
    follow: bool = False,
    symlink_ok: bool = True,
) -> FileResult:
    """Parse one file (or what it appended since its last ingest) and commit it as one batch.

    A file that grew since its last commit in this run is parsed from the last committed byte
    offset, with line numbers and parser state continuing from there (see :func:`_plan`);
    nothing stored is read or counted again.

    Args:
        store: the target store.
        path: input file.
        run_id: the run the file belongs to.
        fmt: parser name; None sniffs the format.
        rank: rank to assume when the file does not say (timeline formats).
        follow: live logs: a final line without newline is left for the next ingest instead
            of being rejected as cut.
        symlink_ok: False for a file found as a plain file in a folder walk: a symlink at
            ``path`` now means it was swapped after discovery, and it is refused
            (:mod:`pipeline.fs_policy`, rule 5).

    Returns:
        The outcome; errors are reported in it, never raised (except StoreError).
    """
    shown = str(path)
    # The policy check (fs_policy): a regular file, opened once without blocking; every
    # later open must find this very file (Source.identity).
    checked = check_file(path, symlink_ok=symlink_ok)
    if isinstance(checked, str):
        return FileResult(shown, STATUS_ERROR, message=checked)
    size = checked.size
    if size == 0:
        return FileResult(shown, STATUS_UNKNOWN, message="empty file", bytes=0)

    source = Source(checked.real, identity=checked.identity)
    load_all()
    if fmt is not None:
        if fmt not in REGISTRY:
            return FileResult(
                shown,
                STATUS_ERROR,
                message=f"unknown format {fmt!r} (known: {', '.join(REGISTRY)})",
            )
        parser = REGISTRY[fmt]
    else:
        found = sniff(source.head(), path)
        if found is None:
            return FileResult(
                shown,
                STATUS_UNKNOWN,
                bytes=size,
                message="format not recognised (not a log or trace commscope reads; "
                "use --format to force one)",
            )
        parser = found

    plain = source.compression is None
    plan = _plan(store, source.path, size, parser, run_id, plain=plain, follow=follow)
    if plan.skip is not None:
        return FileResult(
            shown, STATUS_SKIPPED, format=parser.name, bytes=size, message=plan.skip or None
        )
    batch_id = batch_id_for(run_id, plan.sha, plan.start, plan.end, parser.name)
    if store.is_committed(run_id, batch_id) or (
        plan.start == 0 and store.has_content(run_id, plan.sha)
    ):
        return FileResult(shown, STATUS_SKIPPED, format=parser.name, bytes=size)
    if plain:
        source = Source(source.path, plan.start, plan.end, plan.first_line_no, source.identity)
    resumable = is_resumable(parser)

    batch = store.begin(run_id, batch_id)
    counts = LineCounts()
    warnings: list[str] = []
    reasons: dict[str, int] = {}
    state: dict[str, Any] | None = None
    try:
        if plan.rebuild_state:  # stored by a commscope without parser state: re-derive it
            plan.resume = _state_of(
                parser, Source(source.path, 0, plan.start, identity=source.identity), run_id, rank
            )
            warnings.append("parser state rebuilt from the stored prefix (older store)")
        kwargs: dict[str, Any] = {"resume": plan.resume} if resumable else {}
        for chunk in parser.parse(source, run_id=run_id, rank=rank, **kwargs):
            counts += chunk.counts
            warnings.extend(chunk.warnings)
            if chunk.state is not None:
                state = chunk.state
            for table, df in chunk.tables.items():
                batch.write(
                    table, _fill_provenance(df, table, run_id, str(source.path), parser.name)
                )
                if table == "rejects" and df.height and "reason" in df.columns:
                    _count_reasons(reasons, df)
    except ParseError as exc:
        batch.abort()
        return FileResult(
            shown,
            STATUS_ERROR,
            format=parser.name,
            bytes=size,
            message=exc.message + (f" (line {exc.line})" if exc.line is not None else ""),
        )
    except OSError as exc:
        batch.abort()
        if exc.errno in STORE_FULL_ERRNOS:
            raise store_write_error(store, shown, exc) from exc
        return FileResult(
            shown,
            STATUS_ERROR,
            format=parser.name,
            bytes=size,
            message=f"read failed: {exc.strerror or exc}",
        )
    except Exception as exc:  # a parser bug must not stop the other files
        batch.abort()
        log.exception("parser %s failed on %s", parser.name, shown)
        return FileResult(
            shown,
            STATUS_ERROR,
            format=parser.name,
            bytes=size,
            message=f"internal error in parser {parser.name}: {type(exc).__name__}: {exc}",
        )
    if plain and _size_or_zero(source.path) < plan.end:
        batch.abort()
        return FileResult(
            shown,
            STATUS_ERROR,
            format=parser.name,
            bytes=size,
            message="file shrank while it was read: nothing stored (ingest it again)",
        )
    if not counts.balanced:
        batch.abort()
        return FileResult(
            shown,
            STATUS_ERROR,
            format=parser.name,
            bytes=size,
            message=f"line accounting does not balance: {counts} (parser bug)",
        )
    try:
        committed = batch.commit(
            {
                "path": str(source.path),
                "sha256": plan.sha,
                "bytes": size,
                "byte_start": plan.start,
                "byte_end": plan.end,
                "first_line_no": plan.first_line_no,
                "format": parser.name,
                "lines_total": counts.total,
                "lines_parsed": counts.parsed,
                "lines_ignored": counts.ignored,
                "lines_rejected": counts.rejected,
                "rows_written": sum(batch.rows.values()),
                "parser_version": parser.version,
                "schema_version": SCHEMA_VERSION,
                "warnings": "\n".join(warnings) or None,
                "ingested_at": datetime.now(UTC),
                "parser_state": json.dumps(state, separators=(",", ":")) if state else None,
            },
            expect_head=plan.head["batch_id"] if plan.head is not None else None,
        )
    except OSError as exc:
        batch.abort()
        if exc.errno in STORE_FULL_ERRNOS:
            raise store_write_error(store, shown, exc) from exc
        raise
    if not committed:
        return FileResult(
            shown,
            STATUS_SKIPPED,
            format=parser.name,
            bytes=size,
            message="committed meanwhile by another ingest",
        )
    for w in warnings:
        log.info("%s: %s", shown, w)
    message = plan.note
    if plan.start > 0:
        message = f"appended: bytes {plan.start}-{plan.end}, lines from {plan.first_line_no}"
    return FileResult(
        shown,
        STATUS_OK,
        format=parser.name,
        counts=counts,
        rows=dict(batch.rows),
        bytes=size,
        message=message,
        warnings=warnings,
        reject_reasons=reasons,
    )


MAX_REASONS = 20
"""Distinct reject reasons counted per file (reasons can quote values: keep it bounded)."""


def _count_reasons(reasons: dict[str, int], rejects: pl.DataFrame) -> None:
    """Add the reject reasons of one ``rejects`` frame to ``reasons`` (for the summary line)."""
    for reason, n in rejects.group_by("reason", maintain_order=True).len().iter_rows():
        key = str(reason)
        if key in reasons or len(reasons) < MAX_REASONS:
            reasons[key] = reasons.get(key, 0) + n


STORE_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
"""Store write failures that every later file would hit too (disk full, quota, read-only)."""


def store_write_error(store: Store, shown: str, exc: OSError) -> StoreError:
    """The error that stops an ingest whose store cannot be written (disk full and the like).

    Why: such a failure is not the input's or the parser's fault, and every later file would
    fail the same way, so the ingest stops with one clear message instead of a traceback per
    file; the batch was aborted, so the store is as it was before this file.
    """
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    return StoreError(
        f"{store.root}: cannot write the store ({reason}) while ingesting {shown}: "
        "nothing from this file was stored; free space and run the ingest again"
    )


def _state_of(
    parser: Parser, source: Source, run_id: str, rank: int | None
) -> dict[str, Any] | None:
    """The end state of a parse of ``source`` (rows discarded): resume state for old stores."""
    state: dict[str, Any] | None = None
    for chunk in parser.parse(source, run_id=run_id, rank=rank, resume=None):  # type: ignore[call-arg]
        if chunk.state is not None:
            state = chunk.state
    return state


def _fill_provenance(
    df: pl.DataFrame, table: str, run_id: str, path: str, fmt: str
) -> pl.DataFrame:
    """Add run_id / source_file / source_format / path columns a parser left out."""
    from parsers.schema import TABLES

    cols = set(TABLES[table].column_names)
    add: list[pl.Expr] = []
    if "run_id" not in df.columns:
        add.append(pl.lit(run_id).alias("run_id"))
    if "source_file" in cols and "source_file" not in df.columns:
        add.append(pl.lit(path).alias("source_file"))
    if "source_format" in cols and "source_format" not in df.columns:
        add.append(pl.lit(fmt).alias("source_format"))
    if table == "rejects" and "path" not in df.columns:
        add.append(pl.lit(path).alias("path"))
    return df.with_columns(add) if add else df


def _ingest_one(args: tuple[Path, Path, str, str | None, int | None, bool, bool]) -> FileResult:
    root, path, run_id, fmt, rank, follow, symlink_ok = args
    return ingest_file(
        Store.open(root),
        path,
        run_id=run_id,
        fmt=fmt,
        rank=rank,
        follow=follow,
        symlink_ok=symlink_ok,
    )


ProgressFn = Callable[[FileResult, int, int], None]


def ingest_paths(
    store: Store,
    paths: Sequence[Path],
    *,
    run_id: str,
    fmt: str | None = None,
    rank: int | None = None,
    jobs: int = 1,
    progress: ProgressFn | None = None,
    config: Path | None = None,
    follow: bool = False,
    build_catalog: bool = True,
    checked_config: rc.StoredConfig | None = None,
) -> list[FileResult]:
    """Ingest files and directories into one run; per-file outcomes in input order.

    Args:
        store: the target store.
        paths: files or folders (recursively).
        run_id: the run.
        fmt: force a parser; None sniffs each file.
        rank: rank for files that do not say.
        jobs: parse this many files in parallel processes.
        progress: called after each file with (result, files done, files total).
        config: the run's model/parallel config (TOML); without it, a ``manifest.json`` in an
            input folder is recorded as the run's config.
        follow: live logs (scheduled ingests): a final line without newline waits for the
            next ingest instead of being rejected as cut (see :func:`ingest_file`).
        build_catalog: write the DuckDB catalog if the store has none (a one-off per store
            of about 1-2 s; ``Store.connect`` builds it on first use anyway). The benchmarks
            time it apart from ingest.
        checked_config: the run's config, already read and validated by the caller (the CLI
            validates before it opens, and so perhaps creates, the store); it replaces
            reading ``config`` or a manifest here.

    Raises:
        ConfigError: ``config`` or the first manifest found is invalid; nothing is written.
    """
    validate_run_id(run_id)
    # Configs are read and validated before anything is written (ConfigError, a ValueError).
    if checked_config is not None:
        stored_cfg: rc.StoredConfig | None = checked_config
    elif config is not None:
        stored_cfg = rc.from_file(run_id, config)
    else:
        stored_cfg = rc.from_inputs(run_id, list(paths))
    with store.lock():  # a read-only store: one line (StoreReadOnlyError), nothing parsed
        pass
    files, results, links = discover_checked(paths)
    store.clean_staging()
    total = len(files)
    if jobs > 1 and total > 1:
        out: dict[int, FileResult] = {}
        # 'spawn', not fork: a forked child inherits the parent's threads' locks (Polars,
        # DuckDB, pytest's capture) and can hang; spawned workers start clean.
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futs = {
                pool.submit(_ingest_one, (store.root, f, run_id, fmt, rank, follow, f in links)): i
                for i, f in enumerate(files)
            }
            for n, fut in enumerate(as_completed(futs), 1):
                res = fut.result()
                out[futs[fut]] = res
                if progress:
                    progress(res, n, total)
        results.extend(out[i] for i in range(total))
    else:
        for n, f in enumerate(files, 1):
            res = ingest_file(
                store, f, run_id=run_id, fmt=fmt, rank=rank, follow=follow, symlink_ok=f in links
            )
            results.append(res)
            if progress:
                progress(res, n, total)
    keep = stored_cfg is not None and (config is not None or rc.load(store, run_id) is None)
    if stored_cfg is not None and keep and any(r.ok for r in results):
        rc.save(store, stored_cfg)
    if build_catalog:
        store.ensure_catalog()
    return results


def stderr_progress(total_bytes: int) -> ProgressFn:
    """A progress line on stderr for large inputs on a terminal (no-op otherwise)."""
    done_bytes = 0
    show = sys.stderr.isatty() and total_bytes > 64 * 1024 * 1024

    def report(res: FileResult, n: int, total: int) -> None:
        nonlocal done_bytes
        done_bytes += res.bytes
        if show:
            pct = 100.0 * done_bytes / max(total_bytes, 1)
            sys.stderr.write(f"\r[{n}/{total} files, {pct:5.1f}% of {total_bytes / 1e6:.0f} MB]")
            if n == total:
                sys.stderr.write("\n")
            sys.stderr.flush()

    return report


__all__ = [
    "DATA_TABLES",
    "FileResult",
    "StoreError",
    "discover",
    "discover_checked",
    "file_sha256",
    "ingest_file",
    "ingest_paths",
    "stderr_progress",
]
