-- The one definition of a matched call's shape key (issue 21): instance_shape_key(host, source_format, source_file, op, traffic_class, global_group, group_size, msg_bytes, timing_source), a hash of the columns of int_instance_lane_calls that int_instance_matched does not store per call (int_instance_shapes holds them once per key, and checks that no two of them share one).
-- Scalar macro, one UBIGINT per call (DuckDB's hash of the nine values, nulls included). Why: the matched calls are stored narrow (18 M rows at 1024 ranks: per-call strings were most of the cost of writing and reading them back); int_instance_matched computes the key from the lane call's own values and int_instance_shapes from the same values, so the two agree without a join of the calls with their shapes.
CREATE OR REPLACE MACRO instance_shape_key(
  host, source_format, source_file, op, traffic_class, global_group, group_size, msg_bytes,
  timing_source
) AS hash(
  host, source_format, source_file, op, traffic_class, global_group, group_size, msg_bytes,
  timing_source
);
