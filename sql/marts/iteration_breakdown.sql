-- Measured iteration-time breakdown per rank and iteration: the terms the analytical model predicts (T_comp, T_TP, T_PP, T_DP, T_EP, T_EmbTableSyn, T_bubble, T_iter, R_comm, R_bubble) plus idle and exposed vs hidden communication (APNet'24 eqs 1-7, §4.1 PP rule applied to every cross-stage call; model_spec §A.2, §C).
-- One row per (run, rank, iteration) with a timed span; input: int_breakdown_rank_iteration (see it and int_breakdown_calls for the rules: T_TP/T_DP/T_EP whole calls with their same-stage sync wait, also shown as t_sync_wait_ns; T_PP and T_EmbTableSyn transfer only, their waits are T_bubble). One timed list per rank (int_comm_ops_timed: kernel-timed calls on a GPU rank, never also their kernels; a trace before a DeepSpeed log, never both), work attributed to the step that launched it (a lagging GPU keeps its work; work launched outside every step: unattributed_work), comm_ns = on_off.on_ns; t_iter_ns = sum of the t_* terms + t_idle_ns - overlap_ns - spill_ns exactly, and overlap_ns = 0 when nothing runs concurrently.
CREATE OR REPLACE VIEW iteration_breakdown(
  -- Training run identifier.
  run_id,
  -- Global rank.
  rank,
  -- Iteration.
  iteration,
  -- Pipeline stage of the rank (null when unknown: no parallel config).
  stage,
  -- Iteration span start, ns (GPU rank: first start of the step's own work; int_iteration_spans).
  start_ns,
  -- Iteration span end, ns (GPU rank: the next step's first start; the last step: its last end).
  end_ns,
  -- T_iter: iteration duration, ns.
  t_iter_ns,
  -- T_comp: union of compute kernels in the iteration; without kernels the iteration minus communication, ns (see comp_source).
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
  -- T_bubble: waiting part of cross-stage calls: pipeline send/recv (previous/next stage not ready) and EmbTableSyn (the other end stage not ready), ns.
  t_bubble_ns,
  -- Iteration time with neither compute nor communication (GPU idle), ns.
  t_idle_ns,
  -- Union of communication intervals in the iteration (PP waiting included), ns.
  comm_ns,
  -- Communication time not overlapped by compute, ns.
  exposed_comm_ns,
  -- Communication time overlapped (hidden) by compute, ns.
  hidden_comm_ns,
  -- Time counted twice in the sum of terms (communication under compute, concurrent calls), ns.
  overlap_ns,
  -- T_comm = t_tp + t_pp + t_dp + t_ep + t_emb + t_other_comm, ns.
  t_comm_ns,
  -- R_comm = T_comm / T_iter (the paper's communication share).
  r_comm,
  -- R_bubble = T_bubble / T_iter.
  r_bubble,
  -- Parser whose calls gave the communication times: kineto, nsys, deepspeed_comms, ...
  source,
  -- kernels | remainder: where t_comp_ns comes from.
  comp_source,
  -- How PP calls were split into wait and transfer: paired (matching send/recv of both ranks) | fastest_call | mixed.
  pp_split,
  -- Communication calls in the iteration.
  calls,
  -- The iteration's own communication and compute that runs after its span ends (past the next step's first start), ns.
  spill_ns,
  -- T_sync_wait: waiting part of same-stage collectives (waiting for a slower peer of the stage), ns; informational, included in t_tp_ns/t_dp_ns/t_ep_ns/t_other_comm_ns.
  t_sync_wait_ns,
  -- How the calls were split into wait and transfer: peers | estimated | mixed (int_breakdown_calls.xfer_source).
  xfer_source
) AS
SELECT
  run_id, rank, iteration, stage, start_ns, end_ns, t_iter_ns, t_comp_ns, t_tp_ns, t_pp_ns,
  t_dp_ns, t_ep_ns, t_emb_ns, t_other_comm_ns, t_bubble_ns, t_idle_ns, comm_ns, exposed_comm_ns,
  hidden_comm_ns, overlap_ns, t_comm_ns, r_comm, r_bubble, source, comp_source, pp_split, calls,
  spill_ns, t_sync_wait_ns, xfer_source
FROM int_breakdown_rank_iteration
