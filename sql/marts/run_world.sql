-- The run's world size and parallel layout as every other mart used them (int_run_world, the one definition: APNet'24 N = p x t x d from the config, else the largest group, communicator, trace-stated world size or rank + 1 the logs show), so a report or a user reads the same number the SQL divided by.
-- One row per run_id. Published from int_run_world (the columns a reader needs; the rank strides and link capacities stay internal), which documents them.
CREATE OR REPLACE VIEW run_world AS
SELECT
  run_id, world_size, world_source, has_config, pp, tp, dp, ep, gpus_per_node, mapping_order
FROM int_run_world;
