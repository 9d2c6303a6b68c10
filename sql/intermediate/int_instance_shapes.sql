-- The values an instance member shares with every call of its shape (issues 18 and 21): per call shape (int_comm_op_shapes), the columns int_instance_lane_calls carries from the shape and int_instance_members joins back to the narrow matched calls (int_instance_matched stores the shape_id, not the values), with the rank's host resolved and the group's integer key.
-- One row per row of int_comm_op_shapes (every shape, in a rank's lane or not: a few per rank and group, 6,016 at 1024 ranks for 18 M calls); shape_id is unique (checked by int_comm_op_shape_keys). Inputs: int_comm_op_shapes, int_rank_nodes (the host of a shape that logs none). Why per shape: a lane call's shape_id determines every value here, so the matched calls store one integer instead of these nine values, and neither they nor this view read the calls to find them (no hash of each call's values, no DISTINCT over 18 M calls at 1024 ranks).
CREATE OR REPLACE VIEW int_instance_shapes(
  -- The shape (int_comm_op_shapes.shape_id; int_instance_lane_calls.shape_id, int_instance_matched.shape_id).
  shape_id,
  -- Training run identifier.
  run_id,
  -- Global rank that issued the shape's calls (null when the source does not say).
  rank,
  -- Host of the rank: the shape's host as logged, else int_rank_nodes.host.
  host,
  -- Parser of the shape's calls.
  source_format,
  -- File the calls came from.
  source_file,
  -- Normalised operation.
  op,
  -- TP | PP | DP | EP | EmbTableSyn | other (int_comm_op_shapes.traffic_class).
  traffic_class,
  -- Group of global ranks of the calls (int_comm_op_shapes.global_group); null when unknown.
  global_group,
  -- Ranks of the calls' group (int_comm_op_shapes.group_size).
  group_size,
  -- Message size in bytes (source semantics).
  msg_bytes,
  -- Clock of the calls' timing as the shape logs it (int_comm_op_shapes.timing_source); a member's timing_source is this when the call is timed, else null.
  timing_source,
  -- hash(global_group): the group as an integer key (int_instance_lane_calls.gk).
  gk,
  -- True when the calls are on a known group of more than one rank.
  on_group
) AS
SELECT
  sh.shape_id,
  sh.run_id,
  sh.rank,
  coalesce(sh.host, n.host) AS host,
  sh.source_format,
  sh.source_file,
  sh.op,
  sh.traffic_class,
  sh.global_group,
  sh.group_size,
  sh.msg_bytes,
  sh.timing_source,
  hash(sh.global_group) AS gk,
  sh.global_group IS NOT NULL AND sh.group_size > 1 AS on_group
FROM int_comm_op_shapes AS sh
LEFT JOIN int_rank_nodes AS n ON n.run_id = sh.run_id AND n.rank = sh.rank
