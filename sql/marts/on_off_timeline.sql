-- On/off timeline sample: the merged communication and compute intervals of a few ranks over a few middle iterations, for the report's timeline view (the paper's on-off pattern, §3.1).
-- One row per disjoint interval per (run, rank, iteration, activity), for at most 8 ranks (spread evenly over the ranks that communicate, plus the rank with the most communication time) and the 3 middle iterations. Reads int_rank_busy_merged; bounded so that a 1024-rank run stays small. Comm intervals carry the transmitting vs waiting split of the calls that start in them (int_breakdown_calls: xfer_ns, wait_ns; compute rows: null).
CREATE OR REPLACE VIEW on_off_timeline(
  -- Training run identifier.
  run_id,
  -- Global rank (one of the sampled ranks).
  rank,
  -- Iteration (one of the middle iterations).
  iteration,
  -- comm | compute.
  activity,
  -- Interval start, ns (the rank's clock).
  ts_ns,
  -- Interval end, ns.
  end_ns,
  -- Why the rank was sampled: spread | most_comm.
  picked_as,
  -- comm rows: Σ transfer parts of the calls starting in the interval (transmitting), ns; compute rows: null.
  xfer_ns,
  -- comm rows: Σ waiting parts of those calls (bubble or sync wait), ns; compute rows: null.
  wait_ns
) AS
WITH comm AS (
  SELECT run_id, rank, sum(dur_ns) AS comm_ns
  FROM int_rank_busy_merged
  WHERE activity = 'comm'
  GROUP BY run_id, rank
),
numbered AS (
  SELECT
    run_id,
    rank,
    comm_ns,
    row_number() OVER (PARTITION BY run_id ORDER BY rank) - 1 AS idx,
    count(*) OVER (PARTITION BY run_id) AS n,
    row_number() OVER (PARTITION BY run_id ORDER BY comm_ns DESC, rank) AS by_comm
  FROM comm
),
picked AS (
  SELECT run_id, rank, 'spread' AS picked_as
  FROM numbered
  WHERE n <= 8 OR idx % CAST(ceil(n / 7.0) AS BIGINT) = 0
  UNION ALL
  SELECT run_id, rank, 'most_comm' AS picked_as
  FROM numbered
  WHERE n > 8 AND by_comm = 1 AND idx % CAST(ceil(n / 7.0) AS BIGINT) <> 0
),
iters AS (
  SELECT
    run_id,
    iteration,
    row_number() OVER (PARTITION BY run_id ORDER BY iteration) - 1 AS idx,
    count(*) OVER (PARTITION BY run_id) AS n
  FROM (SELECT DISTINCT run_id, iteration FROM int_rank_busy_merged WHERE iteration IS NOT NULL)
),
middle AS (
  SELECT run_id, iteration
  FROM iters
  WHERE n <= 3 OR idx BETWEEN n // 2 - 1 AND n // 2 + 1
),
sampled AS (
  SELECT b.run_id, b.rank, b.iteration, b.activity, b.ts_ns, b.end_ns, p.picked_as
  FROM int_rank_busy_merged AS b
  JOIN picked AS p ON p.run_id = b.run_id AND p.rank = b.rank
  JOIN middle AS m ON m.run_id = b.run_id AND m.iteration = b.iteration
  WHERE b.activity IN ('comm', 'compute')
),
split AS (
  -- the calls of the sampled comm intervals, by the interval they start in
  SELECT s.run_id, s.rank, s.iteration, s.ts_ns, sum(c.xfer_ns) AS xfer_ns,
    sum(c.wait_ns) AS wait_ns
  FROM sampled AS s
  JOIN int_breakdown_calls AS c
    ON c.run_id = s.run_id AND c.rank = s.rank AND c.iteration = s.iteration
    AND c.ts_ns >= s.ts_ns AND c.ts_ns < s.end_ns
  WHERE s.activity = 'comm'
  GROUP BY s.run_id, s.rank, s.iteration, s.ts_ns
)
SELECT
  s.run_id, s.rank, s.iteration, s.activity, s.ts_ns, s.end_ns, s.picked_as,
  CASE WHEN s.activity = 'comm' THEN coalesce(x.xfer_ns, 0) END::BIGINT AS xfer_ns,
  CASE WHEN s.activity = 'comm' THEN coalesce(x.wait_ns, 0) END::BIGINT AS wait_ns
FROM sampled AS s
LEFT JOIN split AS x
  ON x.run_id = s.run_id AND x.rank = s.rank AND x.iteration = s.iteration AND x.ts_ns = s.ts_ns
  AND s.activity = 'comm'
