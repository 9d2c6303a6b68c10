-- Communication calls as their shape (int_comm_op_shapes) and the values that differ from call to call.
-- One row per row of stg_store__comm_ops. Why: int_comm_ops_classified is this joined to its shapes on shape_id, so a derive stores only these narrow, numeric rows per call (at 1024 ranks 18 M calls: eleven numbers each instead of 33 columns, 13 of them strings) and the repeated values once per shape.
CREATE OR REPLACE VIEW int_comm_ops_shaped(
  -- The call's shape: comm_op_shape_id of its key (int_comm_op_shapes.shape_id).
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
-- the shape id from the call's own values (no read of int_comm_op_shape_keys, which checks that
-- no two shapes share one)
SELECT
  comm_op_shape_id(
    o.run_id, o.rank, o.host, o.source_format, o.source_file, o.op, o.comm_id, o.group_size,
    o.group_rank, o.dtype, o.msg_bytes, o.is_traffic, o.pid, o.algorithm, o.timing_source,
    o.group_source
  ) AS shape_id,
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
