"""Simulate a PTD-P training run under DeepSpeed's 1F1B pipeline schedule: one event list.

Why: every output format and the ground truth are views of one list of timed events (compute
segments and communication calls per rank), so they cannot disagree. The simulation is
deterministic: each random draw is a pure function of the seed and the draw's keys
(:mod:`commscope.synthetic._rng`), so any part of the run can be re-simulated alone.

Model of execution
------------------

* **Schedule.** DeepSpeed's ``TrainSchedule`` (``deepspeed/runtime/pipe/schedule.py``): the
  iteration is ``2 (m + p - 1)`` lock-step steps; in step k stage s runs a forward when
  ``k ≡ s (mod 2)`` and a backward otherwise, forward stage s exchanges with backward stage
  s - 1 (``SendGrad``/``RecvGrad`` first, then ``SendActivation``/``RecvActivation``), then both
  compute. At the end: ``ReduceTiedGrads`` (first/last-stage embedding all-reduce),
  ``ReduceGrads`` (data-parallel collectives), ``OptimizerStep``.
* **Point-to-point.** Blocking rendezvous: the transfer starts when both sides have posted and
  lasts ``alpha + bytes / bandwidth``; each side's call spans from its own post to the end, and
  the part before the transfer starts is waiting (counted as pipeline bubble, paper §4.1).
* **Passes.** A forward or backward pass alternates compute segments and in-pass collectives
  (:mod:`commscope.synthetic.program`). A collective starts when the last member has arrived and
  ends for all members together. Each rank's compute speed is jittered once per pass (and the
  straggler is slower), so ``max`` over the group decides every segment.
* **Lanes.** The ranks that are synchronised inside passes form a *lane*: one data-parallel
  replica (all stages and TP ranks) for dense models; the ``ep`` replicas of one expert-parallel
  group for MoE models (their all-to-alls couple them; inside a lane the TP all-reduces then also
  wait for the slowest member of the lane, a small approximation). Lanes only interact at the
  end of the iteration, through the data-parallel (and expert-data-parallel) collectives.

Two phases: :meth:`Simulation.run_boundaries` simulates every lane without recording events and
resolves the cross-lane collectives at the end of each iteration (giving every rank's iteration
start times); :meth:`Simulation.lane_events` then re-simulates one lane for one iteration with
recording on and returns its events. All times are integer nanoseconds of true time since the
start of the run; per-segment durations come from ``floor`` of cumulative sums, so a rank's
timeline tiles its iteration exactly (``T_iter`` is the sum of its parts, to the nanosecond).

Event columns (:data:`EVENT_SCHEMA`): ``rank``, ``iteration``, ``seq`` (order on the rank within
the iteration), ``kind`` (``compute``/``comm``), ``name`` (compute label, or the collective's
role), ``phase`` (``fwd``/``recompute``/``bwd``/``step``), ``mb`` (micro-batch), ``cls`` (traffic
class TP/PP/DP/EmbTableSyn/EP), ``op``, ``group`` (model group kind, ``pp_next``/``pp_prev`` for
p2p), ``peer`` (global peer rank of send/recv), ``msg_bytes`` (the model's logged-size convention),
``dtype``, ``link`` (``intra``/``inter``/``slow``), ``t_post`` (call), ``t_start`` (transfer start),
``t_end``, ``splits``/``rsplits`` (all-to-all bytes sent to / received from each EP group
member, in group order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from commscope.model.config import RunConfig
from commscope.model.partition import stage_layer_offsets
from commscope.model.traffic import stage_layers
from commscope.synthetic._rng import (
    STREAM_COMM,
    STREAM_COMPUTE,
    STREAM_P2P,
    STREAM_TAIL,
    jitter_factor,
    jitter_table,
)
from commscope.synthetic.layout import Cluster, Group
from commscope.synthetic.moe import routing_matrix
from commscope.synthetic.program import ELEM_BYTES, StageProgram, Step, bus_bytes, stage_program
from commscope.synthetic.scenario import GenerateOptions

FWD, BWD = 0, 1
_LINK_RANK = {"intra": 0, "inter": 1, "slow": 2}
_OPT_MB = 1_000_003
"""Micro-batch key of the optimizer step's compute jitter."""

