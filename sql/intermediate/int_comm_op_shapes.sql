-- The distinct shapes of the communication calls, each classified: its group of global ranks, node and traffic class (TP, PP, DP, EP, EmbTableSyn, other), the classification of int_comm_ops_classified (whose header states the rules) computed once per shape instead of once per call.
-- One row per distinct (run_id, rank, host, source_format, source_file, op, comm_id, group_size, group_rank, dtype, msg_bytes, is_traffic, pid, algorithm, timing_source, group_source) of stg_store__comm_ops: every value the classification reads, and the call's other repeated values. Why: the classification depends on a call's shape only, and a 1024-rank run has 18 M calls but few shapes per rank; int_comm_ops_shaped gives each call its shape_id, int_comm_ops_classified joins the two back. shape_id is comm_op_shape_id of the shape's key (a hash the calls compute from their own values, so neither view reads the other); the distinct shapes and their ids are int_comm_op_shape_keys, where two distinct shapes with one id stop the query with an error (never a wrong join).
CREATE OR REPLACE VIEW int_comm_op_shapes(
  -- comm_op_shape_id of the shape's key (int_comm_op_shape_keys.shape_id: unique, checked there).
  shape_id,
  -- Training run identifier.
  run_id,
  -- Global rank that issued the calls (null when the source does not say).
  rank,
  -- Host name as logged.
  host,
  -- Parser that produced the rows.
  source_format,
  -- File the rows came from.
  source_file,
  -- Normalised operation (all_reduce, all_gather, send, ...).
  op,
  -- Communicator identity as logged.
  comm_id,
  -- Ranks in the communicator as logged (else the known group's size, else the group size of the one predicted signature the shape matched: group_source signature); int_comm_ops_classified.group_size.
  group_size,
  -- group_size as stg_store__comm_ops has it (a key of the shape).
  call_group_size,
  -- Caller's rank inside the communicator.
  group_rank,
  -- Element type.
  dtype,
  -- Message size in bytes (the caller's buffer, source semantics).
  msg_bytes,
  -- True for calls that move data (not barriers or unknown ops).
  is_traffic,
  -- Operating-system process id.
  pid,
  -- NCCL algorithm when logged (RING, TREE, ...).
  algorithm,
  -- Group of global ranks the calls ran on (int_comm_ops_classified.global_group).
  global_group,
  -- True when the members of global_group are known (see int_groups_members).
  group_known,
  -- Node index of rank (int_rank_nodes.node).
  node,
  -- TP | PP | DP | EP | EmbTableSyn | other (int_comm_ops_classified.traffic_class).
  traffic_class,
  -- How traffic_class was decided (int_comm_ops_classified.class_source).
  class_source,
  -- Clock of the calls' ts_ns/dur_ns: kernel, cpu_range, logged, none; null when the source does not say.
  timing_source,
  -- How group_size/global_group were found (int_comm_ops_classified.group_source).
  group_source,
  -- group_source as stg_store__comm_ops has it (a key of the shape).
  call_group_source,
  -- True for the calls that count once per logical call (int_comm_ops_classified.counted).
  counted
) AS
WITH
  -- the distinct shapes of the calls (int_comm_op_shape_keys: everything the classification
  -- reads, and the call's other repeated values, so that int_comm_ops_classified carries them
  -- per shape; with the shape's number of calls, and of timed calls, for the rank's primary
  -- source below; shape_id checked unique there)
  shape_rows AS (SELECT * FROM int_comm_op_shape_keys),
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
      -- placed as int_rank_primary_source counts it: a group with complete members, or the world
      coalesce(ck.members_complete, false) OR coalesce(pk.members_complete, false)
        OR o.group_size = w.world_size AS placed,
      w.world_size,
      w.has_config,
      w.pp,
      w.tp,
      w.dp,
      w.ep
    FROM shape_rows AS o
    LEFT JOIN int_run_world AS w ON w.run_id = o.run_id
    LEFT JOIN ck
      ON ck.run_id = o.run_id AND ck.comm_id = o.comm_id AND coalesce(ck.host, '') = coalesce(o.host, '')
      AND coalesce(ck.pid, -1) = coalesce(o.pid, -1) AND ck.global_rank = o.rank
    LEFT JOIN pk
      ON pk.run_id = o.run_id AND pk.comm_id = o.comm_id AND pk.group_size = o.group_size
  ),
  -- counted = the rank's primary source: int_rank_primary_source's rule (its header; the order
  -- is the macro primary_source_order, shared with it) on these
  -- shapes' call counts, so that this view does not read the calls, the groups and the world a
  -- second time through it (tests/sql/test_comm_op_shapes.py checks the two agree)
  per_format AS (
    SELECT
      run_id,
      rank,
      source_format,
      coalesce(sum(n_calls) FILTER (WHERE is_traffic), 0) AS traffic_calls,
      coalesce(sum(n_calls) FILTER (WHERE is_traffic AND placed), 0) AS placed_calls,
      coalesce(sum(n_timed) FILTER (WHERE is_traffic), 0) AS timed_calls,
      sum(n_calls) AS calls
    FROM keyed
    WHERE rank IS NOT NULL
    GROUP BY run_id, rank, source_format
  ),
  primary_source AS (
    SELECT run_id, rank, source_format
    FROM per_format
    QUALIFY row_number() OVER (
      PARTITION BY run_id, rank
      ORDER BY primary_source_order(source_format, traffic_calls, placed_calls, timed_calls, calls)
    ) = 1
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
      k.rank IS NULL OR coalesce(ps.source_format, '') = coalesce(k.source_format, '') AS counted,
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
    LEFT JOIN primary_source AS ps ON ps.run_id = k.run_id AND ps.rank = k.rank
    LEFT JOIN sig AS s
      ON s.run_id = k.run_id AND s.rank = k.rank AND s.op = k.op
      AND s.group_size IS NOT DISTINCT FROM k.group_size AND s.msg_bytes = k.msg_bytes
      AND s.source_format IS NOT DISTINCT FROM k.source_format
  )
SELECT
  j.shape_id,
  j.run_id,
  j.rank,
  j.host,
  j.source_format,
  j.source_file,
  j.op,
  j.comm_id,
  coalesce(
    j.group_size, n_members_of.n, CASE WHEN j.sig_class = j.traffic_class THEN j.sig_group_size END
  )::INTEGER AS group_size,
  j.group_size AS call_group_size,
  j.group_rank,
  j.dtype,
  j.msg_bytes,
  j.is_traffic,
  j.pid,
  j.algorithm,
  j.global_group,
  j.group_known,
  n.node,
  j.traffic_class,
  j.class_source,
  j.timing_source,
  CASE
    WHEN j.group_size IS NULL AND n_members_of.n IS NULL AND j.sig_class = j.traffic_class
      AND j.sig_group_size IS NOT NULL THEN 'signature'
    ELSE j.group_source
  END AS group_source,
  j.group_source AS call_group_source,
  j.counted
FROM judged AS j
LEFT JOIN nodes AS n ON n.run_id = j.run_id AND n.rank = j.rank
LEFT JOIN (
  SELECT run_id, global_group, count(*) AS n FROM members GROUP BY ALL
) AS n_members_of
  ON n_members_of.run_id = j.run_id AND n_members_of.global_group = j.global_group
