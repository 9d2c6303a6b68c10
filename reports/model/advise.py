"""What-if ranking of parallel layouts (the ConfigTuner idea): enumerate, predict, rank.

Why: because dense-model communication is predictable, the model can compare layouts before
any run. For a model, a GPU count and a (calibrated) platform, this module enumerates every
valid (p, t, d, b, m) and rank mapping, predicts the iteration time of the slowest pipeline
stage and the peak memory per GPU, and ranks the layouts by time. The mapping only changes
the prediction on a mapping-aware platform (``c_intra``/``c_inter`` set); otherwise mappings
tie, which the result reports.

Validity rules: p·t·d = GPUs; p ≤ l; t divides h (and the head count when given);
t ≤ ``max_tp`` (default: GPUs per node, keeping TP inside a node); gb is a multiple of b·d;
ep divides d and E; ZeRO-2/3 only without pipeline parallelism (DeepSpeed refuses the
combination); the memory estimate fits ``platform.gpu_memory_bytes`` when that is set.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import permutations
from typing import Any

from reports.model.config import (
    AXES,
    MAPPING_PRESETS,
    ModelConfig,
    ParallelConfig,
    Platform,
    RunConfig,
    normalize_order,
)
from reports.model.equations import model_flops_per_iteration, r_bubble
from reports.model.predict import critical_stage, memory_bytes

DEFAULT_MICRO_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_MAPPINGS: tuple[str, ...] = ("default", "customized")


@dataclass(frozen=True)
class Candidate:
    """One evaluated layout.

    Attributes:
        pp, tp, dp: the parallel sizes.
        micro_batch: b.
        micro_batches: m = gb / (b·d).
        mapping_name: the mapping's name (preset or axis order joined by ``-``).
        mapping: the axis order.
        t_iter: predicted iteration time of the slowest stage (s).
        critical_stage: that stage.
        r_bubble: eq. 7.
        r_comm: T_comm / T_iter of the critical stage.
        mfu: model FLOPs utilisation at ``t_iter``.
        memory_bytes: estimated peak memory per GPU.
        fits: whether it fits ``platform.gpu_memory_bytes`` (True when unknown).
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

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe dict of the candidate."""
        out = asdict(self)
        out["mapping"] = list(self.mapping)
        return out


@dataclass(frozen=True)
class Advice:
    """Result of :func:`advise`.

    Attributes:
        candidates: valid layouts, fastest first.
        search_space_size: (p, t, d, b, mapping) tuples enumerated, valid or not.
        valid: candidates that passed every rule.
        rejected: rejected tuples by reason.
        elapsed_s: wall time of the search.
        mapping_aware: whether mappings could change the prediction.
    """

    candidates: tuple[Candidate, ...]
    search_space_size: int
    valid: int
    rejected: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    mapping_aware: bool = False


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
) -> Advice:
    """Enumerate, predict and rank the layouts of ``model`` on ``gpus`` GPUs.

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

    Returns:
        The ranked :class:`Advice`.

    Raises:
        ValueError: ``gpus`` < 1.
    """
    if gpus < 1:
        raise ValueError("gpus must be >= 1")
    started = time.perf_counter()
    template = template or ParallelConfig(pp=1, tp=1, dp=1)
    tp_limit = max_tp if max_tp is not None else platform.gpus_per_node
    options = sorted(set(micro_batch_options or DEFAULT_MICRO_BATCHES) | {model.micro_batch})
    orders = mapping_orders(mappings)
    model_flops = model_flops_per_iteration(
        model.global_batch, model.seq, model.layers, model.hidden, model.vocab
    )
    rejected: dict[str, int] = {}
    candidates: list[Candidate] = []
    space = 0

    def reject(reason: str, n: int) -> None:
        rejected[reason] = rejected.get(reason, 0) + n

    for pp in _divisors(gpus):
        for tp in _divisors(gpus // pp):
            dp = gpus // (pp * tp)
            n_tuples = len(options) * len(orders)
            space += n_tuples
            reason = _layout_problem(model, template, pp, tp, dp, tp_limit)
            if reason:
                reject(reason, n_tuples)
                continue
            par = replace(template, pp=pp, tp=tp, dp=dp, layers_per_stage=None)
            for b in options:
                if model.global_batch % (b * dp):
                    reject("global batch not a multiple of b*d", len(orders))
                    continue
                sized = replace(model, micro_batch=b, micro_batches=None)
                for name, order in orders.items():
                    run = RunConfig(model=sized, parallel=par, platform=platform, mapping=order)
                    mem = memory_bytes(run)
                    fits = platform.gpu_memory_bytes is None or mem <= platform.gpu_memory_bytes
                    if require_fit and not fits:
                        reject("does not fit in GPU memory", 1)
                        continue
                    crit = critical_stage(run, mode)
                    candidates.append(
                        Candidate(
                            pp=pp,
                            tp=tp,
                            dp=dp,
                            micro_batch=b,
                            micro_batches=run.micro_batches,
                            mapping_name=name,
                            mapping=order,
                            t_iter=crit.t_iter,
                            critical_stage=crit.stage,
                            r_bubble=r_bubble(pp, run.micro_batches),
                            r_comm=crit.t_comm / crit.t_iter if crit.t_iter > 0 else 0.0,
                            mfu=model_flops / (crit.t_iter * gpus * platform.peak_flops),
                            memory_bytes=mem,
                            fits=fits,
                        )
                    )
    position = {name: i for i, name in enumerate(orders)}
    candidates.sort(key=lambda c: (c.t_iter, c.memory_bytes, c.pp, c.tp, position[c.mapping_name]))
    return Advice(
        candidates=tuple(candidates),
        search_space_size=space,
        valid=len(candidates),
        rejected=rejected,
        elapsed_s=time.perf_counter() - started,
        mapping_aware=platform.mapping_aware,
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
