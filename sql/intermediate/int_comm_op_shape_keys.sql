-- The distinct shapes of the communication calls, unclassified: each shape's key and its shape_id, the table that int_comm_op_shapes classifies and that the per-call chain (int_comm_ops_sequenced, int_comm_op_iteration, int_instance_lane_shaped) joins on shape_id to read a call's names (run, rank, file, format, op, size, group) once per shape rather than once per call.
-- One row per distinct (run_id, rank, host, source_format, source_file, op, comm_id, group_size, group_rank, dtype, msg_bytes, is_traffic, pid, algorithm, timing_source, group_source) of stg_store__comm_ops (a 1024-rank run: 18 M calls, 6,016 shapes). Why apart from int_comm_op_shapes: in the catalog, where every intermediate is a live view, a reader of int_comm_op_shapes inlines the whole classification; this view reads the calls once and nothing else. Two distinct shapes with one shape_id stop the query with an error (never a wrong join).
CREATE OR REPLACE VIEW int_comm_op_shape_keys(
  -- comm_op_shape_id of the shape's key (unique: checked here); int_comm_ops_shaped.shape_id.
  shape_id,
  -- Training run identifier.
  run_id,
  -- Global rank that issued the calls (null when the source does not say).
  rank,
  -- Host name as logged.
  host,
  -- Parser that produced the rows.
  source_format,
  -- File the rows came from.
  source_file,
  -- Normalised operation (all_reduce, all_gather, send, ...).
  op,
  -- Communicator identity as logged.
  comm_id,
  -- Ranks in the communicator as logged (stg_store__comm_ops.group_size).
  group_size,
  -- Caller's rank inside the communicator.
  group_rank,
  -- Element type.
  dtype,
  -- Message size in bytes (the caller's buffer, source semantics).
  msg_bytes,
  -- True for calls that move data (not barriers or unknown ops).
  is_traffic,
  -- Operating-system process id.
  pid,
  -- NCCL algorithm when logged (RING, TREE, ...).
  algorithm,
  -- Clock of the calls' ts_ns/dur_ns: kernel, cpu_range, logged, none; null when the source does not say.
  timing_source,
  -- How group_size was found (stg_store__comm_ops.group_source).
  group_source,
  -- Calls of the shape.
  n_calls,
  -- Calls of the shape with a duration (dur_ns not null).
  n_timed
) AS
WITH
  distinct_shapes AS (
    SELECT
      run_id, rank, host, source_format, source_file, op, comm_id, group_size, group_rank,
      dtype, msg_bytes, is_traffic, pid, algorithm, timing_source, group_source,
      count(*) AS n_calls,
      count(dur_ns) AS n_timed
    FROM stg_store__comm_ops
    GROUP BY ALL
  ),
  shape_rows AS (
    SELECT
      comm_op_shape_id(
        run_id, rank, host, source_format, source_file, op, comm_id, group_size, group_rank,
        dtype, msg_bytes, is_traffic, pid, algorithm, timing_source, group_source
      ) AS shape_id,
      d.*
    FROM distinct_shapes AS d
  )
SELECT
  shape_id, run_id, rank, host, source_format, source_file, op, comm_id, group_size, group_rank,
  dtype, msg_bytes, is_traffic, pid, algorithm, timing_source, group_source, n_calls, n_timed
FROM shape_rows
-- the id the calls compute from their own values (int_comm_ops_shaped); the query stops if
-- two shapes share one
QUALIFY CASE
  WHEN count(*) OVER (PARTITION BY shape_id) > 1
    THEN error('int_comm_op_shape_keys: two call shapes share shape_id ' || shape_id::VARCHAR)
  ELSE true
END
