"""The narrow iteration rows (session 13, issue 21): int_comm_op_iteration_shaped stores each call's
iteration without its run, rank, file or token (all functions of the call's shape and peer),
int_comm_op_iteration joins them back, and the readers that group calls (int_iterations,
int_onoff_signature) group per shape first and take the names after; int_comm_ops_timed finds a
call's iteration row by its shape and line. Each is checked on every sample run (markers, source
and detected iterations, several formats per rank, timed calls) against an independent oracle:
the former per-call definitions (names read per call and joined on them; the token's text from
the call's own values), so the two must give the same rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from commscope.pipeline.store import Store
from tests.sql.conftest import objects_over_store

OBJECTS = ("int_comm_op_iteration", "int_onoff_signature", "int_comm_ops_timed")

# int_comm_op_iteration before session 13: the marker rule joined on the call's names, read
# per call (the sequenced calls' token and names, and the calls again with their names)
ITERATION_ORACLE = """
WITH ops AS (
  -- every call once, with its detected iteration (int_comm_ops_sequenced has one row per call)
  SELECT * FROM int_comm_ops_sequenced
),
calls AS (
  -- the calls again, narrow (int_comm_ops_shaped, their names by shape): the sequenced calls
  -- are read once, above
  SELECT k.run_id, k.rank, k.source_file, c.source_line, c.ts_ns, c.launch_ts_ns
  FROM int_comm_ops_shaped AS c
  JOIN int_comm_op_shape_keys AS k ON k.shape_id = c.shape_id
),
by_marker AS (
  SELECT o.run_id, o.rank, o.source_file, o.source_line, min(w.iteration) AS iteration
  FROM calls AS o
  JOIN int_iterations_marked AS w
    ON o.run_id = w.run_id AND o.rank IS NOT DISTINCT FROM w.rank
    AND coalesce(o.launch_ts_ns, o.ts_ns) >= w.start_ns
    AND coalesce(o.launch_ts_ns, o.ts_ns) < w.end_ns
  GROUP BY o.run_id, o.rank, o.source_file, o.source_line
),
marker_files AS (
  SELECT DISTINCT run_id, rank, source_file FROM by_marker
)
SELECT
  o.run_id,
  o.rank,
  o.source_file,
  o.source_line,
  CASE
    WHEN o.source_iteration IS NOT NULL THEN o.source_iteration
    WHEN mf.source_file IS NOT NULL THEN bm.iteration
    ELSE o.iteration
  END AS iteration,
  -- an ENUM, written to Parquet as its dictionary's indices (a VARCHAR would be hashed into the
  -- file's dictionary call by call: at 256 ranks ~0.2 s CPU of the write, as much as no column)
  CAST(
    CASE
      WHEN o.source_iteration IS NOT NULL THEN 'source'
      WHEN mf.source_file IS NOT NULL THEN 'marker'
      ELSE 'detected'
    END AS ENUM ('source', 'marker', 'detected')
  ) AS method,
  o.pos,
  o.token,
  o.ts_ns,
  o.end_ns,
  o.call_key,
  o.launch_ts_ns,
  o.period,
  o.shape_id,
  o.seq,
  o.peer_rank
FROM ops AS o
LEFT JOIN marker_files AS mf
  ON o.run_id = mf.run_id AND o.rank IS NOT DISTINCT FROM mf.rank
  AND o.source_file = mf.source_file
LEFT JOIN by_marker AS bm
  ON o.run_id = bm.run_id AND o.rank IS NOT DISTINCT FROM bm.rank
  AND o.source_file = bm.source_file AND o.source_line = bm.source_line
"""

# the token's text from each call's own values (int_comm_ops_sequenced's rule: op:size:group:peer)
TOKEN_ORACLE = """
SELECT run_id, rank, source_file, source_line,
  op || ':' || coalesce(msg_bytes::VARCHAR, '?') || ':'
  || coalesce(group_size::VARCHAR, comm_id, '?') || ':' || coalesce(peer_rank::VARCHAR, '-')
  AS token
