-- Cross-rank instance matching on raw clocks: every call of one lane per rank that takes part in a logical collective or p2p transfer, with the key of the instance it belongs to (issue 18 item 1; int_instance_calls adds the aligned times).
-- One row per call of a rank's lane that has a known group of more than one rank (collectives, barriers) or is a send/recv with a known peer. Lane: the rank's timeline format (the format of its comm_ops rows in int_comm_ops_timed) when it has one, else its counted source (int_comm_ops_classified.counted); every call of that format is a member, timed = the call is a row of int_comm_ops_timed (a kernel- or CPU-timed call; a Kineto call without a kernel on a GPU rank stays an untimed member). Order of a rank's calls: CPU issue time (launch_ts_ns), then start, then file and line (NCCL logs: line order; every rank issues a communicator's calls in the same order). Matching per (run, global_group): 'seq' when every lane seen on the group is of one format and logs a seq on every call that is not constant (more than one distinct value when the rank has more than one call): instance = (seq, k-th call of the rank with that seq on the group: NCCL opCount repeats inside ncclGroup); else 'order': the k-th call of the group on each rank, counted inside the iteration when every member's calls carry a source or marker iteration (int_comm_op_iteration.method source | marker; detected iterations are not used: their boundaries are positions, not steps, and may differ between the ranks of a cross-stage group), else over the whole run. instance_seq = dense rank of that key over the group's calls, so it is the same number on every member. p2p: the k-th send src->dst with the k-th recv on dst from src (inside the iteration when both ranks' calls carry one). Nothing is dropped or re-paired: a member missing a call, or logging another op or size, leaves its instance incomplete or mismatched (collective_instances flags it).
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
  lane AS (
    -- the rank's timeline format, else its counted source
    SELECT DISTINCT run_id, rank, source_format FROM timed
    UNION ALL
    SELECT p.run_id, p.rank, p.source_format
    FROM int_rank_primary_source AS p
    ANTI JOIN (SELECT DISTINCT run_id, rank FROM timed) AS t
      ON t.run_id = p.run_id AND t.rank = p.rank
  ),
  members AS MATERIALIZED (SELECT * FROM int_groups_members),
  calls AS (
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
      c.group_size,
      c.msg_bytes,
      c.seq,
      c.peer_rank,
      t.rank IS NOT NULL AS timed,
      t.timing_source,
      t.ts_ns,
      t.end_ns,
      t.dur_ns,
      ci.launch_ts_ns,
      coalesce(c.ts_ns, ci.ts_ns) AS order_ts,
      CASE
        WHEN t.rank IS NOT NULL THEN t.iteration
        WHEN ci.method <> 'detected' OR ci.period IS NOT NULL THEN ci.iteration
      END AS iteration,
      -- an iteration that names a training step (not a position in a detected period)
      ci.method IN ('source', 'marker') AS step_iteration
    FROM int_comm_ops_classified AS c
    SEMI JOIN lane AS l
      ON l.run_id = c.run_id AND l.rank = c.rank
      AND l.source_format IS NOT DISTINCT FROM c.source_format
    LEFT JOIN timed AS t
      ON t.run_id = c.run_id AND t.rank = c.rank AND t.source_file = c.source_file
      AND t.source_line = c.source_line
    LEFT JOIN int_comm_op_iteration AS ci
      ON ci.run_id = c.run_id AND ci.rank = c.rank AND ci.source_file = c.source_file
      AND ci.source_line = c.source_line
    LEFT JOIN int_rank_nodes AS n ON n.run_id = c.run_id AND n.rank = c.rank
    WHERE c.rank IS NOT NULL
  ),
  -- ---- collectives ----------------------------------------------------------------------
  coll AS (
    SELECT
      *,
      row_number() OVER (
        PARTITION BY run_id, global_group, rank
        ORDER BY launch_ts_ns, order_ts, source_file, source_line
      ) AS k_all,
      row_number() OVER (
        PARTITION BY run_id, global_group, rank, iteration
        ORDER BY launch_ts_ns, order_ts, source_file, source_line
      ) AS k_iter,
      row_number() OVER (
        PARTITION BY run_id, global_group, rank, seq
        ORDER BY launch_ts_ns, order_ts, source_file, source_line
      ) AS k_seq
    FROM calls
    WHERE global_group IS NOT NULL AND group_size > 1 AND op NOT IN ('send', 'recv')
  ),
  coll_rank AS (
    SELECT
      run_id,
      global_group,
      rank,
      any_value(source_format) AS source_format,
      count(*) = count(seq) AND (count(DISTINCT seq) > 1 OR count(*) = 1) AS seq_usable,
      bool_and(coalesce(step_iteration, FALSE) AND iteration IS NOT NULL) AS iter_usable
    FROM coll
    GROUP BY run_id, global_group, rank
  ),
  coll_method AS (
    SELECT
      run_id,
      global_group,
      CASE
        WHEN bool_and(seq_usable) AND count(DISTINCT source_format) = 1 THEN 'seq'
        ELSE 'order'
      END AS match_method,
      bool_and(iter_usable) AS within_iteration
    FROM coll_rank
    GROUP BY run_id, global_group
  ),
  coll_keyed AS (
    SELECT
      c.*,
      m.match_method,
      m.match_method = 'order' AND m.within_iteration AS within_iteration,
      CASE
        WHEN m.match_method = 'seq' THEN c.seq
        WHEN m.within_iteration THEN c.iteration
        ELSE 0
      END AS key_major,
      CASE
        WHEN m.match_method = 'seq' THEN c.k_seq
        WHEN m.within_iteration THEN c.k_iter
        ELSE c.k_all
      END AS key_minor
    FROM coll AS c
    JOIN coll_method AS m ON m.run_id = c.run_id AND m.global_group = c.global_group
  ),
  coll_out AS (
    SELECT
      *,
      NULL::INTEGER AS peer_global,
      NULL::INTEGER AS p2p_src,
      NULL::INTEGER AS p2p_dst,
      dense_rank() OVER (PARTITION BY run_id, global_group ORDER BY key_major, key_minor)
        AS instance_seq
    FROM coll_keyed
  ),
  -- ---- p2p ---------------------------------------------------------------------------------
  pairs AS (
    SELECT run_id, global_group, min(global_rank) AS lo, max(global_rank) AS hi
    FROM members
    WHERE group_size = 2
    GROUP BY run_id, global_group
  ),
  p2p_peer AS (
    SELECT
      c.*,
      coalesce(
        -- a two-rank group: the other member (whatever numbering peer_rank uses)
        CASE WHEN c.rank = pr.lo THEN pr.hi WHEN c.rank = pr.hi THEN pr.lo END,
        g.global_rank,
        CASE WHEN c.global_group IS NULL OR c.global_group = 'world' THEN c.peer_rank END
      ) AS peer_global
    FROM calls AS c
    LEFT JOIN pairs AS pr ON pr.run_id = c.run_id AND pr.global_group = c.global_group
    LEFT JOIN members AS g
      ON g.run_id = c.run_id AND g.global_group = c.global_group AND g.group_rank = c.peer_rank
    WHERE c.op IN ('send', 'recv')
  ),
  p2p AS (
    SELECT
      *,
      CASE WHEN op = 'send' THEN rank ELSE peer_global END AS p2p_src,
      CASE WHEN op = 'send' THEN peer_global ELSE rank END AS p2p_dst,
      row_number() OVER (
        PARTITION BY run_id, rank, op, peer_global
        ORDER BY launch_ts_ns, order_ts, source_file, source_line
      ) AS k_all,
      row_number() OVER (
        PARTITION BY run_id, rank, op, peer_global, iteration
        ORDER BY launch_ts_ns, order_ts, source_file, source_line
      ) AS k_iter
    FROM p2p_peer
    WHERE peer_global IS NOT NULL AND peer_global <> rank
  ),
  p2p_method AS (
    SELECT
      run_id,
      p2p_src,
      p2p_dst,
      bool_and(coalesce(step_iteration, FALSE) AND iteration IS NOT NULL) AS within_iteration
    FROM p2p
    GROUP BY run_id, p2p_src, p2p_dst
  ),
  p2p_out AS (
    SELECT
      p.* EXCLUDE (k_all, k_iter),
      'order' AS match_method,
      m.within_iteration,
      dense_rank() OVER (
        PARTITION BY p.run_id, p.p2p_src, p.p2p_dst
        ORDER BY
          CASE WHEN m.within_iteration THEN p.iteration ELSE 0 END,
          CASE WHEN m.within_iteration THEN p.k_iter ELSE p.k_all END
      ) AS instance_seq
    FROM p2p AS p
    JOIN p2p_method AS m
      ON m.run_id = p.run_id AND m.p2p_src = p.p2p_src AND m.p2p_dst = p.p2p_dst
  ),
  unioned AS (
    SELECT
      run_id, rank, host, source_format, source_file, source_line, op, traffic_class,
      global_group, group_size, msg_bytes, seq, iteration, peer_global, p2p_src, p2p_dst,
      global_group || '|' || instance_seq AS instance_key,
      instance_seq, match_method, within_iteration, timed, timing_source, ts_ns, end_ns, dur_ns
    FROM coll_out
    UNION ALL
    SELECT
      run_id, rank, host, source_format, source_file, source_line, op, traffic_class,
      global_group, 2 AS group_size, msg_bytes, seq, iteration, peer_global, p2p_src, p2p_dst,
      'p2p:' || p2p_src || '->' || p2p_dst || '|' || instance_seq AS instance_key,
      instance_seq, match_method, within_iteration, timed, timing_source, ts_ns, end_ns, dur_ns
    FROM p2p_out
  )
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
  group_size::INTEGER AS group_size,
  msg_bytes,
  seq,
  iteration,
  peer_global::INTEGER AS peer_global,
  p2p_src::INTEGER AS p2p_src,
  p2p_dst::INTEGER AS p2p_dst,
  instance_key,
  instance_seq::BIGINT AS instance_seq,
  match_method,
  coalesce(within_iteration, FALSE) AS within_iteration,
  timed,
  timing_source,
  ts_ns,
  end_ns,
  dur_ns
FROM unioned
