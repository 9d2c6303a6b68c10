-- The time span of each iteration on the clock its work ran on: for a rank with GPU kernels and marker steps, from the first start of the step's own work (attributed by launch), but not before the previous step's work on the rank's main stream has ended, to the next step's start when the next step is iteration + 1 (and was recorded); else (the last step, or a gap in the profiled steps) to the last end of its own work. Otherwise the iteration's window (marker window of a CPU-only rank, or the span of a sequence iteration).
-- One row per (run, rank, iteration) of int_iterations with times and a rank. Inputs: int_iterations, int_kernel_iteration, int_comm_ops_timed. Why: a GPU that lags the CPU runs step N's work after step N's CPU window has closed, so a CPU window would cut the work off; the GPU span holds it. Why the main stream (the stream with the most compute-kernel time; it runs in launch order): side streams run ahead (a data-prefetch memcpy launched in step N+1 runs at once while the main stream still works on step N: 150 ms early on hta_negative_queue_length), so step N+1 starts only once the main stream's earlier work (step N's, or older work in no step) is done; a step that begins with communication (a pipeline stage's first recv) still starts there. Starts never decrease; a step without work starts at its window start. The step's own work outside its span (side-stream work run ahead, work still running after the next step began) is not clipped: the marts report it as spill_ns (int_breakdown_rank_iteration, on_off). end_ns >= start_ns always.
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
  -- gpu_work (the step's own work on the GPU) | window (int_iterations' window).
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
  stream_time AS (
    SELECT run_id, rank, stream, sum(dur_ns) FILTER (WHERE category = 'compute') AS comp, sum(dur_ns) AS total
    FROM int_kernel_iteration
    WHERE rank IS NOT NULL
    GROUP BY run_id, rank, stream
  ),
  main_stream AS (
    SELECT run_id, rank, stream
    FROM stream_time
    QUALIFY row_number() OVER (
      PARTITION BY run_id, rank ORDER BY coalesce(comp, 0) DESC, total DESC, stream NULLS LAST
    ) = 1
  ),
  main_kernels AS (
    SELECT k.run_id, k.rank, k.iteration, k.ts_ns, k.end_ns
    FROM int_kernel_iteration AS k
    SEMI JOIN main_stream AS m
      ON m.run_id = k.run_id AND m.rank = k.rank AND m.stream IS NOT DISTINCT FROM k.stream
    WHERE k.ts_ns IS NOT NULL
  ),
  main_step AS (
    SELECT run_id, rank, iteration, min(ts_ns) AS main_first, max(end_ns) AS main_end
    FROM main_kernels
    WHERE iteration IS NOT NULL
    GROUP BY run_id, rank, iteration
  ),
  main_before AS (
    -- the main-stream kernel running just before the step's first one there (an earlier step's,
    -- or older work in no step, e.g. launched before the trace): in-order, so it ends last
    SELECT s.run_id, s.rank, s.iteration, k.end_ns AS before_end
    FROM main_step AS s
    ASOF JOIN main_kernels AS k
      ON k.run_id = s.run_id AND k.rank = s.rank AND s.main_first > k.ts_ns
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
      coalesce(s.first_ts, i.start_ns) AS first_ts,
      s.last_end,
      ms.main_end,
      mb.before_end,
      i.start_ns AS window_start_ns,
      i.end_ns AS window_end_ns
    FROM iters AS i
    SEMI JOIN kernel_ranks AS kr ON kr.run_id = i.run_id AND kr.rank = i.rank
    LEFT JOIN step_work AS s
      ON s.run_id = i.run_id AND s.rank = i.rank AND s.iteration = i.iteration
    LEFT JOIN main_step AS ms
      ON ms.run_id = i.run_id AND ms.rank = i.rank AND ms.iteration = i.iteration
    LEFT JOIN main_before AS mb
      ON mb.run_id = i.run_id AND mb.rank = i.rank AND mb.iteration = i.iteration
    WHERE i.source = 'marker'
  ),
  gpu_raw AS (
    -- not before the previous steps' main-stream work has ended
    SELECT
      *,
      greatest(
        first_ts,
        before_end,
        max(main_end) OVER (
          PARTITION BY run_id, rank ORDER BY iteration
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        )
      ) AS raw_start
    FROM gpu
  ),
  gpu_start AS (
    -- starts never decrease
    SELECT
      *,
      max(raw_start) OVER (
        PARTITION BY run_id, rank ORDER BY iteration ROWS UNBOUNDED PRECEDING
      ) AS start_ns
    FROM gpu_raw
  ),
  gpu_spans AS (
    SELECT
      *,
      -- the next step's start only when that step is iteration + 1 (profiled steps 0, 1, 29:
      -- step 1 ends with its own work, not at step 29's start)
      coalesce(
        CASE
          WHEN lead(iteration) OVER w = iteration + 1 THEN lead(start_ns) OVER w
        END,
        last_end,
        window_end_ns
      ) AS next_start
    FROM gpu_start
    WINDOW w AS (PARTITION BY run_id, rank ORDER BY iteration)
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
