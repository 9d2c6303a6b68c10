"""Given/expect tests of commscope.reports.gaps: tables lacking one piece of information -> the view's
gap names that cause and the remedy; every piece present -> no gap.

Each case gives the run's canonical rows (comm_ops, kernels, markers, trace_meta,
ingested_files) in an in-memory DuckDB and its marts as small frames, then reads
:func:`commscope.reports.gaps.gaps` the way a report does.
"""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl
import pytest

from commscope.reports import gaps as rg
from commscope.reports.data import RunData

RUN = "r1"

COMM_COLS = {
    "run_id": pl.Utf8,
    "rank": pl.Int32,
    "source_format": pl.Utf8,
    "op": pl.Utf8,
    "comm_id": pl.Utf8,
    "group_size": pl.Int32,
    "msg_bytes": pl.Int64,
    "dur_ns": pl.Int64,
    "timing_source": pl.Utf8,
    "group_source": pl.Utf8,
    "raw_op": pl.Utf8,
}


def call(**kw: Any) -> dict[str, Any]:
    """One comm_ops row of a fully described, kernel-timed Kineto all_reduce."""
    row = {
        "run_id": RUN,
        "rank": 0,
        "source_format": "kineto",
        "op": "all_reduce",
        "comm_id": "3",
        "group_size": 8,
        "msg_bytes": 1 << 20,
        "dur_ns": 10_000,
        "timing_source": "kernel",
        "group_source": "logged",
        "raw_op": "nccl:all_reduce",
    }
    row.update(kw)
    return row


def nccl_call(**kw: Any) -> dict[str, Any]:
    """One comm_ops row as the NCCL debug parser writes it: sized, grouped, untimed."""
    base = {
        "source_format": "nccl_debug",
        "comm_id": "0x55",
        "group_size": 4,
        "dur_ns": None,
        "timing_source": "none",
        "group_source": "logged",
    }
    return call(**{**base, **kw})


# Marts with one row each: every view has its data.
FULL_MARTS: dict[str, dict[str, list[Any]]] = {
    "iterations": {"iteration": [1, 2]},
    "iteration_breakdown": {"rank": [0], "iteration": [1]},
    "on_off": {"rank": [0], "iteration": [1]},
    "on_off_timeline": {"rank": [0], "iteration": [1]},
    "bubble_ratio": {"stage": [0], "iteration": [1]},
    "message_sizes": {"op": ["all_reduce"]},
    "effective_bandwidth": {"op": ["all_reduce"], "busbw_gb_s": [12.5]},
    "traffic_matrix": {"src_rank": [0], "dst_rank": [1]},
    "predictability": {"iteration": [2], "matrix_similarity": [0.99]},
    "moe_nonuniform": {"iteration": [1]},
    "collective_instances": {"status": ["complete"]},
    "stragglers": {"rank": [0]},
    "clock_offsets": {"host": ["a"]},
}


def run_data(
    calls: list[dict[str, Any]],
    *,
    kernels: int = 10,
    steps: int = 2,
    world: int | None = 8,
    formats: tuple[str, ...] = ("kineto",),
    marts: dict[str, dict[str, list[Any]] | None] | None = None,
    missing: dict[str, str] | None = None,
    old_store: bool = False,
    model: bool = True,
) -> RunData:
    """A RunData over in-memory tables: ``marts`` entries replace FULL_MARTS (None: empty)."""
    con = duckdb.connect(":memory:")
    frame = pl.DataFrame(calls, schema=COMM_COLS)
    if old_store:  # a store written before schema 1.4: no timing_source / group_source
        frame = frame.drop("timing_source", "group_source")
    con.register("comm_ops_df", frame)
    con.execute("CREATE TABLE comm_ops AS SELECT * FROM comm_ops_df")
    con.execute(
        "CREATE TABLE kernels AS SELECT $run AS run_id, CASE WHEN i % 2 = 0 THEN 'comm' "
        "ELSE 'compute' END AS category FROM range($n) t(i)",
        {"run": RUN, "n": kernels},
    )
    con.execute(
        "CREATE TABLE markers AS SELECT $run AS run_id, 'iteration' AS kind FROM range($n)",
        {"run": RUN, "n": steps},
    )
    con.execute(
        "CREATE TABLE trace_meta AS SELECT $run AS run_id, CAST($w AS INTEGER) AS world_size "
        "FROM range($n)",
        {"run": RUN, "w": world, "n": 1 if "kineto" in formats else 0},
    )
    con.execute("CREATE TABLE ingested_files (run_id VARCHAR, format VARCHAR, path VARCHAR)")
    for f in formats:
        con.execute("INSERT INTO ingested_files VALUES (?, ?, ?)", [RUN, f, f"/logs/{f}"])
    frames: dict[str, pl.DataFrame] = {}
    for name, cols in {**FULL_MARTS, **(marts or {})}.items():
        if cols is None:
            frames[name] = pl.DataFrame(
                {c: pl.Series([], dtype=pl.Int64) for c in FULL_MARTS[name]}
            )
        else:
            frames[name] = pl.DataFrame(cols)
    for name in missing or {}:
        frames.pop(name, None)
    d = RunData(RUN, None, {}, marts=frames, missing=dict(missing or {}), con=con)
    if model:
        d.predicted_times = {"t_iter": 1.0}
    return d


