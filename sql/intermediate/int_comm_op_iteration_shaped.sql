-- Each communication call's iteration (int_comm_op_iteration's rule) as the call's shape and the values that differ from call to call: the rows a derive stores.
-- One row per communication call (int_comm_op_iteration is this joined to int_comm_op_shape_keys on shape_id, for the call's run, rank and file, plus its token, whose text is a function of the shape and the peer: comm_op_token). Rule (int_comm_op_iteration's header): the source's iteration, else the launch inside a marker window of the rank (files with at least one call inside a window; that file's other calls get null), else the detected iteration (int_comm_ops_sequenced). Why narrow: the per-call strings run_id, rank, source_file and token are all functions of the shape (and peer); at 1024 ranks (18 M calls) writing them was about half of this table's write. Readers that group calls (int_iterations, int_onoff_signature, int_flows_expanded) group these rows per shape first and take the names from the shapes after.
CREATE OR REPLACE VIEW int_comm_op_iteration_shaped(
  -- The call's shape (int_comm_ops_shaped.shape_id; its names: int_comm_op_shape_keys).
  shape_id,
  -- Line (or event index) in the shape's source_file.
  source_line,
  -- Iteration of the call; null when it lies outside every iteration.
  iteration,
  -- How the iteration was found: source | marker | detected (an ENUM of these three).
  method,
  -- 1-based position of the call in its (run, rank, file) sequence (int_comm_ops_sequenced).
  pos,
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
  -- Sequence number as logged; null when none.
  seq,
  -- Peer or root rank as logged (inside the communicator for NCCL).
  peer_rank
) AS
-- Algorithm: a sequence (run, rank, file) is its integer key (int_comm_ops_sequenced.seq_key,
-- hash(run_id, rank, source_file), nulls included: a null rank is a rank of its own, as IS NOT
-- DISTINCT FROM), so the marker rule's joins and groups are on integers; the marker windows
-- meet the calls through their shapes (the windows joined to the shapes first: a few thousand
-- rows), and with no marker window (most runs) the join's empty side stops the calls' read.
WITH shapes AS MATERIALIZED (
  SELECT shape_id, run_id, rank, hash(run_id, rank, source_file) AS seq_key
  FROM int_comm_op_shape_keys
),
windows AS MATERIALIZED (
  -- each marker window of a rank beside each shape of that rank
  SELECT s.shape_id, s.seq_key, w.iteration, w.start_ns, w.end_ns
  FROM int_iterations_marked AS w
  JOIN shapes AS s ON s.run_id = w.run_id AND s.rank IS NOT DISTINCT FROM w.rank
),
by_marker AS MATERIALIZED (
  -- the calls read again, narrow (int_comm_ops_shaped); the sequenced calls are read once, below
  SELECT w.seq_key, c.source_line, min(w.iteration) AS iteration
  FROM int_comm_ops_shaped AS c
  JOIN windows AS w
    ON w.shape_id = c.shape_id
    AND coalesce(c.launch_ts_ns, c.ts_ns) >= w.start_ns
    AND coalesce(c.launch_ts_ns, c.ts_ns) < w.end_ns
  GROUP BY w.seq_key, c.source_line
),
marker_files AS MATERIALIZED (
  SELECT DISTINCT seq_key FROM by_marker
)
SELECT
  o.shape_id,
  o.source_line,
  CASE
    WHEN o.source_iteration IS NOT NULL THEN o.source_iteration
    WHEN mf.seq_key IS NOT NULL THEN bm.iteration
    ELSE o.iteration
  END AS iteration,
  -- an ENUM, written to Parquet as its dictionary's indices (a VARCHAR would be hashed into the
  -- file's dictionary call by call: at 256 ranks ~0.2 s CPU of the write, as much as no column)
  CAST(
    CASE
      WHEN o.source_iteration IS NOT NULL THEN 'source'
      WHEN mf.seq_key IS NOT NULL THEN 'marker'
      ELSE 'detected'
    END AS ENUM ('source', 'marker', 'detected')
  ) AS method,
  o.pos,
  o.ts_ns,
  o.end_ns,
  o.call_key,
  o.launch_ts_ns,
  o.period,
  o.seq,
  o.peer_rank
FROM int_comm_ops_sequenced AS o
LEFT JOIN marker_files AS mf ON mf.seq_key = o.seq_key
LEFT JOIN by_marker AS bm ON bm.seq_key = o.seq_key AND bm.source_line = o.source_line
