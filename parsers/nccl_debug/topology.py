"""NCCL debug topology lines: ring, tree, NVLS, p2p and CollNet lines -> ``topology`` rows
(rare lines: per-line Python). Attribution to an incarnation is the registry's
(:meth:`commscope.parsers.nccl_debug.communicators._Registry.attribute`).

See :mod:`commscope.parsers.nccl_debug` (topology).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from commscope.parsers.nccl_debug.lines import (
    _COLLNET_RE,
    _CONN_RE,
    _NVLS_HEAD_RE,
    _NVLS_TREE_PART_RE,
    _NVLS_TREES_RE,
    _RING_ORDER_RE,
    _RING_RE,
    _TREE_RE,
    _TREES_ITEM_RE,
)

RING_ORDER_CAP = 20
"""NCCL <= 2.22 prints at most this many ranks in a ring-order line, silently."""

# Bounds on what one file's parse keeps (memory and the resume state stored in the commit log
# grow with these, never with the file). Past a bound the lines concerned are rejected with the
# reason (counted, with one warning), or for hosts/processes/tags only the repair or version
# attribution they feed stops learning; rows already parsed are unchanged.
MAX_TOPOLOGY_ROWS = 250_000
"""Distinct topology rows per file; topology lines past it are rejected."""
_TOPO_BATCH = 10_000
"""Topology lines turned into rows at once (a block may hold hundreds of thousands)."""
TOPOLOGY_FULL = (
    f"topology bound reached: more than {MAX_TOPOLOGY_ROWS} distinct topology rows in one "
    "file; this line is not stored"
)


# --------------------------------------------------------------------------------------------
# Topology lines (rare: per-line Python)
# --------------------------------------------------------------------------------------------


@dataclass
class _Topo:
    """A parsed topology line, waiting for the end of the file to be attributed."""

    line_no: int
    host: str
    pid: int
    tid: int
    me_rank: int | None
    me_dev: str | None
    rows: list[dict[str, Any]]
    ring_order: list[int] | None = None
    ring_order_cut: bool = False
    channel: int | None = None
    text: tuple[str, bool] = ("", False)
    """The message and its cut flag: with the host, pid and the incarnation's pointer (and
    nranks) it fixes the rows, so a line repeating them adds only duplicates."""


def _transport(detail: str) -> str:
    """Normalise the text after ``via`` to a transport name."""
    if detail.startswith("direct shared memory") or detail.startswith("SHM"):
        return "SHM"
    parts = detail.split("/")
    if parts[0] in {"P2P", "NET", "COLLNET"} and len(parts) > 1:
        return f"{parts[0]}/{parts[1]}"
    return parts[0]


def _edge(kind: str, ch: int, rank: int, peer: int, direction: str) -> dict[str, Any]:
    return {"kind": kind, "channel": ch, "rank": rank, "peer_rank": peer, "direction": direction}


def _parse_topology(msg: str, cut: bool) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    """Parse one topology message into rows; None if it does not fit any topology pattern.

    Args:
        msg: the message after the NCCL prefix.
        cut: the line reached NCCL's 1023-character limit (its last item may be cut).

    Returns:
        ``(rows, info)`` with ``info`` holding ``me_rank``, ``me_dev`` and, for ring-order lines,
        ``ring_order``/``ring_order_cut``/``channel``.
    """
    m = _RING_RE.match(msg)
    if m:
        ch, me = int(m["ch"]), int(m["me"])
        rows = [
            _edge("ring", ch, me, int(m["prev"]), "prev"),
            _edge("ring", ch, me, int(m["next"]), "next"),
        ]
        return [r for r in rows if r["peer_rank"] >= 0], {"me_rank": me}
    m = _CONN_RE.match(msg)
    if m:
        src, dst, recv = int(m["src"]), int(m["dst"]), m["dir"] == "receive"
        me, peer = (dst, src) if recv else (src, dst)
        detail = m["detail"]
        row = _edge("p2p", int(m["ch"]), me, peer, "recv" if recv else "send")
        row.update(transport=_transport(detail), transport_detail=detail)
        return [row], {"me_rank": me, "me_dev": m["dstdev"] if recv else m["srcdev"]}
    m = _RING_ORDER_RE.match(msg)
    if m:
        ranks = [int(x) for x in m["ranks"].split()]
        info = {
            "me_rank": 0,
            "ring_order": ranks,
            "ring_order_cut": bool(m["trunc"]),
            "channel": int(m["ch"]),
        }
        return [], info
    m = _TREE_RE.match(msg)
    if m:
        ch, me = int(m["ch"]), int(m["me"])
        rows = [_edge("tree", ch, me, int(m["up"]), "up")]
        rows += [_edge("tree", ch, me, int(m[d]), "down") for d in ("d0", "d1", "d2")]
        return [r for r in rows if r["peer_rank"] >= 0], {"me_rank": me}
    if msg.startswith("Trees"):
        return _parse_trees(msg, cut)
    m = _NVLS_TREES_RE.match(msg)
    if m:
        rows = []
        me = None
        for ch, part in enumerate((m["t0"], m["t1"])):
            pm = _NVLS_TREE_PART_RE.match(part)
            if pm is None:
                return None
            me = int(pm["me"])
            rows.append(_edge("nvls", ch, me, int(pm["up"]), "up"))
            rows += [_edge("nvls", ch, me, int(d), "down") for d in pm["downs"].split("/")]
        return [r for r in rows if r["peer_rank"] >= 0], {"me_rank": me}
    m = _NVLS_HEAD_RE.match(msg)
    if m:
        h = int(m["h"])
        heads = [int(x) for x in m["ranks"].split()]
        return [_edge("nvls", h, r, node, "position") for node, r in enumerate(heads) if r >= 0], {}
    m = _COLLNET_RE.match(msg)
    if m:
        me, detail = int(m["me"]), m["detail"]
        row = {
            "kind": "collnet",
            "channel": int(m["ch"]),
            "rank": me,
            "peer_rank": None,
            "direction": "recv" if m["dir"] == "receive" else "send",
            "transport": _transport(detail),
            "transport_detail": detail,
        }
        return [row], {"me_rank": me}
    return None


def _parse_trees(msg: str, cut: bool) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    items = list(_TREES_ITEM_RE.finditer(msg, 5))
    if cut and items and items[-1].end() == len(msg.rstrip()):
        items = items[:-1]  # its last number may have lost digits at the line limit
    rows: list[dict[str, Any]] = []
    me = None
    for it in items:
        ch = int(it["ch"])
        if it["me"] is not None:
            me, up, downs = int(it["me"]), int(it["up"]), (it["d0"], it["d1"], it["d2"])
        else:  # NCCL 2.4: up->me->d0/d1/d2
            me, up, downs = int(it["me4"]), int(it["up4"]), (it["e0"], it["e1"], it["e2"])
        rows.append(_edge("tree", ch, me, up, "up"))
        rows += [_edge("tree", ch, me, int(d), "down") for d in downs]
    if not items:
        return None
    return [r for r in rows if r["peer_rank"] >= 0], {"me_rank": me}


def _ring_order_rows(
    ranks: list[int], ch: int, cut: bool, nranks: int | None
) -> list[dict[str, Any]]:
    """Position rows plus derived next/prev neighbours of a rank-0 ring-order line."""
    rows = [_edge("ring_order", ch, r, pos, "position") for pos, r in enumerate(ranks)]
    for a, b in itertools.pairwise(ranks):
        rows += [_edge("ring_order", ch, a, b, "next"), _edge("ring_order", ch, b, a, "prev")]
    if nranks is not None:
        complete = not cut and len(ranks) == nranks
    else:
        complete = not cut and len(ranks) < RING_ORDER_CAP
    if complete and len(ranks) >= 2 and len(set(ranks)) == len(ranks):
        rows += [
            _edge("ring_order", ch, ranks[-1], ranks[0], "next"),
            _edge("ring_order", ch, ranks[0], ranks[-1], "prev"),
        ]
    return rows
