-- The analytical model's prediction beside the measured value for each term (T_comp, T_TP, T_PP, T_DP, T_EmbTableSyn, T_EP, T_bubble, T_sync_wait, T_comm, T_iter, R_comm, R_bubble, R_bubble_eq7, C_TP, C_PP, C_DP, C_EP), with absolute and relative errors (APNet'24 Fig. 10 validation), like with like.
-- One row per (run, term) that is measured or predicted. Inputs: int_breakdown_rank_iteration, int_breakdown_calls, int_rank_nodes, int_class_bandwidth, predicted_times, run_config. Measured = mean over the sample: the ranks of rank 0's pipeline stage (the model predicts rank 0; all ranks when stages are unknown) and their steady-state iterations (a rank's first iteration left out when it has 3 or more). The model's communication terms are transfers (T_X = bus bytes / C_X, eqs 2-4), so the measured T_TP, T_PP, T_DP, T_EmbTableSyn, T_EP and T_comm are the transfer parts of the calls (int_breakdown_calls.xfer_ns); the sync wait (same-stage waiting, which iteration_breakdown's T_TP/T_DP/T_EP include) is its own row T_sync_wait, with no prediction; T_bubble = waits of cross-stage calls. Measured C_* = the one C per class of int_class_bandwidth (Σ bus bytes / Σ transfer time, bytes/s, decimal; whole run). Predicted = predicted_times (stage_exact mode, rank 0; seconds) and run_config's platform bandwidths; null without a config. Rows in the model's order (term_order: times, ratios, then bandwidths), which the report's table shows.
CREATE OR REPLACE VIEW model_vs_measured(
  -- Training run identifier.
  run_id,
  -- T_comp | T_TP | T_PP | T_DP | T_EmbTableSyn | T_EP | T_bubble | T_sync_wait | T_comm | T_iter | R_comm | R_bubble | R_bubble_eq7 | C_TP | C_PP | C_DP | C_EP.
  term,
  -- s (times) | ratio | bytes/s (C_*: bus bytes per second, the model's effective bandwidth).
  unit,
  -- Measured mean over the sample ranks and steady-state iterations (times: per rank and iteration, communication terms = transfer parts; ratios: mean of per-iteration ratios, R_comm from the transfer-based T_comm; C_*: int_class_bandwidth.busbw_transfer_Bps, bytes/s, decimal).
  measured,
  -- The model's value (null when the run has no config or the model gives none).
  predicted,
  -- |measured - predicted|, in unit.
  abs_error,
  -- (measured - predicted) / predicted.
  rel_error,
  -- Number of (rank, iteration) samples averaged (C_*: calls of the class in int_class_bandwidth).
  n_samples,
  -- Position of the term in the model's order, 1 = first: the times of eqs. 2-9 (T_comp .. T_iter), the ratios (R_*), then the bandwidths (C_*), as listed in term above; the rows' order (null for a term outside that list: none today).
  term_order
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
  xfer AS (
    -- the transfer part of each class per sample (rank, iteration)
    SELECT
      c.run_id,
      c.rank,
      c.iteration,
      sum(c.xfer_ns) FILTER (WHERE c.traffic_class = 'TP') AS tp,
      sum(c.xfer_ns) FILTER (WHERE c.traffic_class = 'PP') AS pp,
      sum(c.xfer_ns) FILTER (WHERE c.traffic_class = 'DP') AS dp,
      sum(c.xfer_ns) FILTER (WHERE c.traffic_class = 'EmbTableSyn') AS emb,
      sum(c.xfer_ns) FILTER (WHERE c.traffic_class = 'EP') AS ep,
      sum(c.xfer_ns) AS comm
    FROM int_breakdown_calls AS c
    SEMI JOIN sample AS s ON s.run_id = c.run_id AND s.rank = c.rank AND s.iteration = c.iteration
    GROUP BY c.run_id, c.rank, c.iteration
  ),
  time_terms AS (
    SELECT
      s.run_id,
      count(*) AS n,
      avg(s.t_comp_ns) / 1e9 AS t_comp,
      avg(coalesce(x.tp, 0)) / 1e9 AS t_tp,
      avg(coalesce(x.pp, 0)) / 1e9 AS t_pp,
      avg(coalesce(x.dp, 0)) / 1e9 AS t_dp,
      avg(coalesce(x.emb, 0)) / 1e9 AS t_emb,
      avg(coalesce(x.ep, 0)) / 1e9 AS t_ep,
      avg(s.t_bubble_ns) / 1e9 AS t_bubble,
      avg(s.t_sync_wait_ns) / 1e9 AS t_sync_wait,
      avg(coalesce(x.comm, 0)) / 1e9 AS t_comm,
      avg(s.t_iter_ns) / 1e9 AS t_iter,
      avg(coalesce(x.comm, 0) / nullif(s.t_iter_ns, 0)) AS r_comm,
      avg(s.r_bubble) AS r_bubble
    FROM sample AS s
    LEFT JOIN xfer AS x ON x.run_id = s.run_id AND x.rank = s.rank AND x.iteration = s.iteration
    GROUP BY s.run_id
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
        ('T_sync_wait', 's', t_sync_wait),
        ('T_comm', 's', t_comm),
        ('T_iter', 's', t_iter),
        ('R_comm', 'ratio', r_comm),
        ('R_bubble', 'ratio', r_bubble),
        ('R_bubble_eq7', 'ratio', r_bubble)
    ) AS v(term, unit, measured)
  ),
  measured_bw AS (
    -- the one C per class
    SELECT
      run_id,
      'C_' || traffic_class AS term,
      'bytes/s' AS unit,
      busbw_transfer_Bps AS measured,
      calls AS n
    FROM int_class_bandwidth
    WHERE traffic_class IN ('TP', 'PP', 'DP', 'EP')
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
        ('C_DP', TRY_CAST(json_extract(config_json, '$.platform.c_dp') AS DOUBLE)),
        ('C_EP', TRY_CAST(json_extract(config_json, '$.platform.c_ep') AS DOUBLE))
    ) AS v(term, predicted)
    WHERE config_json IS NOT NULL
  ),
  term_orders AS (
    -- the model's order of every term this mart gives (the report's table shows its rows so)
    SELECT *
    FROM (
      VALUES
        (1, 'T_comp'), (2, 'T_TP'), (3, 'T_PP'), (4, 'T_DP'), (5, 'T_EmbTableSyn'), (6, 'T_EP'),
        (7, 'T_bubble'), (8, 'T_sync_wait'), (9, 'T_comm'), (10, 'T_iter'),
        (11, 'R_comm'), (12, 'R_bubble'), (13, 'R_bubble_eq7'),
        (14, 'C_TP'), (15, 'C_PP'), (16, 'C_DP'), (17, 'C_EP')
    ) AS v(term_order, term)
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
  coalesce(m.n, 0) AS n_samples,
  o.term_order
FROM measured AS m
FULL OUTER JOIN known_predicted AS p ON p.run_id = m.run_id AND p.term = m.term
LEFT JOIN term_orders AS o ON o.term = coalesce(m.term, p.term)
ORDER BY run_id, term_order, term
