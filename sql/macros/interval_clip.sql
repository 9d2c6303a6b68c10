-- Intervals cut to windows of the same key: the part of each interval inside each window.
-- One row per (interval, window) pair that overlaps; rel(k, ts_ns, dur_ns), win(k, w, ts_ns, dur_ns).
CREATE OR REPLACE MACRO interval_clip(rel, win) AS TABLE
WITH r AS (
  SELECT k, ts_ns, ts_ns + dur_ns AS end_ns
  FROM query_table(rel)
  WHERE ts_ns IS NOT NULL AND dur_ns IS NOT NULL AND dur_ns > 0
),
w AS (
  SELECT k, w, ts_ns AS w_start, ts_ns + dur_ns AS w_end
  FROM query_table(win)
  WHERE ts_ns IS NOT NULL AND dur_ns IS NOT NULL AND dur_ns > 0
)
SELECT
  r.k,
  w.w,
  greatest(r.ts_ns, w.w_start) AS ts_ns,
  least(r.end_ns, w.w_end) AS end_ns,
  least(r.end_ns, w.w_end) - greatest(r.ts_ns, w.w_start) AS dur_ns
FROM r
JOIN w ON r.k = w.k AND r.ts_ns < w.w_end AND r.end_ns > w.w_start
