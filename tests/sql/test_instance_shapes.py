"""The instance chain's integer keys (issue 21) against oracles on every sample run.

int_instance_matched stores each member call's shape_id (the lane call's own) instead of its shape
values, and int_instance_members joins them back from int_instance_shapes (one row per call
shape); int_instance_groups finds repeated seqs by sorting a dense integer per (run, group, rank)
rather than the strings; int_instance_matched's k-th call windows sort dense integers that stand
for the run, rank, op and file name. Each oracle here computes the same thing the direct way:

* a member's shape values are the lane call's own (int_instance_lane_calls, per call, joined on
  the call's identity: run, rank, file, line);
* a group's method, seq uniqueness and range: the header's rules with count(DISTINCT seq) per
  (run, group, rank) over the lane calls, no window;
* every member's instance_seq: the k-th call windows over the strings themselves (run_id, op,
  file name), as the matching was written before the integers.

The sample runs (``all_samples``: every shared sample and sample_traces/ folder) cover NCCL logs
matched by seq (repeated opCounts in groups) and by order, Kineto and nsys ranks matched by order
inside iterations, p2p pairs, and timed members.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from commscope.pipeline.store import Store
from tests.sql.conftest import objects_over_store

pytestmark = pytest.mark.slow  # every sample ingested (session fixture), the chain computed once


@pytest.fixture(scope="module")
def chain(all_samples: tuple[Store, dict[str, Path]]) -> duckdb.DuckDBPyConnection:
    """Every sample run with the instance chain computed as derive computes it."""
    store, _ = all_samples
    return objects_over_store(store, ["int_instance_members", "int_instance_lane_calls"])


SHAPE_VALUES = (
    "host",
    "source_format",
    "source_file",
    "op",
    "traffic_class",
    "global_group",
    "msg_bytes",
    "timing_source",
    "timed",
    "ts_ns",
    "end_ns",
    "dur_ns",
)
"""The columns a member takes from its shape (and its timing: end_ns is ts_ns + dur_ns)."""

# the header's rules per (run, group), with count(DISTINCT seq) for a repeated seq
GROUPS_ORACLE = """
WITH
  coll AS (
    SELECT * FROM int_instance_lane_calls
    WHERE on_group AND (op NOT IN ('send', 'recv') OR peer_resolved IS NULL)
  ),
  per_rank AS (
    SELECT
      run_id, gk, rank,
      any_value(source_format) AS source_format,
      count(seq) = count(*) AND (min(seq) < max(seq) OR count(*) = 1) AS seq_usable,
      count(seq) = count(*) AND count(DISTINCT seq) = count(seq) AS seq_unique,
      coalesce(count(seq) = count(*) AND count(DISTINCT seq) = count(seq)
        AND max(seq) - min(seq) + 1 = count(*), FALSE) AS seq_contiguous,
      min(seq) AS lo, max(seq) AS hi,
      bool_and(coalesce(step_iteration, FALSE) AND iteration IS NOT NULL) AS iter_usable
    FROM coll
    GROUP BY run_id, gk, rank
  )
SELECT
  run_id, gk,
  CASE WHEN bool_and(seq_usable) AND count(DISTINCT source_format) = 1 THEN 'seq' ELSE 'order'
  END AS match_method,
  bool_and(iter_usable) AS within_iteration,
  bool_and(seq_unique) AS seq_unique,
  CASE WHEN bool_and(seq_contiguous) AND min(lo) = max(lo) AND min(hi) = max(hi) THEN min(lo)
  END AS seq_first
