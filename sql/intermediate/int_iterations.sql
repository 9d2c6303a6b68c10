-- Iteration boundaries per rank: marker windows where the rank has iteration markers, else iterations of its call sequence (source-given or detected from the recurring pattern).
-- One row per (run, rank, iteration). Sequence iterations run from their first call's start to the next iteration's first call (the last: to its last call's end); null times when the source has none (NCCL logs). One file per rank: the one with the most assigned calls. A sequence in which no period was detected gives no iteration (a trace without ProfilerStep and without a recurring pattern, e.g. one call, has none rather than a one-call 'iteration'). A null rank is a rank of its own (IS NOT DISTINCT FROM): a rank-less trace's marker iterations are not repeated as detected ones.
CREATE OR REPLACE VIEW int_iterations(
  -- Training run identifier.
  run_id,
  -- Global rank (null when the source does not say).
  rank,
  -- Iteration number (the marker's step number, the source's, or 0-based when detected).
  iteration,
  -- marker | source | detected.
  source,
  -- Start, ns (null when the source has no timestamps, e.g. NCCL debug logs).
  start_ns,
  -- End, ns (null without timestamps).
  end_ns,
  -- end_ns - start_ns.
  duration_ns,
  -- File the boundaries come from (the marker file, or the call log).
  source_file,
  -- First communication call's line in that file within the iteration.
  first_line,
  -- Last communication call's line in that file within the iteration.
  last_line,
  -- Communication calls assigned to the iteration (from the boundary file; markers: all files).
  ops
) AS
-- Algorithm: the calls are counted per (shape, iteration, method)
-- (int_comm_op_iteration_counts: integers, no per-call string) and the counts take their run,
-- rank and file from the shape after (int_comm_op_shape_keys, a few thousand rows): min, max,
-- count and any_value over the calls of a (run, rank, file, iteration) are the same over these
-- partial counts.
WITH per_shape AS (
  SELECT
    shape_id,
    iteration,
    method,
    min(first_ts) AS first_ts,
    max(last_end) AS last_end,
    min(first_line) AS first_line,
    max(last_line) AS last_line,
    sum(calls) AS ops,
    sum(lined_calls) AS lined_ops
  FROM int_comm_op_iteration_counts
  WHERE iteration IS NOT NULL AND (method <> 'detected' OR period IS NOT NULL)
  GROUP BY shape_id, iteration, method
),
assigned AS (
  SELECT k.run_id, k.rank, k.source_file, a.iteration, a.method, a.first_ts, a.last_end,
    a.first_line, a.last_line, a.ops, a.lined_ops
  FROM per_shape AS a
  JOIN int_comm_op_shape_keys AS k ON k.shape_id = a.shape_id
),
marked AS (
  SELECT
    w.run_id,
    w.rank,
    w.iteration,
    'marker' AS source,
    w.start_ns,
    w.end_ns,
    w.duration_ns,
    w.source_file,
    min(a.first_line) FILTER (WHERE a.source_file = w.source_file) AS first_line,
    max(a.last_line) FILTER (WHERE a.source_file = w.source_file) AS last_line,
    CAST(coalesce(sum(a.lined_ops), 0) AS BIGINT) AS ops
  FROM int_iterations_marked AS w
  LEFT JOIN assigned AS a
    ON w.run_id = a.run_id AND w.rank IS NOT DISTINCT FROM a.rank AND w.iteration = a.iteration
    AND a.method IN ('marker', 'source')
  GROUP BY ALL
),
unmarked AS (
  -- the boundary candidates counted per (rank, file, iteration) in one pass over the calls
  -- (a small table: the file choice and the iteration rows both read it)
  SELECT
    a.run_id,
    a.rank,
    a.source_file,
    a.iteration,
    any_value(a.method) AS source,
    min(a.first_ts) AS first_ts,
    max(a.last_end) AS last_end,
    min(a.first_line) AS first_line,
    max(a.last_line) AS last_line,
    CAST(sum(a.ops) AS BIGINT) AS ops
  FROM assigned AS a
  WHERE a.method IN ('source', 'detected')
    AND NOT EXISTS (
      SELECT 1
      FROM int_iterations_marked AS w
      WHERE w.run_id = a.run_id AND w.rank IS NOT DISTINCT FROM a.rank
    )
  GROUP BY a.run_id, a.rank, a.source_file, a.iteration
),
best_file AS (
  SELECT run_id, rank, source_file
  FROM unmarked
  GROUP BY run_id, rank, source_file
  QUALIFY row_number() OVER (PARTITION BY run_id, rank ORDER BY sum(ops) DESC, source_file) = 1
),
seq AS (
  SELECT u.run_id, u.rank, u.iteration, u.source, u.first_ts, u.last_end, u.source_file,
    u.first_line, u.last_line, u.ops
  FROM unmarked AS u
  JOIN best_file AS b
    ON u.run_id = b.run_id AND coalesce(u.rank, -1) = coalesce(b.rank, -1) AND u.source_file = b.source_file
),
seq_timed AS (
  SELECT
    run_id,
    rank,
    iteration,
    source,
    first_ts AS start_ns,
    coalesce(
      lead(first_ts) OVER (PARTITION BY run_id, rank ORDER BY iteration), last_end
    ) AS end_ns,
    source_file,
    first_line,
    last_line,
    ops
  FROM seq
)
SELECT run_id, rank, iteration, source, start_ns, end_ns, duration_ns, source_file, first_line, last_line, ops
FROM marked
UNION ALL
SELECT
  run_id, rank, iteration, source, start_ns, end_ns, end_ns - start_ns AS duration_ns,
  source_file, first_line, last_line, ops
FROM seq_timed
