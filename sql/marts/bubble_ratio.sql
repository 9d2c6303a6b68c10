-- Pipeline bubble ratio per stage and iteration (APNet'24 §4.1: the waiting part of a cross-stage call is bubble, only its transfer is PP/EmbTableSyn time; eq. 7), measured per stage beside the model's per-stage prediction (eq. 5/7 generalised per stage: predicted_stage_times), eq. 7's (p-1)/(p-1+m) and GPU idle gaps.
-- One row per (run, stage, iteration) over the ranks with a measured breakdown; stage null when the run has no parallel config (all ranks together). Inputs: int_breakdown_rank_iteration (T_bubble = waits of cross-stage calls: warm-up on early stages, drain and the end-of-iteration EmbTableSyn wait on later ones), predicted_stage_times (the model's r_bubble and t_bubble of each stage), predicted_times, run_config. Times are means over the stage's ranks; bubble_ratio = sum of bubble / sum of iteration time.
CREATE OR REPLACE VIEW bubble_ratio(
  -- Training run identifier.
  run_id,
  -- Pipeline stage (null when unknown).
  stage,
  -- Iteration.
  iteration,
  -- Ranks of the stage measured in the iteration.
  ranks,
  -- Mean iteration time of those ranks, ns.
  t_iter_ns,
  -- Mean T_bubble (waiting part of cross-stage calls: send/recv, EmbTableSyn) of those ranks, ns.
  t_bubble_ns,
  -- Mean T_PP (active transfer of send/recv), ns.
  t_pp_ns,
  -- Measured R_bubble: sum of T_bubble / sum of T_iter over the stage's ranks, in [0, 1].
  bubble_ratio,
  -- Eq. 7: (p-1)/(p-1+m) from predicted_times r_bubble_eq7, else from run_config pp and micro_batches; null without config.
  predicted_bubble_ratio,
  -- The model's T_bubble/T_iter with T_DP included (predicted_times r_bubble, rank 0's stage); null without predictions.
  predicted_bubble_ratio_model,
  -- Mean GPU idle time not inside communication or compute (t_idle_ns), ns.
  idle_gap_ns,
  -- How the PP calls were split: paired | fastest_call | mixed (see int_breakdown_calls).
  pp_split,
  -- The model's R_bubble of this stage (predicted_stage_times r_bubble: T_iter minus the stage's own work, over T_iter); null without predictions.
  predicted_stage_bubble_ratio,
  -- The model's T_bubble of this stage, ns (predicted_stage_times t_bubble, seconds x 1e9); null without predictions.
  predicted_stage_bubble_ns
) AS
WITH
  pred AS (
    SELECT
      run_id,
      max(value) FILTER (WHERE term = 'r_bubble_eq7') AS eq7,
      max(value) FILTER (WHERE term = 'r_bubble') AS model
    FROM predicted_times
    GROUP BY run_id
  ),
  stage_pred AS (
    SELECT
      run_id,
      stage,
      max(value) FILTER (WHERE term = 'r_bubble') AS r_bubble,
      max(value) FILTER (WHERE term = 't_bubble') * 1e9 AS t_bubble_ns
    FROM predicted_stage_times
    GROUP BY run_id, stage
  ),
  agg AS (
    SELECT
      run_id,
      stage,
      iteration,
      count(*) AS ranks,
      avg(t_iter_ns) AS t_iter_ns,
      avg(t_bubble_ns) AS t_bubble_ns,
      avg(t_pp_ns) AS t_pp_ns,
      sum(t_bubble_ns) / nullif(sum(t_iter_ns), 0) AS bubble_ratio,
      avg(t_idle_ns) AS idle_gap_ns,
      CASE
        WHEN count(pp_split) = 0 THEN NULL
        WHEN min(pp_split) = max(pp_split) THEN min(pp_split)
        ELSE 'mixed'
      END AS pp_split
    FROM int_breakdown_rank_iteration
    GROUP BY run_id, stage, iteration
  )
SELECT
  a.run_id,
  a.stage,
  a.iteration,
  a.ranks,
  a.t_iter_ns,
  a.t_bubble_ns,
  a.t_pp_ns,
  a.bubble_ratio,
  coalesce(
    p.eq7,
    CASE
      WHEN c.pp IS NOT NULL AND c.micro_batches IS NOT NULL AND c.pp - 1 + c.micro_batches > 0
        THEN (c.pp - 1) / (c.pp - 1 + c.micro_batches)
    END
  ) AS predicted_bubble_ratio,
  p.model AS predicted_bubble_ratio_model,
  a.idle_gap_ns,
  a.pp_split,
  sp.r_bubble AS predicted_stage_bubble_ratio,
  sp.t_bubble_ns AS predicted_stage_bubble_ns
FROM agg AS a
LEFT JOIN pred AS p ON p.run_id = a.run_id
LEFT JOIN stage_pred AS sp ON sp.run_id = a.run_id AND sp.stage = a.stage
LEFT JOIN run_config AS c ON c.run_id = a.run_id