EMPTY_TIME = dict.fromkeys(
    ("iterations", "iteration_breakdown", "on_off", "on_off_timeline", "bubble_ratio")
)
NO_BW = {"effective_bandwidth": {"op": ["all_reduce"], "busbw_gb_s": [None]}}
NO_TRAFFIC = {"traffic_matrix": None, "predictability": None, "moe_nonuniform": None}


def test_everything_present_has_no_gap() -> None:
    calls = [call(), call(rank=1), call(op="all_to_all"), call(op="send"), call(op="recv")]
    assert rg.gaps(run_data(calls, world=2)) == {}


CASES = [
    pytest.param(
        # NCCL debug logs only: sized and grouped calls, no duration anywhere
        dict(
            calls=[nccl_call(), nccl_call(rank=1, op="send")],
            formats=("nccl_debug",),
            world=None,
            kernels=0,
            steps=0,
            marts={**EMPTY_TIME, **NO_BW},
        ),
        ["breakdown", "onoff", "onoff_timeline", "bubbles", "stragglers", "bandwidth"],
        "missing",
        "2 of 2 calls have no duration (timing_source none: 2 calls come from NCCL debug logs, "
        "which time nothing)",
        "add a Kineto trace",
        id="nccl-debug-times-nothing",
    ),
    pytest.param(
        # an NCCL debug log was ingested but it has no COLL line
        dict(
            calls=[],
            formats=("nccl_debug",),
            world=None,
            kernels=0,
            steps=0,
            marts={**EMPTY_TIME, **NO_TRAFFIC, "message_sizes": None, "effective_bandwidth": None},
        ),
        ["sizes", "traffic", "bandwidth", "breakdown"],
        "missing",
        "NCCL debug logs have no COLL lines",
        "set NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL",
        id="nccl-debug-no-coll-lines",
    ),
    pytest.param(
        # DeepSpeed logs with the summary table only: no call to time or to place
        dict(
            calls=[],
            formats=("deepspeed_comms",),
            world=None,
            kernels=0,
            steps=0,
            marts={**EMPTY_TIME, **NO_TRAFFIC},
        ),
        ["breakdown", "onoff", "traffic"],
        "missing",
        "the DeepSpeed logs hold no per-call comms-logger lines",
        "verbose: true and prof_all: true",
        id="deepspeed-summary-only",
    ),
    pytest.param(
        # a Kineto trace recorded with CPU activities only: calls launched no kernel
        dict(
            calls=[call(dur_ns=None, timing_source="none")] * 3,
            kernels=0,
            marts={**EMPTY_TIME, **NO_BW},
        ),
        ["breakdown", "bandwidth"],
        "missing",
        "3 kineto calls, and no GPU kernels: the trace was recorded without ProfilerActivity.CUDA",
        "ProfilerActivity.CUDA])",
        id="kineto-without-cuda-activity",
    ),
    pytest.param(
        # an Nsight Systems report recorded without CUDA tracing
        dict(
            calls=[call(source_format="nsys", dur_ns=None, timing_source="none")] * 2,
            kernels=0,
            formats=("kineto", "nsys"),
            marts={**EMPTY_TIME, **NO_BW},
        ),
        ["breakdown", "bandwidth"],
        "missing",
        "2 nsys calls, and no GPU kernels: the report was recorded without CUDA tracing",
        "nsys profile -t cuda,nvtx",
        id="nsys-without-cuda-trace",
    ),
    pytest.param(
        # an Nsight Systems report without step ranges
        dict(
            calls=[call(source_format="nsys"), call(source_format="nsys", op="send")],
            steps=0,
            formats=("kineto", "nsys"),
            marts=EMPTY_TIME,
        ),
        ["breakdown", "onoff"],
        "missing",
        "no iteration markers",
        "wrap each training step in an NVTX range named 'step N'",
        id="nsys-no-step-ranges",
    ),
    pytest.param(
        # a Kineto trace without ProfilerStep#N: no iteration at all
        dict(
            calls=[call(), call(rank=1, op="send")],
            steps=0,
            marts={**EMPTY_TIME, "predictability": None},
        ),
        ["breakdown", "onoff", "bubbles", "predictability"],
        "missing",
        "no iteration markers",
        "so ProfilerStep#N exists",
        id="kineto-no-profiler-step",
    ),
    pytest.param(
        # nsys of NCCL 2.17: its NCCL ranges carry no payload, so no call has a size
        dict(
            calls=[call(source_format="nsys", msg_bytes=None)] * 3,
            marts={**NO_BW, "message_sizes": None},
        ),
        ["sizes"],
        "missing",
        "3 nsys calls carry no message size",
        "NCCL_DEBUG_SUBSYS=INIT,COLL in the same job",
        id="nsys-no-payload",
    ),
    pytest.param(
        # an old Kineto trace: calls name no process group and no world size is recorded
        dict(
            calls=[call(comm_id=None, group_size=None, group_source=None)] * 2,
            world=None,
            marts={**NO_TRAFFIC, **NO_BW},
        ),
        ["traffic", "bandwidth", "predictability"],
        "missing",
        "2 calls name no process group and the trace has no distributedInfo.world_size",
        "record with PyTorch >= 2.2 so record_param_comms carries Collective name and Process "
        "Group",
        id="kineto-no-process-group",
    ),
    pytest.param(
        # the trace states world size 8 but the stored calls were not given the world group
        dict(
            calls=[call(comm_id="0", group_size=None, group_source=None, op="all_to_all")],
            marts=NO_TRAFFIC,
        ),
        ["traffic", "moe"],
        "missing",
        "distributedInfo.world_size is 8, but these rows were stored without group inference",
        "8-rank world group (group_source inferred_default)",
        id="kineto-default-group-not-inferred",
    ),
    pytest.param(
        # NCCL COLL lines with nranks but no Init line: no global rank, no destinations
        dict(
            calls=[nccl_call(rank=None)] * 5, formats=("nccl_debug",), world=None, marts=NO_TRAFFIC
        ),
        ["traffic", "predictability"],
        "missing",
        "5 NCCL calls have no global rank: their communicators have no 'Init COMPLETE' line",
        "NCCL_DEBUG_SUBSYS=INIT,COLL from process start",
        id="nccl-debug-no-init-lines",
    ),
    pytest.param(
        # a one-rank world whose iterations are timed by compute kernels: the comm views would
        # draw zeros only
        dict(
            calls=[call(group_size=1, dur_ns=None, timing_source="none")],
            world=1,
            marts={**NO_TRAFFIC, **NO_BW},
        ),
        ["onoff", "onoff_timeline", "stragglers"],
        "none",
        "1 of 1 calls have no duration (timing_source none: 1 kineto calls launched no GPU "
        "kernel in a world of one rank",
        "",
        id="world-of-one-rank-no-comm-time",
    ),
    pytest.param(
        # a one-rank world: calls launched no kernel and there is nothing to send to
        dict(
            calls=[call(group_size=1, dur_ns=None, timing_source="none")],
            world=1,
            marts={**NO_TRAFFIC, **NO_BW},
        ),
        ["bandwidth"],
        "none",
        "calls launched no GPU kernel in a world of one rank",
        "",
        id="world-of-one-rank-no-bandwidth",
    ),
    pytest.param(
        dict(
            calls=[call(group_size=1, dur_ns=None, timing_source="none")],
            world=1,
            marts={**NO_TRAFFIC, **NO_BW},
        ),
        ["traffic"],
        "none",
        "the trace's world size is 1: one rank sends to no one",
        "",
        id="world-of-one-rank-no-traffic",
    ),
    pytest.param(
        # rank 1 has only NCCL debug lines; rank 0's NCCL lines are timed by its Kineto trace
        dict(
            calls=[call(), nccl_call(), nccl_call(rank=1), nccl_call(rank=1)],
            formats=("kineto", "nccl_debug"),
        ),
        ["bandwidth"],
        "partial",
        "2 of 4 calls have no duration (timing_source none: 2 calls come from NCCL debug logs",
        "add a Kineto trace",
        id="rank-without-a-trace",
    ),
    pytest.param(
        # the trace's calls name no group; the parser gave them the world group
        dict(calls=[call(comm_id="0", group_source="inferred_default"), call(rank=1)], world=2),
        ["traffic", "bandwidth"],
        "partial",
        "1 collectives name no process group: their group is taken to be the 2-rank world "
        "group, group_source inferred_default",
        "record with PyTorch >= 2.2 so record_param_comms carries Collective name",
        id="group-inferred-from-world-size",
    ),
    pytest.param(
        # a trace without distributedInfo.rank: per-rank time views have nothing to key on
        dict(
            calls=[call(rank=None), call(rank=None, op="send")],
            world=None,
            marts={**EMPTY_TIME, "iterations": {"iteration": [1]}},  # one rank-less iteration
        ),
        ["breakdown", "onoff", "bubbles"],
        "missing",
        "2 calls have no rank: the trace has no distributedInfo.rank",
        "or ingest with --rank",
        id="trace-without-rank",
    ),
    pytest.param(
        # DeepEP dispatch/combine kernels: all-to-all calls with no byte count in the trace
        dict(
            calls=[call(op="all_to_all", msg_bytes=None, raw_op="dpsk::ep::internode::dispatch")]
            * 4,
            marts={"message_sizes": None, **NO_TRAFFIC, **NO_BW},
        ),
        ["sizes", "traffic", "bandwidth", "moe"],
        "missing",
        "4 DeepEP calls carry no message size: DeepEP launches its dispatch/combine kernels "
        "without record_param_comms",
        "",
        id="deepep-without-sizes",
    ),
    pytest.param(
        # a 2021 single-worker trace: no communication and no distributedInfo
        dict(calls=[], world=None, marts={**EMPTY_TIME, **NO_TRAFFIC, "message_sizes": None}),
        ["sizes", "traffic"],
        "missing",
        "no distributedInfo: a single-process run has none",
        "if the job is distributed, initialise torch.distributed",
        id="trace-of-a-single-process",
    ),
    pytest.param(
        # only one iteration: nothing to compare it with
        dict(calls=[call()], marts={"iterations": {"iteration": [1]}, "predictability": None}),
        ["predictability"],
        "missing",
        "1 iteration recorded: nothing to compare it with",
        "a torch.profiler schedule with active >= 2",
        id="one-iteration",
    ),
    pytest.param(
        dict(calls=[call()], marts={"moe_nonuniform": None}),
        ["moe"],
        "none",
        "the run has no all-to-all calls",
        "",
        id="no-all-to-all",
    ),
    pytest.param(
        dict(calls=[call()], marts={"bubble_ratio": {"stage": [None], "iteration": [1]}}),
        ["bubbles"],
        "none",
        "the run has no send/recv calls (no pipeline parallelism)",
        "",
        id="no-pipeline-no-bubble",
    ),
    pytest.param(
        # one rank's trace of an 8-rank job: the matrix holds only what that rank sent
        dict(calls=[call(), call(op="send")], world=8),
        ["traffic"],
        "partial",
        "only 1 of 8 ranks (distributedInfo.world_size) have calls in this run",
        "record and ingest a trace of every rank",
        id="one-rank-of-eight-traced",
    ),
    pytest.param(
        dict(calls=[call()], missing={"bubble_ratio": "mart bubble_ratio was not derived"}),
        ["bubbles"],
        "missing",
        "mart bubble_ratio was not derived",
        f"run commscope derive {RUN}",
        id="mart-not-derived",
    ),
    pytest.param(
        dict(calls=[call()], model=False),
        ["model"],
        "missing",
        "the run has no model config",
        f"commscope report {RUN} --model CONFIG.toml",
        id="no-model",
    ),
]


