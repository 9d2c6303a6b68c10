-- Measured iteration-time breakdown per rank and iteration: T_comp, T_TP, T_PP, T_DP, T_EP, T_EmbTableSyn, T_bubble, idle, and exposed vs hidden communication (APNet'24 eqs 1-7, model_spec §A.2/§C).
-- One row per (run, rank, iteration) with a timed span (int_iteration_spans: on a GPU rank from the first start of the step's own work to the next step's first start). Everything is the iteration's own work, attributed by launch and never clipped (int_comm_ops_timed, int_rank_busy_merged): inputs: int_iteration_spans, int_breakdown_calls (wait/transfer split, wait_kind), int_rank_busy_merged, int_kernel_iteration, int_rank_nodes. Class terms are sums of its timed calls: a call on a same-stage group (TP/DP/EP/other: wait_kind sync) counts call to end, its waiting part also summed as t_sync_wait (informational, included); a call on a group spanning stages (PP send/recv, EmbTableSyn: wait_kind bubble) counts only its transfer, its waiting part is T_bubble (warm-up on early stages, drain and the end-of-iteration EmbTableSyn wait on the last one; APNet'24 §4.1, eq. 7). comm = |union of its comm intervals| (int_rank_busy_merged: the same number as on_off.on_ns); compute = |union of its compute kernels| (ranks without any kernel: the span minus the comm inside it, 'remainder'); hidden = |comm union ∩ compute union| (HTA's comm/compute overlap). spill = the part of the union of its comm and compute that runs outside its span (after the next step's first start: a lagging GPU's step overlapping the next); idle = span - (comm ∪ compute inside the span). Exact identity: t_iter = t_comp + t_tp + t_pp + t_dp + t_ep + t_emb + t_other_comm + t_bubble + t_idle - overlap - spill.
CREATE OR REPLACE VIEW int_breakdown_rank_iteration(
  -- Training run identifier.
  run_id,
  -- Global rank.
  rank,
  -- Iteration.
  iteration,
  -- Pipeline stage of the rank under the run's config (int_rank_nodes; null when unknown: no parallel config).
  stage,
  -- Iteration span start, ns (GPU rank: first start of the step's own work; int_iteration_spans).
  start_ns,
  -- Iteration span end, ns (GPU rank: the next step's first start; the last step: its last end).
  end_ns,
  -- T_iter: iteration duration (span length), ns.
  t_iter_ns,
  -- T_comp: union of the iteration's compute kernels; without kernels the span minus the communication inside it ('remainder', see comp_source), ns.
  t_comp_ns,
  -- T_TP: tensor-parallel collective calls, call to end (sync wait for the group included), ns.
  t_tp_ns,
  -- T_PP: active-transfer part of pipeline send/recv only (the waiting part is t_bubble_ns), ns.
  t_pp_ns,
  -- T_DP: data-parallel collective calls, call to end, ns.
  t_dp_ns,
  -- T_EP: MoE expert-parallel all-to-all calls, call to end, ns.
  t_ep_ns,
  -- T_EmbTableSyn: transfer part of the tied-embedding all-reduce between first and last stage (its wait is bubble), ns.
  t_emb_ns,
  -- Other communication calls (broadcast, barrier, unclassified), ns.
  t_other_comm_ns,
  -- T_bubble: waiting part of cross-stage calls: pipeline send/recv (previous/next stage not ready), EmbTableSyn (the other end stage not ready), any group spanning stages, ns.
  t_bubble_ns,
  -- Span time with neither the iteration's compute nor its communication (GPU idle), ns (0 for 'remainder').
  t_idle_ns,
  -- Union of the iteration's communication intervals (PP waiting included; the same number as on_off.on_ns), ns.
  comm_ns,
  -- Communication time not overlapped by compute (comm_ns - hidden_comm_ns), ns.
  exposed_comm_ns,
  -- Communication time overlapped (hidden) by compute kernels, ns.
  hidden_comm_ns,
  -- Time counted twice in the sum of terms (communication under compute, concurrent calls), ns; >= 0.
  overlap_ns,
  -- T_comm = t_tp + t_pp + t_dp + t_ep + t_emb + t_other_comm, ns.
  t_comm_ns,
  -- R_comm = T_comm / T_iter (the paper's communication share).
  r_comm,
  -- R_bubble = T_bubble / T_iter.
  r_bubble,
  -- Parser whose calls gave the communication times (kineto, nsys, deepspeed_comms, ...); null when the window has no call.
  source,
  -- Where t_comp_ns comes from: kernels (compute kernels) | remainder (no kernels for the rank).
  comp_source,
  -- How the iteration's PP calls were split into wait and transfer: paired (matching send/recv of both ranks) | fastest_call | mixed; null without PP calls.
  pp_split,
  -- Timed communication calls (rows of int_comm_ops_timed) of the iteration.
  calls,
  -- The part of the union of the iteration's own communication and compute that runs outside its span (after the next step's first start), ns; >= 0.
  spill_ns,
  -- T_sync_wait: waiting part of same-stage collectives (waiting for a slower peer of the stage; wait_kind sync), ns; informational, included in t_tp_ns/t_dp_ns/t_ep_ns/t_other_comm_ns.
  t_sync_wait_ns,
  -- How the calls were split into wait and transfer: peers | estimated | mixed (int_breakdown_calls.xfer_source); null without calls.
  xfer_source
) AS
WITH
  win AS (
    SELECT run_id, rank, iteration, start_ns, end_ns, duration_ns
    FROM int_iteration_spans
  ),
  calls AS (
    SELECT *, CASE WHEN wait_kind = 'bubble' THEN xfer_ns ELSE dur_ns END AS part
    FROM int_breakdown_calls
    WHERE iteration IS NOT NULL
  ),
  terms AS (
    SELECT
      run_id,
      rank,
      iteration,
      -- a call's term: its transfer when its wait is bubble (cross-stage group), else the call
      sum(part) FILTER (WHERE traffic_class = 'TP') AS t_tp,
      sum(part) FILTER (WHERE traffic_class = 'PP') AS t_pp,
      sum(part) FILTER (WHERE traffic_class = 'DP') AS t_dp,
      sum(part) FILTER (WHERE traffic_class = 'EP') AS t_ep,
      sum(part) FILTER (WHERE traffic_class = 'EmbTableSyn') AS t_emb,
      sum(part) FILTER (WHERE traffic_class NOT IN ('TP', 'PP', 'DP', 'EP', 'EmbTableSyn'))
        AS t_other,
      sum(wait_ns) FILTER (WHERE wait_kind = 'bubble') AS t_bubble,
      sum(wait_ns) FILTER (WHERE wait_kind = 'sync') AS t_sync_wait,
      CASE
        WHEN count(*) = 0 THEN NULL
        WHEN min(xfer_source) = max(xfer_source) THEN min(xfer_source)
        ELSE 'mixed'
      END AS xfer_source,
      mode(source_format) AS source,
      CASE
        WHEN count(pp_split) = 0 THEN NULL
        WHEN min(pp_split) = max(pp_split) THEN min(pp_split)
        ELSE 'mixed'
      END AS pp_split,
      count(*) AS calls
    FROM calls
    GROUP BY run_id, rank, iteration
  ),
  merged AS MATERIALIZED (
    SELECT
      {'run_id': run_id, 'rank': rank, 'iteration': iteration} AS k, activity, ts_ns, dur_ns
    FROM int_rank_busy_merged
    WHERE activity IN ('comm', 'compute')
  ),
  comm_merged AS (SELECT k, ts_ns, dur_ns FROM merged WHERE activity = 'comm'),
  comp_merged AS (SELECT k, ts_ns, dur_ns FROM merged WHERE activity = 'compute'),
  unions AS (
    SELECT
      k.run_id,
      k.rank,
      k.iteration,
      sum(dur_ns) FILTER (WHERE activity = 'comm') AS comm_ns,
      sum(dur_ns) FILTER (WHERE activity = 'compute') AS comp_ns
    FROM merged
    GROUP BY k
  ),
  hidden AS (
    SELECT k.run_id, k.rank, k.iteration, overlap_ns AS hidden_ns
    FROM interval_overlap(comm_merged, comp_merged)
  ),
  work_raw AS (SELECT k, ts_ns, dur_ns FROM merged),
  -- comm ∪ compute of the iteration
  work_merged AS MATERIALIZED (SELECT k, ts_ns, dur_ns FROM interval_merge(work_raw)),
  work_total AS (
    SELECT k.run_id, k.rank, k.iteration, sum(dur_ns) AS work_ns FROM work_merged GROUP BY k
  ),
  spans AS (
    SELECT
      {'run_id': run_id, 'rank': rank, 'iteration': iteration} AS k, iteration AS w,
      start_ns AS ts_ns, duration_ns AS dur_ns
    FROM win
  ),
  work_inside AS (
    SELECT k.run_id, k.rank, k.iteration, sum(dur_ns) AS inside_ns
    FROM interval_clip(work_merged, spans)
    GROUP BY k
  ),
  kernel_ranks AS (
    SELECT DISTINCT run_id, rank FROM int_kernel_iteration WHERE rank IS NOT NULL
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
      coalesce(t.t_sync_wait, 0) AS t_sync_wait,
      t.xfer_source,
      coalesce(u.comm_ns, 0) AS comm_ns,
      coalesce(u.comp_ns, 0) AS comp_ns,
      coalesce(h.hidden_ns, 0) AS hidden_ns,
      coalesce(wi.inside_ns, 0) AS inside_ns,
      coalesce(wt.work_ns, 0) - coalesce(wi.inside_ns, 0) AS spill,
      t.source,
      t.pp_split,
      coalesce(t.calls, 0) AS calls
    FROM win AS w
    LEFT JOIN terms AS t ON t.run_id = w.run_id AND t.rank = w.rank AND t.iteration = w.iteration
    LEFT JOIN unions AS u ON u.run_id = w.run_id AND u.rank = w.rank AND u.iteration = w.iteration
    LEFT JOIN hidden AS h ON h.run_id = w.run_id AND h.rank = w.rank AND h.iteration = w.iteration
    LEFT JOIN work_total AS wt
      ON wt.run_id = w.run_id AND wt.rank = w.rank AND wt.iteration = w.iteration
    LEFT JOIN work_inside AS wi
      ON wi.run_id = w.run_id AND wi.rank = w.rank AND wi.iteration = w.iteration
    LEFT JOIN kernel_ranks AS kr ON kr.run_id = w.run_id AND kr.rank = w.rank
    LEFT JOIN int_rank_nodes AS n ON n.run_id = w.run_id AND n.rank = w.rank
  ),
  final AS (
    SELECT
      *,
      -- without kernels the work is the communication: compute is the rest of the span
      CASE WHEN has_kernels THEN comp_ns ELSE t_iter - inside_ns END AS t_comp,
      CASE WHEN has_kernels THEN hidden_ns ELSE 0 END AS hidden,
      CASE WHEN has_kernels THEN t_iter - inside_ns ELSE 0 END AS t_idle,
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
  (t_comp + t_comm + t_bubble + t_idle - t_iter - spill)::BIGINT AS overlap_ns,
  t_comm::BIGINT AS t_comm_ns,
  t_comm / nullif(t_iter, 0) AS r_comm,
  t_bubble / nullif(t_iter, 0) AS r_bubble,
  source,
  CASE WHEN has_kernels THEN 'kernels' ELSE 'remainder' END AS comp_source,
  pp_split,
  calls,
  spill::BIGINT AS spill_ns,
  t_sync_wait::BIGINT AS t_sync_wait_ns,
  xfer_source
FROM final
