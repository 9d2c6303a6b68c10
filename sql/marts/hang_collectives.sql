-- Hang triage (issue 19 item 4): the collectives of each Flight Recorder process group (or NCCL communicator) that not every member completed, and per member whether it never reached, never completed or completed it, so the ranks holding the others up are named.
-- One row per (run_id, source, group_name, seq): per collective group (p2p groups left out: their members count p2p ops, which differ by design) with known counters, S = min(last_completed) + 1, the first collective not completed by every member, and every later point where a member stopped enqueueing (its last_enqueued + 1, while another member enqueued more), up to the highest last_enqueued. A member never reached S when last_enqueued < S, reached but never completed it when last_enqueued >= S > last_completed, completed it when last_completed >= S. The blocking ranks: those that never reached it, and those that never completed it while another member did (their GPU or watchdog stalled: the peers finished the kernel); members that all sit in the same collective (reached, none completed) are waiting, not blocking. Same rules as pipeline/hang.py (`commscope hang`), which reads the dump files; tests/pipeline/test_hang_marts.py checks they agree. NCCL debug logs (source nccl_debug) say what each rank posted (opCount), never what completed: only the points where a member stopped posting while another went on, each member never reached it or reached it (nothing completed, never_completed null: a collective cannot complete without a member), blocking = never_reached. Caveat: a log cut short (a rank killed earlier, a file not yet complete) looks the same. Empty for a run whose groups all completed (FR) or posted (NCCL) the same collectives.
CREATE OR REPLACE VIEW hang_collectives(
  -- Training run identifier.
  run_id,
  -- flight_recorder | nccl_debug (what the counters come from: int_hang_group_progress).
  source,
  -- Process-group name (pg_config key); NCCL: 'nccl:' + the communicator's group (int_groups_comm_keys.global_group: world, the member ranks, or nccl:<hash>/<n>).
  group_name,
  -- Process-group description (default_pg, TP, DP, ...).
  group_desc,
  -- Global ranks of the members, ascending, comma-separated.
  group_ranks,
  -- Number of members.
  group_size,
  -- Collective sequence number in the group (Flight Recorder collective_seq_id; NCCL opCount).
  seq,
  -- Normalised operation of the collective, from the earliest-created entry of (group, seq) in any dump; null when no dump holds it.
  op,
  -- Operation as recorded (profiling_name, e.g. nccl:reduce_scatter).
  raw_op,
  -- Message size in bytes of that entry (comm_ops.msg_bytes meaning).
  msg_bytes,
  -- Element type of that entry.
  dtype,
  -- Creation time of that entry, epoch ns (time_created_ns): the findings' order.
  first_created_ns,
  -- Members that never enqueued it (last_enqueued < seq), ascending, comma-separated; null when none.
  never_reached,
  -- Members that enqueued it (last_enqueued >= seq), whether or not they completed it; null when none.
  reached,
  -- Members that enqueued it and never saw it complete; null when none (always for NCCL logs, which do not say).
  never_completed,
  -- Of never_completed, those whose start was seen (last_started >= seq; timing enabled only); null when none.
  started,
  -- Members that completed it; null when none.
  completed,
  -- Members without a dump, or without counters for the group; null when none.
  unknown,
  -- The ranks holding the others up: never_reached, plus never_completed when some member completed it; null when none (everyone is waiting in it).
  blocking,
  -- True when blocking is not null.
  is_blocking
) AS
WITH
  progress AS (SELECT * FROM int_hang_group_progress),
  -- Members with usable counters: Flight Recorder needs both, an NCCL log says only what
  -- was posted.
  known AS (
    SELECT * FROM progress
    WHERE NOT is_p2p_group
      AND last_enqueued_seq IS NOT NULL
      AND (last_completed_seq IS NOT NULL OR source = 'nccl_debug')
  ),
  bounds AS (
    SELECT
      run_id,
      source,
      group_name,
      min(last_completed_seq) AS min_done,
      max(last_enqueued_seq) AS max_enq
    FROM known
    GROUP BY run_id, source, group_name
    HAVING max(last_enqueued_seq) > coalesce(min(last_completed_seq), min(last_enqueued_seq))
  ),
  -- Algorithm: the first collective not completed by all, and each point where a member
  -- stopped enqueueing while another went on.
  candidates AS (
    SELECT run_id, source, group_name, min_done + 1 AS seq
    FROM bounds
    WHERE min_done IS NOT NULL
    UNION
    SELECT k.run_id, k.source, k.group_name, k.last_enqueued_seq + 1 AS seq
    FROM known AS k
    INNER JOIN bounds AS b
      ON b.run_id = k.run_id AND b.source = k.source AND b.group_name = k.group_name
    WHERE k.last_enqueued_seq < b.max_enq
  ),
  groups AS (
    SELECT DISTINCT run_id, source, group_name, group_desc, group_ranks, group_size
    FROM progress
  ),
  -- Members of the group without usable counters (no dump or log, no status for the group).
  unknown AS (
    SELECT
      g.run_id,
      g.source,
      g.group_name,
      string_agg(CAST(m.rank AS VARCHAR), ',' ORDER BY m.rank) AS unknown
    FROM groups AS g,
      unnest(CAST(string_split(g.group_ranks, ',') AS INTEGER [])) AS m (rank)
    WHERE NOT EXISTS (
      SELECT 1 FROM known AS k
      WHERE k.run_id = g.run_id AND k.source = g.source AND k.group_name = g.group_name
        AND k.rank = m.rank
    )
    GROUP BY g.run_id, g.source, g.group_name
  ),
  member_states AS (
    SELECT
      c.run_id,
      c.source,
      c.group_name,
      c.seq,
      k.rank,
      k.last_enqueued_seq < c.seq AS not_reached,
      k.last_enqueued_seq >= c.seq AS is_reached,
      k.last_enqueued_seq >= c.seq AND c.seq > k.last_completed_seq AS not_completed,
      k.last_completed_seq < c.seq
      AND k.counter_source IS DISTINCT FROM 'entries'
      AND c.seq <= k.last_started_seq AS is_started,
      k.last_completed_seq >= c.seq AS is_completed
    FROM candidates AS c
    INNER JOIN bounds AS b
      ON b.run_id = c.run_id AND b.source = c.source AND b.group_name = c.group_name
    INNER JOIN known AS k
      ON k.run_id = c.run_id AND k.source = c.source AND k.group_name = c.group_name
    WHERE c.seq <= b.max_enq
  ),
  states AS (
    SELECT
      run_id,
      source,
      group_name,
      seq,
      string_agg(CAST(rank AS VARCHAR), ',' ORDER BY rank) FILTER (WHERE not_reached)
        AS never_reached,
      string_agg(CAST(rank AS VARCHAR), ',' ORDER BY rank) FILTER (WHERE is_reached)
        AS reached,
      string_agg(CAST(rank AS VARCHAR), ',' ORDER BY rank) FILTER (WHERE not_completed)
        AS never_completed,
      string_agg(CAST(rank AS VARCHAR), ',' ORDER BY rank) FILTER (WHERE is_started)
        AS started,
      string_agg(CAST(rank AS VARCHAR), ',' ORDER BY rank) FILTER (WHERE is_completed)
        AS completed,
      coalesce(bool_or(is_completed), false) AS any_completed
    FROM member_states
    GROUP BY run_id, source, group_name, seq
  ),
  -- A member blocks when it never reached the collective, or never completed it while
  -- another member did.
  blocking AS (
    SELECT
      m.run_id,
      m.source,
      m.group_name,
      m.seq,
      string_agg(CAST(m.rank AS VARCHAR), ',' ORDER BY m.rank) AS blocking
    FROM member_states AS m
    INNER JOIN states AS s
      ON s.run_id = m.run_id AND s.source = m.source AND s.group_name = m.group_name
      AND s.seq = m.seq
    WHERE m.not_reached OR (m.not_completed AND s.any_completed)
    GROUP BY m.run_id, m.source, m.group_name, m.seq
  ),
  -- The calls are read only for the groups with a finding (`states`; none on a run whose
  -- members all completed, or posted, the same collectives: then the join's empty build side
  -- stops the scan of the calls before it starts), and once for both sources (each read of the
  -- calls costs their files' metadata, ~0.2 s at 1024 ranks, even when no row is wanted). The
  -- format is matched in the join, not filtered: a filter that no call passes would read every
  -- call before the join saw one.
  nccl_wanted AS (
    SELECT run_id, group_name, seq, source AS source_format FROM states WHERE source = 'nccl_debug'
  ),
  -- the processes' communicators of those groups only
  nccl_wanted_comms AS (
    SELECT c.*, w.source_format
    FROM int_hang_nccl_comms AS c
    INNER JOIN (SELECT DISTINCT run_id, group_name, source_format FROM nccl_wanted) AS w
      ON w.run_id = c.run_id AND w.group_name = c.group_name
  ),
  -- the communicators whose calls are read: a Flight Recorder group by its name, an NCCL
  -- communicator by its pointer (the process and rank are matched below)
  wanted_comms AS (
    SELECT DISTINCT run_id, group_name AS comm_id, source AS source_format
    FROM states
    WHERE source = 'flight_recorder'
    UNION
    SELECT run_id, comm_id, source_format FROM nccl_wanted_comms
  ),
  wanted_ops AS MATERIALIZED (
    SELECT
      o.run_id, o.source_format, o.comm_id, o.host, o.pid, o.rank, o.seq, o.op, o.raw_op,
      o.msg_bytes, o.dtype, o.launch_ts_ns
    FROM stg_store__comm_ops AS o
    SEMI JOIN wanted_comms AS w
      ON w.run_id = o.run_id AND w.comm_id = o.comm_id AND w.source_format = o.source_format
  ),
  -- The collective itself: the earliest-created entry of (group, seq) in any dump.
  fr_first AS (
    SELECT
      run_id,
      'flight_recorder' AS source,
      comm_id AS group_name,
      seq,
      arg_min(op, coalesce(launch_ts_ns, 9223372036854775807)) AS op,
      arg_min(raw_op, coalesce(launch_ts_ns, 9223372036854775807)) AS raw_op,
      arg_min(msg_bytes, coalesce(launch_ts_ns, 9223372036854775807)) AS msg_bytes,
      arg_min(dtype, coalesce(launch_ts_ns, 9223372036854775807)) AS dtype,
      min(launch_ts_ns) AS first_created_ns
    FROM wanted_ops
    WHERE source_format = 'flight_recorder' AND op NOT IN ('send', 'recv') AND seq IS NOT NULL
    GROUP BY run_id, comm_id, seq
  ),
  -- NCCL: the collective as the members that posted it logged it (op and size agree on a
  -- collective; the lowest rank's line), no creation time; only the (group, seq) found.
  nccl_first AS (
    SELECT
      c.run_id,
      'nccl_debug' AS source,
      c.group_name,
      o.seq,
      arg_min(o.op, o.rank) AS op,
      arg_min(o.raw_op, o.rank) AS raw_op,
      arg_min(o.msg_bytes, o.rank) AS msg_bytes,
      arg_min(o.dtype, o.rank) AS dtype,
      CAST(NULL AS BIGINT) AS first_created_ns
    FROM wanted_ops AS o
    INNER JOIN nccl_wanted_comms AS c
      ON c.run_id = o.run_id AND c.comm_id = o.comm_id AND c.pid = o.pid AND c.host = o.host
      AND c.global_rank = o.rank AND c.source_format = o.source_format
    INNER JOIN nccl_wanted AS w
      ON w.run_id = c.run_id AND w.group_name = c.group_name AND w.seq = o.seq
    GROUP BY c.run_id, c.group_name, o.seq
  ),
  first_entry AS (
    SELECT * FROM fr_first
    UNION ALL BY NAME
    SELECT * FROM nccl_first
  )
SELECT
  s.run_id,
  s.source,
  s.group_name,
  g.group_desc,
  g.group_ranks,
  g.group_size,
  s.seq,
  f.op,
  f.raw_op,
  f.msg_bytes,
  f.dtype,
  f.first_created_ns,
  s.never_reached,
  s.reached,
  s.never_completed,
  s.started,
  s.completed,
  u.unknown,
  bl.blocking,
  bl.blocking IS NOT NULL AS is_blocking
FROM states AS s
INNER JOIN groups AS g
  ON g.run_id = s.run_id AND g.source = s.source AND g.group_name = s.group_name
LEFT JOIN first_entry AS f
  ON f.run_id = s.run_id AND f.source = s.source AND f.group_name = s.group_name
  AND f.seq = s.seq
LEFT JOIN unknown AS u
  ON u.run_id = s.run_id AND u.source = s.source AND u.group_name = s.group_name
LEFT JOIN blocking AS bl
  ON bl.run_id = s.run_id AND bl.source = s.source AND bl.group_name = s.group_name
  AND bl.seq = s.seq