@pytest.mark.parametrize(("given", "views", "kind", "reason", "remedy"), CASES)
def test_gap_names_cause_and_remedy(
    given: dict[str, Any], views: list[str], kind: str, reason: str, remedy: str
) -> None:
    got = rg.gaps(run_data(**given))
    assert set(got) <= set(rg.VIEWS)  # the keys the page asks for
    for view in views:
        gap = got.get(view)
        assert gap is not None, f"{view}: no gap in {sorted(got)}"
        assert gap.kind == kind, (view, gap)
        assert reason in gap.reason, (view, gap.reason)
        assert remedy in gap.remedy if remedy else gap.remedy == "", (view, gap.remedy)
    if kind == "missing":
        assert all(got[v].text().startswith("not available: ") for v in views)


def test_old_store_without_timing_source_column() -> None:
    # stores written before schema 1.4 lack timing_source/group_source: read as NULL
    d = run_data(
        [nccl_call(), nccl_call(rank=1)],
        formats=("nccl_debug",),
        world=None,
        old_store=True,
        marts={**EMPTY_TIME, **NO_BW},
    )
    gap = rg.gaps(d)["bandwidth"]
    assert gap.reason == (
        "2 of 2 calls have no duration (2 calls come from NCCL debug logs, which time nothing)"
    )


