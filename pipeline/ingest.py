"""Ingest: discover input files, parse each with its registered parser, commit to the store.

One file is one batch: parsed chunk by chunk into staged Parquet (bounded memory), then
committed atomically (see ``commscope.pipeline.store``). A file that fails leaves nothing behind and
does not stop the others.

Exactly once, by content (schema 1.3). A batch records the SHA-256 of the content it covers,
``[0, byte_end)`` of the decompressed stream, and of its first :data:`HEAD_BYTES` bytes. A
file to ingest is hashed in one streaming pass; the committed batch of the run (of any path)
whose content this file's content starts with is found by the head fingerprint and checked by
the full prefix hash. The file then adds only what lies beyond that batch: a renamed file, a
rotated copy (plain or compressed), a ``.gz`` recompressed with more content or with a member
appended, all continue where the stored content ends (resumable parsers, with their saved
state), or are skipped when nothing is new (other parsers skip identical content and read
changed content whole). Live logs: with ``follow`` (``ingest --follow`` and every ``serve``
cycle) a final line without newline waits for the next ingest; without it, the cut line is
rejected and the batch records where its complete lines ended (``resume_end``) and the parser
state there, so once the line is complete it is read from its start and nothing is stored
twice (the earlier reject is the cut line's only other trace).

Policy for files that change otherwise. Content versions accumulate; the store is the
archive of what was logged:

- a truncated file (shrank, e.g. ``copytruncate``) and a replaced file (different content at
  the same path) are read as new content; what was stored from their earlier content stays;
- a deleted file's rows stay;
- a file whose content was already stored (under any name, compressed or not) adds nothing.

To drop a run, delete its folders ``tables/*/<run_id>/`` (the commit log
``tables/ingested_files/<run_id>/`` included), ``runs/<run_id>/``, ``marts/*/<run_id>/`` and
``model_inputs/*/<run_id>/`` and its derive pointer ``derived/<run_id>.parquet``, then
re-ingest what should stay.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import lzma
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import polars as pl
import zstandard

from commscope.parsers._io import Source
from commscope.parsers.registry import (
    REGISTRY,
    LineCounts,
    ParseError,
    Parser,
    is_resumable,
    load_all,
    sniff,
)
from commscope.parsers.schema import DATA_TABLES, SCHEMA_VERSION
from commscope.pipeline import run_config as rc
from commscope.pipeline.fs_policy import check_file, not_regular, symlink_problem
from commscope.pipeline.store import (
    Batch,
    RunIndex,
    Store,
    StoreError,
    batch_id_for,
    validate_run_id,
)

log = logging.getLogger(__name__)

SIDECAR_SUFFIXES = (".source.txt", "manifest.json", "truth.json", "ds_comms_logger.json")
"""Files never parsed in a folder walk: provenance sidecars of samples, run manifests (read as
config), the synthetic generator's ground truth (``truth.json``) and the DeepSpeed config
snippet ``commscope collect`` writes."""

TRUTH_DIR = "truth"
"""Folder name skipped in a folder walk: the generator's ground-truth Parquet
(``commscope.synthetic.generator`` writes ``truth.json`` and ``truth/``)."""


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
    policy of :mod:`commscope.pipeline.fs_policy`. Missing paths, named devices/FIFOs/sockets and links
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
                problem = symlink_problem(f, tree)
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


def file_sha256(path: Path) -> str:
    """SHA-256 of the raw (still compressed) bytes of ``path``.

    Why: commit-log rows written before schema 1.3 hashed compressed files this way, and a
    file whose content cannot be read still needs a batch id.
    """
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while data := fh.read(8 * 1024 * 1024):
            h.update(data)
    return h.hexdigest()


def _size_or_zero(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


HEAD_BYTES = 4096
"""Bytes of (decompressed) content fingerprinted per batch (``head_sha256``): a new file is
compared in full only with the batches whose content starts like it."""

_READ = 1024 * 1024


@dataclass(frozen=True)
class _OffsetSource(Source):
    """A :class:`Source` that can start at an offset of a compressed file too.

    Why: a rotated, compressed copy of a log continues where the plain log's last batch ended;
    a decompressed stream cannot seek, so the bytes before the offset are read and dropped.
    """

    def open(self) -> BinaryIO:
        """The decompressed stream positioned at ``start_offset``."""
        if not self.start_offset or self.compression is None:
            return super().open()
        fh = Source(self.path, identity=self.identity).open()
        left = self.start_offset
        while left > 0:
            data = fh.read(min(left, _READ))
            if not data:
                break
            left -= len(data)
        return fh


class _PrefixHasher:
    """SHA-256 of a stream's prefixes: at given cuts and at the end of its last complete line."""

    def __init__(self, cuts: Iterable[int]) -> None:
        self._h = hashlib.sha256()
        self.pos = 0
        self._cuts = sorted({c for c in cuts if c >= 0}, reverse=True)
        self.at: dict[int, str] = {}
        self.before: dict[int, bytes] = {}
        self.line_end = 0
        self.line_sha = self._h.hexdigest()

    def add_cuts(self, cuts: Iterable[int]) -> None:
        """More cuts (ahead of the current position)."""
        self._cuts = sorted({*self._cuts, *(c for c in cuts if c >= self.pos)}, reverse=True)

    def update(self, data: bytes) -> None:
        """Hash ``data``, taking digests at the cuts and the last newline inside it."""
        end = self.pos + len(data)
        marks: list[int] = []
        while self._cuts and self._cuts[-1] <= end:
            marks.append(self._cuts.pop())
        nl = data.rfind(b"\n")
        if nl >= 0:
            marks.append(self.pos + nl + 1)
        i = 0
        view = memoryview(data)
        for m in sorted(set(marks)):
            k = m - self.pos
            if k > i:
                self._h.update(view[i:k])
                i = k
            digest = self._h.hexdigest()
            if nl >= 0 and m == self.pos + nl + 1:
                self.line_end, self.line_sha = m, digest
            self.at[m] = digest
            self.before[m] = bytes(view[k - 1 : k]) if k > 0 else b""
        self._h.update(view[i:])
        self.pos = end

    def sha(self) -> str:
        """Digest of everything hashed."""
        return self._h.hexdigest()


