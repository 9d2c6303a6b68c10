-- Every call that takes part in cross-rank matching, with the logical instance it belongs to and its times on the run's aligned clock (issue 18 items 1 and 2): the one list rank_waits, stragglers, collective_instances and int_breakdown_calls read.
-- One row per row of int_instance_members (one lane per rank: its timeline format, else its counted source; collectives on a known group of more than one rank, p2p with a known peer; matching rules in int_instance_members' header). arrival_ns / finish_ns = ts_ns / end_ns minus the rank's clock offset (int_clock_offsets; 0 when the rank has none or is unaligned); raw times stay in ts_ns / end_ns.
CREATE OR REPLACE VIEW int_instance_calls(
  -- Training run identifier.
  run_id,
  -- Global rank that issued the call.
  rank,
  -- Host of the rank (null when unknown).
  host,
  -- Parser of the rank's lane (its timeline format, else its counted source).
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
  -- Iteration of the call; null outside every iteration.
  iteration,
  -- Global rank of the p2p peer; null for collectives.
  peer_global,
  -- Identity of the logical instance in the run: '<global_group>|<instance_seq>' for collectives, 'p2p:<src>-><dst>|<instance_seq>' for p2p (the k-th send src->dst with the k-th recv on dst from src).
  instance_key,
  -- Matched position of the instance in its group (or src->dst pair), the same on every member.
  instance_seq,
  -- seq (every member of the group logs a usable seq: matched by seq + sub-position) | order (k-th call of the group on each rank, within the iteration when every member's calls carry a step).
  match_method,
  -- True when the call is timed on the rank's timeline (ts/end/dur not null).
  timed,
  -- Clock of the timing: kernel | cpu_range | logged; null when untimed.
  timing_source,
  -- Start (the rank's post of the call), ns on the rank's raw clock; null when untimed.
  ts_ns,
  -- End, ns on the rank's raw clock; null when untimed.
  end_ns,
  -- Duration, ns; null when untimed.
  dur_ns,
  -- ts_ns - the rank's clock offset: the post on the run's aligned clock, ns.
  arrival_ns,
  -- end_ns - the rank's clock offset: the end on the run's aligned clock, ns.
  finish_ns,
  -- The rank's clock offset used, ns (int_clock_offsets.offset_ns; 0 when none).
  offset_ns,
  -- Error bound of that offset, ns (null when the rank is unaligned or untimed).
  offset_bound_ns
) AS
SELECT
  i.run_id,
  i.rank,
  i.host,
  i.source_format,
  i.source_file,
  i.source_line,
  i.op,
  i.traffic_class,
  i.global_group,
  i.group_size,
  i.msg_bytes,
  i.seq,
  i.iteration,
  i.peer_global,
  i.instance_key,
  i.instance_seq,
  i.match_method,
  i.timed,
  i.timing_source,
  i.ts_ns,
  i.end_ns,
  i.dur_ns,
  i.ts_ns - coalesce(o.offset_ns, 0) AS arrival_ns,
  i.end_ns - coalesce(o.offset_ns, 0) AS finish_ns,
  coalesce(o.offset_ns, 0)::BIGINT AS offset_ns,
  o.error_bound_ns AS offset_bound_ns
FROM int_instance_members AS i
LEFT JOIN int_clock_offsets AS o ON o.run_id = i.run_id AND o.rank = i.rank
