-- Iteration windows from iteration markers (ProfilerStep#N, NVTX step ranges), one per step number.
-- One row per (run, rank, iteration) that a marker with a time names; duplicates (the same step in two files) keep the earliest.
CREATE OR REPLACE VIEW int_iterations_marked(
  -- Training run identifier.
  run_id,
  -- Global rank.
  rank,
  -- Iteration number (the marker's; its order among the rank's markers when it names none).
  iteration,
  -- Window start, ns.
  start_ns,
  -- Window end, ns (start + duration).
  end_ns,
  -- Window length, ns.
  duration_ns,
  -- File of the marker.
  source_file
) AS
WITH m AS (
  SELECT
    run_id,
    rank,
    coalesce(
      iteration,
      CAST(row_number() OVER (PARTITION BY run_id, rank, source_file ORDER BY ts_ns) - 1 AS INTEGER)
    ) AS iteration,
    ts_ns,
    dur_ns,
    end_ns,
    source_file
  FROM stg_store__markers
  WHERE kind = 'iteration' AND ts_ns IS NOT NULL AND dur_ns IS NOT NULL
)
SELECT
  run_id,
  rank,
  iteration,
  ts_ns AS start_ns,
  end_ns,
  dur_ns AS duration_ns,
  source_file
FROM m
QUALIFY row_number() OVER (PARTITION BY run_id, rank, iteration ORDER BY ts_ns, source_file) = 1
