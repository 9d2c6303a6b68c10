-- The one definition of the order in which a rank's logging formats are preferred as its primary source (int_rank_primary_source's rule): primary_source_order(source_format, traffic_calls, placed_calls, timed_calls, calls); the first in ascending order is the primary.
-- Scalar macro, one sort key per (run, rank, format): a struct compared field by field. Fields: Flight Recorder and NCCL Inspector last (their dumps hold a window of the calls); the DeepSpeed comms logger after NCCL debug, Kineto and nsys (it carries no communicator); then the most data-moving calls, the most whose group is known, the most timed, the most calls (counts negated: ascending = most first); ties nccl_debug, kineto, nsys, then by name (a null name last). Used by int_rank_primary_source and int_comm_op_shapes (which counts the same per-format totals from the call shapes, without reading the calls again).
CREATE OR REPLACE MACRO primary_source_order(source_format, traffic_calls, placed_calls, timed_calls, calls) AS
  {
    'dump': coalesce(source_format, '') IN ('flight_recorder', 'nccl_inspector'),
    'deepspeed': coalesce(source_format, '') = 'deepspeed_comms',
    'traffic': -traffic_calls,
    'placed': -placed_calls,
    'timed': -timed_calls,
    'calls': -calls,
    'tool': CASE source_format WHEN 'nccl_debug' THEN 0 WHEN 'kineto' THEN 1 WHEN 'nsys' THEN 2 ELSE 3 END,
    'name_null': source_format IS NULL,
    'name': coalesce(source_format, '')
  };
