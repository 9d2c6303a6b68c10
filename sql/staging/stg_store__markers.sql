-- Iteration markers (ProfilerStep#N, NVTX step ranges) and annotations with their end time.
-- One row per marker or range on one rank (as markers).
CREATE OR REPLACE VIEW stg_store__markers(
  -- Training run identifier.
  run_id,
  -- Global rank.
  rank,
  -- Marker or range name.
  name,
  -- iteration | annotation | nvtx | nccl_nvtx.
  kind,
  -- Start, ns on the rank's timeline.
  ts_ns,
  -- Duration in ns (negative durations clamped to 0).
  dur_ns,
  -- End, ns (ts_ns + dur_ns).
  end_ns,
  -- Iteration number when the marker names one.
  iteration,
  -- NVTX domain or annotation category.
  domain,
  -- Parser that produced the row.
  source_format,
  -- File the row came from.
  source_file,
  -- Event index in that file.
  source_line
) AS
SELECT
  run_id,
  rank,
  name,
  kind,
  ts_ns,
  greatest(dur_ns, 0) AS dur_ns,
  ts_ns + greatest(dur_ns, 0) AS end_ns,
  iteration,
  domain,
  source_format,
  source_file,
  source_line
FROM markers
