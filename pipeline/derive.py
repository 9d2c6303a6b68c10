"""Derive: compute the marts of ``sql/marts`` for one run and materialise them to Parquet.

The SQL runs in an in-memory DuckDB over the store's committed Parquet, with the run's
configuration (``run_config``) and the analytical model's predictions (``predicted_traffic``,
``predicted_signatures``, ``predicted_matrix``, ``predicted_times``) registered as tables beside
it.

Atomicity: every mart and model input of one derive is written as a new *generation*
(``<store>/marts/<mart>/<run_id>/<generation>.parquet``) beside the published one, and the set
becomes visible at once when ``<store>/derived/<run_id>.parquet`` is replaced to name it (one
``os.replace``); the catalog's views and the reports read only published generations. A derive
killed midway leaves the previous complete set visible; its files are removed by the next one.

Consistency: a derive reads one snapshot of the store: the run's commit log is read once and
every table is copied from exactly the files of those batches, so a commit landing meanwhile is
seen by no table rather than by some. The published row records the snapshot's key, so
:func:`derive_stale` tells whether the store moved on since.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import duckdb
import polars as pl

from commscope.parsers.schema import TABLES
from commscope.pipeline import run_config as rc
from commscope.pipeline.duckdb_session import close_session, limit_memory, materialise_view
from commscope.pipeline.model_inputs import (
    INPUT_COLUMNS,
    PREDICTION_COLUMNS,
    RUN_CONFIG_COLUMNS,
    empty_inputs,
    input_frames,
    predictions,
    register_tables,
    run_config_frame,
)
from commscope.pipeline.sql_modules import (
    SqlModule,
    apply,
    discover,
    mart_names,
    strip_comments,
    with_dependencies,
)
from commscope.pipeline.sql_names import quote_ident, quote_literal
from commscope.pipeline.store import Snapshot, Store, new_generation, validate_run_id, write_error

log = logging.getLogger(__name__)


DeriveProgress = Callable[[str, int, int], None]
"""``derive_run``'s progress hook: (what was just done, relations done, relations in all)."""


@dataclass
class DeriveResult:
    """What ``derive_run`` produced."""

    run_id: str
    marts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    config_source: str | None = None
    intermediate_seconds: dict[str, float] = field(default_factory=dict)
    """Seconds to materialise each intermediate object (computed once, read by the marts)."""
    load_seconds: float = 0.0
    """Seconds to copy the run's rows and load the SQL modules."""
    generation: str | None = None
    """The published generation (``derived/<run_id>.parquet`` names it)."""
    steps: dict[str, float] = field(default_factory=dict)
    """Seconds of each step of ``derive_run`` in order (prepare, load, intermediates, marts,
    close, model inputs, publish, catalog); they add up to ``wall_seconds`` but for the few
    statements between them (``derive --verbose`` prints the rest as "other")."""
    wall_seconds: float = 0.0
    """Wall time of the whole ``derive_run`` call."""
    snapshot: str | None = None
    """Key of the commit-log snapshot the marts were derived from (see ``Store.snapshot``)."""
    batches: int = 0
    """Committed batches in that snapshot."""


