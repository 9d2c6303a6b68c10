-- The time span of each iteration on the clock its work ran on: for a rank with GPU kernels and marker steps, from the first start of the step's own work (its kernels and timed calls, attributed by launch) to the next step's first start, the last step to its last end; otherwise the iteration's window (marker window of a CPU-only rank, or the span of a sequence iteration).
-- One row per (run, rank, iteration) of int_iterations with times and a rank. Why: a GPU that lags the CPU runs step N's work after step N's CPU window has closed, so a CPU window would cut the work off; the GPU span holds it (HTA measures on the GPU timeline too). A step with no work of its own starts at its window start. Work of a step that still runs after the next step's first start spills past the span's end: the marts report it as spill_ns (int_breakdown_rank_iteration, on_off) instead of clipping it. end_ns >= start_ns always.
CREATE OR REPLACE VIEW int_iteration_spans(
  -- Training run identifier.
  run_id,
  -- Global rank.
  rank,
  -- Iteration.
  iteration,
  -- Span start, ns.
  start_ns,
  -- Span end, ns.
  end_ns,
  -- end_ns - start_ns, ns.
  duration_ns,
  -- gpu_work (first work start to the next step's first start) | window (int_iterations' window).
  span_source,
  -- The iteration's window in int_iterations (CPU ProfilerStep window for markers): start, ns.
  window_start_ns,
  -- The iteration's window end, ns.
  window_end_ns
) AS
WITH
  iters AS (
    SELECT run_id, rank, iteration, source, start_ns, end_ns
    FROM int_iterations
    WHERE start_ns IS NOT NULL AND end_ns IS NOT NULL AND rank IS NOT NULL
  ),
  kernel_ranks AS (
    SELECT DISTINCT run_id, rank FROM int_kernel_iteration WHERE rank IS NOT NULL
  ),
  work AS (
    SELECT run_id, rank, iteration, ts_ns, end_ns
    FROM int_kernel_iteration
    WHERE iteration IS NOT NULL AND ts_ns IS NOT NULL
    UNION ALL
    SELECT run_id, rank, iteration, ts_ns, end_ns
    FROM int_comm_ops_timed
    WHERE iteration IS NOT NULL AND source = 'comm_ops'
  ),
  step_work AS (
    SELECT run_id, rank, iteration, min(ts_ns) AS first_ts, max(end_ns) AS last_end
    FROM work
    GROUP BY run_id, rank, iteration
  ),
  gpu AS (
    SELECT
      i.run_id,
      i.rank,
      i.iteration,
      coalesce(s.first_ts, i.start_ns) AS start_ns,
      s.last_end,
      i.start_ns AS window_start_ns,
      i.end_ns AS window_end_ns
    FROM iters AS i
    SEMI JOIN kernel_ranks AS kr ON kr.run_id = i.run_id AND kr.rank = i.rank
    LEFT JOIN step_work AS s
      ON s.run_id = i.run_id AND s.rank = i.rank AND s.iteration = i.iteration
    WHERE i.source = 'marker'
  ),
  gpu_spans AS (
    SELECT
      *,
      coalesce(
        min(start_ns) OVER (
          PARTITION BY run_id, rank ORDER BY iteration
          ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING
        ),
        last_end,
        window_end_ns
      ) AS next_start
    FROM gpu
  ),
  spans AS (
    SELECT
      run_id, rank, iteration, start_ns, greatest(next_start, start_ns) AS end_ns,
      'gpu_work' AS span_source, window_start_ns, window_end_ns
    FROM gpu_spans
    UNION ALL
    SELECT
      i.run_id, i.rank, i.iteration, i.start_ns, i.end_ns, 'window' AS span_source,
      i.start_ns AS window_start_ns, i.end_ns AS window_end_ns
    FROM iters AS i
    ANTI JOIN gpu AS g ON g.run_id = i.run_id AND g.rank = i.rank AND g.iteration = i.iteration
  )
SELECT
  run_id,
  rank,
  iteration,
  start_ns,
  end_ns,
  end_ns - start_ns AS duration_ns,
  span_source,
  window_start_ns,
  window_end_ns
FROM spans
