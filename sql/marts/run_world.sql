-- The run's world size and parallel layout as every other mart used them (int_run_world, the one definition: APNet'24 N = p x t x d from the config, else the largest group, communicator, trace-stated world size or rank + 1 the logs show), so a report or a user reads the same number the SQL divided by.
-- One row per run_id. Input: int_run_world.
CREATE OR REPLACE VIEW run_world(
  -- Training run identifier.
  run_id,
  -- Number of ranks of the run (see world_source).
  world_size,
  -- config (pp*tp*dp of the run's config) | seen (the largest size or rank the logs show) | null (neither).
  world_source,
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
  -- Mapping axes outermost first ('pipe,data,model' for DeepSpeed's default).
  mapping_order
) AS
SELECT
  run_id, world_size, world_source, has_config, pp, tp, dp, ep, gpus_per_node, mapping_order
FROM int_run_world;
