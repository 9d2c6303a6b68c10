-- Logical communication calls per operation and traffic class (issue 19): each call once however many tools logged it (int_calls), with how many of them a source timed; what `commscope summary` prints as the run's traffic.
-- One row per (run_id, op, traffic_class) with at least one call. Input: int_calls, as int_calls_tallied (its calls counted per rank, op, class, size, duration source and flags: the sums and the median size weigh each value by its count). Sizes are int_calls.msg_bytes (the anchor's, else the best other source's); durations are never summed here (timed_calls counts the calls with one).
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
  -- the median size of each row: the value at the middle of its calls' cumulative counts
  -- (DuckDB's median: for an even count the mean of the two middle values, lo * 0.5 + hi * 0.5)
  size_cum AS (
    SELECT
      *,
      sum(n) OVER (
        PARTITION BY run_id, op, traffic_class ORDER BY msg_bytes
        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
      ) AS upto,
      sum(n) OVER (PARTITION BY run_id, op, traffic_class) AS total
    FROM (
      SELECT run_id, op, traffic_class, msg_bytes, sum(calls) AS n
      FROM tallied
      WHERE msg_bytes IS NOT NULL
      GROUP BY ALL
    )
  ),
  size_median AS (
    SELECT
      run_id,
      op,
      traffic_class,
      CASE
        WHEN any_value(total) % 2 = 1
          THEN min(msg_bytes) FILTER (WHERE upto > (total - 1) // 2)::DOUBLE
        ELSE min(msg_bytes) FILTER (WHERE upto > (total - 1) // 2)::DOUBLE * 0.5
          + min(msg_bytes) FILTER (WHERE upto > total // 2)::DOUBLE * 0.5
      END AS median_msg_bytes
    FROM size_cum
    GROUP BY run_id, op, traffic_class
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
