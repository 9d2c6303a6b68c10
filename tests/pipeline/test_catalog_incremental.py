"""The catalog is extended, not rebuilt, when a derive adds marts (issue 21, item 4).

A store's first derive adds every mart and model input; the catalog then needs their views and
nothing else. The extended catalog must hold exactly what a full rebuild writes (every view's
SQL, every table, every comment), in the storage version the duckdb CLI reads; anything the
extension cannot follow (a catalog from before its record, a changed base) is rebuilt.
"""

from __future__ import annotations

import logging
import re
import struct
from pathlib import Path
from typing import Any

import duckdb
import pytest

from commscope.pipeline.catalog import Catalog
from commscope.pipeline.derive import derive_run
from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.store import Store


def _exclude_sorted(sql: str) -> str:
    """DuckDB prints an ``EXCLUDE (...)`` list, and a ``* REPLACE (...)`` list of several
    expressions, in no fixed order (two rebuilds differ too): the EXCLUDE list is sorted, and a
    view with a REPLACE list is compared as its multiset of words (without commas and
    parentheses)."""
    sql = re.sub(
        r"EXCLUDE \(([^()]*)\)",
        lambda m: "EXCLUDE (" + ", ".join(sorted(m[1].split(", "))) + ")",
        sql,
    )
    return " ".join(sorted(re.sub(r"[(),]", " ", sql).split())) if " REPLACE (" in sql else sql


def _dump(path: Path) -> dict[str, Any]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {
            "views": sorted(
                (name, _exclude_sorted(sql), comment)
                for name, sql, comment in con.execute(
                    "SELECT view_name, sql, comment FROM duckdb_views() WHERE NOT internal"
                ).fetchall()
            ),
            "tables": sorted(
                con.execute(
                    "SELECT table_name, comment FROM duckdb_tables() WHERE NOT internal"
                ).fetchall()
            ),
            "columns": sorted(
                con.execute(
                    "SELECT table_name, column_name, data_type, comment FROM duckdb_columns() "
                    "WHERE NOT internal"
                ).fetchall()
            ),
            "meta": con.execute("SELECT * FROM _commscope_meta").fetchall(),
        }
    finally:
        con.close()


def _storage_version(path: Path) -> int:
    head = path.read_bytes()[:64]
    assert head[8:12] == b"DUCK"
    return struct.unpack_from("<Q", head, 12)[0]


@pytest.fixture
def ingested(tmp_path: Path, shared_samples: Path) -> Store:
    files = sorted(
        (shared_samples / "nccl_debug").glob("gfbench_2.20.5_2rank_normal_rank*_debugfile.txt")
    )
    store = Store.open(tmp_path / "s")
    ingest_paths(store, files, run_id="r")  # writes the catalog (no marts yet)
    assert store.catalog_current()
    return store


def test_derive_extends_the_catalog_as_a_rebuild_would(
    ingested: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    rebuilds = 0
    refresh = Catalog.refresh_catalog

    def counting(self: Catalog) -> None:
        nonlocal rebuilds
        rebuilds += 1
        refresh(self)

    monkeypatch.setattr(Catalog, "refresh_catalog", counting)
    before = _dump(ingested.catalog_path)
    res = derive_run(ingested, "r")
    assert rebuilds == 0 and ingested.catalog_current()
    extended = _dump(ingested.catalog_path)
    assert len(extended["views"]) > len(before["views"])
    ingested.refresh_catalog()
    assert rebuilds == 1
    assert _dump(ingested.catalog_path) == extended
    assert 64 <= _storage_version(ingested.catalog_path) <= 68
    con = ingested.connect()
    try:
        for mart, rows in res.marts.items():
            got = con.execute(f"SELECT count(*) FROM {mart} WHERE run_id = 'r'").fetchone()
            assert got == (rows,), mart
    finally:
        con.close()


def test_a_catalog_without_the_record_is_rebuilt(ingested: Store) -> None:
    con = duckdb.connect(str(ingested.catalog_path))
    con.execute("CREATE OR REPLACE TABLE _commscope_meta AS SELECT 'old' AS signature")
    con.close()
    assert not ingested.catalog._extend_catalog()
    ingested.ensure_catalog()  # the rebuild
    assert ingested.catalog_current()
    assert _dump(ingested.catalog_path)["meta"][0][1] == ingested.catalog._catalog_base()


def test_a_reader_on_the_catalog_leaves_it_to_the_rebuild(ingested: Store) -> None:
    """An open reader (the duckdb CLI, a query) blocks writing in place: the rebuild path
    (new file, renamed over) is taken, as before the extension existed."""
    derive_run(ingested, "r")
    ingested.refresh_catalog()
    (ingested.marts_dir() / "extra_mart" / "r").mkdir(parents=True)
    src = next((ingested.marts_dir()).glob("traffic_matrix/r/*.parquet"))
    (ingested.marts_dir() / "extra_mart" / "r" / src.name).write_bytes(src.read_bytes())
    reader = duckdb.connect(str(ingested.catalog_path), read_only=True)
    try:
        assert not ingested.catalog._extend_catalog()
    finally:
        reader.close()
    assert ingested.catalog._extend_catalog()
    assert "extra_mart" in {v[0] for v in _dump(ingested.catalog_path)["views"]}


def test_catalog_is_built_in_one_transaction(
    tmp_path: Path, shared_samples: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A rebuild normally commits once (no fallback to the statement-by-statement build)."""
    files = sorted(
        (shared_samples / "nccl_debug").glob("gfbench_2.20.5_2rank_normal_rank0_debugfile.txt")
    )
    store = Store.open(tmp_path / "s")
    with caplog.at_level(logging.INFO, logger="commscope.pipeline.store"):
        ingest_paths(store, files, run_id="r")
    assert store.catalog_current()
    assert not [r for r in caplog.records if "one-transaction build failed" in r.message]


def test_a_broken_sql_module_is_skipped_and_the_rest_is_built(
    tmp_path: Path, shared_samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module whose SQL fails aborts the one-transaction build; the catalog is then built
    statement by statement without it (ingest and queries over the tables keep working)."""
    from commscope.pipeline import sql_modules

    real = sql_modules.discover()
    bad = tmp_path / "int_broken.sql"
    bad.write_text("CREATE OR REPLACE VIEW int_broken AS SELECT * FROM no_such_relation;\n")
    broken = sql_modules.SqlModule(
        bad, "intermediate", "int_broken", "VIEW", "broken", "none", {}, frozenset()
    )
    first = next(i for i, m in enumerate(real) if m.layer == "intermediate")
    monkeypatch.setattr(
        sql_modules, "discover", lambda *a, **k: (*real[:first], broken, *real[first:])
    )
    files = sorted(
        (shared_samples / "nccl_debug").glob("gfbench_2.20.5_2rank_normal_rank0_debugfile.txt")
    )
    store = Store.open(tmp_path / "s")
    ingest_paths(store, files, run_id="r")
    con = store.connect()
    try:
        views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
        assert "int_broken" not in views
        assert {"comm_ops", "int_comm_ops_classified", "int_calls"} <= views
        assert con.execute("SELECT count(*) FROM comm_ops").fetchone()[0] > 0  # type: ignore[index]
    finally:
        con.close()
