-- Measured iteration-time breakdown per rank and iteration: T_comp, T_TP, T_PP, T_DP, T_EP, T_EmbTableSyn, T_bubble, idle, and exposed vs hidden communication (APNet'24 eqs 1-7, model_spec §A.2/§C).
-- One row per (run, rank, iteration) with a timed window (int_iterations). Calls (int_breakdown_calls) and compute kernels are cut to the window. Class terms are sums of whole calls (TP/DP/EP/EmbTableSyn/other: call to end, waiting for the group included); PP = active transfer of send/recv, T_bubble = their waiting part. comm = |union of calls|; compute = |union of compute kernels| (ranks without any kernel: the window minus comm, 'remainder'). Exact identity: t_iter = t_comp + t_tp + t_pp + t_dp + t_ep + t_emb + t_other_comm + t_bubble + t_idle - overlap.
CREATE OR REPLACE VIEW int_breakdown_rank_iteration(
  -- Training run identifier.
  run_id,
  -- Global rank.
  rank,
  -- Iteration.
  iteration,
  -- Pipeline stage of the rank under the run's config (int_rank_nodes; null when unknown).
  stage,
  -- Window start, ns.
  start_ns,
  -- Window end, ns.
  end_ns,
  -- T_iter: window length, ns.
  t_iter_ns,
  -- T_comp: compute kernels' union in the window ('remainder': t_iter - comm), ns.
  t_comp_ns,
  -- T_TP: TP collective calls, call to end, ns.
  t_tp_ns,
  -- T_PP: active-transfer part of pipeline send/recv, ns.
  t_pp_ns,
  -- T_DP: data-parallel collective calls, call to end, ns.
  t_dp_ns,
  -- T_EP: MoE all-to-all calls, call to end, ns.
  t_ep_ns,
  -- T_EmbTableSyn: tied-embedding all-reduce between first and last stage, ns.
  t_emb_ns,
  -- Other communication calls (broadcast, barrier, unclassified), ns.
  t_other_comm_ns,
  -- T_bubble: waiting part of pipeline send/recv, ns.
  t_bubble_ns,
  -- Window time with neither compute nor communication, ns (0 for 'remainder').
  t_idle_ns,
  -- Union of communication calls in the window (PP waiting included), ns.
  comm_ns,
  -- Communication time not overlapped by compute (comm_ns - hidden_comm_ns), ns.
  exposed_comm_ns,
  -- Communication time overlapped by compute kernels, ns.
  hidden_comm_ns,
  -- Double-counted time in the sum of terms (comm under compute, concurrent calls), ns; >= 0.
  overlap_ns,
  -- T_comm = t_tp + t_pp + t_dp + t_ep + t_emb + t_other_comm, ns.
  t_comm_ns,
  -- R_comm = t_comm / t_iter.
  r_comm,
  -- R_bubble = t_bubble / t_iter.
  r_bubble,
  -- Parser whose calls gave the communication times (kineto, nsys, deepspeed_comms, ...); null when the window has no call.
  source,
  -- kernels (compute kernels) | remainder (no kernels for the rank).
  comp_source,
  -- How the window's PP calls were split: paired | fastest_call | mixed; null without PP calls.
  pp_split,
  -- Communication calls overlapping the window.
  calls
) AS
WITH
  win AS (
    SELECT run_id, rank, iteration, start_ns, end_ns, duration_ns
    FROM int_iterations
    WHERE start_ns IS NOT NULL AND end_ns IS NOT NULL AND rank IS NOT NULL
  ),
  calls AS MATERIALIZED (SELECT * FROM int_breakdown_calls),
  cut AS MATERIALIZED (
    SELECT
      w.run_id,
      w.rank,
      w.iteration,
      c.traffic_class,
      c.source_format,
      c.pp_split,
      greatest(c.ts_ns, w.start_ns) AS ts_ns,
      least(c.end_ns, w.end_ns) AS end_ns,
      least(c.end_ns, w.end_ns) - greatest(c.ts_ns, w.start_ns) AS dur_ns,
      greatest(least(c.ts_ns + c.wait_ns, w.end_ns) - greatest(c.ts_ns, w.start_ns), 0) AS wait_ns
    FROM calls AS c
    JOIN win AS w
      ON c.run_id = w.run_id AND c.rank = w.rank AND c.ts_ns < w.end_ns AND c.end_ns > w.start_ns
  ),
  terms AS (
    SELECT
      run_id,
      rank,
      iteration,
      sum(dur_ns) FILTER (WHERE traffic_class = 'TP') AS t_tp,
      sum(dur_ns - wait_ns) FILTER (WHERE traffic_class = 'PP') AS t_pp,
      sum(dur_ns) FILTER (WHERE traffic_class = 'DP') AS t_dp,
      sum(dur_ns) FILTER (WHERE traffic_class = 'EP') AS t_ep,
      sum(dur_ns) FILTER (WHERE traffic_class = 'EmbTableSyn') AS t_emb,
      sum(dur_ns) FILTER (WHERE traffic_class NOT IN ('TP', 'PP', 'DP', 'EP', 'EmbTableSyn'))
        AS t_other,
      sum(wait_ns) FILTER (WHERE traffic_class = 'PP') AS t_bubble,
      mode(source_format) AS source,
      CASE
        WHEN count(pp_split) = 0 THEN NULL
        WHEN min(pp_split) = max(pp_split) THEN min(pp_split)
        ELSE 'mixed'
      END AS pp_split,
      count(*) AS calls
    FROM cut
    GROUP BY run_id, rank, iteration
  ),
  comm_cut AS (
    SELECT {'run_id': run_id, 'rank': rank, 'iteration': iteration} AS k, ts_ns, dur_ns FROM cut
  ),
  comm_merged AS MATERIALIZED (SELECT k, ts_ns, dur_ns FROM interval_merge(comm_cut)),
  comm_union AS (
    SELECT k.run_id, k.rank, k.iteration, sum(dur_ns) AS comm_ns FROM comm_merged GROUP BY k
  ),
  kernel_ranks AS (
    SELECT DISTINCT run_id, rank FROM stg_store__kernels WHERE rank IS NOT NULL
  ),
  comp_kernels AS (
    SELECT {'run_id': run_id, 'rank': rank} AS k, ts_ns, dur_ns
    FROM stg_store__kernels
    WHERE category = 'compute' AND rank IS NOT NULL
  ),
  comp_windows AS (
    SELECT {'run_id': run_id, 'rank': rank} AS k, iteration AS w, start_ns AS ts_ns,
      duration_ns AS dur_ns
    FROM win
  ),
  comp_cut AS (
    SELECT {'run_id': k.run_id, 'rank': k.rank, 'iteration': w} AS k, ts_ns, dur_ns
    FROM interval_clip(comp_kernels, comp_windows)
  ),
  comp_merged AS MATERIALIZED (SELECT k, ts_ns, dur_ns FROM interval_merge(comp_cut)),
  comp_union AS (
    SELECT k.run_id, k.rank, k.iteration, sum(dur_ns) AS comp_ns FROM comp_merged GROUP BY k
  ),
  hidden AS (
    SELECT k.run_id, k.rank, k.iteration, overlap_ns AS hidden_ns
    FROM interval_overlap(comm_merged, comp_merged)
  ),
  joined AS (
    SELECT
      w.run_id,
      w.rank,
      w.iteration,
      n.stage,
      w.start_ns,
      w.end_ns,
      w.duration_ns AS t_iter,
      kr.rank IS NOT NULL AS has_kernels,
      coalesce(t.t_tp, 0) AS t_tp,
      coalesce(t.t_pp, 0) AS t_pp,
      coalesce(t.t_dp, 0) AS t_dp,
      coalesce(t.t_ep, 0) AS t_ep,
      coalesce(t.t_emb, 0) AS t_emb,
      coalesce(t.t_other, 0) AS t_other,
      coalesce(t.t_bubble, 0) AS t_bubble,
      coalesce(cu.comm_ns, 0) AS comm_ns,
      coalesce(pu.comp_ns, 0) AS comp_ns,
      coalesce(h.hidden_ns, 0) AS hidden_ns,
      t.source,
      t.pp_split,
      coalesce(t.calls, 0) AS calls
    FROM win AS w
    LEFT JOIN terms AS t ON t.run_id = w.run_id AND t.rank = w.rank AND t.iteration = w.iteration
    LEFT JOIN comm_union AS cu
      ON cu.run_id = w.run_id AND cu.rank = w.rank AND cu.iteration = w.iteration
    LEFT JOIN comp_union AS pu
      ON pu.run_id = w.run_id AND pu.rank = w.rank AND pu.iteration = w.iteration
    LEFT JOIN hidden AS h ON h.run_id = w.run_id AND h.rank = w.rank AND h.iteration = w.iteration
    LEFT JOIN kernel_ranks AS kr ON kr.run_id = w.run_id AND kr.rank = w.rank
    LEFT JOIN int_rank_nodes AS n ON n.run_id = w.run_id AND n.rank = w.rank
  ),
  final AS (
    SELECT
      *,
      CASE WHEN has_kernels THEN comp_ns ELSE t_iter - comm_ns END AS t_comp,
      CASE WHEN has_kernels THEN hidden_ns ELSE 0 END AS hidden,
      CASE WHEN has_kernels THEN t_iter - (comm_ns + comp_ns - hidden_ns) ELSE 0 END AS t_idle,
      t_tp + t_pp + t_dp + t_ep + t_emb + t_other AS t_comm
    FROM joined
  )
SELECT
  run_id,
  rank,
  iteration,
  stage,
  start_ns,
  end_ns,
  t_iter::BIGINT AS t_iter_ns,
  t_comp::BIGINT AS t_comp_ns,
  t_tp::BIGINT AS t_tp_ns,
  t_pp::BIGINT AS t_pp_ns,
  t_dp::BIGINT AS t_dp_ns,
  t_ep::BIGINT AS t_ep_ns,
  t_emb::BIGINT AS t_emb_ns,
  t_other::BIGINT AS t_other_comm_ns,
  t_bubble::BIGINT AS t_bubble_ns,
  t_idle::BIGINT AS t_idle_ns,
  comm_ns::BIGINT AS comm_ns,
  (comm_ns - hidden)::BIGINT AS exposed_comm_ns,
  hidden::BIGINT AS hidden_comm_ns,
  (t_comp + t_comm + t_bubble - (t_iter - t_idle))::BIGINT AS overlap_ns,
  t_comm::BIGINT AS t_comm_ns,
  t_comm / nullif(t_iter, 0) AS r_comm,
  t_bubble / nullif(t_iter, 0) AS r_bubble,
  source,
  CASE WHEN has_kernels THEN 'kernels' ELSE 'remainder' END AS comp_source,
  pp_split,
  calls
FROM final
