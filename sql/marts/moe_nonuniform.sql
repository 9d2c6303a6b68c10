-- MoE all-to-all non-uniformity per iteration: NF_abs, NF_rel, NF_ratio, CV over rank pairs, NF_dest over destinations, matrix stability S(k) and volume drift (model_spec §E; APNet'24 §3.2).
-- One row per (run_id, iteration) with EP (all_to_all) traffic. A[i][j] = EP bytes from i to j in the iteration (int_flows_expanded, i <> j, DP excluded by class); statistics over the pairs that carry bytes.
CREATE OR REPLACE VIEW moe_nonuniform(
  -- Training run identifier.
  run_id,
  -- Iteration.
  iteration,
  -- Rank pairs (i, j), i <> j, with EP bytes.
  pairs,
  -- V(k) = sum of A, bytes.
  volume_bytes,
  -- Largest pair volume, bytes.
  max_pair_bytes,
  -- Smallest pair volume, bytes.
  min_pair_bytes,
  -- Mean pair volume, bytes.
  mean_pair_bytes,
  -- NF_abs = max - min over pairs, bytes (the paper's definition).
  nf_abs,
  -- NF_rel = (max - min) / mean (default trend metric).
  nf_rel,
  -- NF_ratio = max / min.
  nf_ratio,
  -- CV = population std / mean over pairs.
  cv,
  -- NF_dest = max_j R_j - min_j R_j with R_j = sum_i A_ij (expert load), bytes.
  nf_dest,
  -- S(k) = 1 - 1/2 * sum |A_k/V_k - A_prev/V_prev| against the previous EP iteration (null for the first).
  matrix_stability,
  -- |V(k) - V(prev)| / V(prev) (null for the first).
  volume_drift,
  -- Which case applies: all_to_all calls are logged without split sizes and expanded as uniform S/n per peer, so NF = 0 means capacity-padded or unknown splits, and NF > 0 comes only from calls of different sizes or ranks.
  case_note
) AS
WITH
  pairs AS MATERIALIZED (
    SELECT run_id, iteration, src_rank, dst_rank, sum(bytes) AS a
    FROM int_flows_expanded
    WHERE traffic_class = 'EP' AND dst_rank IS NOT NULL AND src_rank <> dst_rank
      AND iteration IS NOT NULL
    GROUP BY ALL
  ),
  dest AS (
    SELECT run_id, iteration, max(r) - min(r) AS nf_dest
    FROM (SELECT run_id, iteration, dst_rank, sum(a) AS r FROM pairs GROUP BY ALL)
    GROUP BY ALL
  ),
  stats AS MATERIALIZED (
    SELECT
      run_id,
      iteration,
      count(*) AS pairs,
      sum(a) AS volume_bytes,
      max(a) AS max_pair_bytes,
      min(a) AS min_pair_bytes,
      avg(a) AS mean_pair_bytes,
      stddev_pop(a) AS std_pair_bytes,
      lag(iteration) OVER (PARTITION BY run_id ORDER BY iteration) AS prev_iteration,
      lead(iteration) OVER (PARTITION BY run_id ORDER BY iteration) AS next_iteration
    FROM pairs
    GROUP BY run_id, iteration
  ),
  cur AS (
    SELECT p.run_id, p.iteration, p.src_rank, p.dst_rank, p.a / s.volume_bytes AS q
    FROM pairs AS p
    JOIN stats AS s USING (run_id, iteration)
    WHERE s.prev_iteration IS NOT NULL
  ),
  prev AS (
    SELECT p.run_id, s.next_iteration AS iteration, p.src_rank, p.dst_rank,
      p.a / s.volume_bytes AS q
    FROM pairs AS p
    JOIN stats AS s USING (run_id, iteration)
    WHERE s.next_iteration IS NOT NULL
  ),
  tv AS (
    SELECT
      coalesce(cur.run_id, prev.run_id) AS run_id,
      coalesce(cur.iteration, prev.iteration) AS iteration,
      1 - 0.5 * sum(abs(coalesce(cur.q, 0) - coalesce(prev.q, 0))) AS stability
    FROM cur
    FULL OUTER JOIN prev
      ON cur.run_id = prev.run_id AND cur.iteration = prev.iteration
      AND cur.src_rank = prev.src_rank AND cur.dst_rank = prev.dst_rank
    GROUP BY ALL
  )
SELECT
  s.run_id,
  s.iteration,
  s.pairs,
  s.volume_bytes,
  s.max_pair_bytes,
  s.min_pair_bytes,
  s.mean_pair_bytes,
  s.max_pair_bytes - s.min_pair_bytes AS nf_abs,
  (s.max_pair_bytes - s.min_pair_bytes) / nullif(s.mean_pair_bytes, 0) AS nf_rel,
  s.max_pair_bytes / nullif(s.min_pair_bytes, 0) AS nf_ratio,
  s.std_pair_bytes / nullif(s.mean_pair_bytes, 0) AS cv,
  d.nf_dest,
  CASE WHEN t.stability IS NOT NULL THEN greatest(0.0, least(1.0, t.stability)) END
    AS matrix_stability,
  abs(s.volume_bytes - p.volume_bytes) / nullif(p.volume_bytes, 0) AS volume_drift,
  CASE
    WHEN s.max_pair_bytes = s.min_pair_bytes
      THEN 'uniform: all_to_all logged without split sizes, expanded as S/n per peer '
        || '(capacity-padded or unknown splits); NF = 0 by construction'
    ELSE 'non-uniform across calls or ranks; each call''s split assumed uniform '
      || '(no split sizes logged)'
  END AS case_note
FROM stats AS s
LEFT JOIN stats AS p ON p.run_id = s.run_id AND p.iteration = s.prev_iteration
LEFT JOIN dest AS d ON d.run_id = s.run_id AND d.iteration = s.iteration
LEFT JOIN tv AS t ON t.run_id = s.run_id AND t.iteration = s.iteration
