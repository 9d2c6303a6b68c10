-- Every global rank of a run with its host, node index and parallel coordinates (stage, dp, tp index).
-- One row per (run_id, rank): ranks that logged, communicator members, and 0..world_size-1.
CREATE OR REPLACE VIEW int_rank_nodes(
  -- Training run identifier.
  run_id,
  -- Global rank.
  rank,
  -- Host the rank ran on, when logged.
  host,
  -- Node index: rank // gpus_per_node when configured, else the host's position among the run's distinct hosts (sorted), else null.
  node,
  -- Where node came from: gpus_per_node, host, or unknown.
  node_source,
  -- Pipeline stage under the configured mapping (null without config).
  stage,
  -- Data-parallel index under the configured mapping (null without config).
  dp_index,
  -- Tensor-parallel index under the configured mapping (null without config).
  tp_index
) AS
WITH
  rw AS MATERIALIZED (SELECT * FROM int_run_world),
  logged AS (
    SELECT run_id, rank, host FROM stg_store__comm_ops WHERE rank IS NOT NULL
    UNION ALL
    SELECT run_id, global_rank, host FROM stg_store__communicators WHERE global_rank IS NOT NULL
  ),
  world AS (
    SELECT run_id, unnest(range(0, world_size)) AS rank, NULL::VARCHAR AS host
    FROM rw
    WHERE world_size IS NOT NULL
  ),
  ranks AS (
    SELECT run_id, rank::INTEGER AS rank, mode(host) AS host
    FROM (SELECT * FROM logged UNION ALL SELECT * FROM world)
    GROUP BY run_id, rank
  ),
  hosts AS (
    SELECT run_id, host, (row_number() OVER (PARTITION BY run_id ORDER BY host) - 1) AS host_index
    FROM (SELECT DISTINCT run_id, host FROM ranks WHERE host IS NOT NULL)
  )
SELECT
  r.run_id,
  r.rank,
  r.host,
  CASE
    WHEN w.gpus_per_node > 0 THEN r.rank // w.gpus_per_node
    ELSE h.host_index
  END::INTEGER AS node,
  CASE
    WHEN w.gpus_per_node > 0 THEN 'gpus_per_node'
    WHEN h.host_index IS NOT NULL THEN 'host'
    ELSE 'unknown'
  END AS node_source,
  ((r.rank // w.stride_pipe) % w.pp)::INTEGER AS stage,
  ((r.rank // w.stride_data) % w.dp)::INTEGER AS dp_index,
  ((r.rank // w.stride_model) % w.tp)::INTEGER AS tp_index
FROM ranks AS r
LEFT JOIN rw AS w USING (run_id)
LEFT JOIN hosts AS h ON h.run_id = r.run_id AND h.host = r.host
