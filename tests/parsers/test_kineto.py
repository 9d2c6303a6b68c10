"""Tests for the Kineto (PyTorch profiler Chrome-trace JSON) parser.

Expected counts are computed inside each test by a plain ``json`` walk over the sample (the
samples are small), never by the parser itself.
"""

from __future__ import annotations

import gc
import gzip
import json
import re
import tracemalloc
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import commscope.parsers.kineto as kineto_mod
from commscope.parsers._io import Source
from commscope.parsers._kineto_meta import decode_trailer, rank_from_path
from commscope.parsers.kineto import KinetoParser
from commscope.parsers.registry import LineCounts, ParseError
from commscope.parsers.schema import conform, empty_frame

SAMPLES = [
    "deepseek_profile-data__train.json",
    "hta_distributed_info_unavailable__distributed_info_not_found.json.gz",
    "hta_nccl_parser_config__nccl_data.json.gz",
    "hta_negative_queue_length__rank0.json.gz",
    "hta_ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "hta_rank_unavailable__rank_not_found.json.gz",
    "hta_trace_filter__sampled_rank-0.json.gz",
    "hta_trace_filter__sampled_rank-1.json.gz",
    "kineto_tb_plugin_2021__resnet50_worker0.pt.trace.json.gz",
    "tracelens_b200__eager_trace.json.gz",
    "tracelens_mi300__resnet_act_checkpoint.json.gz",
]

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
BACKEND_RANGE = re.compile(r"^(nccl|gloo|rccl|ucc|mpi|xccl|hccl):")


# ------------------------------------------------------------------------------------------
# helpers


class Parsed:
    """Everything one parse produced, frames concatenated per table and conformed."""

    def __init__(self, path: Path, rank: int | None = None) -> None:
        self.counts = LineCounts()
        self.warnings: list[str] = []
        self.chunks = 0
        frames: dict[str, list[pl.DataFrame]] = {}
        for chunk in KinetoParser().parse(Source(path), run_id="test", rank=rank):
            self.chunks += 1
            assert chunk.counts.balanced, chunk.counts
            self.counts += chunk.counts
            self.warnings += chunk.warnings
            for name, df in chunk.tables.items():
                frames.setdefault(name, []).append(df)
        self.tables = {k: pl.concat(v) for k, v in frames.items()}
        for name, df in self.tables.items():
            extra = {"run_id": "test", **({"path": str(path)} if name == "rejects" else {})}
            conform(df.with_columns(pl.lit(v).alias(k) for k, v in extra.items()), name)

    def get(self, table: str) -> pl.DataFrame:
        """The table, or an empty frame with its canonical columns."""
        return self.tables.get(table, empty_frame(table))

    @property
    def meta(self) -> dict[str, Any]:
        """The single trace_meta row."""
        assert self.tables["trace_meta"].height == 1
        return self.tables["trace_meta"].row(0, named=True)


def load(path: Path) -> tuple[dict[str, Any], list[Any]]:
    """Plain json load of a trace: (top-level keys, events)."""
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    if isinstance(doc, list):
        return {}, doc
    return {k: v for k, v in doc.items() if k != "traceEvents"}, doc.get("traceEvents", [])


def us_to_ns(us: float) -> int:
    """Exact decimal µs → ns of a JSON number (float x 1000 rounds wrongly at 1e15)."""
    return int((Decimal(repr(us)) * 1000).to_integral_value(ROUND_HALF_EVEN))


def cat(e: dict[str, Any]) -> str:
    return str(e.get("cat") or "")


def is_x(e: Any) -> bool:
    return isinstance(e, dict) and e.get("ph") == "X"


def write_trace(path: Path, doc: Any, *, compress: bool = False) -> Path:
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def kernel_event(i: int, name: str = "ampere_sgemm_128x64_nn", **args: Any) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": 1000.0 + i,
        "dur": 0.5,
        "args": {"device": 0, "stream": 7, "correlation": i, **args},
    }


