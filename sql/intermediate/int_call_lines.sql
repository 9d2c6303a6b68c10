-- The logical calls of int_calls as the traffic expansion reads them (issue 19): each call once, whatever the number of tools that logged it, with the best fields of its sources (msg_bytes, iteration: int_calls); an all-to-all that an NCCL log wrote as grouped Send/Recv lines (int_p2p_groups) is given back as its lines, each with its own peer and size, so the traffic matrix keeps the uneven per-peer bytes of the exchange while the call stays one call in int_calls; likewise an all-to-all whose own record gives its per-member sizes (stg_store__comm_ops.split_bytes: Kineto's record_param_comms 'In split size', an nsys all-to-all folded from its grouped Send ranges), or, when its own does not, a record int_call_sources paired with it (split_source says which), is given back as one send line per member of its group (its own block included: the flows keep it local). int_flows_expanded and int_flows_unranked (traffic_matrix, moe_nonuniform, predictability) read this.
-- One row per int_calls row, except an all-to-all of p2p_lines NCCL lines: one row per line (its Send and Recv lines; line op, peer, bytes); and an all-to-all with split_bytes on a group whose members are known: one send row per member (peer = the member's group rank, bytes = its split). On a run where no call gathers lines it is int_calls' rows and columns as they are, i.e. the counted calls of int_comm_ops_classified with the sizes/iterations a paired source gave where the anchor had none.
CREATE OR REPLACE VIEW int_call_lines(
  -- Training run identifier.
  run_id,
  -- Global rank that issued the call (null when no source says).
  rank,
  -- Host name as logged (anchor).
  host,
  -- Operating-system process id (anchor).
  pid,
  -- Parser of the anchor record.
  source_format,
  -- File of the line.
  source_file,
  -- Line (or event index) of the line: the call's own (also for each member line of a split all-to-all), or one line of an all-to-all group.
  source_line,
  -- Key of that line (stg_store__comm_ops.call_key; int_comm_op_iteration joins on it).
  call_key,
  -- Operation of the line: the call's, or send/recv for a line of an all-to-all group, send for a member line of a split all-to-all.
  op,
  -- Communicator identity as the anchor logged it.
  comm_id,
  -- Ranks in the communicator.
  group_size,
  -- Peer or root rank of the line (a group line's NCCL root: the peer in the communicator; a split member line: the member's group rank).
  peer_rank,
  -- Bytes of the line: the call's msg_bytes (int_calls), the group line's count x datatype, or the member's split bytes.
  msg_bytes,
  -- Iteration of the call (int_calls).
  iteration,
  -- True for calls that move data.
  is_traffic,
  -- NCCL algorithm when logged.
  algorithm,
  -- Group of global ranks the call ran on.
  global_group,
  -- TP | PP | DP | EP | EmbTableSyn | other.
  traffic_class,
  -- source_line of the logical call (int_calls.source_line) the line belongs to.
  call_line,
  -- Operation of the logical call (int_calls.op: all_to_all for a group's lines).
  call_op,
  -- Where a per-member size came from: the parser of the record whose lines or split gave it (nccl_debug for the lines of an NCCL all-to-all group; the anchor's own split_bytes, e.g. kineto or nsys, else a paired record's: kineto's In split size for a call the rank's counted NCCL log or Flight Recorder dump logged without per-peer sizes); null for a call booked as it is.
  split_source
) AS
WITH
  calls AS (
    SELECT
      run_id, rank, host, pid, source_format, source_file, source_line, call_key, op, comm_id,
      group_size, peer_rank, msg_bytes, iteration, is_traffic, algorithm, global_group,
      traffic_class, p2p_lines, group_known
    FROM int_calls
  ),
  grouped AS (SELECT * FROM int_p2p_groups),
  -- records of an all_to_all that give its per-member sizes
  split_records AS MATERIALIZED (
    SELECT run_id, call_key, split_bytes, source_format
    FROM stg_store__comm_ops
    WHERE split_bytes IS NOT NULL AND op = 'all_to_all'
  ),
  -- Algorithm: per logical call, the anchor's own split, else that of a record paired with it
  -- (int_call_sources: e.g. a Kineto trace's when the rank's counted NCCL log wrote the call
  -- as one AlltoAll line, or a Flight Recorder dump is counted), the first by format name
  chosen AS (
    SELECT run_id, to_key AS call_key, arg_min({'split': split_bytes, 'fmt': source_format}, pref) AS sp
    FROM (
      SELECT run_id, call_key AS to_key, split_bytes, source_format, '0' AS pref
      FROM split_records
      UNION ALL
      SELECT s.run_id, s.anchor_key, r.split_bytes, r.source_format, '1' || r.source_format
      FROM int_call_sources AS s
      JOIN split_records AS r ON r.run_id = s.run_id AND r.call_key = s.call_key
      WHERE s.role = 'paired' AND s.op = 'all_to_all'
    )
    GROUP BY run_id, to_key
  ),
  -- an all_to_all with per-member sizes: one line per member, group-rank order
  splits AS (
    SELECT
      run_id,
      call_key,
      unnest(range(len(parts)))::INTEGER AS peer_rank,
      unnest(parts)::BIGINT AS line_bytes,
      len(parts) AS n_parts,
      fmt AS split_source
    FROM (
      SELECT run_id, call_key, string_split(sp.split, ',') AS parts, sp.fmt AS fmt FROM chosen
    )
  )
SELECT
  c.run_id,
  c.rank,
  c.host,
  c.pid,
  c.source_format,
  c.source_file,
  coalesce(g.source_line, c.source_line) AS source_line,
  coalesce(g.call_key, c.call_key) AS call_key,
  coalesce(g.line_op, CASE WHEN sp.call_key IS NOT NULL THEN 'send' END, c.op) AS op,
  c.comm_id,
  c.group_size,
  CASE
    WHEN g.source_line IS NOT NULL THEN g.peer_rank
    WHEN sp.call_key IS NOT NULL THEN sp.peer_rank
    ELSE c.peer_rank
  END AS peer_rank,
  CASE
    WHEN g.source_line IS NOT NULL THEN g.line_bytes
    WHEN sp.call_key IS NOT NULL THEN sp.line_bytes
    ELSE c.msg_bytes
  END AS msg_bytes,
  c.iteration,
  c.is_traffic,
  c.algorithm,
  c.global_group,
  c.traffic_class,
  c.source_line AS call_line,
  c.op AS call_op,
  CASE
    WHEN g.source_line IS NOT NULL THEN c.source_format
    WHEN sp.call_key IS NOT NULL THEN sp.split_source
  END AS split_source
FROM calls AS c
LEFT JOIN grouped AS g
  ON c.p2p_lines IS NOT NULL AND g.run_id = c.run_id AND g.rank IS NOT DISTINCT FROM c.rank
  AND g.source_file = c.source_file AND g.head_line = c.source_line
  AND g.head_key = c.call_key
LEFT JOIN splits AS sp
  ON c.p2p_lines IS NULL AND c.op = 'all_to_all' AND c.group_known AND sp.run_id = c.run_id
  AND sp.call_key = c.call_key AND sp.n_parts = c.group_size
