-- The calls of int_instance_lane_calls as their shape (int_comm_op_shapes) and the values that differ from call to call: iteration, issue order, resolved p2p peer, timing (issue 18 item 1).
-- One row per call of a rank's lane (int_instance_members' header: the rank's timeline format, else its counted source) with a known rank. Materialised on its own so that the matching's query holds neither this join of the calls with their iterations nor its inputs (at 1024 ranks both are 18 M calls); narrow (twelve numbers a call: int_instance_lane_calls joins the shape's columns back) so that storing it writes no per-call strings.
CREATE OR REPLACE VIEW int_instance_lane_shaped(
  -- The call's shape (int_comm_op_shapes.shape_id).
  shape_id,
  -- Compact key of the call (stg_store__comm_ops.call_key).
  call_key,
  -- Line (or event index) in its file.
  source_line,
  -- Sequence number as logged; null when none.
  seq,
  -- Iteration of the call (int_comm_ops_timed for timed calls, else int_comm_op_iteration, detected iterations only where a period was found); null outside every iteration.
  iteration,
  -- True when the iteration names a training step (int_comm_op_iteration.method source | marker).
  step_iteration,
  -- CPU issue time, ns (null when not recorded).
  launch_ts_ns,
  -- Start on the rank's timeline (the classified call's, else its iteration row's), ns.
  order_ts,
  -- send/recv: the peer's global rank (a two-rank group's other member, else the member with the logged group rank, else the logged rank on the world or an unknown group); null otherwise.
  peer_resolved,
  -- True when the call is a row of int_comm_ops_timed (source comm_ops).
  timed,
  -- Start on the rank's raw clock, ns (int_comm_ops_timed); null when untimed.
  ts_ns,
  -- Duration, ns (int_comm_ops_timed; its end_ns is ts_ns + dur_ns); null when untimed.
  dur_ns
) AS
WITH
  timed AS MATERIALIZED (
    SELECT run_id, rank, source_format, source_file, source_line, ts_ns, dur_ns, iteration
    FROM int_comm_ops_timed
    WHERE source = 'comm_ops'
  ),
  lane AS (
    -- the rank's timeline format, else its counted source
    SELECT DISTINCT run_id, rank, source_format FROM timed
    UNION ALL
    SELECT p.run_id, p.rank, p.source_format
    FROM int_rank_primary_source AS p
    ANTI JOIN (SELECT DISTINCT run_id, rank FROM timed) AS t
      ON t.run_id = p.run_id AND t.rank = p.rank
  ),
  members AS MATERIALIZED (SELECT * FROM int_groups_members),
  -- every lane call with the columns matching and the instance rows need (no join back to
  -- int_comm_ops_classified later: int_instance_matched reads them from here)
  calls AS (
    SELECT
      c.shape_id,
      s.run_id,
      s.rank,
      c.call_key,
      s.source_format,
      s.source_file,
      c.source_line,
      s.op,
      s.global_group,
      s.group_size,
      c.seq,
      c.peer_rank,
      ci.launch_ts_ns,
      coalesce(c.ts_ns, ci.ts_ns) AS order_ts,
      CASE WHEN ci.method <> 'detected' OR ci.period IS NOT NULL THEN ci.iteration END
        AS ci_iteration,
      -- an iteration that names a training step (not a position in a detected period)
      ci.method IN ('source', 'marker') AS step_iteration
    -- int_comm_ops_classified's rows, its shapes joined here directly (the shape_id is kept)
    FROM int_comm_ops_shaped AS c
    JOIN int_comm_op_shapes AS s ON s.shape_id = c.shape_id
    SEMI JOIN lane AS l
      ON l.run_id = s.run_id AND l.rank = s.rank
      AND l.source_format IS NOT DISTINCT FROM s.source_format
    -- the iteration rows of the lane's ranks only (a superset of what the join keeps): with the
    -- same filter on both sides DuckDB hashes the narrow iteration rows, not the wide calls
    LEFT JOIN (
      SELECT call_key, run_id, rank, source_line, launch_ts_ns, ts_ns, method, period, iteration
      FROM int_comm_op_iteration
      SEMI JOIN (SELECT DISTINCT run_id, rank FROM lane) AS lr
        ON lr.run_id = int_comm_op_iteration.run_id AND lr.rank = int_comm_op_iteration.rank
    ) AS ci
      ON ci.call_key = c.call_key AND ci.run_id = s.run_id AND ci.rank = s.rank
      AND ci.source_line = c.source_line
    WHERE s.rank IS NOT NULL
  ),
  -- p2p peers: a two-rank group's other member, else the member with the logged group rank, else
  -- the logged rank itself on the world or an unknown group
  pairs AS (
    SELECT run_id, global_group, min(global_rank) AS lo, max(global_rank) AS hi
    FROM members
    WHERE group_size = 2
    GROUP BY run_id, global_group
  )
-- the p2p peer resolved; every other column of int_instance_lane_calls is the shape's
SELECT
  c.shape_id,
  c.call_key,
  c.source_line,
  c.seq,
  CASE WHEN t.rank IS NOT NULL THEN t.iteration ELSE c.ci_iteration END AS iteration,
  c.step_iteration,
  c.launch_ts_ns,
  c.order_ts,
  CASE WHEN c.op IN ('send', 'recv') THEN coalesce(
    CASE WHEN c.rank = pr.lo THEN pr.hi WHEN c.rank = pr.hi THEN pr.lo END,
    g.global_rank,
    CASE WHEN c.global_group IS NULL OR c.global_group = 'world' THEN c.peer_rank END
  ) END AS peer_resolved,
  t.rank IS NOT NULL AS timed,
  t.ts_ns,
  t.dur_ns
FROM calls AS c
LEFT JOIN pairs AS pr ON pr.run_id = c.run_id AND pr.global_group = c.global_group
LEFT JOIN members AS g
  ON g.run_id = c.run_id AND g.global_group = c.global_group AND g.group_rank = c.peer_rank
-- last: DuckDB's estimate of a left join to the (often empty) timed calls is that of an inner
-- join, and the joins after it would then hash the calls instead of the small tables
LEFT JOIN timed AS t
  ON t.run_id = c.run_id AND t.rank = c.rank AND t.source_file = c.source_file
  AND t.source_line = c.source_line