FROM stg_store__comm_ops
"""

# int_iterations before session 13: the calls grouped per (run, rank, file, iteration)
ITERATIONS_ORACLE = """
WITH assigned AS (
  SELECT run_id, rank, source_file, source_line, iteration, method, ts_ns, end_ns
  FROM int_comm_op_iteration
  WHERE iteration IS NOT NULL AND (method <> 'detected' OR period IS NOT NULL)
),
marked AS (
  SELECT
    w.run_id,
    w.rank,
    w.iteration,
    'marker' AS source,
    w.start_ns,
    w.end_ns,
    w.duration_ns,
    w.source_file,
    min(a.source_line) FILTER (WHERE a.source_file = w.source_file) AS first_line,
    max(a.source_line) FILTER (WHERE a.source_file = w.source_file) AS last_line,
    count(a.source_line) AS ops
  FROM int_iterations_marked AS w
  LEFT JOIN assigned AS a
    ON w.run_id = a.run_id AND w.rank IS NOT DISTINCT FROM a.rank AND w.iteration = a.iteration
    AND a.method IN ('marker', 'source')
  GROUP BY ALL
),
unmarked AS (
  -- the boundary candidates counted per (rank, file, iteration) in one pass over the calls
  -- (a small table: the file choice and the iteration rows both read it)
  SELECT
    a.run_id,
    a.rank,
    a.source_file,
    a.iteration,
    any_value(a.method) AS source,
    min(a.ts_ns) AS first_ts,
    max(a.end_ns) AS last_end,
    min(a.source_line) AS first_line,
    max(a.source_line) AS last_line,
    count(*) AS ops
  FROM assigned AS a
  WHERE a.method IN ('source', 'detected')
    AND NOT EXISTS (
      SELECT 1
      FROM int_iterations_marked AS w
      WHERE w.run_id = a.run_id AND w.rank IS NOT DISTINCT FROM a.rank
    )
  GROUP BY a.run_id, a.rank, a.source_file, a.iteration
),
best_file AS (
  SELECT run_id, rank, source_file
  FROM unmarked
  GROUP BY run_id, rank, source_file
  QUALIFY row_number() OVER (PARTITION BY run_id, rank ORDER BY sum(ops) DESC, source_file) = 1
),
seq AS (
  SELECT u.run_id, u.rank, u.iteration, u.source, u.first_ts, u.last_end, u.source_file,
    u.first_line, u.last_line, u.ops
  FROM unmarked AS u
  JOIN best_file AS b
    ON u.run_id = b.run_id AND coalesce(u.rank, -1) = coalesce(b.rank, -1) AND u.source_file = b.source_file
),
seq_timed AS (
  SELECT
    run_id,
    rank,
    iteration,
    source,
    first_ts AS start_ns,
    coalesce(
      lead(first_ts) OVER (PARTITION BY run_id, rank ORDER BY iteration), last_end
    ) AS end_ns,
    source_file,
    first_line,
    last_line,
    ops
  FROM seq
)
SELECT run_id, rank, iteration, source, start_ns, end_ns, duration_ns, source_file, first_line, last_line, ops
FROM marked
UNION ALL
SELECT
  run_id, rank, iteration, source, start_ns, end_ns, end_ns - start_ns AS duration_ns,
  source_file, first_line, last_line, ops
FROM seq_timed
"""

# int_onoff_signature before session 13: each call joined to its iteration on the names, h per
# distinct token text
ONOFF_ORACLE = """
SELECT
  run_id,
  rank,
  iteration,
  md5(
    concat_ws(':', count(*), sum(h), sum(h * pos) - min(pos) * sum(h))
  ) AS signature,
  count(*) AS ops
FROM (
  SELECT
    i.run_id,
    i.rank,
    i.iteration,
    ci.pos::HUGEINT AS pos,
    th.h
  FROM int_iterations AS i
  JOIN int_comm_op_iteration AS ci
    ON i.run_id = ci.run_id AND coalesce(i.rank, -1) = coalesce(ci.rank, -1)
    AND i.source_file = ci.source_file AND i.iteration = ci.iteration
  -- tokens repeat (a few hundred distinct among millions of calls): one md5 per distinct token
  JOIN (
    SELECT token, md5_number_lower(token)::HUGEINT AS h
    FROM (SELECT DISTINCT token FROM int_comm_op_iteration)
  ) AS th ON th.token = ci.token
)
GROUP BY run_id, rank, iteration
"""

# int_comm_ops_timed's iteration before session 13: the timed call joined to its iteration row
# on (run, rank, file, line)
TIMED_ORACLE = """
SELECT t.run_id, t.rank, t.source_file, t.source_line,
  CASE WHEN ci.method <> 'detected' OR ci.period IS NOT NULL THEN ci.iteration END AS iteration
