"""Predicted per-rank, per-iteration traffic by type: counts, message sizes, volumes.

Why: the paper shows that dense-model traffic is predictable before a run (Table 3). The
pipeline compares what the logs show with what this module predicts, per rank and per type:
TP, PP, DP, EmbTableSyn (the tied-embedding all-reduce between first and last stage) and EP
(MoE all-to-all). ZeRO changes the DP collectives as in Anthony et al. (OSU, HOTI'24).

Two modes:

- ``stage_exact`` (spec A.4): layers per stage from DeepSpeed's partitioner, padded
  vocabulary, position embeddings, the embedding all-reduce in forward on the first stage,
  the head's backward all-reduce and three small fp32 cross-entropy all-reduces on the last
  stage (the last two are *derived*, not in the paper), first/last/middle-stage PP
  differences, and send vs receive counting. Only this mode reproduces Table 3.
- ``paper_uniform``: eqs. 2-4 literally: m·(l/p)·6 all-reduces of A on every stage, A-sized
  PP messages, one DP all-reduce of δN/(p·t), no embedding traffic. Counts may be fractional
  when p does not divide l.

Quantities of one :class:`TrafficItem` (a group of identical messages of one op):

- ``count``: messages per iteration;
- ``msg_bytes``: the size a DeepSpeed comms log reports for one message (all-reduce: the
  buffer; all-gather: the per-rank input; reduce-scatter and all-to-all: the full input;
  send/recv: the tensor);
- ``volume_bytes`` = count · msg_bytes;
- ``sent_bytes``: bytes this rank puts on the wire (ring all-reduce 2(n-1)/n of the buffer,
  all-gather (n-1) inputs, reduce-scatter/all-to-all (n-1)/n of the input, a send its size,
  a receive 0);
- ``bus_bytes``: the bytes the time model divides by a bus bandwidth C (nccl-tests busbw
  convention; a receive counts like a send, as eq. 3 counts one send and one receive).

All ranks of one pipeline stage have the same traffic, so items are computed once per stage
(and cached); per-rank tables for 1024 ranks are then a cheap expansion.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from commscope.model.config import RunConfig
from commscope.model.equations import (
    TP_ALLREDUCES_PER_LAYER,
    TP_ALLREDUCES_PER_LAYER_RECOMPUTE,
    parameter_count,
    ring_allreduce_factor,
    ring_gather_factor,
)
from commscope.model.partition import layers_per_stage

MODES: tuple[str, str] = ("stage_exact", "paper_uniform")

#: Traffic classes, in report order.
TRAFFIC_CLASSES: tuple[str, ...] = ("TP", "PP", "DP", "EmbTableSyn", "EP")

#: Collective kinds and the group each runs in.
OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send", "recv")
GROUPS: tuple[str, ...] = ("tp", "dp", "edp", "ep", "emb", "pp_next", "pp_prev")

#: Bytes of one cross-entropy all-reduce element (fp32 per token).
_CE_ELEMENT_BYTES = 4
#: Cross-entropy all-reduces per micro-batch in Megatron's vocab-parallel loss (max, target, sum).
_CE_ALLREDUCES = 3


@dataclass(frozen=True)
class TrafficItem:
    """A set of identical messages of one op, sent or received by one rank per iteration.

    Attributes:
        traffic_class: ``TP``, ``PP``, ``DP``, ``EmbTableSyn`` or ``EP``.
        op: ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``, ``send`` or
            ``recv``.
        group: the process group: ``tp``, ``dp``, ``edp`` (expert data parallel), ``ep``,
            ``emb`` (first and last stage), ``pp_next`` or ``pp_prev`` (pipeline neighbour).
        group_size: ranks in that group.
        count: messages per iteration (fractional only in ``paper_uniform``).
        msg_bytes: logged size of one message.
    """

    traffic_class: str
    op: str
    group: str
    group_size: int
    count: float
    msg_bytes: float

    @property
    def volume_bytes(self) -> float:
        """Sum of logged message sizes, count · msg_bytes."""
        return self.count * self.msg_bytes

    @property
    def sent_bytes(self) -> float:
        """Bytes this rank transmits (ring algorithms for collectives)."""
        n = self.group_size
        if self.op == "all_reduce":
            factor = ring_allreduce_factor(n)
        elif self.op == "all_gather":
            factor = float(n - 1)
        elif self.op in ("reduce_scatter", "all_to_all"):
            factor = ring_gather_factor(n)
        elif self.op == "send":
            factor = 1.0
        else:
            factor = 0.0
        return self.volume_bytes * factor

    @property
    def bus_bytes(self) -> float:
        """Bytes the time model divides by the type's bus bandwidth C."""
        if self.op in ("send", "recv"):
            return self.volume_bytes
        return self.sent_bytes


