-- Cross-rank instance matching on raw clocks: every call of one lane per rank that takes part in a logical collective or p2p transfer, with the key of the instance it belongs to (issue 18 item 1; int_instance_calls adds the aligned times). The instance key is the macro instance_key (sql/macros/instance_key.sql).
-- One row per call of a rank's lane that has a known group of more than one rank (collectives, barriers) or is a send/recv with a known peer. Lane: the rank's timeline format (the format of its comm_ops rows in int_comm_ops_timed) when it has one, else its counted source (int_comm_ops_classified.counted); every call of that format is a member, timed = the call is a row of int_comm_ops_timed (a kernel- or CPU-timed call; a Kineto call without a kernel on a GPU rank stays an untimed member). Order of a rank's calls: CPU issue time (launch_ts_ns), then start, then file (by name) and line (NCCL logs: line order; every rank issues a communicator's calls in the same order). Matching per (run, global_group): 'seq' when every lane seen on the group is of one format and logs a seq on every call that is not constant (more than one distinct value when the rank has more than one call): instance = (seq, k-th call of the rank with that seq on the group: NCCL opCount repeats inside ncclGroup); else 'order': the k-th call of the group on each rank, counted inside the iteration when every member's calls carry a source or marker iteration (int_comm_op_iteration.method source | marker; detected iterations are not used: their boundaries are positions, not steps, and may differ between the ranks of a cross-stage group), else over the whole run. The lane's calls, their iterations, issue order, resolved peers and every other column come from int_instance_lane_calls; the matching itself is stored narrow in int_instance_matched (integers per call: the values a call shares with its shape are one row of int_instance_shapes, joined back here on shape_id) and this view adds instance_key. instance_seq = the key as one dense number, the same on every member: per (group, seq or iteration) the most calls any member has, summed over the earlier ones, plus the k (no sort of the group's calls); where no member repeats a seq on the group, the seq's dense rank in the group (seq - first seq + 1 when every member logs the same contiguous range of seqs, as NCCL's opCount per communicator). p2p: the k-th send src->dst with the k-th recv on dst from src (inside the iteration when both ranks' calls carry one). Nothing is dropped or re-paired: a member missing a call, or logging another op or size, leaves its instance incomplete or mismatched (collective_instances flags it).
CREATE OR REPLACE VIEW int_instance_members(
  -- Training run identifier.
  run_id,
  -- Global rank that issued the call.
  rank,
  -- Host of the rank (the call's host, else int_rank_nodes.host).
  host,
  -- Parser of the rank's lane.
  source_format,
  -- File the call came from.
  source_file,
  -- Line (or event index) in that file.
  source_line,
  -- Normalised operation.
  op,
  -- TP | PP | DP | EP | EmbTableSyn | other (int_comm_ops_classified).
  traffic_class,
  -- Group of global ranks of the call (int_comm_ops_classified.global_group); for p2p the logged group, may be null.
  global_group,
  -- Ranks the instance needs: the group's size for collectives, 2 for p2p.
  group_size,
  -- Message size in bytes (source semantics).
  msg_bytes,
  -- Sequence number as logged (NCCL opCount, Kineto Seq, ...); null when none.
  seq,
  -- Iteration of the call (int_comm_ops_timed for timed calls, else int_comm_op_iteration); null outside every iteration.
  iteration,
  -- Global rank of the p2p peer; null for collectives.
  peer_global,
  -- p2p: sending rank; null for collectives.
  p2p_src,
  -- p2p: receiving rank; null for collectives.
  p2p_dst,
  -- Identity of the logical instance in the run: '<global_group>|<instance_seq>' for collectives, 'p2p:<src>-><dst>|<instance_seq>' for p2p.
  instance_key,
  -- Matched position of the instance in its group (or its src->dst pair), the same on every member.
  instance_seq,
  -- seq (matched by logged sequence number + sub-position) | order (k-th call of the group, within the iteration when known).
  match_method,
  -- True when match_method = order counted positions inside iterations.
  within_iteration,
  -- True when the call is a row of int_comm_ops_timed (ts/end/dur on the rank's timeline clock).
  timed,
  -- Clock of the timing: kernel | cpu_range | logged (int_comm_ops_timed.timing_source); null when untimed.
  timing_source,
  -- Start (the rank's post of the call), ns on the rank's raw clock; null when untimed.
  ts_ns,
  -- End, ns on the rank's raw clock; null when untimed.
  end_ns,
  -- Duration, ns; null when untimed.
  dur_ns
) AS
-- the narrow matched calls (int_instance_matched) with their shape's values joined back
-- (int_instance_shapes: a few thousand rows at 1024 ranks, on one integer)
SELECT
  s.run_id,
  s.rank,
  s.host,
  s.source_format,
  s.source_file,
  m.source_line,
  s.op,
  s.traffic_class,
  s.global_group,
  CASE WHEN m.peer_global IS NULL THEN s.group_size ELSE 2 END::INTEGER AS group_size,
  s.msg_bytes,
  m.seq,
  m.iteration,
  m.peer_global,
  CASE
    WHEN m.peer_global IS NOT NULL THEN CASE WHEN s.op = 'send' THEN s.rank ELSE m.peer_global END
  END::INTEGER AS p2p_src,
  CASE
    WHEN m.peer_global IS NOT NULL THEN CASE WHEN s.op = 'send' THEN m.peer_global ELSE s.rank END
  END::INTEGER AS p2p_dst,
  instance_key(
    m.peer_global IS NOT NULL,
    s.global_group,
    CASE WHEN s.op = 'send' THEN s.rank ELSE m.peer_global END,
    CASE WHEN s.op = 'send' THEN m.peer_global ELSE s.rank END,
    m.instance_seq
  ) AS instance_key,
  m.instance_seq,
  CASE WHEN m.by_seq THEN 'seq' ELSE 'order' END AS match_method,
  m.within_iteration,
  m.timed,
  -- a timed call's timing is its own row's (int_instance_lane_calls.timing_source)
  CASE WHEN m.timed THEN s.timing_source END AS timing_source,
  m.ts_ns,
  m.ts_ns + m.dur_ns AS end_ns,
  m.dur_ns
FROM int_instance_matched AS m
JOIN int_instance_shapes AS s ON s.shape_id = m.shape_id
