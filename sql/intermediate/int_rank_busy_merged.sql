-- Merged activity intervals per rank and iteration: communication, computation and any GPU activity of the iteration's own work (the unions the paper's exposed/hidden and on/off rules use, and what HTA computes per step).
-- One row per disjoint interval per (run, rank, iteration, activity). Work belongs to the iteration that launched it (int_kernel_iteration, int_comm_ops_timed; launch unknown: the iteration its start falls in) and is never clipped to a window: a lagging GPU's step keeps its work, work launched outside every iteration is in none (unattributed_work counts it). activity: comm (the rank's comm kernels where it has any: the same GPU intervals as its kernel-timed calls, counted once, and without the gap between the kernels of one merged call, e.g. DeepEP notify -> data; else its timed calls of int_comm_ops_timed, the one timed list), compute (compute kernels), busy (every kernel, memcpy, memset).
CREATE OR REPLACE VIEW int_rank_busy_merged(
  -- Training run identifier.
  run_id,
  -- Global rank.
  rank,
  -- Iteration whose work the interval is.
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
WITH
  k AS (
    SELECT * FROM int_kernel_iteration WHERE iteration IS NOT NULL AND rank IS NOT NULL
  ),
  comm_kernel_ranks AS (
    SELECT DISTINCT run_id, rank FROM int_kernel_iteration WHERE category = 'comm'
  ),
  raw AS (
    SELECT
      {'run_id': run_id, 'rank': rank, 'iteration': iteration, 'activity': 'busy',
        'source': 'kernels'} AS k,
      ts_ns,
      dur_ns
    FROM k
    UNION ALL
    SELECT
      {'run_id': run_id, 'rank': rank, 'iteration': iteration, 'activity': 'compute',
        'source': 'kernels'} AS k,
      ts_ns,
      dur_ns
    FROM k
    WHERE category = 'compute'
    UNION ALL
    SELECT
      {'run_id': run_id, 'rank': rank, 'iteration': iteration, 'activity': 'comm',
        'source': 'kernels'} AS k,
      ts_ns,
      dur_ns
    FROM k
    WHERE category = 'comm'
    UNION ALL
    SELECT
      {'run_id': o.run_id, 'rank': o.rank, 'iteration': o.iteration, 'activity': 'comm',
        'source': 'comm_ops'} AS k,
      o.ts_ns,
      o.dur_ns
    FROM int_comm_ops_timed AS o
    ANTI JOIN comm_kernel_ranks AS kr ON o.run_id = kr.run_id AND o.rank = kr.rank
    WHERE o.iteration IS NOT NULL
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
FROM interval_merge(raw)
