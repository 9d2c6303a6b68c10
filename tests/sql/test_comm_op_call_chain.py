"""The narrow call chain (session 12, issue 21): int_comm_op_shape_keys, the sequencing read from
the shaped calls with their names by shape, the per-call values int_comm_op_iteration carries,
and int_instance_lane_shaped read from the iteration rows, each against an independent oracle on
every sample run (several formats per rank, timed and untimed calls, markers).

Why: int_instance_lane_shaped used to read the calls again (stg_store__comm_ops, the shape id
hashed per call) and join all of them to their iteration rows on (call_key, run_id, rank,
source_line); now it takes the shape id, seq, peer and times from int_comm_op_iteration and the
lane's calls by their shapes. The oracle below is that former definition, so the two must give
the same rows; the iteration rows' carried values must be the calls' own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from commscope.pipeline.store import Store
from tests.sql.conftest import objects_over_store

OBJECTS = ("int_comm_op_shapes", "int_comm_op_iteration", "int_instance_lane_shaped")

KEY = (
    "run_id, rank, host, source_format, source_file, op, comm_id, group_size, group_rank, dtype, "
    "msg_bytes, is_traffic, pid, algorithm, timing_source, group_source"
)

SHAPE_KEYS_ORACLE = f"""
SELECT comm_op_shape_id({KEY}) AS shape_id, {KEY}, count(*) AS n_calls, count(dur_ns) AS n_timed
FROM stg_store__comm_ops
GROUP BY ALL
"""

CARRIED_ORACLE = f"""
SELECT run_id, rank, source_file, source_line, comm_op_shape_id({KEY}) AS shape_id, seq,
  peer_rank, ts_ns, end_ns, launch_ts_ns, call_key
FROM stg_store__comm_ops
"""

CARRIED = """
SELECT run_id, rank, source_file, source_line, shape_id, seq, peer_rank, ts_ns, end_ns,
  launch_ts_ns, call_key
FROM int_comm_op_iteration
"""

LANE_ORACLE = f"""
WITH
  timed AS (
    SELECT run_id, rank, source_format, source_file, source_line, ts_ns, dur_ns, iteration
    FROM int_comm_ops_timed
    WHERE source = 'comm_ops'
  ),
  lane AS (
    SELECT DISTINCT run_id, rank, source_format FROM timed
    UNION ALL
    SELECT p.run_id, p.rank, p.source_format
    FROM int_rank_primary_source AS p
    ANTI JOIN (SELECT DISTINCT run_id, rank FROM timed) AS t
      ON t.run_id = p.run_id AND t.rank = p.rank
  ),
  calls AS (
    SELECT
      comm_op_shape_id({KEY.replace(", ", ", o.").replace("run_id,", "o.run_id,", 1)}) AS shape_id,
      o.run_id, o.rank, o.call_key, o.source_file, o.source_line, o.seq, o.peer_rank,
      ci.launch_ts_ns,
      coalesce(o.ts_ns, ci.ts_ns) AS order_ts,
      CASE WHEN ci.method <> 'detected' OR ci.period IS NOT NULL THEN ci.iteration END
        AS ci_iteration,
      ci.method IN ('source', 'marker') AS step_iteration
    FROM stg_store__comm_ops AS o
    SEMI JOIN lane AS l
      ON l.run_id = o.run_id AND l.rank = o.rank
      AND l.source_format IS NOT DISTINCT FROM o.source_format
    LEFT JOIN int_comm_op_iteration AS ci
      ON ci.call_key = o.call_key AND ci.run_id = o.run_id AND ci.rank = o.rank
      AND ci.source_line = o.source_line
    WHERE o.rank IS NOT NULL
  )
SELECT
  c.shape_id, c.call_key, c.source_line, c.seq,
  CASE WHEN t.rank IS NOT NULL THEN t.iteration ELSE c.ci_iteration END AS iteration,
  c.step_iteration, c.launch_ts_ns, c.order_ts, c.peer_rank,
  t.rank IS NOT NULL AS timed, t.ts_ns, t.dur_ns
FROM calls AS c
LEFT JOIN timed AS t
  ON t.run_id = c.run_id AND t.rank = c.rank AND t.source_file = c.source_file
  AND t.source_line = c.source_line
"""


@pytest.fixture(scope="module")
def chain(all_samples: tuple[Store, dict[str, Path]]) -> Iterator[duckdb.DuckDBPyConnection]:
    """Every sample run's calls copied into tables and the chain's objects materialised."""
    store, _ = all_samples
    con = objects_over_store(store, OBJECTS)
    yield con
    con.close()


def _same_rows(con: duckdb.DuckDBPyConnection, got: str, want: str) -> None:
    """``got`` and ``want`` hold the same rows, duplicates counted (nulls equal)."""
    extra = con.sql(f"({got}) EXCEPT ALL ({want})").fetchall()
    missing = con.sql(f"({want}) EXCEPT ALL ({got})").fetchall()
    assert (extra[:5], missing[:5]) == ([], [])


def test_shape_keys_are_the_calls_distinct_shapes(chain: duckdb.DuckDBPyConnection) -> None:
    _same_rows(chain, "SELECT * FROM int_comm_op_shape_keys", SHAPE_KEYS_ORACLE)
    # the classified shapes are the same shapes
    _same_rows(
        chain,
        "SELECT shape_id FROM int_comm_op_shapes",
        "SELECT shape_id FROM int_comm_op_shape_keys",
    )


def test_iteration_rows_carry_each_calls_own_values(chain: duckdb.DuckDBPyConnection) -> None:
    _same_rows(chain, CARRIED, CARRIED_ORACLE)


def test_lane_shaped_is_the_join_of_the_calls_with_their_iterations(
    chain: duckdb.DuckDBPyConnection,
) -> None:
    _same_rows(chain, "SELECT * FROM int_instance_lane_shaped", LANE_ORACLE)
    # the samples exercise the lane: a rank logged by several formats (calls left out of its
    # lane), timed calls, and calls with an iteration
    ranked = chain.execute("SELECT count(*) FROM stg_store__comm_ops WHERE rank IS NOT NULL")
    row = ranked.fetchone()
    assert row is not None
    n_ranked = row[0]
    lane = chain.execute(
        "SELECT count(*), count(*) FILTER (timed), count(iteration) FROM int_instance_lane_shaped"
    )
    row = lane.fetchone()
    assert row is not None
    n_lane, n_timed, n_iter = row
    assert 0 < n_lane < n_ranked
    assert n_timed > 0 and n_iter > 0
