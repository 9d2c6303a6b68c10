-- Communication calls as their shape (int_comm_op_shapes) and the values that differ from call to call.
-- One row per row of stg_store__comm_ops. Why: int_comm_ops_classified is this joined to its shapes on shape_id, so a derive stores only these narrow, numeric rows per call (at 1024 ranks 18 M calls: eleven numbers each instead of 33 columns, 13 of them strings) and the repeated values once per shape.
CREATE OR REPLACE VIEW int_comm_ops_shaped(
  -- The call's shape (int_comm_op_shapes.shape_id).
  shape_id,
  -- Line (or event index) in the shape's source_file.
  source_line,
  -- Peer or root rank as logged (inside the communicator for NCCL).
  peer_rank,
  -- Per-communicator sequence number.
  seq,
  -- Start, ns on the rank's timeline.
  ts_ns,
  -- Duration in ns (null when not logged or timing_source is none); end_ns is ts_ns + dur_ns.
  dur_ns,
  -- Algorithm bandwidth as logged, Gbit/s.
  algbw_gbps,
  -- Bus bandwidth as logged, Gbit/s.
  busbw_gbps,
  -- Iteration when the source says.
  iteration,
  -- Compact key of the call (stg_store__comm_ops.call_key).
  call_key,
  -- CPU time the call was issued, ns on the ts_ns clock (null when not recorded).
  launch_ts_ns
) AS
SELECT
  s.shape_id,
  o.source_line,
  o.peer_rank,
  o.seq,
  o.ts_ns,
  o.dur_ns,
  o.algbw_gbps,
  o.busbw_gbps,
  o.iteration,
  o.call_key,
  o.launch_ts_ns
FROM stg_store__comm_ops AS o
-- every call has exactly one shape: the shapes are the calls' distinct values of these keys
JOIN int_comm_op_shapes AS s
  ON s.run_id = o.run_id AND s.rank IS NOT DISTINCT FROM o.rank
  AND s.host IS NOT DISTINCT FROM o.host AND s.source_format IS NOT DISTINCT FROM o.source_format
  AND s.source_file IS NOT DISTINCT FROM o.source_file AND s.op IS NOT DISTINCT FROM o.op
  AND s.comm_id IS NOT DISTINCT FROM o.comm_id
  AND s.call_group_size IS NOT DISTINCT FROM o.group_size
  AND s.group_rank IS NOT DISTINCT FROM o.group_rank AND s.dtype IS NOT DISTINCT FROM o.dtype
  AND s.msg_bytes IS NOT DISTINCT FROM o.msg_bytes AND s.pid IS NOT DISTINCT FROM o.pid
  AND s.algorithm IS NOT DISTINCT FROM o.algorithm
  AND s.timing_source IS NOT DISTINCT FROM o.timing_source
  AND s.call_group_source IS NOT DISTINCT FROM o.group_source
