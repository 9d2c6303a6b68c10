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
WITH
  ops AS (
    -- every source; counted = the rank's primary source (int_rank_primary_source)
    SELECT
      o.*,
      o.rank IS NULL OR coalesce(ps.source_format, '') = coalesce(o.source_format, '') AS counted
    FROM stg_store__comm_ops AS o
    LEFT JOIN int_rank_primary_source AS ps ON ps.run_id = o.run_id AND ps.rank = o.rank
  ),
  keys AS MATERIALIZED (SELECT * FROM int_groups_comm_keys),
  members AS MATERIALIZED (SELECT * FROM int_groups_members),
  nodes AS MATERIALIZED (SELECT * FROM int_rank_nodes),
  ck AS (SELECT * FROM keys WHERE key_kind = 'communicator'),
  pk AS (SELECT * FROM keys WHERE key_kind = 'process_group'),
  keyed AS (
    SELECT
      o.*,
      coalesce(
        ck.global_group,
        pk.global_group,
        -- a call of the whole world, named by size only or on the default group of the trace
        CASE WHEN o.group_size = w.world_size THEN 'world' END
      ) AS global_group,
      w.world_size,
      w.has_config,
      w.pp,
      w.tp,
      w.dp,
      w.ep
    FROM ops AS o
    LEFT JOIN int_run_world AS w ON w.run_id = o.run_id
    LEFT JOIN ck
      ON ck.run_id = o.run_id AND ck.comm_id = o.comm_id AND coalesce(ck.host, '') = coalesce(o.host, '')
      AND coalesce(ck.pid, -1) = coalesce(o.pid, -1) AND ck.global_rank = o.rank
    LEFT JOIN pk
      ON pk.run_id = o.run_id AND pk.comm_id = o.comm_id AND pk.group_size = o.group_size
  ),
  group_stats AS (
    SELECT
      m.run_id,
      m.global_group,
      count(*) AS n_members,
      count(DISTINCT n.stage) AS n_stage,
      count(DISTINCT n.dp_index) AS n_dp,
      count(DISTINCT n.tp_index) AS n_tp,
      min(n.stage) AS min_stage,
      max(n.stage) AS max_stage,
      min(m.global_rank) AS min_rank,
      max(m.global_rank) AS max_rank
    FROM members AS m
    LEFT JOIN nodes AS n ON n.run_id = m.run_id AND n.rank = m.global_rank
    GROUP BY m.run_id, m.global_group
  ),
  -- Signature match (the model's predicted calls of the rank), once per distinct call shape
  -- of the calls whose group members are unknown.
  shapes AS (
    SELECT DISTINCT k.run_id, k.rank, k.op, k.group_size, k.msg_bytes, k.source_format
    FROM keyed AS k
    LEFT JOIN group_stats AS g ON g.run_id = k.run_id AND g.global_group = k.global_group
    WHERE g.n_members IS NULL AND k.is_traffic AND k.rank IS NOT NULL AND k.msg_bytes IS NOT NULL
  ),
  sig AS (
    SELECT
      sh.run_id,
      sh.rank,
      sh.op,
      sh.group_size,
      sh.msg_bytes,
      sh.source_format,
      count(DISTINCT ps.traffic_class) AS n_classes,
      min(ps.traffic_class) AS traffic_class,
      CASE WHEN count(DISTINCT ps.group_size) = 1 THEN min(ps.group_size) END AS sig_group_size
    FROM shapes AS sh
    JOIN predicted_signatures AS ps
      ON ps.run_id = sh.run_id AND ps.rank = sh.rank AND ps.op = sh.op
      AND (sh.group_size IS NULL OR ps.group_size = sh.group_size)
      -- the model's reduce_scatter size is the whole input (n shards); NCCL-like sources log
      -- the shard, DeepSpeed the whole input
      AND abs(
        CASE
          WHEN sh.op = 'reduce_scatter' AND coalesce(sh.source_format, '') <> 'deepspeed_comms'
            THEN sh.msg_bytes * ps.group_size
          ELSE sh.msg_bytes
        END - ps.msg_bytes
      ) <= logged_size_tolerance(sh.source_format, sh.msg_bytes)
    GROUP BY ALL
  ),
  judged AS (
    SELECT
      k.*,
      g.n_members IS NOT NULL AS group_known,
      CASE WHEN g.n_members IS NULL AND s.n_classes = 1 THEN s.traffic_class END AS sig_class,
      s.sig_group_size,
      CASE
        -- p2p without pipeline stages: NCCL's all-to-all is grouped send/recv (EP)
        WHEN k.op IN ('send', 'recv') AND k.has_config AND k.pp = 1 AND k.ep > 1 THEN 'EP'
        WHEN k.op IN ('send', 'recv') AND k.has_config AND k.pp = 1 THEN 'other'
        -- p2p on a communicator inside one pipeline stage (an uneven all_to_all_single is
        -- grouped send/recv on the EP group: sample_traces/gpu_nccl_pp2ep2_1gpu) is not
        -- pipeline traffic
        WHEN k.op IN ('send', 'recv') AND k.has_config AND g.n_members > 1 AND g.n_stage = 1
          AND k.ep > 1 THEN 'EP'
        WHEN k.op IN ('send', 'recv') AND k.has_config AND g.n_members > 1 AND g.n_stage = 1
          THEN 'other'
        WHEN k.op IN ('send', 'recv') THEN 'PP'
        WHEN k.op = 'all_to_all' THEN 'EP'
        WHEN NOT k.is_traffic THEN 'other'
        -- config + known members
        WHEN k.has_config AND g.n_members > 1 AND g.n_stage = 1 AND g.n_dp = 1
          AND g.n_tp = g.n_members THEN 'TP'
        WHEN k.has_config AND g.n_members = 2 AND k.pp > 1 AND g.n_dp = 1 AND g.n_tp = 1
          AND g.min_stage = 0 AND g.max_stage = k.pp - 1 AND k.op = 'all_reduce'
          THEN 'EmbTableSyn'
        WHEN k.has_config AND g.n_members > 1 AND g.n_stage = 1 AND g.n_tp = 1
          AND g.n_dp = g.n_members THEN 'DP'
        WHEN k.has_config AND g.n_members IS NOT NULL THEN 'other'
        -- members unknown: the model's predicted signatures of the rank
        WHEN g.n_members IS NULL AND s.n_classes = 1 THEN s.traffic_class
        WHEN g.n_members IS NULL AND s.n_classes > 1 THEN 'other'
        -- config + group size only
        WHEN k.has_config AND k.group_size > 1 AND k.group_size = k.tp
          AND k.group_size <> k.dp THEN 'TP'
        WHEN k.has_config AND k.group_size > 1 AND k.group_size = k.dp
          AND k.group_size <> k.tp THEN 'DP'
        WHEN k.has_config AND k.group_size = 2 AND k.pp > 1 AND k.op = 'all_reduce'
          AND k.tp <> 2 AND k.dp <> 2 THEN 'EmbTableSyn'
        -- config, no group information at all (DeepSpeed logs): the only collective group
        WHEN k.has_config AND k.group_size IS NULL AND k.global_group IS NULL AND k.tp = 1
          AND k.dp > 1 THEN 'DP'
        WHEN k.has_config AND k.group_size IS NULL AND k.global_group IS NULL AND k.dp = 1
          AND k.tp > 1 THEN 'TP'
        WHEN k.has_config THEN 'other'
        -- no config: infer from the members' strides
        WHEN g.n_members > 1 AND g.n_members = k.world_size THEN 'DP'
        WHEN g.n_members > 1 AND g.max_rank - g.min_rank + 1 = g.n_members THEN 'TP'
        WHEN g.n_members > 1 THEN 'DP'
        WHEN g.n_members IS NULL AND k.group_size > 1 AND k.group_size = k.world_size
          THEN 'DP'
        ELSE 'other'
      END AS traffic_class,
      CASE
        WHEN k.op IN ('send', 'recv') AND k.has_config AND k.pp > 1 AND g.n_members > 1
          AND g.n_stage = 1 THEN 'config_group'
        WHEN k.op IN ('send', 'recv', 'all_to_all') THEN 'op'
        WHEN NOT k.is_traffic THEN 'unknown'
        WHEN k.has_config AND g.n_members IS NOT NULL THEN 'config_group'
        WHEN g.n_members IS NULL AND s.n_classes = 1 THEN 'signature'
        WHEN g.n_members IS NULL AND s.n_classes > 1 THEN 'signature_ambiguous'
        WHEN k.has_config THEN 'config_size'
        WHEN g.n_members > 1 THEN 'inferred_group'
        WHEN k.group_size > 1 AND k.group_size = k.world_size THEN 'inferred_size'
        ELSE 'unknown'
      END AS class_source
    FROM keyed AS k
    LEFT JOIN group_stats AS g ON g.run_id = k.run_id AND g.global_group = k.global_group
    LEFT JOIN sig AS s
      ON s.run_id = k.run_id AND s.rank = k.rank AND s.op = k.op
      AND s.group_size IS NOT DISTINCT FROM k.group_size AND s.msg_bytes = k.msg_bytes
      AND s.source_format IS NOT DISTINCT FROM k.source_format
  )
SELECT
  j.run_id,
  j.rank,
  j.host,
  j.source_format,
  j.source_file,
  j.source_line,
  j.op,
  j.comm_id,
  coalesce(
    j.group_size, n_members_of.n, CASE WHEN j.sig_class = j.traffic_class THEN j.sig_group_size END
  )::INTEGER AS group_size,
  j.group_rank,
  j.peer_rank,
  j.dtype,
  j.msg_bytes,
  j.seq,
  j.ts_ns,
  j.dur_ns,
  j.end_ns,
  j.algbw_gbps,
  j.busbw_gbps,
  j.iteration,
  j.is_traffic,
  j.pid,
  j.algorithm,
  j.global_group,
  j.group_known,
  n.node,
  j.traffic_class,
  j.class_source,
  j.call_key,
  j.timing_source,
  CASE
    WHEN j.group_size IS NULL AND n_members_of.n IS NULL AND j.sig_class = j.traffic_class
      AND j.sig_group_size IS NOT NULL THEN 'signature'
    ELSE j.group_source
  END AS group_source,
  j.counted,
  j.launch_ts_ns
FROM judged AS j
LEFT JOIN nodes AS n ON n.run_id = j.run_id AND n.rank = j.rank
LEFT JOIN (
  SELECT run_id, global_group, count(*) AS n FROM members GROUP BY ALL
) AS n_members_of
  ON n_members_of.run_id = j.run_id AND n_members_of.global_group = j.global_group
