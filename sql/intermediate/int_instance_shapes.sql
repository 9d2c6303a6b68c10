-- The values int_instance_matched's calls share with every call of their shape (host, lane format, file, op, class, group, size, timing clock), once per shape key (issue 21): int_instance_members joins them back to the narrow matched calls.
-- One row per (run_id, shape_key) of int_instance_lane_calls (a few per rank and group: 6,016 at 1024 ranks, for 18 M calls). shape_key is instance_shape_key of the row's values (sql/macros/instance_shape_key.sql), unique per run: checked here (two distinct rows sharing a key fail the query).
CREATE OR REPLACE VIEW int_instance_shapes(
  -- Training run identifier.
  run_id,
  -- instance_shape_key of the values below (int_instance_matched.shape_key).
  shape_key,
  -- Host of the rank (int_instance_lane_calls.host).
  host,
  -- Parser of the rank's lane.
  source_format,
  -- File the calls came from.
  source_file,
  -- Normalised operation.
  op,
  -- TP | PP | DP | EP | EmbTableSyn | other (int_comm_ops_classified).
  traffic_class,
  -- Group of global ranks of the calls (int_comm_ops_classified.global_group); null when unknown.
  global_group,
  -- Ranks of the calls' group (int_comm_ops_classified.group_size).
  group_size,
  -- Message size in bytes (source semantics).
  msg_bytes,
  -- Clock of the timing (int_instance_lane_calls.timing_source: null when untimed).
  timing_source
) AS
WITH
  distinct_shapes AS (
    -- every distinct value set (grouped on the values themselves, so two sets that share a
    -- hash stay two rows and fail the check below)
    SELECT DISTINCT
      run_id,
      host,
      source_format,
      source_file,
      op,
      traffic_class,
      global_group,
      group_size,
      msg_bytes,
      timing_source
    FROM int_instance_lane_calls
  )
SELECT
  run_id,
  instance_shape_key(
    host, source_format, source_file, op, traffic_class, global_group, group_size, msg_bytes,
    timing_source
  ) AS shape_key,
  host,
  source_format,
  source_file,
  op,
  traffic_class,
  global_group,
  group_size,
  msg_bytes,
  timing_source
FROM distinct_shapes
QUALIFY CASE
  WHEN count(*) OVER (PARTITION BY run_id, shape_key) > 1
    THEN error('int_instance_shapes: two call shapes share shape_key ' || shape_key::VARCHAR)
  ELSE TRUE
END