def connect_for_derive(
    store: Store,
    run_id: str,
    stored: rc.StoredConfig | None,
    snapshot: Snapshot | None = None,
    *,
    prune: bool = False,
) -> tuple[duckdb.DuckDBPyConnection, dict[str, pl.DataFrame]]:
    """An in-memory connection holding only ``run_id``'s data, and the run's input frames.

    Why: the SQL refers to the canonical tables many times over; reading the store's Parquet
    (every run, every batch file) at each reference dominated derive time. The run's committed
    rows are copied once into in-memory tables that take the views' names, so every mart sees
    exactly this run and nothing else. The copy reads the files of one snapshot of the commit
    log (``snapshot``, else the log as it is now, read once), never the live views: those
    re-read the log per table, so an ingest committing meanwhile would show in some tables
    only. The run's config and the model's predictions are registered as typed tables, then
    every SQL module (marts as live views).

    A run of at least ``ON_DISK_ROWS`` calls (with ``prune``) is held in a temporary database
    file rather than in memory (see ``ON_DISK_ROWS``); there its calls are not copied but read
    through a view over the snapshot's files (``_AS_VIEW``).

    ``prune``: copy only what the SQL can read (:func:`read_columns`): every other column is
    null and a table no module reads has no rows (derive: less to decode and hold; at 1024
    ranks the copy of ``comm_ops`` is 18 M rows). Off for callers that query the canonical
    tables themselves.
    """
    snap = snapshot if snapshot is not None else store.snapshot(run_id)
    calls, calls_only_run = 0, False
    if prune:  # one pass over the calls' file footers: their count and their run
        probe = duckdb.connect()
        calls, calls_only_run = _run_rows(probe, store.snapshot_files("comm_ops", snap), run_id)
        probe.close()
    con = _connect(calls)
    # No SQL result depends on the order rows were inserted (every order that matters is an
    # ORDER BY), so DuckDB may copy and materialise in parallel without keeping it: a faster
    # load and less memory at scale (1024 ranks: 18 M calls).
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET parquet_metadata_cache = true")
    read = read_columns() if prune else None
    file_backed = _private_folder(con) is not None
    for name in TABLES:
        params = {"files": store.snapshot_files(name, snap), "run_id": run_id}
        source = "read_parquet($files, union_by_name = true)"
        select, where = "*", "run_id = $run_id"
        cols: list[tuple[str, str]] = []
        if read is not None:
            described = con.execute(f"DESCRIBE SELECT * FROM {source}", {"files": params["files"]})
            cols = [(str(c), str(t)) for c, t, *_ in described.fetchall()]
            known = {c.name for c in TABLES[name].columns}
            unread = [(c, t) for c, t in cols if c in known and c not in read.get(name, ())]
            if name not in read:  # no SQL reads the table: its columns, no rows
                where += " AND false"
            elif unread:  # columns no SQL reads stay null (never decoded, never held)
                select = (
                    "* REPLACE ("
                    + ", ".join(f"NULL::{t} AS {quote_ident(c)}" for c, t in unread)
                    + ")"
                )
        if (
            name in _AS_VIEW
            and file_backed
            and cols
            and name in (read or {})
            and (calls_only_run if name == "comm_ops" else _only_run(con, params["files"], run_id))
        ):
            _create_file_view(con, name, params["files"], cols, (read or {})[name])
            continue
        con.execute(
            f"CREATE TABLE {quote_ident(name)} AS SELECT {select} FROM {source} WHERE {where}",
            params,
        )
    inputs = input_frames(stored, run_id)
    register_tables(con, inputs)
    # One transaction: in a database file each of the ~400 statements that create the modules
    # (stand-ins, drops, renames) would otherwise commit, and sync, on its own.
    con.execute("BEGIN TRANSACTION")
    try:
        apply(con, comments=False)  # rows go to Parquet: nobody reads this session's comments
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return con, inputs


_AS_VIEW = frozenset({"comm_ops"})
"""Canonical tables that a derive in a database file (``ON_DISK_ROWS``) reads through a view
over the snapshot's Parquet files instead of copying them into a table, when the files' own
statistics show that they hold only the run's rows. Why: at 1024 ranks the copy of the 18 M
calls into the database file was the load (16-23 s CPU, ~11 s wall), while every reader's scan
of the files (the columns it needs) costs 0.2-2 s. Committed files are never rewritten, so the
view reads the same snapshot as the copy would. Without a ``run_id`` filter DuckDB's row
estimate is the files' exact row count (with it, a fifth: joins then picked other build sides)."""


def _create_file_view(
    con: duckdb.DuckDBPyConnection,
    name: str,
    files: list[str],
    cols: list[tuple[str, str]],
    read: frozenset[str],
) -> None:
    """``name`` as a view over ``files`` with the columns ``cols`` (name, type) in order, the
    ones no SQL reads (``read`` lists those it may) null. The column list is explicit, so the
    view keeps its shape even if the store's schema file gains columns meanwhile."""
    known = {c.name for c in TABLES[name].columns}
    items = [
        f"NULL::{t} AS {quote_ident(c)}" if c in known and c not in read else quote_ident(c)
        for c, t in cols
    ]
    listed = "[" + ", ".join(quote_literal(f) for f in files) + "]"
    con.execute(
        f"CREATE VIEW {quote_ident(name)} AS SELECT {', '.join(items)} "
        f"FROM read_parquet({listed}, union_by_name = true)"
    )