def _open_content(path: Path, identity: tuple[int, int] | None = None) -> BinaryIO:
    """The file's content stream (decompressed), opened under the file policy: it must be the
    very file that was checked (``identity``, see ``commscope.pipeline.fs_policy``)."""
    return Source(path, identity=identity).open()


def _head_digests(first: bytes, lengths: Iterable[int]) -> dict[int, str]:
    """SHA-256 of ``first[:n]`` for each ``n`` (one incremental pass)."""
    h = hashlib.sha256()
    out: dict[int, str] = {}
    pos = 0
    for n in sorted({n for n in lengths if 0 <= n <= len(first)}):
        h.update(first[pos:n])
        pos = n
        out[n] = h.hexdigest()
    return out


@dataclass
class _Scan:
    """One streaming pass over a file's (decompressed) content."""

    length: int
    sha: str
    line_end: int
    line_sha: str
    first: bytes
    at: dict[int, str]
    before: dict[int, bytes]
    candidates: list[dict[str, Any]]

    def head(self, end: int) -> tuple[int, str]:
        """(head_bytes, head_sha256) of the content range [0, end)."""
        n = min(HEAD_BYTES, end)
        return n, hashlib.sha256(self.first[:n]).hexdigest()


def _scan(
    path: Path,
    index: RunIndex,
    same_path: str,
    identity: tuple[int, int] | None = None,
) -> _Scan:
    """Hash ``path``'s content once and find the committed batches it may continue.

    The first :data:`HEAD_BYTES` are fingerprinted at every head length the run's index
    holds; the batches whose fingerprint matches (and batches of the same path written before
    schema 1.3, which have none) become candidates, and the hash of the content up to each
    candidate's ``byte_end`` is taken in the same pass so :func:`_plan` can verify them.
    """
    hasher = _PrefixHasher(())
    first = bytearray()
    candidates: list[dict[str, Any]] = []
    with _open_content(path, identity) as fh:
        while len(first) < HEAD_BYTES:
            piece = fh.read(HEAD_BYTES - len(first))
            if not piece:
                break
            first += piece
        heads = _head_digests(bytes(first), index.head_lens)
        for n, digest in heads.items():
            candidates.extend(index.by_head(n, digest))
        candidates.extend(r for r in index.legacy if r.get("path") == same_path)
        hasher.add_cuts(int(r.get("byte_end") or 0) for r in candidates)
        hasher.update(bytes(first))
        while True:
            data = fh.read(_READ)
            if not data:
                break
            hasher.update(data)
    return _Scan(
        length=hasher.pos,
        sha=hasher.sha(),
        line_end=hasher.line_end,
        line_sha=hasher.line_sha,
        first=bytes(first),
        at=hasher.at,
        before=hasher.before,
        candidates=candidates,
    )