def test_untimed_calls_of_a_rank_timed_by_its_trace_are_no_gap() -> None:
    # NCCL debug lines beside the same rank's Kineto trace: the marts time that rank from the
    # trace, so the page must not ask for the trace it already has
    d = run_data([call(), call(rank=1), nccl_call(), nccl_call(rank=1)], world=2)
    assert "bandwidth" not in rg.gaps(d)


def test_ungrouped_calls_of_a_rank_grouped_by_another_source_are_no_gap() -> None:
    # DeepSpeed comms-logger lines name no group; the same rank's Kineto trace does
    ds = {"source_format": "deepspeed_comms", "comm_id": None, "group_size": None}
    d = run_data([call(), call(rank=1), call(**ds), call(rank=1, **ds)], world=2)
    assert "traffic" not in rg.gaps(d)
    # a rank with DeepSpeed lines only keeps the gap
    d = run_data([call(), call(rank=1, **ds)], world=2)
    assert "1 DeepSpeed comms-logger collectives do not name" in rg.gaps(d)["traffic"].reason


def test_group_gap_ignores_point_to_point_calls() -> None:
    # send/recv name their peer: an unknown group size does not hide their destinations
    d = run_data([call(op="send", group_size=None, comm_id=None, group_source=None)], world=None)
    assert "traffic" not in rg.gaps(d)


