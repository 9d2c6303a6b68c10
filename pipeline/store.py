"""The store: Parquet per table and run, a commit log, and a DuckDB catalog of views.

Layout::

    <store>/STORE.json                          store format and schema version
    <store>/tables/<table>/<run_id>/<batch>.parquet
    <store>/tables/<table>/_schema/_schema.parquet   zero rows: gives every view its columns
    <store>/catalog.duckdb                      one view per table (opens in the duckdb CLI;
                                                built by commscope.pipeline.catalog)
    <store>/.staging/<batch>.<pid>/             batches being written
    <store>/.lock                               serialises commits between processes
    <store>/marts/<mart>/<run_id>/<generation>.parquet        one derive's marts (a generation)
    <store>/model_inputs/<relation>/<run_id>/<generation>.parquet   its run_config, predicted_*
    <store>/derived/<run_id>.parquet            the run's published generation (one row)

Guarantees:

* **Atomic visibility.** A batch (everything one file contributed) becomes visible only when its
  row in ``ingested_files`` is written, by one ``os.replace``. Every view filters data files to
  committed batches, so a killed ingest leaves nothing half-visible.
* **Exactly once.** A batch id is derived from (run, content hash, byte range); the commit checks
  the log under an exclusive file lock, so concurrent or repeated ingests of the same bytes add
  nothing twice, and a batch that continues a batch another ingest continued meanwhile, or whose
  content another ingest stored meanwhile, is dropped. Content identity across paths (renames,
  rotation, compression) is decided in ``commscope.pipeline.ingest``. A re-run after a crash rewrites the
  same file names, so orphans are replaced.
* **A failed commit stores nothing.** If the commit-log row cannot be written (disk full, no
  inodes), the batch's data files are moved back out of ``tables/`` before the error is raised.
* **Per-file cost.** Each run's commit log is indexed in memory (:class:`RunIndex`) and updated
  by reading only the log files written since, so ingesting a file does not re-read the log.
* **Atomic derive.** A derive writes every mart and model input of a run as a new generation
  beside the published one, then publishes it by one ``os.replace`` of ``derived/<run_id>.
  parquet`` (which also records the commit-log snapshot it was derived from). Views and readers
  see only published generations, so a killed derive leaves the previous complete set visible.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from commscope.parsers.schema import SCHEMA_VERSION, TABLES, conform, empty_frame
from commscope.pipeline.catalog import (  # noqa: F401 (re-exported: the store's public names)
    CATALOG_LAYOUT,
    CATALOG_NAME,
    CATALOG_STORAGE_VERSION,
    Catalog,
)
from commscope.pipeline.store_base import (  # noqa: F401 (re-exported)
    DATA_DIRS,
    DERIVED_SCHEMA_FILE,
    READ_ONLY_ERRNOS,
    CatalogBusyError,
    StoreError,
    StoreReadOnlyError,
    write_error,
)

log = logging.getLogger(__name__)

STORE_FORMAT = 1
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _version_tuple(text: str) -> tuple[int, ...] | None:
    """``"1.2.0"`` as ``(1, 2, 0)``; None if it is not a dotted version of integers."""
    parts = text.split(".")
    if not parts or not all(p.isdigit() and len(p) <= 9 for p in parts):
        return None
    return tuple(int(p) for p in parts)


def validate_run_id(run_id: str) -> str:
    """Return ``run_id`` if it is a safe single path component, else raise StoreError."""
    if not _RUN_ID.match(run_id) or run_id in {".", ".."}:
        raise StoreError(
            f"invalid run id {run_id!r}: use letters, digits, '.', '_' or '-' "
            "(at most 128, starting with a letter or digit)"
        )
    return run_id


def batch_id_for(run_id: str, sha256: str, byte_start: int, byte_end: int, fmt: str) -> str:
    """Deterministic id of the batch that ingests these bytes into this run."""
    key = f"{run_id}\0{sha256}\0{byte_start}\0{byte_end}\0{fmt}".encode()
    return hashlib.sha256(key).hexdigest()[:24]


@dataclass(frozen=True)
class Snapshot:
    """The committed batches of one run at one moment: what a derive reads.

    Why: a derive must read every table from the same set of commits (a batch committed while
    it copies tables would otherwise show in some tables and not others), and the published
    marts record which set they were computed from, so staleness is a comparison of keys.
    """

    run_id: str
    batch_ids: tuple[str, ...]

    @property
    def key(self) -> str:
        """A short fingerprint of the batch set (order-independent)."""
        h = hashlib.sha256("\n".join(sorted(self.batch_ids)).encode())
        return h.hexdigest()[:24]


DERIVED_COLUMNS: dict[str, pl.DataType] = {
    "run_id": pl.Utf8(),
    "generation": pl.Utf8(),
    "derived_at": pl.Datetime("us", "UTC"),
    "snapshot": pl.Utf8(),
    "batches": pl.Int64(),
    "config_source": pl.Utf8(),
}
"""Columns of a run's published-derive row (``derived/<run_id>.parquet``)."""

