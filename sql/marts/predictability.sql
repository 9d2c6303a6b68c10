-- Iteration-to-iteration predictability: total-variation similarity of the traffic matrix (1 = identical) and volume ratio to the previous iteration, per rank and per run, with the on/off call-sequence signature (APNet'24 §3 regularity; model_spec §E S(k)).
-- One row per (run_id, scope, rank, iteration) with traffic: scope 'rank' compares the rank's outgoing matrix row (bytes per destination and class), scope 'run' (rank null) the whole matrix. similarity = 1 - 1/2 * sum |A_k/V_k - A_prev/V_prev| over cells; prev = the previous iteration with traffic.
CREATE OR REPLACE VIEW predictability(
  -- Training run identifier.
  run_id,
  -- rank (one rank's outgoing traffic) or run (the whole matrix).
  scope,
  -- Global rank for scope 'rank'; null for scope 'run'.
  rank,
  -- Iteration.
  iteration,
  -- Previous iteration with traffic in the same scope (null for the first).
  prev_iteration,
  -- Bytes sent in this iteration (V_k).
  volume_bytes,
  -- Bytes sent in the previous iteration.
  prev_volume_bytes,
  -- V_k / V_prev (1 = same volume).
  volume_ratio,
  -- 1 - 1/2 * sum over cells of |normalised A_k - normalised A_prev|, in [0, 1]; null for the first iteration.
  matrix_similarity,
  -- Non-zero matrix cells in this iteration.
  cells,
  -- On/off call-sequence signature of the iteration (int_onoff_signature; scope rank only).
  signature,
  -- True when the signature equals the previous iteration's (scope rank only).
  signature_same_as_prev
) AS
WITH
  flows AS MATERIALIZED (
    SELECT run_id, iteration, src_rank, dst_rank, traffic_class, bytes
    FROM int_flows_expanded
    WHERE iteration IS NOT NULL
  ),
  cells AS MATERIALIZED (
    -- cell key (src, dst, class); src = -1 in scope rank, dst = -1 for unknown destinations
    SELECT run_id, 'rank' AS scope, src_rank AS rk, iteration, -1 AS src,
      coalesce(dst_rank, -1) AS dst, traffic_class AS cls, sum(bytes) AS a
    FROM flows
    GROUP BY ALL
    UNION ALL
    SELECT run_id, 'run' AS scope, -1 AS rk, iteration, src_rank AS src,
      coalesce(dst_rank, -1) AS dst, traffic_class AS cls, sum(bytes) AS a
    FROM flows
    GROUP BY ALL
  ),
  iters AS MATERIALIZED (
    SELECT
      run_id,
      scope,
      rk,
      iteration,
      sum(a) AS v,
      count(*) AS n_cells,
      lag(iteration) OVER (PARTITION BY run_id, scope, rk ORDER BY iteration) AS prev_iteration,
      lead(iteration) OVER (PARTITION BY run_id, scope, rk ORDER BY iteration) AS next_iteration
    FROM cells
    GROUP BY run_id, scope, rk, iteration
  ),
  cur AS (
    SELECT c.run_id, c.scope, c.rk, c.iteration, c.src, c.dst, c.cls, c.a / i.v AS p
    FROM cells AS c
    JOIN iters AS i USING (run_id, scope, rk, iteration)
    WHERE i.prev_iteration IS NOT NULL
  ),
  prev AS (
    SELECT c.run_id, c.scope, c.rk, i.next_iteration AS iteration, c.src, c.dst, c.cls,
      c.a / i.v AS p
    FROM cells AS c
    JOIN iters AS i USING (run_id, scope, rk, iteration)
    WHERE i.next_iteration IS NOT NULL
  ),
  tv AS (
    SELECT
      coalesce(cur.run_id, prev.run_id) AS run_id,
      coalesce(cur.scope, prev.scope) AS scope,
      coalesce(cur.rk, prev.rk) AS rk,
      coalesce(cur.iteration, prev.iteration) AS iteration,
      1 - 0.5 * sum(abs(coalesce(cur.p, 0) - coalesce(prev.p, 0))) AS similarity
    FROM cur
    FULL OUTER JOIN prev
      ON cur.run_id = prev.run_id AND cur.scope = prev.scope AND cur.rk = prev.rk
      AND cur.iteration = prev.iteration AND cur.src = prev.src AND cur.dst = prev.dst
      AND cur.cls = prev.cls
    GROUP BY ALL
  ),
  sig AS (
    SELECT
      run_id,
      rank,
      iteration,
      signature,
      lag(signature) OVER (PARTITION BY run_id, rank ORDER BY iteration) AS prev_signature
    FROM int_onoff_signature
    WHERE rank IS NOT NULL
  )
SELECT
  i.run_id,
  i.scope,
  CASE WHEN i.scope = 'rank' THEN i.rk END::INTEGER AS rank,
  i.iteration,
  i.prev_iteration,
  i.v AS volume_bytes,
  p.v AS prev_volume_bytes,
  i.v / nullif(p.v, 0) AS volume_ratio,
  -- clamp float residue; greatest/least skip nulls, so keep the first iteration's null
  CASE WHEN t.similarity IS NOT NULL THEN greatest(0.0, least(1.0, t.similarity)) END
    AS matrix_similarity,
  i.n_cells AS cells,
  s.signature,
  s.signature = s.prev_signature AS signature_same_as_prev
FROM iters AS i
LEFT JOIN iters AS p
  ON p.run_id = i.run_id AND p.scope = i.scope AND p.rk = i.rk AND p.iteration = i.prev_iteration
LEFT JOIN tv AS t
  ON t.run_id = i.run_id AND t.scope = i.scope AND t.rk = i.rk AND t.iteration = i.iteration
LEFT JOIN sig AS s
  ON i.scope = 'rank' AND s.run_id = i.run_id AND s.rank = i.rk AND s.iteration = i.iteration
