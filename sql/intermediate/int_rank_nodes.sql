-- Every global rank of a run with its host, node index and parallel coordinates (stage, dp, tp index).
-- One row per (run_id, rank): ranks that logged, communicator members, and 0..world_size-1. Inputs: int_comm_op_shape_keys (the calls' distinct shapes, each with its number of calls), stg_store__communicators, int_run_world. A rank's host is the one most of its rows name (its calls, each communicator row once; ties: the first host by name).
CREATE OR REPLACE VIEW int_rank_nodes(
  -- Training run identifier.
  run_id,
  -- Global rank.
  rank,
  -- Host the rank ran on, when logged: the host most of the rank's calls and communicator rows name (ties: the first by name).
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
  -- Algorithm: the calls are counted per shape (int_comm_op_shape_keys.n_calls: a call's rank
  -- and host are columns of its shape), so each (rank, host) is weighed by its rows without
  -- reading the calls (18 M at 1024 ranks, a few thousand shapes)
  logged AS (
    SELECT run_id, rank, host, n_calls AS n FROM int_comm_op_shape_keys WHERE rank IS NOT NULL
    UNION ALL
    SELECT run_id, global_rank, host, 1 FROM stg_store__communicators WHERE global_rank IS NOT NULL
  ),
  world AS (
    SELECT run_id, unnest(range(0, world_size)) AS rank
    FROM rw
    WHERE world_size IS NOT NULL
  ),
  host_rows AS (
    SELECT run_id, rank, host, sum(n) AS n
    FROM logged
    WHERE host IS NOT NULL
    GROUP BY run_id, rank, host
  ),
  ranks AS (
    SELECT r.run_id, r.rank::INTEGER AS rank, h.host
    FROM (SELECT run_id, rank FROM logged UNION SELECT run_id, rank FROM world) AS r
    LEFT JOIN (
      SELECT run_id, rank, first(host ORDER BY n DESC, host) AS host
      FROM host_rows
      GROUP BY run_id, rank
    ) AS h ON h.run_id = r.run_id AND h.rank = r.rank
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
