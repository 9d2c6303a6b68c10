"""Layers per pipeline stage as DeepSpeed's ``type:transformer`` partitioner assigns them.

Why: eq. 2 assumes l / p layers on every stage, but Megatron-DeepSpeed's ``GPTModelPipe``
partitions its layer list with ``partition_method='type:transformer'``: every layer spec whose
class name matches ``transformer`` weighs 1, everything else 0, and
``deepspeed.runtime.utils.partition_balanced`` splits the weights. Table 3 of the paper (680
TP all-reduces at rank 0) is only reproduced with the layers this yields (14 on stage 0 for
54 layers on 4 stages), so the model re-implements both behaviours:

- ``old``: the binary search over the bottleneck with ``_lprobe`` (DeepSpeed before PR #4312,
  Dec 2023): 54 layers on 4 stages -> [14, 14, 14, 12].
- ``new``: the linear-partition dynamic programme that minimises max - min stage weight
  (after PR #4312): 54 on 4 -> [14, 14, 13, 13].

``GPTModelPipe``'s layer list is ``[_to_float16, EmbeddingPipe, l x ParallelTransformerLayerPipe,
LayerNorm, EmbeddingPipe (tied head), float16_to_fp32]``: 2 zero-weight items before the
transformer layers and 3 after. Older Megatron-DeepSpeed versions add transpose lambdas; pass
other ``leading``/``trailing`` counts for those.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from functools import lru_cache
from itertools import accumulate


def type_transformer_weights(layers: int, leading: int = 2, trailing: int = 3) -> list[int]:
    """Binary weights of ``GPTModelPipe``'s layer list under ``type:transformer``.

    Args:
        layers: transformer layers l.
        leading: zero-weight specs before the first transformer layer.
        trailing: zero-weight specs after the last transformer layer.

    Returns:
        ``[0] * leading + [1] * layers + [0] * trailing``.
    """
    return [0] * leading + [1] * layers + [0] * trailing


def _uniform_old(num_items: int, num_parts: int) -> list[int]:
    """DeepSpeed's old ``partition_uniform`` (remainder on the last part)."""
    if num_items <= num_parts:
        return [min(p, num_items) for p in range(num_parts + 1)]
    chunk = num_items // num_parts
    parts = [min(chunk * p, num_items) for p in range(num_parts)]
    return [*parts, num_items]


def _uniform_new(num_items: int, num_parts: int) -> list[int]:
    """DeepSpeed's new ``partition_uniform`` (remainder spread over the first parts)."""
    if num_items <= num_parts:
        return [min(p, num_items) for p in range(num_parts + 1)]
    chunk, residual = divmod(num_items, num_parts)
    return [p * chunk + min(p, residual) for p in range(num_parts + 1)]


def _lprobe(prefix: Sequence[float], num_parts: int, bottleneck: float) -> tuple[list[int], bool]:
    """DeepSpeed's old ``_lprobe``: greedy split of an inclusive prefix sum under a bottleneck."""
    num_items = len(prefix)
    total = prefix[-1]
    parts = [0] + [num_items] * num_parts
    bsum = bottleneck
    chunk = num_items // num_parts
    step = chunk
    for p in range(1, num_parts):
        while step < num_items and prefix[step] < bsum:
            step += chunk
        parts[p] = bisect_left(prefix, bsum, lo=step - chunk, hi=min(step, num_items))
        if parts[p] == num_items:
            part_size = prefix[-1] - prefix[parts[p - 1]]
            return parts, part_size < bottleneck
        bsum = prefix[parts[p] - 1] + bottleneck
    return parts, bsum >= total


def partition_balanced_old(
    weights: Sequence[float], num_parts: int, eps: float = 1e-3
) -> list[int]:
    """DeepSpeed's ``partition_balanced`` before PR #4312 (bisection on the bottleneck).

    Args:
        weights: weight of each item.
        num_parts: number of parts.
        eps: bisection tolerance (DeepSpeed's default).

    Returns:
        ``num_parts + 1`` boundaries; part i is ``items[parts[i]:parts[i+1]]``.
    """
    num_items = len(weights)
    if num_items <= num_parts:
        return _uniform_old(num_items, num_parts)
    prefix = list(accumulate(weights))
    lower, upper = prefix[-1] / num_parts, prefix[-1]
    while upper > lower + eps:
        mid = lower + (upper - lower) / 2
        _, ok = _lprobe(prefix, num_parts, mid)
        if ok:
            upper = mid
        else:
            lower = mid + eps
    parts, ok = _lprobe(prefix, num_parts, upper)
    if not ok:  # pragma: no cover - DeepSpeed asserts the same
        raise RuntimeError("partition_balanced_old found no feasible partition")
    return parts


