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
  shaped AS NOT MATERIALIZED (
    -- Algorithm: sh hashes every per-member column an instance reports but iteration and
    -- timing (ik stands for the group or the p2p pair); members that agree on all of them
    -- share it, and such an instance takes those columns from the one row of `shapes` for its
    -- sh: per call only 5 aggregates over integers (the 17 over strings of a per-member
    -- computation cost about three times as much at 256 ranks); the instances whose members
    -- differ, or that lack members, are computed from their members (`odd_parts`)
    SELECT
      *,
      hash(
        ik,
        peer_global IS NULL,
        global_group,
        op IN ('send', 'recv'),
        CASE WHEN op NOT IN ('send', 'recv') THEN op END,
        traffic_class,
        match_method,
        group_size,
        msg_bytes
      ) AS sh
    FROM calls
  ),
  shapes AS MATERIALIZED (
    -- one row per distinct sh (a few per group and message size): what an instance whose
    -- members all share it reports
    SELECT
      sh,
      any_value(global_group) AS global_group,
      any_value(traffic_class) AS traffic_class,
      CASE WHEN bool_and(op IN ('send', 'recv')) THEN 'send/recv' ELSE any_value(op) END AS op,
      any_value(match_method) AS match_method,
      any_value(msg_bytes) AS msg_bytes,
      -- members sharing sh share msg_bytes (sh hashes it): never a size mismatch, the value
      -- odd_parts' rule gives for one size (coalesce(min <> max, FALSE) AND ... is FALSE
      -- whatever the op, unknown included)
      FALSE AS size_mismatch,
      any_value(group_size) AS ranks_expected,
      any_value(CASE WHEN op = 'send' THEN rank ELSE peer_global END) AS p2p_src,
      any_value(CASE WHEN op = 'send' THEN peer_global ELSE rank END) AS p2p_dst,
      bool_or(peer_global IS NOT NULL) AS is_p2p
    FROM shaped
    GROUP BY sh
  ),
  counted AS MATERIALIZED (
    -- per instance: the aggregates that may differ between its members; odd: they disagree
    -- on a column of `shapes`, or the instance has fewer ranks than expected (none on a
    -- complete, consistent run). ranks_expected and is_p2p are aggregates here, not a join to
    -- `shapes`: members sharing sh share them (sh hashes group_size and p2p-ness), and a mixed
    -- instance is odd whatever they are (its own come from odd_parts); the left join it
    -- replaces hashed the instances (4.9 M at 1024 ranks), not the few shapes
    SELECT
      n.*,
      n.mixed OR coalesce(n.ranks_seen < CASE WHEN n.is_p2p THEN 2 ELSE n.ranks_expected END, FALSE)
        AS odd
    FROM (
      SELECT
        run_id,
        ik,
        instance_seq,
        min(sh) AS sh,
        max(sh) <> min(sh) AS mixed,
        min(iteration) AS iteration,
        -- a rank is in an instance at most once (int_instance_members' k-th call)
        count(*) AS ranks_seen,
        count(*) FILTER (WHERE timed) AS ranks_timed,
        any_value(group_size) AS ranks_expected,
        bool_or(peer_global IS NOT NULL) AS is_p2p
      FROM shaped
      GROUP BY run_id, ik, instance_seq
    ) AS n
  ),
  odd_calls AS MATERIALIZED (
    -- the calls of the odd instances (an inner join: its hash table is built on those few
    -- instances, and with none DuckDB stops reading the calls at once)
    SELECT c.*
    FROM calls AS c
    JOIN (SELECT run_id, ik, instance_seq FROM counted WHERE odd) AS x
      ON x.run_id = c.run_id AND x.ik = c.ik AND x.instance_seq = c.instance_seq
  ),
  odd_parts AS MATERIALIZED (
    -- the odd instances, every column from their members' own values
    SELECT
      c.run_id,
      c.ik,
      c.instance_seq,
      any_value(c.global_group) AS global_group,
      min(c.traffic_class) AS traffic_class,
      CASE WHEN bool_and(c.op IN ('send', 'recv')) THEN 'send/recv' ELSE min(c.op) END AS op,
      any_value(c.match_method) AS match_method,
      max(c.msg_bytes) AS msg_bytes,
      coalesce(min(c.msg_bytes) <> max(c.msg_bytes), FALSE)
        AND bool_and(c.op NOT IN ('all_to_all', 'all_to_allv')) AS size_mismatch,
      -- a send and a recv are the two sides of one transfer, not a mismatch
      coalesce(
        min(CASE WHEN c.op IN ('send', 'recv') THEN 'p2p' ELSE c.op END)
        <> max(CASE WHEN c.op IN ('send', 'recv') THEN 'p2p' ELSE c.op END),
        FALSE
      ) AS op_mismatch,
      max(c.group_size) AS ranks_expected,
      -- p2p: the pair's two ranks (the sender's src, the receiver's dst)
      min(CASE WHEN c.op = 'send' THEN c.rank ELSE c.peer_global END) AS p2p_src,
      min(CASE WHEN c.op = 'send' THEN c.peer_global ELSE c.rank END) AS p2p_dst,
      bool_or(c.peer_global IS NOT NULL) AS is_p2p
    FROM odd_calls AS c
    GROUP BY c.run_id, c.ik, c.instance_seq
  ),
  expected AS (
    -- the members of the short instances (all odd): collectives, the group's known members;
    -- p2p, its two ranks
    SELECT o.run_id, o.ik, o.instance_seq, m.global_rank AS rank
    FROM odd_parts AS o
    JOIN counted AS n ON n.run_id = o.run_id AND n.ik = o.ik AND n.instance_seq = o.instance_seq
    JOIN int_groups_members AS m ON m.run_id = o.run_id AND m.global_group = o.global_group
    WHERE NOT o.is_p2p AND n.ranks_seen < o.ranks_expected
    UNION ALL
    SELECT o.run_id, o.ik, o.instance_seq, unnest([o.p2p_src, o.p2p_dst]) AS rank
    FROM odd_parts AS o
    JOIN counted AS n ON n.run_id = o.run_id AND n.ik = o.ik AND n.instance_seq = o.instance_seq
    WHERE o.is_p2p AND n.ranks_seen < 2
  ),
  missing AS (
    SELECT e.run_id, e.ik, e.instance_seq, string_agg(e.rank::VARCHAR, ',' ORDER BY e.rank) AS ranks
    FROM expected AS e
    -- the members seen (odd_calls holds every member of a short instance)
    ANTI JOIN odd_calls AS c
      ON c.run_id = e.run_id AND c.ik = e.ik AND c.instance_seq = e.instance_seq
      AND c.rank = e.rank
    GROUP BY e.run_id, e.ik, e.instance_seq
  ),
  inst AS (
    -- consistent instances from their row of `shapes`, odd ones from odd_parts
    SELECT
      n.run_id,
      n.ik,
      n.instance_seq,
      s.global_group,
      s.traffic_class,
      s.op,
      s.match_method,
      n.iteration,
      s.msg_bytes,
      s.size_mismatch,
      FALSE AS op_mismatch,
      n.ranks_expected,
      n.ranks_seen,
      n.ranks_timed,
      s.p2p_src,
      s.p2p_dst,
      n.is_p2p,
      NULL::VARCHAR AS missing_ranks
    FROM counted AS n
    JOIN shapes AS s ON s.sh = n.sh
    WHERE NOT n.odd
    UNION ALL
    SELECT
      n.run_id,
      n.ik,
      n.instance_seq,
      o.global_group,
      o.traffic_class,
      o.op,
      o.match_method,
      n.iteration,
      o.msg_bytes,
      o.size_mismatch,
      o.op_mismatch,
      o.ranks_expected,
      n.ranks_seen,
      n.ranks_timed,
      o.p2p_src,
      o.p2p_dst,
      o.is_p2p,
      mi.ranks AS missing_ranks
    FROM counted AS n
    JOIN odd_parts AS o ON o.run_id = n.run_id AND o.ik = n.ik AND o.instance_seq = n.instance_seq
    LEFT JOIN missing AS mi
      ON mi.run_id = n.run_id AND mi.ik = n.ik AND mi.instance_seq = n.instance_seq
    WHERE n.odd
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
  judged AS (
    SELECT
      *,
      instance_key(is_p2p, global_group, p2p_src, p2p_dst, instance_seq) AS instance_key,
      CASE
        WHEN ranks_seen < ranks_expected THEN 'missing_ranks'
        WHEN op_mismatch THEN 'op_mismatch'
        WHEN size_mismatch THEN 'size_mismatch'
        WHEN ranks_timed > 0 AND ranks_timed < ranks_seen THEN 'untimed'
        ELSE 'complete'
      END AS status
    FROM inst
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
