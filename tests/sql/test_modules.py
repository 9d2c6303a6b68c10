"""The rules of sql/: names, headers, documented columns, layering, and that all files load."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from commscope.pipeline.derive import materialise_intermediates
from commscope.pipeline.sql_modules import (
    SQL_DIR,
    SqlModuleError,
    apply,
    check_layering,
    discover,
    parse_module,
)
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


def _sql_tree(root: Path, files: dict[str, str]) -> Path:
    """A throwaway sql/ folder: every layer present, ``files`` keyed 'layer/name.sql'."""
    for layer in ("macros", "staging", "intermediate", "marts"):
        (root / layer).mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (root / rel).write_text(text)
    return root


_INT_X = (
    "-- d\n-- g\nCREATE VIEW int_x(\n  -- first doc\n  a,\n  -- second doc\n  b\n)"
    " AS SELECT 1 AS a, 2 AS b\n"
)


def test_a_pass_through_mart_takes_its_intermediates_columns_and_docs(tmp_path: Path) -> None:
    root = _sql_tree(
        tmp_path / "sql",
        {
            "intermediate/int_x.sql": _INT_X,
            "marts/all_x.sql": "-- mart d\n-- mart g\nCREATE OR REPLACE VIEW all_x AS\nSELECT * FROM int_x;\n",
            "marts/some_x.sql": "-- d2\n-- g2\nCREATE VIEW some_x AS SELECT b, a FROM int_x\n",
        },
    )
    mods = {m.name: m for m in discover(root)}
    assert mods["all_x"].publishes == "int_x"
    assert mods["all_x"].published_columns is None
    assert mods["all_x"].column_docs == {"a": "first doc", "b": "second doc"}
    assert mods["all_x"].description == "mart d"  # the mart keeps its own header
    assert list(mods["some_x"].column_docs.items()) == [("b", "second doc"), ("a", "first doc")]
    assert mods["int_x"].publishes is None


def test_a_pass_through_must_be_a_mart_of_an_intermediate_with_documented_columns(
    tmp_path: Path,
) -> None:
    unknown_column = _sql_tree(
        tmp_path / "a",
        {
            "intermediate/int_x.sql": _INT_X,
            "marts/m.sql": "-- d\n-- g\nCREATE VIEW m AS SELECT a, c FROM int_x\n",
        },
    )
    with pytest.raises(SqlModuleError, match=r"int_x documents no column \['c'\]"):
        discover(unknown_column)
    in_intermediate = _sql_tree(
        tmp_path / "b",
        {
            "intermediate/int_x.sql": _INT_X,
            "intermediate/int_y.sql": "-- d\n-- g\nCREATE VIEW int_y AS SELECT * FROM int_x\n",
        },
    )
    with pytest.raises(SqlModuleError, match="must be a mart publishing an intermediate"):
        discover(in_intermediate)
    # A view without a column list that does more than select is no pass-through: it documents
    # nothing, which the rule of documented columns then refuses.
    filtered = _sql_tree(
        tmp_path / "c",
        {
            "intermediate/int_x.sql": _INT_X,
            "marts/m.sql": "-- d\n-- g\nCREATE VIEW m AS SELECT * FROM int_x WHERE a > 1\n",
        },
    )
    m = {x.name: x for x in discover(filtered)}["m"]
    assert m.publishes is None and m.column_docs == {}


def test_pass_through_marts_have_exactly_the_documented_columns_in_duckdb(tmp_path: Path) -> None:
    published = [m for m in discover() if m.publishes is not None]
    assert {m.name for m in published} >= {"iterations", "iteration_breakdown", "run_world"}
    store = Store.open(tmp_path / "s")
    con = duckdb.connect()
    store.create_views(con)
    store.create_model_input_views(con)
    apply(con)
    for m in published:
        cols = [
            c
            for (c,) in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = ? "
                "ORDER BY column_index",
                [m.name],
            ).fetchall()
        ]
        assert cols == list(m.column_docs), m.name