def _prefix_sha(path: Path, n: int, identity: tuple[int, int] | None = None) -> str:
    """SHA-256 of the first ``n`` bytes of ``path``'s content ('' if it is shorter)."""
    h = hashlib.sha256()
    left = n
    with _open_content(path, identity) as fh:
        while left > 0:
            data = fh.read(min(left, _READ))
            if not data:
                return ""
            h.update(data)
            left -= len(data)
    return h.hexdigest()


@dataclass
class _Plan:
    """What part of a file's content an ingest reads, and why."""

    start: int = 0
    end: int = 0
    line_end: int = 0
    first_line_no: int = 1
    sha: str = ""
    head_bytes: int = 0
    head_sha: str = ""
    prev: dict[str, Any] | None = None
    resume: dict[str, Any] | None = None
    rebuild_state: bool = False
    note: str | None = None
    skip: str | None = None
    seen: int = 0
    unreadable: bool = False


def _plan(
    store: Store,
    path: Path,
    parser: Parser,
    run_id: str,
    *,
    plain: bool,
    follow: bool,
    identity: tuple[int, int] | None = None,
) -> _Plan:
    """Decide the content range to ingest, from what this run's commit log already holds.

    Content identity, not paths: the batch this file continues is the committed batch (of
    any path) with the longest ``[0, byte_end)`` whose hash equals this file's content up to
    there (found by the head fingerprint, see :func:`_scan`). So a renamed, rotated or
    compressed copy of a stored log adds only what is new. A resumable parser continues at
    that batch's ``resume_end`` with its parser state; other parsers skip identical content
    and read changed content whole. A batch that ended in a cut line is continued from the
    start of that line once the line is complete. With ``follow`` (plain files), a final
    line without newline waits for the next ingest. See the module docstring for the policy
    on truncated, replaced and deleted files.
    """
    index = store.index(run_id)
    plan = _Plan(seen=len(index.rows))
    compressed = not plain
    if compressed and index.legacy:
        raw = file_sha256(path)  # rows before schema 1.3 hashed the compressed bytes
        if any(r.get("sha256") == raw for r in index.legacy):
            plan.skip = ""
            return plan
    scan = _scan(path, index, str(path), identity)
    resumable = is_resumable(parser)
    live = follow and plain and resumable
    end = scan.line_end if live else scan.length
    verified = [
        r
        for r in scan.candidates
        if r.get("format") == parser.name
        and int(r.get("byte_end") or 0) <= scan.length
        and scan.at.get(int(r.get("byte_end") or 0)) == r.get("sha256")
    ]
    best = max(verified, key=_row_order, default=None)
    if best is not None:
        best = index.fresh(best)
    same = index.path_head(str(path))
    if best is not None and resumable:
        be = int(best.get("byte_end") or 0)
        resume_end = best.get("resume_end")
        if resume_end is None and be > 0 and scan.before.get(be) != b"\n":
            best = None  # a batch before 1.3 that ended in a cut line: cannot continue it
        else:
            re_ = be if resume_end is None else int(resume_end)
            if end <= be or (re_ < be and scan.line_end <= re_):
                plan.skip = "no new complete line since the last ingest" if scan.length > be else ""
                if plan.skip == "" and str(best.get("path")) != str(path):
                    plan.skip = f"same content as {best.get('path')}"
                return plan
            cut_before = re_ < be
            plan.start, plan.end, plan.prev = re_, end, best
            plan.first_line_no = (
                int(best.get("first_line_no") or 1)
                + int(best.get("lines_total") or 0)
                - (1 if cut_before else 0)
            )
            state = best.get("parser_state")
            plan.resume = json.loads(state) if state else None
            plan.rebuild_state = state is None and re_ > 0
    elif best is not None:
        if int(best.get("byte_start") or 0) == 0 and int(best.get("byte_end") or 0) == end:
            plan.skip = (
                "" if str(best.get("path")) == str(path) else f"same content as {best.get('path')}"
            )
            return plan
        best = None
    if plan.prev is None:
        if live and end == 0 and scan.length > 0:
            plan.skip = "no complete line yet"
            return plan
        plan.start, plan.end = 0, end
        if same is not None:
            prev_end = int(same.get("byte_end") or 0)
            if not resumable:
                plan.note = "file changed since its last ingest: ingested as new content"
            elif scan.length < prev_end:
                plan.note = (
                    f"file shrank below the {prev_end} bytes stored: ingested as new content"
                )
            else:
                plan.note = "file rewritten since its last ingest: ingested as new content"
    plan.line_end = min(max(scan.line_end, plan.start), plan.end) if resumable else plan.end
    plan.sha = scan.sha if plan.end == scan.length else scan.line_sha
    plan.head_bytes, plan.head_sha = scan.head(plan.end)
    return plan