# ------------------------------------------------------------------------------------------
# every real sample, against an independent json walk


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_rows_match_independent_counts(shared_samples: Path, name: str) -> None:
    path = shared_samples / "kineto" / name
    keys, events = load(path)
    p = Parsed(path)

    # accounting: every event once
    assert p.counts.total == len(events)
    assert p.counts.balanced
    assert p.counts.rejected == 0

    # kernels: every GPU kernel/memcpy/memset interval
    gpu = [e for e in events if is_x(e) and cat(e).lower() in GPU_CATS]
    kernels = p.get("kernels")
    assert kernels.height == len(gpu)
    nccl_events = [e for e in gpu if cat(e).lower() == "kernel" and e["name"].startswith("nccl")]
    if nccl_events:
        nccl_rows = kernels.filter(pl.col("name").str.starts_with("nccl"))
        assert nccl_rows.height == len(nccl_events)
        assert (nccl_rows["category"] == "comm").all()
        assert not nccl_rows["name"].str.contains(r"\(").any()  # parameter list stripped
    n_memcpy = sum(1 for e in gpu if "memcpy" in cat(e).lower())
    assert kernels.filter(pl.col("category") == "memcpy").height == n_memcpy

    # markers: ProfilerStep (CPU copies are iterations) and every user annotation
    steps_cpu = [
        e
        for e in events
        if is_x(e)
        and str(e.get("name", "")).startswith("ProfilerStep#")
        and cat(e) != "gpu_user_annotation"
    ]
    annotations = [
        e
        for e in events
        if is_x(e)
        and (
            cat(e) in ("user_annotation", "gpu_user_annotation")
            or (
                cat(e) in ("cpu_op", "Operator")
                and str(e.get("name", "")).startswith("ProfilerStep#")
            )
        )
    ]
    markers = p.get("markers")
    assert markers.height == len(annotations)
    iters = markers.filter(pl.col("kind") == "iteration")
    assert sorted(iters["iteration"].to_list()) == sorted(
        int(e["name"].split("#")[1]) for e in steps_cpu
    )

    # comm_ops: one per collective, from the best source the file has
    rpc = [e for e in events if is_x(e) and e.get("name") == "record_param_comms"]
    rpc_named = [e for e in rpc if e.get("args", {}).get("Collective name")]
    ranges = [
        e
        for e in events
        if is_x(e) and cat(e) == "user_annotation" and BACKEND_RANGE.match(str(e.get("name", "")))
    ]
    comm = p.get("comm_ops")
    if rpc_named:
        expected = [e for e in rpc_named if e["args"]["Collective name"] != "wait"]
        assert comm.height == len(expected)
        assert sorted(comm["source_line"].to_list()) == sorted(
            events.index(e) + 1 for e in expected
        )
    elif ranges:
        assert comm.height == len(ranges)
    else:
        comm_kernels = kernels.filter(pl.col("category") == "comm")
        # a DeepEP notify kernel and the data kernel after it are one call
        notify = [e for e in gpu if "ep::" in e["name"] and "notify" in e["name"]]
        assert comm.height == comm_kernels.height - len(notify)
        assert comm["kernel_count"].sum() == comm_kernels.height

    # parsed = events that produced rows (rows of two tables from one event count once)
    assert p.counts.parsed == len(gpu) + len(annotations) + (comm.height if rpc_named else 0)

    # rank and metadata
    dist = keys.get("distributedInfo") or {}
    meta = p.meta
    if "rank" in dist:
        assert (meta["rank"], meta["rank_source"]) == (dist["rank"], "distributedInfo")
        assert meta["world_size"] == dist["world_size"]
    for table in ("kernels", "markers", "comm_ops"):
        if table in p.tables:
            assert p.tables[table]["rank"].unique().to_list() == [meta["rank"]]


def test_rank_sources_of_the_samples(shared_samples: Path) -> None:
    k = shared_samples / "kineto"
    legacy = Parsed(k / "kineto_tb_plugin_2021__resnet50_worker0.pt.trace.json.gz")
    assert (legacy.meta["rank"], legacy.meta["rank_source"]) == (0, "file_name")
    assert any("file name" in w for w in legacy.warnings)
    for name in (
        "hta_distributed_info_unavailable__distributed_info_not_found.json.gz",
        "hta_rank_unavailable__rank_not_found.json.gz",
    ):
        p = Parsed(k / name)
        assert p.meta["rank"] is None
        assert p.meta["rank_source"] == "unknown"
        assert any("rank unknown" in w for w in p.warnings)
        assert p.get("markers")["rank"].null_count() == p.get("markers").height


def test_rank_option_and_file_name_precedence(shared_samples: Path, tmp_path: Path) -> None:
    sample = (
        shared_samples
        / "kineto"
        / "hta_distributed_info_unavailable__distributed_info_not_found.json.gz"
    )
    link = tmp_path / "job_rank-5.json.gz"
    link.symlink_to(sample)
    by_name = Parsed(link)
    assert (by_name.meta["rank"], by_name.meta["rank_source"]) == (5, "file_name")
    by_option = Parsed(link, rank=7)
    assert (by_option.meta["rank"], by_option.meta["rank_source"]) == (7, "option")
    assert any("disagrees" in w for w in by_option.warnings)
    # distributedInfo beats the option (with a warning)
    filtered = shared_samples / "kineto" / "hta_trace_filter__sampled_rank-1.json.gz"
    p = Parsed(filtered, rank=3)
    assert (p.meta["rank"], p.meta["rank_source"]) == (1, "distributedInfo")
    assert any("disagrees" in w for w in p.warnings)


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("rank-3.json.gz", 3),
        ("trace_rank_12.pt.trace.json", 12),
        ("rank7.json", 7),
        ("resnet50_worker3.pt.trace.json.gz", 3),
        ("hta_rank_unavailable__rank_not_found.json.gz", None),
        ("trace.json", None),
    ],
)
def test_rank_from_file_name(name: str, rank: int | None) -> None:
    assert rank_from_path(Path("/x") / name) == rank


