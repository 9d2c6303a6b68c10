-- The median of counted values per key: DuckDB's median (for an even count the mean of the two middle values, lo * 0.5 + hi * 0.5, as its interpolation computes it) of the multiset in which each value occurs as often as its weight says, without writing the repeated values out. The one statement of the rule for the marts that count their calls per value first (call_totals: the median message size; effective_bandwidth: the median correction factor; both read int_calls_tallied).
-- One row per key with a value; input rel(k, v, w): k the key (any type: a struct for several columns, whose null fields compare equal, as a GROUP BY of the columns groups them), v the value (any ordered type; nulls left out, as median leaves them out), w its weight (a count; rows of one (k, v) add up, weights <= 0 count nothing). Output (k, median DOUBLE). tests/sql/test_weighted_median.py checks it against DuckDB's median of the values written out.
CREATE OR REPLACE MACRO weighted_median(rel) AS TABLE
WITH
  counted AS (
    SELECT k, v, sum(w) AS n
    FROM query_table(rel)
    WHERE v IS NOT NULL AND w > 0
    GROUP BY k, v
  ),
  -- Algorithm: the values in order with their running count; the middle values are the
  -- first whose running count passes the 0-based positions (total - 1) // 2 and total // 2
  -- (the same position for an odd total)
  cum AS (
    SELECT
      k,
      v,
      sum(n) OVER (PARTITION BY k ORDER BY v ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
        AS upto,
      sum(n) OVER (PARTITION BY k) AS total
    FROM counted
  )
SELECT
  k,
  CASE
    WHEN any_value(total) % 2 = 1 THEN min(v) FILTER (WHERE upto > (total - 1) // 2)::DOUBLE
    ELSE min(v) FILTER (WHERE upto > (total - 1) // 2)::DOUBLE * 0.5
      + min(v) FILTER (WHERE upto > total // 2)::DOUBLE * 0.5
  END AS median
FROM cum
GROUP BY k
