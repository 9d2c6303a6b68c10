-- The NCCL Send/Recv lines that are one logical all-to-all (issue 19): PyTorch's all_to_all / all_to_all_single (uneven splits included) runs as one NCCL group of a Send to and a Recv from every member of the communicator, itself included, which an NCCL_DEBUG=INFO log writes as 2 x nranks `Send`/`Recv` lines under ONE opCount (`root` = the peer), while a Kineto trace or a Flight Recorder dump of the same process records one all_to_all of the whole send buffer. int_call_sources and int_calls take such a group as one call (op all_to_all, msg_bytes = the sum of its Send lines, the size Kineto's `In msg nelems` and the dump's input size give); its lines keep their per-peer sizes here and in comm_ops (int_flows_expanded expands the Send lines, so the traffic matrix keeps the uneven per-peer bytes).
-- One row per Send/Recv line of an nccl_debug record (int_comm_ops_classified, any rank, counted or not; read as its two parts: the call shapes, int_comm_op_shapes, and the calls' own values, int_comm_ops_shaped) whose group is an all-to-all: the lines of one (run_id, rank, source_file, host, pid, comm_id, seq = opCount) with exactly one Send to and one Recv from each of the group_size members (distinct peer_rank, group_size >= 2). Other grouped p2p (batch_isend_irecv of a pipeline: a Send and a Recv to different peers, or a group without the full exchange) stays one call per line and is not here; neither are lines without an opCount (seq null) or a communicator size.
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
-- Algorithm: the rule is checked on integers. The Send/Recv shapes of NCCL logs (a few thousand
-- at 1024 ranks) each get the number of their process communicator (run, rank, file, host, pid,
-- comm_id: what a group's lines share besides the opCount). Then the calls (int_comm_ops_shaped)
-- are read twice, narrow: (1) the Send lines' (communicator, opCount) counted (an exchange has
-- group_size of them; at 1024 ranks 0.7 M pipeline Sends among 18 M calls, one per opCount),
-- (2) the lines of the groups that reach the count (none on a run without all-to-all: the join's
-- build side is empty and DuckDB does not read the calls a second time). The names are joined
-- back from the shapes for the lines of an exchange only.
WITH
  -- int_comm_ops_classified's columns of a call that are its shape's (its header: the
  -- classification is per shape), for the NCCL Send/Recv shapes with a communicator and its size
  shapes AS MATERIALIZED (
    SELECT
      shape_id, run_id, rank, source_file, op, comm_id, group_size, msg_bytes,
      -- the shape's process communicator (nulls equal, as the groups' keys compare)
      dense_rank() OVER (ORDER BY run_id, rank, source_file, host, pid, comm_id) AS proc_comm
    FROM int_comm_op_shapes
    WHERE source_format = 'nccl_debug' AND op IN ('send', 'recv') AND comm_id IS NOT NULL
      AND group_size >= 2
  ),
  sized AS MATERIALIZED (
    SELECT s.proc_comm, c.seq
    FROM int_comm_ops_shaped AS c
    JOIN shapes AS s ON s.shape_id = c.shape_id
    WHERE s.op = 'send' AND c.seq IS NOT NULL
    GROUP BY s.proc_comm, c.seq
    HAVING count(*) >= min(s.group_size)
  ),
  lines AS MATERIALIZED (
    SELECT
      s.proc_comm, c.seq, s.shape_id, c.source_line, c.call_key, s.op, c.peer_rank, s.msg_bytes,
      s.group_size
    FROM int_comm_ops_shaped AS c
    JOIN shapes AS s ON s.shape_id = c.shape_id
    JOIN sized AS z ON z.proc_comm = s.proc_comm AND z.seq = c.seq
  ),
  candidates AS (
    -- an all-to-all exchange is a Send to and a Recv from every member, each once: first the
    -- counts ...
    SELECT
      l.proc_comm,
      l.seq,
      sum(l.msg_bytes) FILTER (WHERE l.op = 'send')::BIGINT AS send_bytes,
      sum(l.msg_bytes) FILTER (WHERE l.op = 'recv')::BIGINT AS recv_bytes,
      count(*) AS n_lines,
      arg_min({'line': l.source_line, 'key': l.call_key}, l.source_line) AS head
    FROM lines AS l
    SEMI JOIN sized AS z ON z.proc_comm = l.proc_comm AND z.seq = l.seq
    GROUP BY l.proc_comm, l.seq
    HAVING count(*) FILTER (WHERE l.op = 'send') = any_value(l.group_size)
      AND count(*) FILTER (WHERE l.op = 'recv') = any_value(l.group_size)
      AND min(l.group_size) = max(l.group_size)
  ),
  groups AS (
    -- ... then distinct peers, on the candidate groups' lines only
    SELECT c.*
    FROM candidates AS c
    JOIN (
      SELECT l.proc_comm, l.seq
      FROM lines AS l
      SEMI JOIN candidates AS c ON c.proc_comm = l.proc_comm AND c.seq = l.seq
      GROUP BY l.proc_comm, l.seq
      HAVING count(DISTINCT l.peer_rank) FILTER (WHERE l.op = 'send') = any_value(l.group_size)
        AND count(DISTINCT l.peer_rank) FILTER (WHERE l.op = 'recv') = any_value(l.group_size)
    ) AS d ON d.proc_comm = c.proc_comm AND d.seq = c.seq
  )
SELECT
  s.run_id,
  s.rank,
  s.source_file,
  l.source_line,
  l.call_key,
  l.op AS line_op,
  l.peer_rank,
  l.msg_bytes AS line_bytes,
  s.comm_id,
  l.seq,
  l.group_size,
  'all_to_all' AS group_op,
  g.send_bytes AS group_bytes,
  g.recv_bytes AS group_recv_bytes,
  g.n_lines AS group_lines,
  g.head.line AS head_line,
  g.head.key AS head_key
FROM lines AS l
JOIN groups AS g ON g.proc_comm = l.proc_comm AND g.seq = l.seq
JOIN shapes AS s ON s.shape_id = l.shape_id
