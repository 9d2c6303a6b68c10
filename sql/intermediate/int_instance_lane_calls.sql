-- The calls cross-rank matching works on (int_instance_matched, under int_instance_members): every call of one lane per rank with its iteration, issue order, integer keys, resolved p2p peer and the columns the instance rows carry (issue 18 item 1).
-- One row per call of a rank's lane (int_instance_members' header: the rank's timeline format, else its counted source) with a known rank. Materialised on its own so that the matching's query holds neither this join of the classified calls with their iterations nor its inputs (at 1024 ranks both are 18 M calls).
CREATE OR REPLACE VIEW int_instance_lane_calls(
  -- Training run identifier.
  run_id,
  -- Global rank that issued the call.
  rank,
  -- Compact key of the call (stg_store__comm_ops.call_key).
  call_key,
  -- Line (or event index) in its file.
  source_line,
  -- Normalised operation.
  op,
  -- Parser of the call (the rank's lane).
  source_format,
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
  -- hash(global_group): the call's group as an integer key.
  gk,
  -- True when the call is on a known group of more than one rank.
  on_group,
  -- send/recv: the peer's global rank (a two-rank group's other member, else the member with the logged group rank, else the logged rank on the world or an unknown group); null otherwise.
  peer_resolved,
  -- TP | PP | DP | EP | EmbTableSyn | other (int_comm_ops_classified).
  traffic_class,
  -- Message size in bytes (int_comm_ops_classified).
  msg_bytes,
  -- Ranks of the call's group (int_comm_ops_classified.group_size).
  group_size,
  -- True when the call is a row of int_comm_ops_timed (source comm_ops).
  timed,
  -- Clock of the timing (int_comm_ops_timed.timing_source); null when untimed.
  timing_source,
  -- Start on the rank's raw clock, ns (int_comm_ops_timed); null when untimed.
  ts_ns,
  -- End on the rank's raw clock, ns (int_comm_ops_timed); null when untimed.
  end_ns,
  -- Duration, ns (int_comm_ops_timed); null when untimed.
  dur_ns,
  -- Host of the rank (the call's host, else int_rank_nodes.host).
  host,
  -- File the call came from.
  source_file,
  -- Group of global ranks of the call (int_comm_ops_classified.global_group); null when unknown.
  global_group
) AS
WITH
  timed AS MATERIALIZED (
    SELECT run_id, rank, source_format, source_file, source_line, ts_ns, end_ns, dur_ns,
      iteration, timing_source
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
      c.run_id,
      c.rank,
      c.call_key,
      c.source_format,
      c.source_file,
      c.source_line,
      c.op,
      c.global_group,
      c.group_size,
      c.seq,
      c.peer_rank,
      c.host,
      c.traffic_class,
      c.msg_bytes,
      t.rank IS NOT NULL AS timed,
      t.timing_source,
      t.ts_ns,
      t.end_ns,
      t.dur_ns,
      ci.launch_ts_ns,
      coalesce(c.ts_ns, ci.ts_ns) AS order_ts,
      CASE
        WHEN t.rank IS NOT NULL THEN t.iteration
        WHEN ci.method <> 'detected' OR ci.period IS NOT NULL THEN ci.iteration
      END AS iteration,
      -- an iteration that names a training step (not a position in a detected period)
      ci.method IN ('source', 'marker') AS step_iteration
    FROM int_comm_ops_classified AS c
    SEMI JOIN lane AS l
      ON l.run_id = c.run_id AND l.rank = c.rank
      AND l.source_format IS NOT DISTINCT FROM c.source_format
    LEFT JOIN timed AS t
      ON t.run_id = c.run_id AND t.rank = c.rank AND t.source_file = c.source_file
      AND t.source_line = c.source_line
    -- the iteration rows of the lane's ranks only (a superset of what the join keeps): with the
    -- same filter on both sides DuckDB hashes the narrow iteration rows, not the wide calls
    LEFT JOIN (
      SELECT call_key, run_id, rank, source_line, launch_ts_ns, ts_ns, method, period, iteration
      FROM int_comm_op_iteration
      SEMI JOIN (SELECT DISTINCT run_id, rank FROM lane) AS lr
        ON lr.run_id = int_comm_op_iteration.run_id AND lr.rank = int_comm_op_iteration.rank
    ) AS ci
      ON ci.call_key = c.call_key AND ci.run_id = c.run_id AND ci.rank = c.rank
      AND ci.source_line = c.source_line
    WHERE c.rank IS NOT NULL
  ),
  -- p2p peers: a two-rank group's other member, else the member with the logged group rank, else
  -- the logged rank itself on the world or an unknown group
  pairs AS (
    SELECT run_id, global_group, min(global_rank) AS lo, max(global_rank) AS hi
    FROM members
    WHERE group_size = 2
    GROUP BY run_id, global_group
  )
-- integer keys for matching (gk), the p2p peer resolved, the host filled in
SELECT
  c.run_id,
  c.rank,
  c.call_key,
  c.source_line,
  c.op,
  c.source_format,
  c.seq,
  c.iteration,
  c.step_iteration,
  c.launch_ts_ns,
  c.order_ts,
  hash(c.global_group) AS gk,
  c.global_group IS NOT NULL AND c.group_size > 1 AS on_group,
  CASE WHEN c.op IN ('send', 'recv') THEN coalesce(
    CASE WHEN c.rank = pr.lo THEN pr.hi WHEN c.rank = pr.hi THEN pr.lo END,
    g.global_rank,
    CASE WHEN c.global_group IS NULL OR c.global_group = 'world' THEN c.peer_rank END
  ) END AS peer_resolved,
  c.traffic_class,
  c.msg_bytes,
  c.group_size,
  c.timed,
  c.timing_source,
  c.ts_ns,
  c.end_ns,
  c.dur_ns,
  coalesce(c.host, n.host) AS host,
  c.source_file,
  c.global_group
FROM calls AS c
LEFT JOIN pairs AS pr ON pr.run_id = c.run_id AND pr.global_group = c.global_group
LEFT JOIN members AS g
  ON g.run_id = c.run_id AND g.global_group = c.global_group AND g.group_rank = c.peer_rank
LEFT JOIN int_rank_nodes AS n ON n.run_id = c.run_id AND n.rank = c.rank;
