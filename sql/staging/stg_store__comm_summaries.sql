-- Rows of DeepSpeed's comms-logger summary table (latency table only), sizes in bytes.
-- One row per (summary table, record name, message size) with table_kind = 'latency'.
CREATE OR REPLACE VIEW stg_store__comm_summaries(
  -- Training run identifier.
  run_id,
  -- File the row came from.
  source_file,
  -- Line in that file.
  source_line,
  -- Rank that printed the table.
  rank,
  -- 0-based index of the summary table within the file.
  summary_index,
  -- Normalised operation.
  op,
  -- Record name as printed.
  raw_op,
  -- Message size in bytes (the calling rank's argument, DeepSpeed semantics).
  msg_bytes,
  -- Number of calls of this size.
  calls,
  -- Total latency, ms.
  total_latency_ms,
  -- Trimmed-mean latency, ms.
  avg_latency_ms,
  -- DeepSpeed tput_avg as printed, Gbit/s (computed with the world size).
  algbw_gbps,
  -- DeepSpeed busbw_avg as printed, Gbit/s (computed with the world size).
  busbw_gbps
) AS
SELECT
  run_id,
  source_file,
  source_line,
  rank,
  summary_index,
  op,
  raw_op,
  msg_bytes,
  "count" AS calls,
  total_latency_ms,
  avg_latency_ms,
  algbw_gbps,
  busbw_gbps
FROM comm_summaries
WHERE coalesce(table_kind, 'latency') = 'latency'
