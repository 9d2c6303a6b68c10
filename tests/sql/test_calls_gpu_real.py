"""One logical call per rank on the real GPU recording, checked against the raw files (issue 19).

``sample_traces/gpu_nccl_tp2_dp2_1gpu``: 4 NCCL ranks (TP {0,1},{2,3} x DP {0,2},{1,3}) logged
three ways: NCCL debug logs of all 9 steps (no durations), Kineto traces of steps 2..7 (kernel
durations) and Flight Recorder dumps (pickle + JSON of the same 81 entries: collective_seq_id,
CUDA-event durations). Before issue 19 the NCCL log was the one counted source of each rank, so
``effective_bandwidth`` timed none of its calls.

Oracle (independent of commscope's parsers and SQL): the NCCL log's COLL lines are read with a
regex (op, count, datatype, nranks; the process's rank from ``manifest.json`` → ``pids``, the
communicator's group from its op and size: the TP communicator carries the all_reduces of 2
ranks, the DP one the reduce_scatter/all_gather, the 4-rank one is the world); the Kineto NCCL
kernels with ``json`` (group = ``Process Group Ranks``, op from the kernel name, size from
In/Out msg nelems); the Flight Recorder JSON dumps with ``json`` (group from the process-group
description). The k-th kernel of a group is the (o + k)-th COLL line of that group, o = the
group's calls in the steps before the profiler's window (``manifest.json`` → profiler schedule
wait + warmup, times the group's calls per active step); the FR entry with collective_seq_id s
is the s-th collective line of its group.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from generated_runs import GeneratedRun, ingest_and_derive

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "sample_traces" / "gpu_nccl_tp2_dp2_1gpu"
COLL = re.compile(
    r"^[^:\s]+:(?P<pid>\d+):\d+ \[\d+\] NCCL INFO (?P<op>AllReduce|AllGather|ReduceScatter): "
    r"opCount [0-9a-f]+ .* count (?P<count>\d+) datatype (?P<dt>\d+) .* comm 0x[0-9a-f]+ "
    r"\[nranks=(?P<n>\d+)\]"
)
NCCL_OPS = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter"}
# ncclDataType_t: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16
NCCL_DTYPE_BYTES = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2}
TORCH_DTYPE_BYTES = {"BFloat16": 2, "Float": 4, "Half": 2, "Double": 8, "Long": 8, "Int": 4}

Call = dict[str, Any]


def manifest() -> dict[str, Any]:
    return json.loads((GPU / "manifest.json").read_text())


def group_of(rank: int, kind: str) -> tuple[int, ...]:
    """The manifest's group of ``kind`` (tp, dp, world) that holds ``rank``."""
    return next(tuple(g) for g in manifest()["groups"][kind] if rank in g)


def nccl_calls() -> dict[int, list[Call]]:
    """Per rank: its collective COLL lines in line order (line number, op, group, bytes)."""
    rank_of_pid = {int(p): int(r) for r, p in manifest()["pids"].items()}
    out: dict[int, list[Call]] = defaultdict(list)
    for path in sorted((GPU / "nccl").glob("nccl.*.log")):
        for no, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            m = COLL.match(line)
            if m is None:
                continue
            rank, op, n = rank_of_pid[int(m["pid"])], NCCL_OPS[m["op"]], int(m["n"])
            kind = "world" if n == 4 else ("tp" if op == "all_reduce" else "dp")
            size = int(m["count"]) * NCCL_DTYPE_BYTES[int(m["dt"])]
            out[rank].append(
                {"line": no, "op": op, "group": group_of(rank, kind), "n": n, "bytes": size}
            )
    return dict(out)


