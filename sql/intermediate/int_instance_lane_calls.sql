-- The calls cross-rank matching works on (int_instance_matched, under int_instance_members): every call of one lane per rank with its iteration, issue order, integer keys, resolved p2p peer and the columns the instance rows carry (issue 18 item 1).
-- One row per call of a rank's lane (int_instance_members' header: the rank's timeline format, else its counted source) with a known rank. int_instance_lane_shaped (the per-call values, stored narrow in derive) joined to its shape's values (int_instance_shapes: int_comm_op_shapes with the host resolved, read once), the p2p peer resolved here (per shape, and per shape and logged peer for the member lookup).
CREATE OR REPLACE VIEW int_instance_lane_calls(
  -- The call's shape (int_instance_shapes.shape_id): every column below that is not per call is the shape's.
  shape_id,
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
-- Algorithm: the lane's calls (int_instance_lane_shaped, stored narrow in derive) with their
-- shape's columns joined back (int_instance_shapes: a few thousand rows at 1024 ranks, so the
-- group key, the host and a two-rank group's pair are computed per shape, not per call). Every
-- intermediate is read once: in the catalog each reference inlines it.
WITH
  shapes AS MATERIALIZED (SELECT * FROM int_instance_shapes),
  members AS MATERIALIZED (SELECT * FROM int_groups_members),
  -- p2p peers: a two-rank group's other member, else the member with the logged group rank, else
  -- the logged rank itself on the world or an unknown group
  pairs AS (
    SELECT run_id, global_group, min(global_rank) AS lo, max(global_rank) AS hi
    FROM members
    WHERE group_size = 2
    GROUP BY run_id, global_group
  ),
  -- the members of each p2p shape's group by group rank (a few rows per send/recv shape)
  shape_members AS (
    SELECT sh.shape_id, g.group_rank, g.global_rank
    FROM shapes AS sh
    JOIN members AS g ON g.run_id = sh.run_id AND g.global_group = sh.global_group
    WHERE sh.op IN ('send', 'recv')
  ),
  shape_cols AS (
    SELECT
      sh.shape_id,
      sh.run_id,
      sh.rank,
      sh.op,
      sh.source_format,
      sh.gk,
      sh.on_group,
      sh.traffic_class,
      sh.msg_bytes,
      sh.group_size,
      sh.timing_source,
      sh.host,
      sh.source_file,
      sh.global_group,
      sh.op IN ('send', 'recv') AS p2p,
      CASE WHEN sh.rank = pr.lo THEN pr.hi WHEN sh.rank = pr.hi THEN pr.lo END AS pair_peer,
      sh.global_group IS NULL OR sh.global_group = 'world' AS peer_is_global
    FROM shapes AS sh
    LEFT JOIN pairs AS pr ON pr.run_id = sh.run_id AND pr.global_group = sh.global_group
  )
SELECT
  l.shape_id,
  s.run_id,
  s.rank,
  l.call_key,
  l.source_line,
  s.op,
  s.source_format,
  l.seq,
  l.iteration,
  l.step_iteration,
  l.launch_ts_ns,
  l.order_ts,
  s.gk,
  s.on_group,
  CASE WHEN s.p2p THEN coalesce(
    s.pair_peer, m.global_rank, CASE WHEN s.peer_is_global THEN l.peer_rank END
  ) END AS peer_resolved,
  s.traffic_class,
  s.msg_bytes,
  s.group_size,
  l.timed,
  -- a timed call's timing is its own row's (int_comm_ops_timed keeps the call's timing_source)
  CASE WHEN l.timed THEN s.timing_source END AS timing_source,
  l.ts_ns,
  l.ts_ns + l.dur_ns AS end_ns,
  l.dur_ns,
  s.host,
  s.source_file,
  s.global_group
FROM int_instance_lane_shaped AS l
JOIN shape_cols AS s ON s.shape_id = l.shape_id
LEFT JOIN shape_members AS m ON m.shape_id = l.shape_id AND m.group_rank = l.peer_rank
