-- Every logical collective and p2p transfer of a run matched across its ranks (issue 18 item 3): who was seen, who is missing or mismatched, when the first and the last member arrived on the run's aligned clock, which rank the others waited for (last_rank), the skew, the transfer after the last arrival and the algbw/busbw over that transfer (nccl-tests definitions: sql/macros/comm_bus_factor.sql; Gbit/s = 1e9 bit/s).
-- One row per (run_id, instance_key) of int_instances (which holds the matching, judging and timing rules; see its header and int_instance_members'). Members missing or disagreeing are flagged, never re-paired: status missing_ranks, op_mismatch, size_mismatch, untimed (some members timed, not all), else complete (timed columns filled when every member is timed, null when none is, e.g. NCCL debug logs). Times on the run's aligned clock (int_clock_offsets); skew_ns is known to +- offset_bound_ns.
CREATE OR REPLACE VIEW collective_instances(
  -- Training run identifier.
  run_id,
  -- Identity of the instance: '<global_group>|<instance_seq>' or 'p2p:<src>-><dst>|<instance_seq>' (int_instance_calls).
  instance_key,
  -- Group of global ranks (int_comm_ops_classified.global_group); for p2p the logged pair group, may be null.
  global_group,
  -- TP | PP | DP | EP | EmbTableSyn | other (the members' class; the lowest name if they differ).
  traffic_class,
  -- Normalised operation (the members'; the lowest name on an op_mismatch); 'send/recv' for p2p transfers (also a send or recv on a group whose members are not all known, matched as a call of its group).
  op,
  -- Matched position of the instance in its group (or src->dst pair).
  instance_seq,
  -- seq (logged sequence numbers) | order (k-th call of the group on each rank).
  match_method,
  -- Iteration (the members' lowest; null outside every iteration).
  iteration,
  -- Message size in bytes: the largest member's.
  msg_bytes,
  -- True when members log different sizes (all_to_all excepted: its per-member sizes may differ).
  size_mismatch,
  -- Ranks the instance needs (group size; 2 for p2p).
  ranks_expected,
  -- Distinct ranks seen in the instance.
  ranks_seen,
  -- Of those, ranks with a timed call.
  ranks_timed,
  -- Members not seen, ascending, comma-separated (null when none, or when the group's members are unknown).
  missing_ranks,
  -- complete | missing_ranks | op_mismatch | size_mismatch | untimed (see header; first that applies in this order: missing_ranks, op_mismatch, size_mismatch, untimed).
  status,
  -- Earliest member post, aligned ns (null unless complete and every member timed).
  first_arrival_ns,
  -- Latest member post (the transfer can start), aligned ns.
  last_arrival_ns,
  -- The rank that posted last: the one the others waited for (lowest rank on ties).
  last_rank,
  -- Members tied for last (1 = no tie): posted at last_arrival_ns, or on another host within the sum of the two clock offsets' error bounds of it (the alignment cannot order them).
  last_tied,
  -- last_arrival_ns - first_arrival_ns, ns.
  skew_ns,
  -- Latest member end, aligned ns.
  finish_ns,
  -- finish_ns - last_arrival_ns (>= 0): the transfer after every member posted, ns.
  transfer_ns,
  -- Sum over members of least(last_arrival - arrival, dur): time spent waiting for the last member, ns.
  wait_ns,
  -- Algorithm bandwidth over transfer_ns: comm_alg_bytes(op, msg_bytes, n) x 8 / transfer_ns, Gbit/s (null when transfer_ns = 0).
  algbw_gbps,
  -- Bus bandwidth over transfer_ns: algbw x comm_bus_factor(op, n), Gbit/s.
  busbw_gbps,
  -- Largest error bound of the members' clock offsets, ns: skew and arrivals are known to +- this (null when a member is unaligned).
  offset_bound_ns
) AS
SELECT
  run_id,
  instance_key,
  global_group,
  traffic_class,
  op,
  instance_seq,
  match_method,
  iteration,
  msg_bytes,
  size_mismatch,
  ranks_expected,
  ranks_seen,
  ranks_timed,
  missing_ranks,
  status,
  first_arrival_ns,
  last_arrival_ns,
  last_rank,
  last_tied,
  skew_ns,
  finish_ns,
  transfer_ns,
  wait_ns,
  algbw_gbps,
  busbw_gbps,
  offset_bound_ns
FROM int_instances
