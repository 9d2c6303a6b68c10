"""NCCL Inspector profiler-plugin output (JSON Lines, format ``v4.0``, NCCL 2.30+ shape), one
file per process.

Why: the Inspector is the per-call source that carries the kernel execution time and the
communicator identity (``commId``) without a CPU trace; a generated run with Inspector files
gives :mod:`commscope.parsers.nccl_inspector` and the cross-source ``calls`` view a truth to be checked
against. The shape is the one the parser pins (its module docstring and
tests/parsers/test_nccl_inspector.py, from NVIDIA/nccl ``plugins/profiler/inspector/
inspector_json.cc`` v2.30.3+ and the real dumps in ../shared/samples/nccl_inspector):

* file ``inspector/<hostname>-pid<pid>.log`` (``NCCL_INSPECTOR_DUMP_DIR``), one JSON object per
  line, keys in the plugin's order, no spaces;
* ``{"header": {"id", "comm_name", "rank", "n_ranks", "nnodes"}, "metadata":
  {"inspector_output_format_version": "v4.0", "git_rev": "", "rec_mechanism":
  "nccl_profiler_interface", "dump_timestamp_us", "hostname", "pid"}, "coll_perf" | "p2p_perf":
  {...}}``;
* ``header.id``: the communicator's ``commHash`` printed ``0x%lx`` into 17 bytes, i.e. the first
  16 characters of the ``commId 0x...`` the NCCL log prints (:class:`NcclWriter` writes
  ``0x{comm_hash:x}``); ``comm_name`` "unknown" (PyTorch sets no ``config.commName``);
  ``rank`` = the rank in the communicator, ``nnodes`` = nodes the communicator spans;
* collectives: ``coll`` (AllReduce, AllGather, ReduceScatter, Broadcast), ``coll_sn`` =
  NCCL's ``comm->seqNumber[func]``, counted per communicator **and** function from 0;
  ``coll_msg_size_bytes`` = datatype size x the API count (AllGather: the per-rank send
  buffer, ReduceScatter: the per-rank receive buffer, as the NCCL log's ``count``);
* point-to-point (``NCCL_INSPECTOR_ENABLE_P2P`` default 1): ``p2p`` Send / Recv, ``p2p_sn``
  the plugin's per-communicator counter over sends and receives from 1, ``p2p_peer`` the
  peer's rank in the communicator; an ``all_to_all_single`` with splits is the grouped
  Send/Recv pairs NCCL sees (one per member, self included, in member order, as the NCCL log
  writes them), each with its split's size;
* ``*_exec_time_us``: the call's kernel time (``kernel_gpu``: the GPU's own timer), i.e. the
  simulated kernel from the call's post to its end (waiting for peers happens inside the
  kernel), truncated to whole microseconds; ``*_algobw_gbs`` / ``*_busbw_gbs``
  (``inspectorComputeCollBw``, nccl-tests factors, ``%.6f``): AllReduce algbw = size / t,
  busbw x 2(n-1)/n; AllGather/ReduceScatter algbw = size x n / t, busbw x (n-1)/n;
  Broadcast and p2p busbw = algbw; 0 when the time is 0 us;
* ops under ``NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES`` (``GenerateOptions.inspector_min_bytes``,
  NCCL's default 8192) are not tracked (no line); every other call is written (the 2.30
  per-communicator ring of 1024 entries is drained at every dump tick, far faster than it
  fills), ordered by dump tick, then communicator, then completion;
* ``dump_timestamp_us``: the dump thread's tick after the call completed
  (:data:`DUMP_INTERVAL_US`), on the node's clock (clock skew applies).

``GenerateOptions.inspector_shape = "2.28"`` writes the NCCL 2.28.1 - 2.29.7 shape instead:
no ``comm_name``, no point-to-point records, no size threshold, and one slot per communicator
(``completedCollInfo``, overwritten): at each dump tick only the latest collective completed
on the communicator since the previous tick is written, so ``coll_sn`` has gaps on every rank.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import polars as pl

from commscope.model.equations import ring_allreduce_factor, ring_gather_factor
from commscope.synthetic.common import NCCL_OPNAMES, Names
from commscope.synthetic.layout import Group
from commscope.synthetic.program import ELEM_BYTES
from commscope.synthetic.simulate import Simulation

DUMP_INTERVAL_US = 10_000
"""The dump thread's period (``NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS``) used here."""

