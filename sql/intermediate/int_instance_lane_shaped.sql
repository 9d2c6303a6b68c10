-- The calls of int_instance_lane_calls as their shape (int_comm_op_shapes) and the values that differ from call to call: iteration, issue order, logged p2p peer, timing (issue 18 item 1).
-- One row per call of a rank's lane (int_instance_members' header: the rank's timeline format, else its counted source) with a known rank. Narrow (twelve numbers a call: int_instance_lane_calls joins the shape's columns back and resolves the p2p peer). A derive keeps it a view (its two readers compute it within their queries for less than writing its 18 M rows at 1024 ranks). Reads the calls' narrow iteration rows (int_comm_op_iteration_shaped, stored in derive: each call's shape_id, seq, peer and times; no second read of the 18 M calls, no join of them with their iterations, no per-call string) and takes the lane's calls, with their run, rank and file, from their shapes (int_comm_op_shape_keys: a few thousand rows), never int_comm_op_shapes or the classified calls: in the catalog every reference to those inlines the classification again.
CREATE OR REPLACE VIEW int_instance_lane_shaped(
  -- The call's shape: comm_op_shape_id of its key (int_comm_op_shapes.shape_id).
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
  -- Start on the rank's timeline (the call's ts_ns: int_comm_op_iteration.ts_ns), ns.
  order_ts,
  -- Peer or root rank as logged (inside the communicator for NCCL); int_instance_lane_calls resolves it to a global rank.
  peer_rank,
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
  -- the shapes of the lane's calls (a few thousand rows: a lane is a rank's format)
  lane_shapes AS MATERIALIZED (
    SELECT k.shape_id, k.run_id, k.rank, k.source_file
    FROM int_comm_op_shape_keys AS k
    SEMI JOIN lane AS l
      ON l.run_id = k.run_id AND l.rank = k.rank
      AND l.source_format IS NOT DISTINCT FROM k.source_format
    WHERE k.rank IS NOT NULL
  ),
  -- every lane call: its narrow iteration row (the call's shape and per-call values), its
  -- names from its shape
  calls AS (
    SELECT
      c.shape_id,
      l.run_id,
      l.rank,
      c.call_key,
      l.source_file,
      c.source_line,
      c.seq,
      c.peer_rank,
      c.launch_ts_ns,
      c.ts_ns AS order_ts,
      CASE WHEN c.method <> 'detected' OR c.period IS NOT NULL THEN c.iteration END
        AS ci_iteration,
      -- an iteration that names a training step (not a position in a detected period)
      c.method IN ('source', 'marker') AS step_iteration
    FROM int_comm_op_iteration_shaped AS c
    JOIN lane_shapes AS l ON l.shape_id = c.shape_id
  )
-- the per-call values; every other column of int_instance_lane_calls is the shape's
SELECT
  c.shape_id,
  c.call_key,
  c.source_line,
  c.seq,
  CASE WHEN t.rank IS NOT NULL THEN t.iteration ELSE c.ci_iteration END AS iteration,
  c.step_iteration,
  c.launch_ts_ns,
  c.order_ts,
  c.peer_rank,
  t.rank IS NOT NULL AS timed,
  t.ts_ns,
  t.dur_ns
FROM calls AS c
-- last: DuckDB's estimate of a left join to the (often empty) timed calls is that of an inner
-- join, and the joins after it would then hash the calls instead of the small tables
LEFT JOIN timed AS t
  ON t.run_id = c.run_id AND t.rank = c.rank AND t.source_file = c.source_file
  AND t.source_line = c.source_line