def kineto_kernels() -> dict[int, dict[tuple[int, ...], list[Call]]]:
    """Per rank and group: its NCCL kernels by start (op, bytes, dur ns)."""
    out: dict[int, dict[tuple[int, ...], list[Call]]] = {}
    for path in sorted((GPU / "kineto").glob("rank*.pt.trace.json.gz")):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        groups: dict[tuple[int, ...], list[Call]] = defaultdict(list)
        for ev in doc["traceEvents"]:
            if ev.get("cat") != "kernel" or not ev.get("name", "").startswith("ncclDevKernel"):
                continue
            a = ev["args"]
            op = NCCL_OPS[re.match(r"ncclDevKernel_([A-Za-z]+)_", ev["name"])[1]]  # type: ignore[index]
            # canonical size: all_gather's send buffer (In), reduce_scatter's shard (Out)
            nelems = a["Out msg nelems"] if op == "reduce_scatter" else a["In msg nelems"]
            groups[tuple(sorted(json.loads(a["Process Group Ranks"])))].append(
                {
                    "op": op,
                    "bytes": int(nelems) * TORCH_DTYPE_BYTES[a["dtype"]],
                    "ts": float(ev["ts"]),
                    "dur": float(ev["dur"]) * 1000,
                }
            )
        out[int(doc["distributedInfo"]["rank"])] = {
            g: sorted(v, key=lambda c: c["ts"]) for g, v in groups.items()
        }
    return out


def fr_durations() -> dict[int, dict[tuple[int, ...], dict[int, float]]]:
    """Per rank and group: collective_seq_id -> duration ns (Flight Recorder JSON dumps)."""
    kinds = {"TP": "tp", "DP": "dp", "default_pg": "world"}
    out: dict[int, dict[tuple[int, ...], dict[int, float]]] = {}
    for rank in range(4):
        doc = json.loads((GPU / "flight_recorder" / f"rank{rank}.json").read_text())
        per: dict[tuple[int, ...], dict[int, float]] = defaultdict(dict)
        for e in doc["entries"]:
            if e["is_p2p"] or e.get("duration_ms") is None:
                continue
            group = group_of(rank, kinds[e["process_group"][1]])
            per[group][int(e["collective_seq_id"])] = float(e["duration_ms"]) * 1e6
        out[rank] = dict(per)
    return out


def expected_calls(*, with_fr: bool) -> dict[tuple[int, int], Call]:
    """(rank, NCCL log line) -> the call with its size and, where a source timed it, the
    duration: the Kineto kernel's, else (with_fr) the Flight Recorder entry's."""
    sched = manifest()["profiler"]["schedule"]
    before = sched["wait"] + sched["warmup"]
    kern, fr = kineto_kernels(), fr_durations() if with_fr else {}
    out: dict[tuple[int, int], Call] = {}
    for rank, calls in nccl_calls().items():
        by_group: dict[tuple[int, ...], list[Call]] = defaultdict(list)
        for c in calls:
            by_group[c["group"]].append(c)
        for group, seq in by_group.items():
            ks = kern[rank].get(group, [])
            assert len(ks) % sched["active"] == 0, (rank, group)
            off = before * len(ks) // sched["active"]
            for k, c in enumerate(seq):
                d = None
                if off <= k < off + len(ks):
                    kc = ks[k - off]
                    assert (kc["op"], kc["bytes"]) == (c["op"], c["bytes"]), (rank, group, k)
                    d = kc["dur"]
                elif with_fr:
                    d = fr.get(rank, {}).get(group, {}).get(k + 1)
                out[(rank, c["line"])] = {**c, "dur": d}
    return out


# ----------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def nk(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    """NCCL logs + Kineto traces of the 4 ranks (the manifest gives the config)."""
    tmp = tmp_path_factory.mktemp("calls_nk")
    paths = [GPU / "nccl", GPU / "kineto", GPU / "manifest.json"]
    return ingest_and_derive(GPU, tmp / "store", "nk", paths=paths)


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    """The whole folder: NCCL logs, Kineto, Flight Recorder (pickle and JSON)."""
    tmp = tmp_path_factory.mktemp("calls_full")
    return ingest_and_derive(GPU, tmp / "store", "full")


def calls_frame(run: GeneratedRun) -> pl.DataFrame:
    return run.query(
        "SELECT rank, source_format, source_line, op, group_size, msg_bytes, dur_ns, "
        "timing_source, duration_source, bytes_source, size_conflict, n_sources "
        "FROM int_calls WHERE run_id = ?"
    )