# ------------------------------------------------------------------------------------------
# acceptance checks on specific samples


def test_hta_pair_two_ranks_steps_and_comm_kernels(shared_samples: Path) -> None:
    parsed = {
        r: Parsed(shared_samples / "kineto" / f"hta_trace_filter__sampled_rank-{r}.json.gz")
        for r in (0, 1)
    }
    assert {p.meta["rank"] for p in parsed.values()} == {0, 1}
    for r, p in parsed.items():
        _, events = load(shared_samples / "kineto" / f"hta_trace_filter__sampled_rank-{r}.json.gz")
        steps = sorted(
            int(e["name"].split("#")[1])
            for e in events
            if is_x(e) and e.get("name", "").startswith("ProfilerStep#")
        )
        assert steps == [551, 552]
        iters = p.get("markers").filter(pl.col("kind") == "iteration")
        assert sorted(iters["iteration"].to_list()) == steps
        # every NCCL kernel is a SendRecv kernel, classified as such
        n_sendrecv = sum(
            1 for e in events if cat(e) == "kernel" and e["name"].startswith("ncclKernel_SendRecv")
        )
        comm_k = p.get("kernels").filter(pl.col("category") == "comm")
        assert comm_k.height == n_sendrecv > 0
        assert comm_k["comm_op"].unique().to_list() == ["send_recv"]
        # comm ops (from nccl:* ranges: these traces have no collective args) per op and step
        comm = p.get("comm_ops")
        want: dict[str, int] = {}
        for e in events:
            if is_x(e) and cat(e) == "user_annotation" and e["name"].startswith("nccl:"):
                op = {"nccl:_all_gather_base": "all_gather"}.get(e["name"], e["name"][5:])
                want[op] = want.get(op, 0) + 1
        got = dict(comm.group_by("op").len().iter_rows())
        assert got == want
        assert set(comm["iteration"].to_list()) <= {551, 552}
        assert comm["iteration"].null_count() == 0


def test_mi300_rccl_keeps_unknown_sizes_null(shared_samples: Path) -> None:
    path = shared_samples / "kineto" / "tracelens_mi300__resnet_act_checkpoint.json.gz"
    _, events = load(path)
    p = Parsed(path)
    assert p.meta["backend"] == "rccl"
    assert p.meta["rank"] == 0
    generic = [
        e for e in events if cat(e) == "kernel" and e["name"].startswith("ncclDevKernel_Generic")
    ]
    no_args = [e for e in generic if "Collective name" not in e["args"]]
    assert no_args and len(no_args) < len(generic)
    rows = p.get("kernels").filter(pl.col("name") == "ncclDevKernel_Generic")
    assert rows.height == len(generic)
    assert rows["device"].unique().to_list() == [2]  # rank 0 drives device 2
    assert rows.filter(pl.col("comm_op").is_null()).height == len(no_args)
    assert rows.filter(pl.col("msg_bytes").is_null()).height == len(no_args)
    # comm_ops from record_param_comms: sizes = In msg nelems x dtype size, waits skipped
    size = {"BFloat16": 2, "Long": 8, "Float": 4}
    rpc = [
        e
        for e in events
        if e.get("name") == "record_param_comms" and e["args"].get("Collective name") != "wait"
    ]
    want = sorted(e["args"]["In msg nelems"] * size[e["args"]["dtype"]] for e in rpc)
    assert sorted(p.get("comm_ops")["msg_bytes"].to_list()) == want


