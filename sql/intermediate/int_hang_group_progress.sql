-- Each rank's progress through each of its process groups / NCCL communicators when it stopped: the last collective it enqueued, saw start and saw complete (issue 19 item 4, hang triage).
-- One row per (run_id, source, group_name, rank). Flight Recorder (source flight_recorder): every member of a pg_config group whose rank left a dump in the run. Counters: the dump's pg_status for the group (keyed by the rank-local pg_id, tied to the group by an entry or by creation order: counter_source entry | order), else the rank's own entries of the group (collectives complete in order on a group, so the last completed is the highest completed entry, else the one before the first entry not completed: counter_source entries), else null. The same rules as pipeline/hang.py (`commscope hang`), which reads the dump files themselves; tests/pipeline/test_hang_marts.py checks that both agree on real dumps. A group is a p2p group when any of its entries is a send or recv: its members count p2p ops, which differ by design, so the hang marts compare only collective groups. NCCL debug logs (source nccl_debug): every member of an NCCL communicator known across ranks (int_hang_nccl_comms: its group of global ranks) whose process logged a COLL line on it: last_enqueued_seq = the highest opCount logged (0-based; a COLL line is written when the call is enqueued, so a log says what was posted, never what completed: last_completed_seq null); a communicator with Send/Recv lines is a p2p group (opCount counts p2p too, per peer).
CREATE OR REPLACE VIEW int_hang_group_progress(
  -- Training run identifier.
  run_id,
  -- Where the counters come from: flight_recorder | nccl_debug.
  source,
  -- Process-group name (pg_config key; comm_ops.comm_id of the group's entries); NCCL: 'nccl:' + the communicator's group (int_hang_nccl_comms).
  group_name,
  -- Process-group description (pg_config desc: default_pg, TP, DP, ...), from the lowest dumped member rank that lists the group's ranks; null for NCCL communicators.
  group_desc,
  -- Global ranks of the members, ascending, comma-separated.
  group_ranks,
  -- Number of members.
  group_size,
  -- True when any entry of the group, on any rank, is a send or recv.
  is_p2p_group,
  -- Global rank of the member (a rank with a dump).
  rank,
  -- Last collective sequence number the rank enqueued on the group (0 = none); null when unknown.
  last_enqueued_seq,
  -- Last collective seen starting (pg_status; recorded with timing enabled only, else -1); null from entries.
  last_started_seq,
  -- Last collective seen completed on the rank; null when unknown.
  last_completed_seq,
  -- Where the counters came from: entry | order (pg_status, tied to the group by an entry or by creation order) | entries (the dump's entries, no pg_status) | nccl_log (COLL lines) | null (unknown).
  counter_source,
  -- The rank's entries of the group not completed (state scheduled, started or unknown; p2p included); null for NCCL logs.
  pending_entries
) AS
WITH
  comms AS (
    SELECT * FROM stg_store__communicators WHERE source_format = 'flight_recorder'
  ),
  -- the dumps' entries, read once (four readers below; a dump holds a window of a rank's
  -- calls, while this filter alone reads every call's format); only for the runs whose call
  -- shapes (int_comm_op_shape_keys) include a dump's: on a run without dumps the join's build
  -- side is empty and the calls are not read
  ops AS MATERIALIZED (
    SELECT o.run_id, o.rank, o.comm_id, o.op, o.seq, o.call_state
    FROM stg_store__comm_ops AS o
    SEMI JOIN (
      SELECT DISTINCT run_id, source_format
      FROM int_comm_op_shape_keys
      WHERE source_format = 'flight_recorder'
    ) AS f ON f.run_id = o.run_id AND f.source_format = o.source_format
    WHERE o.source_format = 'flight_recorder'
  ),
  -- Ranks that left a dump: any row of a dump names its rank.
  dumped AS (
    SELECT DISTINCT run_id, global_rank AS rank FROM comms WHERE global_rank IS NOT NULL
    UNION
    SELECT DISTINCT run_id, rank FROM ops WHERE rank IS NOT NULL
  ),
  -- One description and member list per group: the lowest rank's dump that lists the
  -- members (every dump of a member repeats them).
  groups AS (
    SELECT
      run_id,
      comm_id AS group_name,
      first(group_desc ORDER BY group_ranks IS NULL, global_rank) AS group_desc,
      first(group_ranks ORDER BY group_ranks IS NULL, global_rank) AS group_ranks
    FROM comms
    GROUP BY run_id, comm_id
  ),
  p2p_groups AS (
    SELECT DISTINCT run_id, comm_id AS group_name
    FROM ops
    WHERE op IN ('send', 'recv')
  ),
  members AS (
    SELECT
      g.run_id,
      g.group_name,
      g.group_desc,
      g.group_ranks,
      len(string_split(g.group_ranks, ',')) AS group_size,
      CAST(unnest(string_split(g.group_ranks, ',')) AS INTEGER) AS rank
    FROM groups AS g
    WHERE g.group_ranks IS NOT NULL
  ),
  status AS (
    SELECT
      run_id,
      comm_id AS group_name,
      global_rank AS rank,
      last_enqueued_seq,
      last_started_seq,
      last_completed_seq,
      seq_status_source
    FROM comms
    WHERE seq_status_source IS NOT NULL AND global_rank IS NOT NULL
  ),
  -- Counters from the entries, for dumps without pg_status: collective entries only.
  from_entries AS (
    SELECT
      run_id,
      comm_id AS group_name,
      rank,
      max(seq) AS last_enqueued_seq,
      coalesce(
        max(seq) FILTER (WHERE call_state = 'completed'),
        min(seq) FILTER (WHERE call_state IS DISTINCT FROM 'completed') - 1
      ) AS last_completed_seq
    FROM ops
    WHERE op NOT IN ('send', 'recv') AND seq IS NOT NULL AND comm_id IS NOT NULL
    GROUP BY run_id, comm_id, rank
  ),
  pending AS (
    SELECT run_id, comm_id AS group_name, rank, count(*) AS pending_entries
    FROM ops
    WHERE call_state IS DISTINCT FROM 'completed' AND comm_id IS NOT NULL
    GROUP BY run_id, comm_id, rank
  ),
  fr AS (
    SELECT
      m.run_id,
      'flight_recorder' AS source,
      m.group_name,
      m.group_desc,
      m.group_ranks,
      m.group_size,
      p2p.group_name IS NOT NULL AS is_p2p_group,
      m.rank,
      CASE
        WHEN s.seq_status_source IS NOT NULL THEN s.last_enqueued_seq ELSE e.last_enqueued_seq
      END AS last_enqueued_seq,
      s.last_started_seq,
      CASE
        WHEN s.seq_status_source IS NOT NULL THEN s.last_completed_seq ELSE e.last_completed_seq
      END AS last_completed_seq,
      coalesce(s.seq_status_source, CASE WHEN e.last_enqueued_seq IS NOT NULL THEN 'entries' END)
        AS counter_source,
      coalesce(pe.pending_entries, 0) AS pending_entries
    FROM members AS m
    INNER JOIN dumped AS d ON d.run_id = m.run_id AND d.rank = m.rank
    LEFT JOIN p2p_groups AS p2p ON p2p.run_id = m.run_id AND p2p.group_name = m.group_name
    LEFT JOIN status AS s
      ON s.run_id = m.run_id AND s.group_name = m.group_name AND s.rank = m.rank
    LEFT JOIN from_entries AS e
      ON e.run_id = m.run_id AND e.group_name = m.group_name AND e.rank = m.rank
    LEFT JOIN pending AS pe
      ON pe.run_id = m.run_id AND pe.group_name = m.group_name AND pe.rank = m.rank
  ),
  nccl_comms AS (SELECT * FROM int_hang_nccl_comms),
  nccl_groups AS (
    SELECT
      run_id,
      group_name,
      array_to_string(list_sort(list(DISTINCT global_rank)), ',') AS group_ranks,
      count(DISTINCT global_rank) AS group_size
    FROM nccl_comms
    GROUP BY run_id, group_name
  ),
  -- Algorithm: one pass over the NCCL calls, per call shape first (int_comm_ops_shaped: the
  -- largest opCount of each shape_id, one integer per call; the format, process, communicator,
  -- rank and op are columns of the shape, int_comm_op_shape_keys), then per process communicator
  -- (a large run has millions of calls and few communicators), then onto the cross-rank
  -- identities. Every call's opCount is read, the shapes joined after (a join before the
  -- aggregate cost more than it saved: at 1024 ranks every call is an NCCL log's).
  shape_seq AS (
    SELECT shape_id, max(seq) AS last_seq FROM int_comm_ops_shaped GROUP BY shape_id
  ),
  nccl_per_comm AS (
    SELECT
      s.run_id,
      s.host,
      s.pid,
      s.comm_id,
      s.rank,
      max(q.last_seq) AS last_seq,
      bool_or(s.op IN ('send', 'recv')) AS has_p2p
    FROM shape_seq AS q
    JOIN int_comm_op_shape_keys AS s ON s.shape_id = q.shape_id
    WHERE s.source_format = 'nccl_debug' AND s.comm_id IS NOT NULL AND s.rank IS NOT NULL
    GROUP BY s.run_id, s.host, s.pid, s.comm_id, s.rank
  ),
  -- Processes whose log has COLL/P2P lines at all: a member among them with none on a
  -- communicator posted nothing there (last_enqueued_seq -1); others are unknown.
  nccl_logging AS (
    SELECT DISTINCT run_id, rank FROM nccl_per_comm WHERE last_seq IS NOT NULL
  ),
  nccl_last AS (
    SELECT
      c.run_id,
      c.group_name,
      c.global_rank AS rank,
      max(o.last_seq) AS last_seq,
      bool_or(o.has_p2p) AS has_p2p
    FROM nccl_per_comm AS o
    INNER JOIN nccl_comms AS c
      ON c.run_id = o.run_id AND c.comm_id = o.comm_id AND c.pid = o.pid AND c.host = o.host
      AND c.global_rank = o.rank
    GROUP BY c.run_id, c.group_name, c.global_rank
  ),
  nccl_p2p AS (
    SELECT DISTINCT run_id, group_name FROM nccl_last WHERE has_p2p
  ),
  nccl AS (
    SELECT DISTINCT
      c.run_id,
      'nccl_debug' AS source,
      c.group_name,
      CAST(NULL AS VARCHAR) AS group_desc,
      g.group_ranks,
      g.group_size,
      p.group_name IS NOT NULL AS is_p2p_group,
      c.global_rank AS rank,
      CASE WHEN lg.rank IS NOT NULL THEN coalesce(l.last_seq, -1) END AS last_enqueued_seq,
      CAST(NULL AS BIGINT) AS last_started_seq,
      CAST(NULL AS BIGINT) AS last_completed_seq,
      CASE WHEN lg.rank IS NOT NULL THEN 'nccl_log' END AS counter_source,
      CAST(NULL AS BIGINT) AS pending_entries
    FROM nccl_comms AS c
    INNER JOIN nccl_groups AS g ON g.run_id = c.run_id AND g.group_name = c.group_name
    LEFT JOIN nccl_p2p AS p ON p.run_id = c.run_id AND p.group_name = c.group_name
    LEFT JOIN nccl_logging AS lg ON lg.run_id = c.run_id AND lg.rank = c.global_rank
    LEFT JOIN nccl_last AS l
      ON l.run_id = c.run_id AND l.group_name = c.group_name AND l.rank = c.global_rank
  )
SELECT * FROM fr
UNION ALL BY NAME
SELECT * FROM nccl
