-- Cross-rank instance matching, stored once (issue 18 item 1), narrow (issue 21): every member call of a logical collective or p2p transfer with its matched position and the values that differ from call to call; the values it shares with its shape (host, lane format, file, op, class, group, size, timing clock) are one row of int_instance_shapes (shape_key), and int_instance_members joins them back and builds the instance_key string. The matching rules are int_instance_members' (see its header). Why narrow: at 1024 ranks derive stores this table as Parquet (18 M rows), and writing and reading back eight string columns per call was most of its cost.
-- One row per row of int_instance_members (one per call of a rank's lane on a known group of more than one rank, or send/recv with a known peer). Inputs: int_instance_lane_calls (the lane's calls), int_instance_groups (each group's matching method).
CREATE OR REPLACE VIEW int_instance_matched(
  -- Training run identifier.
  run_id,
  -- Global rank that issued the call.
  rank,
  -- instance_shape_key of the call's shape values (int_instance_shapes.shape_key: host, lane format, file, op, class, group, group size, size, timing clock).
  shape_key,
  -- Line (or event index) in the call's file.
  source_line,
  -- Sequence number as logged (NCCL opCount, Kineto Seq, ...); null when none.
  seq,
  -- Iteration of the call (int_comm_ops_timed for timed calls, else int_comm_op_iteration); null outside every iteration.
  iteration,
  -- Global rank of the p2p peer; null for collectives (and so the p2p flag: p2p_src, p2p_dst and the instance's group size 2 follow from it).
  peer_global,
  -- Matched position of the instance in its group (or its src->dst pair), the same on every member.
  instance_seq,
  -- True when matched by logged sequence number + sub-position (match_method seq), false by order.
  by_seq,
  -- True when match_method = order counted positions inside iterations.
  within_iteration,
  -- True when the call is a row of int_comm_ops_timed (ts/end/dur on the rank's timeline clock).
  timed,
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
  -- their shapes, read by both branches, never copied), with what the matching reads and the
  -- per-call values the output keeps (the shape's values become shape_key)
  coll_pre AS NOT MATERIALIZED (
    SELECT
      run_id,
      rank,
      gk,
      instance_shape_key(
        host, source_format, source_file, op, traffic_class, global_group, group_size, msg_bytes,
        timing_source
      ) AS shape_key,
      source_file,
      source_line,
      seq,
      iteration,
      launch_ts_ns,
      order_ts,
      timed,
      ts_ns,
      end_ns,
      dur_ns
    FROM int_instance_lane_calls
    -- send/recv whose peer cannot be named (a group whose members are not all known) are
    -- matched as calls of their group, so a missing partner still shows
    WHERE on_group AND (op NOT IN ('send', 'recv') OR peer_resolved IS NULL)
  ),
  coll_typed AS NOT MATERIALIZED (
    SELECT
      c.*,
      m.match_method = 'seq' AS by_seq,
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
    SELECT *, key_major - seq_first + 1 AS instance_seq
    FROM coll_typed
    WHERE seq_dense AND seq_first IS NOT NULL
  ),
  coll_dense AS (
    SELECT *, dense_rank() OVER (PARTITION BY run_id, gk ORDER BY key_major) AS instance_seq
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
    SELECT c.*, b.base + c.key_minor AS instance_seq
    FROM coll_keyed AS c
    JOIN coll_base AS b
      ON b.run_id = c.run_id AND b.gk = c.gk AND b.key_major IS NOT DISTINCT FROM c.key_major
  ),
  coll AS (
    SELECT
      run_id, rank, shape_key, source_line, seq, iteration, NULL::INTEGER AS peer_global,
      instance_seq, by_seq, within_iteration, timed, ts_ns, end_ns, dur_ns
    FROM coll_dense_range
    UNION ALL
    SELECT
      run_id, rank, shape_key, source_line, seq, iteration, NULL::INTEGER AS peer_global,
      instance_seq, by_seq, within_iteration, timed, ts_ns, end_ns, dur_ns
    FROM coll_dense
    UNION ALL
    SELECT
      run_id, rank, shape_key, source_line, seq, iteration, NULL::INTEGER AS peer_global,
      instance_seq, by_seq, within_iteration, timed, ts_ns, end_ns, dur_ns
    FROM coll_out
  ),
  -- ---- p2p ---------------------------------------------------------------------------------
  p2p_pre AS (
    SELECT
      run_id,
      rank,
      op,
      instance_shape_key(
        host, source_format, source_file, op, traffic_class, global_group, group_size, msg_bytes,
        timing_source
      ) AS shape_key,
      source_file,
      source_line,
      seq,
      iteration,
      step_iteration,
      launch_ts_ns,
      order_ts,
      timed,
      ts_ns,
      end_ns,
      dur_ns,
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
  p2p AS (
    SELECT
      p.run_id, p.rank, p.shape_key, p.source_line, p.seq, p.iteration, p.peer_global,
      b.base + p.key_minor AS instance_seq, FALSE AS by_seq, p.within_iteration, p.timed,
      p.ts_ns, p.end_ns, p.dur_ns
    FROM p2p_keyed AS p
    JOIN p2p_base AS b
      ON b.run_id = p.run_id AND b.p2p_src = p.p2p_src AND b.p2p_dst = p.p2p_dst
      AND b.key_major IS NOT DISTINCT FROM p.key_major
  ),
  keyed AS (
    SELECT * FROM coll
    UNION ALL
    SELECT * FROM p2p
  )
-- a call is matched at most once: the collective and p2p branches are disjoint
SELECT
  run_id,
  rank,
  shape_key,
  source_line,
  seq,
  iteration,
  peer_global::INTEGER AS peer_global,
  instance_seq::BIGINT AS instance_seq,
  by_seq,
  coalesce(within_iteration, FALSE) AS within_iteration,
  coalesce(timed, FALSE) AS timed,
  ts_ns,
  end_ns,
  dur_ns
FROM keyed
