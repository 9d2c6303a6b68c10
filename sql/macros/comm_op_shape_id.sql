-- The one definition of a communication call's shape id: comm_op_shape_id(run_id, rank, host, source_format, source_file, op, comm_id, group_size, group_rank, dtype, msg_bytes, is_traffic, pid, algorithm, timing_source, group_source), a hash of the call's shape key (the columns of stg_store__comm_ops that int_comm_op_shapes keeps once per shape).
-- Scalar macro, one UBIGINT per call (DuckDB's hash of the sixteen values, nulls included). Why: a call's shape id is computed from the call's own values, so int_comm_ops_shaped reads neither int_comm_op_shape_keys nor int_comm_op_shapes (in the catalog, where every intermediate is a live view, each reference to the latter would inline the whole classification again); int_comm_op_shape_keys computes it once per shape and fails loudly if two distinct shapes ever share an id.
CREATE OR REPLACE MACRO comm_op_shape_id(
  run_id, rank, host, source_format, source_file, op, comm_id, group_size, group_rank, dtype,
  msg_bytes, is_traffic, pid, algorithm, timing_source, group_source
) AS hash(
  run_id, rank, host, source_format, source_file, op, comm_id, group_size, group_rank, dtype,
  msg_bytes, is_traffic, pid, algorithm, timing_source, group_source
);
