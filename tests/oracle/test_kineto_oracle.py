"""The marts against the independent reference reader, on every real Kineto trace (issue 16, item 5).

Each Kineto trace in ``../shared/samples/kineto`` (one run per file) and the bundled
``sample_traces/ds_pipe_pp2_dp2_cpu/kineto`` (its four ranks in one run) is ingested and derived
into a temporary store with the project's own functions, and read a second time by
:mod:`tests.oracle.kineto_reference`, which shares no code with the parser or the SQL. Then:

- per (rank, iteration): ``iteration_breakdown.comm_ns``, ``hidden_comm_ns``,
  ``exposed_comm_ns`` and ``t_comp_ns`` (where it comes from kernels) and ``on_off.on_ns`` equal
  the reference's comm / hidden / comm - hidden / compute time within 0.5 % or 2 µs, and the
  marts have exactly the reference's iterations (ProfilerStep windows), once each;
- per sized, kernel-timed call: the ``comm_ops`` row timed by the same kernel has the
  reference's duration, size, group size and iteration, and its busbw through commscope's own
  macro (``sql/macros/comm_bus_factor.sql``) is the reference's within 0.5 %; ``effective_bandwidth``'s
  median busbw per (op, group, size bucket) equals the median of the reference's; no row of it
  is above 1,000 GB/s;
- the rank is the reference's (``distributedInfo.rank``, else the file name, else none).

A mismatch that commscope makes on purpose is listed in :data:`EXCEPTIONS` with the reason; a
listed exception that no longer occurs fails too, so the list stays true. Every other mismatch
fails the test with the figures of both sides.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl
import pytest

from commscope.pipeline.derive import derive_run
from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.store import Store
from tests.oracle.kineto_reference import Reference, read

ROOT = Path(__file__).resolve().parents[2]
SHARED_KINETO = ROOT.parent / "shared" / "samples" / "kineto"
BUNDLED = ROOT / "sample_traces" / "ds_pipe_pp2_dp2_cpu" / "kineto"
MACROS = ROOT / "sql" / "macros" / "comm_bus_factor.sql"  # the one busbw definition (issue 16)

REL_TOL = 0.005
ABS_TOL_NS = 2_000
MAX_BUSBW_GB_S = 1_000.0

_RANKLESS = (
    "a trace with no rank (no distributedInfo.rank, none in the file name) gets its steps in "
    "the iterations mart once, rank NULL, but no on_off / iteration_breakdown row: the time "
    "marts are per rank (int_comm_ops_timed and int_rank_busy_merged keep rank IS NOT NULL), "
    "so the reference's comm time of the step (its CPU-only nccl:all_to_all ranges) has no row"
)
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("hta_rank_unavailable__rank_not_found", "iterations"): _RANKLESS,
    ("hta_distributed_info_unavailable__distributed_info_not_found", "iterations"): _RANKLESS,
}
"""(trace id, check) -> why commscope departs from the reference on purpose. Checks are
``iteration_breakdown.<column>``, ``on_off.on_ns``, ``iterations``, ``calls``, ``timing_source``, ``busbw``,
``effective_bandwidth``, ``rank``."""


def _traces() -> dict[str, list[Path]]:
    """Trace id -> the files ingested together as one run."""
    out = {}
    if SHARED_KINETO.is_dir():
        for p in sorted(SHARED_KINETO.iterdir()):
            if p.name.endswith((".json", ".json.gz")):
                out[p.name.split("__")[0] + "__" + p.name.split("__")[-1].split(".")[0]] = [p]
    out["sample_traces__ds_pipe_pp2_dp2_cpu"] = sorted(BUNDLED.glob("*.json.gz"))
    return out


TRACES = _traces()


@dataclass
class Derived:
    """One trace set, ingested and derived, beside its reference readings."""

    store: Store
    run_id: str
    refs: list[Reference]

    def mart(self, name: str) -> pl.DataFrame:
        return pl.read_parquet(self.store.mart_files(self.run_id)[name])

    def comm_ops(self) -> pl.DataFrame:
        with self.store.connect() as con:
            sql = "SELECT * FROM comm_ops WHERE run_id = ?"
            return con.sql(sql, params=[self.run_id]).pl()


@pytest.fixture(scope="module")
def derived(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Derived]:
    """Trace id -> its Derived, made once per module."""
    cache: dict[str, Derived] = {}

    def get(trace: str) -> Derived:
        if trace not in cache:
            store = Store.open(tmp_path_factory.mktemp("oracle") / "store")
            ingest_paths(store, TRACES[trace], run_id="oracle")
            derive_run(store, "oracle")
            cache[trace] = Derived(store, "oracle", [read(p) for p in TRACES[trace]])
        return cache[trace]

    return get


def _close(got: float | None, want: float) -> bool:
    return got is not None and abs(got - want) <= max(REL_TOL * abs(want), ABS_TOL_NS)


def _settle(trace: str, problems: dict[str, list[str]]) -> None:
    """Fail on every unlisted problem and on every listed exception that did not occur.

    ``problems`` has a key for every check the calling test made (an empty list: passed)."""
    listed = {check for (t, check) in EXCEPTIONS if t == trace}
    unlisted = {c: p for c, p in problems.items() if c not in listed and p}
    stale = sorted(c for c in listed if c in problems and not problems[c])  # checks made here
    assert not unlisted, "\n".join(f"{c}: {line}" for c, ps in unlisted.items() for line in ps)
    assert not stale, f"exceptions listed for {trace} that no longer occur: {stale}"


@pytest.mark.parametrize("trace", TRACES)
def test_iterations_match_reference(trace: str, derived: Callable[[str], Derived]) -> None:
    """Per (rank, iteration): comm, hidden, exposed, compute and on time equal the reference."""
    d = derived(trace)
    breakdown, on_off = d.mart("iteration_breakdown"), d.mart("on_off")
    problems: dict[str, list[str]] = {"iterations": []}
    want = {(r.rank, n): (r, v) for r in d.refs for n, v in r.per_iteration.items()}
    for name, frame in (("iteration_breakdown", breakdown), ("on_off", on_off)):
        keys = list(zip(frame["rank"].to_list(), frame["iteration"].to_list(), strict=True))
        dup = sorted({k for k in keys if keys.count(k) > 1}, key=str)
        extra = sorted(set(keys) - set(want), key=str)
        missing = sorted(set(want) - set(keys), key=str)
        if not any(r.steps for r in d.refs):  # no ProfilerStep: never a one-call iteration
            extra = []
            if name == "iteration_breakdown":
                one = frame.filter(pl.col("calls") <= 1)
                problems.setdefault("iterations", []).extend(
                    f"{name}: one-call iteration {row}" for row in one.iter_rows(named=True)
                )
        problems.setdefault("iterations", []).extend(
            f"{name}: {what} (rank, iteration) {ks}"
            for what, ks in (("duplicate", dup), ("extra", extra), ("missing", missing))
            if ks
        )
    checks = {
        "iteration_breakdown.comm_ns": (breakdown, "comm_ns", lambda v: v["comm_ns"]),
        "iteration_breakdown.hidden_comm_ns": (
            breakdown,
            "hidden_comm_ns",
            lambda v: v["hidden_ns"],
        ),
        "iteration_breakdown.exposed_comm_ns": (
            breakdown,
            "exposed_comm_ns",
            lambda v: v["comm_ns"] - v["hidden_ns"],
        ),
        "iteration_breakdown.t_comp_ns": (breakdown, "t_comp_ns", lambda v: v["compute_ns"]),
        "on_off.on_ns": (on_off, "on_ns", lambda v: v["comm_ns"]),
    }
    for check, (frame, column, expect) in checks.items():
        problems.setdefault(check, [])
        for row in frame.iter_rows(named=True):
            ref = want.get((row["rank"], row["iteration"]))
            if ref is None:
                continue
            reader, values = ref
            if column == "t_comp_ns" and not reader.has_kernels:
                continue  # no kernels: commscope's compute is the remainder, the reference has none
            if not _close(row[column], expect(values)):
                problems.setdefault(check, []).append(
                    f"rank {row['rank']} iteration {row['iteration']}: commscope {row[column]} "
                    f"vs reference {expect(values)} ns"
                )
    _settle(trace, problems)


@pytest.mark.parametrize("trace", TRACES)
def test_call_bandwidth_matches_reference(trace: str, derived: Callable[[str], Derived]) -> None:
    """Per kernel-timed call: duration, size, group and busbw equal the reference's; the
    bandwidth mart's medians equal the reference's medians; no busbw above 1,000 GB/s."""
    d = derived(trace)
    ops = d.comm_ops()
    problems: dict[str, list[str]] = {
        c: [] for c in ("calls", "busbw", "timing_source", "effective_bandwidth")
    }
    timed = ops.filter(pl.col("timing_source") == "kernel").sort("ts_ns")
    ref_calls = [(r.rank, c) for r in d.refs for c in r.calls if c.kernels]
    unmatched = list(timed.iter_rows(named=True))
    busbw = _macro_busbw(timed) if MACROS.is_file() else {}
    per_key: dict[tuple[str, int | None, int], list[float]] = {}
    for rank, call in ref_calls:
        near = [
            row
            for row in unmatched
            if row["rank"] == rank
            and row["op"] == call.op
            and abs(row["ts_ns"] - call.kernel_ts_ns) <= ABS_TOL_NS
        ]
        if not near:
            problems.setdefault("calls", []).append(
                f"rank {rank} {call.op} kernel at {call.kernel_ts_ns} ns: no kernel-timed comm_ops row"
            )
            continue
        row = min(near, key=lambda r: abs(r["ts_ns"] - call.kernel_ts_ns))
        unmatched.remove(row)
        mine = (row["dur_ns"], row["msg_bytes"], row["group_size"], row["iteration"])
        theirs = (call.dur_ns, call.msg_bytes, call.group_size, call.iteration)
        if not _close(row["dur_ns"], call.dur_ns) or mine[1:] != theirs[1:]:
            problems.setdefault("calls", []).append(
                f"rank {rank} {call.op} at {call.kernel_ts_ns}: (dur, bytes, n, iteration) "
                f"commscope {mine} vs reference {theirs}"
            )
        if call.busbw_gb_s is None:
            continue
        bucket = 1 << (call.msg_bytes.bit_length() - 1)
        per_key.setdefault((call.op, call.group_size, bucket), []).append(call.busbw_gb_s)
        got = busbw.get((row["source_file"], row["source_line"]))
        if got is None or abs(got - call.busbw_gb_s) > REL_TOL * call.busbw_gb_s:
            problems.setdefault("busbw", []).append(
                f"rank {rank} {call.op} {call.msg_bytes} B at {call.kernel_ts_ns}: "
                f"commscope {got} vs reference {call.busbw_gb_s} GB/s"
            )
    # rows without a size that no CPU op names (DeepEP kernels) are checked through the
    # per-iteration comm union only; a sized row the reference has no call for is a problem
    problems.setdefault("calls", []).extend(
        f"comm_ops row timed by a kernel the reference does not link to a call: "
        f"rank {r['rank']} {r['op']} {r['msg_bytes']} B ts {r['ts_ns']} dur {r['dur_ns']}"
        for r in unmatched
        if r["msg_bytes"] is not None or ref_calls
    )
    # DeepEP: one call per data kernel (dispatch/combine), its notify kernel merged into it
    data = sum(r.deepep_kernels["data"] for r in d.refs)
    notify = sum(r.deepep_kernels["notify"] for r in d.refs)
    if data:
        deepep = timed.filter(pl.col("msg_bytes").is_null())
        got = (deepep.height, deepep["kernel_count"].sum())
        if got != (data, data + notify):
            problems.setdefault("calls", []).append(
                f"DeepEP: commscope (calls, kernels) {got} vs reference ({data}, {data + notify})"
            )
    # the clock of every row: kernel where the trace has GPU kernels, cpu_range where it has none
    allowed = {"kernel", "none"} if any(r.has_kernels for r in d.refs) else {"cpu_range", "none"}
    wrong = ops.filter(
        ~pl.col("timing_source").is_in(list(allowed)).fill_null(False)
        | pl.col("timing_source").is_null()
        | ((pl.col("timing_source") == "none") & pl.col("dur_ns").is_not_null())
    )
    problems.setdefault("timing_source", []).extend(
        f"rank {r['rank']} {r['op']} line {r['source_line']}: timing_source "
        f"{r['timing_source']} dur {r['dur_ns']} (expected one of {sorted(allowed)})"
        for r in wrong.iter_rows(named=True)
    )
    bw = d.mart("effective_bandwidth").filter(pl.col("source") == "comm_ops")
    for (op, n, bucket), values in per_key.items():
        rows = bw.filter(
            (pl.col("op") == op)
            & (pl.col("group_size") == n)
            & (pl.col("size_bucket_bytes") == bucket)
        )
        want = statistics.median(values)
        if rows.height != 1 or abs(rows["busbw_gb_s"][0] - want) > REL_TOL * want:
            problems.setdefault("effective_bandwidth", []).append(
                f"{op} n={n} bucket {bucket}: commscope {rows['busbw_gb_s'].to_list()} "
                f"vs reference median {want} GB/s over {len(values)} calls"
            )
    high = bw.filter(pl.col("busbw_gb_s") > MAX_BUSBW_GB_S)
    problems.setdefault("effective_bandwidth", []).extend(
        f"busbw above {MAX_BUSBW_GB_S} GB/s: {r}" for r in high.iter_rows(named=True)
    )
    _settle(trace, problems)


def _macro_busbw(timed: pl.DataFrame) -> dict[tuple[str, int], float | None]:
    """busbw (GB/s) of each kernel-timed comm_ops row (by source file and line) through commscope's own
    bandwidth macro, ``sql/macros/comm_bus_factor.sql``: comm_bus_bytes(op, msg_bytes, n) / dur."""
    con = duckdb.connect()
    con.execute(MACROS.read_text())
    con.register("timed", timed)
    rows = con.execute(
        "SELECT source_file, source_line, comm_bus_bytes(op, msg_bytes, group_size) / dur_ns"
        " FROM timed"
    ).fetchall()
    return {(f, line): bw for f, line, bw in rows}


@pytest.mark.parametrize("trace", TRACES)
def test_rank_matches_reference(trace: str, derived: Callable[[str], Derived]) -> None:
    """The ranks of the marts are the reference's: distributedInfo, else file name, else none."""
    d = derived(trace)
    got = set(d.comm_ops()["rank"].to_list()) | set(d.mart("on_off")["rank"].to_list())
    want = {r.rank for r in d.refs}
    wrong = f"commscope {sorted(got, key=str)} vs reference {sorted(want, key=str)}"
    _settle(trace, {"rank": [] if got <= want else [wrong]})
