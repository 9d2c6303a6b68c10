-- Logical communication calls per operation and traffic class (issue 19): each call once however many tools logged it (int_calls), with how many of them a source timed; what `commscope summary` prints as the run's traffic.
-- One row per (run_id, op, traffic_class) with at least one call. Input: int_calls, as int_calls_tallied (its calls counted per rank, op, class, size, duration source and flags: the sums and the median size weigh each value by its count; the median is the macro weighted_median, sql/macros/weighted_median.sql). Sizes are int_calls.msg_bytes (the anchor's, else the best other source's); durations are never summed here (timed_calls counts the calls with one).
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
WITH
  tallied AS (SELECT * FROM int_calls_tallied),
  sizes AS (
    SELECT {'run_id': run_id, 'op': op, 'traffic_class': traffic_class} AS k, msg_bytes AS v,
      calls AS w
    FROM tallied
  ),
  -- the median size of each row: the median of its calls' sizes, each counted (the macro
  -- weighted_median, sql/macros/weighted_median.sql)
  size_median AS (
    SELECT m.k.run_id, m.k.op, m.k.traffic_class, m.median AS median_msg_bytes
    FROM weighted_median(sizes) AS m
  ),
  totals AS (
    SELECT
      run_id,
      op,
      traffic_class,
      sum(calls)::BIGINT AS calls,
      count(DISTINCT rank) AS ranks,
      sum(msg_bytes::HUGEINT * calls)::BIGINT AS bytes,
      coalesce(sum(calls) FILTER (WHERE timed), 0)::BIGINT AS timed_calls,
      string_agg(DISTINCT duration_source, ',' ORDER BY duration_source) AS duration_sources,
      coalesce(sum(calls) FILTER (WHERE multi_source), 0)::BIGINT AS multi_source_calls,
      coalesce(sum(calls) FILTER (WHERE size_conflict), 0)::BIGINT AS size_conflicts
    FROM tallied
    GROUP BY run_id, op, traffic_class
  )
SELECT
  t.run_id,
  t.op,
  t.traffic_class,
  t.calls,
  t.ranks,
  t.bytes,
  m.median_msg_bytes,
  t.timed_calls,
  t.duration_sources,
  t.multi_source_calls,
  t.size_conflicts
FROM totals AS t
LEFT JOIN size_median AS m
  ON m.run_id = t.run_id AND m.op IS NOT DISTINCT FROM t.op
  AND m.traffic_class IS NOT DISTINCT FROM t.traffic_class
