-- The communication calls counted per shape, iteration, method and peer: what the readers that group calls by iteration need of them (int_iterations: first and last call; int_onoff_signature: positions; int_flows_expanded: calls per shape, peer and iteration), in one pass over the call-sized iteration rows instead of one per reader.
-- One row per distinct (shape_id, iteration, method, period, peer_rank) of int_comm_op_iteration_shaped (a 1024-rank run: 18 M calls, a few hundred thousand rows). The run, rank and file of a row are its shape's (int_comm_op_shape_keys); period is the sequence's (one per shape), kept so a reader can tell detected iterations without a period. Every aggregate is one a reader can combine over rows (min, max, count, sum).
CREATE OR REPLACE VIEW int_comm_op_iteration_counts(
  -- The calls' shape (int_comm_op_shape_keys.shape_id).
  shape_id,
  -- Iteration of the calls (int_comm_op_iteration_shaped); null outside every iteration.
  iteration,
  -- How the iteration was found: source | marker | detected.
  method,
  -- Detected period of the calls' sequence; null when none was found.
  period,
  -- Peer or root rank as logged (null when none).
  peer_rank,
  -- Calls.
  calls,
  -- Calls with a source_line (count(source_line)).
  lined_calls,
  -- Earliest start of the calls, ns (null without times).
  first_ts,
  -- Latest end of the calls, ns (null without times).
  last_end,
  -- Smallest source_line of the calls.
  first_line,
  -- Largest source_line of the calls.
  last_line,
  -- Sum of the calls' positions in their sequence (int_comm_ops_sequenced.pos), a HUGEINT.
  sum_pos,
  -- Smallest position of the calls in their sequence.
  min_pos
) AS
SELECT
  shape_id,
  iteration,
  method,
  period,
  peer_rank,
  count(*) AS calls,
  count(source_line) AS lined_calls,
  min(ts_ns) AS first_ts,
  max(end_ns) AS last_end,
  min(source_line) AS first_line,
  max(source_line) AS last_line,
  sum(pos::HUGEINT) AS sum_pos,
  min(pos) AS min_pos
FROM int_comm_op_iteration_shaped
GROUP BY shape_id, iteration, method, period, peer_rank