def _row_order(row: dict[str, Any]) -> tuple[int, datetime]:
    at = row.get("ingested_at") or datetime.min.replace(tzinfo=UTC)
    return int(row.get("byte_end") or 0), at


def _conflict_check(
    plan: _Plan, path: Path, identity: tuple[int, int] | None = None
) -> Callable[[dict[str, Any]], bool]:
    """Whether a batch committed since ``plan`` was made stores what this batch would.

    A batch continuing the same batch, or one from byte 0 whose content this file's content
    starts with (or, for the same path, that covers it), makes this batch a duplicate: two
    concurrent ingests of a growing or copied log never store overlapping ranges.
    """
    prev_id = plan.prev["batch_id"] if plan.prev is not None else None

    def conflicts(row: dict[str, Any]) -> bool:
        if prev_id is not None:
            return row.get("prev_batch_id") == prev_id
        if int(row.get("byte_start") or 0) != 0 or row.get("head_sha256") is None:
            return False
        n = int(row.get("head_bytes") or 0)
        if n > plan.end:
            return False
        mine = plan.head_sha if n == plan.head_bytes else _prefix_sha(path, n, identity)
        if mine != row.get("head_sha256"):
            return False
        be = int(row.get("byte_end") or 0)
        if be > plan.end:
            return str(row.get("path")) == str(path)
        return _prefix_sha(path, be, identity) == row.get("sha256")

    return conflicts


class _Done(Exception):
    """A step of :func:`ingest_file` decided the file's outcome early (refused, skipped, failed):
    the one :class:`FileResult` it carries is returned as it is."""

    def __init__(self, result: FileResult) -> None:
        super().__init__(result.status)
        self.result = result