def test_deepseek_custom_comm_kernels_without_sizes(shared_samples: Path) -> None:
    path = shared_samples / "kineto" / "deepseek_profile-data__train.json"
    _, events = load(path)
    p = Parsed(path)
    names = [e["name"] for e in events if cat(e) == "kernel"]
    assert not any(n.startswith("nccl") for n in names)
    deepep = [
        n
        for n in names
        if re.search(r"ep::internode::(dispatch|combine|notify_dispatch|cached_notify)<", n)
    ]
    comm_k = p.get("kernels").filter(pl.col("category") == "comm")
    assert comm_k.height == len(deepep) > 0
    comm = p.get("comm_ops")
    # notify + data kernels of one dispatch/combine are one call
    notify = [n for n in deepep if "notify" in n]
    assert comm.height == len(deepep) - len(notify)
    assert (comm["op"] == "all_to_all").all()
    for col in ("msg_bytes", "count", "dtype"):
        assert comm[col].null_count() == comm.height, col
    assert any("communication kernels" in w for w in p.warnings)


def test_b200_comm_op_takes_the_linked_kernel_interval(shared_samples: Path) -> None:
    path = shared_samples / "kineto" / "tracelens_b200__eager_trace.json.gz"
    keys, events = load(path)
    p = Parsed(path)
    rpc = next(e for e in events if e.get("name") == "record_param_comms")
    ext = rpc["args"]["External id"]
    kern = next(
        e for e in events if cat(e) == "kernel" and e.get("args", {}).get("External id") == ext
    )
    base = keys["baseTimeNanoseconds"]
    row = p.get("comm_ops").row(0, named=True)
    assert row["ts_ns"] == base + us_to_ns(kern["ts"])
    assert row["dur_ns"] == us_to_ns(kern["dur"])
    assert row["op"] == "all_gather"
    assert row["count"] == rpc["args"]["In msg nelems"]
    assert row["msg_bytes"] == rpc["args"]["In msg nelems"] * 2  # BFloat16
    assert row["comm_id"] == rpc["args"]["Process Group Name"]
    assert row["group_size"] == rpc["args"]["Group size"]
    assert row["stream"] == str(kern["args"]["stream"])
    # communicators: the process groups of pg_config that contain rank 0
    pgs = [
        pg
        for pg in keys["distributedInfo"]["pg_config"]
        if 0 in [int(x) for x in re.findall(r"\d+", str(pg["ranks"]))]
    ]
    assert p.get("communicators").height == len(pgs)
    # with each group's description and members (schema 1.7.0)
    comms = {r["comm_id"]: r for r in p.get("communicators").iter_rows(named=True)}
    for pg in pgs:
        members = sorted(int(x) for x in re.findall(r"\d+", str(pg["ranks"])))
        row = comms[str(pg["pg_name"])]
        assert (row["group_desc"], row["group_ranks"]) == (
            pg.get("pg_desc"),
            ",".join(map(str, members)),
        )
    assert p.meta["aligned"] is True
    assert p.meta["clock_anchor_ns"] == 0
    assert p.meta["source_version"] == "1;base_relative"


def test_nccl_data_sizes_iterations_and_base_after_events(shared_samples: Path) -> None:
    path = shared_samples / "kineto" / "hta_nccl_parser_config__nccl_data.json.gz"
    keys, events = load(path)
    p = Parsed(path)
    comm = p.get("comm_ops")
    rpc = [
        e
        for e in events
        if e.get("name") == "record_param_comms" and e["args"]["Collective name"] != "wait"
    ]
    size = {"Float": 4, "Long": 8, "Int": 4, "Half": 2, "BFloat16": 2}
    assert sum(comm["msg_bytes"].to_list()) == sum(
        e["args"]["In msg nelems"] * size[e["args"]["dtype"]] for e in rpc
    )
    assert set(comm["op"].to_list()) == {"all_reduce", "broadcast"}
    steps = [
        (e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1]))
        for e in events
        if e.get("name", "").startswith("ProfilerStep#")
    ]
    want_iters = sorted(next((n for a, b, n in steps if a <= e["ts"] < b), -1) for e in rpc)
    assert sorted(comm["iteration"].fill_null(-1).to_list()) == want_iters
    # baseTimeNanoseconds is written after traceEvents in this file: still applied
    assert json.dumps(keys).find("baseTimeNanoseconds") >= 0
    first_kernel = next(e for e in events if cat(e) == "kernel")
    k = p.get("kernels").filter(pl.col("source_line") == events.index(first_kernel) + 1)
    assert k["ts_ns"].item() == keys["baseTimeNanoseconds"] + us_to_ns(first_kernel["ts"])