def padded_vocab(vocab: int, tp: int, divisible_by: int = 128) -> int:
    """Megatron's padded vocabulary: V rounded up to a multiple of ``divisible_by · tp``.

    Args:
        vocab: unpadded vocabulary V.
        tp: tensor-parallel size t.
        divisible_by: ``--make-vocab-size-divisible-by`` (default 128).

    Returns:
        V_pad (50432 for V = 50257, t = 2).
    """
    multiple = divisible_by * tp
    return -(-vocab // multiple) * multiple


def stage_layers(run: RunConfig) -> tuple[int, ...]:
    """Transformer layers per pipeline stage (explicit override or DeepSpeed's partitioner)."""
    par = run.parallel
    if par.layers_per_stage is not None:
        return par.layers_per_stage
    return layers_per_stage(run.model.layers, par.pp, par.partitioner)


def _stage_moe_layers(run: RunConfig, stage: int) -> int:
    """MoE layers on ``stage`` (0 for dense models)."""
    if not run.model.is_moe:
        return 0
    per_stage = stage_layers(run)
    start = sum(per_stage[:stage])
    return sum(1 for i in range(start, start + per_stage[stage]) if run.model.is_moe_layer(i))


def dense_layer_params(h: int, t: int) -> int:
    """Parameters of one transformer layer on one TP rank, 12h²/t + 7h/t + 6h.

    QKV 3h²/t + 3h/t; projection h²/t + h; fc1 4h²/t + 4h/t; fc2 4h²/t + h; two LayerNorms 4h.
    """
    return (12 * h * h + 7 * h) // t + 6 * h


def moe_layer_dense_params(h: int, t: int, experts: int) -> int:
    """Data-parallel parameters of one MoE layer on one TP rank: the layer without its MLP,
    plus the gate (h · E, no bias)."""
    return (4 * h * h + 3 * h) // t + 5 * h + h * experts


def expert_params(h: int) -> int:
    """Parameters of one expert MLP, 8h² + 5h (not split by TP)."""
    return 8 * h * h + 5 * h


def stage_dp_params(run: RunConfig, stage: int) -> int:
    """P_r: the parameters one rank of ``stage`` all-reduces in its DP group (spec A.4).

    P_r = L_r(12h²/t + 7h/t + 6h) + [first: V_pad·h/t + s·h] + [last: 2h + V_pad·h/t + s·h],
    with the embedding counted once when one stage is both first and last, and MoE layers
    replaced by :func:`moe_layer_dense_params` (expert weights go to the expert DP group).
    """
    model, par = run.model, run.parallel
    h, t = model.hidden, par.tp
    n_layers = stage_layers(run)[stage]
    n_moe = _stage_moe_layers(run, stage)
    total = (n_layers - n_moe) * dense_layer_params(h, t)
    total += n_moe * moe_layer_dense_params(h, t, model.experts)
    vpad = padded_vocab(model.vocab, t, model.vocab_divisible_by)
    embedding = vpad * h // t + (model.seq * h if model.position_embeddings else 0)
    first, last = stage == 0, stage == par.pp - 1
    if first:
        total += embedding
    if last:
        total += 2 * h  # final LayerNorm
        if not first:
            total += embedding if model.tied_embeddings else vpad * h // t
        elif not model.tied_embeddings:
            total += vpad * h // t
    return total


def stage_expert_params(run: RunConfig, stage: int) -> int:
    """Expert parameters held by one rank of ``stage`` (E / ep experts per MoE layer)."""
    model = run.model
    if not model.is_moe:
        return 0
    per_rank = model.experts // run.parallel.ep
    return _stage_moe_layers(run, stage) * per_rank * expert_params(model.hidden)


def _buckets(elements: float, bucket: int) -> list[tuple[int, float]]:
    """Split ``elements`` into (count, elements-per-message) runs of at most ``bucket``."""
    if elements <= 0:
        return []
    full, rest = divmod(elements, bucket)
    out: list[tuple[int, float]] = []
    if full:
        out.append((int(full), float(bucket)))
    if rest:
        out.append((1, rest))
    return out


def _zero_items(
    params: float, run: RunConfig, bucket: int, group: str, group_size: int
) -> list[TrafficItem]:
    """DP-group collectives for ``params`` elements under the run's ZeRO stage.

    Per iteration (OSU, HOTI'24; m = δ·params): ZeRO-0 one all-reduce (2m on the wire,
    before the ring factor); ZeRO-1 reduce-scatter + all-gather (m + m); ZeRO-2 the same with
    the reduce-scatter in every micro-batch's backward; ZeRO-3 all-gather in forward and in
    backward plus a reduce-scatter, every micro-batch (3m at m = 1, i.e. 1.5x DP).
    """
    if group_size <= 1 or params <= 0:
        return []
    par = run.parallel
    delta = run.model.dtype_bytes
    m = run.micro_batches
    items: list[TrafficItem] = []
    for count, elems in _buckets(params, bucket):
        size = delta * elems
        if par.zero_stage == 0:
            items.append(TrafficItem("DP", "all_reduce", group, group_size, count, size))
            continue
        reduces = count * (m if par.zero_stage >= 2 else 1)
        if par.zero_stage in (1, 2) and par.zero_grad_allreduce:
            items.append(TrafficItem("DP", "all_reduce", group, group_size, reduces, size))
        else:
            items.append(TrafficItem("DP", "reduce_scatter", group, group_size, reduces, size))
        gathers = count * (2 * m if par.zero_stage == 3 else 1)
        items.append(TrafficItem("DP", "all_gather", group, group_size, gathers, size / group_size))
    return items


def _tp_items(run: RunConfig, stage: int, mode: str) -> list[TrafficItem]:
    """TP-group collectives of one rank of ``stage``."""
    model, par = run.model, run.parallel
    t = par.tp
    if t <= 1:
        return []
    m = run.micro_batches
    a = model.dtype_bytes * model.micro_batch * model.seq * model.hidden
    per_layer = TP_ALLREDUCES_PER_LAYER_RECOMPUTE if model.recompute else TP_ALLREDUCES_PER_LAYER
    first, last = stage == 0, stage == par.pp - 1
    if mode == "paper_uniform":
        layer_ar: float = m * (model.layers / par.pp) * per_layer
        emb_ar = head_ar = ce_ar = 0
    else:
        n_layers = stage_layers(run)[stage]
        n_moe = _stage_moe_layers(run, stage)
        # An MoE layer keeps the attention all-reduces; its experts are not TP-split.
        layer_ar = m * (per_layer * (n_layers - n_moe) + (per_layer // 2) * n_moe)
        emb_ar = m if first else 0  # VocabParallelEmbedding, forward only
        head_ar = m if last else 0  # backward of the logits' copy-to-TP-region (derived)
        ce_ar = _CE_ALLREDUCES * m if last else 0  # vocab-parallel cross entropy (derived)
    items: list[TrafficItem] = []
    if par.sequence_parallel:
        gathers = layer_ar + head_ar
        scatters = layer_ar + emb_ar + head_ar
        if gathers:
            items.append(TrafficItem("TP", "all_gather", "tp", t, gathers, a / t))
        if scatters:
            items.append(TrafficItem("TP", "reduce_scatter", "tp", t, scatters, a))
    else:
        reduces = layer_ar + emb_ar + head_ar
        if reduces:
            items.append(TrafficItem("TP", "all_reduce", "tp", t, reduces, a))
    if ce_ar:
        ce_bytes = _CE_ELEMENT_BYTES * model.micro_batch * model.seq
        items.append(TrafficItem("TP", "all_reduce", "tp", t, ce_ar, ce_bytes))
    return items


def pipe_meta_bytes(tp: int, ndim: int = 3) -> int:
    """Bytes of DeepSpeed's partitioned-p2p meta tensor (int64 [ndim, shape, parts, rank,
    partition offsets]); 72 B for t = 2."""
    return 8 * (1 + ndim + 2 + tp + 1)


def _pp_items(run: RunConfig, stage: int) -> list[TrafficItem]:
    """Pipeline p2p of one rank of ``stage`` (1F1B: m activations forward, m gradients back)."""
    model, par = run.model, run.parallel
    p, t, m = par.pp, par.tp, run.micro_batches
    if p <= 1:
        return []
    a = model.dtype_bytes * model.micro_batch * model.seq * model.hidden
    partitioned = par.pipe_partitioned and t > 1 and not par.sequence_parallel
    msg = a / t if (par.sequence_parallel or partitioned) else a
    if float(msg).is_integer():
        msg = int(msg)
    has_next, has_prev = stage < p - 1, stage > 0
    items: list[TrafficItem] = []
    for present, group in ((has_next, "pp_next"), (has_prev, "pp_prev")):
        if not present:
            continue
        items.append(TrafficItem("PP", "send", group, 2, m, msg))
        items.append(TrafficItem("PP", "recv", group, 2, m, msg))
        if partitioned:
            meta = pipe_meta_bytes(t)
            items.append(TrafficItem("PP", "send", group, 2, m, meta))
            items.append(TrafficItem("PP", "recv", group, 2, m, meta))
            # The receiver rebuilds the full tensor with an all-gather in its TP group.
            items.append(TrafficItem("TP", "all_gather", "tp", t, m, msg))
    return items


def _dp_items(run: RunConfig, stage: int, mode: str) -> list[TrafficItem]:
    """Data-parallel collectives (dense parameters, then expert parameters)."""
    model, par = run.model, run.parallel
    if mode == "paper_uniform":
        n = parameter_count(model.layers, model.hidden, model.seq, model.vocab)
        params: float = n / (par.pp * par.tp)
        # Eq. 4 is one message: no bucketing.
        return _zero_items(
            params, run, bucket=max(1, math.ceil(params)), group="dp", group_size=par.dp
        )
    items = _zero_items(stage_dp_params(run, stage), run, par.dp_bucket_elements, "dp", par.dp)
    edp = par.dp // par.ep
    experts = stage_expert_params(run, stage)
    if experts and edp > 1:
        for count, elems in _buckets(experts, par.dp_bucket_elements):
            items.append(
                TrafficItem("DP", "all_reduce", "edp", edp, count, model.dtype_bytes * elems)
            )
    return items


def _emb_items(run: RunConfig, stage: int, mode: str) -> list[TrafficItem]:
    """The tied word-embedding gradient all-reduce between first and last stage."""
    model, par = run.model, run.parallel
    if mode == "paper_uniform" or par.pp <= 1 or not model.tied_embeddings:
        return []
    if stage not in (0, par.pp - 1):
        return []
    vpad = padded_vocab(model.vocab, par.tp, model.vocab_divisible_by)
    size = model.dtype_bytes * vpad * model.hidden // par.tp
    return [TrafficItem("EmbTableSyn", "all_reduce", "emb", 2, 1, size)]


def expert_capacity(run: RunConfig) -> int:
    """Tokens per expert per all-to-all, ceil(k · cf · b · s / E)."""
    model = run.model
    tokens = model.micro_batch * model.seq
    return math.ceil(model.top_k * model.capacity_factor * tokens / model.experts)


def _ep_items(run: RunConfig, stage: int, mode: str) -> list[TrafficItem]:
    """MoE all-to-all in the EP group: dispatch + combine, forward and backward (+ recompute).

    Each message is the capacity-padded [E, capacity, h] buffer, ≈ δ·k·cf·b·s·h (derived;
    spec B, not confirmed by the OSU paper).
    """
    model, par = run.model, run.parallel
    if not model.is_moe or par.ep <= 1:
        return []
    m = run.micro_batches
    per_layer = 6 if model.recompute else 4
    if mode == "paper_uniform":
        moe_total = sum(1 for i in range(model.layers) if model.is_moe_layer(i))
        layers: float = moe_total / par.pp
    else:
        layers = _stage_moe_layers(run, stage)
    if not layers:
        return []
    size = model.dtype_bytes * model.experts * expert_capacity(run) * model.hidden
    return [TrafficItem("EP", "all_to_all", "ep", par.ep, m * per_layer * layers, size)]


@lru_cache(maxsize=65536)
def stage_items(run: RunConfig, stage: int, mode: str = "stage_exact") -> tuple[TrafficItem, ...]:
    """All traffic items of one rank of pipeline ``stage`` for one iteration.

    Args:
        run: the configuration.
        stage: pipeline stage, 0-based.
        mode: ``"stage_exact"`` or ``"paper_uniform"``.

    Returns:
        Items in class order TP, PP, DP, EmbTableSyn, EP (PP-triggered TP all-gathers last
        among TP).

    Raises:
        ValueError: unknown mode or stage.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {MODES}")
    if not 0 <= stage < run.parallel.pp:
        raise ValueError(f"stage {stage} outside 0..{run.parallel.pp - 1}")
    pp = _pp_items(run, stage)
    items = _tp_items(run, stage, mode)
    items += [i for i in pp if i.traffic_class == "TP"]
    items += [i for i in pp if i.traffic_class == "PP"]
    items += _dp_items(run, stage, mode)
    items += _emb_items(run, stage, mode)
    items += _ep_items(run, stage, mode)
    return tuple(items)


def stage_of_rank(run: RunConfig, rank: int) -> int:
    """Pipeline stage of ``rank`` under the run's mapping."""
    return run.coords(rank)[0]


def rank_items(run: RunConfig, rank: int, mode: str = "stage_exact") -> tuple[TrafficItem, ...]:
    """Traffic items of ``rank`` for one iteration (see :func:`stage_items`)."""
    return stage_items(run, stage_of_rank(run, rank), mode)


def summarize(items: Iterable[TrafficItem]) -> dict[str, dict[str, float]]:
    """Per-class totals of a rank's items.

    Args:
        items: items of one rank.

    Returns:
        ``{class: {count, msg_bytes, volume_bytes, sent_bytes, bus_bytes}}`` for the classes
        present, in :data:`TRAFFIC_CLASSES` order. ``msg_bytes`` is the size of the item
        carrying the most volume (the dominant message size when sizes are mixed).
    """
    grouped: dict[str, list[TrafficItem]] = {}
    for item in items:
        grouped.setdefault(item.traffic_class, []).append(item)
    out: dict[str, dict[str, float]] = {}
    for cls in TRAFFIC_CLASSES:
        group = grouped.get(cls)
        if not group:
            continue
        dominant = max(group, key=lambda i: (i.volume_bytes, i.msg_bytes))
        out[cls] = {
            "count": _num(sum(i.count for i in group)),
            "msg_bytes": _num(dominant.msg_bytes),
            "volume_bytes": _num(sum(i.volume_bytes for i in group)),
            "sent_bytes": _num(sum(i.sent_bytes for i in group)),
            "bus_bytes": _num(sum(i.bus_bytes for i in group)),
        }
    return out


def _num(value: float) -> float:
    """Return an int for integral values so counts and byte sizes print exactly."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def item_record(item: TrafficItem) -> dict[str, Any]:
    """One item as a flat dict (op-level detail for JSON output and tables)."""
    return {
        "traffic_class": item.traffic_class,
        "op": item.op,
        "group": item.group,
        "group_size": item.group_size,
        "count": _num(item.count),
        "msg_bytes": _num(item.msg_bytes),
        "volume_bytes": _num(item.volume_bytes),
        "sent_bytes": _num(item.sent_bytes),
        "bus_bytes": _num(item.bus_bytes),
    }


def traffic_rows(run: RunConfig, mode: str = "stage_exact") -> list[dict[str, Any]]:
    """Per-rank, per-iteration predicted traffic for **all** ranks, as table rows.

    Rows are unique per (rank, traffic_class, op, group, msg_bytes): a class can have several
    rows on one rank when message sizes or ops differ (e.g. the last stage's small
    cross-entropy all-reduces, ZeRO's reduce-scatter + all-gather, PP send vs recv). Sum
    over ``traffic_class`` for per-type totals.

    Column types are stable for tables: byte columns are whole bytes (rounded; ring shares
    such as 2(n-1)/n are not always integral); ``count`` is an int in ``stage_exact`` and a
    float in ``paper_uniform`` (where l/p may be fractional).

    Args:
        run: the configuration.
        mode: ``"stage_exact"`` or ``"paper_uniform"``.

    Returns:
        Dicts with ``rank, stage, traffic_class, op, group, group_size, count, msg_bytes,
        volume_bytes, sent_bytes, bus_bytes``; O(1) work per rank and item.
    """
    as_count = int if mode == "stage_exact" else float
    per_stage = [
        [
            {
                "traffic_class": i.traffic_class,
                "op": i.op,
                "group": i.group,
                "group_size": i.group_size,
                "count": as_count(i.count),
                "msg_bytes": round(i.msg_bytes),
                "volume_bytes": round(i.volume_bytes),
                "sent_bytes": round(i.sent_bytes),
                "bus_bytes": round(i.bus_bytes),
            }
            for i in stage_items(run, s, mode)
        ]
        for s in range(run.parallel.pp)
    ]
    rows: list[dict[str, Any]] = []
    for rank in range(run.world):
        stage = stage_of_rank(run, rank)
        for record in per_stage[stage]:
            rows.append({"rank": rank, "stage": stage, **record})
    return rows


def zero_volume_factor(zero_stage: int) -> int:
    """Per-iteration DP volume in units of m = δ·parameters (OSU, HOTI'24; ring factor
    (n-1)/n left out): DP 2m, ZeRO-1 2m, ZeRO-2 2m, ZeRO-3 3m."""
    factors = {0: 2, 1: 2, 2: 2, 3: 3}
    if zero_stage not in factors:
        raise ValueError("zero_stage must be 0, 1, 2 or 3")
    return factors[zero_stage]


def ddp_buckets(
    param_bytes: Sequence[int],
    bucket_cap_bytes: int = 25 * 2**20,
    first_bucket_bytes: int = 2**20,
) -> list[int]:
    """Message sizes of PyTorch DDP's gradient all-reduces (pure-DP models, spec A.6).

    DDP fills buckets with gradients in reverse registration order and closes a bucket as
    soon as it reaches the limit (the first bucket's limit is 1 MiB, the rest
    ``bucket_cap_mb``): a single large tensor makes a bucket of its own size (VGG16's fc6
    weight + bias = 392.02 MiB) and a bucket can overshoot the cap by less than its last
    tensor.

    Args:
        param_bytes: gradient size of each parameter tensor in registration order.
        bucket_cap_bytes: ``bucket_cap_mb`` in bytes (default 25 MiB).
        first_bucket_bytes: limit of the first bucket.

    Returns:
        Bucket sizes in bytes in the order they are all-reduced.
    """
    buckets: list[int] = []
    current = 0
    limit = first_bucket_bytes
    for size in reversed(param_bytes):
        current += size
        if current >= limit:
            buckets.append(current)
            current = 0
            limit = bucket_cap_bytes
    if current:
        buckets.append(current)
    return buckets
