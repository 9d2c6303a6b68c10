"""SQL case tests: tiny given/expect rows per SQL object (tests/sql/cases/<object>.yaml).

Each YAML file is a list of cases::

    - name: ring_allreduce_two_ranks          # the scenario
      given:                                   # upstream relation -> rows
        comm_ops:                              # canonical tables: missing columns are null
          - {run_id: r, rank: 0, op: all_reduce, msg_bytes: 100}
        run_config:
          - {run_id: r, pp: 1, tp: 2, dp: 1}
      expect:                                  # rows of the object (only these columns compared)
        - {src_rank: 0, dst_rank: 1, bytes: 100}
      order_matters: false                     # optional
      tolerance: 1.0e-9                        # optional, relative, for floats

The runner loads the macros, creates each given relation as a table (canonical tables and
``run_config``/``predicted_*`` with their full schemas, a SQL view's rows with every column it
documents, those the rows leave out null, anything else from the rows), then runs
the object's own SQL file, then every SQL file it depends on that is not given.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
import yaml
from polars.testing import assert_frame_equal

from commscope.parsers.schema import TABLES, conform, empty_frame
from commscope.pipeline.derive import INPUT_COLUMNS, RUN_CONFIG_COLUMNS, predictions
from commscope.pipeline.sql_modules import SqlModule, apply, discover
from tests.sql.conftest import tables_for_views

CASES = Path(__file__).with_name("cases")


@functools.cache
def _cases() -> list[tuple[str, dict[str, Any]]]:
    # libyaml's loader when present: the pure-Python one took 3 s per read of the cases
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out = []
    for f in sorted(CASES.glob("*.yaml")):
        for case in yaml.load(f.read_text(), Loader=loader) or []:
            out.append((f.stem, case))
    return out


def _given_frame(name: str, rows: list[dict[str, Any]]) -> pl.DataFrame:
    if name in TABLES:
        if not rows:
            return empty_frame(name)
        df = pl.DataFrame(rows, infer_schema_length=None)
        return pl.from_arrow(conform(df, name))  # type: ignore[return-value]
    if name == "run_config":
        return pl.DataFrame(rows, schema=RUN_CONFIG_COLUMNS)
    model = predictions(None, "x")
    if name in model:
        return pl.DataFrame(rows, schema=model[name].schema)
    return pl.DataFrame(rows, infer_schema_length=None)


def _needed(target: SqlModule, given: set[str]) -> tuple[SqlModule, ...]:
    by_name = {m.name.lower(): m for m in discover()}
    keep: dict[str, SqlModule] = {}

    def visit(m: SqlModule) -> None:
        for ref in m.references:
            if ref in by_name and ref not in given and ref not in keep:
                visit(by_name[ref])
        keep[m.name.lower()] = m

    visit(target)
    macros = [m for m in discover() if m.layer == "macros" and m.name.lower() not in keep]
    ordered = [m for m in discover() if m.name.lower() in keep]
    return tuple(macros + ordered)


@pytest.mark.parametrize(
    ("obj", "case"), _cases(), ids=[f"{o}:{c['name']}" for o, c in _cases()] or None
)
def test_sql_case(obj: str, case: dict[str, Any]) -> None:
    modules = {m.name: m for m in discover()}
    assert obj in modules, f"cases file for unknown SQL object {obj!r}"
    con = duckdb.connect()
    given = {k.lower() for k in case.get("given", {})}
    for name, rows in case.get("given", {}).items():
        df = _given_frame(name, rows or [])
        if name in modules and not df.width:
            # an empty given view: its documented columns, no rows
            df = pl.DataFrame(schema=dict.fromkeys(modules[name].column_docs, pl.Null))
        elif name in modules:
            # a given view's documented columns the rows leave out are null (a case need not
            # restate every column an upstream view has, only those its object reads)
            absent = [c for c in modules[name].column_docs if c not in df.columns]
            df = df.with_columns(pl.lit(None).alias(c) for c in absent)
        con.register(f"_g_{name}", df.to_arrow())
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM _g_{name}")
    # canonical tables a case does not give are empty (stg_store__comm_ops reads communicators
    # too: the cross-source rank of a process)
    for rel in (*INPUT_COLUMNS, *TABLES):
        if rel not in given:
            con.register(f"_g_{rel}", _given_frame(rel, []).to_arrow())
            con.execute(f"CREATE TABLE {rel} AS SELECT * FROM _g_{rel}")
    needed = _needed(modules[obj], given)
    apply(con, needed, comments=False)
    # as derive does: each intermediate computed once, into a table
    tables_for_views(con, [m for m in needed if m.name != obj])
    got = con.sql(f"SELECT * FROM {obj}").pl()
    expect = pl.DataFrame(case.get("expect") or [], infer_schema_length=None)
    if expect.width:
        missing = set(expect.columns) - set(got.columns)
        assert not missing, f"{obj} has no columns {missing}"
        got = got.select(expect.columns)
        expect = expect.cast({c: got.schema[c] for c in expect.columns}, strict=False)
    else:
        assert got.height == 0, got
        return
    order = bool(case.get("order_matters", False))
    if not order:
        got = got.sort(got.columns, nulls_last=True)
        expect = expect.sort(expect.columns, nulls_last=True)
    assert_frame_equal(got, expect, check_dtypes=False, rel_tol=float(case.get("tolerance", 1e-9)))
