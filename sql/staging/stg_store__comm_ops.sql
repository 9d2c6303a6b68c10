-- Communication calls with a traffic-relevant flag and the message size in the bytes a rank moves.
-- One row per communication call seen on one rank (as comm_ops).
CREATE OR REPLACE VIEW stg_store__comm_ops(
  -- Training run identifier.
  run_id,
  -- Global rank that issued the call (null when the source does not say).
  rank,
  -- Host name as logged.
  host,
  -- Parser that produced the row.
  source_format,
  -- File the row came from.
  source_file,
  -- Line (or event index) in that file.
  source_line,
  -- Normalised operation (all_reduce, all_gather, send, ...).
  op,
  -- Communicator identity as logged.
  comm_id,
  -- Ranks in the communicator.
  group_size,
  -- Caller's rank inside the communicator.
  group_rank,
  -- Peer or root rank as logged.
  peer_rank,
  -- Element type.
  dtype,
  -- Message size in bytes (the caller's buffer).
  msg_bytes,
  -- Per-communicator sequence number.
  seq,
  -- Start, ns on the rank's timeline.
  ts_ns,
  -- Duration in ns (null when not logged).
  dur_ns,
  -- End, ns (ts_ns + dur_ns).
  end_ns,
  -- Algorithm bandwidth as logged, Gbit/s.
  algbw_gbps,
  -- Bus bandwidth as logged, Gbit/s.
  busbw_gbps,
  -- Iteration when the source says.
  iteration,
  -- True for calls that move data (not barriers or unknown ops).
  is_traffic,
  -- Operating-system process id.
  pid,
  -- Element count as logged (NCCL semantics per op).
  elem_count,
  -- NCCL algorithm (RING, TREE, NVLS, ...) when the source says.
  algorithm,
  -- NCCL protocol when the source says.
  protocol,
  -- Operation name exactly as the source wrote it.
  raw_op,
  -- hash(run_id, rank, source_file, source_line): a compact key of the call, so large joins
  -- between per-call objects compare one integer instead of the file path (join on it together
  -- with rank and source_line).
  call_key
) AS
SELECT
  run_id,
  rank,
  host,
  source_format,
  source_file,
  source_line,
  op,
  comm_id,
  group_size,
  group_rank,
  peer_rank,
  dtype,
  msg_bytes,
  seq,
  ts_ns,
  dur_ns,
  ts_ns + dur_ns AS end_ns,
  algbw_gbps,
  busbw_gbps,
  iteration,
  op NOT IN ('barrier', 'other') AS is_traffic,
  pid,
  "count" AS elem_count,
  algorithm,
  protocol,
  raw_op,
  hash(run_id, rank, source_file, source_line) AS call_key
FROM comm_ops
