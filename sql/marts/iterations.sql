-- Iteration boundaries per rank, from markers (ProfilerStep#N, NVTX steps) or detected from the recurring communication pattern (the paper's regularity finding).
-- One row per (run, rank, iteration); see int_iterations for the rules.
CREATE OR REPLACE VIEW iterations(
  -- Training run identifier.
  run_id,
  -- Global rank (null when the source does not say).
  rank,
  -- Iteration number.
  iteration,
  -- marker | source | detected.
  source,
  -- Start, ns (null when the source has no timestamps).
  start_ns,
  -- End, ns.
  end_ns,
  -- end_ns - start_ns.
  duration_ns,
  -- File the boundaries come from.
  source_file,
  -- First communication call's line in that file.
  first_line,
  -- Last communication call's line in that file.
  last_line,
  -- Communication calls in the iteration.
  ops
) AS
SELECT
  run_id, rank, iteration, source, start_ns, end_ns, duration_ns, source_file, first_line,
  last_line, ops
FROM int_iterations