def check_calls(run: GeneratedRun, *, with_fr: bool) -> pl.DataFrame:
    want = expected_calls(with_fr=with_fr)
    got = calls_frame(run)
    assert got.height == len(want)  # no call counted twice, none lost
    assert set(got["source_format"]) == {"nccl_debug"}
    for row in got.iter_rows(named=True):
        w = want[(row["rank"], row["source_line"])]
        assert (row["op"], row["group_size"], row["msg_bytes"]) == (w["op"], w["n"], w["bytes"])
        assert row["bytes_source"] == "nccl_debug" and not row["size_conflict"]
        if w["dur"] is None:
            assert row["dur_ns"] is None and row["timing_source"] == "none", row
        else:
            assert row["dur_ns"] == pytest.approx(w["dur"], abs=1), row
    return got


# -------------------------------------------------------------------------------------- tests


def test_nccl_and_kineto_give_each_call_once_timed_by_its_kernel(nk: GeneratedRun) -> None:
    got = check_calls(nk, with_fr=False)
    per_rank = dict(got.group_by("rank").len().iter_rows())
    assert per_rank == {r: len(c) for r, c in nccl_calls().items()}  # 82 each
    timed = got.filter(pl.col("dur_ns").is_not_null())
    assert timed.height == sum(len(v) for k in kineto_kernels().values() for v in k.values())
    assert set(timed["duration_source"]) == {"kineto"}
    assert set(timed["timing_source"]) == {"kernel"}


def test_every_kineto_record_is_paired(nk: GeneratedRun) -> None:
    roles = nk.query(
        "SELECT source_format, role, match_method, count(*) AS n FROM int_call_sources "
        "WHERE run_id = ? GROUP BY ALL ORDER BY ALL"
    )
    assert roles.rows() == [
        ("kineto", "paired", "iteration", 216),
        ("nccl_debug", "anchor", "anchor", 328),
    ]


def test_effective_bandwidth_times_the_calls_like_the_raw_files(nk: GeneratedRun) -> None:
    """Per (op, group size, size bucket): calls, timed calls, median duration and median bus
    bandwidth equal the raw files' (busbw = S x n x (n-1)/n for all_gather/reduce_scatter, S x
    2(n-1)/n for all_reduce, over the kernel's duration)."""
    rows: dict[tuple[str, int, int], list[Call]] = defaultdict(list)
    for c in expected_calls(with_fr=False).values():
        rows[(c["op"], c["n"], 1 << (c["bytes"].bit_length() - 1))].append(c)
    eb = nk.mart("effective_bandwidth").filter(pl.col("source") == "comm_ops")
    assert eb.height == len(rows)
    for r in eb.iter_rows(named=True):
        calls = rows[(r["op"], r["group_size"], r["size_bucket_bytes"])]
        n = r["group_size"]
        durs = [c["dur"] for c in calls if c["dur"]]
        factor = 2 * (n - 1) / n if r["op"] == "all_reduce" else n - 1
        bus = [c["bytes"] * factor / c["dur"] for c in calls if c["dur"]]
        assert (r["calls"], r["timed_calls"]) == (len(calls), len(durs)), r
        assert r["timing_source"] == "kernel"
        assert r["median_dur_ns"] == pytest.approx(statistics.median(durs), abs=1)
        assert r["busbw_gb_s"] == pytest.approx(statistics.median(bus), rel=1e-6)
        if n == 2:  # the TP and DP communicators (the world's class: see the issue-19 report)
            assert r["traffic_class"] == ("TP" if r["op"] == "all_reduce" else "DP")


def test_flight_recorder_adds_the_steps_kineto_did_not_record(full: GeneratedRun) -> None:
    """With the Flight Recorder dumps too: still each call once; its entries pair by
    collective_seq_id (both dumps of each rank), kernels keep priority, and the calls of the
    steps outside Kineto's window take the dump's CUDA-event duration."""
    got = check_calls(full, with_fr=True)
    fr = got.filter(pl.col("duration_source") == "flight_recorder")
    assert fr.height > 0 and set(fr["timing_source"]) == {"logged"}
    roles = full.query(
        "SELECT source_format, role, match_method, count(*) AS n FROM int_call_sources "
        "WHERE run_id = ? AND source_format = 'flight_recorder' GROUP BY ALL"
    )
    assert roles.rows() == [("flight_recorder", "paired", "seq", 4 * 2 * 81)]
    q = full.mart("call_sources").filter(pl.col("source_format") == "flight_recorder")
    assert q["unpaired_records"].to_list() == [0] and q["size_conflicts"].to_list() == [0]
