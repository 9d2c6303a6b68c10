-- Time each rank spent waiting for its peers, per iteration and traffic class, measured across ranks: in every complete, timed instance of a collective or p2p transfer, a member waits from its own post to the group's last member's post (aligned clocks), never longer than its call (APNet'24 §4.1's wait rule for PP, applied to every class; issue 18 item 3).
-- One row per (run_id, iteration, rank, traffic_class, wait_kind) with at least one call in a complete, timed instance; input: int_instance_waits (instance matching and completeness: int_instance_calls; clock offsets: int_clock_offsets). iteration is the call's own (null: outside every iteration). Calls outside complete timed instances (untimed sources such as NCCL logs, a missing member, a size or op mismatch) are not here: int_breakdown_calls estimates their waits per rank instead. Truth on generated runs: truth/rank_waits.parquet (per iteration, rank and class).
CREATE OR REPLACE VIEW rank_waits(
  -- Training run identifier.
  run_id,
  -- Iteration of the rank's calls (null: outside every iteration).
  iteration,
  -- Global rank.
  rank,
  -- TP | PP | DP | EP | EmbTableSyn | other.
  traffic_class,
  -- Calls of the rank in complete timed instances.
  calls,
  -- Σ over those calls of least(last_arrival - own arrival, dur): time spent waiting for the last member, ns.
  wait_ns,
  -- The longest of those waits, ns.
  max_wait_ns,
  -- Calls in which this rank was the last to arrive (it waited for nobody).
  calls_last,
  -- bubble (PP, EmbTableSyn, or a group spanning pipeline stages: the wait is pipeline bubble) | sync (a same-stage group: waiting for a slower peer), as int_breakdown_calls.
  wait_kind
) AS
SELECT
  run_id,
  iteration,
  rank,
  traffic_class,
  count(*) AS calls,
  sum(wait_ns)::BIGINT AS wait_ns,
  max(wait_ns) AS max_wait_ns,
  count(*) FILTER (WHERE last_rank = rank) AS calls_last,
  wait_kind
FROM int_instance_waits
GROUP BY run_id, iteration, rank, traffic_class, wait_kind
