"""PyTorch Flight Recorder (NCCL trace) dumps, one pickle per rank, schema ``2.10``.

Why: the Flight Recorder is the per-rank record of every collective with its process-group
name and sequence numbers, and the standard evidence of a hang; generated dumps give
:mod:`commscope.parsers.flight_recorder` and :mod:`commscope.pipeline.hang` a truth to be checked against. The
shape follows ../shared/FORMATS_flight_recorder.md (§1-§5, from PyTorch's
``FlightRecorderDetail.hpp``) and the real torch 2.11 dumps in
``sample_traces/gpu_nccl_tp2_dp2_1gpu/flight_recorder`` and ``gpu_nccl_hang_1gpu``:

* file ``flight_recorder/nccl_trace_rank_<R>`` (``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` default
  prefix + global rank, no padding, no extension); a pickle, protocol 2, of a dict of plain
  values (no globals): ``version`` "2.10", ``pg_config``, ``comm_lib_version`` (the NCCL
  version), ``pg_status``, ``entries``, in that order;
* ``pg_config``: the rank's own groups, keyed by pg name in string order: ``{"name", "desc",
  "ranks": "[0, 1]"}``; desc ``default_pg`` for the world, else ``undefined`` (DeepSpeed
  passes no ``group_desc``; the Kineto writer says the same);
* ``pg_status``: keyed by the rank-local ``pg_id`` (the rank's groups in creation order, world
  0): ``last_enqueued_collective`` / ``last_started_collective`` / ``last_completed_collective``
  (collective sequence numbers; a group with only point-to-point ops counts its p2p sequence);
* ``entries``: the ring buffer (``TORCH_NCCL_TRACE_BUFFER_SIZE`` =
  ``GenerateOptions.fr_buffer_size``): the **last N** ops of the process, oldest first, keys in
  the writer's order (``frames`` first): ``record_id`` (process-wide counter from 0),
  ``pg_id``, ``process_group`` (name, desc), ``thread_name``/``thread_id``,
  ``collective_seq_id`` (per group, collectives from 1; a p2p entry carries the group's
  current value), ``p2p_seq_id`` (per group, from 1; 0 on collectives), ``op_id`` (per group,
  every op), ``profiling_name`` (``nccl:all_reduce``, ``nccl:_all_gather_base``,
  ``nccl:_reduce_scatter_base``, ``nccl:all_to_all``, ``nccl:send 0->1``, ``nccl:recv 1<-0``:
  group-local peers), ``time_created_ns`` (enqueue on the CPU, epoch ns on the node clock:
  :data:`commscope.synthetic.write_kineto.CPU_LEAD_NS` before the kernel), ``duration_ms``
  (timing enabled: the kernel from post to end, as a float32 like the CUDA events give),
  ``input_sizes``/``input_dtypes``/``output_sizes``/``output_dtypes`` (c10 names ``Half``,
  ``BFloat16``, ``Float``, ``Long``), ``state``, ``time_discovered_started_ns`` /
  ``time_discovered_completed_ns`` (the watchdog's poll after the kernel ended),
  ``retired``, ``timeout_ms`` (600000), ``is_p2p``.

A run without a hang dumps at the end (every entry ``completed``, ``retired``). The hang
scenario (``scenario.hang_rank``, ``hang_iteration``, ``hang_class``) dumps as
``TORCH_NCCL_DUMP_ON_TIMEOUT`` does: the hung rank never posts its first call of that class in
that iteration (its entries end before it); every rank that posts a call whose instance has a
member that never posted it waits there (entry ``started``, no completion, no duration) and
posts nothing after it (the training loop synchronises on the result); this propagates through
every group until no rank can progress. Which rank stops where needs every lane's calls, so
the lanes write staging files and :meth:`FlightRecorderWriter.finish_run` resolves the hang
and writes the dumps. Only the dumps show the hang: the other formats record the full run.
"""

from __future__ import annotations