def _run_rows(con: duckdb.DuckDBPyConnection, files: list[str], run_id: str) -> tuple[int, bool]:
    """How many rows ``files`` hold, and whether every one has ``run_id``, from the files'
    Parquet statistics alone (one pass over their footers): in every row group with rows,
    min = max = ``run_id`` and no null; a row group without statistics proves nothing."""
    if not files:
        return 0, True
    row = con.execute(
        "SELECT coalesce(sum(row_group_num_rows), 0), count(*) FILTER (WHERE row_group_num_rows > 0"
        " AND NOT coalesce(stats_min_value = $r AND stats_max_value = $r"
        " AND stats_null_count = 0, FALSE)) = 0"
        " FROM parquet_metadata($files) WHERE path_in_schema = 'run_id'",
        {"files": files, "r": run_id},
    ).fetchone()
    return (int(row[0]), bool(row[1])) if row else (0, False)


def _only_run(con: duckdb.DuckDBPyConnection, files: list[str], run_id: str) -> bool:
    """Whether every row of ``files`` has ``run_id`` by the files' statistics (:func:`_run_rows`)."""
    return _run_rows(con, files, run_id)[1]


_BARE_ITEM = re.compile(r'\s*(?:\w+\.)?"?\w+"?\s*,?\s*')
_WORD = re.compile(r"[A-Za-z_]\w*")


@cache
def read_columns() -> dict[str, frozenset[str]]:
    """Canonical table -> the columns the SQL modules may read; tables no module reads are absent.

    A superset, by the names' words: a column is read when its name appears in the code
    (comments and string literals left out) of an intermediate or a mart, or of a staging view
    other than as a bare item of a column or select list (a staging view passes such a column
    through under its own name, so it is read only if a later module names it).
    """
    mods = discover()
    words: set[str] = set()
    for mod in mods:
        code = strip_comments(mod.text)
        if mod.layer == "staging":
            code = "\n".join(ln for ln in code.splitlines() if not _BARE_ITEM.fullmatch(ln))
        words.update(w.lower() for w in _WORD.findall(code))
    referenced = set().union(*(m.references for m in mods))
    return {
        name: frozenset(c.name for c in spec.columns if c.name.lower() in words)
        for name, spec in TABLES.items()
        if name.lower() in referenced
    }


ON_DISK_ROWS = 2_000_000
"""Calls (``comm_ops`` rows) from which derive holds its tables in a temporary database file.

Why: DuckDB compresses the tables of a database file (dictionaries for the repeated strings:
files, groups, classes; bit-packed integers) as it writes them, and not those of an in-memory
database. At 1024 ranks (18 M calls) the uncompressed call-sized tables (calls, classified
calls, iterations, lane and matched instance calls) outgrow a 10 GB cap and spill; in the file they take a
tenth and stay cached. Below the threshold the compression costs more than it saves. In the
file, the call-sized intermediates (``_AS_PARQUET``) are Parquet files beside it instead."""


def _connect(calls: int) -> duckdb.DuckDBPyConnection:
    """A connection for derive: in memory, or in a private temporary database file when the run
    has at least ``ON_DISK_ROWS`` ``calls``. Either way capped by :func:`limit_memory`; the file
    lives in the spill folder, which derive_run removes."""
    import tempfile

    rows = calls
    if rows < ON_DISK_ROWS:
        con = duckdb.connect()
        limit_memory(con)
        return con
    folder = Path(tempfile.mkdtemp(prefix=f"commscope-derive-{os.getpid()}-"))
    con = duckdb.connect(str(folder / "derive.duckdb"))
    limit_memory(con, spill=folder)
    return con


