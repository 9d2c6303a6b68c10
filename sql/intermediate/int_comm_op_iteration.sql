-- Each communication call's iteration: as the source says (timeline parsers: the step containing the call's CPU launch), else by its launch inside the rank's iteration marker (HTA rule step.ts <= launch < step.ts + dur; the call's start when the launch is unknown), else detected from the call sequence.
-- One row per communication call (run, rank, source_file, source_line). The marker rule applies to a file when at least one of its calls falls inside a marker window of its rank; that file's calls outside every window get a null iteration (launched outside every step: counted by unattributed_work, never moved into a step). Other files use int_comm_ops_sequenced. A null rank is a rank of its own (IS NOT DISTINCT FROM), so a rank-less trace's calls meet its own markers.
CREATE OR REPLACE VIEW int_comm_op_iteration(
  -- Training run identifier.
  run_id,
  -- Global rank (null when the source does not say).
  rank,
  -- File the call came from.
  source_file,
  -- Line (or event index) in that file.
  source_line,
  -- Iteration of the call; null when it lies outside every iteration.
  iteration,
  -- How the iteration was found: source | marker | detected (an ENUM of these three).
  method,
  -- 1-based position of the call in its (run, rank, file) sequence (int_comm_ops_sequenced).
  pos,
  -- The call's token op:msg_bytes:group:peer (int_comm_ops_sequenced).
  token,
  -- Start of the call, ns (null when the source has no times).
  ts_ns,
  -- End of the call, ns.
  end_ns,
  -- Compact key of the call (stg_store__comm_ops.call_key).
  call_key,
  -- CPU issue time of the call, ns (null when not recorded).
  launch_ts_ns,
  -- Detected period of the call's sequence (calls per iteration; null when none was found).
  period,
  -- The call's shape (int_comm_ops_shaped.shape_id; its names: int_comm_op_shape_keys).
  shape_id,
  -- Sequence number as logged; null when none.
  seq,
  -- Peer or root rank as logged (inside the communicator for NCCL).
  peer_rank
) AS
WITH ops AS (
  -- every call once, with its detected iteration (int_comm_ops_sequenced has one row per call)
  SELECT * FROM int_comm_ops_sequenced
),
calls AS (
  -- the calls again, narrow (int_comm_ops_shaped, their names by shape): the sequenced calls
  -- are read once, above
  SELECT k.run_id, k.rank, k.source_file, c.source_line, c.ts_ns, c.launch_ts_ns
  FROM int_comm_ops_shaped AS c
  JOIN int_comm_op_shape_keys AS k ON k.shape_id = c.shape_id
),
by_marker AS (
  SELECT o.run_id, o.rank, o.source_file, o.source_line, min(w.iteration) AS iteration
  FROM calls AS o
  JOIN int_iterations_marked AS w
    ON o.run_id = w.run_id AND o.rank IS NOT DISTINCT FROM w.rank
    AND coalesce(o.launch_ts_ns, o.ts_ns) >= w.start_ns
    AND coalesce(o.launch_ts_ns, o.ts_ns) < w.end_ns
  GROUP BY o.run_id, o.rank, o.source_file, o.source_line
),
marker_files AS (
  SELECT DISTINCT run_id, rank, source_file FROM by_marker
)
SELECT
  o.run_id,
  o.rank,
  o.source_file,
  o.source_line,
  CASE
    WHEN o.source_iteration IS NOT NULL THEN o.source_iteration
    WHEN mf.source_file IS NOT NULL THEN bm.iteration
    ELSE o.iteration
  END AS iteration,
  -- an ENUM, written to Parquet as its dictionary's indices (a VARCHAR would be hashed into the
  -- file's dictionary call by call: at 256 ranks ~0.2 s CPU of the write, as much as no column)
  CAST(
    CASE
      WHEN o.source_iteration IS NOT NULL THEN 'source'
      WHEN mf.source_file IS NOT NULL THEN 'marker'
      ELSE 'detected'
    END AS ENUM ('source', 'marker', 'detected')
  ) AS method,
  o.pos,
  o.token,
  o.ts_ns,
  o.end_ns,
  o.call_key,
  o.launch_ts_ns,
  o.period,
  o.shape_id,
  o.seq,
  o.peer_rank
FROM ops AS o
LEFT JOIN marker_files AS mf
  ON o.run_id = mf.run_id AND o.rank IS NOT DISTINCT FROM mf.rank
  AND o.source_file = mf.source_file
LEFT JOIN by_marker AS bm
  ON o.run_id = bm.run_id AND o.rank IS NOT DISTINCT FROM bm.rank
  AND o.source_file = bm.source_file AND o.source_line = bm.source_line
