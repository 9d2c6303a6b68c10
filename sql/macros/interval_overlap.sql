-- Length of the intersection of two interval sets per key (each set disjoint, e.g. merged).
-- One row per key with a positive overlap; a(k, ts_ns, dur_ns), b(k, ts_ns, dur_ns).
CREATE OR REPLACE MACRO interval_overlap(a, b) AS TABLE
WITH x AS (
  SELECT k, ts_ns, ts_ns + dur_ns AS end_ns FROM query_table(a) WHERE dur_ns > 0
),
y AS (
  SELECT k, ts_ns, ts_ns + dur_ns AS end_ns FROM query_table(b) WHERE dur_ns > 0
)
SELECT x.k, sum(least(x.end_ns, y.end_ns) - greatest(x.ts_ns, y.ts_ns)) AS overlap_ns
FROM x
JOIN y ON x.k = y.k AND x.ts_ns < y.end_ns AND y.ts_ns < x.end_ns
GROUP BY x.k
