-- Cross-rank instance matching on raw clocks: every call of one lane per rank that takes part in a logical collective or p2p transfer, with the key of the instance it belongs to (issue 18 item 1; int_instance_calls adds the aligned times).
-- One row per call of a rank's lane that has a known group of more than one rank (collectives, barriers) or is a send/recv with a known peer. Lane: the rank's timeline format (the format of its comm_ops rows in int_comm_ops_timed) when it has one, else its counted source (int_comm_ops_classified.counted); every call of that format is a member, timed = the call is a row of int_comm_ops_timed (a kernel- or CPU-timed call; a Kineto call without a kernel on a GPU rank stays an untimed member). Order of a rank's calls: CPU issue time (launch_ts_ns), then start, then file (by name) and line (NCCL logs: line order; every rank issues a communicator's calls in the same order). Matching per (run, global_group): 'seq' when every lane seen on the group is of one format and logs a seq on every call that is not constant (more than one distinct value when the rank has more than one call): instance = (seq, k-th call of the rank with that seq on the group: NCCL opCount repeats inside ncclGroup); else 'order': the k-th call of the group on each rank, counted inside the iteration when every member's calls carry a source or marker iteration (int_comm_op_iteration.method source | marker; detected iterations are not used: their boundaries are positions, not steps, and may differ between the ranks of a cross-stage group), else over the whole run. The lane's calls, their iterations, issue order and resolved peers come from int_instance_lane_calls (materialised on its own, read by each branch without a copy). instance_seq = the key as one dense number, the same on every member: per (group, seq or iteration) the most calls any member has, summed over the earlier ones, plus the k (no sort of the group's calls); where no member repeats a seq on the group, the seq's dense rank in the group (seq - first seq + 1 when every member logs the same contiguous range of seqs, as NCCL's opCount per communicator). p2p: the k-th send src->dst with the k-th recv on dst from src (inside the iteration when both ranks' calls carry one). Nothing is dropped or re-paired: a member missing a call, or logging another op or size, leaves its instance incomplete or mismatched (collective_instances flags it).
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
WITH
  timed AS MATERIALIZED (
    SELECT run_id, rank, source_format, source_file, source_line, ts_ns, end_ns, dur_ns,
      iteration, timing_source
    FROM int_comm_ops_timed
    WHERE source = 'comm_ops'
  ),
  -- ---- collectives ----------------------------------------------------------------------
  -- the lane's calls, narrow (int_instance_lane_calls, a table in derive: read by both
  -- branches, never copied); the output's other columns are joined from
  -- int_comm_ops_classified once at the end, on the call's integer keys
  coll_pre AS NOT MATERIALIZED (
    SELECT *
    FROM int_instance_lane_calls
    -- send/recv whose peer cannot be named (a group whose members are not all known) are
    -- matched as calls of their group, so a missing partner still shows
    WHERE on_group AND (op NOT IN ('send', 'recv') OR peer_resolved IS NULL)
  ),
  coll_rank AS (
    -- per (group, rank), from its calls counted per seq first (no DISTINCT aggregate, which
    -- keeps a hash set per group): seq_usable = every call has a seq and not all the same
    -- (or one call), seq_unique = no seq twice (a null seq counts as repeated: its group's
    -- calls are not distinct values)
    SELECT
      run_id,
      gk,
      rank,
      any_value(source_format) AS source_format,
      sum(n) = coalesce(sum(n) FILTER (WHERE seq IS NOT NULL), 0)
        AND (count(*) > 1 OR sum(n) = 1) AS seq_usable,
      count(*) FILTER (WHERE seq IS NOT NULL) = sum(n) AS seq_unique,
      -- every seq of the rank's range [seq_lo, seq_hi] once and no other
      coalesce(count(*) FILTER (WHERE seq IS NOT NULL) = sum(n) AND max(seq) - min(seq) + 1 = sum(n), FALSE)
        AS seq_contiguous,
      min(seq) AS seq_lo,
      max(seq) AS seq_hi,
      bool_and(iter_ok) AS iter_usable
    FROM (
      SELECT
        run_id,
        gk,
        rank,
        seq,
        count(*) AS n,
        any_value(source_format) AS source_format,
        bool_and(coalesce(step_iteration, FALSE) AND iteration IS NOT NULL) AS iter_ok
      FROM coll_pre
      GROUP BY run_id, gk, rank, seq
    )
    GROUP BY run_id, gk, rank
  ),
  coll_method AS (
    SELECT
      run_id,
      gk,
      CASE
        WHEN bool_and(seq_usable) AND count(DISTINCT source_format) = 1 THEN 'seq'
        ELSE 'order'
      END AS match_method,
      bool_and(iter_usable) AS within_iteration,
      bool_and(seq_unique) AS seq_unique,
      -- every member logs the same contiguous range of seqs: the dense rank of a seq in the
      -- group is seq - seq_first + 1 (no window)
      CASE
        WHEN bool_and(seq_contiguous) AND min(seq_lo) = max(seq_lo) AND min(seq_hi) = max(seq_hi)
          THEN min(seq_lo)
      END AS seq_first
    FROM coll_rank
    GROUP BY run_id, gk
  ),
  coll_typed AS NOT MATERIALIZED (
    SELECT
      c.run_id,
      c.rank,
      c.call_key,
      c.source_line,
      c.iteration,
      c.gk,
      c.launch_ts_ns,
      c.order_ts,
      c.fidx,
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
    JOIN coll_method AS m ON m.run_id = c.run_id AND m.gk = c.gk
  ),
  coll_dense_range AS (
    -- the members' seqs are one contiguous range: the dense rank is the offset in it
    SELECT
      run_id,
      rank,
      call_key,
      source_line,
      iteration,
      NULL::INTEGER AS peer_global,
      NULL::INTEGER AS p2p_src,
      NULL::INTEGER AS p2p_dst,
      key_major - seq_first + 1 AS instance_seq,
      match_method,
      within_iteration
    FROM coll_typed
    WHERE seq_dense AND seq_first IS NOT NULL
  ),
  coll_dense AS (
    SELECT
      run_id,
      rank,
      call_key,
      source_line,
      iteration,
      NULL::INTEGER AS peer_global,
      NULL::INTEGER AS p2p_src,
      NULL::INTEGER AS p2p_dst,
      dense_rank() OVER (PARTITION BY run_id, gk ORDER BY key_major) AS instance_seq,
      match_method,
      within_iteration
    FROM coll_typed
    WHERE seq_dense AND seq_first IS NULL
  ),
  coll_keyed AS (
    -- one window: the k-th call of the rank among its calls with the same key_major (seq:
    -- the logged seq; order: the iteration, or 0 over the whole run), in issue order
    SELECT
      run_id,
      rank,
      call_key,
      source_line,
      iteration,
      gk,
      key_major,
      match_method,
      within_iteration,
      row_number() OVER (
        PARTITION BY run_id, gk, rank, key_major
        ORDER BY launch_ts_ns, order_ts, fidx, source_line
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
      c.run_id,
      c.rank,
      c.call_key,
      c.source_line,
      c.iteration,
      NULL::INTEGER AS peer_global,
      NULL::INTEGER AS p2p_src,
      NULL::INTEGER AS p2p_dst,
      b.base + c.key_minor AS instance_seq,
      c.match_method,
      c.within_iteration
    FROM coll_keyed AS c
    JOIN coll_base AS b
      ON b.run_id = c.run_id AND b.gk = c.gk AND b.key_major IS NOT DISTINCT FROM c.key_major
  ),
  -- ---- p2p ---------------------------------------------------------------------------------
  p2p_pre AS (
    SELECT
      run_id,
      rank,
      call_key,
      source_line,
      op,
      iteration,
      step_iteration,
      launch_ts_ns,
      order_ts,
      fidx,
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
      run_id,
      rank,
      call_key,
      source_line,
      iteration,
      peer_global,
      p2p_src,
      p2p_dst,
      key_major,
      within_iteration,
      row_number() OVER (
        PARTITION BY run_id, rank, op, peer_global, key_major
        ORDER BY launch_ts_ns, order_ts, fidx, source_line
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
      p.run_id,
      p.rank,
      p.call_key,
      p.source_line,
      p.iteration,
      p.peer_global,
      p.p2p_src,
      p.p2p_dst,
      b.base + p.key_minor AS instance_seq,
      'order' AS match_method,
      p.within_iteration
    FROM p2p_keyed AS p
    JOIN p2p_base AS b
      ON b.run_id = p.run_id AND b.p2p_src = p.p2p_src AND b.p2p_dst = p.p2p_dst
      AND b.key_major IS NOT DISTINCT FROM p.key_major
  ),
  keyed AS (
    SELECT * FROM coll_dense_range
    UNION ALL
    SELECT * FROM coll_dense
    UNION ALL
    SELECT * FROM coll_out
    UNION ALL
    SELECT * FROM p2p_out
  )
-- the other columns joined once, on the call's integer keys (a call is matched at most once:
-- the collective and p2p branches are disjoint)
SELECT
  c.run_id,
  c.rank,
  coalesce(c.host, n.host) AS host,
  c.source_format,
  c.source_file,
  c.source_line,
  c.op,
  c.traffic_class,
  c.global_group,
  CASE WHEN k.p2p_src IS NULL THEN c.group_size ELSE 2 END::INTEGER AS group_size,
  c.msg_bytes,
  c.seq,
  k.iteration,
  k.peer_global::INTEGER AS peer_global,
  k.p2p_src::INTEGER AS p2p_src,
  k.p2p_dst::INTEGER AS p2p_dst,
  CASE
    WHEN k.p2p_src IS NULL THEN c.global_group || '|' || k.instance_seq
    ELSE 'p2p:' || k.p2p_src || '->' || k.p2p_dst || '|' || k.instance_seq
  END AS instance_key,
  k.instance_seq::BIGINT AS instance_seq,
  k.match_method,
  coalesce(k.within_iteration, FALSE) AS within_iteration,
  t.rank IS NOT NULL AS timed,
  t.timing_source,
  t.ts_ns,
  t.end_ns,
  t.dur_ns
FROM keyed AS k
JOIN int_comm_ops_classified AS c
  ON c.call_key = k.call_key AND c.run_id = k.run_id AND c.rank = k.rank
  AND c.source_line = k.source_line
LEFT JOIN timed AS t
  ON t.run_id = c.run_id AND t.rank = c.rank AND t.source_file = c.source_file
  AND t.source_line = c.source_line
LEFT JOIN int_rank_nodes AS n ON n.run_id = c.run_id AND n.rank = c.rank