LEGACY_GENERATION = "legacy-"
"""Prefix of the generation given to marts found in the pre-generation layout."""


def new_generation() -> str:
    """A generation id unique across runs and processes: ``g<time>-<pid>-<random>``.

    The pid lets a later derive remove generations left by a derive that was killed.
    """
    return f"g{time.time_ns():x}-{os.getpid()}-{secrets.token_hex(4)}"


def _generation_pid(generation: str) -> int | None:
    parts = generation.split("-")
    if len(parts) == 3 and parts[0].startswith("g") and parts[1].isdigit():
        return int(parts[1])
    return None


@dataclass(frozen=True)
class Store:
    """A commscope store rooted at ``root``."""

    root: Path

    @property
    def tables_dir(self) -> Path:
        """Folder of the Parquet tables."""
        return self.root / "tables"

    @property
    def catalog_path(self) -> Path:
        """The DuckDB catalog file."""
        return self.root / CATALOG_NAME

    # ------------------------------------------------------------------ setup

    @classmethod
    def open(cls, root: Path, *, create: bool = True) -> Store:
        """Open (and by default create) the store at ``root``."""
        root = root.expanduser().resolve()
        store = cls(root)
        meta = root / "STORE.json"
        if not meta.exists():
            if not create:
                raise StoreError(f"{root}: no commscope store here (run `commscope ingest` first)")
            try:
                root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"{root}: cannot create store: {exc.strerror}") from exc
            with store.lock():
                if not meta.exists():
                    store._init_layout()
        store._check_version()
        return store

    def _init_layout(self) -> None:
        for name in TABLES:
            schema_dir = self.tables_dir / name / "_schema"
            schema_dir.mkdir(parents=True, exist_ok=True)
            _write_atomic(conform(empty_frame(name), name), schema_dir / "_schema.parquet")
        (self.root / ".staging").mkdir(exist_ok=True)
        _write_text_atomic(
            self.root / "STORE.json",
            json.dumps({"store_format": STORE_FORMAT, "schema_version": SCHEMA_VERSION}, indent=2),
        )

    def _check_version(self) -> None:
        """Refuse a store this code cannot read; upgrade one of an older minor version.

        A store written by a newer schema (same major, higher minor or patch) is refused, never
        rewritten down: its files may hold columns or meanings this code does not know.
        """
        meta_path = self.root / "STORE.json"
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise StoreError(f"{meta_path}: cannot read the store's metadata: {exc}") from exc
        found = str(meta.get("schema_version", "0")) if isinstance(meta, dict) else "?"
        have, want = _version_tuple(found), _version_tuple(SCHEMA_VERSION)
        if not isinstance(meta, dict) or have is None or want is None:
            raise StoreError(f"{meta_path}: bad schema_version {found!r}")
        if have[0] != want[0]:
            raise StoreError(
                f"{self.root}: store schema {found} is not readable by "
                f"schema {SCHEMA_VERSION} (major version differs)"
            )
        if have > want:
            raise StoreError(
                f"{self.root}: store schema {found} was written by a newer commscope "
                f"(this one has schema {SCHEMA_VERSION}); upgrade commscope to use this store"
            )
        # Minor versions add columns: refresh the zero-row schema files so views show them.
        if have != want:
            with self.lock():
                for name in TABLES:
                    d = self.tables_dir / name / "_schema"
                    d.mkdir(parents=True, exist_ok=True)
                    _write_atomic(conform(empty_frame(name), name), d / "_schema.parquet")
                meta["schema_version"] = SCHEMA_VERSION
                _write_text_atomic(self.root / "STORE.json", json.dumps(meta, indent=2))

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the store's exclusive lock (between processes) for the block.

        Only writers lock, so a store that cannot be written fails here with one line:
        :class:`StoreReadOnlyError` ("store is read-only: <path>") for a read-only file system
        or a folder this process may not write, :class:`StoreError` for any other failure to
        create the lock file (never an ``OSError`` traceback).
        """
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fh = (self.root / ".lock").open("a")
        except OSError as exc:
            if exc.errno in READ_ONLY_ERRNOS:
                raise StoreReadOnlyError(f"store is read-only: {self.root}") from None
            raise StoreError(f"{self.root}: cannot lock the store: {exc.strerror or exc}") from None
        with fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    # ------------------------------------------------------------------ commit log

    def committed(self, run_id: str | None = None) -> pl.DataFrame:
        """The commit log (``ingested_files``), optionally for one run."""
        base = self.tables_dir / "ingested_files"
        if run_id is not None:
            dirs = [base / run_id]
        else:
            dirs = [d for d in base.glob("*") if d.is_dir() and d.name != "_schema"]
        files = [f for d in dirs for f in sorted(d.glob("*.parquet"))]
        if not files:
            return empty_frame("ingested_files")
        # Rows written by older schema versions lack newer columns: they read as null.
        frames = [empty_frame("ingested_files"), *(_commit_rows(f) for f in files)]
        return pl.concat(frames, how="diagonal_relaxed")

    def is_committed(self, run_id: str, batch_id: str) -> bool:
        """True if this batch of this run is already in the commit log."""
        return (self.tables_dir / "ingested_files" / run_id / f"{batch_id}.parquet").exists()

    def index(self, run_id: str, *, refresh: bool = True) -> RunIndex:
        """This run's commit-log index, brought up to date (only new log files are read).

        Why: every ingested file looks up its path's head and its content in the commit log;
        re-reading the whole log per file made a run of n files cost O(n^2). ``refresh=False``
        skips the folder listing when the caller refreshed it moments ago.
        """
        key = (str(self.root), run_id)
        with _INDEX_LOCK:
            idx = _INDEXES.get(key)
            if idx is None:
                idx = _INDEXES[key] = RunIndex(self.tables_dir / "ingested_files" / run_id)
                refresh = True
        if refresh:
            idx.refresh()
        return idx

    def has_content(self, run_id: str, sha256: str) -> bool:
        """True if a batch from byte 0 with this content hash is committed in this run."""
        return any(r.get("byte_start") in (0, None) for r in self.index(run_id).by_sha(sha256))

    # ------------------------------------------------------------------ batches

    def begin(self, run_id: str, batch_id: str) -> Batch:
        """Start writing a batch into a private staging folder."""
        validate_run_id(run_id)
        staging = self.root / ".staging" / f"{batch_id}.{os.getpid()}"
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        return Batch(self, run_id, batch_id, staging)

    def runs(self) -> list[str]:
        """Runs with at least one committed batch."""
        base = self.tables_dir / "ingested_files"
        if not base.exists():
            return []
        return sorted(
            p.name
            for p in base.iterdir()
            if p.is_dir() and p.name != "_schema" and any(p.iterdir())
        )

    def clean_staging(self) -> int:
        """Remove staging folders of processes that no longer exist; return how many."""
        removed = 0
        staging = self.root / ".staging"
        if not staging.exists():
            return 0
        for d in staging.iterdir():
            pid = d.suffix.lstrip(".")
            if pid.isdigit() and not _pid_alive(int(pid)):
                shutil.rmtree(d, ignore_errors=True)
                removed += 1
        return removed

    # ------------------------------------------------------------------ catalog

    @property
    def catalog(self) -> Catalog:
        """The store's DuckDB catalog (views over what is committed and published)."""
        return Catalog(self)

    def table_glob(self, table: str) -> str:
        """Glob of every Parquet file of a table (committed or not; views filter)."""
        return str(self.tables_dir / table / "*" / "*.parquet")

    def connect(self, *, read_only: bool = True) -> duckdb.DuckDBPyConnection:
        """The catalog opened (built if needed): :meth:`Catalog.connect`."""
        return self.catalog.connect(read_only=read_only)

    def connect_computed(self, names: Iterable[str]) -> duckdb.DuckDBPyConnection:
        """Intermediates ``names`` computed once in memory: :meth:`Catalog.connect_computed`."""
        return self.catalog.connect_computed(names)

    def write_session(self) -> contextlib.AbstractContextManager[duckdb.DuckDBPyConnection]:
        """The catalog read-write, held: :meth:`Catalog.write_session`."""
        return self.catalog.write_session()

    def ensure_catalog(self) -> None:
        """Write the catalog if it is missing or stale: :meth:`Catalog.ensure_catalog`."""
        self.catalog.ensure_catalog()

    def refresh_catalog(self) -> None:
        """Rebuild the catalog file: :meth:`Catalog.refresh_catalog`."""
        self.catalog.refresh_catalog()

    def catalog_current(self) -> bool:
        """True if the catalog is current: :meth:`Catalog.catalog_current`."""
        return self.catalog.catalog_current()

    def create_views(self, con: duckdb.DuckDBPyConnection) -> None:
        """The canonical tables' views on ``con``: :meth:`Catalog.create_views`."""
        self.catalog.create_views(con)

    def create_all_views(self, con: duckdb.DuckDBPyConnection, *, strict: bool = False) -> None:
        """Every catalog view on ``con``: :meth:`Catalog.create_all_views`."""
        self.catalog.create_all_views(con, strict=strict)

    def create_model_input_views(self, con: duckdb.DuckDBPyConnection) -> None:
        """``run_config`` and ``predicted_*`` on ``con``: :meth:`Catalog.create_model_input_views`."""
        self.catalog.create_model_input_views(con)

    def confine(self, con: duckdb.DuckDBPyConnection) -> None:
        """Limit ``con`` to the store's data folders: :meth:`Catalog.confine`."""
        self.catalog.confine(con)

    def marts_dir(self) -> Path:
        """Folder of materialised marts: ``marts/<mart>/<run_id>/<generation>.parquet``."""
        return self.root / "marts"

    def model_inputs_dir(self) -> Path:
        """Folder of each derived run's SQL inputs:
        ``model_inputs/<relation>/<run_id>/<generation>.parquet``.

        ``run_config`` and the analytical model's ``predicted_*`` tables, written by derive so
        the catalog can expose them beside the marts that were computed from them.
        """
        return self.root / "model_inputs"

    def advice_path(self, run_id: str) -> Path:
        """Where ``commscope advise --run`` stores a run's advice (``advice/<run_id>.json``;
        the report's "What the model suggests" section reads it)."""
        return self.root / "advice" / f"{validate_run_id(run_id)}.json"

    def derived_dir(self) -> Path:
        """Folder of the published derive of each run: ``derived/<run_id>.parquet``."""
        return self.root / "derived"

    @staticmethod
    def _relations(base: Path) -> list[str]:
        """Folders under ``base`` holding a published-layout or legacy Parquet file."""
        if not base.is_dir():
            return []
        return sorted(
            m.name
            for m in base.iterdir()
            if m.is_dir()
            and not m.name.startswith((".", "_"))
            and (any(m.glob("*/*.parquet")) or any(m.glob("*.parquet")))
        )

    def model_inputs(self) -> list[str]:
        """Input relations (run_config, predicted_*) with at least one run written."""
        return self._relations(self.model_inputs_dir())

    def materialised_marts(self) -> list[str]:
        """Marts with at least one materialised run."""
        return self._relations(self.marts_dir())

    def derived(self, run_id: str) -> dict[str, object] | None:
        """The run's published derive (generation, snapshot key, time), or None."""
        path = self.derived_dir() / f"{validate_run_id(run_id)}.parquet"
        try:
            df = pl.read_parquet(path)
        except FileNotFoundError:
            return None
        return df.row(0, named=True) if df.height else None

    def snapshot(self, run_id: str) -> Snapshot:
        """The run's committed batch ids now: the names of its commit-log files.

        Why the names and not the rows: a batch's log file is ``<batch_id>.parquet``, written
        once by an atomic rename (``is_committed`` relies on the same), so listing the folder
        gives the same set as reading every row; at 1024 ranks reading the 1,024 files took
        about a second of each derive.
        """
        folder = self.tables_dir / "ingested_files" / validate_run_id(run_id)
        try:
            names = [
                e.name[: -len(".parquet")]
                for e in os.scandir(folder)
                if e.name.endswith(".parquet") and not e.name.startswith(".") and e.is_file()
            ]
        except FileNotFoundError:
            names = []
        return Snapshot(run_id, tuple(sorted(names)))

    def snapshot_files(self, table: str, snap: Snapshot) -> list[str]:
        """The Parquet files of ``table`` that belong to ``snap``'s batches, schema file first.

        Only files of batches in the snapshot: a batch committed later is not read even if its
        files are already in place. The zero-row schema file gives every column.
        """
        files = [str(self.tables_dir / table / "_schema" / "_schema.parquet")]
        d = self.tables_dir / table / snap.run_id
        if d.is_dir():
            present = {p.stem for p in d.glob("*.parquet")}
            files += [str(d / f"{b}.parquet") for b in snap.batch_ids if b in present]
        return files

    def _published_files(self, base: Path, run_id: str) -> dict[str, Path]:
        """Relation name -> the run's Parquet file of its published generation.

        A run derived before generations existed has ``<base>/<name>/<run_id>.parquet``.
        """
        validate_run_id(run_id)
        if not base.is_dir():
            return {}
        row = self.derived(run_id)
        out: dict[str, Path] = {}
        for d in sorted(base.iterdir()):
            if not d.is_dir() or d.name.startswith((".", "_")):
                continue
            f = (
                d / run_id / f"{row['generation']}.parquet"
                if row is not None
                else d / f"{run_id}.parquet"
            )
            if f.is_file():
                out[d.name] = f
        return out

    def mart_files(self, run_id: str) -> dict[str, Path]:
        """Mart name -> the run's materialised mart file (published generation only)."""
        return self._published_files(self.marts_dir(), run_id)

    def model_input_files(self, run_id: str) -> dict[str, Path]:
        """Input relation -> the run's file of the published generation."""
        return self._published_files(self.model_inputs_dir(), run_id)

    def generation_path(self, base: Path, name: str, run_id: str, generation: str) -> Path:
        """Where a derive writes relation ``name`` of ``run_id`` for ``generation``."""
        return base / name / validate_run_id(run_id) / f"{generation}.parquet"

    def prepare_derived(self) -> None:
        """Make the published-derive layout ready (call under :meth:`lock`).

        Creates ``derived/`` with its zero-row schema file, and moves marts and model inputs
        of the pre-generation layout (``<base>/<name>/<run_id>.parquet``) into a generation
        of their own, published for runs that have none (so existing stores stay readable).
        """
        ddir = self.derived_dir()
        schema = ddir / DERIVED_SCHEMA_FILE
        if not schema.exists():
            ddir.mkdir(parents=True, exist_ok=True)
            _write_atomic(pl.DataFrame(schema=DERIVED_COLUMNS).to_arrow(), schema)
        legacy: dict[str, list[Path]] = {}
        for base in (self.marts_dir(), self.model_inputs_dir()):
            if not base.is_dir():
                continue
            for d in base.iterdir():
                if d.is_dir() and not d.name.startswith((".", "_")):
                    for f in d.glob("*.parquet"):
                        if not f.name.startswith(".") and _RUN_ID.match(f.stem):
                            legacy.setdefault(f.stem, []).append(f)
        for run_id, files in sorted(legacy.items()):
            if self.derived(run_id) is not None:
                for f in files:  # superseded by a published generation
                    f.unlink(missing_ok=True)
                continue
            gen = LEGACY_GENERATION + hashlib.sha256(run_id.encode()).hexdigest()[:16]
            for f in files:
                dest = f.parent / run_id / f"{gen}.parquet"
                dest.parent.mkdir(parents=True, exist_ok=True)
                f.replace(dest)
            self.publish_derived(run_id, gen, None, None)

    def publish_derived(
        self, run_id: str, generation: str, snap: Snapshot | None, config_source: str | None
    ) -> None:
        """Make ``generation`` the run's visible marts by one atomic rename, then drop the
        generation it replaced and those of derives that died (call under :meth:`lock`)."""
        previous = self.derived(run_id)
        row = {
            "run_id": run_id,
            "generation": generation,
            "derived_at": datetime.now(UTC),
            "snapshot": snap.key if snap is not None else None,
            "batches": len(snap.batch_ids) if snap is not None else None,
            "config_source": config_source,
        }
        self.derived_dir().mkdir(parents=True, exist_ok=True)
        df = pl.DataFrame([row], schema=DERIVED_COLUMNS)
        _write_atomic(df.to_arrow(), self.derived_dir() / f"{run_id}.parquet")
        drop = {str(previous["generation"])} if previous is not None else set()
        self.remove_generations(run_id, keep=generation, also=drop)

    def remove_generations(self, run_id: str, *, keep: str, also: set[str]) -> None:
        """Remove the run's generation files other than ``keep`` that are in ``also`` or were
        written by a process that no longer runs (a killed derive), and their temp files."""
        for base in (self.marts_dir(), self.model_inputs_dir()):
            if not base.is_dir():
                continue
            for f in base.glob(f"*/{run_id}/*"):
                stem = f.name.lstrip(".").split(".")[0]
                if stem == keep:
                    continue
                pid = _generation_pid(stem)
                if stem in also or (pid is not None and not _pid_alive(pid)):
                    with contextlib.suppress(OSError):
                        f.unlink()


