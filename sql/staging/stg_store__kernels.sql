-- GPU kernels, memcpys and memsets with their end time, for interval algebra on a rank's GPU timeline.
-- One row per GPU activity interval on one rank (as kernels). A kernel without a global rank takes the rank an NCCL log of the run names for the same process (host and pid from the file's trace_meta row when the file holds one process; as stg_store__comm_ops, whose lookup this repeats), so a timeline whose tool knows no rank (nsys without MPI data) still lands on its rank.
CREATE OR REPLACE VIEW stg_store__kernels(
  -- Training run identifier.
  run_id,
  -- Global rank whose GPU ran the activity (the source's, else the NCCL log's rank of the same
  -- host:pid).
  rank,
  -- GPU device index.
  device,
  -- CUDA stream id.
  stream,
  -- Kernel name (short form).
  name,
  -- compute | comm | memcpy | memset | other.
  category,
  -- For comm kernels, the normalised op the name tells.
  comm_op,
  -- Start, ns on the rank's timeline.
  ts_ns,
  -- Duration in ns (negative durations clamped to 0).
  dur_ns,
  -- End, ns (ts_ns + dur_ns).
  end_ns,
  -- Launch correlation id.
  correlation,
  -- Bytes moved when the source says.
  msg_bytes,
  -- Parser that produced the row.
  source_format,
  -- File the row came from.
  source_file,
  -- Event index in that file.
  source_line,
  -- CPU start of the runtime call that launched it, ns on the ts_ns clock (null when unknown,
  -- e.g. stores written before schema 1.4.0).
  launch_ts_ns,
  -- Step whose CPU window contains the launch (parser's HTA rule); null when launched outside
  -- every step or unknown (int_kernel_iteration completes it).
  iteration
) AS
WITH
  -- as stg_store__comm_ops.proc_ranks: processes with exactly one global rank in an NCCL log
  proc_ranks AS (
    SELECT run_id, split_part(host, '.', 1) AS short_host, pid, min(global_rank) AS global_rank
    FROM communicators
    WHERE host IS NOT NULL AND pid IS NOT NULL
    GROUP BY run_id, split_part(host, '.', 1), pid
    HAVING count(DISTINCT global_rank) = 1
  ),
  -- the one process of a rankless timeline file (trace_meta; its kernels may carry no pid)
  file_procs AS (
    SELECT run_id, source_file, min(pid) AS pid, min(split_part(host, '.', 1)) AS short_host
    FROM trace_meta
    WHERE rank IS NULL AND host IS NOT NULL AND pid IS NOT NULL
    GROUP BY run_id, source_file
    HAVING count(DISTINCT pid) = 1 AND count(DISTINCT host) = 1
  ),
  -- Algorithm: ranked rows pass through without a join; only rankless ones look their file up
  k AS (
    SELECT * FROM kernels WHERE rank IS NOT NULL
    UNION ALL BY NAME
    SELECT
      k.* EXCLUDE (rank),
      CASE WHEN coalesce(k.pid, f.pid) = f.pid THEN p.global_rank END AS rank
    FROM kernels AS k
    LEFT JOIN file_procs AS f ON f.run_id = k.run_id AND f.source_file = k.source_file
    LEFT JOIN proc_ranks AS p
      ON p.run_id = f.run_id AND p.short_host = f.short_host AND p.pid = f.pid
    WHERE k.rank IS NULL
  )
SELECT
  run_id,
  rank,
  device,
  stream,
  name,
  category,
  comm_op,
  ts_ns,
  greatest(dur_ns, 0) AS dur_ns,
  ts_ns + greatest(dur_ns, 0) AS end_ns,
  correlation,
  msg_bytes,
  source_format,
  source_file,
  source_line,
  launch_ts_ns,
  iteration
FROM k