def test_ds_pipe_gloo_traces(sample_traces: Path) -> None:
    folder = sample_traces / "ds_pipe_pp2_dp2_cpu" / "kineto"
    paths = sorted(folder.glob("rank*.pt.trace.json.gz"))
    if not paths:
        pytest.skip("ds_pipe_pp2_dp2_cpu kineto traces not recorded yet")
    ranks = set()
    for path in paths:
        _, events = load(path)
        p = Parsed(path)
        meta = p.meta
        ranks.add(meta["rank"])
        assert meta["rank_source"] == "distributedInfo"
        assert meta["world_size"] == 4
        assert meta["backend"] == "gloo"
        assert p.counts.total == len(events)
        ranges = [
            e for e in events if cat(e) == "user_annotation" and e["name"].startswith("gloo:")
        ]
        comm = p.get("comm_ops")
        assert comm.height == len(ranges) > 0
        # send/recv: peer = the c10d op's dst/src (third concrete input), bytes from Input Dims
        peers = {
            int(e["args"]["Concrete Inputs"][2])
            for e in events
            if e.get("name") in ("c10d::send", "c10d::recv_")
        }
        p2p = comm.filter(pl.col("op").is_in(["send", "recv"]))
        assert set(p2p["peer_rank"].to_list()) == peers
        for e in ranges:
            if e["name"] in ("gloo:send", "gloo:recv"):
                n = 1
                for d in e["args"]["Input Dims"][0]:
                    n *= d
                row = comm.filter(pl.col("source_line") == events.index(e) + 1)
                assert row["msg_bytes"].item() == n * 4  # float
    assert ranks == {0, 1, 2, 3}


# ------------------------------------------------------------------------------------------
# synthetic traces (labelled synthetic: built here, not real tool output)


def _synthetic_doc(n: int, *, trailer: bool = False) -> dict[str, Any]:
    events: list[Any] = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#3",
            "pid": 1,
            "tid": 1,
            "ts": 999.0,
            "dur": 10_000.0,
            "args": {},
        },
    ]
    events += [kernel_event(i) for i in range(n)]
    doc: dict[str, Any] = {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": 2, "world_size": 4},
        "traceEvents": events,
    }
    if trailer:
        doc["INFO"] = ["a ] b", "[x]"]
        doc["baseTimeNanoseconds"] = 1_700_000_000_000_000_000
    return doc


@pytest.mark.parametrize("compress", [False, True])
def test_synthetic_truncated_trace_keeps_complete_events(tmp_path: Path, compress: bool) -> None:
    doc = _synthetic_doc(50)
    data = json.dumps(doc).encode()
    cut = data.index(b'"correlation": 30') + 3  # inside event 32 (1 step + 31 kernels before)
    raw = data[:cut]
    path = tmp_path / ("cut.json.gz" if compress else "cut.json")
    if compress:
        # a killed job leaves a gzip stream without its end
        path.write_bytes(gzip.compress(raw)[:-8])
    else:
        path.write_bytes(raw)
    complete = raw.count(b'"ph"') - 1  # the last event is incomplete
    p = Parsed(path)
    assert p.get("kernels").height + p.get("markers").height == complete
    assert p.counts.total == complete + 1
    assert p.counts.rejected == 1
    assert p.counts.balanced
    rej = p.get("rejects")
    assert rej["line_no"].to_list() == [complete + 1]
    assert any("truncated" in w for w in p.warnings)


def test_synthetic_garbage_is_a_parse_error(tmp_path: Path) -> None:
    for content in (b"hello world\n", b'{"tra', b""):
        path = write_trace(tmp_path / "bad.json", None)
        path.write_bytes(content)
        with pytest.raises(ParseError):
            list(KinetoParser().parse(Source(path), run_id="t"))


@pytest.mark.parametrize("compress", [False, True])
def test_synthetic_trailer_after_events(tmp_path: Path, compress: bool) -> None:
    doc = _synthetic_doc(5, trailer=True)
    path = write_trace(tmp_path / "t.json", doc, compress=compress)
    p = Parsed(path)
    base = doc["baseTimeNanoseconds"]
    k = p.get("kernels").sort("source_line")
    assert k["ts_ns"].to_list() == [base + round((1000.0 + i) * 1000) for i in range(5)]
    assert p.meta["source_version"] == "1;base_relative"
    assert p.meta["rank"] == 2


def test_decode_trailer_variants() -> None:
    assert decode_trailer('{"ph": "X", "args": {"grid": [1, 2]}}\n]\n}') == {}
    assert decode_trailer('{"ph": "X"}], "a": [1, "]"], "b": 2}') == {"a": [1, "]"], "b": 2}
    assert decode_trailer('{"ph": "X", "args": {"g": [1, 2]}},\n{"ph": "X", "na') is None


def test_synthetic_malformed_events_are_rejected(tmp_path: Path) -> None:
    events: list[Any] = [
        kernel_event(0),
        42,
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "soon", "dur": 1},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 1.0},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "record_param_comms",
            "args": {"Collective name": "allreduce"},
        },
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
    ]
    path = write_trace(tmp_path / "rank0.json", {"traceEvents": events})
    p = Parsed(path)
    assert p.counts == LineCounts(total=6, parsed=1, ignored=1, rejected=4)
    assert sorted(p.get("rejects")["line_no"].to_list()) == [2, 3, 4, 5]
    assert (p.get("rejects")["raw"].str.len_chars() <= 4096).all()


