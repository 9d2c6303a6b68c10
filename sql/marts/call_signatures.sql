-- Exact message sizes of the counted calls per rank, traffic class and operation: the measured side of APNet'24 Table 3 (calls per iteration of one rank per class, op, group size and size) and the exact-size CDF of Fig. 1, so the report reads them from a stored mart instead of re-reading the calls.
-- One row per (run_id, rank, traffic_class, op, msg_bytes) with at least one counted call that moves data (int_comm_ops_classified: counted (one source per rank, so no call is counted twice), is_traffic, msg_bytes known). Input: int_comm_ops_classified, read as its two halves (every grouping column is a column of the call's shape: the calls are counted per shape_id of int_comm_ops_shaped, then joined to their int_comm_op_shapes row); the size tolerance is the macro logged_size_tolerance (DeepSpeed prints sizes rounded; 0 for exact sources). The counts are of the rank's counted log lines, as int_comm_ops_classified keeps them: an all-to-all an NCCL log writes as grouped Send/Recv lines is its send and recv lines here (message_sizes counts it as one logical call, from int_calls).
CREATE OR REPLACE VIEW call_signatures(
  -- Training run identifier.
  run_id,
  -- Global rank of the caller (null when no source gives one).
  rank,
  -- TP | PP | DP | EP | EmbTableSyn | other (int_comm_ops_classified).
  traffic_class,
  -- Normalised operation.
  op,
  -- Message size in bytes (comm_ops.msg_bytes: the canonical size of the op).
  msg_bytes,
  -- Largest group size among these calls (null when no call logs one).
  group_size,
  -- Counted calls with this signature.
  calls,
  -- Bytes of those calls (calls x msg_bytes).
  total_bytes,
  -- How far the logged size may lie from the true one, bytes (logged_size_tolerance; largest over the calls' sources).
  tol_bytes
) AS
-- Algorithm: the calls counted per shape first (one integer per call), the few shapes after
SELECT
  s.run_id,
  s.rank,
  s.traffic_class,
  s.op,
  s.msg_bytes,
  max(s.group_size)::INTEGER AS group_size,
  sum(c.n)::BIGINT AS calls,
  sum(s.msg_bytes * c.n)::BIGINT AS total_bytes,
  max(logged_size_tolerance(s.source_format, s.msg_bytes)) AS tol_bytes
FROM (SELECT shape_id, count(*) AS n FROM int_comm_ops_shaped GROUP BY shape_id) AS c
JOIN int_comm_op_shapes AS s ON s.shape_id = c.shape_id
WHERE s.counted AND s.is_traffic AND s.msg_bytes IS NOT NULL
GROUP BY s.run_id, s.rank, s.traffic_class, s.op, s.msg_bytes;
