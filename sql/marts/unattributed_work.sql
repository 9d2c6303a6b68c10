-- Data quality of the iteration attribution: per rank, the GPU work and timed communication that belong to no iteration (launched outside every step, HTA rule step.ts <= launch < step.end; launch unknown: started outside every iteration), so the time marts' silence about them is visible instead of silent.
-- One row per (run, rank) that has at least one timed iteration (int_iteration_spans). Kernels from int_kernel_iteration (every category), communication from int_comm_ops_timed (the one timed list); durations are plain sums of the items (not unions). Nothing here is in on_off or iteration_breakdown.
CREATE OR REPLACE VIEW unattributed_work(
  -- Training run identifier.
  run_id,
  -- Global rank.
  rank,
  -- GPU activities (kernels, memcpys, memsets) of the rank.
  kernels,
  -- Of those, the ones in no iteration.
  kernels_outside,
  -- Summed duration of the kernels in no iteration, ns.
  kernel_ns_outside,
  -- kernel_ns_outside / summed duration of all the rank's kernels (null without kernels).
  kernel_share_outside,
  -- Timed communication rows of the rank (int_comm_ops_timed).
  comm_rows,
  -- Of those, the ones in no iteration.
  comm_rows_outside,
  -- Summed duration of the communication rows in no iteration, ns.
  comm_ns_outside
) AS
WITH
  ranks AS (SELECT DISTINCT run_id, rank FROM int_iteration_spans),
  k AS (
    SELECT
      run_id,
      rank,
      count(*) AS kernels,
      count(*) FILTER (WHERE iteration IS NULL) AS kernels_outside,
      coalesce(sum(dur_ns) FILTER (WHERE iteration IS NULL), 0) AS kernel_ns_outside,
      sum(dur_ns) AS kernel_ns
    FROM int_kernel_iteration
    GROUP BY run_id, rank
  ),
  c AS (
    SELECT
      run_id,
      rank,
      count(*) AS comm_rows,
      count(*) FILTER (WHERE iteration IS NULL) AS comm_rows_outside,
      coalesce(sum(dur_ns) FILTER (WHERE iteration IS NULL), 0) AS comm_ns_outside
    FROM int_comm_ops_timed
    GROUP BY run_id, rank
  )
SELECT
  r.run_id,
  r.rank,
  coalesce(k.kernels, 0) AS kernels,
  coalesce(k.kernels_outside, 0) AS kernels_outside,
  coalesce(k.kernel_ns_outside, 0)::BIGINT AS kernel_ns_outside,
  k.kernel_ns_outside / nullif(k.kernel_ns, 0) AS kernel_share_outside,
  coalesce(c.comm_rows, 0) AS comm_rows,
  coalesce(c.comm_rows_outside, 0) AS comm_rows_outside,
  coalesce(c.comm_ns_outside, 0)::BIGINT AS comm_ns_outside
FROM ranks AS r
LEFT JOIN k ON k.run_id = r.run_id AND k.rank = r.rank
LEFT JOIN c ON c.run_id = r.run_id AND c.rank = r.rank
