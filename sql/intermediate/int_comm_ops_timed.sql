-- Timed communication calls of one source per rank (the rank's timeline), with their iteration; the base of time metrics when no comm kernels exist.
-- One row per call with ts_ns and dur_ns from the rank's preferred source format: the format of the rank's iteration markers, else the format with the most timed calls (so a DeepSpeed log and a Kineto trace of the same rank are not counted twice).
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
  -- Iteration (int_comm_op_iteration).
  iteration
) AS
WITH timed AS (
  SELECT *
  FROM stg_store__comm_ops
  WHERE ts_ns IS NOT NULL AND dur_ns IS NOT NULL AND rank IS NOT NULL
),
marker_formats AS (
  SELECT DISTINCT run_id, rank, source_format FROM stg_store__markers WHERE kind = 'iteration'
),
preferred AS (
  SELECT t.run_id, t.rank, t.source_format
  FROM timed AS t
  LEFT JOIN marker_formats AS m
    ON t.run_id = m.run_id AND t.rank = m.rank AND coalesce(t.source_format, '') = coalesce(m.source_format, '')
  GROUP BY t.run_id, t.rank, t.source_format
  QUALIFY row_number() OVER (
    PARTITION BY t.run_id, t.rank
    ORDER BY count(m.source_format) > 0 DESC, count(*) DESC, t.source_format
  ) = 1
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
  ci.iteration
FROM timed AS t
JOIN preferred AS p
  ON t.run_id = p.run_id AND t.rank = p.rank AND coalesce(t.source_format, '') = coalesce(p.source_format, '')
LEFT JOIN int_comm_op_iteration AS ci
  ON t.run_id = ci.run_id AND t.rank = ci.rank
  AND t.source_file = ci.source_file AND t.source_line = ci.source_line
