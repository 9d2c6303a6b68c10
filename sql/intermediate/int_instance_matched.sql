-- Cross-rank instance matching, stored once (issue 18 item 1): every member call of a logical collective or p2p transfer with every column int_instance_members gives but the instance_key string (one distinct string per instance), which that view builds from global_group or the p2p pair and instance_seq. The matching rules are int_instance_members' (see its header); this table holds them so that derive writes no 18 M-row column of distinct strings (int_instances groups the calls on an integer hash of the same identity).
-- One row per row of int_instance_members (one per call of a rank's lane on a known group of more than one rank, or send/recv with a known peer). Inputs: int_instance_lane_calls (it carries every column of the output: no join back to int_comm_ops_classified), int_instance_groups (each group's matching method).
CREATE OR REPLACE VIEW int_instance_matched(
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
WITH
  -- ---- collectives ----------------------------------------------------------------------
  -- the lane's calls (int_instance_lane_calls: in derive the stored narrow lane rows joined to
  -- their shapes, read by both branches, never copied), with every column of the output: no
  -- join back to the classified calls
  coll_pre AS NOT MATERIALIZED (
    SELECT *
    FROM int_instance_lane_calls
    -- send/recv whose peer cannot be named (a group whose members are not all known) are
    -- matched as calls of their group, so a missing partner still shows
    WHERE on_group AND (op NOT IN ('send', 'recv') OR peer_resolved IS NULL)
  ),
  coll_typed AS NOT MATERIALIZED (
    SELECT
      c.*,
      m.match_method,
      m.match_method = 'order' AND m.within_iteration AS within_iteration,
      -- seq matching where no member repeats a seq on the group: every k (below) is 1, so the
      -- instance is the seq's dense rank in the group (one window instead of the k-th call's
      -- window, the per-seq maxima and their running sum)
      m.match_method = 'seq' AND m.seq_unique AS seq_dense,
      m.seq_first,
      CASE
        WHEN m.match_method = 'seq' THEN c.seq
        WHEN m.within_iteration THEN c.iteration
        ELSE 0
      END AS key_major
    FROM coll_pre AS c
    JOIN int_instance_groups AS m ON m.run_id = c.run_id AND m.gk = c.gk
  ),
  coll_dense_range AS (
    -- the members' seqs are one contiguous range: the dense rank is the offset in it
    SELECT
      *,
      NULL::INTEGER AS peer_global,
      NULL::INTEGER AS p2p_src,
      NULL::INTEGER AS p2p_dst,
      key_major - seq_first + 1 AS instance_seq
    FROM coll_typed
    WHERE seq_dense AND seq_first IS NOT NULL
  ),
  coll_dense AS (
    SELECT
      *,
      NULL::INTEGER AS peer_global,
      NULL::INTEGER AS p2p_src,
      NULL::INTEGER AS p2p_dst,
      dense_rank() OVER (PARTITION BY run_id, gk ORDER BY key_major) AS instance_seq
    FROM coll_typed
    WHERE seq_dense AND seq_first IS NULL
  ),
  coll_keyed AS (
    -- one window: the k-th call of the rank among its calls with the same key_major (seq:
    -- the logged seq; order: the iteration, or 0 over the whole run), in issue order
    SELECT
      *,
      row_number() OVER (
        PARTITION BY run_id, gk, rank, key_major
        ORDER BY launch_ts_ns, order_ts, source_file, source_line
      ) AS key_minor
    FROM coll_typed
    WHERE NOT seq_dense
  ),
  -- instance_seq without sorting the group's calls: per (group, key_major) the most calls any
  -- member has, summed over the earlier key_majors, plus key_minor (dense, the same on every
  -- member)
  coll_base AS (
    SELECT
      run_id,
      gk,
      key_major,
      sum(max(key_minor)) OVER (
        PARTITION BY run_id, gk ORDER BY key_major ROWS UNBOUNDED PRECEDING
      ) - max(key_minor) AS base
    FROM coll_keyed
    GROUP BY run_id, gk, key_major
  ),
  coll_out AS (
    SELECT
      c.*,
      NULL::INTEGER AS peer_global,
      NULL::INTEGER AS p2p_src,
      NULL::INTEGER AS p2p_dst,
      b.base + c.key_minor AS instance_seq
    FROM coll_keyed AS c
    JOIN coll_base AS b
      ON b.run_id = c.run_id AND b.gk = c.gk AND b.key_major IS NOT DISTINCT FROM c.key_major
  ),
  -- ---- p2p ---------------------------------------------------------------------------------
  p2p_pre AS (
    SELECT
      *,
      peer_resolved AS peer_global,
      CASE WHEN op = 'send' THEN rank ELSE peer_resolved END AS p2p_src,
      CASE WHEN op = 'send' THEN peer_resolved ELSE rank END AS p2p_dst
    FROM int_instance_lane_calls
    WHERE peer_resolved IS NOT NULL AND peer_resolved <> rank
  ),
  p2p_method AS (
    SELECT
      run_id,
      p2p_src,
      p2p_dst,
      bool_and(coalesce(step_iteration, FALSE) AND iteration IS NOT NULL) AS within_iteration
    FROM p2p_pre
    GROUP BY run_id, p2p_src, p2p_dst
  ),
  p2p_keyed AS (
    SELECT
      *,
      row_number() OVER (
        PARTITION BY run_id, rank, op, peer_global, key_major
        ORDER BY launch_ts_ns, order_ts, source_file, source_line
      ) AS key_minor
    FROM (
      SELECT
        p.*,
        m.within_iteration,
        CASE WHEN m.within_iteration THEN p.iteration ELSE 0 END AS key_major
      FROM p2p_pre AS p
      JOIN p2p_method AS m
        ON m.run_id = p.run_id AND m.p2p_src = p.p2p_src AND m.p2p_dst = p.p2p_dst
    )
  ),
  p2p_base AS (
    SELECT
      run_id,
      p2p_src,
      p2p_dst,
      key_major,
      sum(max(key_minor)) OVER (
        PARTITION BY run_id, p2p_src, p2p_dst ORDER BY key_major ROWS UNBOUNDED PRECEDING
      ) - max(key_minor) AS base
    FROM p2p_keyed
    GROUP BY run_id, p2p_src, p2p_dst, key_major
  ),
  p2p_out AS (
    SELECT
      p.*,
      b.base + p.key_minor AS instance_seq,
      'order' AS match_method
    FROM p2p_keyed AS p
    JOIN p2p_base AS b
      ON b.run_id = p.run_id AND b.p2p_src = p.p2p_src AND b.p2p_dst = p.p2p_dst
      AND b.key_major IS NOT DISTINCT FROM p.key_major
  ),
  keyed AS (
    SELECT * FROM coll_dense_range
    UNION ALL BY NAME
    SELECT * FROM coll_dense
    UNION ALL BY NAME
    SELECT * FROM coll_out
    UNION ALL BY NAME
    SELECT * FROM p2p_out
  )
-- every column carried from the lane (a call is matched at most once: the collective and p2p
-- branches are disjoint)
SELECT
  run_id,
  rank,
  host,
  source_format,
  source_file,
  source_line,
  op,
  traffic_class,
  global_group,
  CASE WHEN p2p_src IS NULL THEN group_size ELSE 2 END::INTEGER AS group_size,
  msg_bytes,
  seq,
  iteration,
  peer_global::INTEGER AS peer_global,
  p2p_src::INTEGER AS p2p_src,
  p2p_dst::INTEGER AS p2p_dst,
  instance_seq::BIGINT AS instance_seq,
  match_method,
  coalesce(within_iteration, FALSE) AS within_iteration,
  coalesce(timed, FALSE) AS timed,
  timing_source,
  ts_ns,
  end_ns,
  dur_ns
FROM keyed
