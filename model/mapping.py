"""Rank mapping of a parallel layout onto nodes, process groups, and the predicted traffic matrix.

Why: the paper shows that the communication matrix is predictable once the logical layout
(p, t, d) and its mapping onto GPUs are known (Figs. 3, 11, 12), and that the mapping decides
which traffic crosses nodes. This module numbers ranks by an axis order (DeepSpeed's default
``[pipe, data, model]``, the paper's Fig. 12 "customized" ``[data, pipe, model]``, or any
order the user names), derives every process group, and expands the per-rank traffic of
:mod:`commscope.model.traffic` into rank-to-rank records:

- ring collectives (all-reduce, all-gather, reduce-scatter) in a group of n ranks: each rank
  sends its ring bytes (2(n-1)/n·S for an all-reduce) to its ring successor, the next rank in
  group order; a 2-rank group sends to its one peer;
- all-to-all: each rank sends (n-1)/n of its buffer, evenly, to every other member;
- pipeline: stage i sends activations to stage i+1 and stage i+1 sends gradients back.

So the row sums of the matrix equal each rank's predicted ``sent_bytes``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from commscope.model.config import RunConfig
from commscope.model.traffic import TRAFFIC_CLASSES, stage_items

#: Process-group kinds: tensor, data, pipeline, tied embedding, expert and expert-data parallel.
GROUP_KINDS: tuple[str, ...] = ("tp", "dp", "pp", "emb", "ep", "edp")


def node_of(rank: int, gpus_per_node: int) -> int:
    """Node index of ``rank`` when consecutive ranks fill a node (rank // gpus_per_node)."""
    return rank // gpus_per_node


def _member_coords(run: RunConfig, kind: str, rank: int) -> list[tuple[int, int, int]]:
    """Coordinates of the members of ``rank``'s group of ``kind``, in group-rank order."""
    par = run.parallel
    stage, data, model = run.coords(rank)
    if kind == "tp":
        return [(stage, data, k) for k in range(par.tp)]
    if kind == "dp":
        return [(stage, k, model) for k in range(par.dp)]
    if kind == "pp":
        return [(k, data, model) for k in range(par.pp)]
    if kind == "emb":
        if par.pp <= 1 or stage not in (0, par.pp - 1):
            return [(stage, data, model)]
        return [(0, data, model), (par.pp - 1, data, model)]
    if kind == "ep":
        # DeepSpeed: expert-parallel groups are consecutive chunks of the DP group.
        start = (data // par.ep) * par.ep
        return [(stage, start + k, model) for k in range(par.ep)]
    if kind == "edp":
        # ... and expert-data-parallel groups are the strided remainder.
        return [(stage, k, model) for k in range(data % par.ep, par.dp, par.ep)]
    raise ValueError(f"unknown group kind {kind!r}; use one of {GROUP_KINDS}")


def group_members(run: RunConfig, kind: str, rank: int) -> list[int]:
    """Ranks of ``rank``'s process group of ``kind``, in group-rank (ring) order.

    Args:
        run: the configuration (its mapping decides the numbering).
        kind: one of :data:`GROUP_KINDS`.
        rank: a global rank.

    Returns:
        Member ranks, ``rank`` included.
    """
    return [run.rank_of(*c) for c in _member_coords(run, kind, rank)]


def groups(run: RunConfig, kind: str) -> list[list[int]]:
    """Every process group of ``kind``, each in group-rank order, sorted by first member.

    For ``emb`` only first/last-stage pairs are returned (p > 1).
    """
    seen: set[tuple[int, ...]] = set()
    out: list[list[int]] = []
    for rank in range(run.world):
        members = group_members(run, kind, rank)
        key = tuple(members)
        if key in seen or (kind == "emb" and len(members) < 2):
            continue
        seen.add(key)
        out.append(members)
    return sorted(out, key=lambda g: g[0])


def ring_successor(run: RunConfig, kind: str, rank: int) -> int:
    """The rank that ``rank`` sends to in a ring over its group of ``kind``."""
    members = group_members(run, kind, rank)
    return members[(members.index(rank) + 1) % len(members)]


def peers(run: RunConfig, rank: int) -> dict[str, list[int]]:
    """Ranks that ``rank`` exchanges traffic with, per traffic class.

    Args:
        run: the configuration.
        rank: a global rank.

    Returns:
        ``{"TP": [...], "DP": [...], "PP": [...], "EmbTableSyn": [...], "EP": [...]}``
        (sorted, without ``rank``; classes with no peer are left out). DP includes the
        expert-data-parallel group of MoE models.
    """
    par = run.parallel
    stage, data, model = run.coords(rank)
    out: dict[str, set[int]] = {}
    if par.tp > 1:
        out["TP"] = set(group_members(run, "tp", rank))
    if par.dp > 1:
        out["DP"] = set(group_members(run, "dp", rank))
        if run.model.is_moe and par.dp // par.ep > 1:
            out["DP"] |= set(group_members(run, "edp", rank))
    pipe = set()
    if stage > 0:
        pipe.add(run.rank_of(stage - 1, data, model))
    if stage < par.pp - 1:
        pipe.add(run.rank_of(stage + 1, data, model))
    if pipe:
        out["PP"] = pipe
    if run.model.tied_embeddings and par.pp > 1 and stage in (0, par.pp - 1):
        out["EmbTableSyn"] = set(group_members(run, "emb", rank))
    if run.model.is_moe and par.ep > 1:
        out["EP"] = set(group_members(run, "ep", rank))
    return {
        cls: sorted(out[cls] - {rank})
        for cls in TRAFFIC_CLASSES
        if cls in out and out[cls] - {rank}
    }


def group_spans_nodes(run: RunConfig, kind: str) -> bool:
    """Whether any group of ``kind`` has members on more than one node.

    For ``pp`` the pairs of neighbouring stages are checked (that is where PP traffic
    flows), not the whole pipeline.
    """
    gpn = run.platform.gpus_per_node
    for rank in range(run.world):
        if kind == "pp":
            stage, data, model = run.coords(rank)
            if stage + 1 < run.parallel.pp:
                nxt = run.rank_of(stage + 1, data, model)
                if node_of(nxt, gpn) != node_of(rank, gpn):
                    return True
            continue
        members = group_members(run, kind, rank)
        if len({node_of(r, gpn) for r in members}) > 1:
            return True
    return False


def predicted_matrix(run: RunConfig, mode: str = "stage_exact") -> list[dict[str, Any]]:
    """Predicted rank-to-rank bytes per iteration, per traffic class.

    Args:
        run: the configuration (mapping and ``platform.gpus_per_node`` decide the nodes).
        mode: ``"stage_exact"`` or ``"paper_uniform"``.

    Returns:
        Records ``{src_rank, dst_rank, traffic_class, bytes, intra_node}``, one per
        (src, dst, class) with bytes > 0, sorted by src, dst, class; ``bytes`` is rounded to
        whole bytes. Summing ``bytes`` over ``dst_rank`` gives each rank's predicted
        ``sent_bytes`` per class (up to that rounding).
    """
    gpn = run.platform.gpus_per_node
    totals: dict[tuple[int, int, str], float] = {}
    successor_cache: dict[tuple[str, int], int] = {}

    def add(src: int, dst: int, cls: str, nbytes: float) -> None:
        key = (src, dst, cls)
        totals[key] = totals.get(key, 0.0) + nbytes

    for rank in range(run.world):
        stage, data, model = run.coords(rank)
        for item in stage_items(run, stage, mode):
            sent = item.sent_bytes
            if sent <= 0:
                continue
            if item.op == "send":
                step = 1 if item.group == "pp_next" else -1
                add(rank, run.rank_of(stage + step, data, model), item.traffic_class, sent)
            elif item.op == "all_to_all":
                others = [r for r in group_members(run, item.group, rank) if r != rank]
                for dst in others:
                    add(rank, dst, item.traffic_class, sent / len(others))
            else:
                key = (item.group, rank)
                if key not in successor_cache:
                    successor_cache[key] = ring_successor(run, item.group, rank)
                add(rank, successor_cache[key], item.traffic_class, sent)
    order = {cls: i for i, cls in enumerate(TRAFFIC_CLASSES)}
    records = [
        {
            "src_rank": src,
            "dst_rank": dst,
            "traffic_class": cls,
            "bytes": round(nbytes),
            "intra_node": node_of(src, gpn) == node_of(dst, gpn),
        }
        for (src, dst, cls), nbytes in totals.items()
    ]
    records.sort(key=lambda r: (r["src_rank"], r["dst_rank"], order[r["traffic_class"]]))
    return records


def matrix_summary(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Intra- vs inter-node bytes per traffic class of a predicted matrix.

    Args:
        records: output of :func:`predicted_matrix`.

    Returns:
        ``{class: {"intra_node_bytes": x, "inter_node_bytes": y}}`` in class order.
    """
    out: dict[str, dict[str, float]] = {}
    for rec in records:
        entry = out.setdefault(rec["traffic_class"], {"intra_node_bytes": 0, "inter_node_bytes": 0})
        entry["intra_node_bytes" if rec["intra_node"] else "inter_node_bytes"] += rec["bytes"]
    return {cls: out[cls] for cls in TRAFFIC_CLASSES if cls in out}
