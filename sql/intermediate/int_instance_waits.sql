-- Every member call of a complete, timed cross-rank instance with the instance's last arrival and the member's wait for it: the cross-rank split of a call into waiting (for the group's last member to post) and transfer (APNet'24 §4.1's PP rule, applied to every class and measured across ranks on aligned clocks).
-- One row per row of int_instance_calls whose instance (int_instances) is complete with every member timed (status complete: every rank of the group seen, no op or size mismatch). Inputs: int_instance_calls (the members: arrival_ns = raw post minus the rank's clock offset), int_instances (last arrival, last rank with ties inside the offsets' error bounds, transfer, wait), int_rank_nodes (stage, node). Definitions: wait = least(last_arrival - arrival, dur) (a member cannot wait longer than its call; Σ over the members = int_instances.wait_ns); transfer = int_instances.transfer_ns (latest member end - last arrival, >= 0); wait_kind as int_breakdown_calls. A member on a clock the offsets could not align (int_clock_offsets scope 'unaligned') keeps its raw clock: offset_bound_ns is then null and its cross-host waits carry that clock difference.
CREATE OR REPLACE VIEW int_instance_waits(
  -- Training run identifier.
  run_id,
  -- Identity of the logical instance (int_instance_calls.instance_key).
  instance_key,
  -- Global rank of this member.
  rank,
  -- File the member's call came from.
  source_file,
  -- Line (or event index) in that file.
  source_line,
  -- Normalised operation of the member's call (send or recv for p2p members).
  op,
  -- TP | PP | DP | EP | EmbTableSyn | other.
  traffic_class,
  -- Group of global ranks of the instance (int_instance_calls.global_group).
  global_group,
  -- Members the instance has (the group's size; 2 for p2p).
  group_size,
  -- Message size of the member's call, bytes.
  msg_bytes,
  -- Largest msg_bytes among the members, bytes (all-to-all sizes differ per member).
  instance_bytes,
  -- Iteration of the member's call (null outside every iteration).
  iteration,
  -- Iteration of the instance: its members' most common one (as collective_instances; null when none has one).
  instance_iteration,
  -- The member's post of the call on its own clock (raw), ns.
  ts_ns,
  -- The member's call duration, ns.
  dur_ns,
  -- The member's post on the aligned clock (ts_ns minus its clock offset), ns.
  arrival_ns,
  -- The member's end on the aligned clock, ns.
  finish_ns,
  -- Latest post among the members (aligned), ns: the transfer start.
  last_arrival_ns,
  -- The rank the others waited for: the lowest rank among the members tied with the last post (same instant, or another host within the two offsets' bounds).
  last_rank,
  -- Members tied for last (1 = no tie).
  last_tied,
  -- This member's wait: least(last_arrival_ns - arrival_ns, dur_ns), ns (>= 0; 0 for the last rank).
  wait_ns,
  -- Σ wait_ns over the instance's members: the wait its last rank caused, ns.
  instance_wait_ns,
  -- Transfer time of the instance: max member finish - last_arrival_ns, ns (>= 0).
  transfer_ns,
  -- Largest clock-offset error bound among the members, ns: aligned times are known ± this (null when a member is unaligned or has no bound).
  offset_bound_ns,
  -- True when the members sit on more than one node (host): the instance crosses the network.
  spans_nodes,
  -- bubble (PP, EmbTableSyn, or members on more than one pipeline stage) | sync (a same-stage group: waiting for a slower peer), as int_breakdown_calls.
  wait_kind
) AS
WITH
  timed AS MATERIALIZED (
    -- complete instances whose every member is timed (int_instances fills their times)
    SELECT *
    FROM int_instances
    WHERE status = 'complete' AND last_arrival_ns IS NOT NULL
  ),
  members AS (
    SELECT
      c.*,
      t.last_arrival_ns,
      t.last_rank,
      t.last_tied,
      t.msg_bytes AS instance_bytes,
      t.iteration AS instance_iteration,
      t.wait_ns AS instance_wait_ns,
      t.transfer_ns,
      t.offset_bound_ns AS instance_bound_ns,
      n.stage,
      coalesce(n.node::VARCHAR, c.host) AS place
    FROM int_instance_calls AS c
    JOIN timed AS t ON t.run_id = c.run_id AND t.instance_key = c.instance_key
    LEFT JOIN int_rank_nodes AS n ON n.run_id = c.run_id AND n.rank = c.rank
  ),
  joined AS (
    SELECT
      *,
      least(last_arrival_ns - arrival_ns, dur_ns) AS wait_ns,
      count(DISTINCT place) OVER w > 1 AS spans_nodes,
      count(DISTINCT stage) OVER w > 1 AS spans_stages
    FROM members
    WINDOW w AS (PARTITION BY run_id, instance_key)
  )
SELECT
  run_id,
  instance_key,
  rank,
  source_file,
  source_line,
  op,
  traffic_class,
  global_group,
  group_size,
  msg_bytes,
  instance_bytes,
  iteration,
  instance_iteration,
  ts_ns,
  dur_ns,
  arrival_ns,
  finish_ns,
  last_arrival_ns,
  last_rank,
  last_tied,
  wait_ns,
  instance_wait_ns::BIGINT AS instance_wait_ns,
  transfer_ns,
  instance_bound_ns AS offset_bound_ns,
  spans_nodes,
  CASE
    WHEN traffic_class IN ('PP', 'EmbTableSyn') OR spans_stages THEN 'bubble'
    ELSE 'sync'
  END AS wait_kind
FROM joined
