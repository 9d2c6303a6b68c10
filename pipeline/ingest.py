"""Ingest: discover input files, parse each with its registered parser, commit to the store.

One file is one batch: parsed chunk by chunk into staged Parquet (bounded memory), then
committed atomically (see ``pipeline.store``). A file that fails leaves nothing behind and
does not stop the others.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from parsers._io import Source
from parsers.registry import REGISTRY, LineCounts, ParseError, load_all, sniff
from parsers.schema import DATA_TABLES, SCHEMA_VERSION
from pipeline import run_config as rc
from pipeline.store import Store, StoreError, batch_id_for, validate_run_id

log = logging.getLogger(__name__)

SIDECAR_SUFFIXES = (".source.txt", "manifest.json")
"""Files never parsed: provenance sidecars of samples, and run manifests (read as config)."""

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

    @property
    def ok(self) -> bool:
        """True if the file's content is in the store (now or from before)."""
        return self.status in {STATUS_OK, STATUS_SKIPPED}


def discover(paths: Iterable[Path]) -> tuple[list[Path], list[FileResult]]:
    """Expand files and directories (recursively) into input files, in a stable order.

    Hidden files and folders, sample sidecars and symlink loops are skipped. Missing paths are
    reported as error results instead of raising.
    """
    found: list[Path] = []
    errors: list[FileResult] = []
    seen: set[Path] = set()
    for p in paths:
        if not p.exists():
            errors.append(FileResult(str(p), STATUS_ERROR, message="no such file or directory"))
            continue
        if p.is_file():
            found.append(p)
            continue
        for dirpath, dirnames, filenames in os.walk(p, followlinks=False):
            real = Path(dirpath).resolve()
            if real in seen:
                dirnames[:] = []
                continue
            seen.add(real)
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name.startswith(".") or name.endswith(SIDECAR_SUFFIXES):
                    continue
                f = Path(dirpath) / name
                if f.is_file():
                    found.append(f)
    unique: dict[Path, Path] = {}
    for f in found:
        unique.setdefault(f.resolve(), f)
    return list(unique.values()), errors


def file_sha256(path: Path, start: int = 0, end: int | None = None) -> str:
    """SHA-256 of the bytes of ``path`` in ``[start, end)``."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        fh.seek(start)
        left = None if end is None else end - start
        while True:
            n = 8 * 1024 * 1024 if left is None else min(8 * 1024 * 1024, left)
            if n == 0:
                break
            data = fh.read(n)
            if not data:
                break
            h.update(data)
            if left is not None:
                left -= len(data)
    return h.hexdigest()


def ingest_file(
    store: Store,
    path: Path,
    *,
    run_id: str,
    fmt: str | None = None,
    rank: int | None = None,
) -> FileResult:
    """Parse one file and commit it to ``store`` as one batch.

    Args:
        store: the target store.
        path: input file.
        run_id: the run the file belongs to.
        fmt: parser name; None sniffs the format.
        rank: rank to assume when the file does not say (timeline formats).

    Returns:
        The outcome; errors are reported in it, never raised (except StoreError).
    """
    shown = str(path)
    try:
        size = path.stat().st_size
        with path.open("rb"):
            pass
    except PermissionError:
        return FileResult(shown, STATUS_ERROR, message="permission denied")
    except OSError as exc:
        return FileResult(shown, STATUS_ERROR, message=exc.strerror or str(exc))
    if size == 0:
        return FileResult(shown, STATUS_UNKNOWN, message="empty file", bytes=0)

    source = Source(path.resolve())
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

    sha = file_sha256(path)
    batch_id = batch_id_for(run_id, sha, 0, size, parser.name)
    if store.is_committed(run_id, batch_id) or store.has_content(run_id, sha):
        return FileResult(shown, STATUS_SKIPPED, format=parser.name, bytes=size)

    batch = store.begin(run_id, batch_id)
    counts = LineCounts()
    warnings: list[str] = []
    try:
        for chunk in parser.parse(source, run_id=run_id, rank=rank):
            counts += chunk.counts
            warnings.extend(chunk.warnings)
            for table, df in chunk.tables.items():
                batch.write(
                    table, _fill_provenance(df, table, run_id, str(source.path), parser.name)
                )
    except ParseError as exc:
        batch.abort()
        return FileResult(
            shown,
            STATUS_ERROR,
            format=parser.name,
            bytes=size,
            message=exc.message + (f" (line {exc.line})" if exc.line is not None else ""),
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
    if not counts.balanced:
        batch.abort()
        return FileResult(
            shown,
            STATUS_ERROR,
            format=parser.name,
            bytes=size,
            message=f"line accounting does not balance: {counts} (parser bug)",
        )
    committed = batch.commit(
        {
            "path": str(source.path),
            "sha256": sha,
            "bytes": size,
            "byte_start": 0,
            "byte_end": size,
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
        }
    )
    if not committed:
        return FileResult(shown, STATUS_SKIPPED, format=parser.name, bytes=size)
    for w in warnings:
        log.info("%s: %s", shown, w)
    return FileResult(
        shown,
        STATUS_OK,
        format=parser.name,
        counts=counts,
        rows=dict(batch.rows),
        bytes=size,
        warnings=warnings,
    )


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


def _ingest_one(args: tuple[Path, Path, str, str | None, int | None]) -> FileResult:
    root, path, run_id, fmt, rank = args
    return ingest_file(Store.open(root), path, run_id=run_id, fmt=fmt, rank=rank)


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
    """
    validate_run_id(run_id)
    files, results = discover(paths)
    store.clean_staging()
    total = len(files)
    if jobs > 1 and total > 1:
        out: dict[int, FileResult] = {}
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futs = {
                pool.submit(_ingest_one, (store.root, f, run_id, fmt, rank)): i
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
            res = ingest_file(store, f, run_id=run_id, fmt=fmt, rank=rank)
            results.append(res)
            if progress:
                progress(res, n, total)
    if any(r.ok for r in results):
        if config is not None:
            rc.save(
                store,
                rc.StoredConfig(run_id, rc.read_config_file(config), f"config:{config.resolve()}"),
            )
        elif rc.load(store, run_id) is None:
            rc.record_from_inputs(store, run_id, list(paths))
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
    "file_sha256",
    "ingest_file",
    "ingest_paths",
    "stderr_progress",
]