_P2P = ("send", "recv")


@dataclass
class _Proc:
    """One process's file and its per-communicator counters."""

    fh: IO[bytes]
    path: Path
    coll_sn: dict[tuple[str, str], int] = field(default_factory=dict)
    p2p_sn: dict[str, int] = field(default_factory=dict)
    written: int = 0
    slots: dict[tuple[int, int], tuple[int, str]] = field(default_factory=dict)
    """2.28 shape: (dump tick, comm hash) -> (end, line) of the latest completed collective."""


def comm_id(group: Group) -> str:
    """``header.id``: the commHash cut to 16 characters as the plugin prints it."""
    return f"0x{group.comm_hash:x}"[:16]


def bandwidths(op: str, size: int, us: int, n: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s as ``inspectorComputeCollBw`` computes them (0 when ``us`` is 0)."""
    if us <= 0:
        return 0.0, 0.0
    t = us / 1e6
    if op == "AllReduce":
        alg = size / 1e9 / t
        return alg, alg * ring_allreduce_factor(n)
    if op in ("AllGather", "ReduceScatter"):
        alg = size * n / 1e9 / t
        return alg, alg * ring_gather_factor(n)
    alg = size / 1e9 / t
    return alg, alg


def api_bytes(op: str, msg_bytes: int, nranks: int) -> int:
    """NCCL's ``count`` x datatype size of a simulated call (ReduceScatter: the shard)."""
    return msg_bytes // nranks if op == "reduce_scatter" else msg_bytes


class InspectorWriter:
    """Writes the Inspector file of every process of a lane, iteration by iteration."""

    name = "inspector"

    def __init__(self, sim: Simulation, names: Names) -> None:
        """Remember the simulation and where files go."""
        self.sim = sim
        self.names = names
        self.cluster = sim.cluster
        self.old = sim.opts.inspector_shape == "2.28"
        self.min_bytes = 0 if self.old else sim.opts.inspector_min_bytes
        self.epoch = sim.opts.start_epoch_ns
        self._procs: dict[int, _Proc] = {}

    def open_lane(self, ranks: list[int]) -> None:
        """Create the (empty) file of each rank's process."""
        self._procs = {}
        for r in ranks:
            info = self.cluster.ranks[r]
            path = self.names.inspector(info.host, info.pid)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._procs[r] = _Proc(path.open("wb"), path)

    def close_lane(self) -> list[Path]:
        """Close the files."""
        paths = []
        for proc in self._procs.values():
            self._flush_slots(proc, None)
            proc.fh.close()
            paths.append(proc.path)
        self._procs = {}
        return paths

    def write_lane(self, iteration: int, events: pl.DataFrame) -> None:
        """Append the records of one iteration's calls for every open rank."""
        comm = events.filter(
            (pl.col("kind") == "comm") & pl.col("rank").is_in(list(self._procs))
        ).sort("rank", "seq")
        for (rank,), part in comm.partition_by("rank", as_dict=True, maintain_order=True).items():
            self._write_rank(int(rank), part)

    def _write_rank(self, rank: int, part: pl.DataFrame) -> None:
        proc = self._procs[rank]
        info = self.cluster.ranks[rank]
        skew = self.cluster.skew_ns(rank)
        meta_tail = f',"hostname":"{info.host}","pid":{info.pid}}}'
        if self.old and part.height:
            first_end = (self.epoch + skew + int(part["t_end"].min())) // 1000
            self._flush_slots(proc, -(-first_end // DUMP_INTERVAL_US) * DUMP_INTERVAL_US)
        lines: list[tuple[int, int, int, str]] = []
        for ev in part.iter_rows(named=True):
            g = self.cluster.group(rank, ev["group"])
            us = (ev["t_end"] - ev["t_post"]) // 1000
            end_us = (self.epoch + skew + ev["t_end"]) // 1000
            tick = -(-end_us // DUMP_INTERVAL_US) * DUMP_INTERVAL_US
            dump_us = tick + (rank * 37) % 200
            name = "" if self.old else '"comm_name":"unknown",'
            head = (
                f'{{"header":{{"id":"{comm_id(g)}",{name}"rank":{g.comm_rank(rank)},'
                f'"n_ranks":{g.nranks},"nnodes":{self._nnodes(g)}}},'
                '"metadata":{"inspector_output_format_version":"v4.0","git_rev":"",'
                f'"rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":{dump_us}'
                + meta_tail
            )
            for perf in self._perfs(rank, g, ev, us):
                if self.old:
                    if perf.startswith('"coll_perf"'):
                        slot = proc.slots.get((tick, g.comm_hash))
                        if slot is None or slot[0] <= ev["t_end"]:
                            proc.slots[(tick, g.comm_hash)] = (ev["t_end"], head + "," + perf + "}")
                    continue
                lines.append((tick, g.comm_hash, ev["t_end"], head + "," + perf + "}"))
        lines.sort(key=lambda x: x[:3])
        if lines:
            proc.fh.write(("\n".join(x[3] for x in lines) + "\n").encode())
            proc.written += len(lines)

    def _flush_slots(self, proc: _Proc, before: int | None) -> None:
        """Write the 2.28-shape slots of ticks before ``before`` (all when None): final, since
        no later call completes in an earlier tick."""
        keys = sorted(
            (k for k in proc.slots if before is None or k[0] < before),
            key=lambda k: (k[0], k[1], proc.slots[k][0]),
        )
        if keys:
            proc.fh.write(("\n".join(proc.slots.pop(k)[1] for k in keys) + "\n").encode())
            proc.written += len(keys)

    def _nnodes(self, g: Group) -> int:
        return len({self.cluster.ranks[r].node for r in g.members})

    def _perfs(self, rank: int, g: Group, ev: dict[str, Any], us: int) -> list[str]:
        """The ``coll_perf`` / ``p2p_perf`` members of one call's records."""
        op = ev["op"]
        proc = self._procs[rank]
        key = g.pg_name
        if op == "all_to_all":
            out = []
            eb = ELEM_BYTES[ev["dtype"]]
            for peer, (s, rs) in enumerate(zip(ev["splits"], ev["rsplits"], strict=True)):
                for name, size in (("Send", s), ("Recv", rs)):
                    size = (size // eb) * eb
                    if size < self.min_bytes:
                        continue
                    out.append(self._p2p(proc, key, name, peer, size, us))
            return out
        if op in _P2P:
            size = ev["msg_bytes"]
            if size < self.min_bytes:
                return []
            return [self._p2p(proc, key, NCCL_OPNAMES[op], g.comm_rank(ev["peer"]), size, us)]
        name = NCCL_OPNAMES[op]
        size = api_bytes(op, ev["msg_bytes"], g.nranks)
        sn = proc.coll_sn.get((key, name), 0)
        proc.coll_sn[(key, name)] = sn + 1
        if size < self.min_bytes:
            return []
        alg, bus = bandwidths(name, size, us, g.nranks)
        return [
            f'"coll_perf":{{"coll":"{name}","coll_sn":{sn},"coll_msg_size_bytes":{size},'
            f'"coll_exec_time_us":{us},"coll_timing_source":"kernel_gpu",'
            f'"coll_algobw_gbs":{alg:.6f},"coll_busbw_gbs":{bus:.6f}}}'
        ]

    def _p2p(self, proc: _Proc, key: str, name: str, peer: int, size: int, us: int) -> str:
        sn = proc.p2p_sn.get(key, 0) + 1
        proc.p2p_sn[key] = sn
        alg, bus = bandwidths(name, size, us, 2)
        return (
            f'"p2p_perf":{{"p2p":"{name}","p2p_sn":{sn},"p2p_peer":{peer},'
            f'"p2p_msg_size_bytes":{size},"p2p_exec_time_us":{us},'
            f'"p2p_timing_source":"kernel_gpu","p2p_algobw_gbs":{alg:.6f},'
            f'"p2p_busbw_gbs":{bus:.6f}}}'
        )


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of one written file (for tests and tools)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line]