def derive_run(
    store: Store,
    run_id: str,
    *,
    config: Path | None = None,
    progress: DeriveProgress | None = None,
) -> DeriveResult:
    """Materialise every mart for ``run_id`` and publish them together.

    Every mart and model input is written as a new generation, then published by one atomic
    rename (see the module docstring); on any failure, this derive's files are removed and the
    previously published set stays as it was.

    Args:
        store: the store.
        run_id: the run.
        config: a config file that overrides the stored one (and is stored).
        progress: if given, called after the load and after each intermediate and mart with
            (what was just done, relations done, relations in all; see :func:`relation_count`).

    Raises:
        StoreError: the store cannot be written (disk full, read-only: one line naming the
            file), or another store error.
    """
    validate_run_id(run_id)
    t_start = time.perf_counter()
    try:
        with store.lock():
            store.prepare_derived()
        if config is not None:
            rc.save(
                store,
                rc.StoredConfig(run_id, rc.read_config_file(config), f"config:{config.resolve()}"),
            )
    except OSError as exc:
        raise write_error(Path(exc.filename or store.root), exc) from exc
    stored = rc.load(store, run_id)
    result = DeriveResult(run_id, config_source=stored.source if stored else None)
    snap = store.snapshot(run_id)
    generation = new_generation()
    written: list[Path] = []
    published = False
    t_load = time.perf_counter()
    steps = result.steps
    steps["prepare"] = t_load - t_start
    con, inputs = connect_for_derive(store, run_id, stored, snap, prune=True)
    result.load_seconds = steps["load"] = time.perf_counter() - t_load
    total = relation_count()
    done = 0

    def advance(name: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(name, done, total)

    if progress is not None:
        progress("load", 0, total)
    dest = store.derived_dir()
    try:
        try:
            t0 = time.perf_counter()
            materialise_intermediates(
                con,
                result.intermediate_seconds,
                free=True,
                on_done=advance,
                parquet_folder=_private_folder(con),
            )
            steps["intermediates"] = time.perf_counter() - t0
            t_marts = time.perf_counter()
            for mod in discover():
                if mod.layer != "marts":
                    continue
                t0 = time.perf_counter()
                dest = store.generation_path(store.marts_dir(), mod.name, run_id, generation)
                written.append(dest)
                result.marts[mod.name] = write_mart(con, mod, dest, run_id)
                result.seconds[mod.name] = time.perf_counter() - t0
                advance(mod.name)
            steps["marts"] = time.perf_counter() - t_marts
        finally:
            t0 = time.perf_counter()
            close_session(con)
            steps["close"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        for name, df in inputs.items():
            dest = store.generation_path(store.model_inputs_dir(), name, run_id, generation)
            written.append(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = _tmp_for(dest)
            df.write_parquet(tmp)
            tmp.replace(dest)
        steps["model inputs"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        dest = store.derived_dir() / f"{run_id}.parquet"
        with store.lock():
            store.publish_derived(run_id, generation, snap, result.config_source)
        published = True
        steps["publish"] = time.perf_counter() - t0
        result.generation, result.snapshot = generation, snap.key
        result.batches = len(snap.batch_ids)
    except (OSError, duckdb.IOException) as exc:
        raise write_error(dest, exc) from exc
    finally:
        if not published:  # nothing of this generation may stay behind
            for f in written:
                for leftover in (f, _tmp_for(f)):
                    with contextlib.suppress(OSError):
                        leftover.unlink(missing_ok=True)
    # The catalog's signature covers the SQL, the materialised marts and the model inputs, so it
    # is rewritten only when this derive added a mart or input relation (rewriting it costs
    # seconds; the views read Parquet by glob and see new runs' files without it).
    t0 = time.perf_counter()
    store.ensure_catalog()
    steps["catalog"] = time.perf_counter() - t0
    result.wall_seconds = time.perf_counter() - t_start
    return result


def missing_marts(store: Store, run_id: str) -> list[str]:
    """Marts defined in sql/marts that have no published file for this run."""
    published = store.mart_files(run_id)
    return [name for name in mart_names() if name not in published]


def ensure_derived(store: Store, run_id: str, *, config: Path | None = None) -> DeriveResult | None:
    """Derive the run when a config is given or a mart of this version is missing; None when
    its published marts were kept.

    Why here: reports only read (:func:`commscope.reports.html.build_report`); the commands, the flows
    and the Python API decide with this whether a run is derived before it is reported.
    """
    if config is not None or missing_marts(store, run_id):
        log.info("%s: deriving marts first", run_id)
        return derive_run(store, run_id, config=config)
    return None


def derive_stale(store: Store, run_id: str) -> str | None:
    """Why the run's published marts do not reflect its committed store, or None if they do.

    Why: ``serve`` decides what to re-derive; an interrupted cycle (ingest committed, derive
    never ran or died) must be redone on the next cycle even though that cycle ingests nothing.
    """
    row = store.derived(run_id)
    if row is None:
        return "never derived"
    snap = store.snapshot(run_id)
    if row.get("snapshot") != snap.key:
        return (
            f"derived from {row.get('batches') if row.get('batches') is not None else 'an unknown'}"
            f" committed batches, the store now has {len(snap.batch_ids)}"
        )
    return None


def materialise_intermediates(
    con: duckdb.DuckDBPyConnection,
    seconds: dict[str, float] | None = None,
    *,
    free: bool = False,
    on_done: Callable[[str], None] | None = None,
    parquet_folder: Path | None = None,
    only: frozenset[str] | None = None,
) -> None:
    """Replace each intermediate view by a table holding its rows, in load order.

    Why: several marts read the same intermediate objects (classified calls, iterations,
    expanded flows); as views they would be recomputed by every mart that reads them. A
    connection made by ``connect_for_derive`` holds one run only, so each is computed once.
    Views are bound by name at query time, so later views read the tables.

    Args:
        con: a connection on which every SQL module was applied.
        seconds: if given, receives object name -> seconds spent computing it.
        free: once no intermediate still to be materialised and no mart reads a table (an
            intermediate's, or a canonical table's copy), empty it (derive only queries the
            marts afterwards): at 1024 ranks the copied calls, their iterations and the
            matched instance calls are 18 M rows each.
        on_done: if given, called with each intermediate's name once it is handled
            (materialised, or left a view).
        parquet_folder: if given, the call-sized intermediates (``_AS_PARQUET``) are written
            there as Parquet files read through views instead of tables (derive passes its
            private folder when it works in a database file; the caller removes the folder).
        only: if given, just these intermediates (a reader that needs a few of them, with
            everything they read: :func:`run_intermediates`); the others stay live views.
    """
    mods = discover()
    inlined = inlined_intermediates(mods)
    for i, mod in enumerate(mods):
        if not _handled_view(mod, inlined) or (only is not None and mod.name not in only):
            continue
        t0 = time.perf_counter()
        if stays_view(con, mod.name):
            inlined |= {mod.name}
        elif mod.name in _AS_PARQUET and parquet_folder is not None:
            _materialise_parquet(con, mod.name, parquet_folder, parquet_codec(mod.name, mods))
        else:
            materialise_view(con, mod.name)
        if free:
            free_unread(con, mods, i, inlined)
        if seconds is not None:
            seconds[mod.name] = time.perf_counter() - t0
        if on_done is not None:
            on_done(mod.name)


@contextlib.contextmanager
def run_intermediates(
    store: Store, run_id: str, names: Iterable[str]
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A session holding only ``run_id``'s committed rows in which the intermediates ``names``
    and everything they read are computed once, as derive computes them (closed on exit).

    Why: in the catalog every intermediate is a live view over the store's Parquet, and DuckDB
    expands a view once per reference, so a reader of ``int_calls`` on a run with no derive
    re-read every file of the store at each of the chain's references (a small 3-format MoE run:
    16,444 files held open at once and 37 s; a larger store runs out of file handles). Here the
    canonical tables are read once, for this run only, and each intermediate is a table.
    """
    con, _ = connect_for_derive(store, run_id, rc.load(store, run_id), prune=True)
    try:
        materialise_intermediates(
            con,
            parquet_folder=_private_folder(con),
            only=frozenset(m.name for m in with_dependencies(sorted(names))),
        )
        yield con
    finally:
        close_session(con)


_AS_PARQUET = frozenset(
    {
        "int_comm_ops_shaped",
        "int_comm_op_iteration_shaped",
        "int_instance_matched",
        "int_instances",
    }
)
"""Call-sized intermediates that a derive in a database file (``ON_DISK_ROWS``) holds as a
Parquet file in its private folder (removed with it), read through a view, instead of a table of
the file. Why: at 1024 ranks (18 M calls) writing a table of the file cost about 16 s of CPU for
the classified calls, the Parquet file about 10 s, and reading either back is ~1.5 s
(``bench/README.md``, session 8).

The three per-call ones are stored narrow: a shape_id and the numbers that differ from call to
call, no string. Every name a call shares with its shape (run, rank, file; op, size, group) is
kept once per shape (``int_comm_op_shape_keys``, ``int_comm_op_shapes``, ``int_instance_shapes``:
about 6,000 rows at 1024 ranks), and the wide rows are views that join them back
(``_VIEW_ONLY``). The classified calls' 33-column write was ~10 s CPU at 1024 ranks, the narrow
one ~3 s (session 10); the iteration rows' run_id, rank, source_file and token strings were
about half of their write (session 13). The shape_id is a hash of the call's own key
(``comm_op_shape_id``), so no narrow view reads ``int_comm_op_shapes``: in the catalog, where
every intermediate is a live view, each reference would inline the classification again
(``tests/pipeline/test_catalog_fanout.py``). ``int_instances`` (4.9 M instances at 1024 ranks) is
written in the marts' codec and published as the ``collective_instances`` mart
(:func:`published_as_is`). History and figures: ``bench/README.md``, sessions 8-13."""


def _private_folder(con: duckdb.DuckDBPyConnection) -> Path | None:
    """The folder of derive's private database file (:func:`_connect`), None in memory."""
    row = con.execute(
        "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchone()
    if not row or not row[0]:
        return None
    return Path(str(row[0])).parent


def _materialise_parquet(
    con: duckdb.DuckDBPyConnection, name: str, folder: Path, compression: str = "lz4_raw"
) -> None:
    """Write intermediate ``name`` to ``folder/<name>.parquet`` in ``compression`` (derive's
    choice: :func:`parquet_codec`) and make ``name`` a view of it."""
    path = quote_literal(str(folder / f"{name}.parquet"))
    q = quote_ident(name)
    con.execute(f"COPY (SELECT * FROM {q}) TO {path} (FORMAT parquet, COMPRESSION {compression})")
    con.execute(f"DROP VIEW {q}")
    con.execute(f"CREATE VIEW {q} AS SELECT * FROM read_parquet({path})")


def relation_count() -> int:
    """Relations a derive computes one by one: the intermediate views it materialises (or
    keeps as views after checking) and the marts; the denominator of its progress."""
    mods = discover()
    inlined = inlined_intermediates(mods)
    return sum(1 for m in mods if m.layer == "marts" or _handled_view(m, inlined))


def _handled_view(mod: SqlModule, inlined: frozenset[str]) -> bool:
    """Whether :func:`materialise_intermediates` handles ``mod``: an intermediate view that is
    not computed inside its readers."""
    return mod.layer == "intermediate" and mod.kind.upper() == "VIEW" and mod.name not in inlined


def stays_view(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether derive leaves the intermediate ``name`` a view, given the tables materialised
    so far on ``con`` (``_VIEW_IF_EMPTY``)."""
    source = _VIEW_IF_EMPTY.get(name)
    if source is None:
        return False
    found = con.execute(f"SELECT count(*) FROM (FROM {quote_ident(source)} LIMIT 1)").fetchall()
    return not (found and found[0][0])


def inlined_intermediates(mods: tuple[SqlModule, ...]) -> frozenset[str]:
    """Intermediate views derive leaves as views: computed inside their readers' queries."""
    return frozenset(
        m.name
        for m in mods
        if m.name in _VIEW_ONLY
        or (m.name in _INLINE and sum(m.name in r.references for r in mods) == 1)
    )


def free_unread(
    con: duckdb.DuckDBPyConnection,
    mods: tuple[SqlModule, ...],
    done: int,
    inlined: frozenset[str],
) -> list[str]:
    """Empty every table that nothing after ``mods[done]`` reads; return their names.

    Tables: the canonical tables' copies and the intermediates materialised so far. Readers
    still to come: the intermediates not yet materialised and every mart, through the views
    they read (staging views, inlined intermediates). An emptied table keeps its name and
    columns (DROP frees the memory; DELETE would only mark rows deleted), so every view still
    binds.
    """
    views = {m.name.lower(): m for m in mods if m.layer == "staging" or m.name in inlined}

    def reads(m: SqlModule, seen: set[str]) -> set[str]:
        out: set[str] = set()
        for ref in m.references:
            out.add(ref)
            if ref in views and ref not in seen:
                seen.add(ref)
                out |= reads(views[ref], seen)
        return out

    still_read: set[str] = set()
    for m in mods[done + 1 :]:
        if m.layer == "marts" or (m.layer == "intermediate" and m.name not in inlined):
            still_read |= reads(m, set())
    tables = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
            "AND estimated_size > 0"
        ).fetchall()
    }
    candidates = [
        m.name
        for m in mods[: done + 1]
        if m.layer == "intermediate" and m.kind.upper() == "VIEW" and m.name not in inlined
    ] + list(TABLES)
    freed = [n for n in candidates if n in tables and n.lower() not in still_read]
    for name in freed:
        q = quote_ident(name)
        con.execute(f"CREATE TABLE {quote_ident('_empty_' + name)} AS FROM {q} LIMIT 0")
        con.execute(f"DROP TABLE {q}")
        con.execute(f"ALTER TABLE {quote_ident('_empty_' + name)} RENAME TO {q}")
    return freed


_INLINE = frozenset({"int_comm_ops_sequenced"})
"""Large intermediates left as views while exactly one module reads them: that reader computes
them inside its own query (one call-sized table fewer to write and hold: at 1024 ranks the
sequenced calls are 18 M rows that only int_comm_op_iteration_shaped reads)."""

_VIEW_IF_EMPTY: dict[str, str] = {"int_calls": "int_call_sources"}
"""Intermediate -> the (materialised) table whose emptiness leaves it a view in derive.

``int_calls`` on a run whose int_call_sources is empty (every rank logged by one tool: no record
to pair) is the counted rows of ``int_comm_ops_classified`` (an NCCL all-to-all's grouped Send/Recv lines as
one call) joined to an empty aggregate, a projection that each reader (``int_calls_tallied``,
which counts it per value for call_sources, call_totals, effective_bandwidth and message_sizes;
``int_call_lines``; the flows) computes within its own query for about what its read of the
table costs, while storing it
wrote a 40-column copy of every call (256 ranks: 5.2 s CPU of the derive; the marts' CPU the
same either way, ``bench/README.md``). With paired records its per-call aggregate is worth
computing once, so it is materialised."""

_VIEW_ONLY = frozenset(
    {
        "int_comm_ops_classified",
        "int_comm_op_iteration",
        "int_instance_lane_shaped",
        "int_instance_lane_calls",
        "int_instance_members",
        "int_instance_calls",
        "int_call_lines",
    }
)
"""Intermediates that stay views whatever reads them: a cheap projection of a materialised table
(``int_comm_ops_classified`` and ``int_instance_lane_calls`` are the narrow per-call rows of
``int_comm_ops_shaped`` and ``int_instance_lane_shaped`` joined to ``int_comm_op_shapes``, a few
thousand rows at 1024 ranks, on one integer; ``int_comm_op_iteration`` is the narrow
``int_comm_op_iteration_shaped`` joined to ``int_comm_op_shape_keys`` on one integer, plus the
token's text (per call, for the readers that select it); ``int_instance_members`` is the narrow
``int_instance_matched`` joined to ``int_instance_shapes`` (the values a call shares with its
shape, 6,016 rows at 1024 ranks, on one integer) plus its instance_key string, one distinct
string per instance that a table would store for each of 18 M calls at 1024 ranks;
``int_instance_calls`` is ``int_instance_members`` plus a join to the per-rank clock offsets;
``int_call_lines`` is ``int_calls`` with its all-to-all calls joined back to their NCCL lines),
so each reader computes it inside its own query rather than derive storing a second call-sized
copy (18 M rows at 1024 ranks). ``int_instance_lane_shaped`` (a rank's lane of the narrow
iteration rows, with the timed calls' times) is computed by its two readers (through
``int_instance_lane_calls``: the groups and the matching) for less CPU than writing its 18 M rows
(1024 ranks: the instance chain 19.2-20.8 -> 16.8-17.0 s CPU; ``bench/README.md``, session 13
helper i21-inst2)."""


_MART_CODEC = "zstd"
"""The Parquet compression of every published mart file."""


def parquet_codec(name: str, mods: Iterable[SqlModule]) -> str:
    """The compression derive writes call-sized intermediate ``name`` in: lz4_raw (cheapest to
    read back) unless a mart publishes the file as it is (:func:`published_as_is`), then the
    marts' codec, which costs about the same CPU to write (1024 ranks, ``int_instances``: 2.7
    against 2.6 s) at 0.4 of the size."""
    return _MART_CODEC if name in published_as_is(mods) else "lz4_raw"


def published_as_is(mods: Iterable[SqlModule]) -> frozenset[str]:
    """The call-sized intermediates (``_AS_PARQUET``) that a mart publishes whole
    (``CREATE VIEW m AS SELECT * FROM int_x``): derive writes them in the marts' codec and
    publishes their file as the mart's (:func:`write_mart`) instead of encoding the rows again
    (``collective_instances``: 4.9 M instances at 1024 ranks)."""
    return frozenset(
        m.publishes
        for m in mods
        if m.layer == "marts" and m.publishes in _AS_PARQUET and m.published_columns is None
    )


def write_mart(con: duckdb.DuckDBPyConnection, mod: SqlModule, dest: Path, run_id: str) -> int:
    """Write mart ``mod``'s rows of ``run_id`` to ``dest`` (atomically: a temp name, then a
    rename) and return how many there are.

    A mart that publishes a whole intermediate that derive wrote as Parquet (its view reads
    ``<private folder>/<int_x>.parquet``: :func:`published_as_is`) takes that file itself: a hard
    link, else a copy of its bytes, when its statistics show it holds ``run_id`` only (always so
    in derive, whose session holds one run); any other mart is computed and written by COPY.
    """
    src = _parquet_of(con, mod.publishes) if mod.published_columns is None else None
    if src is not None and _only_run(con, [str(src)], run_id):
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = _tmp_for(dest)
        tmp.unlink(missing_ok=True)
        try:
            os.link(src, tmp)
        except OSError:  # another file system, or links not supported
            shutil.copyfile(src, tmp)
        tmp.replace(dest)
    else:
        _copy_atomic(
            con, f"SELECT * FROM {quote_ident(mod.name)} WHERE run_id = $run_id", dest, run_id
        )
    rows = con.execute(f"SELECT count(*) FROM read_parquet({quote_literal(str(dest))})").fetchone()
    return int(rows[0]) if rows else 0


def _parquet_of(con: duckdb.DuckDBPyConnection, name: str | None) -> Path | None:
    """The Parquet file that :func:`_materialise_parquet` wrote for intermediate ``name`` in
    this session's private folder, if it did (None otherwise)."""
    folder = _private_folder(con)
    if name is None or name not in _AS_PARQUET or folder is None:
        return None
    path = folder / f"{name}.parquet"
    return path if path.is_file() else None


def _tmp_for(dest: Path) -> Path:
    """The private temp name a file is written under before its rename into ``dest``."""
    return dest.parent / f".{dest.stem}.{os.getpid()}.tmp"


def _copy_atomic(con: duckdb.DuckDBPyConnection, sql: str, dest: Path, run_id: str) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_for(dest)
    con.execute(
        f"COPY ({sql}) TO {quote_literal(str(tmp))} (FORMAT parquet, COMPRESSION {_MART_CODEC})",
        {"run_id": run_id},
    )
    tmp.replace(dest)


def _q(s: str) -> str:
    return s.replace("'", "''")


__all__ = [
    "INPUT_COLUMNS",
    "PREDICTION_COLUMNS",
    "RUN_CONFIG_COLUMNS",
    "DeriveResult",
    "connect_for_derive",
    "derive_run",
    "derive_stale",
    "empty_inputs",
    "ensure_derived",
    "input_frames",
    "limit_memory",
    "materialise_intermediates",
    "materialise_view",
    "missing_marts",
    "parquet_codec",
    "predictions",
    "published_as_is",
    "register_tables",
    "run_config_frame",
    "write_mart",
]
