"""What-if ranking of parallel layouts (the ConfigTuner idea): search, predict, rank.

Why: because dense-model communication is predictable, the model can compare layouts before
any run. For a model, a GPU count and a (calibrated) platform, :func:`advise` searches the
(p, t, d, b) and rank mappings, predicts each layout's iteration time (slowest stage) with its
terms and the peak memory per GPU, and ranks them. μ may follow a curve of the work per kernel
(:mod:`commscope.model.efficiency`); every constant used is returned with its source.

Validity rules: p·t·d = GPUs; p ≤ l; t divides h (and the head count when given);
t ≤ ``max_tp`` (default: GPUs per node, keeping TP inside a node); gb is a multiple of b·d;
ep divides d and E; ZeRO-2/3 only without pipeline parallelism (DeepSpeed refuses the
combination); the memory estimate fits ``platform.gpu_memory_bytes`` when that is set.

Pruning (the ConfigTuner paper's own rules are not in the text we have, so these are ours):
memory grows with b, so the first b that does not fit ends its (p, t, d); mappings that give
the same prediction are predicted once and reported as one row (all of them on a platform
that is not mapping-aware; those whose traffic classes span the same nodes otherwise); branch
and bound on :func:`lower_bound` stops once it exceeds the ``keep``-th best T_iter.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import permutations
from typing import Any

from commscope.model.config import (
    AXES,
    MAPPING_PRESETS,
    ModelConfig,
    ParallelConfig,
    Platform,
    RunConfig,
    normalize_order,
)
from commscope.model.efficiency import Constant, MuCurve
from commscope.model.equations import model_flops_per_iteration, r_bubble
from commscope.model.mapping import group_spans_nodes
from commscope.model.predict import (
    critical_memory,
    critical_stage,
    memory_bytes,
    stage_flops_per_microbatch,
)

DEFAULT_MICRO_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_MAPPINGS: tuple[str, ...] = ("default", "customized")


@dataclass(frozen=True)
class Candidate:
    """One evaluated layout (one class of mappings that tie: the same prediction).

    Attributes:
        pp, tp, dp: the parallel sizes.
        micro_batch: b.
        micro_batches: m = gb / (b·d).
        mapping_name: the first mapping of the tie class (preset or axis order joined by ``-``).
        mapping: its axis order.
        t_iter: predicted iteration time of the slowest stage (s).
        critical_stage: that stage.
        r_bubble: eq. 7.
        r_comm: T_comm / T_iter of the critical stage.
        mfu: model FLOPs utilisation at ``t_iter``.
        memory_bytes: estimated peak memory per GPU (the largest stage's).
        fits: whether it fits ``platform.gpu_memory_bytes`` (True when unknown).
        mappings: every mapping that gives this same prediction (ties collapsed into one row).
        mu: the utilisation used (from the μ curve when one is given).
        t_comp, t_tp, t_pp, t_dp, t_emb, t_ep, t_bubble: the critical stage's terms (s).
        memory: the peak stage's ``weights, gradients, optimizer, activations`` (bytes).
    """

    pp: int
    tp: int
    dp: int
    micro_batch: int
    micro_batches: int
    mapping_name: str
    mapping: tuple[str, str, str]
    t_iter: float
    critical_stage: int
    r_bubble: float
    r_comm: float
    mfu: float
    memory_bytes: float
    fits: bool
    mappings: tuple[str, ...] = ()
    mu: float = 0.0
    t_comp: float = 0.0
    t_tp: float = 0.0
    t_pp: float = 0.0
    t_dp: float = 0.0
    t_emb: float = 0.0
    t_ep: float = 0.0
    t_bubble: float = 0.0
    memory: dict[str, float] = field(default_factory=dict, compare=False, hash=False)

    @property
    def layout(self) -> tuple[int, int, int, int]:
        """(p, t, d, b)."""
        return (self.pp, self.tp, self.dp, self.micro_batch)

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe dict of the candidate."""
        out = asdict(self)
        out["mapping"] = list(self.mapping)
        out["mappings"] = list(self.mappings)
        return out


@dataclass(frozen=True)
class Advice:
    """Result of :func:`advise`.

    Attributes:
        candidates: evaluated layouts, fastest first; one row per (p, t, d, b) and class of
            tied mappings.
        search_space_size: the exhaustive count: (p, t, d, b, mapping) tuples, valid or not.
        valid: tuples that passed every rule (memory included).
        rejected: infeasible tuples by reason (rules, memory).
        elapsed_s: wall time of the search.
        mapping_aware: whether mappings could change the prediction.
        evaluated: time predictions computed (one per (p, t, d, b) and mapping class).
        pruned: valid tuples not predicted, by reason: ``tied mapping`` (same prediction as
            an evaluated mapping), ``lower bound above the k-th best`` (branch and bound).
        memory_pruned_unchecked: of the memory rejections, tuples whose memory was not even
            estimated (a smaller b of the same (p, t, d) already did not fit; memory grows
            with b).
        constants: every constant used, with its source.
        baseline: the given layout (e.g. the measured run's), predicted like the others.
        baseline_rank: its 1-based place in the ranking (ties: the best place).
        baseline_measured_t_iter: its measured T_iter when given (s).
    """

    candidates: tuple[Candidate, ...]
    search_space_size: int
    valid: int
    rejected: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    mapping_aware: bool = False
    evaluated: int = 0
    pruned: dict[str, int] = field(default_factory=dict)
    memory_pruned_unchecked: int = 0
    constants: tuple[Constant, ...] = ()
    baseline: Candidate | None = None
    baseline_rank: int | None = None
    baseline_measured_t_iter: float | None = None

    @property
    def expected_gain(self) -> float | None:
        """Predicted speed-up of the best layout over the baseline (baseline T_iter / best)."""
        if self.baseline is None or not self.candidates:
            return None
        return self.baseline.t_iter / self.candidates[0].t_iter

    def as_dict(self, top: int = 0) -> dict[str, Any]:
        """JSON-safe dict (``top`` > 0 keeps the first ``top`` candidates)."""
        shown = self.candidates if top <= 0 else self.candidates[:top]
        return {
            "search_space_size": self.search_space_size,
            "valid": self.valid,
            "evaluated": self.evaluated,
            "rejected": dict(self.rejected),
            "pruned": dict(self.pruned),
            "memory_pruned_unchecked": self.memory_pruned_unchecked,
            "elapsed_s": self.elapsed_s,
            "mapping_aware": self.mapping_aware,
            "constants": [c.as_dict() for c in self.constants],
            "baseline": None if self.baseline is None else self.baseline.as_dict(),
            "baseline_rank": self.baseline_rank,
            "baseline_measured_t_iter": self.baseline_measured_t_iter,
            "expected_gain": self.expected_gain,
            "candidates": [c.as_dict() for c in shown],
        }


def mapping_orders(names: Iterable[str]) -> dict[str, tuple[str, str, str]]:
    """Resolve mapping names to axis orders.

    Args:
        names: presets (``default``, ``customized``), ``all`` (every permutation of the
            three axes), or explicit orders such as ``"data,pipe,model"``.

    Returns:
        Name -> order, without duplicate orders (first name wins).
    """
    out: dict[str, tuple[str, str, str]] = {}
    for name in names:
        key = name.strip()
        if key.lower() == "all":
            for perm in permutations(AXES):
                out.setdefault("-".join(perm), (perm[0], perm[1], perm[2]))
            continue
        order = normalize_order(key)
        label = key.lower() if key.lower() in MAPPING_PRESETS else "-".join(order)
        if order not in out.values():
            out[label] = order
    return out


def _divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` in increasing order."""
    return [k for k in range(1, n + 1) if n % k == 0]


PLATFORM_CONSTANTS: dict[str, str] = {
    "peak_flops": "FLOP/s",
    "mu": "ratio",
    "c_tp": "B/s",
    "c_pp": "B/s",
    "c_dp": "B/s",
    "c_ep": "B/s",
    "c_intra": "B/s",
    "c_inter": "B/s",
    "gpus_per_node": "GPUs",
    "gpu_memory_bytes": "bytes",
}
"""Platform fields the prediction reads, with their units."""


def platform_constants(
    platform: Platform,
    sources: Mapping[str, str] | None = None,
    mu_curve: MuCurve | None = None,
) -> tuple[Constant, ...]:
    """Every constant a prediction on ``platform`` uses, with its source.

    Args:
        platform: the platform.
        sources: constant name -> source; names not given are ``config``.
        mu_curve: the μ curve; when given it replaces the platform's single ``mu``.

    Returns:
        The constants (fields that are ``None`` and unused are left out).
    """
    given = dict(sources or {})
    out: list[Constant] = []
    for name, unit in PLATFORM_CONSTANTS.items():
        if name == "mu" and mu_curve is not None:
            out += mu_curve.constants()
            continue
        value = getattr(platform, name)
        if value is None:
            continue
        if name in ("c_tp", "c_pp", "c_dp", "c_ep") and platform.mapping_aware:
            continue
        out.append(Constant(name, float(value), unit, given.get(name, "config")))
    return tuple(out)


def _mapping_classes(
    run: RunConfig, orders: Mapping[str, tuple[str, str, str]]
) -> list[tuple[str, ...]]:
    """Mapping names grouped by the prediction they give (one class per distinct result).

    On a platform that is not mapping-aware every mapping gives the same prediction; on a
    mapping-aware one the prediction depends only on which traffic classes span nodes
    (:func:`commscope.model.predict.effective_bandwidths`), so mappings with the same spans tie.
    """
    if not run.platform.mapping_aware:
        return [tuple(orders)]
    classes: dict[tuple[bool, ...], list[str]] = {}
    for name, order in orders.items():
        mapped = replace(run, mapping=order)
        key = tuple(group_spans_nodes(mapped, k) for k in ("tp", "pp", "dp", "emb", "ep"))
        classes.setdefault(key, []).append(name)
    return [tuple(v) for v in classes.values()]


def _candidate(
    run: RunConfig,
    names: tuple[str, ...],
    mode: str,
    model_flops: float,
    fits: bool,
) -> Candidate:
    """Predict one layout (one mapping class) and package it."""
    crit = critical_stage(run, mode)
    _, mem = critical_memory(run)
    pf = run.platform
    return Candidate(
        pp=run.parallel.pp,
        tp=run.parallel.tp,
        dp=run.parallel.dp,
        micro_batch=run.model.micro_batch,
        micro_batches=run.micro_batches,
        mapping_name=names[0],
        mapping=run.mapping,
        t_iter=crit.t_iter,
        critical_stage=crit.stage,
        r_bubble=r_bubble(run.parallel.pp, run.micro_batches),
        r_comm=crit.t_comm / crit.t_iter if crit.t_iter > 0 else 0.0,
        mfu=model_flops / (crit.t_iter * run.world * pf.peak_flops),
        memory_bytes=mem["total"],
        fits=fits,
        mappings=names,
        mu=pf.mu,
        t_comp=crit.t_comp,
        t_tp=crit.t_tp,
        t_pp=crit.t_pp,
        t_dp=crit.t_dp,
        t_emb=crit.t_emb,
        t_ep=crit.t_ep,
        t_bubble=crit.t_bubble,
        memory={k: v for k, v in mem.items() if k != "total"},
    )


def lower_bound(run: RunConfig, mode: str = "stage_exact") -> float:
    """A lower bound of the predicted T_iter that needs no traffic: max over stages of
    T_comp_s · (1 + (p-1)/m).

    Every stage's T_iter (eq. 6) is at least its pipelined work times 1 + (p-1)/m (eq. 5's
    bubble over it), and the pipelined work is at least the stage's compute; the critical
    stage's T_iter is the largest. Mappings do not change it.
    """
    pf, p, m = run.platform, run.parallel.pp, run.micro_batches
    comp = max(stage_flops_per_microbatch(run, s, mode) for s in range(p)) * m
    return comp / (pf.mu * pf.peak_flops) * (1 + (p - 1) / m)


def advise(
    model: ModelConfig,
    gpus: int,
    platform: Platform,
    *,
    template: ParallelConfig | None = None,
    micro_batch_options: Sequence[int] | None = None,
    mappings: Sequence[str] = DEFAULT_MAPPINGS,
    max_tp: int | None = None,
    require_fit: bool = True,
    mode: str = "stage_exact",
    mu_curve: MuCurve | None = None,
    keep: int | None = None,
    baseline: RunConfig | None = None,
    baseline_measured_t_iter: float | None = None,
    sources: Mapping[str, str] | None = None,
) -> Advice:
    """Search the layouts of ``model`` on ``gpus`` GPUs the ConfigTuner way and rank them.

    The search: (1) structural rules reject (p, t, d) that no framework runs; (2) memory:
    per (p, t, d), micro-batch sizes are tried in increasing order and the first that does
    not fit ends the list (the estimate grows with b); (3) mappings that give the same
    prediction are evaluated once (ties collapsed); (4) branch and bound: the remaining
    (p, t, d, b) are predicted in increasing order of :func:`lower_bound`, stopping when the
    bound exceeds the ``keep``-th best T_iter found (and the baseline's, so the baseline's
    place in the ranking is exact). ``keep=None`` predicts every valid layout.

    Args:
        model: the model; ``global_batch`` is kept, ``micro_batch`` is searched.
        gpus: total GPUs.
        platform: constants (calibrated ones give meaningful times).
        template: the non-searched parallel options (ep, ZeRO, SP, partitioner, ...).
        micro_batch_options: micro-batch sizes to try (default powers of two up to 64, plus
            the model's own b).
        mappings: mapping names (see :func:`mapping_orders`).
        max_tp: largest tensor-parallel size (default ``platform.gpus_per_node``).
        require_fit: drop layouts whose memory estimate exceeds the GPU memory.
        mode: ``"stage_exact"`` or ``"paper_uniform"``.
        mu_curve: μ as a function of (b, s, h, t); ``None`` keeps ``platform.mu``.
        keep: how many of the best layouts must be exact (branch and bound); ``None``: all.
        baseline: a layout to place in the ranking (e.g. the measured run's own); it is
            predicted with the same platform and curve.
        baseline_measured_t_iter: the baseline's measured T_iter (s), reported beside it.
        sources: the platform constants' sources (see :func:`platform_constants`).

    Returns:
        The ranked :class:`Advice`.

    Raises:
        ValueError: ``gpus`` < 1 or ``keep`` < 1.
    """
    if gpus < 1:
        raise ValueError("gpus must be >= 1")
    if keep is not None and keep < 1:
        raise ValueError("keep must be >= 1")
    started = time.perf_counter()
    template = template or ParallelConfig(pp=1, tp=1, dp=1)
    tp_limit = max_tp if max_tp is not None else platform.gpus_per_node
    options = sorted(set(micro_batch_options or DEFAULT_MICRO_BATCHES) | {model.micro_batch})
    orders = mapping_orders(mappings)
    model_flops = model_flops_per_iteration(
        model.global_batch, model.seq, model.layers, model.hidden, model.vocab
    )
    rejected: dict[str, int] = {}
    pruned: dict[str, int] = {}
    space = 0
    unchecked = 0
    valid = 0

    def count(table: dict[str, int], reason: str, n: int) -> None:
        if n:
            table[reason] = table.get(reason, 0) + n

    def platform_for(b: int, t: int) -> Platform:
        if mu_curve is None:
            return platform
        return replace(platform, mu=mu_curve.mu(b, model.seq, model.hidden, t))

    first_order = next(iter(orders.values()))
    feasible: list[tuple[float, RunConfig, bool]] = []
    for pp in _divisors(gpus):
        for tp in _divisors(gpus // pp):
            dp = gpus // (pp * tp)
            n_tuples = len(options) * len(orders)
            space += n_tuples
            reason = _layout_problem(model, template, pp, tp, dp, tp_limit)
            if reason:
                count(rejected, reason, n_tuples)
                continue
            par = replace(template, pp=pp, tp=tp, dp=dp, layers_per_stage=None)
            too_big = False
            for b in options:
                if model.global_batch % (b * dp):
                    count(rejected, "global batch not a multiple of b*d", len(orders))
                    continue
                if too_big:
                    count(rejected, "does not fit in GPU memory", len(orders))
                    unchecked += len(orders)
                    continue
                sized = replace(model, micro_batch=b, micro_batches=None)
                run = RunConfig(
                    model=sized, parallel=par, platform=platform_for(b, tp), mapping=first_order
                )
                mem = memory_bytes(run)
                fits = platform.gpu_memory_bytes is None or mem <= platform.gpu_memory_bytes
                if require_fit and not fits:
                    count(rejected, "does not fit in GPU memory", len(orders))
                    too_big = True
                    continue
                valid += len(orders)
                feasible.append((lower_bound(run, mode), run, fits))

    base_cand: Candidate | None = None
    if baseline is not None:
        b0 = baseline.model.micro_batch
        base_run = replace(baseline, platform=platform_for(b0, baseline.parallel.tp))
        base_mem = memory_bytes(base_run)
        base_fits = platform.gpu_memory_bytes is None or base_mem <= platform.gpu_memory_bytes
        label = next(
            (n for n, o in orders.items() if o == baseline.mapping), "-".join(baseline.mapping)
        )
        base_cand = _candidate(base_run, (label,), mode, model_flops, base_fits)

    feasible.sort(key=lambda item: item[0])
    best: list[float] = []  # sorted T_iter of the evaluated candidates (up to ``keep``)
    candidates: list[Candidate] = []
    evaluated = 0
    for index, (bound, run, fits) in enumerate(feasible):
        if keep is not None and len(best) >= keep:
            limit = best[keep - 1]
            if base_cand is not None:
                limit = max(limit, base_cand.t_iter)
            if bound > limit:
                rest = len(feasible) - index
                count(pruned, "lower bound above the k-th best", rest * len(orders))
                break
        classes = _mapping_classes(run, orders)
        for names in classes:
            mapped = replace(run, mapping=orders[names[0]])
            cand = _candidate(mapped, names, mode, model_flops, fits)
            evaluated += 1
            count(pruned, "tied mapping", len(names) - 1)
            candidates.append(cand)
            bisect.insort(best, cand.t_iter)
            if keep is not None:
                del best[keep:]
    position = {name: i for i, name in enumerate(orders)}
    candidates.sort(key=lambda c: (c.t_iter, c.memory_bytes, c.pp, c.tp, position[c.mapping_name]))
    rank = None
    if base_cand is not None:
        rank = 1 + sum(1 for c in candidates if c.t_iter < base_cand.t_iter * (1 - 1e-12))
    return Advice(
        candidates=tuple(candidates),
        search_space_size=space,
        valid=valid,
        rejected=rejected,
        elapsed_s=time.perf_counter() - started,
        mapping_aware=platform.mapping_aware,
        evaluated=evaluated,
        pruned=pruned,
        memory_pruned_unchecked=unchecked,
        constants=platform_constants(platform, sources, mu_curve),
        baseline=base_cand,
        baseline_rank=rank,
        baseline_measured_t_iter=baseline_measured_t_iter,
    )


def _layout_problem(
    model: ModelConfig, template: ParallelConfig, pp: int, tp: int, dp: int, tp_limit: int
) -> str | None:
    """Why (p, t, d) cannot run this model, or ``None`` if it can."""
    if pp > model.layers:
        return "more stages than layers"
    if tp > tp_limit:
        return "tp larger than max_tp"
    if model.hidden % tp or (model.heads is not None and model.heads % tp):
        return "tp does not divide hidden size or heads"
    if model.global_batch % dp:
        return "global batch not a multiple of d"
    if template.zero_stage >= 2 and pp > 1:
        return "ZeRO-2/3 with pipeline parallelism"
    if dp % template.ep or (model.is_moe and model.experts % template.ep):
        return "ep does not divide d or experts"
    return None