def test_synthetic_epoch_float_ts_is_exact(tmp_path: Path) -> None:
    ev = kernel_event(0)
    ev["ts"] = 1712195495519689.25  # exactly representable; naive float x 1000 is not exact
    ev["dur"] = 2.5
    path = write_trace(tmp_path / "worker1.json", [ev])  # 2021-style bare array
    p = Parsed(path)
    assert p.get("kernels")["ts_ns"].item() == 1712195495519689250
    assert round(1712195495519689.25 * 1000) != 1712195495519689250
    assert p.get("kernels")["dur_ns"].item() == 2500
    assert p.meta["aligned"] is True
    assert p.meta["source_version"] == "none;array_2021"
    assert p.meta["rank"] == 1


def test_synthetic_relative_ts_without_base_is_not_aligned(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "rank0.json", {"traceEvents": [kernel_event(0)]})
    p = Parsed(path)
    assert p.meta["aligned"] is False
    assert p.meta["clock_anchor_ns"] is None
    assert any("cannot be aligned" in w for w in p.warnings)


def test_synthetic_kernels_only_comm_ops(tmp_path: Path) -> None:
    events = [
        kernel_event(
            0, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
        ),
        kernel_event(1, "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"),
        kernel_event(
            2,
            "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)",
            **{
                "Collective name": "_reduce_scatter_base",
                "In msg nelems": 64,
                "Out msg nelems": 8,
                "dtype": "Half",
                "Group size": 8,
                "Process Group Name": "5",
            },
        ),
        kernel_event(3),
    ]
    path = write_trace(tmp_path / "rank0.json", {"traceEvents": events})
    p = Parsed(path)
    comm = p.get("comm_ops").sort("source_line")
    assert comm["op"].to_list() == ["all_reduce", "other", "reduce_scatter"]
    # reduce_scatter: count has NCCL meaning (the per-rank output), bytes = count x 2
    assert comm["count"].to_list() == [None, None, 8]
    assert comm["msg_bytes"].to_list() == [None, None, 16]
    assert comm["comm_id"].to_list() == [None, None, "5"]
    k = p.get("kernels").sort("source_line")
    assert k["comm_op"].to_list() == ["all_reduce", "send_recv", "reduce_scatter", None]
    assert k["msg_bytes"].to_list() == [None, None, 16, None]


def test_chunks_are_bounded_and_balanced(
    shared_samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = shared_samples / "kineto" / "hta_nccl_parser_config__nccl_data.json.gz"
    whole = Parsed(path)
    monkeypatch.setattr(kineto_mod, "FLUSH_EVENTS", 5000)
    chunked = Parsed(path)
    assert chunked.chunks > 5
    assert chunked.counts == whole.counts
    for table in ("kernels", "markers", "comm_ops"):
        assert chunked.get(table).sort("source_line").equals(whole.get(table).sort("source_line"))


def _write_big_trace(path: Path, n: int) -> int:
    """Synthetic trace of ``n`` (cpu op, runtime call, kernel) triples; returns events."""
    written = 0
    with path.open("w") as fh:
        fh.write('{"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 2}, ')
        fh.write('"traceEvents": [\n')
        for i in range(n):
            for ev in (
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": "aten::mm",
                    "pid": 1,
                    "tid": 1,
                    "ts": 5.0 * i,
                    "dur": 1.0,
                    "args": {"External id": i, "Input Dims": [[64, 64]]},
                },
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": 5.0 * i + 1,
                    "dur": 1.0,
                    "args": {"correlation": i},
                },
                kernel_event(i, "void gemm_kernel<float, 128>(float*, float const*)"),
            ):
                fh.write(("," if written else "") + json.dumps(ev) + "\n")
                written += 1
        fh.write('], "baseTimeNanoseconds": 1700000000000000000}\n')
    return written


def _peak_parse(path: Path) -> tuple[int, int]:
    gc.collect()
    tracemalloc.start()
    try:
        kernels = 0
        for chunk in KinetoParser().parse(Source(path), run_id="t"):
            kernels += chunk.tables["kernels"].height if "kernels" in chunk.tables else 0
            del chunk
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, kernels


