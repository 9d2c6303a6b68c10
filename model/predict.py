"""Time terms, ratios, utilisation and memory of a run: the model's prediction.

Why: reports compare measured per-type times of a run with the paper's time model (eqs.
1-9). This module turns a rank's predicted traffic (:mod:`commscope.model.traffic`) and the
platform constants into those terms, so ``paper_uniform`` gives eqs. 2-4 and 9 exactly and
``stage_exact`` gives the same structure with each stage's real layers and messages.

Time model of one rank on pipeline stage r (1F1B; eqs. 1, 5, 6):

- T_X = Σ bus bytes of class X / C_X for X in TP, PP, DP, EmbTableSyn, EP. The embedding
  all-reduce runs after backward like the DP all-reduce and is not overlapped either.
- T_comp: ``paper_uniform`` uses eq. 9 (8·m·N·b·s/(p·t·μF)). ``stage_exact`` uses the
  stage's own FLOPs from eq. 11's decomposition: per layer and micro-batch
  4·(24bsh² + 4bs²h)/t with recompute (MoE layers: the MLP's 16bsh² times top-k), plus
  6·b·s·V_pad·h/t for the logits on the last stage.
- T_bubble = (p-1)·(T_comp + T_PP + T_TP + T_EP)/m and T_iter = T_comp + T_TP + T_PP + T_EP
  + T_bubble + T_DP + T_EmbTableSyn.

The paper evaluates rank 0 (``t_iter``). Since the slowest stage sets the pace of a real
pipeline, the result also gives ``t_iter_critical``, the largest T_iter over stages; MFU,
HFU and the what-if ranking use that one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any

from commscope.model.config import RunConfig, config_to_dict
from commscope.model.equations import (
    flop_per_microbatch,
    flops_per_iteration,
    hfu,
    mfu,
    model_flops_per_iteration,
    parameter_count,
    r_bubble,
    r_comm,
    stage_bubble,
)
from commscope.model.mapping import group_spans_nodes, node_of
from commscope.model.traffic import (
    TRAFFIC_CLASSES,
    expert_params,
    item_record,
    padded_vocab,
    stage_dp_params,
    stage_expert_params,
    stage_items,
    stage_layers,
    stage_of_rank,
    summarize,
)

#: Group kind whose node span decides a class's bandwidth on a mapping-aware platform.
_CLASS_GROUP = {"TP": "tp", "PP": "pp", "DP": "dp", "EmbTableSyn": "emb", "EP": "ep"}


@lru_cache(maxsize=8192)
def effective_bandwidths(run: RunConfig) -> dict[str, float]:
    """Bus bandwidth (B/s) the time model uses for each traffic class.

    On a mapping-aware platform (``c_intra`` and ``c_inter`` set) a class gets ``c_inter``
    when any of its groups spans nodes and ``c_intra`` otherwise; else the per-type
    constants (C_TP, C_PP, C_DP; EmbTableSyn uses C_DP; EP uses c_ep or C_DP).
    """
    pf = run.platform
    if pf.mapping_aware:
        assert pf.c_intra is not None and pf.c_inter is not None
        return {
            cls: (pf.c_inter if group_spans_nodes(run, kind) else pf.c_intra)
            for cls, kind in _CLASS_GROUP.items()
        }
    return {
        "TP": pf.c_tp,
        "PP": pf.c_pp,
        "DP": pf.c_dp,
        "EmbTableSyn": pf.c_dp,
        "EP": pf.c_ep if pf.c_ep is not None else pf.c_dp,
    }


def stage_flops_per_microbatch(run: RunConfig, stage: int, mode: str = "stage_exact") -> float:
    """FLOPs one rank of ``stage`` executes per micro-batch (see the module docstring)."""
    model, par = run.model, run.parallel
    b, s, h, t = model.micro_batch, model.seq, model.hidden, par.tp
    if mode == "paper_uniform":
        n = parameter_count(model.layers, h, s, model.vocab)
        return flop_per_microbatch(n, par.pp, t, b, s, model.recompute)
    passes = 4 if model.recompute else 3
    attention = 8 * b * s * h * h + 4 * b * s * s * h
    mlp = 16 * b * s * h * h
    n_layers = stage_layers(run)[stage]
    start = sum(stage_layers(run)[:stage])
    n_moe = sum(1 for i in range(start, start + n_layers) if model.is_moe_layer(i))
    forward = (n_layers - n_moe) * (attention + mlp) + n_moe * (attention + model.top_k * mlp)
    flops = passes * forward
    if stage == par.pp - 1:
        vpad = padded_vocab(model.vocab, t, model.vocab_divisible_by)
        flops += 6 * b * s * vpad * h  # logits: forward + backward, not recomputed
    return flops / t


@dataclass(frozen=True)
class StageTimes:
    """Per-iteration time terms (seconds) of one rank of a pipeline stage."""

    stage: int
    t_comp: float
    t_tp: float
    t_pp: float
    t_dp: float
    t_emb: float
    t_ep: float
    t_bubble: float
    t_iter: float

    @property
    def t_comm(self) -> float:
        """T_comm = T_TP + T_PP + T_DP + T_EmbTableSyn + T_EP."""
        return self.t_tp + self.t_pp + self.t_dp + self.t_emb + self.t_ep


@lru_cache(maxsize=65536)
def stage_times(run: RunConfig, stage: int, mode: str = "stage_exact") -> StageTimes:
    """Time terms of one rank of ``stage`` (eqs. 1-6 with that stage's traffic and FLOPs)."""
    pf = run.platform
    m, p = run.micro_batches, run.parallel.pp
    bw = effective_bandwidths(run)
    bus = {cls: 0.0 for cls in TRAFFIC_CLASSES}
    for item in stage_items(run, stage, mode):
        bus[item.traffic_class] += item.bus_bytes
    t_class = {cls: bus[cls] / bw[cls] for cls in TRAFFIC_CLASSES}
    comp = m * stage_flops_per_microbatch(run, stage, mode) / (pf.mu * pf.peak_flops)
    pipelined = comp + t_class["TP"] + t_class["PP"] + t_class["EP"]
    bubble = (p - 1) * pipelined / m
    return StageTimes(
        stage=stage,
        t_comp=comp,
        t_tp=t_class["TP"],
        t_pp=t_class["PP"],
        t_dp=t_class["DP"],
        t_emb=t_class["EmbTableSyn"],
        t_ep=t_class["EP"],
        t_bubble=bubble,
        t_iter=pipelined + bubble + t_class["DP"] + t_class["EmbTableSyn"],
    )


def critical_stage(run: RunConfig, mode: str = "stage_exact") -> StageTimes:
    """The stage with the largest T_iter (ties: the earliest stage)."""
    all_times = [stage_times(run, s, mode) for s in range(run.parallel.pp)]
    return max(all_times, key=lambda st: (st.t_iter, -st.stage))


@lru_cache(maxsize=4096)
def pipeline_stage_times(run: RunConfig, mode: str = "stage_exact") -> tuple[StageTimes, ...]:
    """Every stage's time terms within one common iteration (per-stage bubble, issue 17).

    Every stage lives the same iteration: T_iter is eq. 6 of the critical stage (the
    largest over stages; stage 0 when it is the slowest, as the paper assumes). A stage's
    T_comp, T_TP, T_PP, T_DP, T_EmbTableSyn and T_EP are its own (:func:`stage_times`); its
    bubble is what is left, :func:`~commscope.model.equations.stage_bubble` (eqs. 5/7
    generalised per stage), so ``t_iter = t_comp + t_comm + t_bubble`` on every stage and the
    critical stage's bubble is eq. 5's (p-1)·(T_comp + T_PP + T_TP + T_EP)/m.

    Args:
        run: the configuration.
        mode: ``"stage_exact"`` or ``"paper_uniform"``.

    Returns:
        One :class:`StageTimes` per stage, in stage order, all with the same ``t_iter``.
    """
    m = run.micro_batches
    own = [stage_times(run, s, mode) for s in range(run.parallel.pp)]
    t_iteration = max(st.t_iter for st in own)
    return tuple(
        replace(
            st,
            t_iter=t_iteration,
            t_bubble=stage_bubble(
                t_iteration,
                m,
                st.t_comp / m,
                st.t_pp / m,
                st.t_tp / m,
                st.t_dp,
                st.t_emb,
                st.t_ep / m,
            ),
        )
        for st in own
    )


def stage_time_rows(run: RunConfig, mode: str = "stage_exact") -> list[dict[str, Any]]:
    """:func:`pipeline_stage_times` as long rows (stage, term, value), ``r_bubble`` added.

    Terms: ``t_iter, t_comp, t_tp, t_pp, t_dp, t_emb, t_ep, t_bubble`` (s) and ``r_bubble``
    = t_bubble / t_iter; the relation ``predicted_stage_times`` of pipeline/derive.py.
    """
    rows: list[dict[str, Any]] = []
    for st in pipeline_stage_times(run, mode):
        values = {
            "t_iter": st.t_iter,
            "t_comp": st.t_comp,
            "t_tp": st.t_tp,
            "t_pp": st.t_pp,
            "t_dp": st.t_dp,
            "t_emb": st.t_emb,
            "t_ep": st.t_ep,
            "t_bubble": st.t_bubble,
            "r_bubble": st.t_bubble / st.t_iter if st.t_iter > 0 else 0.0,
        }
        rows += [{"stage": st.stage, "term": k, "value": float(v)} for k, v in values.items()]
    return rows


def stage_memory_breakdown(run: RunConfig, stage: int) -> dict[str, float]:
    """Estimated peak device memory of one rank of ``stage`` by part (bytes), for the what-if search.

    Static: weights δ + gradients δ + Adam states (12 B/param with mixed precision: fp32
    master copy, momentum and variance; 8 in fp32), per parameter of the rank (its stage's
    parameters over t, experts included); ZeRO-1 divides the optimizer states by d, ZeRO-2
    also the gradients, ZeRO-3 also the weights (Rajbhandari et al., SC'20, §5).
    Activations (Korthikanti et al., 2023): with recompute, each in-flight micro-batch keeps
    one δbsh checkpoint per layer plus one layer's working set sbh(10 + 24/t + 5as/(ht))·δ/2
    (sbh(34/t + 5as/(ht))·δ/2 with sequence parallelism); without, every layer's working set
    per in-flight micro-batch. 1F1B keeps min(m, p - r) micro-batches in flight on stage r.
    The last stage adds fp32 logits, 4·b·s·V_pad/t. An estimate, not an allocator trace.

    Returns:
        ``weights, gradients, optimizer, activations`` and their sum ``total`` (bytes).
    """
    model, par = run.model, run.parallel
    delta = model.dtype_bytes
    params = stage_dp_params(run, stage) + stage_expert_params(run, stage)
    weights, grads, optim = float(delta), float(delta), 12.0 if delta == 2 else 8.0
    if par.zero_stage >= 1:
        optim /= par.dp
    if par.zero_stage >= 2:
        grads /= par.dp
    if par.zero_stage >= 3:
        weights /= par.dp
    b, s, h, t = model.micro_batch, model.seq, model.hidden, par.tp
    a = model.num_heads
    if par.sequence_parallel:
        layer = s * b * h * (34 / t + 5 * a * s / (h * t)) * delta / 2
        checkpoint = delta * b * s * h / t
    else:
        layer = s * b * h * (10 + 24 / t + 5 * a * s / (h * t)) * delta / 2
        checkpoint = delta * b * s * h
    n_layers = stage_layers(run)[stage]
    in_flight = min(run.micro_batches, par.pp - stage)
    if model.recompute:
        activations = in_flight * n_layers * checkpoint + layer
    else:
        activations = in_flight * n_layers * layer
    if stage == par.pp - 1:
        activations += 4 * b * s * padded_vocab(model.vocab, t, model.vocab_divisible_by) / t
    out = {
        "weights": params * weights,
        "gradients": params * grads,
        "optimizer": params * optim,
        "activations": float(activations),
    }
    out["total"] = out["weights"] + out["gradients"] + out["optimizer"] + out["activations"]
    return out


def stage_memory_bytes(run: RunConfig, stage: int) -> float:
    """Total of :func:`stage_memory_breakdown` (bytes)."""
    return stage_memory_breakdown(run, stage)["total"]


def critical_memory(run: RunConfig) -> tuple[int, dict[str, float]]:
    """The stage with the largest memory estimate and its breakdown."""
    parts = [stage_memory_breakdown(run, s) for s in range(run.parallel.pp)]
    stage = max(range(len(parts)), key=lambda s: (parts[s]["total"], -s))
    return stage, parts[stage]


def memory_bytes(run: RunConfig) -> float:
    """Largest :func:`stage_memory_bytes` over the stages."""
    return max(stage_memory_bytes(run, s) for s in range(run.parallel.pp))


def time_terms(run: RunConfig, mode: str = "stage_exact", rank: int = 0) -> dict[str, float]:
    """The flat time terms, ratios and utilisation of ``rank`` (all floats, seconds for times).

    Keys: ``t_comp, t_tp, t_pp, t_dp, t_emb, t_ep, t_comm, t_bubble, t_iter``; the
    per-micro-batch ``t_comp_mb, t_tp_mb, t_pp_mb, t_ep_mb``; ``t_iter_critical`` and
    ``critical_stage`` (the slowest stage); ``r_bubble_eq7`` (closed form (p-1)/(p-1+m)),
    ``r_bubble`` (T_bubble/T_iter with T_DP included), ``r_comm``; ``mfu`` and ``hfu`` (at
    ``t_iter_critical``).
    """
    model, pf = run.model, run.platform
    st = stage_times(run, stage_of_rank(run, rank), mode)
    crit = critical_stage(run, mode)
    m = run.micro_batches
    flops = flops_per_iteration(
        model.global_batch, model.seq, model.layers, model.hidden, model.vocab
    )
    model_flops = model_flops_per_iteration(
        model.global_batch, model.seq, model.layers, model.hidden, model.vocab
    )
    terms: dict[str, float] = {k: v for k, v in asdict(st).items() if k != "stage"}
    terms["t_comm"] = st.t_comm
    for key in ("t_comp", "t_tp", "t_pp", "t_ep"):
        terms[f"{key}_mb"] = terms[key] / m
    terms["t_iter_critical"] = crit.t_iter
    terms["critical_stage"] = float(crit.stage)
    terms["r_bubble_eq7"] = r_bubble(run.parallel.pp, m)
    terms["r_bubble"] = st.t_bubble / st.t_iter if st.t_iter > 0 else 0.0
    terms["r_comm"] = r_comm(st.t_comm, st.t_iter)
    terms["mfu"] = mfu(model_flops, crit.t_iter, run.world, pf.peak_flops)
    terms["hfu"] = hfu(flops, crit.t_iter, run.world, pf.peak_flops)
    return terms


def predict_run(run: RunConfig, mode: str = "stage_exact", rank: int = 0) -> dict[str, Any]:
    """The model's full prediction for one rank of a run, as a JSON-safe dict.

    Every top-level number is a scalar term of the prediction (time terms in seconds,
    ratios, counts); nested values (``coords``, ``layers_per_stage``, ``bandwidths``,
    ``traffic``, ``items``, ``config``) give the detail.

    Args:
        run: the configuration.
        mode: ``"stage_exact"`` or ``"paper_uniform"``.
        rank: the rank to report traffic and time terms for (the paper uses rank 0).

    Returns:
        The :func:`time_terms` keys, plus ``mode, rank, stage, node, world,
        micro_batches, padded_vocab, n_params`` (eq. 10), ``n_params_total`` (with experts),
        ``flops_per_iteration`` (eq. 11, B = gb), ``model_flops_per_iteration``,
        ``memory_bytes`` (the rank's estimate), ``coords``, ``layers_per_stage``,
        ``bandwidths`` (B/s per class), ``stages`` (every stage's terms within one common
        iteration, :func:`pipeline_stage_times`, with ``r_bubble``), ``traffic`` (per class: ``count, msg_bytes,
        volume_bytes, sent_bytes, bus_bytes``), ``items`` (op-level detail) and ``config``.
    """
    model, par, pf = run.model, run.parallel, run.platform
    stage = stage_of_rank(run, rank)
    items = stage_items(run, stage, mode)
    n = parameter_count(model.layers, model.hidden, model.seq, model.vocab)
    moe_layers = sum(1 for i in range(model.layers) if model.is_moe_layer(i))
    n_total = n + moe_layers * (
        (model.experts - 1) * expert_params(model.hidden) + model.hidden * model.experts
    )
    stage_c, data_c, model_c = run.coords(rank)
    return {
        "mode": mode,
        "rank": rank,
        "stage": stage,
        "node": node_of(rank, pf.gpus_per_node),
        "world": run.world,
        "micro_batches": run.micro_batches,
        "padded_vocab": padded_vocab(model.vocab, par.tp, model.vocab_divisible_by),
        "n_params": n,
        "n_params_total": n_total,
        "flops_per_iteration": flops_per_iteration(
            model.global_batch, model.seq, model.layers, model.hidden, model.vocab
        ),
        "model_flops_per_iteration": model_flops_per_iteration(
            model.global_batch, model.seq, model.layers, model.hidden, model.vocab
        ),
        **time_terms(run, mode, rank),
        "memory_bytes": stage_memory_bytes(run, stage),
        "coords": {"pipe": stage_c, "data": data_c, "model": model_c},
        "layers_per_stage": list(stage_layers(run)),
        "bandwidths": effective_bandwidths(run),
        "stages": [
            {**asdict(st), "r_bubble": st.t_bubble / st.t_iter if st.t_iter > 0 else 0.0}
            for st in pipeline_stage_times(run, mode)
        ],
        "traffic": summarize(items),
        "items": [item_record(i) for i in items],
        "config": config_to_dict(run),
    }