FROM per_rank
GROUP BY run_id, gk
"""

# instance_seq the direct way: the k-th call windows over run_id, op and the file name
SEQ_ORACLE = """
WITH
  coll AS (
    SELECT
      c.*,
      g.match_method = 'seq' AND g.seq_unique AS seq_dense,
      g.seq_first,
      CASE WHEN g.match_method = 'seq' THEN c.seq WHEN g.within_iteration THEN c.iteration
        ELSE 0 END AS key_major
    FROM int_instance_lane_calls AS c
    JOIN int_instance_groups AS g ON g.run_id = c.run_id AND g.gk = c.gk
    WHERE c.on_group AND (c.op NOT IN ('send', 'recv') OR c.peer_resolved IS NULL)
  ),
  keyed AS (
    SELECT *, row_number() OVER (PARTITION BY run_id, gk, rank, key_major
      ORDER BY launch_ts_ns, order_ts, source_file, source_line) AS key_minor
    FROM coll WHERE NOT seq_dense
  ),
  base AS (
    SELECT run_id, gk, key_major, sum(max(key_minor)) OVER (PARTITION BY run_id, gk
      ORDER BY key_major ROWS UNBOUNDED PRECEDING) - max(key_minor) AS base
    FROM keyed GROUP BY run_id, gk, key_major
  ),
  p2p AS (
    SELECT *,
      CASE WHEN op = 'send' THEN rank ELSE peer_resolved END AS src,
      CASE WHEN op = 'send' THEN peer_resolved ELSE rank END AS dst
    FROM int_instance_lane_calls
    WHERE peer_resolved IS NOT NULL AND peer_resolved <> rank
  ),
  p2p_method AS (
    SELECT run_id, src, dst,
      bool_and(coalesce(step_iteration, FALSE) AND iteration IS NOT NULL) AS within
    FROM p2p GROUP BY ALL
  ),
  p2p_keyed AS (
    SELECT p.*, CASE WHEN m.within THEN p.iteration ELSE 0 END AS key_major,
      row_number() OVER (PARTITION BY p.run_id, p.rank, p.op, p.peer_resolved,
        CASE WHEN m.within THEN p.iteration ELSE 0 END
        ORDER BY p.launch_ts_ns, p.order_ts, p.source_file, p.source_line) AS key_minor
    FROM p2p AS p JOIN p2p_method AS m USING (run_id, src, dst)
  ),
  p2p_base AS (
    SELECT run_id, src, dst, key_major, sum(max(key_minor)) OVER (PARTITION BY run_id, src, dst
      ORDER BY key_major ROWS UNBOUNDED PRECEDING) - max(key_minor) AS base
    FROM p2p_keyed GROUP BY run_id, src, dst, key_major
  )
SELECT run_id, rank, source_file, source_line, key_major - seq_first + 1 AS instance_seq
FROM coll WHERE seq_dense AND seq_first IS NOT NULL
UNION ALL
SELECT run_id, rank, source_file, source_line,
  dense_rank() OVER (PARTITION BY run_id, gk ORDER BY key_major)
FROM coll WHERE seq_dense AND seq_first IS NULL
UNION ALL
SELECT k.run_id, k.rank, k.source_file, k.source_line, b.base + k.key_minor
FROM keyed AS k JOIN base AS b
  ON b.run_id = k.run_id AND b.gk = k.gk AND b.key_major IS NOT DISTINCT FROM k.key_major
UNION ALL
SELECT k.run_id, k.rank, k.source_file, k.source_line, b.base + k.key_minor
FROM p2p_keyed AS k JOIN p2p_base AS b
  ON b.run_id = k.run_id AND b.src = k.src AND b.dst = k.dst
  AND b.key_major IS NOT DISTINCT FROM k.key_major
"""


def _same(con: duckdb.DuckDBPyConnection, got: str, want: str) -> int:
    """Rows of ``got`` and ``want`` (bags) that the other lacks; asserts both are empty."""
    a, b = f"SELECT * FROM ({got})", f"SELECT * FROM ({want})"
    extra = con.execute(f"SELECT count(*) FROM ({a} EXCEPT ALL {b})").fetchone()
    missing = con.execute(f"SELECT count(*) FROM ({b} EXCEPT ALL {a})").fetchone()
    assert (extra, missing) == ((0,), (0,))
    n = con.execute(f"SELECT count(*) FROM ({got})").fetchone()
    return int(n[0]) if n else 0


def test_members_take_the_lane_calls_own_shape_values(chain: duckdb.DuckDBPyConnection) -> None:
    cols = ", ".join(SHAPE_VALUES)
    got = f"SELECT run_id, rank, source_line, {cols} FROM int_instance_members"
    want = (
        f"SELECT l.run_id, l.rank, l.source_line, {', '.join('l.' + c for c in SHAPE_VALUES)} "
        "FROM int_instance_lane_calls AS l "
        "SEMI JOIN int_instance_members AS m ON m.run_id = l.run_id AND m.rank = l.rank "
        "AND m.source_file = l.source_file AND m.source_line = l.source_line"
    )
    assert _same(chain, got, want) > 1000  # every sample's members


def test_groups_match_the_rules_without_the_window(chain: duckdb.DuckDBPyConnection) -> None:
    got = "SELECT run_id, gk, match_method, within_iteration, seq_unique, seq_first "
    got += "FROM int_instance_groups"
    assert _same(chain, got, GROUPS_ORACLE) > 10
    methods = chain.execute(
        "SELECT count(*) FILTER (WHERE NOT seq_unique), count(*) FILTER (WHERE match_method = "
        "'order') FROM int_instance_groups"
    ).fetchone()
    assert methods is not None and min(methods) > 0  # repeated seqs and order matching both seen


def test_instance_seq_matches_the_string_keyed_windows(chain: duckdb.DuckDBPyConnection) -> None:
    got = "SELECT run_id, rank, source_file, source_line, instance_seq FROM int_instance_members"
    assert _same(chain, got, SEQ_ORACLE) > 1000
