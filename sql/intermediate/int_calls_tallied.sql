-- The logical calls of int_calls counted per value of every column the call-level marts group, filter or list by (call_totals, message_sizes, call_sources, effective_bandwidth), so those marts read a few thousand rows once instead of every call four times.
-- One row per distinct (run_id, rank, source_format, op, traffic_class, is_traffic, msg_bytes, group_size, group_source, global_group, timing_source, bytes_source, duration_source, timed, bw_per_call, multi_source, size_conflict) of int_calls, with the number of its calls: summing `calls` over any of these columns gives what counting int_calls rows gives. Durations and logged bandwidths are not here (per call): effective_bandwidth reads the calls marked bw_per_call from int_calls itself. Why: a call that no other source paired with (no int_call_sources anchor row) and that is no NCCL all-to-all group (int_p2p_groups) is in int_calls exactly as its counted int_comm_ops_classified row (int_calls' header), i.e. its shape (int_comm_op_shapes) and its own duration and bandwidth (int_comm_ops_shaped); such calls are counted per shape_id first (one integer per call, 18 M at 1024 ranks), the others are taken from int_calls as they are.
CREATE OR REPLACE VIEW int_calls_tallied(
  -- Training run identifier.
  run_id,
  -- Global rank that issued the calls (null when no source says).
  rank,
  -- Parser of the anchor record (int_calls.source_format).
  source_format,
  -- Normalised operation (int_calls.op).
  op,
  -- TP | PP | DP | EP | EmbTableSyn | other.
  traffic_class,
  -- True for calls that move data.
  is_traffic,
  -- Message size in bytes (int_calls.msg_bytes).
  msg_bytes,
  -- Ranks in the communicator (int_calls.group_size).
  group_size,
  -- How group_size/global_group were found (int_calls.group_source).
  group_source,
  -- Group of global ranks the calls ran on.
  global_group,
  -- Clock of the calls' durations (int_calls.timing_source).
  timing_source,
  -- Parser whose record gave msg_bytes (int_calls.bytes_source).
  bytes_source,
  -- Parser whose record gave the duration (int_calls.duration_source).
  duration_source,
  -- True when the calls have a duration (int_calls.dur_ns is not null).
  timed,
  -- True for the calls whose bandwidth effective_bandwidth computes one by one: a duration > 0 on a clock other than none, or a logged busbw_gbps.
  bw_per_call,
  -- True when more than one parser logged the calls (int_calls.n_sources > 1).
  multi_source,
  -- int_calls.size_conflict.
  size_conflict,
  -- Logical calls with these values.
  calls
) AS
WITH
  -- the calls int_calls does not take as they are: the lines of an NCCL all-to-all group, and
  -- the anchors of paired records (both empty on a single-source run without such groups),
  -- and the ranks they belong to (int_calls meets both on the call's rank)
  reworked AS MATERIALIZED (
    SELECT call_key, source_line FROM int_p2p_groups
    UNION
    SELECT anchor_key, anchor_line FROM int_call_sources WHERE role IN ('anchor', 'paired')
  ),
  reworked_ranks AS MATERIALIZED (
    SELECT run_id, rank FROM int_p2p_groups
    UNION
    SELECT run_id, rank FROM int_call_sources WHERE role IN ('anchor', 'paired')
  ),
  reworked_shapes AS MATERIALIZED (
    SELECT s.shape_id
    FROM int_comm_op_shapes AS s
    SEMI JOIN reworked_ranks AS r ON r.run_id = s.run_id AND r.rank IS NOT DISTINCT FROM s.rank
  ),
  -- Algorithm: every other call counted per shape, with how many have a duration, a positive
  -- one, a logged busbw (the combinations the two flags below need). A call of a rank without a
  -- reworked call is in int_calls as logged: those are counted on the shape_id alone; on the
  -- other ranks a call is counted here unless its (call_key, source_line) is reworked, and
  -- taken from int_calls (as_paired) if it is: each call is counted once, in one of the two
  -- parts, whatever the keys.
  per_shape AS (
    SELECT a.*
    FROM (
      SELECT
        shape_id,
        count(*) AS n,
        count(dur_ns) AS n_timed,
        count(*) FILTER (WHERE dur_ns > 0 OR dur_ns IS NOT NULL AND busbw_gbps IS NOT NULL)
          AS n_timed_bw,
        count(*) FILTER (WHERE dur_ns IS NOT NULL AND busbw_gbps IS NOT NULL) AS n_timed_busbw,
        count(*) FILTER (WHERE dur_ns IS NULL AND busbw_gbps IS NOT NULL) AS n_untimed_busbw
      FROM int_comm_ops_shaped
      GROUP BY shape_id
    ) AS a
    ANTI JOIN reworked_shapes AS rs ON rs.shape_id = a.shape_id
    UNION ALL
    SELECT
      c.shape_id,
      count(*) AS n,
      count(c.dur_ns) AS n_timed,
      count(*) FILTER (WHERE c.dur_ns > 0 OR c.dur_ns IS NOT NULL AND c.busbw_gbps IS NOT NULL)
        AS n_timed_bw,
      count(*) FILTER (WHERE c.dur_ns IS NOT NULL AND c.busbw_gbps IS NOT NULL) AS n_timed_busbw,
      count(*) FILTER (WHERE c.dur_ns IS NULL AND c.busbw_gbps IS NOT NULL) AS n_untimed_busbw
    FROM int_comm_ops_shaped AS c
    -- an inner join: with no reworked rank its build side is empty and the calls are not read
    SEMI JOIN reworked_shapes AS rs ON rs.shape_id = c.shape_id
    ANTI JOIN reworked AS r ON r.call_key = c.call_key AND r.source_line = c.source_line
    GROUP BY c.shape_id
  ),
  as_logged AS (
    -- int_calls' values of such a call (its header: a call of one record keeps its fields);
    -- bw_per_call = a duration > 0 on a clock other than none, or a logged busbw: per shape the
    -- calls with a duration split by it as the shape's clock says
    SELECT
      s.run_id,
      s.rank,
      s.source_format,
      s.op,
      s.traffic_class,
      s.is_traffic,
      s.msg_bytes,
      s.group_size,
      s.group_source,
      s.global_group,
      s.timing_source,
      CASE WHEN s.msg_bytes IS NOT NULL THEN s.source_format END AS bytes_source,
      CASE WHEN f.timed THEN s.source_format END AS duration_source,
      f.timed,
      f.bw_per_call,
      false AS multi_source,
      false AS size_conflict,
      CASE
        WHEN f.timed AND f.bw_per_call
          THEN CASE WHEN coalesce(s.timing_source, '') <> 'none' THEN p.n_timed_bw ELSE p.n_timed_busbw END
        WHEN f.timed
          THEN p.n_timed
            - CASE WHEN coalesce(s.timing_source, '') <> 'none' THEN p.n_timed_bw ELSE p.n_timed_busbw END
        WHEN f.bw_per_call THEN p.n_untimed_busbw
        ELSE p.n - p.n_timed - p.n_untimed_busbw
      END AS calls
    FROM per_shape AS p
    JOIN int_comm_op_shapes AS s ON s.shape_id = p.shape_id
    CROSS JOIN (VALUES (true, true), (true, false), (false, true), (false, false)) AS f (timed, bw_per_call)
    WHERE s.counted
  ),
  as_paired AS (
    SELECT
      run_id,
      rank,
      source_format,
      op,
      traffic_class,
      is_traffic,
      msg_bytes,
      group_size,
      group_source,
      global_group,
      timing_source,
      bytes_source,
      duration_source,
      dur_ns IS NOT NULL AS timed,
      coalesce(timing_source, '') <> 'none' AND coalesce(dur_ns > 0, false)
        OR busbw_gbps IS NOT NULL AS bw_per_call,
      n_sources > 1 AS multi_source,
      size_conflict,
      1 AS calls
    FROM int_calls AS c
    -- inner joins: with no reworked call their build sides are empty and the calls are not read
    SEMI JOIN reworked AS r ON r.call_key = c.call_key AND r.source_line = c.source_line
    SEMI JOIN reworked_ranks AS rr ON rr.run_id = c.run_id AND rr.rank IS NOT DISTINCT FROM c.rank
  )
SELECT
  run_id, rank, source_format, op, traffic_class, is_traffic, msg_bytes, group_size, group_source,
  global_group, timing_source, bytes_source, duration_source, timed, bw_per_call, multi_source,
  size_conflict,
  sum(calls)::BIGINT AS calls
FROM (
  SELECT * FROM as_logged WHERE calls > 0
  UNION ALL
  SELECT * FROM as_paired
)
GROUP BY ALL
