"""Top-k gating of an MoE layer: how many tokens each data-parallel replica sends to each expert.

Why: the paper (§3.2, spec §E) observes that all-to-all traffic is non-uniform within an
iteration, changes between iterations, becomes more uniform as training converges, and grows in
volume as more tokens are routed to a second expert. This module produces routing matrices with
exactly those trends, deterministically from the seed:

* expert popularity logits ``z_e`` ~ N(0, 1) per layer, plus a per-source perturbation;
  probabilities ``softmax(sigma(k) * (z_e + 0.5 * eps_ie))`` with ``sigma(k)`` decaying from
  ``moe_skew_start`` to ``moe_skew_end`` (time constant ``moe_decay_iterations``);
* every token goes to its first expert, and a share ``f2(k)`` (rising from ``moe_second_start``
  to ``moe_second_end``) also to a second one, so a source sends ``T (1 + f2(k))`` token copies
  per all-to-all, T = b * s tokens of a micro-batch;
* experts are held in blocks of E / ep by the EP group's members (DeepSpeed's layout).

``D[i][j]`` = tokens that replica i dispatches to the experts held by replica j (both indices are
positions in the EP group). Dispatch sends rows of D, combine sends them back (columns of D).
"""

from __future__ import annotations

import math
from functools import lru_cache

from commscope.synthetic._rng import STREAM_MOE, normalish
from commscope.synthetic.scenario import Scenario


def skew(scn: Scenario, iteration: int) -> float:
    """Spread sigma(k) of the expert-popularity logits at ``iteration``."""
    decay = math.exp(-iteration / scn.moe_decay_iterations)
    return scn.moe_skew_end + (scn.moe_skew_start - scn.moe_skew_end) * decay


def second_share(scn: Scenario, iteration: int) -> float:
    """f2(k): share of tokens also routed to a second expert."""
    decay = math.exp(-iteration / scn.moe_decay_iterations)
    return scn.moe_second_end + (scn.moe_second_start - scn.moe_second_end) * decay


@lru_cache(maxsize=4096)
def routing_matrix(
    scn: Scenario,
    seed: int,
    iteration: int,
    lane: int,
    layer: int,
    ep: int,
    experts: int,
    tokens: int,
    top_k: int,
) -> tuple[tuple[int, ...], ...]:
    """Token counts D[i][j] of one MoE layer's all-to-all in one EP group and iteration.

    Args:
        scn: the scenario (trends).
        seed: run seed.
        iteration: training iteration k.
        lane: EP group index (data-parallel block).
        layer: global layer index of the MoE layer.
        ep: EP group size.
        experts: experts E of the layer.
        tokens: tokens per micro-batch and replica, b * s.
        top_k: gating top-k; 1 disables the second expert.

    Returns:
        ``ep`` rows of ``ep`` token counts (row i: what replica i dispatches).
    """
    sigma = skew(scn, iteration)
    f2 = second_share(scn, iteration) if top_k >= 2 else 0.0
    per_holder = experts // ep
    base = [normalish(seed, STREAM_MOE, 0, layer, e) for e in range(experts)]
    rows: list[tuple[int, ...]] = []
    for i in range(ep):
        logits = [
            sigma * (base[e] + 0.5 * normalish(seed, STREAM_MOE, 1 + iteration, lane, layer, i, e))
            for e in range(experts)
        ]
        top = max(logits)
        weights = [math.exp(v - top) for v in logits]
        total = sum(weights)
        copies = tokens * (1.0 + f2)
        per_expert = [copies * w / total for w in weights]
        row = [round(sum(per_expert[j * per_holder : (j + 1) * per_holder])) for j in range(ep)]
        rows.append(tuple(row))
    return tuple(rows)


def nonuniform_factors(matrix: list[list[float]]) -> dict[str, float | None]:
    """The paper's non-uniform factor and its variants for one iteration's matrix (spec §E).

    Args:
        matrix: A[i][j] bytes sent from i to j (square; the diagonal is ignored).

    Returns:
        ``nf_abs`` = max - min over i != j (bytes), ``nf_rel`` = (max - min) / mean,
        ``nf_ratio`` = max / min (None when min is 0), ``cv`` = std / mean, ``nf_dest`` = max - min of the
        destination loads R_j = sum_i A[i][j] (i != j), and ``volume`` = sum over i != j.
    """
    n = len(matrix)
    off = [float(matrix[i][j]) for i in range(n) for j in range(n) if i != j]
    if not off:
        return {
            "nf_abs": 0.0,
            "nf_rel": 0.0,
            "nf_ratio": 1.0,
            "cv": 0.0,
            "nf_dest": 0.0,
            "volume": 0.0,
        }
    hi, lo = max(off), min(off)
    mean = sum(off) / len(off)
    var = sum((v - mean) ** 2 for v in off) / len(off)
    dest = [sum(float(matrix[i][j]) for i in range(n) if i != j) for j in range(n)]
    return {
        "nf_abs": hi - lo,
        "nf_rel": (hi - lo) / mean if mean else 0.0,
        "nf_ratio": hi / lo if lo else None,
        "cv": math.sqrt(var) / mean if mean else 0.0,
        "nf_dest": max(dest) - min(dest),
        "volume": sum(off),
    }
