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
  -- Duration in ns (null when not logged, and for timing_source = 'none': no comm time).
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
  call_key,
  -- Clock of ts_ns/dur_ns: kernel (the GPU kernel(s) the call launched) | cpu_range (the CPU
  -- op or range, only where no kernel can exist) | logged (the log's own duration) | none (no
  -- duration: no comm time, no bandwidth); null in stores written before schema 1.4.0.
  timing_source,
  -- CPU time the call was issued, ns on the ts_ns clock (null when not recorded): the time
  -- that attributes the call to an iteration (HTA rule step.ts <= launch < step.end).
  launch_ts_ns,
  -- Where group_size/comm_id came from: logged | pg_config | inferred_default | null.
  group_source,
  -- GPU kernels merged into the call (timing_source = kernel).
  kernel_count,
  -- Progress of the call when recorded: scheduled | started | completed (Flight Recorder);
  -- null for sources without a state and in stores written before schema 1.5.0.
  call_state
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
  -- a call timed 'none' has no duration even if a source wrote one
  CASE WHEN timing_source IS DISTINCT FROM 'none' THEN dur_ns END AS dur_ns,
  CASE WHEN timing_source IS DISTINCT FROM 'none' THEN ts_ns + dur_ns END AS end_ns,
  algbw_gbps,
  busbw_gbps,
  iteration,
  op NOT IN ('barrier', 'other') AS is_traffic,
  pid,
  "count" AS elem_count,
  algorithm,
  protocol,
  raw_op,
  hash(run_id, rank, source_file, source_line) AS call_key,
  timing_source,
  launch_ts_ns,
  group_source,
  kernel_count,
  call_state
FROM comm_ops
