-- MoE all-to-all non-uniformity per iteration: NF_abs, NF_rel, NF_ratio, CV over rank pairs, NF_dest over destinations, matrix stability S(k) and volume drift (model_spec §E; APNet'24 §3.2).
-- One row per (run_id, iteration) with EP (all_to_all) traffic. A[i][j] = EP bytes from i to j in the iteration (int_flows_expanded, i <> j, DP excluded by class); statistics over the pairs that carry bytes. What the logs hold decides what A can show (model_spec §E, data caveat): per-pair sizes are logged where the all-to-all is logged as its sends to each peer (NCCL debug: NCCL's all-to-all is grouped send/recv, one Send line per peer with its own count, so A is the routing); a source that logs the all-to-all as one call of total size S (DeepSpeed comms logger, Kineto, nsys) has no split sizes, and int_flows_expanded spreads S as S/n per peer, so A is uniform within each call. pair_sizes and case_note say which case each iteration is. The rank's own block (i = j) is local, never in A.
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
  -- Where the pair sizes come from: logged (every EP pair byte from a per-peer logged size: the all-to-all's sends, e.g. NCCL debug), uniform_split (every byte from all_to_all calls logged with their total size only, spread as S/n per peer), mixed.
  pair_sizes,
  -- Share of the iteration's EP pair bytes whose per-pair size was logged (placement p2p or recv_only), in [0, 1].
  logged_pair_share,
  -- What the logs hold and so what NF means for this iteration (pair_sizes in words).
  case_note
) AS
WITH
  pairs AS MATERIALIZED (
    SELECT
      run_id,
      iteration,
      src_rank,
      dst_rank,
      sum(bytes) AS a,
      -- per-peer sizes as logged (sends), not a uniform spread of a total
      coalesce(sum(bytes) FILTER (WHERE placement IN ('p2p', 'recv_only')), 0) AS a_logged,
      coalesce(sum(bytes) FILTER (WHERE placement NOT IN ('p2p', 'recv_only')), 0) AS a_spread
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
      sum(a_logged) AS logged_bytes,
      sum(a_spread) AS spread_bytes,
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
    WHEN s.spread_bytes = 0 THEN 'logged'
    WHEN s.logged_bytes = 0 THEN 'uniform_split'
    ELSE 'mixed'
  END AS pair_sizes,
  s.logged_bytes / nullif(s.logged_bytes + s.spread_bytes, 0) AS logged_pair_share,
  CASE
    WHEN s.spread_bytes = 0
      THEN 'per-pair sizes logged (the all-to-all''s send to each peer, e.g. NCCL debug): '
        || 'A[i][j] is the routing, NF as measured'
    WHEN s.logged_bytes > 0
      THEN 'mixed: '
        || round(100 * s.logged_bytes / (s.logged_bytes + s.spread_bytes), 1)
        || ' % of EP pair bytes from logged '
        || 'per-pair sizes, the rest from all_to_all calls logged with their total size '
        || 'only, spread as S/n per peer'
    WHEN s.max_pair_bytes = s.min_pair_bytes
      THEN 'no split sizes logged (all_to_all calls with their total size only, e.g. '
        || 'DeepSpeed comms logger, Kineto, nsys): spread as S/n per peer, so NF = 0 by '
        || 'construction (capacity-padded or unknown splits)'
    ELSE 'no split sizes logged (all_to_all calls with their total size only, e.g. '
      || 'DeepSpeed comms logger, Kineto, nsys): each call spread as S/n per peer; NF > 0 '
      || 'comes only from calls of different sizes across ranks or calls, not from the routing'
  END AS case_note
FROM stats AS s
LEFT JOIN stats AS p ON p.run_id = s.run_id AND p.iteration = s.prev_iteration
LEFT JOIN dest AS d ON d.run_id = s.run_id AND d.iteration = s.iteration
LEFT JOIN tv AS t ON t.run_id = s.run_id AND t.iteration = s.iteration
