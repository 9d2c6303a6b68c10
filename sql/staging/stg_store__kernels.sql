-- GPU kernels, memcpys and memsets with their end time, for interval algebra on a rank's GPU timeline.
-- One row per GPU activity interval on one rank (as kernels).
CREATE OR REPLACE VIEW stg_store__kernels(
  -- Training run identifier.
  run_id,
  -- Global rank whose GPU ran the activity.
  rank,
  -- GPU device index.
  device,
  -- CUDA stream id.
  stream,
  -- Kernel name (short form).
  name,
  -- compute | comm | memcpy | memset | other.
  category,
  -- For comm kernels, the normalised op the name tells.
  comm_op,
  -- Start, ns on the rank's timeline.
  ts_ns,
  -- Duration in ns (negative durations clamped to 0).
  dur_ns,
  -- End, ns (ts_ns + dur_ns).
  end_ns,
  -- Launch correlation id.
  correlation,
  -- Bytes moved when the source says.
  msg_bytes,
  -- Parser that produced the row.
  source_format,
  -- File the row came from.
  source_file,
  -- Event index in that file.
  source_line,
  -- CPU start of the runtime call that launched it, ns on the ts_ns clock (null when unknown,
  -- e.g. stores written before schema 1.4.0).
  launch_ts_ns,
  -- Step whose CPU window contains the launch (parser's HTA rule); null when launched outside
  -- every step or unknown (int_kernel_iteration completes it).
  iteration
) AS
SELECT
  run_id,
  rank,
  device,
  stream,
  name,
  category,
  comm_op,
  ts_ns,
  greatest(dur_ns, 0) AS dur_ns,
  ts_ns + greatest(dur_ns, 0) AS end_ns,
  correlation,
  msg_bytes,
  source_format,
  source_file,
  source_line,
  launch_ts_ns,
  iteration
FROM kernels