EVENT_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "iteration": pl.Int32(),
    "seq": pl.Int32(),
    "kind": pl.Utf8(),
    "name": pl.Utf8(),
    "phase": pl.Utf8(),
    "mb": pl.Int32(),
    "cls": pl.Utf8(),
    "op": pl.Utf8(),
    "group": pl.Utf8(),
    "peer": pl.Int32(),
    "msg_bytes": pl.Int64(),
    "dtype": pl.Utf8(),
    "link": pl.Utf8(),
    "t_post": pl.Int64(),
    "t_start": pl.Int64(),
    "t_end": pl.Int64(),
    "splits": pl.List(pl.Int64()),
    "rsplits": pl.List(pl.Int64()),
}


def step_to_micro_batch(step: int, stage: int, stages: int) -> tuple[int, bool]:
    """DeepSpeed ``TrainSchedule._step_to_micro_batch``: (micro-batch id, is_forward)."""
    if step % 2 == stage % 2:
        base = step // 2 if step % 2 == 0 else (step - 1) // 2
        return base - stage // 2, True
    if step % 2 == 0:
        return step // 2 - stages + (stage + 1) // 2, False
    return (step - 1) // 2 - stages + 1 + stage // 2, False


@dataclass
class Template:
    """A pass program with base durations for one lane's links (see module docstring)."""

    tid: int
    steps: tuple[Step, ...]
    c: list[float]
    s: list[float]
    links: list[str]
    se: list[float] = field(default_factory=list)
    si: list[float] = field(default_factory=list)
    cc: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        """Prefix sums shared by the scalar simulation and the vectorised expansion:
        ``se[j] = sum(s[:j])``, ``si[j] = sum(s[:j+1])``, ``cc[j] = sum(c[1:j+1])``."""
        run_s = 0.0
        run_c = 0.0
        for j, sj in enumerate(self.s):
            self.se.append(run_s)
            run_s += sj
            self.si.append(run_s)
            if j >= 1:
                run_c += self.c[j]
            self.cc.append(run_c)

    @property
    def k(self) -> int:
        """Number of collectives in the pass."""
        return len(self.s)

    @property
    def c0(self) -> float:
        """Base duration of the first compute segment."""
        return self.c[0]

    @property
    def ck(self) -> float:
        """Base duration of the last compute segment."""
        return self.c[-1]

    @property
    def s_sum(self) -> float:
        """Sum of the collectives' base durations (the last prefix sum)."""
        return self.si[-1] if self.si else 0.0

    @property
    def c_mid(self) -> float:
        """Sum of the inner compute segments c_1 .. c_{k-1} (a prefix sum, see cc)."""
        if not self.s:
            return 0.0
        return self.cc[-1]

    def frame(self) -> pl.DataFrame:
        """One row per step with everything the expansion needs."""
        rows: list[dict[str, Any]] = []
        for idx, st in enumerate(self.steps):
            j = idx // 2
            row: dict[str, Any] = {
                "tid": self.tid,
                "idx": idx,
                "is_c": st.kind == "C",
                "name": st.name,
                "phase": st.phase,
                "c": 0.0,
                "pSI": 0.0,
                "pCC": 0.0,
                "SE": 0.0,
                "SI": 0.0,
                "CC": 0.0,
                "cls": st.cls or None,
                "op": st.op or None,
                "group": st.group or None,
                "msg_bytes": st.msg_bytes if st.kind == "S" else None,
                "dtype": st.dtype or None,
                "link": None,
                "moe_layer": st.moe_layer,
                "a2a": st.a2a or None,
            }
            if st.kind == "C":
                row["c"] = self.c[j]
                if j >= 1:
                    row["pSI"] = self.si[j - 1]
                    row["pCC"] = self.cc[j - 1]
            else:
                row["SE"] = self.se[j]
                row["SI"] = self.si[j]
                row["CC"] = self.cc[j]
                row["link"] = self.links[j]
            rows.append(row)
        return pl.DataFrame(rows, schema=_TEMPLATE_SCHEMA)


