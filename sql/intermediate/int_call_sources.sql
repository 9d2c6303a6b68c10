-- Which logical call each source record is (issue 19): the same call logged by several tools of one rank (NCCL debug log, Kineto trace, Flight Recorder dump, NCCL Inspector, ...) paired across the sources, so `int_calls` can hold it once with the best field of each source.
-- One row per record of a rank's non-counted sources (comm_ops rows of int_comm_ops_classified with counted false: a rank logged by more than one format), and per counted call of the ranks such records belong to; a rank logged by one format has nothing to pair (int_calls takes its calls as they are), so this table is empty on single-source runs. The anchor of a rank is its counted source (int_rank_primary_source: the fullest log of the rank); every anchor row is a logical call (role anchor). A row of any other format (secondary) is paired with one anchor row of the same process, group and op, by the first method of: 'seq' (the source's own sequence number against the anchor's complete call list: a Flight Recorder collective_seq_id - 1, or a Kineto collective's `Seq` - 1 (the record_param_comms / NCCL kernel arg: ProcessGroupNCCL records seqCollective_ + 1 for a collective, the number the dump calls collective_seq_id; its p2p Seq counts the p2p calls apart and is not used) = the 0-based position of the collective on its group in an NCCL debug log (line order) or another dump's or trace's Seq - 1; an NCCL Inspector coll_sn = the 0-based position of the call among the same op's calls on its communicator; a Flight Recorder p2p entry's p2p_seq_id - 1 = the 0-based position of the send/recv among the point-to-point calls of its group, sends and recvs together, in an NCCL debug log's line order (the lines of an all-to-all group left out) or another dump's p2p_seq_id - 1: PyTorch's p2p counter of the process group, equal to the log's order when the group's p2p runs on the group's own communicator (PyTorch with eager init: sample_traces/gpu_nccl_pp2ep2_1gpu), while on a per-pair communicator the groups differ and nothing pairs by seq; a misnumbered list fails the op/size check below and falls to the next method); 'peer_order' (an NCCL Inspector p2p record, e.g. one per-peer record of an all-to-all, against an NCCL debug log's Send/Recv lines: the k-th record of the same op, peer (a communicator rank in both) and size is the k-th such line; the plugin leaves out records under its size threshold (NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES, 8192 by default), which shifts any position counted over all the lines but never this one, the dropped sizes being absent from both sides of the key); 'rooted' (a Kineto gather or scatter record, whose Rank arg names the root's group rank, against the NCCL debug log's point-to-point lines PyTorch issues for it (torch/csrc/cuda/nccl.cpp gather/scatter: one group of ncclSend/ncclRecv of the per-rank buffer): at a non-root rank the k-th gather of its size pairs with the k-th Send line of that size to the root (a scatter: Recv from the root), at the root with the k-th Recv line of that size from the group's first other member (a scatter: Send to it; that member is 0, or 1 when the root is 0; the root's other lines of the call stay calls of their own); the caller's group rank is its place in the sorted global_group; a Flight Recorder gather names no root and is not paired so); 'iteration' (the k-th call of (group, op) inside the same iteration: int_comm_op_iteration, a detected iteration only when a period was found); 'order' (the k-th call of (group, op) over the whole run); per (rank, secondary file, group, op) the first method whose every pair agrees on op and size, 'iteration' only when no iteration holds more of the file's records than of the anchor's calls (else the two numberings are not the same steps, e.g. a one-iteration NCCL log whose period detector took one grouped all-to-all for the period) (a dump numbering a group's collectives differently from the log falls back to the positions), else the first that pairs at all. Process identity: a secondary row is of the anchor's rank when its (host, pid) is the anchor's process (host by its first DNS label), else its own rank; a row of another process (both pids known and different) never pairs. Group: global_group (the same sorted member ranks whatever the source names: NCCL comm hash, PyTorch pg name), else 'n<group_size>'. Nothing is paired silently on a mismatch: a row whose method gives several anchors, none, an anchor of another op or one of another size is role unpaired with the reason (DeepSpeed's reduce_scatter, logged as its whole input, is not size-checked; int_calls.size_conflict stays for sources whose sizes differ where the op/size checks allow it, e.g. a null size). Rows without a rank are not here (int_calls keeps each counted one as its own call). An NCCL log's all-to-all written as grouped Send/Recv lines under one opCount (int_p2p_groups: a Send to and a Recv from every member) is ONE record here, its first line with op all_to_all and the group's Send bytes (the other lines are not rows), so it counts as one collective of its group and pairs with the one all_to_all a Kineto trace or Flight Recorder dump records (collective_seq_id counts it as one collective).
CREATE OR REPLACE VIEW int_call_sources(
  -- Training run identifier.
  run_id,
  -- Global rank of the logical call (the anchor's; a secondary row of the anchor's process takes it).
  rank,
  -- Rank as the row's source gave it (stg_store__comm_ops.rank).
  source_rank,
  -- Parser of the row.
  source_format,
  -- File the row came from.
  source_file,
  -- Line (or event index) in that file.
  source_line,
  -- The row's key (stg_store__comm_ops.call_key).
  call_key,
  -- anchor (a row of the rank's counted source: a logical call) | paired (another source's record of an anchor's call) | unpaired.
  role,
  -- call_key of the anchor row this row is a record of (its own for an anchor; null when unpaired).
  anchor_key,
  -- source_line of that anchor row (join on anchor_key, rank and anchor_line).
  anchor_line,
  -- anchor | seq | peer_order | rooted | iteration | order (see the header); null when unpaired.
  match_method,
  -- Why a secondary row is unpaired: no_anchor (the rank has no counted source), no_match (no anchor call at its position), ambiguous (several anchor calls), op_mismatch (seq: the anchor call with its number is another op), size_mismatch (the anchor call at its number or position has another size); null otherwise.
  unpaired_reason,
  -- Normalised operation.
  op,
  -- Group key the pairing used: global_group, else 'n<group_size>'; null when neither is known.
  group_key,
  -- Communicator identity as logged (NCCL comm hash, PyTorch pg name, ...).
  comm_id,
  -- Ranks in the communicator (int_comm_ops_classified).
  group_size,
  -- Message size in bytes as the source logged it.
  msg_bytes,
  -- The source's own sequence number.
  seq,
  -- Usable iteration of the row (int_comm_op_iteration; a detected one only with a period).
  iteration,
  -- Start, ns (the source's clock).
  ts_ns,
  -- Duration, ns (null when the source has none).
  dur_ns,
  -- End, ns.
  end_ns,
  -- Clock of ts_ns/dur_ns: kernel | cpu_range | logged | none (comm_ops.timing_source).
  timing_source,
  -- CPU issue time, ns (null when not recorded).
  launch_ts_ns,
  -- Host name as logged.
  host,
  -- Operating-system process id.
  pid,
  -- True when the record was paired with one line of an NCCL all-to-all group (int_p2p_groups: a tool that records the exchange per peer, e.g. the Inspector's or nsys' Send/Recv): a record of the call whose size is that line's, not the call's; false for the other pairs and anchors; null when unpaired.
  line_match
) AS
WITH
  it AS (
    SELECT
      run_id,
      rank,
      call_key,
      source_line,
      CASE WHEN method <> 'detected' OR period IS NOT NULL THEN iteration END AS iteration
    FROM int_comm_op_iteration
    -- only runs with records to pair (as `lines`): on a single-source run the join below then
    -- builds no hash table of every call's iteration
    WHERE run_id IN (
      SELECT run_id FROM int_comm_ops_classified WHERE NOT counted AND rank IS NOT NULL
    )
  ),
  grouped AS (SELECT * FROM int_p2p_groups),
  lines AS (
    SELECT
      o.run_id,
      o.rank,
      o.source_format,
      o.source_file,
      o.source_line,
      o.call_key,
      o.op,
      coalesce(o.global_group, 'n' || o.group_size::VARCHAR) AS group_key,
      o.comm_id,
      o.group_size,
      o.peer_rank,
      o.msg_bytes,
      o.seq,
      o.ts_ns,
      o.dur_ns,
      o.end_ns,
      o.timing_source,
      o.launch_ts_ns,
      o.host,
      o.pid,
      split_part(o.host, '.', 1) AS short_host,
      o.counted,
      o.op IN ('send', 'recv') AS p2p,
      g.head_line IS NOT NULL AS member,
      g.group_op,
      g.group_bytes,
      g.head_line,
      g.head_key
    FROM int_comm_ops_classified AS o
    LEFT JOIN grouped AS g
      ON g.run_id = o.run_id AND g.rank = o.rank AND g.source_file = o.source_file
      AND g.source_line = o.source_line AND g.call_key = o.call_key
    WHERE o.rank IS NOT NULL
      -- a run whose every rank is logged by one format has nothing to pair: no row at all
      -- (checked on one column first, so a 1024-rank single-source run skips the join and
      -- aggregates below over its 18 M calls)
      AND o.run_id IN (
        SELECT run_id FROM int_comm_ops_classified WHERE NOT counted AND rank IS NOT NULL
      )
  ),
  ranked AS (
    -- every record, with the call it is a record of (to_key, to_line): its own, or for a line
    -- of an NCCL all-to-all group (member), the group's call
    SELECT
      * EXCLUDE (group_op, group_bytes, head_line, head_key),
      coalesce(head_key, call_key) AS to_key,
      coalesce(head_line, source_line) AS to_line
    FROM lines
    UNION ALL
    -- the group itself as one record: its first line, op all_to_all, the group's send bytes
    SELECT
      * EXCLUDE (group_op, group_bytes, head_line, head_key) REPLACE (
        group_op AS op, group_bytes AS msg_bytes, FALSE AS p2p, FALSE AS member
      ),
      call_key AS to_key,
      source_line AS to_line
    FROM lines
    WHERE member AND source_line = head_line
  ),
  procs AS (
    -- the counted source's process of each rank: (host, pid) -> rank, when one rank has it
    SELECT run_id, short_host, pid, min(rank) AS rank
    FROM ranked
    WHERE counted AND pid IS NOT NULL
    GROUP BY run_id, short_host, pid
    HAVING count(DISTINCT rank) = 1
  ),
  moved AS (
    -- the records of a rank's other sources (none on a single-source run), with the rank of
    -- their process
    SELECT s.* EXCLUDE (rank), coalesce(p.rank, s.rank) AS rank, s.rank AS source_rank
    FROM ranked AS s
    LEFT JOIN procs AS p
      ON p.run_id = s.run_id AND p.pid = s.pid
      AND p.short_host IS NOT DISTINCT FROM s.short_host
    WHERE NOT s.counted AND NOT s.member
  ),
  targets AS (SELECT DISTINCT run_id, rank FROM moved),
  rows AS (
    -- the ranks with records to pair: their counted calls and those records, with iterations
    SELECT r.*, i.iteration
    FROM (
      SELECT c.*, c.rank AS source_rank
      FROM ranked AS c
      SEMI JOIN targets AS t ON t.run_id = c.run_id AND t.rank = c.rank
      WHERE c.counted
      UNION ALL BY NAME
      SELECT * FROM moved
    ) AS r
    LEFT JOIN it AS i
      ON i.run_id = r.run_id AND i.rank = r.source_rank AND i.call_key = r.call_key
      AND i.source_line = r.source_line
  ),
  anchors AS (
    SELECT
      *,
      -- position among the (group, op) calls of the rank: whole run, and inside the iteration
      row_number() OVER (
        PARTITION BY run_id, rank, group_key, op
        ORDER BY launch_ts_ns NULLS LAST, ts_ns NULLS LAST, source_file, source_line
      ) - 1 AS k_run,
      row_number() OVER (
        PARTITION BY run_id, rank, group_key, op, iteration
        ORDER BY launch_ts_ns NULLS LAST, ts_ns NULLS LAST, source_file, source_line
      ) - 1 AS k_iter,
      -- position among the collectives of the group (p2p rows get their own, unused, numbers)
      row_number() OVER (
        PARTITION BY run_id, rank, group_key, p2p
        ORDER BY launch_ts_ns NULLS LAST, ts_ns NULLS LAST, source_file, source_line
      ) - 1 AS k_coll,
      -- position among the same op's point-to-point calls with the same peer and size
      row_number() OVER (
        PARTITION BY run_id, rank, group_key, op, peer_rank, msg_bytes
        ORDER BY launch_ts_ns NULLS LAST, ts_ns NULLS LAST, source_file, source_line
      ) - 1 AS k_peer,
      -- position among the point-to-point calls (send and recv together) of the group, the
      -- lines of an all-to-all group left out (PyTorch counts those as one collective)
      row_number() OVER (
        PARTITION BY run_id, rank, group_key, p2p AND NOT member
        ORDER BY launch_ts_ns NULLS LAST, ts_ns NULLS LAST, source_file, source_line
      ) - 1 AS k_p2p
    FROM rows
    WHERE counted
  ),
  anchor_keys AS (
    SELECT
      *,
      -- the anchor's 0-based collective position on its group, when its list is complete from
      -- the group's first call (an NCCL debug log) or numbered by the same counter (a dump)
      CASE
        WHEN p2p THEN NULL
        WHEN source_format = 'nccl_debug' THEN k_coll
        WHEN source_format IN ('flight_recorder', 'kineto') THEN seq - 1
      END AS coll_pos,
      -- an NCCL log's p2p line: its position among the same op's lines with its peer and size
      CASE
        WHEN p2p AND source_format = 'nccl_debug' AND peer_rank IS NOT NULL
          AND msg_bytes IS NOT NULL THEN k_peer
      END AS peer_pos,
      -- the anchor's 0-based point-to-point position on its group: an NCCL log's p2p lines in
      -- line order (complete from the group's first call), a dump's p2p_seq_id - 1
      CASE
        WHEN NOT p2p OR member THEN NULL
        WHEN source_format = 'nccl_debug' THEN k_p2p
        WHEN source_format = 'flight_recorder' THEN seq - 1
      END AS p2p_pos,
      -- the anchor's 0-based position among the same op's calls on its communicator
      CASE
        WHEN p2p THEN NULL
        WHEN source_format = 'nccl_debug' THEN k_run
        WHEN source_format = 'nccl_inspector' THEN seq
      END AS op_pos
    FROM anchors
  ),
  -- Algorithm: a gather or scatter record (Kineto record_param_comms, whose Rank arg is the
  -- root's group rank) is, in an NCCL log, point-to-point lines: PyTorch's gather issues, at a
  -- non-root rank, one Send to the root, at the root one Recv from every other member; its
  -- scatter one Recv from the root, at the root one Send to every other member (each the
  -- per-rank buffer, the record's msg_bytes). It pairs with the line of that op and size
  -- with the root (non-root) or the group's first other member (root): pair_op/pair_peer
  secondary AS (
    SELECT
      *,
      CASE
        WHEN op IN ('gather', 'scatter') AND source_format = 'kineto' AND peer_rank IS NOT NULL
          AND my_grank IS NOT NULL
          THEN CASE WHEN (op = 'gather') = (peer_rank = my_grank) THEN 'recv' ELSE 'send' END
      END AS pair_op,
      CASE
        WHEN peer_rank = my_grank THEN CASE WHEN peer_rank = 0 THEN 1 ELSE 0 END
        ELSE peer_rank
      END AS pair_peer
    FROM (
      SELECT
        *,
        -- the caller's rank in the group: its place among the sorted member ranks
        CASE
          WHEN group_key = 'world' THEN rank
          WHEN group_key NOT LIKE 'n%' THEN list_position(string_split(group_key, ','), rank::VARCHAR) - 1
        END AS my_grank
      FROM rows
      WHERE NOT counted
    )
  ),
  secondary_keys AS (
    SELECT
      *,
      row_number() OVER (
        PARTITION BY run_id, rank, source_file, group_key, op
        ORDER BY launch_ts_ns NULLS LAST, ts_ns NULLS LAST, seq NULLS LAST, source_line
      ) - 1 AS k_run,
      row_number() OVER (
        PARTITION BY run_id, rank, source_file, group_key, op, iteration
        ORDER BY launch_ts_ns NULLS LAST, ts_ns NULLS LAST, seq NULLS LAST, source_line
      ) - 1 AS k_iter,
      CASE WHEN NOT p2p AND source_format IN ('flight_recorder', 'kineto') THEN seq - 1 END
        AS coll_pos,
      -- an NCCL Inspector p2p record (a communicator rank as peer, like the log's root): its
      -- position among the file's records of the same op, peer and size, in p2p_sn order
      CASE
        WHEN p2p AND source_format = 'nccl_inspector' AND peer_rank IS NOT NULL
          AND msg_bytes IS NOT NULL THEN row_number() OVER (
            PARTITION BY run_id, rank, source_file, group_key, op, peer_rank, msg_bytes
            ORDER BY seq NULLS LAST, launch_ts_ns NULLS LAST, ts_ns NULLS LAST, source_line
          ) - 1
      END AS peer_pos,
      -- a dump's p2p_seq_id counts the process group's send and recv calls together, 1-based
      CASE WHEN p2p AND source_format = 'flight_recorder' THEN seq - 1 END AS p2p_pos,
      CASE WHEN NOT p2p AND source_format = 'nccl_inspector' THEN seq END AS op_pos,
      -- a gather's position among the file's records of the same line op, peer and size
      CASE
        WHEN pair_op IS NOT NULL AND msg_bytes IS NOT NULL THEN row_number() OVER (
          PARTITION BY run_id, rank, source_file, group_key, pair_op, pair_peer, msg_bytes
          ORDER BY launch_ts_ns NULLS LAST, ts_ns NULLS LAST, seq NULLS LAST, source_line
        ) - 1
      END AS rooted_pos
    FROM secondary
  ),
  candidate_keys AS (
    -- every (secondary row, anchor row, method) the keys allow (equi-joins only: a lane's
    -- calls are never crossed with each other); a row of another process never pairs
    SELECT s.run_id, s.call_key, s.source_line, s.rank, s.source_file, s.group_key, s.op,
      'seq' AS method, a.to_key AS anchor_key, a.to_line AS anchor_line, a.op = s.op AS op_ok,
      a.msg_bytes AS a_bytes, s.msg_bytes AS s_bytes, a.op AS a_op, a.source_format AS a_format,
      s.source_format AS s_format, a.pid AS a_pid, s.pid AS s_pid, a.member AS a_member
    FROM secondary_keys AS s
    JOIN anchor_keys AS a
      ON a.run_id = s.run_id AND a.rank = s.rank AND a.group_key = s.group_key
      AND a.coll_pos = s.coll_pos
    UNION ALL
    SELECT s.run_id, s.call_key, s.source_line, s.rank, s.source_file, s.group_key, s.op,
      'seq' AS method, a.to_key, a.to_line, TRUE,
      a.msg_bytes, s.msg_bytes, a.op, a.source_format, s.source_format, a.pid, s.pid, a.member
    FROM secondary_keys AS s
    JOIN anchor_keys AS a
      ON a.run_id = s.run_id AND a.rank = s.rank AND a.group_key = s.group_key AND a.op = s.op
      AND a.op_pos = s.op_pos
    UNION ALL
    SELECT s.run_id, s.call_key, s.source_line, s.rank, s.source_file, s.group_key, s.op,
      'seq' AS method, a.to_key, a.to_line, a.op = s.op,
      a.msg_bytes, s.msg_bytes, a.op, a.source_format, s.source_format, a.pid, s.pid, a.member
    FROM secondary_keys AS s
    JOIN anchor_keys AS a
      ON a.run_id = s.run_id AND a.rank = s.rank AND a.group_key = s.group_key
      AND a.p2p_pos = s.p2p_pos
    UNION ALL
    SELECT s.run_id, s.call_key, s.source_line, s.rank, s.source_file, s.group_key, s.op,
      'peer_order' AS method, a.to_key, a.to_line, TRUE,
      a.msg_bytes, s.msg_bytes, a.op, a.source_format, s.source_format, a.pid, s.pid, a.member
    FROM secondary_keys AS s
    JOIN anchor_keys AS a
      ON a.run_id = s.run_id AND a.rank = s.rank AND a.group_key = s.group_key AND a.op = s.op
      AND a.peer_rank = s.peer_rank AND a.msg_bytes = s.msg_bytes AND a.peer_pos = s.peer_pos
    UNION ALL
    SELECT s.run_id, s.call_key, s.source_line, s.rank, s.source_file, s.group_key, s.op,
      'rooted' AS method, a.to_key, a.to_line, TRUE,
      a.msg_bytes, s.msg_bytes, a.op, a.source_format, s.source_format, a.pid, s.pid, a.member
    FROM secondary_keys AS s
    JOIN anchor_keys AS a
      ON a.run_id = s.run_id AND a.rank = s.rank AND a.group_key = s.group_key
      AND a.op = s.pair_op AND a.peer_rank = s.pair_peer AND a.msg_bytes = s.msg_bytes
      AND a.peer_pos = s.rooted_pos
    UNION ALL
    SELECT s.run_id, s.call_key, s.source_line, s.rank, s.source_file, s.group_key, s.op,
      'iteration' AS method, a.to_key, a.to_line, TRUE,
      a.msg_bytes, s.msg_bytes, a.op, a.source_format, s.source_format, a.pid, s.pid, a.member
    FROM secondary_keys AS s
    JOIN anchor_keys AS a
      ON a.run_id = s.run_id AND a.rank = s.rank AND a.group_key = s.group_key AND a.op = s.op
      AND a.iteration = s.iteration AND a.k_iter = s.k_iter
    UNION ALL
    SELECT s.run_id, s.call_key, s.source_line, s.rank, s.source_file, s.group_key, s.op,
      'order' AS method, a.to_key, a.to_line, TRUE,
      a.msg_bytes, s.msg_bytes, a.op, a.source_format, s.source_format, a.pid, s.pid, a.member
    FROM secondary_keys AS s
    JOIN anchor_keys AS a
      ON a.run_id = s.run_id AND a.rank = s.rank AND a.group_key = s.group_key AND a.op = s.op
      AND a.k_run = s.k_run
  ),
  candidates AS (
    SELECT * EXCLUDE (a_bytes, s_bytes, a_op, a_format, s_format),
      (
        a_bytes IS NULL OR s_bytes IS NULL OR a_bytes = s_bytes
        -- DeepSpeed logs reduce_scatter's whole input, the others the shard
        OR (a_op = 'reduce_scatter' AND 'deepspeed_comms' IN (a_format, s_format))
      ) AS size_ok
    FROM candidate_keys
  ),
  same_process AS (
    SELECT * FROM candidates WHERE NOT (a_pid IS NOT NULL AND s_pid IS NOT NULL AND a_pid <> s_pid)
  ),
  iteration_overflow AS (
    -- (rank, secondary file, group, op) whose records outnumber the anchor's calls of the
    -- (group, op) in an iteration both sides have: the two iteration numberings are not the
    -- same steps (e.g. a one-iteration log whose period detector took one grouped all-to-all
    -- for the period), so 'iteration' cannot be the agreeing method there
    SELECT DISTINCT s.run_id, s.rank, s.source_file, s.group_key, s.op
    FROM secondary_keys AS s
    JOIN (
      SELECT run_id, rank, group_key, op, iteration, count(*) AS n
      FROM anchor_keys
      WHERE iteration IS NOT NULL
      GROUP BY ALL
    ) AS a
      ON a.run_id = s.run_id AND a.rank = s.rank AND a.group_key = s.group_key AND a.op = s.op
      AND a.iteration = s.iteration
    WHERE s.k_iter >= a.n
  ),
  methods AS (
    -- per (rank, secondary file, group, op): the first method (seq, peer_order, rooted,
    -- iteration, order) whose pairs all agree on op and size (a counter that names another
    -- call anywhere on the group is not the anchor's: PyTorch's collective_seq_id skips the
    -- p2p an NCCL log counts), 'iteration' only where no iteration overflows
    -- (iteration_overflow); when none does, seq, else peer_order, else rooted, else
    -- iteration, else order, its disagreeing pairs left unpaired
    SELECT p.run_id, p.rank, p.source_file, p.group_key, p.op, p.method
    FROM same_process AS p
    LEFT JOIN iteration_overflow AS o
      ON p.method = 'iteration' AND o.run_id = p.run_id AND o.rank = p.rank
      AND o.source_file = p.source_file AND o.group_key IS NOT DISTINCT FROM p.group_key
      AND o.op = p.op
    GROUP BY p.run_id, p.rank, p.source_file, p.group_key, p.op, p.method
    QUALIFY row_number() OVER (
      PARTITION BY p.run_id, p.rank, p.source_file, p.group_key, p.op
      ORDER BY
        (bool_and(p.op_ok AND p.size_ok) AND count(o.op) = 0) DESC,
        CASE p.method
          WHEN 'seq' THEN 0 WHEN 'peer_order' THEN 1 WHEN 'rooted' THEN 2 WHEN 'iteration' THEN 3
          ELSE 4
        END
    ) = 1
  ),
  chosen AS (
    SELECT
      c.run_id,
      c.call_key,
      c.source_line,
      c.rank,
      c.source_file,
      any_value(c.method) AS method,
      count(DISTINCT c.anchor_key) AS n_anchors,
      bool_and(c.op_ok) AS op_ok,
      bool_and(c.size_ok) AS size_ok,
      any_value(c.anchor_key) AS anchor_key,
      any_value(c.anchor_line) AS anchor_line,
      bool_or(c.a_member) AS line_match
    FROM same_process AS c
    SEMI JOIN methods AS m
      ON m.run_id = c.run_id AND m.rank = c.rank AND m.source_file = c.source_file
      AND m.group_key IS NOT DISTINCT FROM c.group_key AND m.op = c.op AND m.method = c.method
    GROUP BY c.run_id, c.call_key, c.source_line, c.rank, c.source_file
  ),
  anchored_ranks AS (SELECT DISTINCT run_id, rank FROM anchors)
SELECT
  run_id, rank, rank AS source_rank, source_format, source_file, source_line, call_key,
  'anchor' AS role, call_key AS anchor_key, source_line AS anchor_line,
  'anchor' AS match_method, NULL AS unpaired_reason,
  op, group_key, comm_id, group_size, msg_bytes, seq, iteration, ts_ns, dur_ns, end_ns,
  timing_source, launch_ts_ns, host, pid, FALSE AS line_match
FROM anchors
WHERE NOT member
UNION ALL
SELECT
  s.run_id,
  s.rank,
  s.source_rank,
  s.source_format,
  s.source_file,
  s.source_line,
  s.call_key,
  CASE WHEN c.n_anchors = 1 AND c.op_ok AND c.size_ok THEN 'paired' ELSE 'unpaired' END AS role,
  CASE WHEN c.n_anchors = 1 AND c.op_ok AND c.size_ok THEN c.anchor_key END AS anchor_key,
  CASE WHEN c.n_anchors = 1 AND c.op_ok AND c.size_ok THEN c.anchor_line END AS anchor_line,
  CASE WHEN c.n_anchors = 1 AND c.op_ok AND c.size_ok THEN c.method END AS match_method,
  CASE
    WHEN r.rank IS NULL THEN 'no_anchor'
    WHEN c.n_anchors IS NULL THEN 'no_match'
    WHEN c.n_anchors > 1 THEN 'ambiguous'
    WHEN NOT c.op_ok THEN 'op_mismatch'
    WHEN NOT c.size_ok THEN 'size_mismatch'
  END AS unpaired_reason,
  s.op, s.group_key, s.comm_id, s.group_size, s.msg_bytes, s.seq, s.iteration, s.ts_ns,
  s.dur_ns, s.end_ns, s.timing_source, s.launch_ts_ns, s.host, s.pid,
  CASE WHEN c.n_anchors = 1 AND c.op_ok AND c.size_ok THEN c.line_match END AS line_match
FROM secondary_keys AS s
LEFT JOIN chosen AS c
  ON c.run_id = s.run_id AND c.call_key = s.call_key AND c.source_line = s.source_line AND c.rank = s.rank
  AND c.source_file = s.source_file
LEFT JOIN anchored_ranks AS r ON r.run_id = s.run_id AND r.rank = s.rank
