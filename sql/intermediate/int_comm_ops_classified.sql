-- Communication calls with their group of global ranks, node and traffic class (TP, PP, DP, EP, EmbTableSyn, other).
-- One row per communication call of every source (a rank logged by two tools has its calls twice, once per source; `counted` marks the one source per rank whose calls count for traffic, volume and message metrics: int_rank_primary_source; calls without a rank are counted). Timed calls of any source therefore keep their class. Traffic class from group membership matched to the parallel config (APNet'24 §3, model_spec §A.4); a call whose group members are unknown (e.g. the DeepSpeed comms logger: op and size, no group) by the model's predicted call signatures, the paper's own method (predicted_signatures: the classes the model predicts on the call's rank with the same op, the same group size when the call logs one, and a size within logged_size_tolerance of the call's; reduce_scatter compared as its whole input, msg_bytes x n, except DeepSpeed's, logged whole): one class -> that class (class_source signature), several -> other (signature_ambiguous), none -> the config's group-size rules; else inferred from group sizes and strides. Group: the communicator or process group the call names, else (a call on the default group of a trace with world size W, group_source inferred_default, group_size W) the W-rank world group; group_source keeps how the group was found so inferred rows stay marked. Point-to-point: send/recv is PP, except on a communicator whose known members all sit in one pipeline stage (an uneven all_to_all_single is grouped send/recv on the EP group, NCCL logs it so: EP when ep > 1, else other; class_source config_group) and without pipeline stages (EP when ep > 1); all_to_all is EP.
CREATE OR REPLACE VIEW int_comm_ops_classified(
  -- Training run identifier.
  run_id,
  -- Global rank that issued the call (null when the source does not say).
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
  -- Ranks in the communicator as logged (else the known group's size, else the group size of the one predicted signature the call matched: group_source signature).
  group_size,
  -- Caller's rank inside the communicator.
  group_rank,
  -- Peer or root rank as logged (inside the communicator for NCCL).
  peer_rank,
  -- Element type.
  dtype,
  -- Message size in bytes (the caller's buffer, source semantics).
  msg_bytes,
  -- Per-communicator sequence number.
  seq,
  -- Start, ns on the rank's timeline.
  ts_ns,
  -- Duration in ns (null when not logged or timing_source is none).
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
  -- NCCL algorithm when logged (RING, TREE, ...).
  algorithm,
  -- Group of global ranks the call ran on: 'world', the sorted member ranks joined by ',', or 'nccl:<hash>/<n>' / 'pg:<name>/<n>' when members are not all known; null when unknown.
  global_group,
  -- True when the members of global_group are known (see int_groups_members).
  group_known,
  -- Node index of rank (int_rank_nodes.node).
  node,
  -- TP | PP | DP | EP | EmbTableSyn | other.
  traffic_class,
  -- How traffic_class was decided: op (send/recv, all_to_all), config_group (known members + config; also send/recv inside one stage), signature (members unknown: the one class whose predicted (op, group size, size) the call matches), signature_ambiguous (several classes match: other), config_size (group size + config), inferred_group, inferred_size, unknown.
  class_source,
  -- Compact key of the call (stg_store__comm_ops.call_key).
  call_key,
  -- Clock of ts_ns/dur_ns: kernel, cpu_range, logged, none (no duration: no comm time, no bandwidth); null when the source does not say.
  timing_source,
  -- How group_size/global_group were found: logged (the record names its group), pg_config (the trace's process-group table), inferred_default (default group of a W-rank world: the world group), signature (group_size only: the matched predicted signature's; the members stay unknown), null when unknown.
  group_source,
  -- True for the calls that count once per logical call: the rank's primary source (int_rank_primary_source), or a call without a rank. Traffic, volume and message-count metrics filter on it; time metrics use whichever source times the call.
  counted,
  -- CPU time the call was issued, ns on the ts_ns clock (null when not recorded; stg_store__comm_ops).
  launch_ts_ns
) AS
-- Algorithm: the classification depends only on a call's shape (int_comm_op_shapes, computed
-- once per shape); each call's own values come from int_comm_ops_shaped, joined on shape_id
-- (a small build side: a derive stores the narrow per-call rows, not these 33 columns).
SELECT
  s.run_id,
  s.rank,
  s.host,
  s.source_format,
  s.source_file,
  c.source_line,
  s.op,
  s.comm_id,
  s.group_size,
  s.group_rank,
  c.peer_rank,
  s.dtype,
  s.msg_bytes,
  c.seq,
  c.ts_ns,
  c.dur_ns,
  c.ts_ns + c.dur_ns AS end_ns,
  c.algbw_gbps,
  c.busbw_gbps,
  c.iteration,
  s.is_traffic,
  s.pid,
  s.algorithm,
  s.global_group,
  s.group_known,
  s.node,
  s.traffic_class,
  s.class_source,
  c.call_key,
  s.timing_source,
  s.group_source,
  s.counted,
  c.launch_ts_ns
FROM int_comm_ops_shaped AS c
JOIN int_comm_op_shapes AS s ON s.shape_id = c.shape_id
