-- Merged activity intervals per rank and iteration window: communication, computation and any GPU activity (the unions the paper's exposed/hidden and on/off rules use).
-- One row per disjoint interval per (run, rank, iteration, activity). activity: comm (comm kernels where the rank has any, else timed comm calls), compute (compute kernels), busy (every kernel, memcpy, memset). Intervals are cut to the iteration's [start, end).
CREATE OR REPLACE VIEW int_rank_busy_merged(
  -- Training run identifier.
  run_id,
  -- Global rank.
  rank,
  -- Iteration of the window.
  iteration,
  -- comm | compute | busy.
  activity,
  -- kernels | comm_ops: where the intervals come from.
  source,
  -- Interval start, ns.
  ts_ns,
  -- Interval end, ns.
  end_ns,
  -- Interval length, ns.
  dur_ns
) AS
WITH kernel_ranks AS (
  SELECT DISTINCT run_id, rank FROM stg_store__kernels WHERE category = 'comm'
),
raw AS (
  SELECT
    {'run_id': run_id, 'rank': rank, 'activity': 'busy', 'source': 'kernels'} AS k,
    ts_ns,
    dur_ns
  FROM stg_store__kernels
  UNION ALL
  SELECT
    {'run_id': run_id, 'rank': rank, 'activity': 'compute', 'source': 'kernels'} AS k,
    ts_ns,
    dur_ns
  FROM stg_store__kernels
  WHERE category = 'compute'
  UNION ALL
  SELECT
    {'run_id': run_id, 'rank': rank, 'activity': 'comm', 'source': 'kernels'} AS k,
    ts_ns,
    dur_ns
  FROM stg_store__kernels
  WHERE category = 'comm'
  UNION ALL
  SELECT
    {'run_id': o.run_id, 'rank': o.rank, 'activity': 'comm', 'source': 'comm_ops'} AS k,
    o.ts_ns,
    o.dur_ns
  FROM int_comm_ops_timed AS o
  ANTI JOIN kernel_ranks AS kr ON o.run_id = kr.run_id AND o.rank = kr.rank
),
windows AS (
  SELECT
    {'run_id': i.run_id, 'rank': i.rank, 'activity': a.activity, 'source': a.source} AS k,
    i.iteration AS w,
    i.start_ns AS ts_ns,
    i.duration_ns AS dur_ns
  FROM int_iterations AS i
  CROSS JOIN (
    VALUES ('busy', 'kernels'), ('compute', 'kernels'), ('comm', 'kernels'), ('comm', 'comm_ops')
  ) AS a(activity, source)
  WHERE i.start_ns IS NOT NULL AND i.rank IS NOT NULL
),
clipped AS (
  SELECT struct_insert(k, iteration := w) AS k, ts_ns, dur_ns
  FROM interval_clip(raw, windows)
)
SELECT
  k.run_id,
  k.rank,
  k.iteration,
  k.activity,
  k.source,
  ts_ns,
  end_ns,
  dur_ns
FROM interval_merge(clipped)
