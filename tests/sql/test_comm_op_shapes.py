"""int_comm_op_shapes: its shape ids are unique (a collision stops the query) and its ``counted``
equals int_rank_primary_source's choice.

Why: the shape id is a hash each call computes from its own key (comm_op_shape_id), so the shapes
and the shaped calls never read each other; a collision must fail, not give a call two shapes.
``counted`` applies int_rank_primary_source's rule to the shapes' call counts (so that the view
does not read the calls, the groups and the world again through it): the two must agree on every
sample run and on hand-made ties.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from commscope.pipeline.store import Store
from tests.sql.conftest import calls_catalog, objects_over_store

DISAGREE = """
SELECT s.run_id, s.rank, s.source_format, s.counted, p.source_format AS primary_format
FROM int_comm_op_shapes AS s
LEFT JOIN int_rank_primary_source AS p ON p.run_id = s.run_id AND p.rank = s.rank
WHERE s.counted IS DISTINCT FROM (
  s.rank IS NULL OR coalesce(p.source_format, '') = coalesce(s.source_format, '')
)
"""

OBJECTS = ("int_comm_op_shapes", "int_rank_primary_source")


def _calls(
    fmt: str, rank: int | None, n: int, *, timed: bool, op: str = "all_reduce"
) -> list[dict[str, object]]:
    return [
        {
            "run_id": "r",
            "rank": rank,
            "source_format": fmt,
            "source_file": f"{fmt}_{rank}",
            "source_line": i + 1,
            "op": op,
            "msg_bytes": 100,
            "ts_ns": 1000 * i,
            "dur_ns": 10 if timed else None,
        }
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def ties() -> Iterator[duckdb.DuckDBPyConnection]:
    """Ranks whose primary source is decided by each step of the rule."""
    rows = (
        # 0: equal traffic, the timed source wins
        _calls("nccl_debug", 0, 3, timed=False)
        + _calls("kineto", 0, 3, timed=True)
        # 1: a Flight Recorder dump never outcounts a full source
        + _calls("flight_recorder", 1, 9, timed=True)
        + _calls("kineto", 1, 2, timed=True)
        # 2: DeepSpeed's logger loses to a source with the communicator
        + _calls("deepspeed_comms", 2, 9, timed=True)
        + _calls("nccl_debug", 2, 2, timed=False)
        # 3: a full tie: nccl_debug before kineto
        + _calls("kineto", 3, 2, timed=False)
        + _calls("nccl_debug", 3, 2, timed=False)
        # 4: more data-moving calls win over more calls
        + _calls("kineto", 4, 4, timed=False)
        + _calls("nsys", 4, 3, timed=False)
        + _calls("nsys", 4, 5, timed=False, op="barrier")
        # calls without a rank count
        + _calls("nccl_debug", None, 2, timed=False)
    )
    con = calls_catalog(rows)
    yield con
    con.close()


def test_counted_agrees_with_primary_source_on_ties(ties: duckdb.DuckDBPyConnection) -> None:
    assert ties.sql(DISAGREE).fetchall() == []
    chosen = dict(ties.sql("SELECT rank, source_format FROM int_rank_primary_source").fetchall())
    assert chosen == {0: "kineto", 1: "kineto", 2: "nccl_debug", 3: "nccl_debug", 4: "kineto"}
    counted = ties.sql(
        "SELECT rank, source_format FROM int_comm_op_shapes WHERE counted ORDER BY ALL"
    ).fetchall()
    assert (None, "nccl_debug") in counted
    assert sorted((r, f) for r, f in counted if r is not None) == sorted(chosen.items())


def test_counted_agrees_with_primary_source_on_samples(
    all_samples: tuple[Store, dict[str, Path]],
) -> None:
    store, _ = all_samples
    con = objects_over_store(store, OBJECTS)
    try:
        assert con.sql(DISAGREE).fetchall() == []
        # the samples hold ranks logged by several formats (a non-trivial choice)
        multi = con.execute("SELECT count(*) FROM int_rank_primary_source WHERE formats_logged > 1")
        assert multi.fetchone()[0] > 0  # type: ignore[index]
    finally:
        con.close()


def test_a_shape_id_collision_stops_the_query(ties: duckdb.DuckDBPyConnection) -> None:
    # every shape hashed alike: the shapes must refuse, not join a call to several shapes
    ties.execute(
        "CREATE OR REPLACE TEMP MACRO comm_op_shape_id("
        "run_id, rank, host, source_format, source_file, op, comm_id, group_size, group_rank, "
        "dtype, msg_bytes, is_traffic, pid, algorithm, timing_source, group_source) AS 42::UBIGINT"
    )
    try:
        with pytest.raises(duckdb.Error, match="two call shapes share shape_id 42"):
            ties.sql("SELECT count(*) FROM int_comm_ops_classified").fetchall()
    finally:
        ties.execute("DROP MACRO temp.comm_op_shape_id")
    # the real ids are unique: one shape per distinct key
    n = ties.execute("SELECT count(*), count(DISTINCT shape_id) FROM int_comm_op_shapes").fetchone()
    assert n is not None and n[0] == n[1] > 0
