"""The store's DuckDB catalog (``<store>/catalog.duckdb``): one view per canonical table (its
committed rows), per staging and intermediate SQL module (live) and per published mart and
model input, each commented; built, extended, opened and confined here.

Why apart from :mod:`commscope.pipeline.store`: the store owns the commits (batches, the
commit log, published derives); the catalog is a derived, rebuildable view of them. The store
calls the catalog (``Store.connect``, ``Store.ensure_catalog``, ...); the catalog reads the
store's folders through the :class:`~commscope.pipeline.store.Store` it is given and imports
nothing from the store module (shared errors and folder names: :mod:`commscope.pipeline.
store_base`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from commscope.parsers.schema import SCHEMA_VERSION, TABLES
from commscope.pipeline.sql_names import is_sql_name, quote_ident, quote_literal
from commscope.pipeline.store_base import (
    DATA_DIRS,
    DERIVED_SCHEMA_FILE,
    CatalogBusyError,
    StoreError,
    StoreReadOnlyError,
    write_error,
)

if TYPE_CHECKING:
    from commscope.pipeline.store import Store

log = logging.getLogger(__name__)

CATALOG_NAME = "catalog.duckdb"
CATALOG_STORAGE_VERSION = "v1.5.0"
"""DuckDB storage version the catalog file is written in: the oldest that the duckdb CLI on the
package registry (``duckdb-cli`` 1.5.6; no 2.x there) reads, so ``duckdb catalog.duckdb`` opens
the store. duckdb 2.0.0 writes its own (newer) storage version by default, which 1.5.6 refuses
("version number 69 ... can only read versions between 64 and 68"). The catalog holds only
views, macros and comments (the data stays in Parquet), so nothing is lost by the older format."""
CATALOG_LAYOUT = 2
"""What the catalog holds beyond the SQL and schema (part of its signature: a bump rebuilds every
store's catalog). 2: marts' comments, intermediate views' notes, storage version
CATALOG_STORAGE_VERSION."""
MART_VIEW_NOTE = (
    "Materialised: the rows each run's last `commscope derive` published (sql/marts/<name>.sql "
    "computes them)."
)
"""Appended to a mart view's comment in the catalog: its rows are derive's files, not live."""
INTERMEDIATE_VIEW_NOTE = (
    "Live view over the store (every run). A deep chain: a query on it plans for minutes in the "
    "duckdb CLI; `commscope query` computes the chain once."
)
"""Appended to an intermediate view's comment in the catalog."""
CATALOG_LOCK = ".catalog.lock"
"""Held (flock, exclusive) by a ``query --write`` session and while the catalog is rebuilt."""


@dataclass(frozen=True)
class Catalog:
    """The DuckDB catalog of ``store``."""

    store: Store

    @property
    def catalog_path(self) -> Path:
        """The DuckDB catalog file."""
        return self.store.root / CATALOG_NAME

    def view_sql(self, table: str) -> str:
        """The CREATE VIEW statement that exposes a table's committed rows."""
        src = (
            f"read_parquet({quote_literal(self.store.table_glob(table))}, union_by_name = true, "
            "filename = true)"
        )
        if table == "ingested_files":
            return (
                f"CREATE OR REPLACE VIEW ingested_files AS SELECT * EXCLUDE (filename) "
                f"FROM {src} WHERE parse_filename(filename, true) <> '_schema'"
            )
        return (
            f"CREATE OR REPLACE VIEW {quote_ident(table)} AS SELECT * EXCLUDE (filename) "
            f"FROM {src} WHERE parse_filename(filename, true) IN "
            "(SELECT batch_id FROM ingested_files)"
        )

    def signature(self) -> str:
        """Fingerprint of what the catalog must contain (path, schema, SQL, marts)."""
        from commscope.pipeline.sql_modules import SQL_DIR

        h = hashlib.sha256(
            f"{self.store.root}\0{SCHEMA_VERSION}\0{CATALOG_STORAGE_VERSION}\0{CATALOG_LAYOUT}".encode()
        )
        for f in sorted(SQL_DIR.rglob("*.sql")):
            h.update(f.read_bytes())
        h.update("\0".join(self.store.materialised_marts()).encode())
        h.update(("\1" + "\0".join(self.store.model_inputs())).encode())
        # a store with marts in the pre-generation layout needs its catalog rebuilt (migrated)
        h.update(b"\2" if (self.store.derived_dir() / DERIVED_SCHEMA_FILE).exists() else b"\3")
        return h.hexdigest()[:16]

    def _catalog_base(self) -> str:
        """The part of :meth:`signature` that only a full rebuild can follow: path, schema,
        storage version, layout, SQL and store layout (not the marts and model inputs)."""
        from commscope.pipeline.sql_modules import SQL_DIR

        h = hashlib.sha256(
            f"{self.store.root}\0{SCHEMA_VERSION}\0{CATALOG_STORAGE_VERSION}\0{CATALOG_LAYOUT}".encode()
        )
        for f in sorted(SQL_DIR.rglob("*.sql")):
            h.update(f.read_bytes())
        h.update(b"\2" if (self.store.derived_dir() / DERIVED_SCHEMA_FILE).exists() else b"\3")
        return h.hexdigest()[:16]

    def _write_meta(self, con: duckdb.DuckDBPyConnection) -> None:
        """Record what the catalog was built for: the signature and, for :meth:`_extend_catalog`,
        its base and the marts and model inputs it has views of."""
        con.execute(
            "CREATE OR REPLACE TABLE _commscope_meta AS SELECT ? AS signature, ? AS base, "
            "? AS marts, ? AS inputs",
            [
                self.signature(),
                self._catalog_base(),
                json.dumps(self.store.materialised_marts()),
                json.dumps(self.store.model_inputs()),
            ],
        )

    def create_all_views(self, con: duckdb.DuckDBPyConnection, *, strict: bool = False) -> None:
        """Canonical tables, live staging/intermediate SQL, and materialised marts.

        A broken SQL module is logged and skipped (it must not stop ingest or queries over the
        canonical tables); with ``strict`` it raises instead (SqlModuleError), for a caller
        that builds inside one transaction and falls back to this lenient build.
        """
        from commscope.pipeline.sql_modules import SqlModuleError, apply, discover

        self.create_views(con)
        self.create_model_input_views(con)
        try:
            modules = tuple(m for m in discover() if m.layer != "marts")
        except SqlModuleError as exc:
            if strict:
                raise
            log.warning("SQL modules not loaded into the catalog: %s", exc)
            modules = ()
        apply(
            con,
            modules,
            on_error=None if strict else lambda exc: log.warning("catalog: skipped %s", exc),
            layer_notes={"intermediate": INTERMEDIATE_VIEW_NOTE},
        )
        from commscope.pipeline.sql_modules import comment_view

        for mart in self.store.materialised_marts():
            if self._create_published_view(con, self.store.marts_dir(), mart):
                cols = {r[0] for r in con.execute(f"DESCRIBE {quote_ident(mart)}").fetchall()}
                comment_view(con, mart, note=MART_VIEW_NOTE, columns=cols)

    def _create_published_view(self, con: duckdb.DuckDBPyConnection, base: Path, name: str) -> bool:
        """A view over the published generation of every run of ``base/name``.

        Like the canonical views filter on committed batches, it keeps only files whose
        generation a run's ``derived/<run_id>.parquet`` names, so a derive that was killed
        (its files written, not published) is never seen. A store not yet migrated (no
        ``derived/``) is read in the pre-generation layout.
        """
        if not _usable_name(name, base):
            return False
        ident = quote_ident(name)
        derived = self.store.derived_dir() / DERIVED_SCHEMA_FILE
        if not derived.exists():
            src = quote_literal(str(base / name / "*.parquet"))
            con.execute(
                f"CREATE OR REPLACE VIEW {ident} AS SELECT * FROM "
                f"read_parquet({src}, union_by_name = true)"
            )
            return True
        src = quote_literal(str(base / name / "*" / "*.parquet"))
        gens = quote_literal(str(self.store.derived_dir() / "*.parquet"))
        con.execute(
            f"CREATE OR REPLACE VIEW {ident} AS SELECT * EXCLUDE (filename) FROM "
            f"read_parquet({src}, union_by_name = true, filename = true) "
            f"WHERE parse_filename(filename, true) IN "
            f"(SELECT generation FROM read_parquet({gens}))"
        )
        return True

    def create_model_input_views(self, con: duckdb.DuckDBPyConnection) -> None:
        """``run_config`` and ``predicted_*`` as the SQL modules expect them.

        A relation that derive wrote for some run is a view over its Parquet files; one that no
        run has yet is an empty table with the full column types, so the views reading it bind.
        """
        from commscope.pipeline.model_inputs import empty_inputs, register_tables

        written = set(self.store.model_inputs())
        empty = {k: v for k, v in empty_inputs().items() if k not in written}
        register_tables(con, empty)
        for name in sorted(written):
            self._create_published_view(con, self.store.model_inputs_dir(), name)

    def create_views(self, con: duckdb.DuckDBPyConnection) -> None:
        """Create a view per canonical table on ``con`` (commit log first)."""
        con.execute(self.view_sql("ingested_files"))
        for name in TABLES:
            if name != "ingested_files":
                con.execute(self.view_sql(name))
        for name, spec in TABLES.items():
            view = quote_ident(name)
            text = quote_literal(spec.description + " Grain: " + spec.grain)
            con.execute(f"COMMENT ON VIEW {view} IS {text}")
            for col in spec.columns:
                con.execute(
                    f"COMMENT ON COLUMN {view}.{quote_ident(col.name)} "
                    f"IS {quote_literal(col.description)}"
                )

    @contextlib.contextmanager
    def catalog_lock(self) -> Iterator[None]:
        """Hold the catalog's lock (exclusive, between processes) or raise CatalogBusyError.

        Held by a ``query --write`` session for its whole life and by a catalog rebuild: a
        rebuild replaces ``catalog.duckdb`` by a new file, and a writer still open on the old
        one would then write its log (``catalog.duckdb.wal``) against the wrong file and lose
        what it created. Never waits: the holder may be an interactive session.
        """
        self.store.root.mkdir(parents=True, exist_ok=True)
        with (self.store.root / CATALOG_LOCK).open("a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                raise CatalogBusyError(
                    f"{self.catalog_path}: the catalog is open in a `commscope query --write` "
                    "session or being rebuilt; try again when it ends"
                ) from exc
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def confine(self, con: duckdb.DuckDBPyConnection) -> None:
        """Limit ``con``'s file access to the store's data folders (:data:`DATA_DIRS`).

        Why: the catalog rebuild and a read-only query need to read the Parquet under
        ``tables/``, ``marts/`` and ``model_inputs/`` and nothing else; ``STORE.json``, the
        commit lock and any file outside the store stay out of reach of what they run. The
        database file ``con`` was opened on is not external access and stays usable.
        """
        dirs = ", ".join(quote_literal(str(self.store.root / d) + "/") for d in DATA_DIRS)
        con.execute(f"SET allowed_directories = [{dirs}]")
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET enable_external_access = false")

    def refresh_catalog(self) -> None:
        """(Re)write the DuckDB catalog file with a view per table.

        The views read Parquet by absolute glob, so the catalog stays current as batches
        are committed; it is rewritten only when missing or when the store moved. Raises
        CatalogBusyError (and leaves the catalog alone) while a writer has it open.
        """
        with self.store.lock(), self.catalog_lock():
            if self._catalog_held_by_writer():
                raise CatalogBusyError(
                    f"{self.catalog_path}: the catalog is open read-write by another program "
                    "(e.g. the duckdb CLI); close it and try again"
                )
            tmp = self.store.root / f".{CATALOG_NAME}.{os.getpid()}.tmp"
            try:
                tmp.unlink(missing_ok=True)
                self.store.prepare_derived()
                con = duckdb.connect(
                    str(tmp), config={"storage_compatibility_version": CATALOG_STORAGE_VERSION}
                )
                try:
                    # Binding each view re-reads the footers of the Parquet files under it;
                    # with the cache every footer is read once for the whole catalog (2.4 s ->
                    # 1.6 s for a 44-file store).
                    con.execute("SET parquet_metadata_cache = true")
                    # Defence in depth: whatever the rebuild runs reads only the store's data.
                    self.confine(con)
                    self._build_catalog(con)
                finally:
                    con.close()
                tmp.replace(self.catalog_path)
            except (OSError, duckdb.IOException) as exc:
                raise write_error(self.catalog_path, exc) from exc
            finally:
                # no orphan on any exit path (disk full, read-only store, interrupt)
                for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
                    with contextlib.suppress(OSError):
                        leftover.unlink(missing_ok=True)

    def _extend_catalog(self) -> bool:
        """Add to the catalog the views of marts and model inputs written since it was built;
        False (nothing changed) when only a full rebuild fits.

        Why: the first derive of a store adds every mart, and rebuilding the whole catalog for
        it (every canonical view, SQL module and comment: about 2.5 s, most of a small run's
        derive) redid what had not changed. The views added are exactly those
        :meth:`create_all_views` would create for them (a model input's empty placeholder
        table becomes its view), in one transaction. A full rebuild is needed, and done by the
        caller, when the catalog's base (path, schema, SQL, layout) changed, a mart or input
        went away, the catalog predates this record, or it cannot be opened for writing (a
        reader or writer holds it).
        """
        from commscope.pipeline.sql_modules import comment_view

        if not self.catalog_path.exists():
            return False
        try:
            with self.store.lock(), self.catalog_lock():
                self.store.prepare_derived()
                con = duckdb.connect(str(self.catalog_path))
                try:
                    try:
                        row = con.execute(
                            "SELECT base, marts, inputs FROM _commscope_meta"
                        ).fetchone()
                    except duckdb.Error:
                        return False  # a catalog written before this record: rebuild
                    if row is None or row[0] != self._catalog_base():
                        return False
                    had_marts, had_inputs = set(json.loads(row[1])), set(json.loads(row[2]))
                    marts, inputs = self.store.materialised_marts(), self.store.model_inputs()
                    if not had_marts <= set(marts) or not had_inputs <= set(inputs):
                        return False
                    con.execute("SET parquet_metadata_cache = true")
                    self.confine(con)
                    con.execute("BEGIN TRANSACTION")
                    for name in inputs:
                        if name not in had_inputs and _usable_name(
                            name, self.store.model_inputs_dir()
                        ):
                            con.execute(f"DROP TABLE IF EXISTS {quote_ident(name)}")
                            self._create_published_view(con, self.store.model_inputs_dir(), name)
                    for mart in marts:
                        if mart not in had_marts and self._create_published_view(
                            con, self.store.marts_dir(), mart
                        ):
                            cols = {
                                r[0]
                                for r in con.execute(f"DESCRIBE {quote_ident(mart)}").fetchall()
                            }
                            comment_view(con, mart, note=MART_VIEW_NOTE, columns=cols)
                    self._write_meta(con)
                    con.execute("COMMIT")
                    con.execute("CHECKPOINT")
                finally:
                    con.close()
        except (duckdb.Error, CatalogBusyError) as exc:
            log.info("catalog not extended (%s): rebuilt instead", exc)
            return False
        return True

    def _build_catalog(self, con: duckdb.DuckDBPyConnection) -> None:
        """Create every view and the meta record on a new catalog file: in one transaction
        (each DDL statement committed on its own cost ~7 ms, most of a small ingest: 1.4-1.7 s
        -> 1.1 s wall), and, if anything fails inside it (a broken SQL module aborts the
        whole transaction), again one statement at a time, skipping what is broken."""
        from commscope.pipeline.sql_modules import SqlModuleError

        con.execute("BEGIN TRANSACTION")
        try:
            self.create_all_views(con, strict=True)
            self._write_meta(con)
            con.execute("COMMIT")
            return
        except (duckdb.Error, SqlModuleError) as exc:
            if isinstance(exc, duckdb.IOException):
                raise  # disk full, read-only: the caller reports it
            log.info(
                "catalog: one-transaction build failed (%s); building statement by statement", exc
            )
            con.execute("ROLLBACK")
        self.create_all_views(con)
        self._write_meta(con)

    def _catalog_held_by_writer(self) -> bool:
        """True if another process holds DuckDB's write lock on the catalog file."""
        if not self.catalog_path.exists():
            return False
        try:
            duckdb.connect(str(self.catalog_path), read_only=True).close()
        except duckdb.Error as exc:
            return _is_lock_error(exc)
        return False

    def catalog_current(self) -> bool:
        """True if the catalog exists and was written for this store path and schema.

        Raises CatalogBusyError if a writer holds the catalog (it cannot be read or replaced).
        """
        if not self.catalog_path.exists():
            return False
        try:
            con = self._open_catalog(read_only=True)
        except CatalogBusyError:
            raise
        except duckdb.Error:
            return False
        try:
            row = con.execute("SELECT signature FROM _commscope_meta").fetchone()
        except duckdb.Error:
            return False
        finally:
            con.close()
        return row == (self.signature(),)

    def ensure_catalog(self) -> None:
        """Write the catalog if it is missing or stale.

        While a ``query --write`` session holds the catalog, a stale catalog is left as it is
        (with a warning): the table views read Parquet by glob and stay current, and the next
        command after the session rebuilds it. Replacing it would lose the session's work.
        """
        busy = self._refresh_if_stale()
        if busy is not None:
            log.warning("catalog not rebuilt now: %s", busy)

    def _refresh_if_stale(self) -> StoreError | None:
        """Rebuild a missing or stale catalog; return the reason if it could not be rebuilt.

        A writer holding the catalog, or a store the process cannot write, leaves the existing
        catalog in use (its table views read Parquet by glob and stay current). Raises
        StoreError if there is no catalog at all and it cannot be written.
        """
        try:
            if not self.catalog_current() and not self._extend_catalog():
                self.refresh_catalog()
        except CatalogBusyError as exc:
            if not self.catalog_path.exists():
                raise
            return exc
        except StoreReadOnlyError:
            raise
        except OSError as exc:  # a read-only store (or file system): use the catalog there is
            reason = StoreError(
                f"{self.store.root}: cannot rewrite the catalog: {exc.strerror or exc}"
            )
            if not self.catalog_path.exists():
                raise reason from exc
            return reason
        return None

    def _open_catalog(self, *, read_only: bool) -> duckdb.DuckDBPyConnection:
        """``duckdb.connect`` on the catalog, DuckDB's lock error as one CatalogBusyError."""
        try:
            return duckdb.connect(str(self.catalog_path), read_only=read_only)
        except duckdb.Error as exc:
            if _is_lock_error(exc):
                raise CatalogBusyError(
                    f"{self.catalog_path}: the catalog is open read-write by another process "
                    "(a `commscope query --write` session?); try again when it ends"
                ) from exc
            raise

    def connect(self, *, read_only: bool = True) -> duckdb.DuckDBPyConnection:
        """Open the catalog (created if needed) with every table as a view.

        Raises CatalogBusyError (one line) if another process has the catalog open
        read-write, instead of DuckDB's lock error. On a store this process cannot write whose
        catalog is missing or stale (a read-only copy at another path), a read-only connection
        gets the same views in memory instead.
        """
        try:
            busy = self._refresh_if_stale()
        except StoreReadOnlyError:
            if not read_only:
                raise
            con = duckdb.connect(":memory:")
            self.create_all_views(con)
            return con
        con = self._open_catalog(read_only=read_only)
        if busy is not None:
            log.warning("catalog not rebuilt now: %s", busy)
        return con

    def connect_computed(self, names: Iterable[str]) -> duckdb.DuckDBPyConnection:
        """An in-memory connection with every catalog object, where the intermediate views
        ``names`` and those they read are computed once, in load order, into tables.

        Why: the catalog's intermediate views are live views over a deep chain, and DuckDB
        expands every view a query reads once per reference: ``SELECT * FROM
        int_class_bandwidth`` on a 4-rank store planned for minutes and grew past 8 GB. Computing
        each intermediate once (as derive does per run, here over every run) gives the same
        rows in seconds. The session has derive's memory limit and reads only the store's data
        folders (:meth:`confine`), set before anything is read.
        """
        from commscope.pipeline.duckdb_session import limit_memory, materialise_view
        from commscope.pipeline.sql_modules import with_dependencies

        con = duckdb.connect(":memory:")
        try:
            limit_memory(con)
            con.execute("SET parquet_metadata_cache = true")
            self.confine(con)
            self.create_all_views(con)
            for m in with_dependencies(sorted(names)):
                if m.layer == "intermediate" and m.kind == "VIEW":
                    materialise_view(con, m.name)
        except BaseException:
            con.close()
            raise
        return con

    @contextlib.contextmanager
    def write_session(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The catalog opened read-write, holding :meth:`catalog_lock` until the block ends.

        Raises CatalogBusyError if another writer (or a rebuild) holds it.
        """
        busy = self._refresh_if_stale()
        with self.catalog_lock():
            con = self._open_catalog(read_only=False)
            if busy is not None:
                log.warning("catalog not rebuilt now: %s", busy)
            try:
                yield con
            finally:
                con.close()


def _is_lock_error(exc: duckdb.Error) -> bool:
    """True if DuckDB refused to open a database file because another process holds it."""
    return isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower()


def _usable_name(name: str, parent: Path) -> bool:
    """True if the folder ``name`` under ``parent`` may become a view; else log why not.

    Why: folder names come from the file system, not from commscope alone (a copy made in a
    file manager, or a name planted to inject SQL); one bad name must not break every command.
    """
    if is_sql_name(name):
        return True
    log.warning(
        "catalog: skipped folder %r in %s: not a plain SQL name (letters, digits, '_')",
        name,
        parent,
    )
    return False
