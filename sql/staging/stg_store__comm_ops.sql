-- Communication calls with a traffic-relevant flag and the message size in the bytes a rank moves.
-- One row per communication call seen on one rank (as comm_ops). Identity across sources (issue 19): a call without a global rank (nsys/Kineto/CSV timelines that know only host and pid) takes it from another source of the run that names the same process, the communicators an NCCL log's Init lines give (host compared by its first DNS label: nsys writes ault42.cscs.ch, NCCL ault42), marked rank_source 'inferred_process'; so does an NCCL Inspector call, or an nsys call of an export that gives no rank (NCCL >= 2.25 CommInitRank payloads), whose rank the parser could only guess from the process's largest communicator (rank_source 'inferred_largest_comm', kept where no other source names the process; an Inspector file's own communicators rows are never evidence, and nsys writes no global_rank for a guessed one); such a call that names no communicator also takes the process's communicator size when the process has exactly one (group_source 'inferred_process'). This one join sits in staging, not in an intermediate, because every object reads the rank from here and must read the same one.
CREATE OR REPLACE VIEW stg_store__comm_ops(
  -- Training run identifier.
  run_id,
  -- Global rank that issued the call (null when neither the source nor another source of the
  -- run's same host:pid says).
  rank,
  -- Host name as logged.
  host,
  -- Parser that produced the row.
  source_format,
  -- File the row came from.
  source_file,
  -- Line (or event index) in that file.
  source_line,
  -- Normalised operation (all_reduce, all_gather, send, ...).
  op,
  -- Communicator identity as logged.
  comm_id,
  -- Ranks in the communicator.
  group_size,
  -- Caller's rank inside the communicator.
  group_rank,
  -- Peer or root rank as logged.
  peer_rank,
  -- Element type.
  dtype,
  -- Message size in bytes (the caller's buffer).
  msg_bytes,
  -- Per-communicator sequence number.
  seq,
  -- Start, ns on the rank's timeline.
  ts_ns,
  -- Duration in ns (null when not logged, and for timing_source = 'none': no comm time).
  dur_ns,
  -- End, ns (ts_ns + dur_ns).
  end_ns,
  -- Algorithm bandwidth as logged, Gbit/s.
  algbw_gbps,
  -- Bus bandwidth as logged, Gbit/s.
  busbw_gbps,
  -- Iteration when the source says.
  iteration,
  -- True for calls that move data (not barriers or unknown ops).
  is_traffic,
  -- Operating-system process id.
  pid,
  -- Element count as logged (NCCL semantics per op).
  elem_count,
  -- NCCL algorithm (RING, TREE, NVLS, ...) when the source says.
  algorithm,
  -- NCCL protocol when the source says.
  protocol,
  -- Operation name exactly as the source wrote it.
  raw_op,
  -- hash(run_id, rank, source_file, source_line): a compact key of the call, so large joins
  -- between per-call objects compare one integer instead of the file path (join on it together
  -- with rank and source_line).
  call_key,
  -- Clock of ts_ns/dur_ns: kernel (the GPU kernel(s) the call launched) | cpu_range (the CPU
  -- op or range, only where no kernel can exist) | logged (the log's own duration) | none (no
  -- duration: no comm time, no bandwidth); null in stores written before schema 1.4.0.
  timing_source,
  -- CPU time the call was issued, ns on the ts_ns clock (null when not recorded): the time
  -- that attributes the call to an iteration (HTA rule step.ts <= launch < step.end).
  launch_ts_ns,
  -- Where group_size/comm_id came from: logged | pg_config | inferred_default |
  -- inferred_shapes | inferred_process (the process's one communicator size, above) | null.
  group_source,
  -- GPU kernels merged into the call (timing_source = kernel).
  kernel_count,
  -- Progress of the call when recorded: scheduled | started | completed (Flight Recorder);
  -- null for sources without a state and in stores written before schema 1.5.0.
  call_state,
  -- How rank is known: logged (the source names it; also every ranked row of a store written
  -- before schema 1.6.0) | option | inferred_peers | inferred_device (an NCCL log without Init lines,
  -- parsers/_nccl_rank_infer.py) | inferred_process (above) | inferred_largest_comm (NCCL
  -- Inspector: the rank on the file's largest communicator, no other source names the
  -- process) | null when rank is null.
  rank_source,
  -- all_to_all with per-member sizes: bytes sent to each member in group-rank order, comma-separated (comm_ops.split_bytes; Kineto In split size); null when even or not logged.
  split_bytes,
  -- The receive side of split_bytes: bytes received from each member in group-rank order (comm_ops.recv_split_bytes; Kineto Out split size, an nsys folded group's Recv sizes); null when even or not logged, and in stores before schema 1.9.0.
  recv_split_bytes,
  -- How op is known: null when the record names it; nvtx_group for an nsys all_to_all folded from the grouped ncclSend/ncclRecv ranges of one ncclGroupStart..ncclGroupEnd (comm_ops.op_source).
  op_source
) AS
WITH
  -- Global rank and communicator size of each process an NCCL log names (communicators),
  -- kept only when the process has one global rank; nranks only when it has one size.
  proc_ranks AS (
    SELECT
      run_id,
      split_part(host, '.', 1) AS short_host,
      pid,
      min(global_rank) AS global_rank,
      CASE WHEN count(DISTINCT nranks) = 1 THEN min(nranks) END AS nranks
    FROM communicators
    WHERE host IS NOT NULL AND pid IS NOT NULL
      -- an Inspector file's global ranks are themselves a guess (below), never evidence
      AND source_format IS DISTINCT FROM 'nccl_inspector'
    GROUP BY run_id, split_part(host, '.', 1), pid
    HAVING count(DISTINCT global_rank) = 1
  ),
  -- Algorithm: rows with a rank (nearly all) pass through without a join; only the rankless
  -- rows look their process up (a join over every row doubled this view's cost).
  ops AS (
    SELECT * EXCLUDE (rank_source), coalesce(rank_source, 'logged') AS rank_source
    FROM comm_ops
    WHERE rank IS NOT NULL AND rank_source IS DISTINCT FROM 'inferred_largest_comm'
    UNION ALL BY NAME
    -- rankless rows, and NCCL Inspector rows whose rank is the parser's guess (the rank on
    -- the file's largest communicator): the process's global rank from another source wins
    SELECT
      o.* EXCLUDE (rank, group_size, group_source, rank_source),
      coalesce(p.global_rank, o.rank) AS rank,
      CASE WHEN p.global_rank IS NOT NULL THEN 'inferred_process' ELSE o.rank_source END
        AS rank_source,
      coalesce(o.group_size, CASE WHEN o.comm_id IS NULL THEN p.nranks END) AS group_size,
      CASE
        WHEN o.group_size IS NULL AND o.comm_id IS NULL AND p.nranks IS NOT NULL
          THEN 'inferred_process'
        ELSE o.group_source
      END AS group_source
    FROM (
      -- the two cases apart, each a filter on one column, which a reader of Parquet files
      -- checks against each row group's statistics (no rankless row: nothing decoded); as one
      -- OR of two columns every column of every row was decoded first
      SELECT * FROM comm_ops WHERE rank IS NULL
      UNION ALL
      SELECT * FROM comm_ops WHERE rank IS NOT NULL AND rank_source = 'inferred_largest_comm'
    ) AS o
    LEFT JOIN proc_ranks AS p
      ON p.run_id = o.run_id AND p.pid = o.pid AND p.short_host = split_part(o.host, '.', 1)
  )
SELECT
  run_id,
  rank,
  host,
  source_format,
  source_file,
  source_line,
  op,
  comm_id,
  group_size,
  group_rank,
  peer_rank,
  dtype,
  msg_bytes,
  seq,
  ts_ns,
  -- a call timed 'none' has no duration even if a source wrote one
  CASE WHEN timing_source IS DISTINCT FROM 'none' THEN dur_ns END AS dur_ns,
  CASE WHEN timing_source IS DISTINCT FROM 'none' THEN ts_ns + dur_ns END AS end_ns,
  algbw_gbps,
  busbw_gbps,
  iteration,
  op NOT IN ('barrier', 'other') AS is_traffic,
  pid,
  "count" AS elem_count,
  algorithm,
  protocol,
  raw_op,
  hash(run_id, rank, source_file, source_line) AS call_key,
  timing_source,
  launch_ts_ns,
  group_source,
  kernel_count,
  call_state,
  rank_source,
  split_bytes,
  recv_split_bytes,
  op_source
FROM ops
