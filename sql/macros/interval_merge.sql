-- Union of intervals per key: overlapping or touching intervals merged into disjoint ones.
-- One row per maximal busy interval per key; input rel(k, ts_ns, dur_ns), k of any type. Rows are numbered once (rn) so that both window passes order identical intervals the same way (else two duplicates can land in different islands and the islands overlap).
CREATE OR REPLACE MACRO interval_merge(rel) AS TABLE
WITH src AS (
  SELECT k, ts_ns, ts_ns + dur_ns AS end_ns, row_number() OVER () AS rn
  FROM query_table(rel)
  WHERE ts_ns IS NOT NULL AND dur_ns IS NOT NULL AND dur_ns > 0
),
prev AS (
  SELECT
    k,
    ts_ns,
    end_ns,
    rn,
    max(end_ns) OVER (
      PARTITION BY k ORDER BY ts_ns, end_ns, rn ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS prev_end
  FROM src
),
islands AS (
  SELECT
    k,
    ts_ns,
    end_ns,
    sum(CASE WHEN prev_end IS NULL OR ts_ns > prev_end THEN 1 ELSE 0 END) OVER (
      PARTITION BY k ORDER BY ts_ns, end_ns, rn ROWS UNBOUNDED PRECEDING
    ) AS island
  FROM prev
)
SELECT k, min(ts_ns) AS ts_ns, max(end_ns) AS end_ns, max(end_ns) - min(ts_ns) AS dur_ns
FROM islands
GROUP BY k, island
