-- Cross-rank instance matching, stored once (issue 18 item 1), narrow (issue 21): every member call of a logical collective or p2p transfer with its matched position and the values that differ from call to call; the values it shares with its shape (run, rank, host, lane format, file, op, class, group, size, timing clock) are one row of int_instance_shapes (shape_id), and int_instance_members joins them back and builds the instance_key string. The matching rules are int_instance_members' (see its header). Why narrow: at 1024 ranks derive stores this table as Parquet (18 M rows), and writing and reading back string columns per call was most of its cost (the run_id alone about a quarter of the write); the shape's id is the lane call's own (nothing hashed per call).
-- One row per row of int_instance_members (one per call of a rank's lane on a known group of more than one rank, or send/recv with a known peer). Inputs: int_instance_lane_calls (the lane's calls), int_instance_groups (each group's matching method), int_instance_shapes (per shape, the integers the windows sort instead of the run, op and file strings).
CREATE OR REPLACE VIEW int_instance_matched(
  -- The call's shape (int_instance_lane_calls.shape_id = int_instance_shapes.shape_id: its run, rank, host, lane format, file, op, class, group, group size, size, timing clock).
  shape_id,
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
  -- Duration, ns; null when untimed (the end is ts_ns + dur_ns, int_instance_lane_calls.end_ns).
  dur_ns
) AS
WITH
  -- per shape (a few thousand rows): integers that stand for the shape's strings in the windows
  -- and groupings below (dense numbers, equal where the strings are equal and in the same order:
  -- the file name is a tie-break of the issue order), and its group's matching method
  -- (int_instance_groups: none for a shape off a group). Why: the calls' windows then sort and
  -- carry integers only (the p2p window over run_id, op and file strings cost about three
  -- times as much)
  shape_keys AS MATERIALIZED (
    SELECT
      s.shape_id,
      dense_rank() OVER (ORDER BY s.run_id) AS run_no,
      dense_rank() OVER (ORDER BY s.run_id, s.gk) AS group_no,
      dense_rank() OVER (ORDER BY s.run_id, s.rank, s.op) AS rank_op_no,
      dense_rank() OVER (ORDER BY s.source_file) AS file_no,
      g.match_method,
      g.within_iteration,
      g.seq_unique,
      g.seq_first
    FROM int_instance_shapes AS s
    LEFT JOIN int_instance_groups AS g ON g.run_id = s.run_id AND g.gk = s.gk
  ),
  -- ---- collectives ----------------------------------------------------------------------
  -- the lane's calls (int_instance_lane_calls: in derive the stored narrow lane rows joined to
  -- their shapes, read by both branches, never copied), with what the matching reads and the
  -- per-call values the output keeps (the shape's values are its shape_id's), typed by their
  -- group's method
  coll_typed AS NOT MATERIALIZED (
    SELECT
      c.shape_id,
      k.group_no,
      c.rank,
      c.source_line,
      c.seq,
      c.iteration,
      c.launch_ts_ns,
      c.order_ts,
      k.file_no,
      c.timed,
      c.ts_ns,
      c.dur_ns,
      k.match_method = 'seq' AS by_seq,
      k.match_method = 'order' AND k.within_iteration AS within_iteration,
      -- seq matching where no member repeats a seq on the group: every k (below) is 1, so the
      -- instance is the seq's dense rank in the group (one window instead of the k-th call's
      -- window, the per-seq maxima and their running sum)
      k.match_method = 'seq' AND k.seq_unique AS seq_dense,
      k.seq_first,
      CASE
        WHEN k.match_method = 'seq' THEN c.seq
        WHEN k.within_iteration THEN c.iteration
        ELSE 0
      END AS key_major
    FROM int_instance_lane_calls AS c
    -- the group's method (int_instance_groups has a row for every group of these calls)
    JOIN shape_keys AS k ON k.shape_id = c.shape_id AND k.match_method IS NOT NULL
    -- send/recv whose peer cannot be named (a group whose members are not all known) are
    -- matched as calls of their group, so a missing partner still shows
    WHERE c.on_group AND (c.op NOT IN ('send', 'recv') OR c.peer_resolved IS NULL)
  ),
  coll_dense_range AS (
    -- the members' seqs are one contiguous range: the dense rank is the offset in it
    SELECT *, key_major - seq_first + 1 AS instance_seq
    FROM coll_typed
    WHERE seq_dense AND seq_first IS NOT NULL
  ),
  coll_dense AS (
    SELECT *, dense_rank() OVER (PARTITION BY group_no ORDER BY key_major) AS instance_seq
    FROM coll_typed
    WHERE seq_dense AND seq_first IS NULL
  ),
  coll_keyed AS (
    -- one window: the k-th call of the rank among its calls with the same key_major (seq:
    -- the logged seq; order: the iteration, or 0 over the whole run), in issue order
    SELECT
      *,
      row_number() OVER (
        PARTITION BY group_no, rank, key_major
        ORDER BY launch_ts_ns, order_ts, file_no, source_line
      ) AS key_minor
    FROM coll_typed
    WHERE NOT seq_dense
  ),
  -- instance_seq without sorting the group's calls: per (group, key_major) the most calls any
  -- member has, summed over the earlier key_majors, plus key_minor (dense, the same on every
  -- member)
  coll_base AS (
    SELECT
      group_no,
      key_major,
      sum(max(key_minor)) OVER (
        PARTITION BY group_no ORDER BY key_major ROWS UNBOUNDED PRECEDING
      ) - max(key_minor) AS base
    FROM coll_keyed
    GROUP BY group_no, key_major
  ),
  coll_out AS (
    SELECT c.*, b.base + c.key_minor AS instance_seq
    FROM coll_keyed AS c
    JOIN coll_base AS b
      ON b.group_no = c.group_no AND b.key_major IS NOT DISTINCT FROM c.key_major
  ),
  coll AS (
    SELECT
      shape_id, source_line, seq, iteration, NULL::INTEGER AS peer_global, instance_seq,
      by_seq, within_iteration, timed, ts_ns, dur_ns
    FROM coll_dense_range
    UNION ALL
    SELECT
      shape_id, source_line, seq, iteration, NULL::INTEGER AS peer_global, instance_seq,
      by_seq, within_iteration, timed, ts_ns, dur_ns
    FROM coll_dense
    UNION ALL
    SELECT
      shape_id, source_line, seq, iteration, NULL::INTEGER AS peer_global, instance_seq,
      by_seq, within_iteration, timed, ts_ns, dur_ns
    FROM coll_out
  ),
  -- ---- p2p ---------------------------------------------------------------------------------
  p2p_pre AS (
    SELECT
      c.shape_id,
      k.run_no,
      k.rank_op_no,
      k.file_no,
      c.source_line,
      c.seq,
      c.iteration,
      c.step_iteration,
      c.launch_ts_ns,
      c.order_ts,
      c.timed,
      c.ts_ns,
      c.dur_ns,
      c.peer_resolved AS peer_global,
      CASE WHEN c.op = 'send' THEN c.rank ELSE c.peer_resolved END AS p2p_src,
      CASE WHEN c.op = 'send' THEN c.peer_resolved ELSE c.rank END AS p2p_dst
    FROM int_instance_lane_calls AS c
    JOIN shape_keys AS k ON k.shape_id = c.shape_id
    -- (a resolved peer is a send's or a recv's: the op test lets the scan skip other shapes)
    WHERE c.op IN ('send', 'recv') AND c.peer_resolved IS NOT NULL AND c.peer_resolved <> c.rank
  ),
  p2p_method AS (
    SELECT
      run_no,
      p2p_src,
      p2p_dst,
      bool_and(coalesce(step_iteration, FALSE) AND iteration IS NOT NULL) AS within_iteration
    FROM p2p_pre
    GROUP BY run_no, p2p_src, p2p_dst
  ),
  p2p_keyed AS (
    -- the k-th send src->dst of the rank (its rank_op_no: run, rank and op), in issue order
    SELECT
      *,
      row_number() OVER (
        PARTITION BY rank_op_no, peer_global, key_major
        ORDER BY launch_ts_ns, order_ts, file_no, source_line
      ) AS key_minor
    FROM (
      SELECT
        p.*,
        m.within_iteration,
        CASE WHEN m.within_iteration THEN p.iteration ELSE 0 END AS key_major
      FROM p2p_pre AS p
      JOIN p2p_method AS m
        ON m.run_no = p.run_no AND m.p2p_src = p.p2p_src AND m.p2p_dst = p.p2p_dst
    )
  ),
  p2p_base AS (
    SELECT
      run_no,
      p2p_src,
      p2p_dst,
      key_major,
      sum(max(key_minor)) OVER (
        PARTITION BY run_no, p2p_src, p2p_dst ORDER BY key_major ROWS UNBOUNDED PRECEDING
      ) - max(key_minor) AS base
    FROM p2p_keyed
    GROUP BY run_no, p2p_src, p2p_dst, key_major
  ),
  p2p AS (
    SELECT
      p.shape_id, p.source_line, p.seq, p.iteration, p.peer_global,
      b.base + p.key_minor AS instance_seq, FALSE AS by_seq, p.within_iteration, p.timed,
      p.ts_ns, p.dur_ns
    FROM p2p_keyed AS p
    JOIN p2p_base AS b
      ON b.run_no = p.run_no AND b.p2p_src = p.p2p_src AND b.p2p_dst = p.p2p_dst
      AND b.key_major IS NOT DISTINCT FROM p.key_major
  ),
  keyed AS (
    SELECT * FROM coll
    UNION ALL
    SELECT * FROM p2p
  )
-- a call is matched at most once: the collective and p2p branches are disjoint
SELECT
  shape_id,
  source_line,
  seq,
  iteration,
  peer_global::INTEGER AS peer_global,
  instance_seq::BIGINT AS instance_seq,
  by_seq,
  coalesce(within_iteration, FALSE) AS within_iteration,
  coalesce(timed, FALSE) AS timed,
  ts_ns,
  dur_ns
FROM keyed
