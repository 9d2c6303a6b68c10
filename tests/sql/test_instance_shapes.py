"""int_instance_shapes: one row per distinct shape, keyed by instance_shape_key; its keys are
unique (a collision stops the query).

Why: int_instance_matched stores a hash of each call's shape values (instance_shape_key) instead
of the strings, and int_instance_members joins them back from int_instance_shapes by that key; a
collision must fail, not give a call another call's host, file or group (the sample runs'
golden marts and int_instance_members' case check that every matched call finds its shape).
"""

from __future__ import annotations

import duckdb
import pytest

LANE_COLUMNS = (
    "run_id VARCHAR, rank INTEGER, op VARCHAR, source_format VARCHAR, host VARCHAR, "
    "source_file VARCHAR, traffic_class VARCHAR, global_group VARCHAR, group_size INTEGER, "
    "msg_bytes BIGINT, timing_source VARCHAR"
)


def _shapes(con: duckdb.DuckDBPyConnection) -> None:
    from commscope.pipeline.sql_modules import discover

    mods = {m.name: m for m in discover()}
    for name in ("instance_shape_key", "int_instance_shapes"):
        con.execute(mods[name].text)


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute(f"CREATE TABLE int_instance_lane_calls ({LANE_COLUMNS})")
    c.execute(
        "INSERT INTO int_instance_lane_calls VALUES "
        "('r', 0, 'all_reduce', 'nccl_debug', 'h0', 'f0', 'TP', '0,1', 2, 8, NULL), "
        "('r', 0, 'all_reduce', 'nccl_debug', 'h0', 'f0', 'TP', '0,1', 2, 8, NULL), "
        "('r', 1, 'all_reduce', 'nccl_debug', 'h1', 'f1', 'TP', '0,1', 2, 8, NULL)"
    )
    _shapes(c)
    return c


def test_one_row_per_distinct_shape_with_its_key(con: duckdb.DuckDBPyConnection) -> None:
    rows = con.execute(
        "SELECT host, shape_key = instance_shape_key(host, source_format, source_file, op, "
        "traffic_class, global_group, group_size, msg_bytes, timing_source) "
        "FROM int_instance_shapes ORDER BY host"
    ).fetchall()
    assert rows == [("h0", True), ("h1", True)]


def test_a_shape_key_collision_stops_the_query(con: duckdb.DuckDBPyConnection) -> None:
    # every shape hashed alike: the shapes must refuse, not give a call another call's values
    con.execute(
        "CREATE OR REPLACE MACRO instance_shape_key(host, source_format, source_file, op, "
        "traffic_class, global_group, group_size, msg_bytes, timing_source) AS 42::UBIGINT"
    )
    with pytest.raises(duckdb.Error, match="two call shapes share shape_key 42"):
        con.execute("SELECT count(*) FROM int_instance_shapes").fetchall()