@dataclass
class _Parsed:
    """What the parse of a file's planned range put into its (uncommitted) batch."""

    batch: Batch
    counts: LineCounts
    warnings: list[str]
    reasons: dict[str, int]
    state: dict[str, Any] | None
    resume_end: int


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
    nothing stored is read or counted again. The steps, each of which may end with the file's
    outcome: check the file and pick its parser (:func:`_open_file`), plan the range
    (:func:`_planned`), parse it into a batch (:func:`_parse_batch`), check what was read
    (:func:`_check_read`), commit (:func:`_commit`).

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
            (:mod:`commscope.pipeline.fs_policy`, rule 5).

    Returns:
        The outcome; errors are reported in it, never raised (except StoreError).
    """
    shown = str(path)
    try:
        source, parser, size = _open_file(path, shown, fmt=fmt, symlink_ok=symlink_ok)
        done = _Outcome(shown, parser.name, size)
        plan = _planned(store, source, parser, run_id, follow=follow, done=done)
        parsed = _parse_batch(store, source, parser, plan, run_id, rank, done)
        _check_read(source, plan, parsed, done)
        _commit(store, source, parser, plan, parsed, done)
    except _Done as outcome:
        return outcome.result
    for w in parsed.warnings:
        log.info("%s: %s", shown, w)
    message = plan.note
    if plan.prev is not None:
        message = f"appended: bytes {plan.start}-{plan.end}, lines from {plan.first_line_no}"
        if str(plan.prev.get("path")) != str(source.path):
            message += f" (continues {plan.prev.get('path')})"
    return FileResult(
        shown,
        STATUS_OK,
        format=parser.name,
        counts=parsed.counts,
        rows=dict(parsed.batch.rows),
        bytes=size,
        message=message,
        warnings=parsed.warnings,
        reject_reasons=parsed.reasons,
    )


@dataclass(frozen=True)
class _Outcome:
    """Builds the early outcomes of one file once its parser is known."""

    shown: str
    fmt: str
    size: int

    def error(self, message: str) -> _Done:
        """The file failed: nothing stored, ``message`` says why."""
        return _Done(
            FileResult(self.shown, STATUS_ERROR, format=self.fmt, bytes=self.size, message=message)
        )

    def skipped(self, message: str | None = None) -> _Done:
        """The file's content is in the store already (or waits for a complete line)."""
        return _Done(
            FileResult(
                self.shown, STATUS_SKIPPED, format=self.fmt, bytes=self.size, message=message
            )
        )


def _open_file(
    path: Path, shown: str, *, fmt: str | None, symlink_ok: bool
) -> tuple[Source, Parser, int]:
    """The file, checked by the file policy and opened as a :class:`Source`, its parser (named
    or sniffed) and its size; raises :class:`_Done` for a refused, empty or unknown file."""
    # The policy check (fs_policy): a regular file, opened once without blocking; every
    # later open must find this very file (Source.identity).
    checked = check_file(path, symlink_ok=symlink_ok)
    if isinstance(checked, str):
        raise _Done(FileResult(shown, STATUS_ERROR, message=checked))
    size = checked.size
    if size == 0:
        raise _Done(FileResult(shown, STATUS_UNKNOWN, message="empty file", bytes=0))
    source = Source(checked.real, identity=checked.identity)
    load_all()
    if fmt is not None:
        if fmt not in REGISTRY:
            raise _Done(
                FileResult(
                    shown,
                    STATUS_ERROR,
                    message=f"unknown format {fmt!r} (known: {', '.join(REGISTRY)})",
                )
            )
        return source, REGISTRY[fmt], size
    found = sniff(source.head(), path)
    if found is None:
        raise _Done(
            FileResult(
                shown,
                STATUS_UNKNOWN,
                bytes=size,
                message="format not recognised (not a log or trace commscope reads; "
                "use --format to force one)",
            )
        )
    return source, found, size


def _planned(
    store: Store,
    source: Source,
    parser: Parser,
    run_id: str,
    *,
    follow: bool,
    done: _Outcome,
) -> _Plan:
    """The range to ingest (:func:`_plan`); raises :class:`_Done` when there is nothing new or
    the file was swapped. Content that fails to read here is planned whole, for the parser to
    report why."""
    try:
        plan = _plan(
            store,
            source.path,
            parser,
            run_id,
            plain=source.compression is None,
            follow=follow,
            identity=source.identity,
        )
    except ParseError as exc:  # swapped for a symlink, another file or a non-regular file
        raise done.error(exc.message) from exc
    except (OSError, EOFError, lzma.LZMAError, zstandard.ZstdError):
        # Unreadable content (a truncated or bomb stream): the parser reports why, later.
        plan = _Plan(
            end=done.size, line_end=done.size, sha=file_sha256(source.path), unreadable=True
        )
    if plan.skip is not None:
        raise done.skipped(plan.skip or None)
    return plan