def test_synthetic_memory_stays_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tripling a synthetic trace does not grow the parser's Python heap peak."""
    monkeypatch.setattr(kineto_mod, "FLUSH_EVENTS", 5000)
    small, big = tmp_path / "small.json", tmp_path / "big.json"
    _write_big_trace(small, 5_000)
    _write_big_trace(big, 15_000)
    list(KinetoParser().parse(Source(small), run_id="warm-up"))  # caches, lazy imports
    peak_small, k_small = _peak_parse(small)
    peak_big, k_big = _peak_parse(big)
    assert (k_small, k_big) == (5_000, 15_000)
    assert peak_big < 1.25 * peak_small + 256 * 1024, (peak_small, peak_big)
    assert peak_big < big.stat().st_size / 3, (peak_big, big.stat().st_size)


def test_sniff(shared_samples: Path, tmp_path: Path) -> None:
    parser = KinetoParser()
    for name in SAMPLES:
        path = shared_samples / "kineto" / name
        assert parser.sniff(Source(path).head(), path) >= 70, name
    assert parser.sniff(b'{"table": "StringIds", "id": 0}', tmp_path / "x.json") == 0
    assert parser.sniff(b"NCCL INFO Bootstrap", tmp_path / "x.log") == 0


# ------------------------------------------------------------------------------------------
# the chunked msgspec decoder (commscope.parsers._kineto_events): layout must not change the output


def _chunker_doc() -> dict[str, Any]:
    """Events whose strings hold what a boundary search looks for, and items of odd shapes."""
    rpc_args = {"Collective name": "allreduce", "In msg nelems": 8, "dtype": "Float", "Seq": 4}
    events: list[Any] = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": 900.0,
            "dur": 10_000.0,
            "args": {"note": "}, {", "more": "}]", "x": [{"a": "}, {"}, {"b": 1}]},
        },
    ]
    for i in range(40):
        events.append(kernel_event(i, name=f"k{i} }}, {{ ] }}] [{{", note="}, {\n]", z=[{"q": i}]))
        events.append(
            {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1,
             "ts": 1000.0 + i, "dur": 1.0, "args": {**rpc_args, "External id": i}}
        )  # fmt: skip
    events += [
        7,
        "a string }, { item",
        [{"x": 1}, {"y": "}, {"}],
        None,
        {
            "ph": "X",
            "cat": "kernel",
            "name": "bad }, {",
            "ts": "soon",
            "dur": 1,
            "args": {"s": "]"},
        },
        kernel_event(99, name="ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)"),
    ]
    return {"schemaVersion": 1, "traceEvents": events, "traceName": "}, {", "x": [{"a": 1}]}


def _chunks_as_rows(path: Path) -> list[Any]:
    """Every chunk of a parse as plain data: tables' rows, counts and warnings."""
    return [
        (
            {name: df.rows() for name, df in chunk.tables.items()},
            chunk.counts,
            chunk.warnings,
        )
        for chunk in KinetoParser().parse(Source(path), run_id="t", rank=0)
    ]


@pytest.mark.parametrize("piece", [64, 700, None])
def test_chunker_layouts_give_the_same_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, piece: int | None
) -> None:
    """Compact, pretty-printed (one key per line, as Kineto writes), CRLF and gzip copies of a
    trace with ``}, {`` and ``]`` inside strings give the same chunks, whatever the piece size
    (64 bytes: a piece boundary at nearly every event)."""
    import commscope.parsers._kineto_events as events_mod

    monkeypatch.setattr(kineto_mod, "FLUSH_EVENTS", 9)
    if piece is not None:
        monkeypatch.setattr(events_mod, "PIECE_BYTES", piece)
    doc = _chunker_doc()
    layouts = {
        "compact": json.dumps(doc, separators=(",", ":")).encode(),
        "pretty": json.dumps(doc, indent=2).encode(),
        "tabs_crlf": json.dumps(doc, indent="\t").replace("\n", "\r\n").encode(),
        "bare_array": json.dumps(doc["traceEvents"], indent=1).encode(),
    }
    results = {}
    for name, data in layouts.items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(data)
        results[name] = _chunks_as_rows(path)
        gz = tmp_path / f"{name}.json.gz"
        gz.write_bytes(gzip.compress(data))
        assert _chunks_as_rows(gz) == results[name], name
    # the bare array has no trace keys: only trace_meta's source_version differs
    for name in ("pretty", "tabs_crlf"):
        assert results[name] == results["compact"], name
    assert [r[0].get("kernels") for r in results["bare_array"]] == [
        r[0].get("kernels") for r in results["compact"]
    ]
    p = Parsed(tmp_path / "pretty.json")
    names = p.get("kernels")["name"].to_list()
    assert "k3 }, { ] }] [{" in names
    n_events = len(doc["traceEvents"])
    assert p.counts.total == n_events and p.counts.rejected == 5  # 4 non-objects + bad ts
    raw = p.get("rejects").sort("line_no")["raw"].to_list()
    assert raw[:2] == ["7", '"a string }, { item"']
    assert json.loads(raw[4]) == doc["traceEvents"][-2]  # the event as written
    assert p.get("comm_ops").height == 40