# ---------------------------------------------------------------------------- instances (issue 18)

# as NCCL debug logs give them: every rank present and consistent (complete), nothing timed
UNTIMED = {
    "collective_instances": {
        "status": ["complete", "complete"],
        "ranks_seen": [2, 2],
        "ranks_timed": [0, 0],
    },
    "stragglers": None,
}


def test_nccl_only_instances_say_to_record_timelines_of_every_rank() -> None:
    # NCCL logs match instances (gap checks) but time nothing: no waits, skew or clocks
    d = run_data(
        [nccl_call(), nccl_call(rank=1)],
        formats=("nccl_debug",),
        world=None,
        marts={**UNTIMED, "clock_offsets": None},
    )
    got = rg.gaps(d)
    assert "instances" not in got  # the gap checks have their data
    for view in ("waits", "skew"):
        gap = got[view]
        assert gap.kind == "missing"
        assert gap.reason.startswith(
            "none of the 2 matched instances is timed on every member (2 untimed)"
        )
        assert "2 calls come from NCCL debug logs, which time nothing" in gap.reason
        assert "0 of 2 ranks have timed calls" in gap.reason
        for part in ("Kineto", "nsys profile", "from every rank of each group"):
            assert part in gap.remedy
    assert got["clocks"].reason.startswith("no rank has a timed call")
    assert "Kineto" in got["clocks"].remedy


def test_one_traced_rank_cannot_be_matched() -> None:
    d = run_data([call()], world=8, marts={"collective_instances": None, "stragglers": None})
    gap = rg.gaps(d)["instances"]
    assert gap.reason.startswith("the run has the calls of one rank (world of 8 ranks)")
    assert "every rank of each group" in gap.remedy
    assert rg.gaps(d)["waits"] == gap


def test_straggler_marts_not_derived_say_derive() -> None:
    why = "mart collective_instances was not derived for this run"
    d = run_data([call(), call(rank=1)], missing={"collective_instances": why})
    got = rg.gaps(d)
    assert got["instances"] == rg.Gap("missing", why, f"run commscope derive {RUN}")
    assert got["waits"] == got["instances"]


def test_incomplete_instances_are_a_partial_gap_of_the_waits() -> None:
    ci = {"status": ["complete", "complete", "missing_ranks", "untimed"]}
    got = rg.gaps(run_data([call(), call(rank=1)], marts={"collective_instances": ci}))
    gap = got["waits"]
    assert gap.kind == "partial"
    assert gap.reason == (
        "2 of 4 instances are left out of the waits (1 missing_ranks, 1 untimed): the figures "
        "cover the 2 complete ones"
    )
    assert "ingest the logs of every rank" in gap.remedy and "Kineto" in gap.remedy
    assert "skew" not in got


def test_gap_sentences() -> None:
    # what the page prints for each kind: a remedy only where something can be recorded
    assert rg.Gap("missing", "no iteration markers", "record steps").text() == (
        "not available: no iteration markers; to get it, record steps."
    )
    assert rg.Gap("none", "the run has no all-to-all calls").text() == (
        "nothing to show: the run has no all-to-all calls."
    )
    assert rg.Gap("partial", "2 of 4 calls have no duration", "add a trace").text() == (
        "2 of 4 calls have no duration (to complete it: add a trace)."
    )