class Batch:
    """The Parquet files of one ingest batch, staged until :meth:`commit`."""

    def __init__(self, store: Store, run_id: str, batch_id: str, staging: Path) -> None:
        self.store = store
        self.run_id = run_id
        self.batch_id = batch_id
        self.staging = staging
        self._writers: dict[str, pq.ParquetWriter] = {}
        self.rows: dict[str, int] = {}

    def write(self, table: str, df: pl.DataFrame) -> None:
        """Append rows to a table of this batch (one Parquet row group per call)."""
        if df.is_empty():
            return
        arrow = conform(df, table)
        writer = self._writers.get(table)
        if writer is None:
            writer = pq.ParquetWriter(
                str(self.staging / f"{table}.parquet"), arrow.schema, compression="zstd"
            )
            self._writers[table] = writer
        writer.write_table(arrow)
        self.rows[table] = self.rows.get(table, 0) + arrow.num_rows

    def abort(self) -> None:
        """Drop everything staged."""
        for w in self._writers.values():
            with contextlib.suppress(Exception):
                w.close()
        shutil.rmtree(self.staging, ignore_errors=True)

    def commit(
        self,
        log_row: dict[str, object],
        *,
        seen: int | None = None,
        conflicts: Callable[[dict[str, Any]], bool] | None = None,
    ) -> bool:
        """Publish the batch; return False (and drop it) if it was already committed.

        Data files are moved into place first, then the commit-log row is written with one
        atomic rename: that rename is the moment the batch becomes visible. If that write
        fails (disk full, no inodes left), the data files are taken back out of ``tables/``
        before the error propagates, so the store is as it was.

        Args:
            log_row: the commit-log row (``ingested_at`` is set here, under the lock, so that
                the order of commits of one path is the order of their timestamps).
            seen: how many rows this run's :class:`RunIndex` held when the batch was planned.
            conflicts: called under the lock on each row committed since ``seen``; True
                drops this batch (another ingest stored the same content meanwhile, so two
                concurrent ingests of a growing or copied log never store overlapping ranges).
        """
        for w in self._writers.values():
            w.close()
        self._writers.clear()
        with self.store.lock():
            if self.store.is_committed(self.run_id, self.batch_id):
                shutil.rmtree(self.staging, ignore_errors=True)
                return False
            if seen is not None and conflicts is not None:
                newer = self.store.index(self.run_id).since(seen)
                if any(conflicts(r) for r in newer):
                    shutil.rmtree(self.staging, ignore_errors=True)
                    return False
            log_row = {**log_row, "ingested_at": datetime.now(UTC)}
            sha = log_row.get("sha256")
            if (
                log_row.get("byte_start") == 0
                and sha
                and self.store.has_content(self.run_id, str(sha))
            ):
                shutil.rmtree(self.staging, ignore_errors=True)
                return False
            moved: list[tuple[Path, Path]] = []
            try:
                for f in sorted(self.staging.glob("*.parquet")):
                    dest_dir = self.store.tables_dir / f.stem / self.run_id
                    dest_dir.mkdir(parents=True, exist_ok=True)
                    _fsync_file(f)
                    dest = dest_dir / f"{self.batch_id}.parquet"
                    f.replace(dest)
                    moved.append((dest, f))
                    _fsync_dir(dest_dir)
                log = pl.DataFrame([{**log_row, "run_id": self.run_id, "batch_id": self.batch_id}])
                dest_dir = self.store.tables_dir / "ingested_files" / self.run_id
                dest_dir.mkdir(parents=True, exist_ok=True)
                _write_atomic(conform(log, "ingested_files"), dest_dir / f"{self.batch_id}.parquet")
            except BaseException:
                # Not committed: no data file of this batch may stay in tables/ (the log row's
                # temp file is removed by _write_atomic).
                for dest, back in moved:
                    try:
                        dest.replace(back)
                    except OSError:
                        dest.unlink(missing_ok=True)
                raise
            shutil.rmtree(self.staging, ignore_errors=True)
        return True


