-- The NCCL Send/Recv lines that are one logical all-to-all (issue 19): PyTorch's all_to_all / all_to_all_single (uneven splits included) runs as one NCCL group of a Send to and a Recv from every member of the communicator, itself included, which an NCCL_DEBUG=INFO log writes as 2 x nranks `Send`/`Recv` lines under ONE opCount (`root` = the peer), while a Kineto trace or a Flight Recorder dump of the same process records one all_to_all of the whole send buffer. int_call_sources and int_calls take such a group as one call (op all_to_all, msg_bytes = the sum of its Send lines, the size Kineto's `In msg nelems` and the dump's input size give); its lines keep their per-peer sizes here and in comm_ops (int_flows_expanded expands the Send lines, so the traffic matrix keeps the uneven per-peer bytes).
-- One row per Send/Recv line of an nccl_debug record (int_comm_ops_classified, any rank, counted or not) whose group is an all-to-all: the lines of one (run_id, rank, source_file, host, pid, comm_id, seq = opCount) with exactly one Send to and one Recv from each of the group_size members (distinct peer_rank, group_size >= 2). Other grouped p2p (batch_isend_irecv of a pipeline: a Send and a Recv to different peers, or a group without the full exchange) stays one call per line and is not here; neither are lines without an opCount (seq null) or a communicator size.
CREATE OR REPLACE VIEW int_p2p_groups(
  -- Training run identifier.
  run_id,
  -- Global rank of the line (int_comm_ops_classified; null when no source names it).
  rank,
  -- File of the line.
  source_file,
  -- Line number of the Send/Recv line.
  source_line,
  -- The line's key (stg_store__comm_ops.call_key).
  call_key,
  -- send | recv (the line's own op).
  line_op,
  -- The line's peer (NCCL root: the peer's rank in the communicator).
  peer_rank,
  -- The line's size in bytes (count x datatype).
  line_bytes,
  -- Communicator as logged (NCCL comm pointer).
  comm_id,
  -- NCCL opCount shared by the group's lines (comm_ops.seq).
  seq,
  -- Ranks in the communicator (n): the group has n Send and n Recv lines.
  group_size,
  -- Operation of the logical call: all_to_all.
  group_op,
  -- Bytes the rank sends by the call: sum of the group's Send lines (its block to itself included).
  group_bytes,
  -- Bytes the rank receives: sum of the group's Recv lines.
  group_recv_bytes,
  -- Lines of the group (2 x group_size).
  group_lines,
  -- source_line of the group's first line: the logical call's line (int_calls.source_line).
  head_line,
  -- call_key of that line: the logical call's key (int_calls.call_key).
  head_key
) AS
WITH
  lines AS (
    SELECT
      run_id, rank, source_file, source_line, call_key, op, peer_rank, msg_bytes, comm_id,
      seq, group_size, host, pid
    FROM int_comm_ops_classified
    WHERE source_format = 'nccl_debug' AND op IN ('send', 'recv') AND seq IS NOT NULL
      AND comm_id IS NOT NULL AND group_size >= 2
  ),
  sized AS (
    -- an exchange has at least 2 x group_size lines: counted first on one integer key per
    -- group (a hash of its seven columns; two groups sharing a hash only add up, so no exchange
    -- is lost), and only the groups that reach it are grouped on their columns below (at 1024
    -- ranks millions of pipeline Send/Recv groups of one line each)
    SELECT l.*
    FROM lines AS l
    SEMI JOIN (
      SELECT hash(run_id, rank, source_file, host, pid, comm_id, seq) AS k
      FROM lines
      GROUP BY k
      HAVING count(*) >= 2 * min(group_size)
    ) AS g ON g.k = hash(l.run_id, l.rank, l.source_file, l.host, l.pid, l.comm_id, l.seq)
  ),
  candidates AS (
    -- Algorithm: an all-to-all exchange is a Send to and a Recv from every member, each once;
    -- first the counts (no DISTINCT aggregate, which keeps a hash set per group: at 1024 ranks
    -- millions of pipeline Send/Recv groups, none of them an exchange) ...
    SELECT
      run_id, rank, source_file, host, pid, comm_id, seq,
      sum(msg_bytes) FILTER (WHERE op = 'send')::BIGINT AS send_bytes,
      sum(msg_bytes) FILTER (WHERE op = 'recv')::BIGINT AS recv_bytes,
      count(*) AS n_lines,
      arg_min({'line': source_line, 'key': call_key}, source_line) AS head
    FROM sized
    GROUP BY run_id, rank, source_file, host, pid, comm_id, seq
    HAVING count(*) FILTER (WHERE op = 'send') = any_value(group_size)
      AND count(*) FILTER (WHERE op = 'recv') = any_value(group_size)
      AND min(group_size) = max(group_size)
  ),
  groups AS (
    -- ... then distinct peers, on the candidate groups' lines only
    SELECT c.*
    FROM candidates AS c
    JOIN (
      SELECT l.run_id, l.rank, l.source_file, l.host, l.pid, l.comm_id, l.seq
      FROM lines AS l
      SEMI JOIN candidates AS c
        ON c.run_id = l.run_id AND c.rank IS NOT DISTINCT FROM l.rank
        AND c.source_file = l.source_file AND c.host IS NOT DISTINCT FROM l.host
        AND c.pid IS NOT DISTINCT FROM l.pid AND c.comm_id = l.comm_id AND c.seq = l.seq
      GROUP BY l.run_id, l.rank, l.source_file, l.host, l.pid, l.comm_id, l.seq
      HAVING count(DISTINCT l.peer_rank) FILTER (WHERE l.op = 'send') = any_value(l.group_size)
        AND count(DISTINCT l.peer_rank) FILTER (WHERE l.op = 'recv') = any_value(l.group_size)
    ) AS d
      ON d.run_id = c.run_id AND d.rank IS NOT DISTINCT FROM c.rank
      AND d.source_file = c.source_file AND d.host IS NOT DISTINCT FROM c.host
      AND d.pid IS NOT DISTINCT FROM c.pid AND d.comm_id = c.comm_id AND d.seq = c.seq
  )
SELECT
  l.run_id,
  l.rank,
  l.source_file,
  l.source_line,
  l.call_key,
  l.op AS line_op,
  l.peer_rank,
  l.msg_bytes AS line_bytes,
  l.comm_id,
  l.seq,
  l.group_size,
  'all_to_all' AS group_op,
  g.send_bytes AS group_bytes,
  g.recv_bytes AS group_recv_bytes,
  g.n_lines AS group_lines,
  g.head.line AS head_line,
  g.head.key AS head_key
FROM lines AS l
JOIN groups AS g
  ON g.run_id = l.run_id AND g.rank IS NOT DISTINCT FROM l.rank
  AND g.source_file = l.source_file AND g.host IS NOT DISTINCT FROM l.host
  AND g.pid IS NOT DISTINCT FROM l.pid AND g.comm_id = l.comm_id AND g.seq = l.seq
