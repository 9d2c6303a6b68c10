-- Effective bandwidth per collective, traffic class, group and message-size bucket: algbw and busbw recomputed with the TRUE group size (nccl-tests definitions, macros comm_alg_bytes and comm_bus_factor of sql/macros/comm_bus_factor.sql), beside DeepSpeed's world-size busbw and the correction; C_TP/C_PP/C_DP/C_EP per run: the one C per class of int_class_bandwidth (Σ bus bytes / Σ transfer time, the transfer being the part of a call after the group's last member posted; APNet'24 eqs 2-4, model_spec §C), with its whole-call counterpart and xfer_source beside it. A group size the log does not give comes from the run config by the macro config_group_size (sql/macros/config_group_size.sql), flagged group_source run_config. Inputs: int_calls (each logical call once, with the best size and duration of the sources that logged it: an NCCL log's call timed by its Kineto kernel), read as int_calls_tallied (its calls counted per size, group, class and source: the counts, sizes and the correction factor, whose median is taken over the counted values: the macro weighted_median, sql/macros/weighted_median.sql) and, for the calls with a duration or a logged busbw, one by one (the medians of durations and bandwidths), stg_store__comm_summaries, int_run_world, int_groups_members, int_rank_nodes, int_class_bandwidth. Bandwidths in GB/s = 1e9 bytes/s (decimal), Gbit/s = 1e9 bit/s.
-- comm_ops: one row per (run_id, op, traffic_class, group_size, size_bucket_bytes) with source 'comm_ops'; DeepSpeed summaries: one row per printed summary row (summary_line) with source 'comm_summaries'. Sizes: msg_bytes is the canonical size of every source (all_gather the per-rank send buffer, reduce_scatter the per-rank shard, all_to_all the full per-rank send buffer); algbw S = comm_alg_bytes (msg x n for all_gather, reduce_scatter, gather, scatter, else msg; DeepSpeed logs reduce_scatter's full input and no group, so its shard is msg / n once n is known), busbw = algbw x comm_bus_factor (2(n-1)/n all_reduce, (n-1)/n all_gather, reduce_scatter, all_to_all, gather, scatter, 1 otherwise). Only timed calls give bandwidth: a call with timing_source 'none' or no dur_ns counts in calls, never in a bandwidth; timing_source says which clock the bandwidths come from. Group size of calls that log none (DeepSpeed): the config's DP size when tp = 1, TP size when dp = 1, EP (else DP) size for all_to_all, else unknown; a Kineto call on the default group has the world size (group_source inferred_default).
CREATE OR REPLACE VIEW effective_bandwidth(
  -- Training run identifier.
  run_id,
  -- comm_ops (per-call rows aggregated) or comm_summaries (DeepSpeed summary row).
  source,
  -- Normalised operation.
  op,
  -- TP | PP | DP | EP | EmbTableSyn | other.
  traffic_class,
  -- True group size n used for busbw (null when unknown).
  group_size,
  -- Where n came from: logged, pg_config, inferred_default (default group of a W-rank trace: the world), run_config (calls that log no group: DeepSpeed), op (send/recv: 2), unknown (the row does not say); comma-joined when several; null when n is unknown.
  group_source,
  -- World size (DeepSpeed's n).
  world_size,
  -- Message-size bucket: largest power of two <= msg_bytes.
  size_bucket_bytes,
  -- Summary rows: the printed message size in bytes; comm_ops rows: null.
  msg_bytes,
  -- Summary rows: 0-based summary table index; comm_ops rows: null.
  summary_index,
  -- Summary rows: line of the printed row; comm_ops rows: null.
  summary_line,
  -- Number of calls.
  calls,
  -- Sum of msg_bytes over the calls.
  total_bytes,
  -- Calls with a duration (bandwidths come from these; timing_source 'none' and null dur_ns excluded).
  timed_calls,
  -- Clock of the timed calls' durations: kernel, cpu_range, logged (comma-joined when several; 'unknown' for rows that do not say); null when no call is timed.
  timing_source,
  -- Median call duration, ns (summary rows: the printed average latency).
  median_dur_ns,
  -- Mean call duration, ns (summary rows: total latency / count).
  mean_dur_ns,
  -- Median algorithm bandwidth S/t, GB/s (1e9 bytes/s), true group size.
  algbw_gb_s,
  -- Median per-call bus bandwidth algbw x comm_bus_factor over the whole call (post to end, waiting for the group included), GB/s (1e9 bytes/s), true group size.
  busbw_gb_s,
  -- Median algorithm bandwidth, Gbit/s (1e9 bit/s).
  algbw_gbit_s,
  -- Median bus bandwidth, Gbit/s (1e9 bit/s).
  busbw_gbit_s,
  -- Mean bus bandwidth, GB/s (1e9 bytes/s).
  mean_busbw_gb_s,
  -- Median busbw as the source logged it, Gbit/s (DeepSpeed: computed with the world size).
  logged_busbw_gbit_s,
  -- DeepSpeed's busbw formula with the world size, Gbit/s (logged value where present, else recomputed from the durations).
  ds_world_busbw_gbit_s,
  -- true-group busbw / DeepSpeed world-size busbw for this op (1 when n = world size).
  correction_factor,
  -- ds_world_busbw_gbit_s * correction_factor: DeepSpeed's figure corrected to the group size, Gbit/s.
  corrected_busbw_gbit_s,
  -- Link capacity for this group, bytes/s: config c_intra when all members share a node, c_inter otherwise (null when unknown).
  link_capacity_bytes_s,
  -- busbw / link capacity (null when the capacity is unknown).
  utilisation,
  -- Run's C_TP: int_class_bandwidth.busbw_transfer_Bps of TP, bytes/s.
  c_tp_bytes_s,
  -- Run's C_PP (send/recv: busbw = algbw), bytes/s (int_class_bandwidth).
  c_pp_bytes_s,
  -- Run's C_DP, bytes/s (int_class_bandwidth).
  c_dp_bytes_s,
  -- Run's C_EP (all_to_all), bytes/s (int_class_bandwidth).
  c_ep_bytes_s,
  -- The row's class C: Σ bus bytes / Σ transfer time over the class's timed calls, bytes/s (int_class_bandwidth; null when none).
  busbw_transfer_Bps,
  -- The row's class whole-call estimator: Σ bus bytes / Σ call time (waiting included), bytes/s (int_class_bandwidth).
  busbw_call_Bps,
  -- How the class's transfer times were found: peers | estimated | mixed (int_class_bandwidth).
  xfer_source
) AS
WITH
  world AS MATERIALIZED (SELECT * FROM int_run_world),
  group_nodes AS MATERIALIZED (
    SELECT m.run_id, m.global_group, count(DISTINCT n.node) AS n_nodes, count(n.node) AS n_known,
      count(*) AS n_members
    FROM int_groups_members AS m
    LEFT JOIN int_rank_nodes AS n ON n.run_id = m.run_id AND n.rank = m.global_rank
    GROUP BY ALL
  ),
  -- Algorithm: two reads of the calls. (a) every call, counted per value of what the rows
  -- group and sum by (int_calls_tallied: a few thousand rows at 1024 ranks): calls, bytes,
  -- groups, capacity and the correction factor, a function of those values, whose median is
  -- taken with the counts as weights (weighted_median). (b) one by one, only the calls with a
  -- duration or a logged busbw (int_calls_tallied.bw_per_call; none on an NCCL-log-only run, whose calls are
  -- then not read a second time): the medians of durations and bandwidths.
  counted AS NOT MATERIALIZED (
    SELECT
      o.run_id,
      o.op,
      o.traffic_class,
      -- the format whose record gave the size (DeepSpeed's reduce_scatter size is its input)
      o.bytes_source AS source_format,
      o.msg_bytes::DOUBLE AS s,
      NULL::BIGINT AS dur_ns,
      coalesce(o.timing_source, 'unknown') AS timing_source,
      NULL::DOUBLE AS logged_busbw,
      w.world_size AS nw,
      coalesce(o.group_size, config_group_size(o.op, w.ep, w.dp, w.tp)) AS n,
      CASE
        WHEN o.group_size IS NOT NULL THEN coalesce(o.group_source, 'unknown')
        WHEN o.op IN ('send', 'recv') THEN 'op'
        -- n (the alias above) came from the config
        WHEN n IS NOT NULL THEN 'run_config'
      END AS group_source,
      CASE
        WHEN gn.n_known = gn.n_members AND gn.n_nodes = 1 THEN w.c_intra_bps
        WHEN gn.n_known = gn.n_members AND gn.n_nodes > 1 THEN w.c_inter_bps
      END AS capacity,
      o.calls
    FROM int_calls_tallied AS o
    LEFT JOIN world AS w ON w.run_id = o.run_id
    LEFT JOIN group_nodes AS gn ON gn.run_id = o.run_id AND gn.global_group = o.global_group
    WHERE o.is_traffic AND o.msg_bytes > 0
  ),
  timed AS NOT MATERIALIZED (
    SELECT
      o.run_id,
      o.op,
      o.traffic_class,
      o.bytes_source AS source_format,
      o.msg_bytes::DOUBLE AS s,
      -- no bandwidth from a call without its own duration (never a number from another clock)
      CASE WHEN coalesce(o.timing_source, '') <> 'none' AND o.dur_ns > 0 THEN o.dur_ns END
        AS dur_ns,
      coalesce(o.timing_source, 'unknown') AS timing_source,
      o.busbw_gbps AS logged_busbw,
      w.world_size AS nw,
      coalesce(o.group_size, config_group_size(o.op, w.ep, w.dp, w.tp)) AS n,
      NULL::VARCHAR AS group_source,
      NULL::DOUBLE AS capacity,
      1 AS calls
    FROM int_calls AS o
    LEFT JOIN world AS w ON w.run_id = o.run_id
    -- an inner join: on a run without such calls its build side is empty and the calls are
    -- not read
    SEMI JOIN (
      SELECT DISTINCT run_id FROM int_calls_tallied
      WHERE bw_per_call AND is_traffic AND msg_bytes > 0
    ) AS b ON b.run_id = o.run_id
    WHERE o.is_traffic AND o.msg_bytes > 0
      AND (
        coalesce(o.timing_source, '') <> 'none' AND coalesce(o.dur_ns > 0, false)
        OR o.busbw_gbps IS NOT NULL
      )
  ),
  summaries AS NOT MATERIALIZED (
    SELECT
      c.run_id,
      c.op,
      CASE
        WHEN c.op IN ('send', 'recv') THEN 'PP'
        WHEN c.op = 'all_to_all' THEN 'EP'
        WHEN w.tp = 1 AND w.dp > 1 THEN 'DP'
        WHEN w.dp = 1 AND w.tp > 1 THEN 'TP'
        ELSE 'other'
      END AS traffic_class,
      'deepspeed_comms' AS source_format,
      'logged' AS timing_source,

      c.msg_bytes::DOUBLE AS s,
      c.msg_bytes,
      c.summary_index,
      c.source_line AS summary_line,
      c.calls,
      c.avg_latency_ms * 1e6 AS median_dur_ns,
      c.total_latency_ms * 1e6 / nullif(c.calls, 0) AS mean_dur_ns,
      c.busbw_gbps AS logged_busbw,
      w.world_size AS nw,
      config_group_size(c.op, w.ep, w.dp, w.tp) AS n,
      CASE
        WHEN c.op IN ('send', 'recv') THEN 'op'
        -- n (the alias above) came from the config
        WHEN n IS NOT NULL THEN 'run_config'
      END AS group_source
    FROM stg_store__comm_summaries AS c
    LEFT JOIN world AS w ON w.run_id = c.run_id
    WHERE c.op NOT IN ('barrier', 'other') AND c.msg_bytes > 0
  ),
  factors AS NOT MATERIALIZED (
    -- per call: algbw size S and busbw factor with the true n (the shared macros), and
    -- DeepSpeed's calc_bw_log busbw / msg, which applies the same factors with n = world size
    SELECT
      *,
      comm_alg_bytes(op, s_canon, n) AS s_alg,
      comm_bus_factor(op, n) AS bus_factor,
      CASE
        WHEN op IN ('all_reduce', 'all_gather', 'reduce_scatter', 'all_to_all')
          THEN comm_bus_bytes(op, 1, nw)
        ELSE 1.0
      END AS ds_factor
    FROM (
      -- canonical msg_bytes: DeepSpeed logs reduce_scatter's input tensor (all n shards; its
      -- get_msg_size_from_args takes the `tensor` argument) and no group size, so the shard is
      -- known only here, once n is: s / n. Every other source logs the canonical size.
      SELECT
        *,
        CASE WHEN source_format = 'deepspeed_comms' AND op = 'reduce_scatter' THEN s / n ELSE s END
          AS s_canon
      FROM (
        -- part: counted (every call, `calls` of them: counts, sizes, groups, correction),
        -- timed (each call with a duration or logged busbw: the medians of its numbers),
        -- summary (a DeepSpeed summary row: both)
        SELECT run_id, op, traffic_class, source_format, timing_source, group_source, s,
          NULL::BIGINT AS msg_bytes,
          NULL::INTEGER AS summary_index, NULL::BIGINT AS summary_line, calls, dur_ns::DOUBLE AS median_dur_ns,
          dur_ns::DOUBLE AS mean_dur_ns, logged_busbw, nw, n, capacity, 'comm_ops' AS source,
          'counted' AS part
        FROM counted
        UNION ALL
        SELECT run_id, op, traffic_class, source_format, timing_source, group_source, s,
          NULL::BIGINT AS msg_bytes,
          NULL::INTEGER AS summary_index, NULL::BIGINT AS summary_line, calls, dur_ns::DOUBLE AS median_dur_ns,
          dur_ns::DOUBLE AS mean_dur_ns, logged_busbw, nw, n, capacity, 'comm_ops' AS source,
          'timed' AS part
        FROM timed
        UNION ALL
        SELECT run_id, op, traffic_class, source_format, timing_source, group_source, s, msg_bytes,
          summary_index,
          summary_line,
          calls,
          median_dur_ns, mean_dur_ns, logged_busbw, nw, n, NULL AS capacity,
          'comm_summaries' AS source, 'summary' AS part
        FROM summaries
      )
    )
  ),
  per_call AS NOT MATERIALIZED (
    SELECT
      *,
      -- true busbw / DeepSpeed world busbw for the same S and t
      (s_alg * bus_factor) / nullif(s * ds_factor, 0) AS correction,
      s_alg / nullif(median_dur_ns, 0) AS algbw_b_ns,
      s_alg * bus_factor / nullif(median_dur_ns, 0) AS busbw_b_ns,
      s * ds_factor / nullif(median_dur_ns, 0) AS ds_busbw_b_ns,
      -- the row's keys
      n AS n_key,
      (2::BIGINT ** floor(log2(s)))::BIGINT AS size_bucket_bytes,
      CASE WHEN source = 'comm_summaries' THEN summary_line END AS line_key
    FROM factors
  ),
  -- counts, sizes and groups of each row (every call, counted)
  grouped AS (
    SELECT
      run_id,
      source,
      op,
      traffic_class,
      n_key,
      size_bucket_bytes,
      line_key,
      string_agg(DISTINCT group_source, ',' ORDER BY group_source) AS group_source,
      any_value(nw)::INTEGER AS world_size,
      any_value(msg_bytes) AS msg_bytes,
      any_value(summary_index) AS summary_index,
      any_value(summary_line) AS summary_line,
      sum(calls)::BIGINT AS calls,
      sum(s * calls)::BIGINT AS total_bytes,
      any_value(capacity) AS link_capacity_bytes_s
    FROM per_call
    WHERE part IN ('counted', 'summary')
    GROUP BY ALL
  ),
  -- the median correction factor of each row, a function of the calls' counted values: the
  -- median of the counted values (the macro weighted_median, sql/macros/weighted_median.sql;
  -- a summary row is one value)
  corrections AS (
    SELECT
      {
        'run_id': run_id, 'source': source, 'op': op, 'traffic_class': traffic_class,
        'n_key': n_key, 'size_bucket_bytes': size_bucket_bytes, 'line_key': line_key
      } AS k,
      correction AS v,
      CASE WHEN part = 'summary' THEN 1 ELSE calls END AS w
    FROM per_call
    WHERE part IN ('counted', 'summary')
  ),
  correction_median AS (
    SELECT
      m.k.run_id, m.k.source, m.k.op, m.k.traffic_class, m.k.n_key, m.k.size_bucket_bytes,
      m.k.line_key, m.median AS correction_factor
    FROM weighted_median(corrections) AS m
  ),
  -- durations and bandwidths of each row (its timed calls one by one)
  timings AS (
    SELECT
      run_id,
      source,
      op,
      traffic_class,
      n_key,
      size_bucket_bytes,
      line_key,
      sum(CASE WHEN median_dur_ns > 0 THEN calls ELSE 0 END)::BIGINT AS timed_calls,
      min(timing_source) FILTER (WHERE median_dur_ns > 0) AS ts_lo,
      max(timing_source) FILTER (WHERE median_dur_ns > 0) AS ts_hi,
      median(median_dur_ns) AS median_dur_ns,
      sum(mean_dur_ns * calls) / nullif(sum(CASE WHEN mean_dur_ns IS NOT NULL THEN calls END), 0)
        AS mean_dur_ns,
      median(algbw_b_ns) AS algbw_gb_s,
      median(busbw_b_ns) AS busbw_gb_s,
      avg(busbw_b_ns) AS mean_busbw_gb_s,
      median(logged_busbw) AS logged_busbw_gbit_s,
      coalesce(median(logged_busbw), median(ds_busbw_b_ns) * 8) AS ds_world_busbw_gbit_s
    FROM per_call
    WHERE part IN ('timed', 'summary')
    GROUP BY ALL
  ),
  multi AS MATERIALIZED (
    -- the rows whose timed calls name more than one clock (none when every timed call of a
    -- row names the same): their lists need the calls again
    SELECT run_id, source, op, traffic_class, n_key, size_bucket_bytes, line_key
    FROM timings
    WHERE ts_lo <> ts_hi
  ),
  listed AS (
    SELECT
      m.run_id,
      m.source,
      m.op,
      m.traffic_class,
      m.n_key,
      m.size_bucket_bytes,
      m.line_key,
      string_agg(DISTINCT p.timing_source, ',' ORDER BY p.timing_source)
        FILTER (WHERE p.median_dur_ns > 0) AS timing_source
    FROM per_call AS p
    -- an inner join: its hash table is built on the few rows of `multi` (with none, DuckDB
    -- stops reading the calls at once)
    JOIN multi AS m
      ON m.run_id = p.run_id AND m.source = p.source AND m.op IS NOT DISTINCT FROM p.op
      AND m.traffic_class IS NOT DISTINCT FROM p.traffic_class
      AND m.n_key IS NOT DISTINCT FROM p.n_key
      AND m.size_bucket_bytes IS NOT DISTINCT FROM p.size_bucket_bytes
      AND m.line_key IS NOT DISTINCT FROM p.line_key
    WHERE p.part IN ('timed', 'summary')
    GROUP BY ALL
  ),
  c_run AS (
    -- the one C per class (int_class_bandwidth)
    SELECT run_id, traffic_class, busbw_transfer_Bps AS c_bytes_s
    FROM int_class_bandwidth
  )
SELECT
  g.run_id,
  g.source,
  g.op,
  g.traffic_class,
  g.n_key::INTEGER AS group_size,
  g.group_source,
  g.world_size,
  g.size_bucket_bytes,
  g.msg_bytes,
  g.summary_index,
  g.summary_line,
  g.calls,
  g.total_bytes,
  coalesce(t.timed_calls, 0) AS timed_calls,
  CASE WHEN t.ts_lo IS NOT DISTINCT FROM t.ts_hi THEN t.ts_lo ELSE l.timing_source END
    AS timing_source,
  t.median_dur_ns,
  t.mean_dur_ns,
  t.algbw_gb_s,
  t.busbw_gb_s,
  t.algbw_gb_s * 8 AS algbw_gbit_s,
  t.busbw_gb_s * 8 AS busbw_gbit_s,
  t.mean_busbw_gb_s,
  t.logged_busbw_gbit_s,
  t.ds_world_busbw_gbit_s,
  cm.correction_factor,
  t.ds_world_busbw_gbit_s * cm.correction_factor AS corrected_busbw_gbit_s,
  g.link_capacity_bytes_s,
  t.busbw_gb_s * 1e9 / g.link_capacity_bytes_s AS utilisation,
  max(CASE WHEN c.traffic_class = 'TP' THEN c.c_bytes_s END) AS c_tp_bytes_s,
  max(CASE WHEN c.traffic_class = 'PP' THEN c.c_bytes_s END) AS c_pp_bytes_s,
  max(CASE WHEN c.traffic_class = 'DP' THEN c.c_bytes_s END) AS c_dp_bytes_s,
  max(CASE WHEN c.traffic_class = 'EP' THEN c.c_bytes_s END) AS c_ep_bytes_s,
  any_value(cb.busbw_transfer_Bps) AS busbw_transfer_Bps,
  any_value(cb.busbw_call_Bps) AS busbw_call_Bps,
  any_value(cb.xfer_source) AS xfer_source
FROM grouped AS g
LEFT JOIN timings AS t
  ON t.run_id = g.run_id AND t.source = g.source AND t.op IS NOT DISTINCT FROM g.op
  AND t.traffic_class IS NOT DISTINCT FROM g.traffic_class AND t.n_key IS NOT DISTINCT FROM g.n_key
  AND t.size_bucket_bytes IS NOT DISTINCT FROM g.size_bucket_bytes
  AND t.line_key IS NOT DISTINCT FROM g.line_key
LEFT JOIN correction_median AS cm
  ON cm.run_id = g.run_id AND cm.source = g.source AND cm.op IS NOT DISTINCT FROM g.op
  AND cm.traffic_class IS NOT DISTINCT FROM g.traffic_class AND cm.n_key IS NOT DISTINCT FROM g.n_key
  AND cm.size_bucket_bytes IS NOT DISTINCT FROM g.size_bucket_bytes
  AND cm.line_key IS NOT DISTINCT FROM g.line_key
LEFT JOIN listed AS l
  ON l.run_id = g.run_id AND l.source = g.source AND l.op IS NOT DISTINCT FROM g.op
  AND l.traffic_class IS NOT DISTINCT FROM g.traffic_class AND l.n_key IS NOT DISTINCT FROM g.n_key
  AND l.size_bucket_bytes IS NOT DISTINCT FROM g.size_bucket_bytes
  AND l.line_key IS NOT DISTINCT FROM g.line_key
LEFT JOIN c_run AS c ON c.run_id = g.run_id
LEFT JOIN int_class_bandwidth AS cb
  ON cb.run_id = g.run_id AND cb.traffic_class = g.traffic_class
GROUP BY ALL