class RunIndex:
    """The commit log of one run, indexed by path, content hash and head fingerprint.

    Updated incrementally: :meth:`refresh` lists the run's commit-log folder and reads only
    the files it has not seen (each log file is written once, by an atomic rename). Rows are
    kept in the order this process learnt of them, so ``rows[n:]`` are the commits seen
    after a moment when ``len(rows)`` was ``n`` (the commit check uses that).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._names: set[str] = set()
        self.rows: list[dict[str, Any]] = []
        self._by_path: dict[str, dict[str, Any]] = {}
        self._by_sha: dict[str, list[dict[str, Any]]] = {}
        self._by_head: dict[tuple[int, str], list[dict[str, Any]]] = {}
        self._prev: set[str] = set()
        self.head_lens: set[int] = set()
        self.legacy: list[dict[str, Any]] = []

    def refresh(self) -> None:
        """Read the commit-log files written since the last refresh (by any process)."""
        with self._lock:
            try:
                names = {
                    e.name
                    for e in os.scandir(self.folder)
                    if e.name.endswith(".parquet") and not e.name.startswith(".")
                }
            except FileNotFoundError:
                names = set()
            if not self._names <= names:  # log files vanished: the store was replaced
                self.__init__(self.folder)  # type: ignore[misc]
            for name in sorted(names - self._names):
                try:
                    frame = _commit_rows(self.folder / name)
                except FileNotFoundError:
                    continue
                self._names.add(name)
                for row in frame.to_dicts():
                    self._add(row)

    def _add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        path = str(row.get("path"))
        old = self._by_path.get(path)
        if old is None or _order(row) >= _order(old):
            self._by_path[path] = row
        if row.get("sha256"):
            self._by_sha.setdefault(str(row["sha256"]), []).append(row)
        if row.get("prev_batch_id"):
            self._prev.add(str(row["prev_batch_id"]))
        if row.get("head_sha256") and row.get("head_bytes") is not None:
            key = (int(row["head_bytes"]), str(row["head_sha256"]))
            self._by_head.setdefault(key, []).append(row)
            self.head_lens.add(key[0])
        else:
            self.legacy.append(row)

    def path_head(self, path: str) -> dict[str, Any] | None:
        """The latest batch of ``path`` (by commit time, then byte_end), or None."""
        with self._lock:
            return self._by_path.get(path)

    def by_sha(self, sha256: str) -> list[dict[str, Any]]:
        """Batches whose content hash ([0, byte_end)) is ``sha256``."""
        with self._lock:
            return list(self._by_sha.get(sha256, ()))

    def by_head(self, head_bytes: int, head_sha256: str) -> list[dict[str, Any]]:
        """Batches whose content starts with these ``head_bytes`` bytes (by their SHA-256)."""
        with self._lock:
            return list(self._by_head.get((head_bytes, head_sha256), ()))

    def continued(self, batch_id: str) -> bool:
        """True if a committed batch continues from ``batch_id``."""
        with self._lock:
            return batch_id in self._prev

    def fresh(self, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` as its commit-log file holds it now (re-read only if the file changed).

        Why: log files are written once, but a repair or an older tool may rewrite one in
        place; the batch an ingest continues from must be read as it is on disk.
        """
        try:
            frame = _commit_rows(self.folder / f"{row['batch_id']}.parquet")
        except FileNotFoundError:
            return row
        rows = frame.filter(pl.col("batch_id") == row["batch_id"]).to_dicts()
        return rows[0] if rows else row

    def since(self, n: int) -> list[dict[str, Any]]:
        """Rows learnt after the index held ``n`` rows."""
        with self._lock:
            return self.rows[n:]


