-- Every logical collective and p2p transfer of a run matched across its ranks, judged (status, missing ranks) and timed on the aligned clock (last arrival, last rank, skew, transfer, wait, bandwidth): the one per-instance table the cross-rank marts (collective_instances, rank_waits, stragglers) and int_breakdown_calls read (issue 18). Bus bandwidth: comm_bus_factor(op, n) of sql/macros/comm_bus_factor.sql only (nccl-tests busbw factors). The instance key is the macro instance_key (sql/macros/instance_key.sql).
-- One row per (run_id, instance_key) of int_instance_calls. Members missing or disagreeing are flagged, never re-paired: status missing_ranks (fewer ranks seen than the group has), op_mismatch (members log different ops at the matched position), size_mismatch (different msg_bytes; all_to_all sizes may differ), untimed (all present and consistent, only some members timed: times cannot be compared), else complete (all present and consistent; timed columns filled when every member is timed, null when none is, e.g. NCCL debug logs). Times: members' arrival_ns / finish_ns (raw minus int_clock_offsets' offset); skew_ns is known to +- offset_bound_ns.
CREATE OR REPLACE VIEW int_instances(
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
WITH
  -- instances are grouped on integer keys: run, instance_seq and ik, a hash of what
  -- instance_key names besides instance_seq (int_instance_members: a collective's global_group,
  -- a p2p transfer's src -> dst pair), so no key string is built or compared per call; the
  -- instance_key string is built once per instance from the same parts
  calls AS NOT MATERIALIZED (
    SELECT
      *,
      CASE
        WHEN peer_global IS NULL THEN hash(global_group)
        ELSE hash(
          'p2p',
          CASE WHEN op = 'send' THEN rank ELSE peer_global END,
          CASE WHEN op = 'send' THEN peer_global ELSE rank END
        )
      END AS ik
    FROM int_instance_calls
  ),
  inst_parts AS (
    SELECT
      run_id,
      ik,
      instance_seq,
      any_value(global_group) AS global_group,
      min(traffic_class) AS traffic_class,
      CASE WHEN bool_and(op IN ('send', 'recv')) THEN 'send/recv' ELSE min(op) END AS op,
      any_value(match_method) AS match_method,
      min(iteration) AS iteration,
      max(msg_bytes) AS msg_bytes,
      coalesce(min(msg_bytes) <> max(msg_bytes), FALSE)
        AND bool_and(op NOT IN ('all_to_all', 'all_to_allv')) AS size_mismatch,
      -- a send and a recv are the two sides of one transfer, not a mismatch
      coalesce(
        min(CASE WHEN op IN ('send', 'recv') THEN 'p2p' ELSE op END)
        <> max(CASE WHEN op IN ('send', 'recv') THEN 'p2p' ELSE op END),
        FALSE
      ) AS op_mismatch,
      max(group_size) AS ranks_expected,
      -- a rank is in an instance at most once (int_instance_members' k-th call)
      count(*) AS ranks_seen,
      count(*) FILTER (WHERE timed) AS ranks_timed,
      -- p2p: the pair's two ranks (the sender's src, the receiver's dst)
      min(CASE WHEN op = 'send' THEN rank ELSE peer_global END) AS p2p_src,
      min(CASE WHEN op = 'send' THEN peer_global ELSE rank END) AS p2p_dst,
      bool_or(peer_global IS NOT NULL) AS is_p2p
    FROM calls
    GROUP BY run_id, ik, instance_seq
  ),
  inst AS (
    SELECT
      *,
      instance_key(is_p2p, global_group, p2p_src, p2p_dst, instance_seq) AS instance_key
    FROM inst_parts
  ),
  -- times: only timed calls (the timed columns are output only when every member is timed, so
  -- an instance with an untimed member needs none of this; an untimed run has no rows here)
  timed_calls AS MATERIALIZED (
    SELECT run_id, ik, instance_seq, rank, host, arrival_ns, finish_ns, dur_ns, offset_bound_ns
    FROM calls
    WHERE timed
  ),
  last_post AS (
    -- the latest aligned post of each instance, the host and offset bound of that member
    SELECT
      run_id,
      ik,
      instance_seq,
      max(arrival_ns) AS last_arr,
      arg_max(host, arrival_ns) AS last_host,
      arg_max(offset_bound_ns, arrival_ns) AS last_bound
    FROM timed_calls
    GROUP BY run_id, ik, instance_seq
  ),
  times AS (
    -- tied with the last arrival: the same instant, or on another clock closer than the two
    -- offsets' bounds (alignment cannot order them)
    SELECT
      c.run_id,
      c.ik,
      c.instance_seq,
      min(c.arrival_ns) AS first_arr,
      max(c.arrival_ns) AS last_arr,
      min(c.rank) FILTER (WHERE tied) AS last_rank,
      count(*) FILTER (WHERE tied) AS last_tied,
      max(c.finish_ns) AS finish,
      sum(least(last_arr - c.arrival_ns, c.dur_ns)) AS wait,
      CASE WHEN count(c.offset_bound_ns) = count(*) THEN max(c.offset_bound_ns) END
        AS offset_bound
    FROM (
      SELECT
        c.*,
        l.last_arr,
        c.arrival_ns = l.last_arr
        OR (
          c.host IS DISTINCT FROM l.last_host
          AND l.last_arr - c.arrival_ns <= coalesce(c.offset_bound_ns, 0) + coalesce(l.last_bound, 0)
        ) AS tied
      FROM timed_calls AS c
      JOIN last_post AS l
        ON l.run_id = c.run_id AND l.ik = c.ik AND l.instance_seq = c.instance_seq
    ) AS c
    GROUP BY c.run_id, c.ik, c.instance_seq
  ),
  expected AS (
    -- collectives: the group's known members; p2p: its two ranks
    SELECT i.run_id, i.ik, i.instance_seq, m.global_rank AS rank
    FROM inst AS i
    JOIN int_groups_members AS m ON m.run_id = i.run_id AND m.global_group = i.global_group
    WHERE NOT i.is_p2p AND i.ranks_seen < i.ranks_expected
    UNION ALL
    SELECT run_id, ik, instance_seq, unnest([p2p_src, p2p_dst]) AS rank
    FROM inst
    WHERE is_p2p AND ranks_seen < 2
  ),
  missing AS (
    SELECT e.run_id, e.ik, e.instance_seq, string_agg(e.rank::VARCHAR, ',' ORDER BY e.rank) AS ranks
    FROM expected AS e
    ANTI JOIN (
      -- the members of the short instances only
      SELECT c.run_id, c.ik, c.instance_seq, c.rank
      FROM calls AS c
      SEMI JOIN (SELECT DISTINCT run_id, ik, instance_seq FROM expected) AS s
        ON s.run_id = c.run_id AND s.ik = c.ik AND s.instance_seq = c.instance_seq
    ) AS c
      ON c.run_id = e.run_id AND c.ik = e.ik AND c.instance_seq = e.instance_seq
      AND c.rank = e.rank
    GROUP BY e.run_id, e.ik, e.instance_seq
  ),
  judged AS (
    SELECT
      i.*,
      mi.ranks AS missing_ranks,
      CASE
        WHEN i.ranks_seen < i.ranks_expected THEN 'missing_ranks'
        WHEN i.op_mismatch THEN 'op_mismatch'
        WHEN i.size_mismatch THEN 'size_mismatch'
        WHEN i.ranks_timed > 0 AND i.ranks_timed < i.ranks_seen THEN 'untimed'
        ELSE 'complete'
      END AS status
    FROM inst AS i
    LEFT JOIN missing AS mi
      ON mi.run_id = i.run_id AND mi.ik = i.ik AND mi.instance_seq = i.instance_seq
  ),
  timed AS (
    SELECT
      j.*,
      t.first_arr,
      t.last_arr,
      t.last_rank,
      t.last_tied,
      t.finish,
      t.wait,
      t.offset_bound,
      j.status = 'complete' AND j.ranks_timed = j.ranks_seen AS has_times,
      greatest(t.finish - t.last_arr, 0) AS transfer
    FROM judged AS j
    LEFT JOIN times AS t ON t.run_id = j.run_id AND t.ik = j.ik AND t.instance_seq = j.instance_seq
  )
SELECT
  run_id,
  instance_key,
  global_group,
  traffic_class,
  op,
  instance_seq::BIGINT AS instance_seq,
  match_method,
  iteration::INTEGER AS iteration,
  msg_bytes,
  size_mismatch,
  ranks_expected::INTEGER AS ranks_expected,
  ranks_seen::INTEGER AS ranks_seen,
  ranks_timed::INTEGER AS ranks_timed,
  missing_ranks,
  status,
  CASE WHEN has_times THEN first_arr END AS first_arrival_ns,
  CASE WHEN has_times THEN last_arr END AS last_arrival_ns,
  CASE WHEN has_times THEN last_rank END::INTEGER AS last_rank,
  CASE WHEN has_times THEN last_tied END::INTEGER AS last_tied,
  CASE WHEN has_times THEN last_arr - first_arr END AS skew_ns,
  CASE WHEN has_times THEN finish END AS finish_ns,
  CASE WHEN has_times THEN transfer END AS transfer_ns,
  CASE WHEN has_times THEN wait END::BIGINT AS wait_ns,
  CASE
    WHEN has_times AND transfer > 0
      THEN comm_alg_bytes(
        CASE WHEN is_p2p THEN 'send' ELSE op END, msg_bytes, ranks_expected
      ) * 8 / transfer
  END AS algbw_gbps,
  CASE
    WHEN has_times AND transfer > 0
      THEN comm_bus_bytes(
        CASE WHEN is_p2p THEN 'send' ELSE op END, msg_bytes, ranks_expected
      ) * 8 / transfer
  END AS busbw_gbps,
  CASE WHEN has_times THEN offset_bound END AS offset_bound_ns
FROM timed