@pytest.mark.parametrize("piece", [64, None])
def test_chunker_keeps_the_ijson_limits_and_truncation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, piece: int | None
) -> None:
    """What yajl (ijson) stops at, an integer past int64 in an arg no one reads or a float
    overflowing to inf, costs that value only (issue 23: it used to cost the rest of the
    trace); and a cut pretty-printed file keeps every complete event before the cut."""
    import commscope.parsers._kineto_events as events_mod

    if piece is not None:
        monkeypatch.setattr(events_mod, "PIECE_BYTES", piece)
    for bad in ("18446744073709551616", "1e400"):
        events = [kernel_event(i) for i in range(20)]
        text = json.dumps({"traceEvents": events}, indent=2)
        marker = '"correlation": 12'
        text = text.replace(marker, f'"skipped": {bad}, {marker}')
        path = tmp_path / "odd.json"
        path.write_text(text)
        p = Parsed(path)
        assert p.get("kernels").height == 20, bad
        assert p.counts.total == 20 and p.counts.rejected == 0, bad
        assert any("1 event(s) hold a number out of range" in w for w in p.warnings), bad
    data = json.dumps(_synthetic_doc(30), indent=2).encode()
    cut = data.index(b'"correlation": 20')
    path = tmp_path / "cut.json"
    path.write_bytes(data[:cut])
    p = Parsed(path)
    assert p.get("kernels").height == 20  # kernels 0..19; kernel 20 is cut
    assert p.counts.total == 1 + 20 + 1 and p.counts.rejected == 1


def test_corrupt_collective_args_give_nulls_not_a_failed_file(tmp_path: Path) -> None:
    """SYNTHETIC: out-of-range integers and odd digits in one collective's args."""

    def rpc(i: int, **args: Any) -> dict[str, Any]:
        base = {
            "Collective name": "all_reduce",
            "In msg nelems": 1024,
            "Out msg nelems": 1024,
            "dtype": "Float",
            "Group size": 2,
            "Process Group Name": "0",
            "Rank": 0,
            "Seq": i,
        }
        return {
            "ph": "X",
            "cat": "cpu_op",
            "name": "record_param_comms",
            "pid": 1,
            "tid": 1,
            "ts": 10.0 * i,
            "dur": 2.0,
            "args": {**base, **args},
        }

    doc = {
        "schemaVersion": 1,
        "distributedInfo": {"rank": 0, "world_size": 2},
        "traceEvents": [
            rpc(0),
            rpc(1, **{"Group size": 2**40, "In msg nelems": 2**62, "dtype": "Double"}),
            rpc(2, Seq="9" * 25),
            rpc(3, **{"Group size": "²"}),
        ],
    }
    ops = Parsed(write_trace(tmp_path / "rank0.json", doc)).get("comm_ops").sort("source_line")
    assert ops.height == 4
    # a corrupt Group size is dropped; the call names no group, so it is on the default
    # group of the 2-rank world, and says so
    assert ops["group_size"].to_list() == [2, 2, 2, 2]
    assert ops["group_source"].to_list() == ["logged", "inferred_default"] * 2
    assert ops["msg_bytes"].to_list()[0] == 4096
    assert ops["msg_bytes"].to_list()[1] is None  # 2**62 x 8 bytes does not fit
    assert ops["seq"].to_list()[2] is None


def test_split_bytes_of_an_uneven_all_to_all() -> None:
    """``In split size`` counts rows along dim 0 per member: bytes = rows x row bytes."""
    from commscope.parsers.kineto import split_bytes

    # the real pp2ep2 trace's first exchange: [118, 394] rows of 512 bf16 (262144 elements)
    assert split_bytes("[118, 394]", 262144, 524288, 2) == "120832,403456"
    assert split_bytes([118, 394], 262144, 524288, None) == "120832,403456"
    assert split_bytes("[]", 262144, 524288, 2) is None  # even: msg_bytes / n each
    assert split_bytes("[118, 394]", 262144, 524288, 4) is None  # not one entry per member
    assert split_bytes("[100, 300]", 262145, 524290, 2) is None  # no whole row
    assert split_bytes("[1, x]", 4, 8, 2) is None
    assert split_bytes("[0, 0]", 4, 8, 2) is None
    assert split_bytes("[1, 1]", None, None, 2) is None
    assert split_bytes(7, 4, 8, 2) is None
