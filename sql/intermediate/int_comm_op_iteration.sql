-- Each communication call's iteration: as the source says (timeline parsers: the step containing the call's CPU launch), else by its launch inside the rank's iteration marker (HTA rule step.ts <= launch < step.ts + dur; the call's start when the launch is unknown), else detected from the call sequence.
-- One row per communication call (run, rank, source_file, source_line): int_comm_op_iteration_shaped (where the rule is computed, and which a derive stores narrow) with the call's run, rank and file from its shape (int_comm_op_shape_keys) and its token (comm_op_token of the shape's values and the peer). The marker rule applies to a file when at least one of its calls falls inside a marker window of its rank; that file's calls outside every window get a null iteration (launched outside every step: counted by unattributed_work, never moved into a step). Other files use int_comm_ops_sequenced. A null rank is a rank of its own (IS NOT DISTINCT FROM), so a rank-less trace's calls meet its own markers.
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
-- a projection of the narrow rows (a derive keeps this a view: its strings are its shape's)
SELECT
  k.run_id,
  k.rank,
  k.source_file,
  i.source_line,
  i.iteration,
  i.method,
  i.pos,
  comm_op_token(k.op, k.msg_bytes, k.group_size, k.comm_id, i.peer_rank) AS token,
  i.ts_ns,
  i.end_ns,
  i.call_key,
  i.launch_ts_ns,
  i.period,
  i.shape_id,
  i.seq,
  i.peer_rank
FROM int_comm_op_iteration_shaped AS i
JOIN int_comm_op_shape_keys AS k ON k.shape_id = i.shape_id
