-- The one timed communication list of every time mart (on_off, iteration_breakdown, bubble_ratio, on_off_timeline): each rank's communication intervals on one clock, with the iteration whose work they are.
-- One row per timed call or unclaimed comm kernel. A rank is on the GPU clock when it has comm kernels or kernel-timed calls (timing_source = kernel): its rows are its kernel-timed calls (of one source format: its kernels' format, int_kernel_iteration; else the one with the most) plus its comm kernels that no such call covers (a kernel-timed call IS its kernels, so a kernel inside a call's interval is not counted again; a comm kernel with no call, e.g. no launch link, still counts). CPU-clock calls of such a rank (cpu_range, or a pre-1.4.0 store's CPU-timed Kineto/nsys call, whose interval only times the enqueue) are left out: the kernel they launched stands for them. Any other rank uses the calls of its preferred source format (the format of its iteration markers, else the one with the most timed calls; a DeepSpeed log and a trace of the same rank are never both counted). Calls timed 'none' or without a duration are never rows (no comm time). iteration: the call's (int_comm_op_iteration: launch step) or the kernel's (int_kernel_iteration); null = outside every iteration (unattributed_work).
CREATE OR REPLACE VIEW int_comm_ops_timed(
  -- Training run identifier.
  run_id,
  -- Global rank.
  rank,
  -- Parser of the chosen source.
  source_format,
  -- File the call came from.
  source_file,
  -- Line (or event index) in that file.
  source_line,
  -- Normalised operation.
  op,
  -- Message size in bytes.
  msg_bytes,
  -- Ranks in the communicator.
  group_size,
  -- Peer rank as logged.
  peer_rank,
  -- Start, ns.
  ts_ns,
  -- Duration, ns (negative clamped to 0).
  dur_ns,
  -- End, ns.
  end_ns,
  -- Iteration whose work the row is (int_comm_op_iteration_shaped / int_kernel_iteration); null outside every iteration.
  iteration,
  -- comm_ops (a call) | kernels (a comm kernel no call covers).
  source,
  -- kernel | cpu_range | logged (comm_ops.timing_source; null for pre-1.4.0 calls); kernel for kernel rows.
  timing_source,
  -- CPU issue time, ns (null when unknown).
  launch_ts_ns,
  -- gpu (kernel intervals) | cpu (call intervals as the source timed them): the rank's clock.
  clock
) AS
WITH
  timed AS (
    SELECT *
    FROM stg_store__comm_ops
    WHERE ts_ns IS NOT NULL AND dur_ns IS NOT NULL AND rank IS NOT NULL
      AND timing_source IS DISTINCT FROM 'none'
  ),
  comm_kernels AS (
    SELECT * FROM int_kernel_iteration
    WHERE category = 'comm' AND rank IS NOT NULL AND ts_ns IS NOT NULL
  ),
  gpu_ranks AS (
    SELECT DISTINCT run_id, rank FROM comm_kernels
    UNION
    SELECT DISTINCT run_id, rank FROM timed WHERE timing_source = 'kernel'
  ),
  kernel_format AS (SELECT DISTINCT run_id, rank, source_format FROM int_kernel_iteration),
  gpu_format AS (
    -- the format of the rank's kernels (int_kernel_iteration: one per rank), else the most calls
    SELECT t.run_id, t.rank, t.source_format
    FROM timed AS t
    LEFT JOIN kernel_format AS kf
      ON kf.run_id = t.run_id AND kf.rank = t.rank
      AND kf.source_format IS NOT DISTINCT FROM t.source_format
    WHERE t.timing_source = 'kernel'
    GROUP BY t.run_id, t.rank, t.source_format
    QUALIFY row_number() OVER (
      PARTITION BY t.run_id, t.rank
      ORDER BY count(kf.rank) > 0 DESC, count(*) DESC, t.source_format
    ) = 1
  ),
  gpu_calls AS (
    SELECT t.*
    FROM timed AS t
    SEMI JOIN gpu_format AS f
      ON t.run_id = f.run_id AND t.rank = f.rank
      AND t.source_format IS NOT DISTINCT FROM f.source_format
    WHERE t.timing_source = 'kernel'
  ),
  covering AS (
    -- the kernel-timed call starting last at or before each comm kernel: it covers the kernel
    -- when it ends at or after it (a call's kernels lie inside its interval)
    SELECT k.run_id, k.rank, k.source_file, k.source_line
    FROM comm_kernels AS k
    ASOF JOIN gpu_calls AS c ON c.run_id = k.run_id AND c.rank = k.rank AND k.ts_ns >= c.ts_ns
    WHERE k.end_ns <= c.ts_ns + greatest(c.dur_ns, 0)
  ),
  free_kernels AS (
    SELECT k.*
    FROM comm_kernels AS k
    ANTI JOIN covering AS v
      ON v.run_id = k.run_id AND v.rank = k.rank AND v.source_file IS NOT DISTINCT FROM k.source_file
      AND v.source_line IS NOT DISTINCT FROM k.source_line
  ),
  cpu_timed AS (
    SELECT t.*
    FROM timed AS t
    ANTI JOIN gpu_ranks AS g ON g.run_id = t.run_id AND g.rank = t.rank
  ),
  marker_formats AS (
    SELECT DISTINCT run_id, rank, source_format FROM stg_store__markers WHERE kind = 'iteration'
  ),
  preferred AS (
    SELECT t.run_id, t.rank, t.source_format
    FROM cpu_timed AS t
    LEFT JOIN marker_formats AS m
      ON t.run_id = m.run_id AND t.rank = m.rank
      AND coalesce(t.source_format, '') = coalesce(m.source_format, '')
    GROUP BY t.run_id, t.rank, t.source_format
    QUALIFY row_number() OVER (
      PARTITION BY t.run_id, t.rank
      ORDER BY count(m.source_format) > 0 DESC, count(*) DESC, t.source_format
    ) = 1
  ),
  cpu_calls AS (
    SELECT t.*
    FROM cpu_timed AS t
    SEMI JOIN preferred AS p
      ON t.run_id = p.run_id AND t.rank = p.rank
      AND coalesce(t.source_format, '') = coalesce(p.source_format, '')
  ),
  calls AS (
    SELECT *, 'gpu' AS clock FROM gpu_calls
    UNION ALL BY NAME
    SELECT *, 'cpu' AS clock FROM cpu_calls
  )
SELECT
  t.run_id,
  t.rank,
  t.source_format,
  t.source_file,
  t.source_line,
  t.op,
  t.msg_bytes,
  t.group_size,
  t.peer_rank,
  t.ts_ns,
  greatest(t.dur_ns, 0) AS dur_ns,
  t.ts_ns + greatest(t.dur_ns, 0) AS end_ns,
  -- a sequence without a period makes no iteration (int_iterations), so its calls are in none
  CASE WHEN ci.method <> 'detected' OR ci.period IS NOT NULL THEN ci.iteration END AS iteration,
  'comm_ops' AS source,
  t.timing_source,
  t.launch_ts_ns,
  t.clock
FROM calls AS t
-- the call's own iteration row, found by its shape and line (the shape names the call's run,
-- rank and file: int_comm_op_shape_keys), from the narrow rows: their names are not needed
LEFT JOIN int_comm_op_iteration_shaped AS ci
  ON ci.shape_id = comm_op_shape_id(
    t.run_id, t.rank, t.host, t.source_format, t.source_file, t.op, t.comm_id, t.group_size,
    t.group_rank, t.dtype, t.msg_bytes, t.is_traffic, t.pid, t.algorithm, t.timing_source,
    t.group_source
  )
  AND ci.source_line = t.source_line
UNION ALL
SELECT
  run_id,
  rank,
  source_format,
  source_file,
  source_line,
  coalesce(comm_op, 'other') AS op,
  msg_bytes,
  NULL::INTEGER AS group_size,
  NULL::INTEGER AS peer_rank,
  ts_ns,
  dur_ns,
  end_ns,
  iteration,
  'kernels' AS source,
  'kernel' AS timing_source,
  launch_ts_ns,
  'gpu' AS clock
FROM free_kernels