def partition_balanced_new(weights: Sequence[float], num_parts: int) -> list[int]:
    """DeepSpeed's ``partition_balanced`` after PR #4312 (linear-partition DP on max - min).

    Ties go to the latest split point, as in DeepSpeed (``>=`` comparison).

    Args:
        weights: weight of each item.
        num_parts: number of parts.

    Returns:
        ``num_parts + 1`` boundaries; part i is ``items[parts[i]:parts[i+1]]``.
    """
    n, m = len(weights), num_parts
    if n <= m:
        return _uniform_new(n, m)
    inf = float("inf")
    prefix = [0.0, *accumulate(float(w) for w in weights)]
    dp_max = [[inf] * (m + 1) for _ in range(n + 1)]
    dp_min = [[inf] * (m + 1) for _ in range(n + 1)]
    dp_cost = [[inf] * (m + 1) for _ in range(n + 1)]
    position = [[0] * (m + 1) for _ in range(n + 1)]
    dp_max[0][0] = 0.0
    dp_cost[0][0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, min(i, m) + 1):
            row_max, row_min = dp_max, dp_min
            best_cost = dp_cost[i][j]
            for k in range(i):
                seg = prefix[i] - prefix[k]
                prev_max = row_max[k][j - 1]
                max_sum = prev_max if prev_max > seg else seg
                prev_min = row_min[k][j - 1]
                min_sum = prev_min if prev_min < seg else seg
                cost = max_sum - min_sum
                if best_cost >= cost:
                    best_cost = cost
                    dp_max[i][j] = max_sum
                    dp_min[i][j] = min_sum
                    position[i][j] = k
            dp_cost[i][j] = best_cost
    parts = [n]
    for j in range(m, 0, -1):
        parts.append(position[parts[-1]][j])
    parts.reverse()
    return parts


def partition_balanced(
    weights: Sequence[float], num_parts: int, behaviour: str = "new"
) -> list[int]:
    """Dispatch to the ``old`` or ``new`` DeepSpeed ``partition_balanced``.

    Args:
        weights: weight of each item.
        num_parts: number of parts.
        behaviour: ``"old"`` or ``"new"``.

    Returns:
        ``num_parts + 1`` boundaries.

    Raises:
        ValueError: unknown behaviour.
    """
    if behaviour == "old":
        return partition_balanced_old(weights, num_parts)
    if behaviour == "new":
        return partition_balanced_new(weights, num_parts)
    raise ValueError(f"unknown partitioner behaviour {behaviour!r}; use 'old' or 'new'")


@lru_cache(maxsize=4096)
def layers_per_stage(
    layers: int,
    stages: int,
    behaviour: str = "new",
    leading: int = 2,
    trailing: int = 3,
) -> tuple[int, ...]:
    """Transformer layers on each pipeline stage of ``GPTModelPipe``.

    Args:
        layers: transformer layers l.
        stages: pipeline stages p.
        behaviour: ``"old"`` or ``"new"`` DeepSpeed partitioner.
        leading: zero-weight specs before the transformer layers.
        trailing: zero-weight specs after them.

    Returns:
        Layers per stage, first stage first; sums to ``layers``.

    Raises:
        ValueError: more stages than layers, or unknown behaviour.
    """
    if not 1 <= stages <= layers:
        raise ValueError(f"need 1 <= stages <= layers, got stages={stages}, layers={layers}")
    weights = type_transformer_weights(layers, leading, trailing)
    bounds = partition_balanced(weights, stages, behaviour)
    prefix = [0, *accumulate(weights)]
    return tuple(prefix[bounds[i + 1]] - prefix[bounds[i]] for i in range(stages))


def stage_layer_offsets(per_stage: Sequence[int]) -> tuple[int, ...]:
    """Global index of the first transformer layer of each stage.

    Args:
        per_stage: layers per stage.

    Returns:
        Offsets, ``(0, per_stage[0], per_stage[0] + per_stage[1], ...)`` without the total.
    """
    return tuple([0, *accumulate(per_stage)][:-1])
