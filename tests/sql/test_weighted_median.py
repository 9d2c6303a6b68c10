"""weighted_median (sql/macros/weighted_median.sql) against DuckDB's own median.

The rule: the median of counted values per key is DuckDB's ``median`` of the values written out,
each as many times as its weight. The oracle is that: the same values repeated (``unnest`` of
``range(w)``) and DuckDB's ``median`` per key. Hand-made given/expect cases name the scenarios
(odd and even totals, a middle that falls between two values, nulls, zero weights, a struct key
with null fields), and generated multisets check the macro against the oracle. call_totals (median
size) and effective_bandwidth (median correction factor) take their medians with the macro.
"""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commscope.pipeline.sql_modules import SQL_DIR


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute((SQL_DIR / "macros" / "weighted_median.sql").read_text())
    return c


def weighted(
    con: duckdb.DuckDBPyConnection, rows: list[tuple[object, object, int]]
) -> dict[object, float]:
    """The macro's medians of ``rows`` (k, v, w) per key."""
    con.execute("CREATE OR REPLACE TEMP TABLE counted (k VARCHAR, v DOUBLE, w BIGINT)")
    if rows:
        con.executemany("INSERT INTO counted VALUES (?, ?, ?)", rows)
    return dict(con.execute("SELECT k, median FROM weighted_median(counted)").fetchall())


def written_out(
    con: duckdb.DuckDBPyConnection, rows: list[tuple[object, object, int]]
) -> dict[object, float]:
    """The oracle: DuckDB's median of the values repeated w times, per key."""
    con.execute("CREATE OR REPLACE TEMP TABLE counted (k VARCHAR, v DOUBLE, w BIGINT)")
    if rows:
        con.executemany("INSERT INTO counted VALUES (?, ?, ?)", rows)
    return dict(
        con.execute(
            "SELECT k, median(v) FROM (SELECT k, v FROM counted, unnest(range(greatest(w, 0)))) "
            "GROUP BY k HAVING count(v) > 0"
        ).fetchall()
    )


CASES = {
    # one key: 1 x 10, 2 x 20 -> 10, 20, 20: the middle is 20
    "odd_total": ([("a", 10, 1), ("a", 20, 2)], {"a": 20.0}),
    # 2 x 10, 2 x 30 -> 10, 10, 30, 30: the mean of the two middle values
    "even_total_between_two_values": ([("a", 30, 2), ("a", 10, 2)], {"a": 20.0}),
    # 3 x 10, 1 x 30: both middle values are 10
    "even_total_both_middles_one_value": ([("a", 10, 3), ("a", 30, 1)], {"a": 10.0}),
    # rows of one value add up: 10 (1 + 1), 40 (3) -> 10, 10, 40, 40, 40
    "repeated_rows_add_up": ([("a", 10, 1), ("a", 40, 3), ("a", 10, 1)], {"a": 40.0}),
    # a null value and a zero weight count nothing; a key with neither has no row
    "nulls_and_zero_weights_left_out": (
        [("a", None, 5), ("a", 7, 1), ("a", 100, 0), ("b", None, 2), ("c", 5, 0)],
        {"a": 7.0},
    ),
    # two keys apart
    "per_key": ([("a", 1, 1), ("b", 2, 1), ("b", 4, 1)], {"a": 1.0, "b": 3.0}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_given_expect(con: duckdb.DuckDBPyConnection, case: str) -> None:
    rows, expect = CASES[case]
    assert weighted(con, rows) == expect
    assert written_out(con, rows) == expect


def test_struct_key_with_null_fields(con: duckdb.DuckDBPyConnection) -> None:
    """A key of several columns as a struct: null fields group together, as the columns would."""
    got = con.execute(
        "WITH rel AS ("
        "  SELECT {'op': op, 'cls': cls} AS k, v, w FROM (VALUES"
        "    ('x', NULL, 1.0, 1), ('x', NULL, 3.0, 1), ('x', 'TP', 5.0, 2), (NULL, NULL, 2.0, 3)"
        "  ) AS t (op, cls, v, w)"
        ") SELECT m.k.op, m.k.cls, m.median FROM weighted_median(rel) AS m ORDER BY ALL"
    ).fetchall()
    assert got == [("x", "TP", 5.0), ("x", None, 2.0), (None, None, 2.0)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.one_of(
                st.none(),
                st.integers(-5, 5).map(float),
                st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False),
            ),
            st.integers(0, 4),
        ),
        max_size=30,
    )
)
def test_equals_duckdb_median_of_the_values_written_out(
    rows: list[tuple[str, float | None, int]],
) -> None:
    c = duckdb.connect()
    c.execute((SQL_DIR / "macros" / "weighted_median.sql").read_text())
    assert weighted(c, rows) == written_out(c, rows)
    c.close()


@pytest.mark.parametrize("mart", ["call_totals", "effective_bandwidth"])
def test_marts_take_their_counted_medians_with_the_macro(mart: str) -> None:
    """The rule is stated once: each mart calls the macro and writes no running count itself."""
    sql = (SQL_DIR / "marts" / f"{mart}.sql").read_text()
    assert "weighted_median(" in sql
    assert "UNBOUNDED PRECEDING" not in sql
