"""Global ranks of an NCCL debug log that has no Init lines, inferred from its COLL lines.

Why: job stdout captured after NCCL initialised (or with ``NCCL_DEBUG_SUBSYS=COLL``) has COLL
lines but no ``Init COMPLETE`` line, so no process has a logged global rank and every call
gets none (DLcomm on Polaris, ../shared/samples/nccl_debug/dlcomm_polaris_*: 133 calls, an
empty traffic matrix). What the COLL lines themselves show is often enough; each rank inferred
here carries its rule in ``comm_ops.rank_source`` (parsers/schema.py), never passing as logged.

Rules, in order, applied only when the file has no Init/Destroy line at all (a file with some
has logged ranks, and its processes without one keep null):

1. World (a precondition, no flag of its own): the file shows N processes (host:pid) and every one of them
   logs calls on exactly one communicator of N ranks, N the largest ``[nranks=]`` of the file.
   That communicator is the world, so a process's rank in it is its global rank (what rules 2
   and 3 name); without this nothing is inferred.
2. ``inferred_peers``: on the world communicator Send/Recv ``root`` fields are comm ranks of
   the peer. A process whose peers are every rank but one is that one (a rank does not send to
   itself: NCCL's self-sends stay in one process, and a process that sends to every rank,
   itself included, shows N peers and names nothing). Repeated: when N-1 processes are named,
   the last process gets the last rank. Broadcast/Reduce roots are the same on every member,
   so they name no process and are not used.
3. ``inferred_device``: all N processes on one host, each logging one device ``[d]`` in its
   line prefix, the devices exactly 0..N-1, and every rank rule 2 named equal to its process's
   device: rank = device (the one-process-per-GPU convention of torchrun/mpiexec, local rank =
   device on one node). A weaker inference than 2; on several hosts it would need the node
   order and GPUs per node (a run config), which a parser does not read, so it is not applied.

Check: the inferred ranks must form a permutation of 0..N-1 and every Send of rank r to root s
must meet a Recv from root r on rank s's process when that process logs Recv lines at all; a
failed check drops every inference of the file (warning), so a wrong guess never reaches the
marts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

Proc = tuple[str, int]


@dataclass
class CollSummary:
    """What the COLL lines of a file say per process: comm sizes, devices, p2p peers."""

    comms: dict[Proc, dict[str, int]] = field(default_factory=dict)
    """(host, pid) -> comm pointer -> [nranks=]."""
    devs: dict[Proc, set[int]] = field(default_factory=dict)
    """(host, pid) -> devices of its line prefixes."""
    sends: dict[Proc, dict[str, set[int]]] = field(default_factory=dict)
    """(host, pid) -> comm -> roots of its Send lines."""
    recvs: dict[Proc, dict[str, set[int]]] = field(default_factory=dict)
    """(host, pid) -> comm -> roots of its Recv lines."""

    def add(self, rows: pl.DataFrame) -> None:
        """Fold COLL rows (host, pid, dev, raw_op, comm_id, group_size, root) into the summary."""
        if rows.height == 0:
            return
        for host, pid, comm, n in (
            rows.group_by("host", "pid", "comm_id")
            .agg(pl.col("group_size").max())
            .drop_nulls(["host", "pid", "comm_id", "group_size"])
            .iter_rows()
        ):
            self.comms.setdefault((host, pid), {})[comm] = max(
                n, self.comms.get((host, pid), {}).get(comm, 0)
            )
        for host, pid, dev in (
            rows.select("host", "pid", "dev").unique().drop_nulls(["host", "pid"]).iter_rows()
        ):
            devs = self.devs.setdefault((host, pid), set())
            if dev is not None:
                devs.add(int(dev))
        p2p = rows.filter(pl.col("raw_op").is_in(["Send", "Recv"]) & pl.col("root").is_not_null())
        for host, pid, op, comm, root in (
            p2p.select("host", "pid", "raw_op", "comm_id", "root").unique().iter_rows()
        ):
            target = self.sends if op == "Send" else self.recvs
            target.setdefault((host, pid), {}).setdefault(comm, set()).add(int(root))

    def state(self) -> dict[str, Any]:
        """JSON-serialisable form (resume state of an incremental parse)."""

        def peers(d: dict[Proc, dict[str, set[int]]]) -> list[Any]:
            return [[h, p, c, sorted(r)] for (h, p), cs in d.items() for c, r in cs.items()]

        return {
            "comms": [[h, p, c, n] for (h, p), cs in self.comms.items() for c, n in cs.items()],
            "devs": [[h, p, sorted(d)] for (h, p), d in self.devs.items()],
            "sends": peers(self.sends),
            "recvs": peers(self.recvs),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any] | None) -> CollSummary:
        """Inverse of :meth:`state` (an empty summary for None or an unknown shape)."""
        out = cls()
        if not isinstance(state, dict):
            return out
        for h, p, c, n in state.get("comms", []):
            out.comms.setdefault((str(h), int(p)), {})[str(c)] = int(n)
        for h, p, d in state.get("devs", []):
            out.devs.setdefault((str(h), int(p)), set()).update(int(x) for x in d)
        for key, target in (("sends", out.sends), ("recvs", out.recvs)):
            for h, p, c, r in state.get(key, []):
                target.setdefault((str(h), int(p)), {}).setdefault(str(c), set()).update(
                    int(x) for x in r
                )
        return out


def infer_ranks(summary: CollSummary) -> tuple[dict[Proc, tuple[int, str]], list[str]]:
    """Global rank and rule of each process the COLL lines identify (module docstring).

    Returns:
        ``({(host, pid): (rank, rank_source)}, warnings)``; empty when nothing can be inferred.
    """
    procs = sorted(summary.comms)
    if not procs:
        return {}, []
    n = max(max(cs.values(), default=0) for cs in summary.comms.values())
    world: dict[Proc, str] = {}
    for p in procs:
        big = [c for c, k in summary.comms[p].items() if k == n]
        if len(big) == 1:
            world[p] = big[0]
    if n < 1 or len(procs) != n or len(world) != n:
        return {}, [
            f"no Init lines: global ranks unknown ({len(procs)} processes, {len(world)} with "
            f"one communicator of the file's largest size {n}; a world needs all of them)"
        ]
    ranks: dict[Proc, tuple[int, str]] = {}
    everyone = set(range(n))

    def peers(p: Proc) -> set[int]:
        c = world[p]
        return summary.sends.get(p, {}).get(c, set()) | summary.recvs.get(p, {}).get(c, set())

    changed = True
    while changed:
        changed = False
        taken = {r for r, _ in ranks.values()}
        for p in procs:
            if p in ranks:
                continue
            missing = everyone - peers(p)
            if len(missing) == 1 and peers(p) <= everyone:
                r = next(iter(missing))
                if r not in taken:
                    ranks[p] = (r, "inferred_peers")
                    taken.add(r)
                    changed = True
        left = [p for p in procs if p not in ranks]
        if len(left) == 1 and len(everyone - taken) == 1:
            ranks[left[0]] = (next(iter(everyone - taken)), "inferred_peers")
            changed = True
    left = [p for p in procs if p not in ranks]
    if left and len({h for h, _ in procs}) == 1:
        devs = {p: summary.devs.get(p, set()) for p in procs}
        one_dev = all(len(d) == 1 for d in devs.values())
        if one_dev and {next(iter(d)) for d in devs.values()} == everyone:
            dev_of = {p: next(iter(d)) for p, d in devs.items()}
            if all(dev_of[p] == r for p, (r, _) in ranks.items()):
                for p in left:
                    ranks[p] = (dev_of[p], "inferred_device")
    problem = _check(summary, world, ranks, n)
    if problem:
        return {}, [f"no Init lines: rank inference dropped ({problem})"]
    if not ranks:
        return {}, [
            f"no Init lines: {n} processes form a {n}-rank world but neither Send/Recv peers "
            "nor devices name their ranks; global ranks unknown"
        ]
    how: dict[str, int] = {}
    for _, h in ranks.values():
        how[h] = how.get(h, 0) + 1
    detail = ", ".join(f"{k} {v}" for k, v in sorted(how.items()))
    return ranks, [
        f"no Init lines: global ranks of {len(ranks)} of {n} processes inferred from the COLL "
        f"lines ({detail}; comm_ops.rank_source)"
    ]


def _check(
    summary: CollSummary, world: dict[Proc, str], ranks: dict[Proc, tuple[int, str]], n: int
) -> str | None:
    """Why the inferred ranks contradict the log, or None when they agree with it."""
    values = [r for r, _ in ranks.values()]
    if len(set(values)) != len(values) or any(not 0 <= r < n for r in values):
        return "the ranks are not distinct ranks of the world"
    proc_of = {r: p for p, (r, _) in ranks.items()}
    for p, (r, _) in ranks.items():
        for s in summary.sends.get(p, {}).get(world[p], set()):
            q = proc_of.get(s)
            if q is None or not summary.recvs.get(q, {}).get(world[q]):
                continue  # that process logs no Recv on the world: nothing to compare
            if r not in summary.recvs[q][world[q]]:
                return f"rank {r} sends to rank {s}, whose process logs no Recv from {r}"
    return None


__all__ = ["CollSummary", "infer_ranks"]