_TEMPLATE_SCHEMA: dict[str, pl.DataType] = {
    "tid": pl.Int32(),
    "idx": pl.Int32(),
    "is_c": pl.Boolean(),
    "name": pl.Utf8(),
    "phase": pl.Utf8(),
    "c": pl.Float64(),
    "pSI": pl.Float64(),
    "pCC": pl.Float64(),
    "SE": pl.Float64(),
    "SI": pl.Float64(),
    "CC": pl.Float64(),
    "cls": pl.Utf8(),
    "op": pl.Utf8(),
    "group": pl.Utf8(),
    "msg_bytes": pl.Int64(),
    "dtype": pl.Utf8(),
    "link": pl.Utf8(),
    "moe_layer": pl.Int32(),
    "a2a": pl.Utf8(),
}

_PASS_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "stage": pl.Int32(),
    "dir": pl.Int32(),
    "mb": pl.Int32(),
    "a": pl.Int64(),
    "f": pl.Float64(),
    "fmax": pl.Float64(),
    "g": pl.Float64(),
    "T0": pl.Int64(),
    "tid": pl.Int32(),
}


@dataclass
class TailRecord:
    """One end-of-iteration call of one rank (collective or the optimizer step)."""

    cls: str | None
    op: str | None
    group: str | None
    msg_bytes: int | None
    dtype: str | None
    link: str | None
    t_post: int
    t_start: int
    t_end: int


