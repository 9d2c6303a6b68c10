"""The rules of sql/: names, headers, documented columns, layering, and that all files load."""

from __future__ import annotations

from pathlib import Path

import duckdb

from commscope.pipeline.derive import materialise_intermediates
from commscope.pipeline.sql_modules import SQL_DIR, apply, check_layering, discover, parse_module
from commscope.pipeline.store import Store


def test_every_file_is_one_named_documented_object() -> None:
    modules = discover()
    assert modules, "sql/ has no modules"
    for m in modules:
        assert m.name == m.path.stem
        assert m.layer == m.path.parent.name
        if m.layer == "staging":
            assert m.name.startswith("stg_"), m.name
        if m.layer == "intermediate":
            assert m.name.startswith("int_"), m.name
        if m.kind == "VIEW":
            assert m.column_docs, f"{m.path}: output columns must be listed and commented"
            undocumented = [c for c, d in m.column_docs.items() if not d]
            assert not undocumented, f"{m.path}: undocumented columns {undocumented}"


def test_layer_direction_is_respected() -> None:
    assert check_layering(discover()) == []


def test_layering_check_catches_a_wrong_read(tmp_path: Path) -> None:
    bad = tmp_path / "staging" / "stg_bad.sql"
    bad.parent.mkdir()
    bad.write_text("-- d\n-- g\nCREATE VIEW stg_bad(\n  -- c\n  x\n) AS SELECT x FROM some_mart\n")
    m = parse_module(bad, "staging")
    assert m.references == frozenset({"some_mart"})
    assert check_layering((m,)) == ["stg_bad.sql: reads unknown relation 'some_mart'"]


def test_all_modules_load_on_an_empty_store_with_comments(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s")
    con = duckdb.connect()
    store.create_views(con)
    store.create_model_input_views(con)  # empty typed run_config / predicted_* tables
    apply(con)
    for m in discover():
        if m.kind == "VIEW":
            got = con.execute(
                "SELECT comment FROM duckdb_views() WHERE view_name = ?", [m.name]
            ).fetchone()
            assert got and got[0].startswith(m.description)
            documented = [c for c, doc in m.column_docs.items() if doc]
            cols = con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = ? "
                "AND comment IS NOT NULL",
                [m.name],
            ).fetchall()
            assert {c for (c,) in cols} >= set(documented), m.name
    # Every view runs over the empty store as derive runs it: each intermediate computed into a
    # table in load order, then every view read (a live deep view would be planned for minutes).
    materialise_intermediates(con)
    for m in discover():
        if m.kind == "VIEW":
            con.execute(f"SELECT * FROM {m.name} LIMIT 0")
    assert SQL_DIR.is_dir()