FROM int_comm_ops_timed AS t
LEFT JOIN int_comm_op_iteration AS ci
  ON t.run_id = ci.run_id AND t.rank = ci.rank
  AND t.source_file = ci.source_file AND t.source_line = ci.source_line
WHERE t.source = 'comm_ops'
"""


@pytest.fixture(scope="module")
def chain(all_samples: tuple[Store, dict[str, Path]]) -> Iterator[duckdb.DuckDBPyConnection]:
    """Every sample run's calls copied into tables and the objects materialised."""
    store, _ = all_samples
    con = objects_over_store(store, OBJECTS)
    yield con
    con.close()


def _same_rows(con: duckdb.DuckDBPyConnection, got: str, want: str) -> None:
    """``got`` and ``want`` hold the same rows, duplicates counted (nulls equal)."""
    extra = con.sql(f"({got}) EXCEPT ALL ({want})").fetchall()
    missing = con.sql(f"({want}) EXCEPT ALL ({got})").fetchall()
    assert (extra[:5], missing[:5]) == ([], [])


def test_iteration_rows_are_the_former_per_call_rows(chain: duckdb.DuckDBPyConnection) -> None:
    cols = (
        "run_id, rank, source_file, source_line, iteration, method::VARCHAR, pos, token, ts_ns, "
        "end_ns, call_key, launch_ts_ns, period, shape_id, seq, peer_rank"
    )
    _same_rows(
        chain,
        f"SELECT {cols} FROM int_comm_op_iteration",
        f"SELECT {cols} FROM ({ITERATION_ORACLE})",
    )
    # the narrow rows are the view's, less the names
    _same_rows(
        chain,
        "SELECT shape_id, source_line, iteration, method::VARCHAR, pos, period, peer_rank "
        "FROM int_comm_op_iteration_shaped",
        "SELECT shape_id, source_line, iteration, method::VARCHAR, pos, period, peer_rank "
        "FROM int_comm_op_iteration",
    )
    # the samples exercise every method
    methods = chain.sql("SELECT DISTINCT method::VARCHAR FROM int_comm_op_iteration_shaped")
    assert {m for (m,) in methods.fetchall()} == {"source", "marker", "detected"}


def test_tokens_are_the_calls_own_values(chain: duckdb.DuckDBPyConnection) -> None:
    keys = "run_id, rank, source_file, source_line, token"
    _same_rows(chain, f"SELECT {keys} FROM int_comm_op_iteration", TOKEN_ORACLE)
    _same_rows(chain, f"SELECT {keys} FROM int_comm_ops_sequenced", TOKEN_ORACLE)


def test_iterations_grouped_per_shape_are_the_per_call_grouping(
    chain: duckdb.DuckDBPyConnection,
) -> None:
    _same_rows(chain, "SELECT * FROM int_iterations", ITERATIONS_ORACLE)
    sources = chain.sql("SELECT DISTINCT source FROM int_iterations").fetchall()
    assert {s for (s,) in sources} >= {"marker", "detected"}


def test_onoff_signature_summed_per_shape_is_the_per_call_sum(
    chain: duckdb.DuckDBPyConnection,
) -> None:
    _same_rows(chain, "SELECT * FROM int_onoff_signature", ONOFF_ORACLE)
    row = chain.execute("SELECT count(*), count(DISTINCT signature) FROM int_onoff_signature")
    n, distinct = row.fetchall()[0]
    assert n > distinct > 1  # repeated and differing signatures both occur


def test_timed_calls_find_their_own_iteration_row(chain: duckdb.DuckDBPyConnection) -> None:
    _same_rows(
        chain,
        "SELECT run_id, rank, source_file, source_line, iteration FROM int_comm_ops_timed "
        "WHERE source = 'comm_ops'",
        TIMED_ORACLE,
    )
    row = chain.execute(
        "SELECT count(*), count(iteration) FROM int_comm_ops_timed WHERE source = 'comm_ops'"
    ).fetchall()[0]
    assert row[1] > 0
