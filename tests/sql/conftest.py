"""Fixtures of the SQL tests: every real sample ingested once into one temporary store.

The traffic invariants and the bandwidth plausibility test read the same store (session scope),
so the samples are parsed once per test session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import duckdb
import polars as pl
import pytest

from commscope.parsers.schema import TABLES, conform, empty_frame
from commscope.pipeline import run_config as rc
from commscope.pipeline.derive import (
    empty_inputs,
    materialise_intermediates,
    materialise_view,
    predictions,
    register_tables,
    run_config_frame,
)
from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.sql_modules import SqlModule, apply, discover, with_dependencies
from commscope.pipeline.store import Store


def calls_tables(comm_ops: list[dict[str, object]]) -> duckdb.DuckDBPyConnection:
    """An in-memory connection of hand-made calls: ``comm_ops`` holds ``comm_ops`` (conformed
    to the schema), every other canonical table is empty, the model inputs are empty; no SQL
    module yet."""
    con = duckdb.connect()
    for name in TABLES:
        df = pl.DataFrame(comm_ops) if name == "comm_ops" else empty_frame(name)
        con.register(f"_t_{name}", conform(df, name) if name == "comm_ops" else df.to_arrow())
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM _t_{name}")
    register_tables(con, empty_inputs())
    return con


def calls_catalog(comm_ops: list[dict[str, object]]) -> duckdb.DuckDBPyConnection:
    """:func:`calls_tables` with every staging and intermediate SQL module a view over them."""
    con = calls_tables(comm_ops)
    apply(con, tuple(m for m in discover() if m.layer != "marts"), comments=False)
    return con


def sample_files(samples: Path) -> list[Path]:
    """Every sample of ../shared/samples/<format>/: a file, or a folder of one run's files
    (per-rank dumps, per-node exports); the .source.txt notes left out."""
    return sorted(p for p in samples.glob("*/*") if not p.name.endswith(".source.txt"))


@pytest.fixture(scope="session")
def all_samples(
    tmp_path_factory: pytest.TempPathFactory, shared_samples: Path, sample_traces: Path
) -> tuple[Store, dict[str, Path]]:
    """One store holding every sample, one run per file or folder (run ids s00, s01, ...) and one per
    sample_traces/ folder (t00, ...); the run id -> the path ingested."""
    store = Store.open(tmp_path_factory.mktemp("samples") / "store")
    runs: dict[str, Path] = {}
    for i, path in enumerate(sample_files(shared_samples)):
        run_id = f"s{i:02d}"
        ingest_paths(store, [path], run_id=run_id)
        runs[run_id] = path
    for j, folder in enumerate(sorted(p for p in sample_traces.iterdir() if p.is_dir())):
        ingest_paths(store, [folder], run_id=f"t{j:02d}")
        runs[f"t{j:02d}"] = folder
    return store, runs


def materialised(
    store: Store, prepare: Callable[[duckdb.DuckDBPyConnection], object] | None = None
) -> duckdb.DuckDBPyConnection:
    """Every run of the store in one in-memory connection, canonical tables copied into tables.

    ``prepare`` runs on the copied canonical tables before the SQL modules are computed (a
    test that adds rows: the intermediates are tables, computed once, and would not see them).

    Like ``commscope.pipeline.derive.connect_for_derive`` but for all runs at once (each run's stored
    config in ``run_config``) and without the Parquet views, whose per-batch files would be
    opened once per reference in the plan (too many open files over 30 runs).
    """
    c = canonical_tables(store)
    runs = [r for (r,) in c.execute("SELECT DISTINCT run_id FROM ingested_files").fetchall()]
    cfg = pl.concat([run_config_frame(rc.load(store, r), r) for r in runs])
    c.register("_cfg", cfg.to_arrow())
    c.execute("CREATE TABLE run_config AS SELECT * FROM _cfg")
    c.unregister("_cfg")
    for name, df in predictions(None, "x").items():
        c.register("_pred", df.to_arrow())
        c.execute(f"CREATE TABLE {name} AS SELECT * FROM _pred")
        c.unregister("_pred")
    if prepare is not None:
        prepare(c)
    apply(c, comments=False)
    materialise_intermediates(c)
    return c


def canonical_tables(store: Store) -> duckdb.DuckDBPyConnection:
    """A new in-memory connection holding every run of ``store``'s canonical tables as tables
    (copied from the store's views: each Parquet file is read once, not once per reference)."""
    c = duckdb.connect()
    store.create_views(c)
    for name in TABLES:
        c.execute(f"CREATE TABLE _m_{name} AS SELECT * FROM {name}")
        c.execute(f"DROP VIEW {name}")
        c.execute(f"ALTER TABLE _m_{name} RENAME TO {name}")
    return c


def objects_over_store(store: Store, objects: Iterable[str]) -> duckdb.DuckDBPyConnection:
    """Every run of ``store`` in memory (:func:`canonical_tables`) with ``objects`` and what they
    read created, each intermediate a table as derive makes it (model inputs empty)."""
    c = canonical_tables(store)
    register_tables(c, empty_inputs())
    create_materialised(c, with_dependencies(tuple(objects)))
    return c


def tables_for_views(con: duckdb.DuckDBPyConnection, modules: Iterable[SqlModule]) -> None:
    """Replace each intermediate view of ``modules`` (in their order) by a table of its rows,
    as derive does, so a query reads each once (live, a mart's plan repeats every shared
    subtree: minutes for the instance views)."""
    for mod in modules:
        if mod.layer == "intermediate" and mod.kind.upper() == "VIEW":
            materialise_view(con, mod.name)


def create_materialised(con: duckdb.DuckDBPyConnection, modules: Iterable[SqlModule]) -> None:
    """Create ``modules`` (in their order), then each intermediate view as a table of its rows,
    as derive does: a mart queried afterwards reads each intermediate once instead of
    re-planning the whole chain (minutes and gigabytes for the instance views)."""
    mods = tuple(modules)
    apply(con, mods, comments=False)
    tables_for_views(con, mods)