def _order(row: dict[str, Any]) -> tuple[datetime, int]:
    at = row.get("ingested_at") or datetime.min.replace(tzinfo=UTC)
    return (at, int(row.get("byte_end") or 0))


_INDEXES: dict[tuple[str, str], RunIndex] = {}
"""Commit-log indexes of this process, by (store root, run id)."""
_INDEX_LOCK = threading.Lock()

COMMIT_LOG_READS = 0
"""Commit-log files read from disk by this process (a work counter for tests)."""

_COMMIT_ROWS: dict[tuple[str, int, int], pl.DataFrame] = {}
"""Commit-log files already read in this process, by (path, mtime_ns, size)."""


def _commit_rows(path: Path) -> pl.DataFrame:
    """The rows of one commit-log file, read once per process.

    Why: every ingested file looks at its run's commit log (its head, its content hash, the
    commit check), so without this a run of n files reads O(n^2) Parquet files. A log file is
    written once by an atomic rename and never changed, so (path, mtime, size) identifies it.
    """
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    rows = _COMMIT_ROWS.get(key)
    if rows is None:
        global COMMIT_LOG_READS
        COMMIT_LOG_READS += 1
        rows = _COMMIT_ROWS[key] = pl.read_parquet(path)
    return rows


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        _fsync_file(path)


def _write_atomic(table: pa.Table, dest: Path) -> None:
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(table, str(tmp), compression="zstd")
        _fsync_file(tmp)
        tmp.replace(dest)
    except BaseException:
        with contextlib.suppress(OSError):  # no orphan temp file (disk full, interrupt)
            tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(dest.parent)


def _write_text_atomic(dest: Path, text: str) -> None:
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(dest)