def _parse_batch(
    store: Store,
    source: Source,
    parser: Parser,
    plan: _Plan,
    run_id: str,
    rank: int | None,
    done: _Outcome,
) -> _Parsed:
    """Parse the planned range into a new batch (written, not committed); raises
    :class:`_Done` when the batch is stored already or the parse fails (batch aborted)."""
    batch_id = batch_id_for(run_id, plan.sha, plan.start, plan.end, parser.name)
    stored = store.index(run_id, refresh=False).by_sha(plan.sha)  # refreshed by _plan
    if store.is_committed(run_id, batch_id) or (
        plan.start == 0 and any(r.get("byte_start") in (0, None) for r in stored)
    ):
        raise done.skipped()
    resumable = is_resumable(parser)
    # A resumable parse of a range whose last line is cut runs in two parts: the complete
    # lines (whose end state is stored, so the next ingest continues from there once the line
    # is complete) and the cut line alone (a reject).
    cut_tail = resumable and plan.line_end < plan.end
    parts: list[tuple[int, int]] = []
    if not cut_tail or plan.line_end > plan.start:
        parts.append((plan.start, plan.line_end if cut_tail else plan.end))
    if cut_tail:
        parts.append((plan.line_end, plan.end))

    batch = store.begin(run_id, batch_id)
    counts = LineCounts()
    warnings: list[str] = []
    reasons: dict[str, int] = {}
    state: dict[str, Any] | None = plan.resume
    try:
        if plan.rebuild_state:  # stored by a commscope without parser state: re-derive it
            state = _state_of(
                parser,
                _OffsetSource(source.path, 0, plan.start, identity=source.identity),
                run_id,
                rank,
            )
            warnings.append("parser state rebuilt from the stored prefix (older store)")
        kept_state = state  # the state at the end of the complete lines
        line_no = plan.first_line_no
        for lo, hi in parts:
            part = _OffsetSource(
                source.path, lo, None if plan.unreadable else hi, line_no, source.identity
            )
            kwargs: dict[str, Any] = {"resume": state} if resumable else {}
            part_lines = 0
            for chunk in parser.parse(part, run_id=run_id, rank=rank, **kwargs):
                counts += chunk.counts
                part_lines += chunk.counts.total
                warnings.extend(chunk.warnings)
                if chunk.state is not None:
                    state = chunk.state
                for table, df in chunk.tables.items():
                    batch.write(
                        table, _fill_provenance(df, table, run_id, str(source.path), parser.name)
                    )
                    if table == "rejects" and df.height and "reason" in df.columns:
                        _count_reasons(reasons, df)
            line_no += part_lines
            if not (cut_tail and hi == plan.end):
                kept_state = state
        state = kept_state
    except ParseError as exc:
        batch.abort()
        raise done.error(
            exc.message + (f" (line {exc.line})" if exc.line is not None else "")
        ) from exc
    except OSError as exc:
        batch.abort()
        if exc.errno in STORE_FULL_ERRNOS:
            raise store_write_error(store, done.shown, exc) from exc
        raise done.error(f"read failed: {exc.strerror or exc}") from exc
    except Exception as exc:  # a parser bug must not stop the other files
        batch.abort()
        log.exception("parser %s failed on %s", parser.name, done.shown)
        raise done.error(
            f"internal error in parser {parser.name}: {type(exc).__name__}: {exc}"
        ) from exc
    resume_end = plan.line_end if cut_tail else plan.end
    return _Parsed(batch, counts, warnings, reasons, state, resume_end)


def _check_read(source: Source, plan: _Plan, parsed: _Parsed, done: _Outcome) -> None:
    """Refuse (batch aborted) a read that cannot be trusted: the file shrank or its content
    changed while read, or the line accounting does not balance."""
    reason = None
    if source.compression is None and _size_or_zero(source.path) < plan.end:
        reason = "file shrank while it was read: nothing stored (ingest it again)"
    elif plan.unreadable:  # its content failed to read before, but not in the parser now
        reason = "content changed while it was read: nothing stored (ingest it again)"
    elif not parsed.counts.balanced:
        reason = f"line accounting does not balance: {parsed.counts} (parser bug)"
    if reason is not None:
        parsed.batch.abort()
        raise done.error(reason)


