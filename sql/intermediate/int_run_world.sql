-- Per run: world size, parallel config and rank-mapping strides, link capacities (from run_config or inferred). The one definition of a run's world size (APNet'24 N = p x t x d): every intermediate, mart and the report (mart run_world) read it here.
-- One row per run_id seen in comm_ops, communicators, trace_meta or run_config. Inputs: int_comm_op_shape_keys (the calls' distinct shapes: a call's run, rank and group size are columns of its shape, so their maxima over the shapes are those over the calls), stg_store__communicators, stg_store__trace_meta, run_config. Without a config the world is the largest of: a call's group size, a communicator's size, the world size a trace file states (Kineto distributedInfo: one traced rank of an 8-rank job has a world of 8), and every rank seen + 1.
CREATE OR REPLACE VIEW int_run_world(
  -- Training run identifier.
  run_id,
  -- Number of ranks of the run: pp*tp*dp when configured, else the largest group / communicator size, trace-stated world size or rank+1 seen (world_source).
  world_size,
  -- True when the run's config gives pp, tp and dp.
  has_config,
  -- Pipeline stages p (null without config).
  pp,
  -- Tensor-parallel size t (null without config).
  tp,
  -- Data-parallel size d (null without config).
  dp,
  -- Expert-parallel size (null without config).
  ep,
  -- GPUs per node (null when not configured).
  gpus_per_node,
  -- Mapping axes outermost first, normalised ('pipe,data,model' for DeepSpeed's default).
  mapping_order,
  -- Rank stride of the pipeline axis: stage = (rank // stride_pipe) % pp.
  stride_pipe,
  -- Rank stride of the data axis: dp index = (rank // stride_data) % dp.
  stride_data,
  -- Rank stride of the model (tensor) axis: tp index = (rank // stride_model) % tp.
  stride_model,
  -- Intra-node link capacity, bytes/s (config platform.c_intra), else null.
  c_intra_bps,
  -- Inter-node link capacity, bytes/s (config platform.c_inter), else null.
  c_inter_bps,
  -- Where world_size came from: config (pp*tp*dp of the run's config) | seen (the largest size or rank the logs show; see int_run_world's header) | null (neither).
  world_source
) AS
WITH
  -- the calls per shape (a few thousand rows at 1024 ranks, 18 M calls): max and UNION need
  -- only the distinct values
  ops AS MATERIALIZED (SELECT run_id, rank, group_size FROM int_comm_op_shape_keys),
  comms AS MATERIALIZED (SELECT run_id, nranks, global_rank FROM stg_store__communicators),
  metas AS MATERIALIZED (SELECT run_id, rank, world_size FROM stg_store__trace_meta),
  runs AS (
    SELECT run_id FROM ops
    UNION
    SELECT run_id FROM comms
    UNION
    SELECT run_id FROM metas
    UNION
    SELECT run_id FROM run_config
  ),
  seen AS (
    SELECT run_id, max(n) AS n_seen
    FROM (
      SELECT run_id, greatest(max(group_size), max(rank) + 1) AS n FROM ops GROUP BY run_id
      UNION ALL
      SELECT run_id, greatest(max(nranks), max(global_rank) + 1) FROM comms GROUP BY run_id
      UNION ALL
      SELECT run_id, greatest(max(world_size), max(rank) + 1) FROM metas GROUP BY run_id
    )
    GROUP BY run_id
  ),
  cfg AS (
    SELECT
      run_id,
      any_value(pp) AS pp,
      any_value(tp) AS tp,
      any_value(dp) AS dp,
      any_value(ep) AS ep,
      any_value(gpus_per_node) AS gpus_per_node,
      any_value(
        CASE lower(coalesce(mapping_order, 'default'))
          WHEN 'default' THEN 'pipe,data,model'
          WHEN 'customized' THEN 'data,pipe,model'
          ELSE replace(replace(replace(replace(replace(replace(lower(mapping_order),
            ' ', ''), 'tensor', 'model'), 'stage', 'pipe'), 'pp', 'pipe'), 'dp', 'data'),
            'tp', 'model')
        END
      ) AS mapping_order,
      any_value(TRY_CAST(json_extract_string(config_json, '$.platform.c_intra') AS DOUBLE))
        AS c_intra_bps,
      any_value(TRY_CAST(json_extract_string(config_json, '$.platform.c_inter') AS DOUBLE))
        AS c_inter_bps
    FROM run_config
    GROUP BY run_id
  ),
  axes AS (
    SELECT
      r.run_id,
      c.pp,
      c.tp,
      c.dp,
      c.ep,
      c.gpus_per_node,
      c.mapping_order,
      c.c_intra_bps,
      c.c_inter_bps,
      s.n_seen,
      string_split(coalesce(c.mapping_order, 'pipe,data,model'), ',') AS ax
    FROM runs AS r
    LEFT JOIN cfg AS c USING (run_id)
    LEFT JOIN seen AS s USING (run_id)
  ),
  sized AS (
    SELECT
      *,
      CASE ax[3] WHEN 'pipe' THEN pp WHEN 'data' THEN dp WHEN 'model' THEN tp END AS size3,
      CASE ax[2] WHEN 'pipe' THEN pp WHEN 'data' THEN dp WHEN 'model' THEN tp END AS size2
    FROM axes
  )
SELECT
  run_id,
  coalesce(pp * tp * dp, n_seen)::INTEGER AS world_size,
  (pp IS NOT NULL AND tp IS NOT NULL AND dp IS NOT NULL) AS has_config,
  pp,
  tp,
  dp,
  ep,
  gpus_per_node,
  mapping_order,
  CASE list_position(ax, 'pipe') WHEN 1 THEN size2 * size3 WHEN 2 THEN size3 ELSE 1 END
    AS stride_pipe,
  CASE list_position(ax, 'data') WHEN 1 THEN size2 * size3 WHEN 2 THEN size3 ELSE 1 END
    AS stride_data,
  CASE list_position(ax, 'model') WHEN 1 THEN size2 * size3 WHEN 2 THEN size3 ELSE 1 END
    AS stride_model,
  c_intra_bps,
  c_inter_bps,
  CASE
    WHEN pp * tp * dp IS NOT NULL THEN 'config'
    WHEN n_seen IS NOT NULL THEN 'seen'
  END AS world_source
FROM sized
