-- GPU kernels, memcpys and memsets with the iteration whose work they are: the step that launched them (HTA rule step.ts <= launch.ts < step.end), not the step whose window they happen to run in, so a GPU running behind the CPU keeps its work in the step that issued it.
-- One row per GPU activity of the rank's one GPU timeline: the kernels of one source format per rank (the format of the file its iteration markers come from, when it has kernels there; else the format with the most kernels), so a rank traced by both Kineto and nsys, each on its own clock, is never counted twice. iteration = the parser's (kernels.iteration, launch rule) when it gives one; else, when the launch time is known and the rank has marker windows, the marker window containing the launch (none: launched outside every step, iteration null, counted by unattributed_work). A kernel without a launch time on a rank where other kernels have one (e.g. launched before the profiler started recording runtime events, while the GPU still runs them) is in no iteration, as HTA drops kernels without a launch event: its start time would put a lagging GPU's old work into the wrong step. Only a rank with no launch time at all (stores before schema 1.4.0, sources without runtime events) falls back to the time rule: the iteration of int_iterations whose [start, end) contains the kernel's start. Nothing is clipped: a kernel belongs whole to one iteration or to none.
CREATE OR REPLACE VIEW int_kernel_iteration(
  -- Training run identifier.
  run_id,
  -- Global rank whose GPU ran the activity.
  rank,
  -- compute | comm | memcpy | memset | other.
  category,
  -- For comm kernels, the normalised op the name tells.
  comm_op,
  -- Kernel name (short form).
  name,
  -- CUDA stream id.
  stream,
  -- Start, ns on the rank's timeline.
  ts_ns,
  -- Duration, ns (>= 0).
  dur_ns,
  -- End, ns.
  end_ns,
  -- Bytes moved when the source says.
  msg_bytes,
  -- Parser that produced the row.
  source_format,
  -- File the row came from.
  source_file,
  -- Event index in that file.
  source_line,
  -- CPU start of the launching runtime call, ns (null when unknown).
  launch_ts_ns,
  -- Iteration whose work the activity is; null when launched (or, launch unknown, started) outside every iteration.
  iteration,
  -- source (parser's launch rule) | launch (launch inside a marker window) | time (start inside an iteration window) | null (outside every iteration).
  method
) AS
WITH
  win AS (
    SELECT run_id, coalesce(rank, -1) AS rk, iteration, source, start_ns, end_ns
    FROM int_iterations
    WHERE start_ns IS NOT NULL AND end_ns IS NOT NULL
  ),
  marker_ranks AS (SELECT DISTINCT run_id, rk FROM win WHERE source = 'marker'),
  marker_format AS (
    SELECT DISTINCT i.run_id, coalesce(i.rank, -1) AS rk, m.source_format
    FROM int_iterations AS i
    JOIN stg_store__markers AS m ON m.run_id = i.run_id AND m.source_file = i.source_file
    WHERE i.source = 'marker'
  ),
  kernel_format AS (
    SELECT k.run_id, coalesce(k.rank, -1) AS rk, k.source_format
    FROM stg_store__kernels AS k
    LEFT JOIN marker_format AS mf
      ON mf.run_id = k.run_id AND mf.rk = coalesce(k.rank, -1)
      AND mf.source_format IS NOT DISTINCT FROM k.source_format
    GROUP BY k.run_id, coalesce(k.rank, -1), k.source_format
    QUALIFY row_number() OVER (
      PARTITION BY k.run_id, coalesce(k.rank, -1)
      ORDER BY count(mf.rk) > 0 DESC, count(*) DESC, k.source_format
    ) = 1
  ),
  launch_ranks AS (
    SELECT DISTINCT run_id, coalesce(rank, -1) AS rk
    FROM stg_store__kernels
    WHERE launch_ts_ns IS NOT NULL
  ),
  k AS (
    SELECT
      k.*,
      coalesce(k.rank, -1) AS rk,
      k.launch_ts_ns IS NOT NULL AND mr.rk IS NOT NULL AS by_launch,
      CASE
        WHEN k.launch_ts_ns IS NOT NULL AND mr.rk IS NOT NULL THEN k.launch_ts_ns
        -- launch unknown where others are known: in no iteration
        WHEN k.launch_ts_ns IS NULL AND lr.rk IS NOT NULL THEN NULL
        ELSE k.ts_ns
      END AS t_attr
    FROM stg_store__kernels AS k
    SEMI JOIN kernel_format AS kf
      ON kf.run_id = k.run_id AND kf.rk = coalesce(k.rank, -1)
      AND kf.source_format IS NOT DISTINCT FROM k.source_format
    LEFT JOIN marker_ranks AS mr ON mr.run_id = k.run_id AND mr.rk = coalesce(k.rank, -1)
    LEFT JOIN launch_ranks AS lr ON lr.run_id = k.run_id AND lr.rk = coalesce(k.rank, -1)
  ),
  found AS (
    -- the latest window starting at or before the attribution time; it holds it when it has not ended
    SELECT k.*, CASE WHEN k.t_attr < w.end_ns THEN w.iteration END AS w_iteration
    FROM k
    ASOF LEFT JOIN win AS w ON w.run_id = k.run_id AND w.rk = k.rk AND k.t_attr >= w.start_ns
  )
SELECT
  run_id,
  rank,
  category,
  comm_op,
  name,
  stream,
  ts_ns,
  dur_ns,
  end_ns,
  msg_bytes,
  source_format,
  source_file,
  source_line,
  launch_ts_ns,
  coalesce(iteration, w_iteration) AS iteration,
  CASE
    WHEN iteration IS NOT NULL THEN 'source'
    WHEN w_iteration IS NULL THEN NULL
    WHEN by_launch THEN 'launch'
    ELSE 'time'
  END AS method
FROM found
