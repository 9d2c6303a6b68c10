-- One row per logical communication call per rank (issue 19): a call logged by several tools of one rank (NCCL debug log + Kineto trace + Flight Recorder + NCCL Inspector ...) is here once, carrying the best field of each source with the source it came from; comm_ops stays one row per source record. Traffic, volume, message-size and bandwidth metrics count and time these rows.
-- One row per counted call of int_comm_ops_classified (the rank's counted source, int_rank_primary_source, whose records anchor the calls; a call without a rank is its own call). An NCCL log's all-to-all written as grouped Send/Recv lines (int_p2p_groups) is one call: its first line, op all_to_all, msg_bytes the sum of its Send lines, peer_rank null, p2p_lines the lines it stands for (comm_ops and int_comm_ops_classified keep the lines). A call of a rank logged by one format only, or without a rank, keeps its own fields exactly (single-source runs give what they gave before); the others take the best field of the records int_call_sources paired with them. Fields: op, group, class and placement are the anchor's (int_comm_ops_classified); msg_bytes the anchor's, else the first logged by nccl_debug, flight_recorder, nccl_inspector, kineto, nsys, then any (bytes_source); ts_ns/dur_ns/end_ns one source's interval, chosen by its clock: kernel (the GPU kernels: Kineto, nsys, Inspector), then logged (Flight Recorder's CUDA-event duration, DeepSpeed's), then cpu_range, then a row that does not say; the anchor first within a clock, then kineto, nsys, nccl_inspector, flight_recorder (duration_source, timing_source); a call no source timed has none (no comm time, no bandwidth). pg_name: the PyTorch process-group name (comm_id of a flight_recorder, else kineto record of the call). size_conflict: the sources logged different sizes (DeepSpeed's reduce_scatter, logged as its whole input, is not compared; nor are the per-peer records paired with one line of an all-to-all group, int_call_sources.line_match, whose duration, when one times the call, is the longest of them); data quality lists them (mart call_sources).
CREATE OR REPLACE VIEW int_calls(
  -- Training run identifier.
  run_id,
  -- Global rank that issued the call (null when no source says).
  rank,
  -- Host name as logged (anchor).
  host,
  -- Parser of the anchor record (the rank's counted source).
  source_format,
  -- File of the anchor record.
  source_file,
  -- Line (or event index) of the anchor record.
  source_line,
  -- Normalised operation (all_reduce, all_gather, send, ...).
  op,
  -- Communicator identity as the anchor logged it.
  comm_id,
  -- Ranks in the communicator (int_comm_ops_classified).
  group_size,
  -- Caller's rank inside the communicator.
  group_rank,
  -- Peer or root rank as the anchor logged it.
  peer_rank,
  -- Element type.
  dtype,
  -- Message size in bytes (the caller's buffer, source semantics): see bytes_source.
  msg_bytes,
  -- The anchor's own sequence number.
  seq,
  -- Start, ns, on the clock of timing_source (duration_source's record).
  ts_ns,
  -- Duration, ns (null when no source timed the call).
  dur_ns,
  -- End, ns (ts_ns + dur_ns).
  end_ns,
  -- Algorithm bandwidth as the anchor logged it, Gbit/s.
  algbw_gbps,
  -- Bus bandwidth as the anchor logged it, Gbit/s.
  busbw_gbps,
  -- Iteration as the anchor's source says (comm_ops.iteration), else that of the record giving the duration (int_comm_op_iteration: e.g. an NCCL log's call timed by a Kineto kernel of ProfilerStep#N); null when none says.
  iteration,
  -- True for calls that move data (not barriers or unknown ops).
  is_traffic,
  -- Operating-system process id (anchor).
  pid,
  -- NCCL algorithm when logged (RING, TREE, ...).
  algorithm,
  -- Group of global ranks the call ran on (int_comm_ops_classified.global_group).
  global_group,
  -- True when the members of global_group are known.
  group_known,
  -- Node index of rank.
  node,
  -- TP | PP | DP | EP | EmbTableSyn | other (int_comm_ops_classified).
  traffic_class,
  -- How traffic_class was decided (int_comm_ops_classified.class_source).
  class_source,
  -- Key of the anchor record (stg_store__comm_ops.call_key).
  call_key,
  -- Clock of ts_ns/dur_ns: kernel, cpu_range, logged; none when no source timed the call; null when the timing record does not say.
  timing_source,
  -- How group_size/global_group were found (int_comm_ops_classified.group_source).
  group_source,
  -- Parser whose record gave msg_bytes.
  bytes_source,
  -- Parser whose record gave ts_ns/dur_ns (null when none timed the call).
  duration_source,
  -- CPU issue time, ns (the anchor's, else the timing record's; null when not recorded).
  launch_ts_ns,
  -- PyTorch process-group name (flight_recorder, else kineto comm_id of the call); null when no such source saw it.
  pg_name,
  -- Parser that gave pg_name.
  pg_name_source,
  -- Parsers that logged the call, sorted, comma-joined.
  sources,
  -- Number of parsers that logged the call.
  n_sources,
  -- True when the sources logged different sizes (see sizes).
  size_conflict,
  -- Every logged size of the call as format:bytes, sorted, comma-joined (conflicts only; null otherwise).
  sizes,
  -- NCCL Send/Recv lines this call stands for: 2 x group_size for an all-to-all logged as one group of Send/Recv lines under one opCount (int_p2p_groups; op all_to_all, msg_bytes their Send bytes, peer_rank null); null for a call of one record.
  p2p_lines
) AS
WITH
  grouped AS (SELECT * FROM int_p2p_groups),
  logical AS (
    -- the counted calls; an NCCL log's all-to-all group of Send/Recv lines is one call: its
    -- first line, op all_to_all, the group's send bytes, no single peer (int_p2p_groups)
    SELECT
      o.* REPLACE (
        coalesce(g.group_op, o.op) AS op,
        coalesce(g.group_bytes, o.msg_bytes) AS msg_bytes,
        CASE WHEN g.head_line IS NULL THEN o.peer_rank END AS peer_rank
      ),
      g.group_lines AS p2p_lines
    FROM int_comm_ops_classified AS o
    LEFT JOIN grouped AS g
      ON g.run_id = o.run_id AND g.rank IS NOT DISTINCT FROM o.rank
      AND g.source_file = o.source_file AND g.source_line = o.source_line
      AND g.call_key = o.call_key
    WHERE o.counted AND (g.head_line IS NULL OR g.head_line = o.source_line)
  ),
  records AS (
    SELECT
      *,
      CASE source_format
        WHEN 'nccl_debug' THEN 0
        WHEN 'flight_recorder' THEN 1
        WHEN 'nccl_inspector' THEN 2
        WHEN 'kineto' THEN 3
        WHEN 'nsys' THEN 4
        ELSE 5
      END AS bytes_rank,
      CASE
        WHEN timing_source = 'kernel' THEN 0
        WHEN timing_source = 'logged' THEN 10
        WHEN timing_source = 'cpu_range' THEN 20
        ELSE 30
      END + CASE
        WHEN role = 'anchor' THEN 0
        WHEN source_format = 'kineto' THEN 1
        WHEN source_format = 'nsys' THEN 2
        WHEN source_format = 'nccl_inspector' THEN 3
        WHEN source_format = 'flight_recorder' THEN 4
        ELSE 5
      END AS dur_rank
    FROM int_call_sources
    WHERE role IN ('anchor', 'paired')
  ),
  best AS (
    SELECT
      run_id,
      rank,
      anchor_key,
      anchor_line,
      arg_min(
        {'bytes': msg_bytes, 'fmt': source_format}, bytes_rank
      ) FILTER (WHERE msg_bytes IS NOT NULL AND line_match IS NOT TRUE) AS b,
      arg_min(
        {
          'ts': ts_ns, 'dur': greatest(dur_ns, 0), 'clock': timing_source,
          'fmt': source_format, 'iteration': iteration, 'launch': launch_ts_ns
        },
        -- ties (the per-peer records of an all-to-all, line_match): the longest, then the first
        [dur_rank, -greatest(dur_ns, 0), source_line]
      ) FILTER (WHERE dur_ns IS NOT NULL AND timing_source IS DISTINCT FROM 'none') AS d,
      arg_min(
        {'name': comm_id, 'fmt': source_format},
        CASE source_format WHEN 'flight_recorder' THEN 0 ELSE 1 END
      ) FILTER (WHERE source_format IN ('flight_recorder', 'kineto') AND comm_id IS NOT NULL) AS p,
      string_agg(DISTINCT source_format, ',' ORDER BY source_format) AS sources,
      count(DISTINCT source_format) AS n_sources,
      count(DISTINCT msg_bytes) FILTER (
        WHERE NOT (source_format = 'deepspeed_comms' AND op = 'reduce_scatter') AND line_match IS NOT TRUE
      ) > 1 AS size_conflict,
      string_agg(
        DISTINCT source_format || ':' || msg_bytes::VARCHAR, ',' ORDER BY source_format || ':' || msg_bytes::VARCHAR
      ) FILTER (WHERE line_match IS NOT TRUE) AS all_sizes
    FROM records
    GROUP BY run_id, rank, anchor_key, anchor_line
  )
SELECT
  o.run_id,
  o.rank,
  o.host,
  o.source_format,
  o.source_file,
  o.source_line,
  o.op,
  o.comm_id,
  o.group_size,
  o.group_rank,
  o.peer_rank,
  o.dtype,
  coalesce(o.msg_bytes, b.b.bytes) AS msg_bytes,
  o.seq,
  CASE WHEN b.anchor_key IS NULL THEN o.ts_ns ELSE b.d.ts END AS ts_ns,
  CASE WHEN b.anchor_key IS NULL THEN o.dur_ns ELSE b.d.dur END AS dur_ns,
  CASE WHEN b.anchor_key IS NULL THEN o.end_ns ELSE b.d.ts + b.d.dur END AS end_ns,
  o.algbw_gbps,
  o.busbw_gbps,
  coalesce(o.iteration, b.d.iteration) AS iteration,
  o.is_traffic,
  o.pid,
  o.algorithm,
  o.global_group,
  o.group_known,
  o.node,
  o.traffic_class,
  o.class_source,
  o.call_key,
  CASE
    WHEN b.anchor_key IS NULL THEN o.timing_source
    WHEN b.d IS NOT NULL THEN b.d.clock
    ELSE 'none'
  END AS timing_source,
  o.group_source,
  CASE WHEN o.msg_bytes IS NOT NULL THEN o.source_format ELSE b.b.fmt END AS bytes_source,
  CASE
    WHEN b.anchor_key IS NULL THEN CASE WHEN o.dur_ns IS NOT NULL THEN o.source_format END
    ELSE b.d.fmt
  END AS duration_source,
  coalesce(o.launch_ts_ns, b.d.launch) AS launch_ts_ns,
  b.p.name AS pg_name,
  b.p.fmt AS pg_name_source,
  coalesce(b.sources, o.source_format) AS sources,
  coalesce(b.n_sources, 1) AS n_sources,
  coalesce(b.size_conflict, FALSE) AS size_conflict,
  CASE WHEN b.size_conflict THEN b.all_sizes END AS sizes,
  o.p2p_lines
FROM logical AS o
LEFT JOIN best AS b
  ON b.run_id = o.run_id AND b.rank = o.rank AND b.anchor_key = o.call_key
  AND b.anchor_line = o.source_line
