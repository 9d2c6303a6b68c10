-- The analytical model's prediction beside the measured value for each term (T_comp, T_TP, T_PP, T_DP, T_EmbTableSyn, T_EP, T_bubble, T_comm, T_iter, R_comm, R_bubble, R_bubble_eq7, C_TP, C_PP, C_DP), with absolute and relative errors (APNet'24 Fig. 10 validation).
-- One row per (run, term) that is measured or predicted. Measured = mean over the sample: the ranks of rank 0's pipeline stage (the model predicts rank 0; all ranks when stages are unknown) and their steady-state iterations (a rank's first iteration left out when it has 3 or more). Predicted = predicted_times (stage_exact mode, rank 0; seconds) and run_config's platform bandwidths; null without a config. Measured C_* = bus bytes (comm_bus_bytes of sql/macros/comm_bus_factor.sql, the nccl-tests factors) / call time of the sample's timed calls, bytes/s (decimal).
CREATE OR REPLACE VIEW model_vs_measured(
  -- Training run identifier.
  run_id,
  -- T_comp | T_TP | T_PP | T_DP | T_EmbTableSyn | T_EP | T_bubble | T_comm | T_iter | R_comm | R_bubble | R_bubble_eq7 | C_TP | C_PP | C_DP.
  term,
  -- s (times) | ratio | bytes/s (C_*: bus bytes per second, the model's effective bandwidth).
  unit,
  -- Measured mean over the sample ranks and steady-state iterations (times: per rank and iteration; ratios: mean of per-iteration ratios; C_*: sum of bus bytes comm_bus_bytes(op, msg_bytes, n) of sql/macros/comm_bus_factor.sql / sum of call time of the sample's timed calls (no duration, no share), PP: message bytes / active transfer; bytes/s, decimal).
  measured,
  -- The model's value (null when the run has no config or the model gives none).
  predicted,
  -- |measured - predicted|, in unit.
  abs_error,
  -- (measured - predicted) / predicted.
  rel_error,
  -- Number of (rank, iteration) samples averaged (C_*: calls).
  n_samples
) AS
WITH
  bd AS (
    SELECT
      b.*,
      row_number() OVER (PARTITION BY b.run_id, b.rank ORDER BY b.iteration) AS nth,
      count(*) OVER (PARTITION BY b.run_id, b.rank) AS n_iter
    FROM int_breakdown_rank_iteration AS b
  ),
  model_stage AS (
    SELECT run_id, min(stage) FILTER (WHERE rank = 0) AS stage FROM int_rank_nodes GROUP BY run_id
  ),
  sample AS (
    SELECT bd.*
    FROM bd
    LEFT JOIN model_stage AS ms ON ms.run_id = bd.run_id
    WHERE (ms.stage IS NULL OR bd.stage = ms.stage) AND (bd.n_iter < 3 OR bd.nth > 1)
  ),
  time_terms AS (
    SELECT
      run_id,
      count(*) AS n,
      avg(t_comp_ns) / 1e9 AS t_comp,
      avg(t_tp_ns) / 1e9 AS t_tp,
      avg(t_pp_ns) / 1e9 AS t_pp,
      avg(t_dp_ns) / 1e9 AS t_dp,
      avg(t_emb_ns) / 1e9 AS t_emb,
      avg(t_ep_ns) / 1e9 AS t_ep,
      avg(t_bubble_ns) / 1e9 AS t_bubble,
      avg(t_comm_ns) / 1e9 AS t_comm,
      avg(t_iter_ns) / 1e9 AS t_iter,
      avg(r_comm) AS r_comm,
      avg(r_bubble) AS r_bubble
    FROM sample
    GROUP BY run_id
  ),
  measured_times AS (
    SELECT run_id, term, unit, measured, n
    FROM time_terms
    CROSS JOIN LATERAL (
      VALUES
        ('T_comp', 's', t_comp),
        ('T_TP', 's', t_tp),
        ('T_PP', 's', t_pp),
        ('T_DP', 's', t_dp),
        ('T_EmbTableSyn', 's', t_emb),
        ('T_EP', 's', t_ep),
        ('T_bubble', 's', t_bubble),
        ('T_comm', 's', t_comm),
        ('T_iter', 's', t_iter),
        ('R_comm', 'ratio', r_comm),
        ('R_bubble', 'ratio', r_bubble),
        ('R_bubble_eq7', 'ratio', r_bubble)
    ) AS v(term, unit, measured)
  ),
  sample_calls AS (
    SELECT
      c.run_id,
      c.traffic_class,
      CASE
        WHEN c.traffic_class = 'PP' THEN c.msg_bytes::DOUBLE
        ELSE comm_bus_bytes(c.op, c.msg_bytes, c.group_size)
      END AS bus_bytes,
      CASE WHEN c.traffic_class = 'PP' THEN c.xfer_ns ELSE c.dur_ns END AS busy_ns
    FROM int_breakdown_calls AS c
    JOIN sample AS s
      ON s.run_id = c.run_id AND s.rank = c.rank AND c.ts_ns >= s.start_ns AND c.ts_ns < s.end_ns
    WHERE c.traffic_class IN ('TP', 'PP', 'DP') AND c.msg_bytes > 0
  ),
  timed_calls AS (
    -- bandwidth only from calls with their own duration and a known bus volume
    SELECT * FROM sample_calls WHERE busy_ns > 0 AND bus_bytes IS NOT NULL
  ),
  measured_bw AS (
    SELECT
      run_id,
      'C_' || traffic_class AS term,
      'bytes/s' AS unit,
      sum(bus_bytes) / nullif(sum(busy_ns), 0) * 1e9 AS measured,
      count(*) AS n
    FROM timed_calls
    GROUP BY run_id, traffic_class
  ),
  measured AS (
    SELECT * FROM measured_times
    UNION ALL
    SELECT * FROM measured_bw
  ),
  predicted AS (
    SELECT
      run_id,
      CASE term
        WHEN 't_comp' THEN 'T_comp'
        WHEN 't_tp' THEN 'T_TP'
        WHEN 't_pp' THEN 'T_PP'
        WHEN 't_dp' THEN 'T_DP'
        WHEN 't_emb' THEN 'T_EmbTableSyn'
        WHEN 't_ep' THEN 'T_EP'
        WHEN 't_bubble' THEN 'T_bubble'
        WHEN 't_comm' THEN 'T_comm'
        WHEN 't_iter' THEN 'T_iter'
        WHEN 'r_comm' THEN 'R_comm'
        WHEN 'r_bubble' THEN 'R_bubble'
        WHEN 'r_bubble_eq7' THEN 'R_bubble_eq7'
      END AS term,
      value AS predicted
    FROM predicted_times
    UNION ALL
    SELECT run_id, v.term, v.predicted
    FROM run_config
    CROSS JOIN LATERAL (
      VALUES
        ('C_TP', TRY_CAST(json_extract(config_json, '$.platform.c_tp') AS DOUBLE)),
        ('C_PP', TRY_CAST(json_extract(config_json, '$.platform.c_pp') AS DOUBLE)),
        ('C_DP', TRY_CAST(json_extract(config_json, '$.platform.c_dp') AS DOUBLE))
    ) AS v(term, predicted)
    WHERE config_json IS NOT NULL
  ),
  known_predicted AS (
    SELECT run_id, term, max(predicted) AS predicted
    FROM predicted
    WHERE term IS NOT NULL AND predicted IS NOT NULL
    GROUP BY run_id, term
  )
SELECT
  coalesce(m.run_id, p.run_id) AS run_id,
  coalesce(m.term, p.term) AS term,
  coalesce(
    m.unit,
    CASE
      WHEN p.term LIKE 'T\_%' ESCAPE '\' THEN 's'
      WHEN p.term LIKE 'C\_%' ESCAPE '\' THEN 'bytes/s'
      ELSE 'ratio'
    END
  ) AS unit,
  m.measured,
  p.predicted,
  abs(m.measured - p.predicted) AS abs_error,
  (m.measured - p.predicted) / nullif(p.predicted, 0) AS rel_error,
  coalesce(m.n, 0) AS n_samples
FROM measured AS m
FULL OUTER JOIN known_predicted AS p ON p.run_id = m.run_id AND p.term = m.term