class Simulation:
    """One synthetic run: layout, programs, and the two simulation phases."""

    def __init__(self, run: RunConfig, opts: GenerateOptions) -> None:
        """Prepare programs, links and per-lane member lists."""
        self.run = run
        self.opts = opts
        self.cluster = Cluster(run, opts)
        opts.scenario.check(run)
        par = run.parallel
        self.p = par.pp
        self.m = run.micro_batches
        self.iterations = opts.iterations
        self.programs: list[StageProgram] = [stage_program(run, s) for s in range(self.p)]
        self.rate = run.platform.mu * run.platform.peak_flops
        self.overhead_ns = opts.compute_overhead_us * 1e3
        self.M = self.cluster.members_per_stage
        self.lanes = self.cluster.lanes
        self.stage_ranks: list[list[list[int]]] = [
            [[self.cluster.rank_at(s, ln, i) for i in range(self.M)] for s in range(self.p)]
            for ln in range(self.lanes)
        ]
        self.stage_of = [ri.stage for ri in self.cluster.ranks]
        straggler = opts.scenario.straggler_rank
        self.strag = [
            opts.scenario.straggler_factor if r == straggler else 1.0 for r in range(run.world)
        ]
        self.moe_routed = (
            run.model.is_moe and self.cluster.ep > 1 and opts.scenario.moe_routing == "routed"
        )
        per_stage = stage_layers(run)
        offsets = stage_layer_offsets(per_stage)
        self.layer_stage = {
            offsets[st] + i: st for st in range(self.p) for i in range(per_stage[st])
        }
        self.tok_bytes = run.model.hidden * ELEM_BYTES[self.programs[0].pp_dtype]
        self._templates: dict[tuple[Any, ...], Template] = {}
        self._frames: dict[int, pl.DataFrame] = {}
        self._lane_links = self._compute_lane_links()
        self._p2p_base: dict[tuple[int, int], float] = {}
        for s in range(self.p - 1):
            prog = self.programs[s]
            for ln in range(self.lanes):
                for i in range(self.M):
                    a, b = self.stage_ranks[ln][s][i], self.stage_ranks[ln][s + 1][i]
                    g = self.cluster.group(a, "pp_next")
                    self._p2p_base[(a, b)] = self.cluster.transfer_ns(
                        "PP", g.link, prog.pp_msg_bytes
                    )
        self.iter_start: list[list[int]] = []
        self.tails: list[dict[int, list[TailRecord]]] = []
        self._record = False
        self._passes: list[tuple[Any, ...]] = []
        self._p2p: list[tuple[Any, ...]] = []
        self._cfac: list[float] = []
        self._pfac: list[float] = []
        self._row: dict[int, int] = {}

    # -- links and templates -----------------------------------------------------------------

    def _compute_lane_links(self) -> dict[tuple[int, int, str], str]:
        out: dict[tuple[int, int, str], str] = {}
        for ln in range(self.lanes):
            for s in range(self.p):
                for kind in ("tp", "ep"):
                    worst = "intra"
                    for r in self.stage_ranks[ln][s]:
                        g = self.cluster.by_rank[r].get(kind)
                        if g is not None and _LINK_RANK[g.link] > _LINK_RANK[worst]:
                            worst = g.link
                    out[(ln, s, kind)] = worst
        return out

    def _a2a_bus(
        self, lane: int, iteration: int, layer: int, direction: str, stage: int
    ) -> tuple[float, str]:
        """Bus bytes of a routed all-to-all: the largest off-diagonal row sum in the lane."""
        mat = self.routing(lane, iteration, layer)
        ep = len(mat)
        worst = 0.0
        for i in range(ep):
            if direction == "dispatch":
                sent = sum(mat[i][j] for j in range(ep) if j != i)
            else:
                sent = sum(mat[j][i] for j in range(ep) if j != i)
            worst = max(worst, sent * self.tok_bytes)
        return worst, self._lane_links[(lane, stage, "ep")]

    def routing(self, lane: int, iteration: int, layer: int) -> tuple[tuple[int, ...], ...]:
        """Token routing matrix of one MoE layer in one lane and iteration (see moe.py)."""
        model = self.run.model
        return routing_matrix(
            self.opts.scenario,
            self.opts.seed,
            iteration,
            lane,
            layer,
            self.cluster.ep,
            model.experts,
            model.micro_batch * model.seq,
            model.top_k,
        )

    def template(self, lane: int, stage: int, direction: int, iteration: int) -> Template:
        """The pass template of ``stage``/``direction`` with this lane's link speeds."""
        tp_link = self._lane_links[(lane, stage, "tp")]
        ep_link = self._lane_links[(lane, stage, "ep")]
        key: tuple[Any, ...] = (stage, direction, tp_link, ep_link)
        if self.moe_routed:
            key = (stage, direction, lane, iteration)
        tpl = self._templates.get(key)
        if tpl is not None:
            return tpl
        prog = self.programs[stage]
        steps = prog.fwd if direction == FWD else prog.bwd
        c: list[float] = []
        s: list[float] = []
        links: list[str] = []
        for st in steps:
            if st.kind == "C":
                c.append(st.flops / self.rate * 1e9 + st.kernels * self.overhead_ns)
                continue
            if st.group == "ep":
                n = self.cluster.ep
                if self.moe_routed:
                    bus, link = self._a2a_bus(lane, iteration, st.moe_layer, st.a2a, stage)
                else:
                    bus, link = bus_bytes(st.op, n, st.msg_bytes), ep_link
            else:
                n = self.run.parallel.tp
                bus, link = bus_bytes(st.op, n, st.msg_bytes), tp_link
            s.append(self.cluster.transfer_ns(st.cls, link, bus))
            links.append(link)
        tpl = Template(len(self._templates), steps, c, s, links)
        self._templates[key] = tpl
        return tpl

    def template_frame(self, tid: int) -> pl.DataFrame:
        """The expansion frame of template ``tid`` (cached)."""
        frame = self._frames.get(tid)
        if frame is None:
            tpl = next(t for t in self._templates.values() if t.tid == tid)
            frame = tpl.frame()
            self._frames[tid] = frame
        return frame

    # -- draws -------------------------------------------------------------------------------

    def _draw_iteration(self, iteration: int, lane: int | None = None) -> None:
        """Jitter tables of one iteration (of one lane's ranks, or of all): compute per
        (rank, mb, dir), p2p per (sending rank, mb, kind)."""
        seed = self.opts.seed
        ranks = list(range(self.run.world)) if lane is None else self.cluster.lane_ranks(lane)
        self._row = {r: i for i, r in enumerate(ranks)}
        sizes = (len(ranks), self.m, 2)
        first = None if lane is None else ranks
        self._cfac = jitter_table(
            self.opts.compute_jitter, seed, (STREAM_COMPUTE, iteration), sizes, first
        )
        self._pfac = jitter_table(
            self.opts.comm_jitter, seed, (STREAM_P2P, iteration), sizes, first
        )

    def _f(self, rank: int, mb: int, direction: int) -> float:
        return self.strag[rank] * self._cfac[(self._row[rank] * self.m + mb) * 2 + direction]

    # -- one lane ----------------------------------------------------------------------------

    def _pass(
        self, lane: int, stage: int, direction: int, mb: int, iteration: int, starts: list[int]
    ) -> list[int]:
        ranks = self.stage_ranks[lane][stage]
        tpl = self.template(lane, stage, direction, iteration)
        f = [self._f(r, mb, direction) for r in ranks]
        fmax = max(f)
        if tpl.k == 0:
            g = 1.0
            t0 = 0
            ends = [a + math.floor(tpl.c0 * fi) for a, fi in zip(starts, f, strict=True)]
        else:
            g = jitter_factor(
                self.opts.comm_jitter,
                self.opts.seed,
                STREAM_COMM,
                iteration,
                lane,
                stage,
                mb,
                direction,
            )
            t0 = max(a + math.floor(tpl.c0 * fi) for a, fi in zip(starts, f, strict=True))
            e_last = t0 + math.floor(g * tpl.s_sum + fmax * tpl.c_mid)
            ends = [e_last + math.floor(tpl.ck * fi) for fi in f]
        if self._record:
            for r, a, fi in zip(ranks, starts, f, strict=True):
                self._passes.append((r, stage, direction, mb, a, fi, fmax, g, t0, tpl.tid))
        return ends

    def _transfer(
        self, lane: int, src: int, dst: int, kind: int, mb: int, t_src: list[int], t_dst: list[int]
    ) -> None:
        """Rendezvous p2p from stage ``src`` to ``dst`` for every member (kind 0 act, 1 grad)."""
        prog = self.programs[min(src, dst)]
        for i in range(self.M):
            rs = self.stage_ranks[lane][src][i]
            rd = self.stage_ranks[lane][dst][i]
            base = self._p2p_base[(rs, rd) if src < dst else (rd, rs)]
            d = math.floor(base * self._pfac[(self._row[rs] * self.m + mb) * 2 + kind])
            start = max(t_src[i], t_dst[i])
            end = start + d
            if self._record:
                phase = "fwd" if kind == 0 else "bwd"
                g_send, g_recv = ("pp_next", "pp_prev") if src < dst else ("pp_prev", "pp_next")
                link = self.cluster.group(rs, g_send).link
                self._p2p.append(
                    (
                        rs,
                        "send",
                        g_send,
                        rd,
                        mb,
                        phase,
                        prog.pp_msg_bytes,
                        prog.pp_dtype,
                        link,
                        t_src[i],
                        start,
                        end,
                    )
                )
                self._p2p.append(
                    (
                        rd,
                        "recv",
                        g_recv,
                        rs,
                        mb,
                        phase,
                        prog.pp_msg_bytes,
                        prog.pp_dtype,
                        link,
                        t_dst[i],
                        start,
                        end,
                    )
                )
            t_src[i] = end
            t_dst[i] = end

    def simulate_lane(self, lane: int, iteration: int, starts: list[int]) -> dict[int, int]:
        """Run one lane's pipeline schedule; returns each rank's time at the end of it."""
        p, m = self.p, self.m
        T = [[starts[r] for r in self.stage_ranks[lane][s]] for s in range(p)]

        def valid(mb: int) -> bool:
            return 0 <= mb < m

        prev = [-1] * p
        for step in range(2 * (m + p - 1)):
            cur = [0] * p
            fwd = [False] * p
            for s in range(p):
                cur[s], fwd[s] = step_to_micro_batch(step, s, p)
            for s in range(p):
                if fwd[s]:
                    if s > 0:
                        b = s - 1
                        v1 = valid(cur[b])
                        if v1 != valid(prev[s]) or (v1 and cur[b] != prev[s]):
                            raise RuntimeError(
                                f"schedule mismatch (grad) at step {step}, stage {s}"
                            )
                        if v1:
                            self._transfer(lane, s, b, 1, cur[b], T[s], T[b])
                        v2 = valid(prev[b])
                        if v2 != valid(cur[s]) or (v2 and prev[b] != cur[s]):
                            raise RuntimeError(f"schedule mismatch (act) at step {step}, stage {s}")
                        if v2:
                            self._transfer(lane, b, s, 0, cur[s], T[b], T[s])
                        if valid(cur[b]):
                            T[b] = self._pass(lane, b, BWD, cur[b], iteration, T[b])
                    if valid(cur[s]):
                        T[s] = self._pass(lane, s, FWD, cur[s], iteration, T[s])
                elif s == p - 1 and valid(cur[s]):
                    T[s] = self._pass(lane, s, BWD, cur[s], iteration, T[s])
            prev = cur
        out: dict[int, int] = {}
        for s in range(p):
            for i, r in enumerate(self.stage_ranks[lane][s]):
                out[r] = T[s][i]
        return out

    # -- phase 1: iteration boundaries -------------------------------------------------------

    def run_boundaries(self) -> None:
        """Simulate every lane and the cross-lane end of each iteration (no events kept)."""
        world = self.run.world
        starts = [0] * world
        self.iter_start = []
        self.tails = []
        self._record = False
        for k in range(self.iterations):
            self._draw_iteration(k)
            self.iter_start.append(list(starts))
            pipe_end: dict[int, int] = {}
            for ln in range(self.lanes):
                pipe_end.update(self.simulate_lane(ln, k, starts))
            tails, ends = self._resolve_tail(k, pipe_end)
            self.tails.append(tails)
            starts = [ends[r] for r in range(world)]
        self.iter_start.append(list(starts))

    def _resolve_tail(
        self, iteration: int, pipe_end: dict[int, int]
    ) -> tuple[dict[int, list[TailRecord]], dict[int, int]]:
        world = self.run.world
        queues = {r: self.programs[self.stage_of[r]].tail for r in range(world)}
        pos = dict.fromkeys(range(world), 0)
        post = dict(pipe_end)
        recs: dict[int, list[TailRecord]] = {r: [] for r in range(world)}
        while True:
            waiting: dict[int, tuple[Group, Any, list[int]]] = {}
            pending = False
            for r in range(world):
                if pos[r] >= len(queues[r]):
                    continue
                pending = True
                op = queues[r][pos[r]]
                g = self.cluster.group(r, op.group)
                entry = waiting.setdefault(id(g), (g, op, []))
                entry[2].append(r)
            if not pending:
                break
            progressed = False
            for g, op, members in waiting.values():
                if len(members) != g.nranks:
                    continue
                progressed = True
                start = max(post[x] for x in members)
                base = self.cluster.transfer_ns(
                    op.cls, g.link, bus_bytes(op.op, g.nranks, op.msg_bytes)
                )
                fac = jitter_factor(
                    self.opts.comm_jitter,
                    self.opts.seed,
                    STREAM_TAIL,
                    iteration,
                    g.comm_hash & 0xFFFFFFFF,
                    pos[members[0]],
                )
                end = start + math.floor(base * fac)
                for x in members:
                    recs[x].append(
                        TailRecord(
                            op.cls,
                            op.op,
                            op.group,
                            op.msg_bytes,
                            op.dtype,
                            g.link,
                            post[x],
                            start,
                            end,
                        )
                    )
                    post[x] = end
                    pos[x] += 1
            if not progressed:
                raise RuntimeError("end-of-iteration collectives deadlocked (inconsistent groups)")
        ends: dict[int, int] = {}
        for r in range(world):
            prog = self.programs[self.stage_of[r]]
            f = self.strag[r] * jitter_factor(
                self.opts.compute_jitter, self.opts.seed, STREAM_COMPUTE, iteration, r, _OPT_MB, 2
            )
            start = post[r]
            end = start + max(1, math.floor(prog.optimizer_flops_ns * f))
            recs[r].append(TailRecord(None, None, None, None, None, None, start, start, end))
            ends[r] = end
        return recs, ends

    # -- phase 2: events ---------------------------------------------------------------------

    def lane_events(self, lane: int, iteration: int) -> pl.DataFrame:
        """Every event of one lane in one iteration (see :data:`EVENT_SCHEMA`).

        Requires :meth:`run_boundaries` first.
        """
        if not self.iter_start:
            raise RuntimeError("run_boundaries() must run before lane_events()")
        self._draw_iteration(iteration, lane)
        self._record = True
        self._passes = []
        self._p2p = []
        try:
            self.simulate_lane(lane, iteration, self.iter_start[iteration])
        finally:
            self._record = False
        parts = [
            self._expand(iteration, lane),
            self._p2p_frame(iteration),
            self._tail_frame(iteration, lane),
        ]
        events = pl.concat([p for p in parts if p.height], how="diagonal_relaxed")
        events = events.sort(["rank", "t_start", "t_post"])
        events = events.with_columns(
            pl.int_range(pl.len(), dtype=pl.Int32).over("rank").alias("seq")
        )
        return events.select(
            [
                (pl.col(c) if c in events.columns else pl.lit(None)).cast(t).alias(c)
                for c, t in EVENT_SCHEMA.items()
            ]
        )

    def _expand(self, iteration: int, lane: int) -> pl.DataFrame:
        if not self._passes:
            return pl.DataFrame(schema=EVENT_SCHEMA)
        passes = pl.DataFrame(self._passes, schema=_PASS_SCHEMA, orient="row")
        tids = passes["tid"].unique().to_list()
        tpl = pl.concat([self.template_frame(t) for t in tids])
        df = passes.join(tpl, on="tid").sort(["rank", "stage", "dir", "mb", "idx"])
        c_start = (
            pl.when(pl.col("idx") == 0)
            .then(pl.col("a"))
            .otherwise(
                pl.col("T0")
                + (pl.col("g") * pl.col("pSI") + pl.col("fmax") * pl.col("pCC"))
                .floor()
                .cast(pl.Int64)
            )
        )
        df = df.with_columns(c_start.alias("_cs"))
        df = df.with_columns(
            (pl.col("_cs") + (pl.col("c") * pl.col("f")).floor().cast(pl.Int64)).alias("_ce")
        )
        s_start = pl.col("T0") + (
            pl.col("g") * pl.col("SE") + pl.col("fmax") * pl.col("CC")
        ).floor().cast(pl.Int64)
        s_end = pl.col("T0") + (
            pl.col("g") * pl.col("SI") + pl.col("fmax") * pl.col("CC")
        ).floor().cast(pl.Int64)
        df = df.with_columns(
            pl.when(pl.col("is_c"))
            .then(pl.col("_cs"))
            .otherwise(pl.col("_ce").shift(1))
            .alias("t_post"),
            pl.when(pl.col("is_c")).then(pl.col("_cs")).otherwise(s_start).alias("t_start"),
            pl.when(pl.col("is_c")).then(pl.col("_ce")).otherwise(s_end).alias("t_end"),
        )
        df = df.filter(~pl.col("is_c") | (pl.col("t_end") > pl.col("t_start")))
        df = df.with_columns(
            pl.when(pl.col("is_c")).then(pl.lit("compute")).otherwise(pl.lit("comm")).alias("kind"),
            pl.lit(iteration, dtype=pl.Int32).alias("iteration"),
            pl.lit(None, dtype=pl.Int32).alias("peer"),
        )
        if self.run.model.is_moe and self.cluster.ep > 1:
            df = self._attach_splits(df, iteration, lane)
        return df.select([c for c in EVENT_SCHEMA if c in df.columns and c != "seq"])

    def _attach_splits(self, df: pl.DataFrame, iteration: int, lane: int) -> pl.DataFrame:
        """All-to-all split sizes (bytes per EP member) and the resulting message size."""
        ep = self.cluster.ep
        tp = self.run.parallel.tp
        layers = sorted({x for x in df["moe_layer"].unique().to_list() if x is not None and x >= 0})
        rows: list[tuple[Any, ...]] = []
        for layer in layers:
            if self.moe_routed:
                mat = self.routing(lane, iteration, layer)
            for s in (self.layer_stage[layer],):
                for i, r in enumerate(self.stage_ranks[lane][s]):
                    pos = i // tp
                    for direction in ("dispatch", "combine"):
                        if self.moe_routed:
                            out_toks = [
                                mat[pos][j] if direction == "dispatch" else mat[j][pos]
                                for j in range(ep)
                            ]
                            in_toks = [
                                mat[j][pos] if direction == "dispatch" else mat[pos][j]
                                for j in range(ep)
                            ]
                            splits = [t * self.tok_bytes for t in out_toks]
                            rsplits = [t * self.tok_bytes for t in in_toks]
                        else:
                            size = next(
                                (
                                    int(it.msg_bytes)
                                    for it in self.programs[s].items
                                    if it.traffic_class == "EP"
                                ),
                                0,
                            )
                            splits = rsplits = [size // ep] * ep
                        rows.append((r, layer, direction, splits, rsplits, sum(splits)))
        split_df = pl.DataFrame(
            rows,
            schema={
                "rank": pl.Int32,
                "moe_layer": pl.Int32,
                "a2a": pl.Utf8,
                "splits": pl.List(pl.Int64),
                "rsplits": pl.List(pl.Int64),
                "_sb": pl.Int64,
            },
            orient="row",
        )
        df = df.join(split_df, on=["rank", "moe_layer", "a2a"], how="left")
        return df.with_columns(
            pl.when(pl.col("op") == "all_to_all")
            .then(pl.col("_sb"))
            .otherwise(pl.col("msg_bytes"))
            .alias("msg_bytes")
        ).drop("_sb")

    def _p2p_frame(self, iteration: int) -> pl.DataFrame:
        if not self._p2p:
            return pl.DataFrame(schema=EVENT_SCHEMA)
        df = pl.DataFrame(
            self._p2p,
            schema={
                "rank": pl.Int32,
                "op": pl.Utf8,
                "group": pl.Utf8,
                "peer": pl.Int32,
                "mb": pl.Int32,
                "phase": pl.Utf8,
                "msg_bytes": pl.Int64,
                "dtype": pl.Utf8,
                "link": pl.Utf8,
                "t_post": pl.Int64,
                "t_start": pl.Int64,
                "t_end": pl.Int64,
            },
            orient="row",
        )
        return df.with_columns(
            pl.lit(iteration, dtype=pl.Int32).alias("iteration"),
            pl.lit("comm").alias("kind"),
            pl.concat_str([pl.lit("pp_"), pl.col("op")]).alias("name"),
            pl.lit("PP").alias("cls"),
        )

    def _tail_frame(self, iteration: int, lane: int) -> pl.DataFrame:
        rows: list[tuple[Any, ...]] = []
        for r in self.cluster.lane_ranks(lane):
            for rec in self.tails[iteration][r]:
                if rec.cls is None:
                    rows.append(
                        (
                            r,
                            "compute",
                            "optimizer",
                            "step",
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            rec.t_post,
                            rec.t_start,
                            rec.t_end,
                        )
                    )
                else:
                    label = "emb_sync" if rec.cls == "EmbTableSyn" else f"{rec.group}_{rec.op}"
                    rows.append(
                        (
                            r,
                            "comm",
                            label,
                            "step",
                            rec.cls,
                            rec.op,
                            rec.group,
                            rec.msg_bytes,
                            rec.dtype,
                            rec.link,
                            rec.t_post,
                            rec.t_start,
                            rec.t_end,
                        )
                    )
        df = pl.DataFrame(
            rows,
            schema={
                "rank": pl.Int32,
                "kind": pl.Utf8,
                "name": pl.Utf8,
                "phase": pl.Utf8,
                "cls": pl.Utf8,
                "op": pl.Utf8,
                "group": pl.Utf8,
                "msg_bytes": pl.Int64,
                "dtype": pl.Utf8,
                "link": pl.Utf8,
                "t_post": pl.Int64,
                "t_start": pl.Int64,
                "t_end": pl.Int64,
            },
            orient="row",
        )
        return df.with_columns(pl.lit(iteration, dtype=pl.Int32).alias("iteration"))

    # -- convenience -------------------------------------------------------------------------

    def iteration_bounds(self, iteration: int, rank: int) -> tuple[int, int]:
        """(start, end) of ``rank``'s iteration, ns."""
        return self.iter_start[iteration][rank], self.iter_start[iteration + 1][rank]