def _commit(
    store: Store,
    source: Source,
    parser: Parser,
    plan: _Plan,
    parsed: _Parsed,
    done: _Outcome,
) -> None:
    """Commit the batch with its commit-log row; raises :class:`_Done` when another ingest
    committed the same content meanwhile, StoreError when the store cannot be written."""
    counts, batch, state = parsed.counts, parsed.batch, parsed.state
    try:
        committed = batch.commit(
            {
                "path": str(source.path),
                "sha256": plan.sha,
                "bytes": done.size,
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
                "warnings": "\n".join(parsed.warnings) or None,
                "ingested_at": datetime.now(UTC),
                "parser_state": json.dumps(state, separators=(",", ":")) if state else None,
                "head_bytes": plan.head_bytes if plan.head_sha else None,
                "head_sha256": plan.head_sha or None,
                "resume_end": parsed.resume_end,
                "prev_batch_id": plan.prev["batch_id"] if plan.prev is not None else None,
            },
            seen=plan.seen,
            conflicts=_conflict_check(plan, source.path, source.identity),
        )
    except OSError as exc:
        batch.abort()
        if exc.errno in STORE_FULL_ERRNOS:
            raise store_write_error(store, done.shown, exc) from exc
        raise
    if not committed:
        raise done.skipped("committed meanwhile by another ingest")


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
    from commscope.parsers.schema import TABLES

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


def stderr_progress(
    total_bytes: int,
    *,
    stream: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    min_bytes: int = 64 * 1024 * 1024,
) -> ProgressFn:
    """A progress line for large inputs on a terminal (no-op otherwise).

    After each file: files done, share of the bytes, rate (MB/s since the start) and ETA (the
    bytes left at that rate), rewritten in place; a newline after the last file.
    """
    out = stream if stream is not None else sys.stderr
    show = out.isatty() and total_bytes > min_bytes
    start = clock()
    done_bytes = 0

    def report(res: FileResult, n: int, total: int) -> None:
        nonlocal done_bytes
        done_bytes += res.bytes
        if not show:
            return
        pct = 100.0 * done_bytes / max(total_bytes, 1)
        elapsed = max(clock() - start, 1e-9)
        rate = done_bytes / elapsed
        left = max(total_bytes - done_bytes, 0)
        eta = f"ETA {left / rate:.0f} s" if rate > 0 and n < total else f"{elapsed:.1f} s"
        out.write(
            f"\r[{n}/{total} files, {pct:5.1f}% of {total_bytes / 1e6:.0f} MB, "
            f"{rate / 1e6:.1f} MB/s, {eta}]"
        )
        if n == total:
            out.write("\n")
        out.flush()

    return report


def ingest_totals(results: Sequence[FileResult], wall_s: float) -> str:
    """One line of totals for an ingest: files, lines (and their accounting), rows, MB, MB/s."""
    lines = sum(r.counts.total for r in results)
    parsed = sum(r.counts.parsed for r in results)
    ignored = sum(r.counts.ignored for r in results)
    rejected = sum(r.counts.rejected for r in results)
    rows = sum(sum(r.rows.values()) for r in results)
    mb = sum(r.bytes for r in results) / 1e6
    ok = sum(1 for r in results if r.ok)
    rate = mb / wall_s if wall_s > 0 else 0.0
    size = f"{mb:,.1f} MB" if mb >= 1 else f"{mb * 1e3:,.1f} kB"
    return (
        f"total: {len(results)} files ({ok} ok), {lines:,} lines ({parsed:,} parsed, "
        f"{ignored:,} ignored, {rejected:,} rejected), {rows:,} rows, {size} in "
        f"{wall_s:.1f} s ({rate:,.2f} MB/s)"
    )


__all__ = [
    "DATA_TABLES",
    "FileResult",
    "StoreError",
    "discover",
    "discover_checked",
    "file_sha256",
    "ingest_file",
    "ingest_paths",
    "ingest_totals",
    "stderr_progress",
]