import pickle
import shutil
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from commscope.synthetic.common import Names
from commscope.synthetic.layout import Group
from commscope.synthetic.program import ELEM_BYTES
from commscope.synthetic.simulate import Simulation
from commscope.synthetic.write_kineto import CPU_LEAD_NS

VERSION = "2.10"
TIMEOUT_MS = 600_000
WATCHDOG_LAG_NS = 150_000
"""The watchdog notices a finished kernel this long after it ended."""

C10_DTYPES = {"float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "int64": "Long"}
PROFILING_NAMES = {
    "all_reduce": "all_reduce",
    "all_gather": "_all_gather_base",
    "reduce_scatter": "_reduce_scatter_base",
    "all_to_all": "all_to_all",
    "broadcast": "broadcast",
}
_FRAMES = {
    "all_reduce": ("all_reduce", 2806),
    "all_gather": ("all_gather_into_tensor", 3713),
    "reduce_scatter": ("reduce_scatter_tensor", 4167),
    "all_to_all": ("all_to_all_single", 4380),
    "broadcast": ("broadcast", 2741),
    "send": ("send", 2268),
    "recv": ("recv", 2327),
}

# A staged call: everything an entry needs, plus its cross-rank instance key.
_Rec = tuple[Any, ...]
(
    R_ID,
    R_PG,
    R_ITER,
    R_CSEQ,
    R_PSEQ,
    R_OPID,
    R_NAME,
    R_OP,
    R_POST,
    R_END,
    R_IN,
    R_OUT,
    R_DT,
    R_P2P,
    R_THREAD,
    R_KEY,
) = range(16)


@dataclass
class _RankState:
    """Per-rank counters and the kept records."""

    groups: list[Group]
    ring: deque[_Rec]
    window: list[_Rec] = field(default_factory=list)
    next_id: int = 0
    cseq: dict[int, int] = field(default_factory=dict)
    pseq: dict[int, int] = field(default_factory=dict)
    opid: dict[int, int] = field(default_factory=dict)
    p2p_k: dict[tuple[int, int, int], int] = field(default_factory=dict)
    done: dict[int, tuple[int, int]] = field(default_factory=dict)
    """pg_id -> (last collective seq, last p2p seq) of the records before the hang window
    (all completed; kept whole, the ring drops the records themselves)."""


def f32(x: float) -> float:
    """``x`` rounded to float32 (CUDA event times are floats)."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


class FlightRecorderWriter:
    """Stages each rank's Flight Recorder records lane by lane; :meth:`finish_run` dumps."""

    name = "flight_recorder"

    def __init__(self, sim: Simulation, names: Names) -> None:
        """Remember the simulation and where files go."""
        self.sim = sim
        self.names = names
        self.cluster = sim.cluster
        self.size = sim.opts.fr_buffer_size
        self.hang = hang_point(sim)
        self._ranks: dict[int, _RankState] = {}

    def open_lane(self, ranks: list[int]) -> None:
        """Start the records of ``ranks``."""
        self._ranks = {
            r: _RankState(self.cluster.rank_groups(r), deque(maxlen=self.size)) for r in ranks
        }

    def write_lane(self, iteration: int, events: pl.DataFrame) -> None:
        """Record one iteration's calls of every open rank."""
        if self.hang is not None and iteration > self.hang[1] + 1:
            return  # every rank is stuck by then: nothing more is enqueued
        comm = events.filter(
            (pl.col("kind") == "comm") & pl.col("rank").is_in(list(self._ranks))
        ).sort("rank", "seq")
        in_window = self.hang is not None and iteration >= self.hang[1]
        for ev in comm.iter_rows(named=True):
            st = self._ranks[ev["rank"]]
            rec = self._record(st, ev, iteration)
            if in_window:
                st.window.append(rec)
            else:
                st.ring.append(rec)
                st.done[rec[R_PG]] = (st.cseq.get(rec[R_PG], 0), st.pseq.get(rec[R_PG], 0))

    def _record(self, st: _RankState, ev: dict[str, Any], iteration: int) -> _Rec:
        rank = ev["rank"]
        g = self.cluster.group(rank, ev["group"])
        pg = next(i for i, x in enumerate(st.groups) if x is g)
        op = ev["op"]
        eb = ELEM_BYTES[ev["dtype"]]
        n = ev["msg_bytes"] // eb
        p2p = op in ("send", "recv")
        st.opid[pg] = st.opid.get(pg, 0) + 1
        if p2p:
            st.pseq[pg] = st.pseq.get(pg, 0) + 1
            me, peer = g.comm_rank(rank), g.comm_rank(ev["peer"])
            src, dst = (rank, ev["peer"]) if op == "send" else (ev["peer"], rank)
            k = st.p2p_k.get((pg, src, dst), 0)
            st.p2p_k[(pg, src, dst)] = k + 1
            name = f"nccl:send {me}->{peer}" if op == "send" else f"nccl:recv {me}<-{peer}"
            key: tuple[Any, ...] = (g.pg_name, "p2p", src, dst, k)
            ins = outs = [[n]]
        else:
            st.cseq[pg] = st.cseq.get(pg, 0) + 1
            name = "nccl:" + PROFILING_NAMES[op]
            key = (g.pg_name, st.cseq[pg])
            ins, outs = [[n]], [[n]]
            if op == "all_gather":
                outs = [[n * g.nranks]]
            elif op == "reduce_scatter":
                outs = [[n // g.nranks]]
            elif op == "all_to_all":
                ins = [[sum(ev["splits"]) // eb]]
                outs = [[sum(ev["rsplits"]) // eb]]
        thread = (
            "pt_autograd_0" if ev["phase"] == "bwd" and ev["cls"] in ("TP", "EP") else "python3"
        )
        rec = (
            st.next_id,
            pg,
            iteration,
            st.cseq.get(pg, 0),
            st.pseq.get(pg, 0) if p2p else 0,
            st.opid[pg],
            name,
            op,
            ev["t_post"],
            ev["t_end"],
            ins,
            outs,
            C10_DTYPES.get(ev["dtype"], "Byte"),
            p2p,
            thread,
            key,
        )
        st.next_id += 1
        return rec

    def close_lane(self) -> list[Path]:
        """Stage the lane's records (``flight_recorder/.staging/rank<R>.pkl``)."""
        stage = self.names.out / "flight_recorder" / ".staging"
        stage.mkdir(parents=True, exist_ok=True)
        paths = []
        for r, st in self._ranks.items():
            path = stage / f"rank{r}.pkl"
            with path.open("wb") as fh:
                pickle.dump(
                    (list(st.ring), st.window, st.done), fh, protocol=pickle.HIGHEST_PROTOCOL
                )
            paths.append(self.names.flight_recorder(r))
        self._ranks = {}
        return paths

    @staticmethod
    def finish_run(sim: Simulation, out: Path) -> dict[str, Any] | None:
        """Resolve the hang (if any) over every rank's staged records and write the dumps.

        Returns:
            The hang as written (stuck rank, group, op, sequence; where each rank stopped),
            or None without the hang scenario.
        """
        names = Names(out)
        stage = out / "flight_recorder" / ".staging"
        recs: dict[int, list[_Rec]] = {}
        win_start: dict[int, int] = {}
        done: dict[int, dict[int, tuple[int, int]]] = {}
        for path in sorted(stage.glob("rank*.pkl")):
            with path.open("rb") as fh:
                ring, window, done_r = pickle.load(fh)  # our own staging file
            r = int(path.stem[4:])
            recs[r] = ring + window
            win_start[r] = len(ring)
            done[r] = done_r
        shutil.rmtree(stage)
        hang = hang_point(sim)
        cut = {r: len(v) for r, v in recs.items()}
        info: dict[str, Any] | None = None
        if hang is not None and hang[0] in recs:
            cut, info = _resolve_hang(sim, recs, win_start, hang)
        writer = _Dumper(sim)
        for r, v in recs.items():
            path = names.flight_recorder(r)
            path.parent.mkdir(parents=True, exist_ok=True)
            blocked = info is not None and r != info["rank"] and r in info["blocked_at"]
            path.write_bytes(writer.dump(r, v[: cut[r]], blocked, done[r]))
        return info


def hang_point(sim: Simulation) -> tuple[int, int, str] | None:
    """(rank, iteration, class) of the hang scenario, or None."""
    scn = sim.opts.scenario
    if scn.hang_rank is None:
        return None
    it = scn.hang_iteration if scn.hang_iteration is not None else sim.opts.iterations - 1
    return scn.hang_rank, min(it, sim.opts.iterations - 1), scn.hang_class


def _resolve_hang(
    sim: Simulation,
    recs: dict[int, list[_Rec]],
    win_start: dict[int, int],
    hang: tuple[int, int, str],
) -> tuple[dict[int, int], dict[str, Any]]:
    """Where each rank stops (number of its records posted) when ``hang``'s rank never posts
    its first call of the class in that iteration."""
    h, it, cls = hang
    hv = recs[h]
    cls_of = _classes(sim)
    cands = [i for i in range(win_start[h], len(hv)) if hv[i][R_ITER] == it and not hv[i][R_P2P]]
    first = next((i for i in cands if cls_of.get(hv[i][R_KEY][0]) == cls), None)
    if first is None:
        first = cands[0] if cands else len(hv) - 1
    where: dict[tuple[Any, ...], dict[int, int]] = {}
    for r, v in recs.items():
        for i in range(win_start[r], len(v)):
            where.setdefault(v[i][R_KEY], {})[r] = i
    cut = {r: len(v) for r, v in recs.items()}
    cut[h] = first
    blocked_at: dict[int, int] = {}
    changed = True
    while changed:  # cuts only move earlier, so this ends
        changed = False
        for r, v in recs.items():
            if r == h:
                continue
            # A rank already stuck is checked again before its stop: a peer found stuck
            # later may stop it earlier.
            for i in range(win_start[r], blocked_at.get(r, cut[r])):
                members = where[v[i][R_KEY]]
                if any(members[p] >= cut[p] for p in members if p != r):
                    blocked_at[r] = i
                    cut[r] = i + 1
                    changed = True
                    break
    rec = hv[first]
    g = next(x for x in sim.cluster.rank_groups(h) if x.pg_name == rec[R_KEY][0])
    info = {
        "rank": h,
        "iteration": it,
        "class": cls_of.get(g.pg_name),
        "pg_name": g.pg_name,
        "members": list(g.members),
        "op": rec[R_OP],
        "collective_seq_id": rec[R_CSEQ],
        "blocked_at": {
            r: {"pg_name": recs[r][i][R_KEY][0], "op": recs[r][i][R_OP], "seq": recs[r][i][R_CSEQ]}
            | ({"p2p_seq_id": recs[r][i][R_PSEQ]} if recs[r][i][R_P2P] else {})
            for r, i in sorted(blocked_at.items())
        },
        "shows_as": "the stuck rank's dump ends before that collective; the members that posted "
        "it hold it 'started'; every rank that then waits on a stuck rank stops at that call",
    }
    return cut, info


def _classes(sim: Simulation) -> dict[str, str]:
    """pg name -> traffic class of the group kind (the simulation's class names)."""
    kinds = {"tp": "TP", "dp": "DP", "emb": "EmbTableSyn", "ep": "EP", "edp": "DP", "pp": "PP"}
    return {g.pg_name: kinds.get(g.kind, "other") for g in sim.cluster.groups}


class _Dumper:
    """Builds the dump dict of one rank from its posted records and pickles it."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.size = sim.opts.fr_buffer_size
        self.epoch = sim.opts.start_epoch_ns
        self.version = sim.opts.nccl_version

    def dump(
        self, rank: int, posted: list[_Rec], blocked: bool, done: dict[int, tuple[int, int]]
    ) -> bytes:
        """The pickle of ``rank``'s dump (its last record is pending when ``blocked``;
        ``done``: each group's last sequences before the kept records, for ``pg_status``)."""
        cluster = self.sim.cluster
        groups = cluster.rank_groups(rank)
        off = self.epoch + cluster.skew_ns(rank)
        tid = str(139_800_000_000_000 + (rank * 7_919_007) % 1_000_000_000 * 64)
        tid_bwd = str(int(tid) + 16_384_000)
        status = {pg: [c, c, c, p, p, p] for pg, (c, p) in done.items()}
        has_coll = {pg for pg, (c, _) in done.items() if c > 0}
        entries = []
        last = len(posted) - 1
        for i, rec in enumerate(posted):
            pending = blocked and i == last
            pg = rec[R_PG]
            seq = rec[R_PSEQ] if rec[R_P2P] else rec[R_CSEQ]
            if not rec[R_P2P]:
                has_coll.add(pg)
            s = status.setdefault(pg, [-1, -1, -1, -1, -1, -1])
            base = 0 if not rec[R_P2P] else 3
            s[base] = seq
            s[base + 1] = seq
            if not pending:
                s[base + 2] = seq
            if i < len(posted) - self.size:
                continue
            g = groups[pg]
            fn, line = _FRAMES[rec[R_OP]]
            e: dict[str, Any] = {
                "frames": [
                    {
                        "name": fn,
                        "filename": "/usr/local/lib/python3.12/dist-packages/torch/distributed/distributed_c10d.py",
                        "line": line,
                    },
                    {
                        "name": "wrapper",
                        "filename": "/usr/local/lib/python3.12/dist-packages/torch/distributed/c10d_logger.py",
                        "line": 81,
                    },
                    {
                        "name": fn,
                        "filename": "/usr/local/lib/python3.12/dist-packages/deepspeed/comm/torch.py",
                        "line": 200,
                    },
                ],
                "record_id": rec[R_ID],
                "pg_id": pg,
                "process_group": (g.pg_name, "default_pg" if g.kind == "world" else "undefined"),
                "thread_name": rec[R_THREAD],
                "thread_id": tid_bwd if rec[R_THREAD] != "python3" else tid,
                "collective_seq_id": rec[R_CSEQ],
                "p2p_seq_id": rec[R_PSEQ],
                "op_id": rec[R_OPID],
                "profiling_name": rec[R_NAME],
                "time_created_ns": off + rec[R_POST] - CPU_LEAD_NS,
            }
            if not pending:
                e["duration_ms"] = f32((rec[R_END] - rec[R_POST]) / 1e6)
            e |= {
                "input_sizes": rec[R_IN],
                "input_dtypes": [rec[R_DT]],
                "output_sizes": rec[R_OUT],
                "output_dtypes": [rec[R_DT]],
                "state": "started" if pending else "completed",
                "time_discovered_started_ns": off + rec[R_END] + WATCHDOG_LAG_NS - 1_500
                if not pending
                else off + rec[R_POST] + WATCHDOG_LAG_NS,
                "time_discovered_completed_ns": None
                if pending
                else off + rec[R_END] + WATCHDOG_LAG_NS,
                "retired": not pending,
                "timeout_ms": TIMEOUT_MS,
                "is_p2p": rec[R_P2P],
            }
            entries.append(e)
        pg_config = {
            g.pg_name: {
                "name": g.pg_name,
                "desc": "default_pg" if g.kind == "world" else "undefined",
                "ranks": g.ranks_text,
            }
            for g in sorted(groups, key=lambda x: x.pg_name)
        }
        pg_status = {}
        for pg in sorted(status):
            s = status[pg]
            vals = s[:3] if pg in has_coll else s[3:]
            pg_status[str(pg)] = {
                "last_enqueued_collective": vals[0],
                "last_started_collective": vals[1],
                "last_completed_collective": vals[2],
            }
        dump = {
            "version": VERSION,
            "pg_config": pg_config,
            "comm_lib_version": self.version,
            "pg_status": pg_status,
            "entries": entries,
        }
        return pickle.dumps(dump, protocol=2)
