-- Every member call of a complete, timed cross-rank instance with the instance's last arrival and the member's wait for it: the cross-rank split of a call into waiting (for the group's last member to post) and transfer (APNet'24 §4.1's PP rule, applied to every class and measured across ranks on aligned clocks).
-- One row per row of int_instance_calls whose instance is complete and timed: every expected member seen once (group_size members; 2 for p2p), every member timed, one op (p2p: one send and one recv), one msg_bytes unless the op is an all-to-all. Inputs: int_instance_calls (instance_key, arrival_ns/finish_ns = raw minus the rank's clock offset), int_clock_offsets (error bounds), int_rank_nodes (stage, node). Definitions: last_arrival = max member arrival (aligned); last_rank = the lowest rank arriving then; wait = least(last_arrival - arrival, dur) (a member cannot wait longer than its call); transfer = max member finish - last_arrival (>= 0); an instance whose members differ by a clock the offsets could not align (scope 'unaligned' on a member of another host) is still here: offset_bound_ns is then null and its cross-host waits carry that clock difference.
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
  -- Iteration of the instance: the lowest of its members' (null when none has one).
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
  -- The rank the others waited for: the member that posted last (lowest rank on ties).
  last_rank,
  -- Members that posted at last_arrival_ns (ties).
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
  members AS (
    SELECT
      i.*,
      n.stage,
      coalesce(n.node::VARCHAR, i.host) AS place,
      CASE WHEN o.scope IN ('reference', 'host', 'rank') THEN o.error_bound_ns END AS bound_ns,
      o.scope IS NULL OR o.scope = 'unaligned' AS unaligned
    FROM int_instance_calls AS i
    LEFT JOIN int_clock_offsets AS o ON o.run_id = i.run_id AND o.rank = i.rank
    LEFT JOIN int_rank_nodes AS n ON n.run_id = i.run_id AND n.rank = i.rank
  ),
  instances AS (
    SELECT
      run_id,
      instance_key,
      max(arrival_ns) AS last_arrival_ns,
      max(finish_ns) AS last_finish_ns,
      max(msg_bytes) AS instance_bytes,
      min(iteration) AS instance_iteration,
      CASE WHEN bool_or(unaligned) THEN NULL ELSE max(bound_ns) END AS offset_bound_ns,
      count(DISTINCT place) > 1 AS spans_nodes,
      count(DISTINCT stage) > 1 AS spans_stages
    FROM members
    GROUP BY run_id, instance_key
    HAVING
      count(*) = max(CASE WHEN instance_key LIKE 'p2p:%' THEN 2 ELSE group_size END)
      AND count(DISTINCT rank) = count(*)
      AND bool_and(timed AND arrival_ns IS NOT NULL AND finish_ns IS NOT NULL)
      AND (
        CASE
          WHEN instance_key LIKE 'p2p:%'
            THEN count(*) FILTER (WHERE op = 'send') = 1 AND count(*) FILTER (WHERE op = 'recv') = 1
          ELSE count(DISTINCT op) = 1
        END
      )
      AND (count(DISTINCT msg_bytes) <= 1 OR bool_and(op LIKE 'all_to_all%'))
  ),
  joined AS (
    SELECT
      m.*,
      s.last_arrival_ns,
      s.last_finish_ns,
      s.instance_bytes,
      s.instance_iteration,
      s.offset_bound_ns,
      s.spans_nodes,
      s.spans_stages,
      least(s.last_arrival_ns - m.arrival_ns, m.dur_ns) AS wait_ns
    FROM members AS m
    JOIN instances AS s ON s.run_id = m.run_id AND s.instance_key = m.instance_key
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
  CASE WHEN instance_key LIKE 'p2p:%' THEN 2 ELSE group_size END AS group_size,
  msg_bytes,
  instance_bytes,
  iteration,
  instance_iteration,
  ts_ns,
  dur_ns,
  arrival_ns,
  finish_ns,
  last_arrival_ns,
  min(rank) FILTER (WHERE arrival_ns = last_arrival_ns) OVER w AS last_rank,
  count(*) FILTER (WHERE arrival_ns = last_arrival_ns) OVER w AS last_tied,
  wait_ns,
  (sum(wait_ns) OVER w)::BIGINT AS instance_wait_ns,
  greatest(last_finish_ns - last_arrival_ns, 0) AS transfer_ns,
  offset_bound_ns,
  spans_nodes,
  CASE
    WHEN traffic_class IN ('PP', 'EmbTableSyn') OR spans_stages THEN 'bubble'
    ELSE 'sync'
  END AS wait_kind
FROM joined
WINDOW w AS (PARTITION BY run_id, instance_key)
