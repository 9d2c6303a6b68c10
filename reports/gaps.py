"""Honest gaps: for every report view, either its data is there or the cause and the remedy.

Why: a page that only says "not available" leaves the user guessing whether commscope failed
or the logs lack something, and what to record next time. :func:`gaps` reads the run's marts
and a few counts over the stored canonical tables (reports read; they never derive or run a
model here) and returns, per view, a :class:`Gap` naming what the input lacks, found in the
run's own rows (``comm_ops.timing_source``, ``group_source``, ``trace_meta.world_size``,
kernels, iteration markers, ...), and what to record to get it. A view absent from the result
has its data. Columns added by schema 1.4 (``timing_source``, ``group_source``) are read
defensively: in older stores they are absent and count as NULL.

Gap kinds:

* ``missing``: the input lacks the information; the page says "not available", the cause and
  the remedy.
* ``none``: the run truly has nothing of that kind (no all-to-all calls, a one-rank world); no
  remedy, nothing is wrong.
* ``partial``: the view is drawn, but some calls are left out of it or rest on an inference
  (a group taken from the world size); the page says how many and why above the view.

A view needs its inputs in order (calls at all, then durations and iterations for the time
views, sizes and groups for the volume views); the first one missing is the cause named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb

if TYPE_CHECKING:
    from commscope.reports.data import RunData

# The views a report draws (html section bodies ask for these keys).
VIEWS = (
    "model",
    "breakdown",
    "traffic",
    "onoff_timeline",
    "onoff",
    "sizes",
    "bandwidth",
    "stragglers",
    "bubbles",
    "predictability",
    "moe",
    # issue 18: the straggler section (commscope.reports.stragglers)
    "waits",
    "skew",
    "clocks",
    "instances",
)
# Formats whose calls come from a GPU timeline (a call's time is the kernel it launched).
TIMELINE_FORMATS = ("kineto", "nsys")
# Calls whose destinations need their group (point-to-point calls name their peer instead).
COLL = "op NOT IN ('send', 'recv', 'barrier')"
# Process-group names PyTorch gives the default (world) group.
DEFAULT_PG = ("0", "default_pg")

REMEDY_TRACE = (
    "add a Kineto trace (torch.profiler with ProfilerActivity.CUDA) or an Nsight Systems "
    "report (nsys profile -t cuda,nvtx) of the same job"
)
REMEDY_NCCL_COLL = "set NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL"
REMEDY_NCCL_INIT = (
    "set NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL from process start, one file per process "
    "(NCCL_DEBUG_FILE=nccl.%h.%p.log), so each communicator's 'Init COMPLETE' line names its "
    "rank and nranks"
)
REMEDY_CUDA = (
    "record with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])"
)
REMEDY_PG = (
    "record with PyTorch >= 2.2 so record_param_comms carries Collective name and "
    "Process Group (name and ranks)"
)
REMEDY_STEPS = (
    "record with a torch.profiler schedule and call prof.step() every iteration so "
    "ProfilerStep#N exists"
)
REMEDY_TIMELINES = (
    "record per-rank timelines from every rank of each group: a Kineto trace "
    "(torch.profiler with ProfilerActivity.CUDA) or an Nsight Systems report "
    "(nsys profile -t cuda,nvtx) of each rank; an instance is timed only when all its members "
    "are (NCCL debug logs time nothing: they give only the gap checks)"
)
REMEDY_EVERY_RANK = (
    "ingest the logs of every rank of each group: per-rank timelines (Kineto or nsys) for "
    "waits and skew, or NCCL_DEBUG=INFO logs of every process (NCCL_DEBUG_FILE=nccl.%h.%p.log) "
    "for the gap checks only"
)
REMEDY_MODEL = (
    "give the run a model config: commscope report {run} --model CONFIG.toml (see configs/)"
)


@dataclass(frozen=True)
class Gap:
    """Why a view shows nothing (or leaves calls out), and what to record to get it.

    Attributes:
        kind: missing | none | partial (see the module docstring).
        reason: the cause found in the run's data (counts, formats, columns).
        remedy: what to record or do to get the information; empty for kind none.
    """

    kind: str
    reason: str
    remedy: str = ""

    def text(self) -> str:
        """The sentence the page shows."""
        if self.kind == "none":
            return f"nothing to show: {self.reason}."
        if self.kind == "partial":
            tail = f" (to complete it: {self.remedy})" if self.remedy else ""
            return f"{self.reason}{tail}."
        tail = f"; to get it, {self.remedy}" if self.remedy else ""
        return f"not available: {self.reason}{tail}."


@dataclass
class Evidence:
    """Counts over the run's stored tables that explain what a view can show.

    Attributes:
        calls: comm_ops rows, per source_format.
        untimed: calls without a duration (dur_ns NULL) on ranks with no timed call, per
            source_format (a rank that another source times, e.g. NCCL lines beside the
            rank's Kineto trace, is measured from that source: nothing is missing).
        timing: calls per timing_source ('' where NULL or the column is absent).
        unsized: calls without msg_bytes, per source_format.
        ungrouped: collective calls (not send/recv/barrier) without group_size on ranks where
            no other source names groups, per source_format.
        unnamed_pg: timeline collectives without group_size that name no process group (or
            the default one).
        unranked: calls without a global rank, per source_format.
        group_source: collective calls per group_source ('' where NULL or absent).
        all_to_all: all_to_all calls.
        unsized_deepep: DeepEP dispatch/combine calls (kernels named deep_ep:: or *ep::)
            without a message size.
        p2p: send and recv calls (pipeline-parallel transfers).
        ranks: distinct ranks with calls.
        kernels: GPU kernels per category.
        step_markers: iteration markers (ProfilerStep#N, NVTX steps).
        traces: trace_meta rows (timeline files).
        world_size: largest world size the traces state (None when none does).
        files: ingested files per format.
        iterations: distinct iterations in the iterations mart.
        timed_ranks: distinct ranks with at least one call that has a duration.
    """

    calls: dict[str, int] = field(default_factory=dict)
    untimed: dict[str, int] = field(default_factory=dict)
    timing: dict[str, int] = field(default_factory=dict)
    unsized: dict[str, int] = field(default_factory=dict)
    ungrouped: dict[str, int] = field(default_factory=dict)
    unnamed_pg: int = 0
    unranked: dict[str, int] = field(default_factory=dict)
    group_source: dict[str, int] = field(default_factory=dict)
    all_to_all: int = 0
    unsized_deepep: int = 0
    p2p: int = 0
    ranks: int = 0
    kernels: dict[str, int] = field(default_factory=dict)
    step_markers: int = 0
    traces: int = 0
    world_size: int | None = None
    files: dict[str, int] = field(default_factory=dict)
    iterations: int = 0
    timed_ranks: int = 0

    @property
    def n_calls(self) -> int:
        """All calls."""
        return sum(self.calls.values())


def _columns(con: Any, table: str) -> set[str]:
    try:
        return set(con.sql(f"SELECT * FROM {table} LIMIT 0").columns)
    except duckdb.Error:  # the table is absent from an old or partial store
        return set()


def _per(con: Any, sql: str, run_id: str) -> dict[str, int]:
    try:
        rows = con.execute(sql, {"run_id": run_id}).fetchall()
    except duckdb.Error:  # an absent table reads as empty
        return {}
    # by key: a GROUP BY's rows come in any order, and texts list these counts
    return dict(sorted((str(k if k is not None else ""), int(v)) for k, v in rows if v))


def evidence(con: Any, run_id: str, marts: dict[str, Any]) -> Evidence:
    """Count, in the run's stored tables and marts, what each view needs (bounded queries)."""
    cols = _columns(con, "comm_ops")
    ts = "timing_source" if "timing_source" in cols else "NULL"
    gs = "group_source" if "group_source" in cols else "NULL"
    ev = Evidence()
    where = "FROM comm_ops WHERE run_id = $run_id"
    fmt = "coalesce(source_format, '')"
    ev.calls = _per(con, f"SELECT {fmt}, count(*) {where} GROUP BY 1", run_id)
    ev.untimed = _per(
        con,
        f"SELECT {fmt}, count(*) FROM comm_ops AS c WHERE run_id = $run_id AND dur_ns IS NULL "
        "AND NOT EXISTS (SELECT 1 FROM comm_ops AS t WHERE t.run_id = c.run_id "
        "AND t.rank = c.rank AND t.dur_ns IS NOT NULL) GROUP BY 1",
        run_id,
    )
    ev.unsized = _per(
        con, f"SELECT {fmt}, count(*) {where} AND msg_bytes IS NULL GROUP BY 1", run_id
    )
    # a collective lacks its group only where no other source of the same rank names groups
    # (the marts read one primary source per rank)
    ungrouped = (
        f"FROM comm_ops AS c WHERE run_id = $run_id AND group_size IS NULL AND {COLL} "
        "AND NOT EXISTS (SELECT 1 FROM comm_ops AS t WHERE t.run_id = c.run_id "
        "AND t.rank = c.rank AND t.group_size IS NOT NULL "
        "AND t.source_format IS DISTINCT FROM c.source_format)"
    )
    ev.ungrouped = _per(con, f"SELECT {fmt}, count(*) {ungrouped} GROUP BY 1", run_id)
    ev.unranked = _per(con, f"SELECT {fmt}, count(*) {where} AND rank IS NULL GROUP BY 1", run_id)
    ev.timing = _per(con, f"SELECT {ts}, count(*) {where} GROUP BY 1", run_id)
    ev.group_source = _per(con, f"SELECT {gs}, count(*) {where} AND {COLL} GROUP BY 1", run_id)
    tl = ", ".join(f"'{f}'" for f in TIMELINE_FORMATS)
    pg = ", ".join(f"'{p}'" for p in DEFAULT_PG)
    ev.unnamed_pg = sum(
        _per(
            con,
            f"SELECT 'n', count(*) {ungrouped} AND source_format IN ({tl}) "
            f"AND (comm_id IS NULL OR comm_id IN ({pg}))",
            run_id,
        ).values()
    )
    ev.all_to_all = sum(
        _per(con, f"SELECT 'n', count(*) {where} AND op = 'all_to_all'", run_id).values()
    )
    ev.unsized_deepep = sum(
        _per(
            con,
            f"SELECT 'n', count(*) {where} AND msg_bytes IS NULL "
            "AND regexp_matches(raw_op, '(^|[^A-Za-z0-9_])(deep_ep|[A-Za-z0-9_]*ep)::')",
            run_id,
        ).values()
    )
    ev.p2p = sum(
        _per(con, f"SELECT 'n', count(*) {where} AND op IN ('send', 'recv')", run_id).values()
    )
    ev.ranks = sum(_per(con, f"SELECT 'n', count(DISTINCT rank) {where}", run_id).values())
    ev.timed_ranks = sum(
        _per(
            con, f"SELECT 'n', count(DISTINCT rank) {where} AND dur_ns IS NOT NULL", run_id
        ).values()
    )
    ev.kernels = _per(
        con, "SELECT category, count(*) FROM kernels WHERE run_id = $run_id GROUP BY 1", run_id
    )
    ev.step_markers = sum(
        _per(
            con,
            "SELECT 'n', count(*) FROM markers WHERE run_id = $run_id AND kind = 'iteration'",
            run_id,
        ).values()
    )
    ev.traces = sum(
        _per(con, "SELECT 'n', count(*) FROM trace_meta WHERE run_id = $run_id", run_id).values()
    )
    world = _per(
        con,
        "SELECT 'w', max(world_size) FROM trace_meta WHERE run_id = $run_id",
        run_id,
    )
    ev.world_size = world.get("w")
    ev.files = _per(
        con,
        "SELECT format, count(DISTINCT path) FROM ingested_files WHERE run_id = $run_id GROUP BY 1",
        run_id,
    )
    it = marts.get("iterations")
    if it is not None and it.height:
        ev.iterations = int(it["iteration"].n_unique())
    return ev


# ---------------------------------------------------------------------------- causes


def _fmt_list(parts: list[str]) -> str:
    return "; ".join(parts)


def _calls_gap(ev: Evidence) -> Gap | None:
    """The run has no communication call at all: why, per ingested format."""
    if ev.n_calls:
        return None
    if "nccl_debug" in ev.files:
        return Gap("missing", "NCCL debug logs have no COLL lines", REMEDY_NCCL_COLL)
    if "deepspeed_comms" in ev.files:
        return Gap(
            "missing",
            "the DeepSpeed logs hold no per-call comms-logger lines (at most the summary table)",
            "enable the comms_logger with verbose: true and prof_all: true in the DeepSpeed "
            "config so every call is logged",
        )
    if ev.traces and ev.world_size == 1:
        return Gap("none", "the trace's world size is 1: a one-rank job communicates with no one")
    if ev.traces and ev.world_size is None:
        return Gap(
            "missing",
            "the trace has no communication calls (no record_param_comms, nccl:* or gloo:* "
            "events) and no distributedInfo: a single-process run has none",
            "if the job is distributed, initialise torch.distributed before the profiler "
            "starts and profile steps that run collectives",
        )
    if ev.traces:
        return Gap(
            "missing",
            "the trace has no communication calls (no record_param_comms, nccl:* or gloo:* "
            "events) in its recorded window",
            "profile steps that run collectives, with torch.distributed initialised before "
            "the profiler starts",
        )
    return Gap(
        "missing",
        "no communication calls were ingested for this run",
        "ingest NCCL debug logs (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL), DeepSpeed "
        "comms-logger output or a Kineto/Nsight trace",
    )


def _timing_gap(ev: Evidence, *, partial: bool) -> Gap | None:
    """Calls without a duration: the cause per source (timing_source, format, kernels)."""
    untimed = sum(ev.untimed.values())
    if not untimed:
        return None
    how = "timing_source none: " if ev.timing.get("none") else ""
    causes: list[str] = []
    remedies: list[str] = []
    one_rank = False
    for fmt_name, n in sorted(ev.untimed.items()):
        if fmt_name == "nccl_debug":
            causes.append(f"{n:,} calls come from NCCL debug logs, which time nothing")
            remedies.append(REMEDY_TRACE)
        elif fmt_name in TIMELINE_FORMATS and ev.world_size == 1:
            causes.append(
                f"{n:,} {fmt_name} calls launched no GPU kernel in a world of one rank "
                "(a one-rank group moves no data)"
            )
            one_rank = True
        elif fmt_name == "nsys" and not ev.kernels:
            causes.append(
                f"{n:,} nsys calls, and no GPU kernels: the report was recorded without CUDA "
                "tracing"
            )
            remedies.append("record with nsys profile -t cuda,nvtx")
        elif fmt_name in TIMELINE_FORMATS and not ev.kernels:
            causes.append(
                f"{n:,} {fmt_name} calls, and no GPU kernels: the trace was recorded without "
                "ProfilerActivity.CUDA"
            )
            remedies.append(REMEDY_CUDA)
        elif fmt_name in TIMELINE_FORMATS:
            causes.append(
                f"{n:,} {fmt_name} calls launched no communication kernel the trace recorded "
                "(zero-size calls, or kernels outside the profiled window)"
            )
        elif fmt_name == "deepspeed_comms":
            causes.append(f"{n:,} DeepSpeed comms-logger calls carry no latency")
            remedies.append("enable the comms_logger with verbose: true in the DeepSpeed config")
        else:
            causes.append(f"{n:,} {fmt_name or 'unknown-format'} calls have no duration")
    total = ev.n_calls
    lead = f"{untimed:,} of {total:,} calls have no duration"
    reason = f"{lead} ({how}{_fmt_list(causes)})"
    kind = "none" if one_rank and not remedies else "missing"
    if partial:
        kind = "partial"
    return Gap(kind, reason, _fmt_list(list(dict.fromkeys(remedies))))


def _group_gap(ev: Evidence) -> Gap | None:
    """Calls whose group (size or the caller's ranks) is unknown: the cause per source."""
    causes: list[str] = []
    remedies: list[str] = []
    ungrouped = dict(ev.ungrouped)
    unranked = dict(ev.unranked)
    tl_ungrouped = sum(n for f, n in ungrouped.items() if f in TIMELINE_FORMATS)
    if tl_ungrouped:
        w = ev.world_size
        if ev.unnamed_pg and w is None:
            causes.append(
                f"{ev.unnamed_pg:,} calls name no process group and the trace has no "
                "distributedInfo.world_size"
            )
            remedies.append(REMEDY_PG)
        elif ev.unnamed_pg and w is not None and w > 1:
            causes.append(
                f"{ev.unnamed_pg:,} calls name no process group; the trace's "
                f"distributedInfo.world_size is {w}, but these rows were stored without group "
                "inference (group_source NULL)"
            )
            remedies.append(
                "re-ingest the trace with a commscope that gives default-group calls the "
                f"{w}-rank world group (group_source inferred_default), or {REMEDY_PG}"
            )
        elif w != 1:
            causes.append(f"{tl_ungrouped:,} trace calls name a process group of unknown size")
            remedies.append(REMEDY_PG)
    if unranked.get("nccl_debug"):
        causes.append(
            f"{unranked['nccl_debug']:,} NCCL calls have no global rank: their communicators "
            "have no 'Init COMPLETE' line in the log"
        )
        remedies.append(REMEDY_NCCL_INIT)
    elif ungrouped.get("nccl_debug"):
        causes.append(
            f"{ungrouped['nccl_debug']:,} NCCL calls have no nranks: no [nranks=] on the line "
            "and no 'Init COMPLETE' line for their communicator"
        )
        remedies.append(REMEDY_NCCL_INIT)
    if ungrouped.get("deepspeed_comms"):
        causes.append(
            f"{ungrouped['deepspeed_comms']:,} DeepSpeed comms-logger collectives do not name "
            "their group"
        )
        remedies.append(
            "add a Kineto trace of the same job recorded with PyTorch >= 2.2 (its calls name "
            "their process group)"
        )
    tl_unranked = sum(n for f, n in unranked.items() if f in TIMELINE_FORMATS)
    if tl_unranked:
        causes.append(f"{tl_unranked:,} trace calls have no rank (no distributedInfo.rank)")
        remedies.append(
            "initialise torch.distributed before the profiler starts (Kineto then writes "
            "distributedInfo), or ingest with --rank"
        )
    if not causes:
        return None
    return Gap("missing", _fmt_list(causes), _fmt_list(list(dict.fromkeys(remedies))))


def _sizes_gap(ev: Evidence) -> Gap | None:
    """Every call lacks a message size."""
    if not ev.n_calls or sum(ev.unsized.values()) < ev.n_calls:
        return None
    causes, remedies = [], []
    for f, n in sorted(ev.unsized.items()):
        if f == "kineto" and ev.unsized_deepep:
            causes.append(
                f"{ev.unsized_deepep:,} DeepEP calls carry no message size: DeepEP launches its "
                "dispatch/combine kernels without record_param_comms, so the trace holds no "
                "byte count for them"
            )
            n -= ev.unsized_deepep
        if not n:
            continue
        if f == "nsys":
            causes.append(
                f"{n:,} nsys calls carry no message size (their NCCL NVTX ranges hold no payload)"
            )
            remedies.append(
                f"{REMEDY_NCCL_COLL} in the same job (each COLL line's count and datatype are "
                "joined to the nsys call of the same host:pid), or profile with an NCCL whose "
                "NVTX ranges carry payloads (nsys shows 'Message size' on each NCCL range)"
            )
        elif f in TIMELINE_FORMATS:
            causes.append(f"{n:,} trace calls carry no element count or dtype")
            remedies.append(
                "record with PyTorch >= 2.2 so record_param_comms carries In msg nelems and dtype"
            )
        elif f == "nccl_debug":
            causes.append(f"{n:,} NCCL lines carry no count/datatype")
            remedies.append(REMEDY_NCCL_COLL)
        else:
            causes.append(f"{n:,} {f} calls carry no message size")
    return Gap("missing", _fmt_list(causes), _fmt_list(list(dict.fromkeys(remedies))))


def _iteration_gap(ev: Evidence) -> Gap | None:
    """No iteration was found (markers or a detected repeating call pattern)."""
    if ev.iterations:
        return None
    if ev.traces and not ev.step_markers:
        if ev.calls.get("nsys") and not ev.calls.get("kineto"):
            return Gap(
                "missing",
                "no iteration markers",
                "wrap each training step in an NVTX range named 'step N' (or record "
                "ProfilerStep#N with torch.profiler)",
            )
        return Gap("missing", "no iteration markers", REMEDY_STEPS)
    return Gap(
        "missing",
        "no iterations: no step markers and no repeating call pattern to detect them from",
        "log more than one training step",
    )


def _rank_gap(ev: Evidence) -> Gap | None:
    """Every call lacks a global rank: per-rank views have nothing to key on."""
    if not ev.n_calls or sum(ev.unranked.values()) < ev.n_calls:
        return None
    if ev.unranked.get("nccl_debug"):
        return Gap(
            "missing",
            f"{ev.n_calls:,} calls have no global rank: their communicators have no 'Init "
            "COMPLETE' line in the log",
            REMEDY_NCCL_INIT,
        )
    return Gap(
        "missing",
        f"{ev.n_calls:,} calls have no rank: the trace has no distributedInfo.rank",
        "initialise torch.distributed before the profiler starts (Kineto then writes "
        "distributedInfo), or ingest with --rank",
    )


def _world_one(ev: Evidence) -> Gap | None:
    if ev.traces and ev.world_size == 1 and not ev.calls.get("nccl_debug"):
        return Gap("none", "the trace's world size is 1: one rank sends to no one")
    return None


def _inferred_gap(ev: Evidence) -> Gap | None:
    """Collectives whose group commscope inferred (group_source inferred_default): drawn, but
    on an assumption the user should know."""
    n = ev.group_source.get("inferred_default", 0)
    if not n:
        return None
    w = f"{ev.world_size}-rank " if ev.world_size else ""
    return Gap(
        "partial",
        f"{n:,} collectives name no process group: their group is taken to be the {w}world "
        "group, group_source inferred_default",
        REMEDY_PG,
    )


def _merge(*gaps: Gap | None) -> Gap | None:
    """One partial gap from several (reasons and remedies joined, remedies once each)."""
    got = [g for g in gaps if g is not None]
    if not got:
        return None
    remedies = list(dict.fromkeys(g.remedy for g in got if g.remedy))
    return Gap("partial", "; ".join(g.reason for g in got), "; ".join(remedies))


def _first(*gaps: Gap | None) -> Gap | None:
    return next((g for g in gaps if g is not None), None)


def _fallback(mart: str) -> Gap:
    return Gap("missing", f"{mart} has no rows for this run although the input has the calls")


def _empty(marts: dict[str, Any], name: str) -> bool:
    df = marts.get(name)
    return df is None or df.height == 0


def _compared(marts: dict[str, Any]) -> bool:
    """The predictability mart has at least one iteration compared with a previous one."""
    pr = marts.get("predictability")
    if pr is None or pr.height == 0:
        return False
    cols = [
        c
        for c in ("matrix_similarity", "volume_ratio", "signature_same_as_prev")
        if c in pr.columns
    ]
    return any(pr[c].drop_nulls().len() for c in cols)


def view_gaps(
    ev: Evidence, marts: dict[str, Any], missing: dict[str, str], *, has_model: bool
) -> dict[str, Gap]:
    """Per view, the gap (cause + remedy) found in the evidence; views with data are absent.

    The first cause that applies is named, in the order a view needs its inputs: calls at all,
    then iterations and durations (time views), sizes and groups (volume views).

    Args:
        ev: counts over the run's stored tables (:func:`evidence`).
        marts: the run's materialised marts by name (Polars frames).
        missing: marts that could not be read, with the reason (not derived, older run).
        has_model: the run has a model prediction to compare with.
    """
    out: dict[str, Gap] = {}
    calls = _calls_gap(ev)
    all_untimed = ev.n_calls > 0 and sum(ev.untimed.values()) >= ev.n_calls
    timing = _timing_gap(ev, partial=False) if all_untimed else None
    iters = _iteration_gap(ev)
    groups = _group_gap(ev)
    sizes = _sizes_gap(ev)

    def need(view: str, mart: str, *causes: Gap | None) -> None:
        if mart in missing:
            out[view] = Gap("missing", missing[mart], "run commscope derive {run}")
        elif _empty(marts, mart):
            out[view] = _first(calls, *causes) or _fallback(mart)

    if not has_model:
        out["model"] = Gap("missing", "the run has no model config", REMEDY_MODEL)
    ranks = _rank_gap(ev)
    need("breakdown", "iteration_breakdown", timing, iters, ranks)
    need("onoff", "on_off", timing, iters, ranks)
    need("onoff_timeline", "on_off_timeline", timing, iters, ranks)
    if ev.n_calls and not ev.p2p and "bubble_ratio" not in missing:
        out["bubbles"] = Gap(
            "none", "the run has no send/recv calls (no pipeline parallelism): no bubble to measure"
        )
    else:
        need("bubbles", "bubble_ratio", timing, iters, ranks)
    if "breakdown" in out and "onoff" in out:  # stragglers fall back to on_off
        out["stragglers"] = out["breakdown"]
    if timing is not None:  # no call has a duration: comm views would draw zeros only
        for view in ("onoff", "onoff_timeline", "stragglers"):
            out[view] = timing
    need("sizes", "message_sizes", sizes)

    eb = marts.get("effective_bandwidth")
    if "effective_bandwidth" in missing:
        out["bandwidth"] = Gap(
            "missing", missing["effective_bandwidth"], "run commscope derive {run}"
        )
    elif eb is None or eb.height == 0 or eb["busbw_gb_s"].drop_nulls().len() == 0:
        out["bandwidth"] = _first(calls, timing, sizes, _world_one(ev), groups) or _fallback(
            "effective_bandwidth"
        )
    else:
        part = _merge(_timing_gap(ev, partial=True), _inferred_gap(ev))
        if part is not None:
            out["bandwidth"] = part

    tm = marts.get("traffic_matrix")
    if "traffic_matrix" in missing:
        out["traffic"] = Gap("missing", missing["traffic_matrix"], "run commscope derive {run}")
    elif tm is None or tm.height == 0 or tm["dst_rank"].drop_nulls().len() == 0:
        out["traffic"] = _first(calls, _world_one(ev), sizes, groups) or _fallback("traffic_matrix")
    else:
        left_out = (
            Gap("partial", f"not in the measured matrix: {groups.reason}", groups.remedy)
            if groups is not None
            else None
        )
        few = None
        if ev.world_size and ev.traces and 0 < ev.ranks < ev.world_size:
            few = Gap(
                "partial",
                f"only {ev.ranks} of {ev.world_size} ranks (distributedInfo.world_size) have "
                "calls in this run: the matrix holds what those ranks sent",
                "record and ingest a trace of every rank",
            )
        part = _merge(left_out, few, _inferred_gap(ev))
        if part is not None:
            out["traffic"] = part

    # gaps that empty a view (a partial one leaves the view drawn, so it explains nothing)
    blocking = {k: g for k, g in out.items() if g.kind != "partial"}
    if "predictability" in missing:
        out["predictability"] = Gap(
            "missing", missing["predictability"], "run commscope derive {run}"
        )
    elif not _compared(marts):
        one = None
        if ev.iterations < 2:
            one = Gap(
                "missing",
                f"{ev.iterations} iteration recorded: nothing to compare it with",
                "record at least two iterations (a torch.profiler schedule with active >= 2)"
                if ev.traces
                else "log at least two training steps",
            )
        out["predictability"] = _first(calls, blocking.get("traffic"), iters, one) or _fallback(
            "predictability"
        )

    if ev.n_calls and ev.all_to_all == 0:
        out["moe"] = Gap("none", "the run has no all-to-all calls (no MoE expert-parallel traffic)")
    else:
        need("moe", "moe_nonuniform", blocking.get("traffic"))
    out.update(instance_gaps(ev, marts, missing))
    return out


# ---------------------------------------------------------------------------- instances

# What a non-complete instance status means, and what to record so it becomes complete.
STATUS_REMEDY = {
    "untimed": REMEDY_TIMELINES,
    "partly_timed": REMEDY_TIMELINES,
    "missing_ranks": "ingest the logs of every rank of each group (a call missing on a rank "
    "that was ingested points to a rank that hung, crashed or whose log was cut short)",
}


def instance_state(columns: Any) -> Any:
    """A Polars expression: each instance's state for the page, from collective_instances'
    status and timing.

    Of the instances whose status is complete or untimed (every rank present and consistent):
    'complete' when every member is timed, 'untimed' when none is (NCCL debug logs time
    nothing), 'partly_timed' when some are (a timeline missing for some ranks). Without
    ranks_timed/ranks_seen a skew marks a timed instance. Other statuses (missing_ranks,
    size_mismatch, op_mismatch) as the mart states them.

    Args:
        columns: the mart's column names (older or hand-built frames may lack some).
    """
    import polars as pl

    cols = set(columns)
    if "status" not in cols:
        return pl.lit("complete")
    present = pl.col("status").is_in(["complete", "untimed"])
    if {"ranks_timed", "ranks_seen"} <= cols:
        timed = pl.col("ranks_timed").fill_null(0)
        return (
            pl.when(present & (timed == pl.col("ranks_seen")))
            .then(pl.lit("complete"))
            .when(present & (timed == 0))
            .then(pl.lit("untimed"))
            .when(present)
            .then(pl.lit("partly_timed"))
            .otherwise(pl.col("status"))
        )
    if "skew_ns" in cols:
        return (
            pl.when((pl.col("status") == "complete") & pl.col("skew_ns").is_null())
            .then(pl.lit("untimed"))
            .otherwise(pl.col("status"))
        )
    return pl.col("status")


def status_counts(ci: Any) -> dict[str, int]:
    """Instances per state (:func:`instance_state`), most frequent first."""
    if ci is None or ci.height == 0:
        return {}
    rows = (
        ci.select(instance_state(ci.columns).alias("state"))
        .group_by("state")
        .len()
        .sort(["len", "state"], descending=[True, False])
        .iter_rows()
    )
    return {str(k): int(v) for k, v in rows}


def _counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {k}" for k, n in counts.items())


def _one_rank(ev: Evidence) -> Gap | None:
    """Instances need two ranks of a group: a one-rank world has none, one traced rank of a
    larger world cannot be paired."""
    if ev.world_size == 1:
        return Gap("none", "the world has one rank: no collective spans ranks")
    if ev.ranks == 1:
        world = f" (world of {ev.world_size} ranks)" if ev.world_size else ""
        return Gap(
            "missing",
            f"the run has the calls of one rank{world}: an instance pairs one collective "
            "across the ranks of its group",
            REMEDY_EVERY_RANK,
        )
    return None


def _untimed_instances(ev: Evidence, counts: dict[str, int]) -> Gap:
    """Instances matched, none timed on every member: why (the sources), and what to record."""
    n = sum(counts.values())
    causes = [
        f"none of the {n:,} matched instances is timed on every member ({_counts_text(counts)})"
    ]
    nccl = ev.untimed.get("nccl_debug", 0)
    if nccl:
        causes.append(
            f"{nccl:,} calls come from NCCL debug logs, which time nothing (the gap checks "
            "below are what they give)"
        )
    if ev.timed_ranks < ev.ranks:
        causes.append(f"{ev.timed_ranks:,} of {ev.ranks:,} ranks have timed calls")
    return Gap("missing", "; ".join(causes), REMEDY_TIMELINES)


def instance_gaps(ev: Evidence, marts: dict[str, Any], missing: dict[str, str]) -> dict[str, Gap]:
    """Gaps of the straggler section (:mod:`commscope.reports.stragglers`), in the order it needs them.

    ``instances``: the collective_instances mart has rows (matching needs calls of two or
    more ranks of a known group). ``skew`` and ``waits``: some instance is complete and timed
    on every member (NCCL logs time nothing: their instances match, untimed); ``waits``
    also needs stragglers rows, and says (partial) how many instances it leaves out.
    ``clocks``: clock_offsets has rows (offsets come from timed matched collectives).
    """
    out: dict[str, Gap] = {}

    def derived(mart: str) -> Gap:
        if "not defined" in missing[mart]:  # an older commscope read the store
            return Gap("missing", missing[mart], "use a commscope with issue 18's marts")
        return Gap("missing", missing[mart], "run commscope derive {run}")

    ci = marts.get("collective_instances")
    counts = status_counts(ci)
    if "collective_instances" in missing:
        out["instances"] = derived("collective_instances")
    elif not counts:
        out["instances"] = _first(_calls_gap(ev), _one_rank(ev), _group_gap(ev)) or _fallback(
            "collective_instances"
        )
    complete = counts.get("complete", 0)
    if "instances" in out:
        out["skew"] = out["waits"] = out["instances"]
    elif not complete:
        out["skew"] = out["waits"] = _untimed_instances(ev, counts)
    elif "stragglers" in missing:
        out["waits"] = derived("stragglers")
    elif _empty(marts, "stragglers"):
        out["waits"] = _fallback("stragglers")
    else:
        left = {k: v for k, v in counts.items() if k != "complete"}
        if left:
            remedies = [STATUS_REMEDY[k] for k in left if k in STATUS_REMEDY]
            out["waits"] = Gap(
                "partial",
                f"{sum(left.values()):,} of {sum(counts.values()):,} instances are left out of "
                f"the waits ({_counts_text(left)}): the figures cover the {complete:,} complete "
                "ones",
                "; ".join(remedies),
            )
    if "clock_offsets" in missing:
        out["clocks"] = derived("clock_offsets")
    elif _empty(marts, "clock_offsets"):
        no_timed = None
        if ev.n_calls and not ev.timed_ranks:
            no_timed = Gap(
                "missing",
                "no rank has a timed call: offsets are estimated from the end times of matched "
                "timed collectives (members end within microseconds of each other)",
                REMEDY_TIMELINES,
            )
        blocking = out.get("instances")
        out["clocks"] = _first(_calls_gap(ev), no_timed, blocking) or _fallback("clock_offsets")
    return out


def gaps(data: RunData) -> dict[str, Gap]:
    """The gaps of one run's report: :func:`view_gaps` over the run's tables and marts."""
    if data.con is None:
        return {}
    ev = evidence(data.con, data.run_id, data.marts)
    has_model = bool(data.predicted_times)
    out = view_gaps(ev, data.marts, data.missing, has_model=has_model)
    return {
        k: Gap(g.kind, g.reason, g.remedy.replace("{run}", data.run_id)) for k, g in out.items()
    }
