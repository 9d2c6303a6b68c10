-- Logical communication calls per operation and traffic class (issue 19): each call once however many tools logged it (int_calls), with how many of them a source timed; what `commscope summary` prints as the run's traffic.
-- One row per (run_id, op, traffic_class) with at least one call. Input: int_calls. Sizes are int_calls.msg_bytes (the anchor's, else the best other source's); durations are never summed here (timed_calls counts the calls with one).
CREATE OR REPLACE VIEW call_totals(
  -- Training run identifier.
  run_id,
  -- Normalised operation.
  op,
  -- TP | PP | DP | EP | EmbTableSyn | other.
  traffic_class,
  -- Logical calls.
  calls,
  -- Distinct ranks that issued them (calls without a rank not counted).
  ranks,
  -- Sum of msg_bytes over the calls, bytes.
  bytes,
  -- Median msg_bytes, bytes.
  median_msg_bytes,
  -- Calls with a duration from some source (kernel, logged, cpu_range).
  timed_calls,
  -- Parsers whose records gave the durations, sorted, comma-joined (null when none).
  duration_sources,
  -- Calls logged by more than one parser.
  multi_source_calls,
  -- Calls whose sources logged different sizes (int_calls.size_conflict).
  size_conflicts
) AS
SELECT
  run_id,
  op,
  traffic_class,
  count(*) AS calls,
  count(DISTINCT rank) AS ranks,
  sum(msg_bytes)::BIGINT AS bytes,
  median(msg_bytes) AS median_msg_bytes,
  count(*) FILTER (WHERE dur_ns IS NOT NULL) AS timed_calls,
  string_agg(DISTINCT duration_source, ',' ORDER BY duration_source) AS duration_sources,
  count(*) FILTER (WHERE n_sources > 1) AS multi_source_calls,
  count(*) FILTER (WHERE size_conflict) AS size_conflicts
FROM int_calls
GROUP BY run_id, op, traffic_class
