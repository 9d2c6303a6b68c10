"""Format fidelity: every generated line or record has the shape of the real tool's output.

The regexes below are copied verbatim from FORMATS_text_logs.md (§1.5, §1.6, §2.2-2.7) and
FORMATS_timeline.md (§3): they are the spec. Expected counts are computed independently (from
truth.json or a plain walk of the file), and shapes are compared with the real samples in
../shared/samples where a sample of the same kind exists.
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from commscope.model.config import config_from_dict
from commscope.parsers._nsys_payload import MSG_SIZE, PayloadDecoder
from commscope.synthetic import GenerateOptions, Scenario, generate
from commscope.synthetic.presets import tiny_config as tiny
from commscope.synthetic.write_deepspeed import convert_size

# -- FORMATS_text_logs.md, verbatim -----------------------------------------------------------
DS_VERBOSE = re.compile(
    r"(?:\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3})\] \[(?P<lvl>[A-Z]+)\] \[(?P<src>[^\]]+)\] )?"
    r"\[Rank (?P<prank>-?\d+)\] (?:rank=(?P<rank>\d+) \| )?comm op: (?P<rec>.+?)"
    r" \| time \(ms\): (?P<ms>\d+\.\d{2}) \| msg size: (?P<size>0B|\d+(?:\.\d+)? [KMGTPEZY]?B)"
    r" \| algbw \(Gbps\): (?P<algbw>\d+\.\d{2}) +\| busbw \(Gbps\): (?P<busbw>\d+\.\d{2}) ?$"
)
DS_HDR = re.compile(
    r"^Comm\. Op +Message Size +Count +Total Latency\(ms\) +Avg Latency\(ms\) +tput_avg \(Gbps\) +busbw_avg \(Gbps\) *$"
)
DS_ROW = re.compile(
    r"^ {20}(?P<size>0B|\d+(?:\.\d+)? [KMGTPEZY]?B) *(?P<count>\d+) +(?P<c3>-?\d+\.\d{2}) +(?P<c4>-?\d+\.\d{2}) +(?P<c5>-?\d+\.\d{2}) +(?P<c6>-?\d+\.\d{2}) *$"
)
NCCL_PREFIX = re.compile(
    r"(?P<ts>\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)?\] )?"
    r"(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) (?:\[(?P<dev>\d+)\] )?"
    r"(?:(?P<trace_ms>\d+\.\d+) )?(?:(?P<src>\S+:\d+)(?: \((?P<func>[^)]*)\))? )?"
    r"NCCL (?P<level>INFO|WARN|TRACE|CALL) "
)
NCCL_VERSION = re.compile(r"NCCL version (\d+)\.(\d+)\.(\d+)([^+\s]*)\+cuda(\d+\.\d+)")
NCCL_COLL = re.compile(
    r"(?P<op>[A-Za-z]+): opCount (?P<opcount>[0-9a-f]+) sendbuff (?P<sendbuff>0x[0-9a-f]+|\(nil\)) "
    r"recvbuff (?P<recvbuff>0x[0-9a-f]+|\(nil\)) count (?P<count>\d+) datatype (?P<dtype>\d+) "
    r"op (?P<redop>\d+) root (?P<root>-?\d+) comm (?P<comm>0x[0-9a-f]+) \[nranks=(?P<nranks>\d+)\] "
    r"stream (?P<stream>0x[0-9a-f]+|\(nil\))(?P<extra>.*)$"
)
NCCL_INIT = re.compile(
    r"(?:\[Rank (?P<grank>\d+)\] )?(?:(?P<fn>ncclComm\w+) )?comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) "
    r"nranks (?P<nranks>\d+) cudaDev (?P<cudadev>\d+)(?: nvmlDev (?P<nvmldev>\d+))?(?: busId (?P<busid>[0-9a-f]+))?"
    r"(?: parent (?P<parent>\S+)(?: (?:splitCount|childCount) \d+)? color (?P<color>-?\d+) key (?P<key>-?\d+))?"
    r"(?: commId (?P<commid>0x[0-9a-f]+))? ?- Init (?P<phase>START|COMPLETE)"
)
NCCL_RINGORDER = re.compile(
    r"Channel (?P<ch>\d+)/(?P<nch>\d+) :(?P<ranks>(?: +\d+)+)(?P<trunc>\.\.\.)?\s*$"
)
NCCL_RING = re.compile(r"Ring (?P<ch>\d+) : (?P<prev>-?\d+) -> (?P<me>\d+) -> (?P<next>-?\d+)\s*$")
NCCL_TREES = re.compile(
    r"Trees(?P<items>(?: \[\d+\] -?\d+/-?\d+/-?\d+->-?\d+->-?\d+(?:\|-?\d+->-?\d+->-?\d+/-?\d+/-?\d+)?)+)"
)
NCCL_CONN = re.compile(
    r"(?P<kw>Channel|Ring) (?P<ch>\d+)(?:/(?P<conn>\d+))? : (?P<src>\d+)(?:\[(?P<srcdev>[0-9a-f]+)\])? -> "
    r"(?P<dst>\d+)(?:\[(?P<dstdev>[0-9a-f]+)\])? (?:\[(?P<dir>send|receive)\] )?"
    r"via (?P<transport>P2P|SHM|NET|NVLS|COLLNET|direct shared memory)(?P<detail>.*)$"
)
NCCL_NETDETAIL = re.compile(
    r"^/(?P<net>[^/]+)/(?P<dev>\d+)(?:\((?P<proxy>\d+)\))?(?P<flags>(?:/GDRDMA(?:\(PCI\))?|/Shared)*)$"
)
NCCL_CONNECTED = re.compile(
    r"Connected (?:all (?P<what>rings|trees)(?:, use ring PXN (?P<pxn>\d) GDR (?P<gdr>\d))?|NVLS tree|collnet \+ chain)"
)
NCCL_NCHAN = re.compile(
    r"(?P<coll>\d+) coll channels, (?:(?P<collnet>\d+) collnet channels, )?(?:(?P<nvls>\d+) nvls channels, )?(?P<p2p>\d+) p2p channels, (?P<ppp>\d+) p2p channels per peer"
)
NCCL_END = re.compile(
    r"comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cudadev>\d+) busId (?P<busid>[0-9a-f]+) - (?P<what>Destroy|Abort) COMPLETE"
)
NCCL_LOCAL = re.compile(
    r"comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+) localRanks (?P<lr>\d+) localRank (?P<l>\d+) MNNVL (?P<mnnvl>\d+)"
)
# -- FORMATS_timeline.md §3 ---------------------------------------------------------------------
NCCL_KERNEL_NEW = re.compile(
    r"^nccl(?:Dev)?Kernel_(?P<coll>AllReduce|AllGather(?:V)?|ReduceScatter|Broadcast|Reduce|SendRecv|Generic)(?:_(?P<rest>.*))?$"
)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 32-rank run in all four formats, 2 iterations, with clock skew."""
    out = tmp_path_factory.mktemp("synth") / "run"
    opts = GenerateOptions(iterations=2, seed=5, scenario=Scenario(clock_skew_us=1500.0))
    generate(config_from_dict(tiny()), opts, out)
    return out


def truth_calls(run: Path) -> dict[int, int]:
    """Communication calls per rank over the run (truth.json)."""
    doc = json.loads((run / "truth.json").read_text())
    cols = doc["per_rank_calls"]["columns"]
    out: dict[int, int] = {}
    for row in doc["per_rank_calls"]["rows"]:
        rec = dict(zip(cols, row, strict=True))
        out[rec["rank"]] = out.get(rec["rank"], 0) + rec["calls_total"]
    return out


def shape(text: str) -> str:
    """A line's shape: hex, numbers and the host prefix masked."""
    text = re.sub(r"opCount [0-9a-f]+", "opCount H", text)
    text = re.sub(r"0x[0-9a-f]+", "P", text)
    text = re.sub(r"busId [0-9a-f]+", "busId H", text)
    return re.sub(r"\d+", "N", text)


def message(line: str) -> str:
    """The NCCL message part (after the last prefix), asserting the prefix starts the line."""
    matches = list(NCCL_PREFIX.finditer(line))
    assert matches, line
    assert matches[-1].start() == 0, line
    return line[matches[-1].end() :]


# -- NCCL ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2.18.3", "2.21.5", "2.22.3", "2.27.7"])
def test_nccl_lines_match_formats(tmp_path: Path, version: str) -> None:
    out = tmp_path / "run"
    cfg = tiny()
    generate(
        config_from_dict(cfg),
        GenerateOptions(iterations=1, formats=("nccl",), nccl_version=version),
        out,
    )
    minor = int(version.split(".")[1])
    calls = truth_calls(out)
    files = sorted((out / "nccl").glob("synthetic_rank*.nccl.log"))
    assert len(files) == 32
    seen: dict[str, int] = {}
    for f in files:
        rank = int(re.search(r"rank(\d+)", f.name).group(1))  # type: ignore[union-attr]
        text = f.read_text()
        assert text.endswith("\n")
        coll = 0
        for line in text.splitlines():
            msg = message(line)
            if ": opCount " in msg:
                assert NCCL_COLL.fullmatch(msg), line
                coll += 1
                kind = "coll"
            elif "- Init " in msg:
                m = NCCL_INIT.search(msg)
                assert m and m.end() == len(msg), line
                assert (m["phase"] == "START") <= (minor >= 19)
                kind = "init"
            elif "nRanks" in msg:
                assert NCCL_LOCAL.fullmatch(msg), line
                kind = "local"
            elif " via " in msg:
                m = NCCL_CONN.fullmatch(msg)
                assert m, line
                if m["transport"] == "NET":
                    assert NCCL_NETDETAIL.fullmatch(m["detail"]), line
                kind = "conn"
            elif msg.startswith("Channel "):
                m = NCCL_RINGORDER.fullmatch(msg)
                assert m, line
                assert len(m["ranks"].split()) <= 20 or minor >= 23
                if minor >= 23:
                    assert len(msg) <= 127
                kind = "ringorder"
            elif msg.startswith("Ring "):
                assert NCCL_RING.fullmatch(msg), line
                kind = "ring"
            elif msg.startswith("Trees"):
                assert NCCL_TREES.fullmatch(msg), line
                kind = "trees"
            elif msg.startswith("Connected"):
                assert NCCL_CONNECTED.fullmatch(msg), line
                if "rings" in msg:
                    assert ("PXN" in msg) == (minor >= 24)
                kind = "connected"
            elif "channels per peer" in msg:
                assert NCCL_NCHAN.fullmatch(msg), line
                assert ("collnet" in msg) == (minor >= 22)
                kind = "nchan"
            elif "Destroy COMPLETE" in msg:
                assert NCCL_END.fullmatch(msg), line
                kind = "end"
            elif msg.startswith("NCCL version"):
                assert NCCL_VERSION.fullmatch(msg) and msg.startswith(
                    f"NCCL version {version}+cuda"
                )
                kind = "version"
            else:
                kind = "other"
            seen[kind] = seen.get(kind, 0) + 1
        # One COLL line per call; all-to-alls would add lines, this model has none.
        assert coll == calls[rank], f.name
    assert {
        "coll",
        "init",
        "ringorder",
        "ring",
        "trees",
        "conn",
        "connected",
        "nchan",
        "end",
        "version",
    } <= set(seen)
    assert seen["local"] > 0 if minor >= 20 else "local" not in seen
    assert seen["version"] == 32 if minor >= 22 else seen["version"] < 32


def _sample_shapes(shared: Path, name: str, needle: str) -> set[str]:
    shapes = set()
    for line in (shared / "nccl_debug" / name).read_text(errors="replace").splitlines():
        if needle in line:
            msg = (
                line[list(NCCL_PREFIX.finditer(line))[-1].end() :]
                if NCCL_PREFIX.search(line)
                else ""
            )
            if needle in msg:
                shapes.add(shape(msg))
    return shapes


@pytest.mark.parametrize(
    ("version", "sample"),
    [
        ("2.21.5", "perlmutter_2.21.5_2node_8rank_podman_ofi.out"),
        ("2.22.3", "p5_efa_2.22.3_2node_16rank_mpirun_tagged.log"),
        ("2.27.7", "nccltests_2.27.7_1proc_2gpu_allreduce.log"),
    ],
)
def test_nccl_line_shapes_equal_real_samples(
    tmp_path: Path, shared_samples: Path, version: str, sample: str
) -> None:
    out = tmp_path / "run"
    generate(
        config_from_dict(tiny()),
        GenerateOptions(iterations=1, formats=("nccl",), nccl_version=version),
        out,
    )
    text = (out / "nccl" / "synthetic_rank0000.nccl.log").read_text()
    mine: dict[str, set[str]] = {}
    for needle in (
        "Init START",
        "Init COMPLETE",
        "nRanks",
        "coll channels",
        "Destroy COMPLETE",
        "NCCL version",
    ):
        mine[needle] = {
            shape(message(line))
            for line in text.splitlines()
            if needle in line and "parent" not in line
        }
        real = _sample_shapes(shared_samples, sample, needle)
        if real:
            assert mine[needle] & real, (needle, mine[needle], real)
    # The world communicator's init line is the non-split shape of the sample.
    if version == "2.27.7":
        coll = {shape(message(line)) for line in text.splitlines() if "AllReduce: opCount" in line}
        assert coll == _sample_shapes(shared_samples, sample, "AllReduce: opCount")


def test_nccl_truncation_and_tcp(tmp_path: Path) -> None:
    out = tmp_path / "run"
    scn = Scenario(network="tcp", truncate_rank=5, truncate_fraction=0.5, missing_ranks=(7,))
    res = generate(
        config_from_dict(tiny()),
        GenerateOptions(iterations=1, formats=("nccl",), scenario=scn),
        out,
    )
    cut = (out / "nccl" / "synthetic_rank0005.nccl.log").read_bytes()
    assert not cut.endswith(b"\n")
    last = cut.rsplit(b"\n", 1)[1].decode()
    full_lines = (out / "nccl" / "synthetic_rank0004.nccl.log").read_text().splitlines()
    assert not NCCL_PREFIX.fullmatch(last) and len(last) > 0
    assert not (out / "nccl" / "synthetic_rank0007.nccl.log").exists()
    assert res.manifest["missing_files"] == ["nccl/synthetic_rank0007.nccl.log"]
    assert res.manifest["truncated_files"][0]["file"] == "nccl/synthetic_rank0005.nccl.log"
    text = "\n".join(full_lines)
    assert "Using network Socket" in text and "via NET/Socket/0" in text and "NET/IB" not in text


# -- DeepSpeed ----------------------------------------------------------------------------------


def test_convert_size_matches_deepspeed_examples() -> None:
    assert convert_size(0) == "0B"
    assert convert_size(128) == "128.0 B"
    assert convert_size(1048575) == "1024.0 KB"
    assert convert_size(2**30 - 1) == "1024.0 MB"
    assert convert_size(131072000) == "125.0 MB"
    assert convert_size(777492000) == "741.47 MB"


@pytest.mark.parametrize("version", ["0.9.2", "0.14.4", "0.19.8"])
def test_deepspeed_lines_and_summary(tmp_path: Path, version: str) -> None:
    out = tmp_path / "run"
    generate(
        config_from_dict(tiny()),
        GenerateOptions(iterations=2, formats=("deepspeed",), deepspeed_version=version),
        out,
    )
    files = list((out / "deepspeed").iterdir())
    assert [f.name for f in files] == ["synthetic_rank0000.deepspeed.log"]
    lines = files[0].read_text().splitlines()
    ver = tuple(int(x) for x in version.split("."))
    verbose = [ln for ln in lines if "comm op:" in ln]
    per_record: dict[str, list[float]] = {}
    for ln in verbose:
        m = DS_VERBOSE.search(ln)
        assert m and m.start() == 0, ln
        assert (m["rank"] is not None) == (ver < (0, 10, 1))
        assert ln.endswith(" ") == (ver < (0, 10, 1))
        per_record.setdefault(m["rec"], []).append(float(m["ms"]))
        if m["rec"] == "all_reduce" and float(m["algbw"]) > 10:
            # busbw uses the global world size (32), not the group's.
            assert float(m["busbw"]) / float(m["algbw"]) == pytest.approx(31 / 32, rel=0.02)
    assert len(verbose) == truth_calls(out)[0] + 2  # + the two log_summary barriers
    if ver >= (0, 18, 3):
        assert all(v == sorted(v) for v in per_record.values())
    hdr = [i for i, ln in enumerate(lines) if DS_HDR.match(ln)]
    assert len(hdr) == 1
    table_counts: dict[str, int] = {}
    record = None
    for ln in lines[hdr[0] + 1 :]:
        if "comm op:" in ln:
            break
        if ln.startswith(" "):
            m = DS_ROW.match(ln)
            assert m and record, ln
            assert len(ln) == 140 and ln[:20] == " " * 20
            table_counts[record] = table_counts.get(record, 0) + int(m["count"])
        else:
            record = ln
    assert table_counts == {
        rec: len(v) - (rec == "log_summary_barrier") for rec, v in per_record.items()
    }
    assert any(ln.startswith("steps: 2 loss: ") for ln in lines)


def test_deepspeed_verbose_shape_equals_mlprof_sample(tmp_path: Path, shared_samples: Path) -> None:
    out = tmp_path / "run"
    generate(
        config_from_dict(tiny()),
        GenerateOptions(iterations=1, formats=("deepspeed",), deepspeed_version="0.9.2"),
        out,
    )
    mine = {
        shape(ln)
        for ln in (out / "deepspeed" / "synthetic_rank0000.deepspeed.log").read_text().splitlines()
        if "comm op: send" in ln
    }
    real = {
        shape(ln[ln.index("[20") :])
        for ln in (
            shared_samples / "deepspeed_comms" / "mlprof_thetagpu_2node_16gpu_verbose_run1.log"
        )
        .read_text(errors="replace")
        .splitlines()
        if "comm op: broadcast" in ln and "[20" in ln
    }
    mine = {s.replace("send", "broadcast") for s in mine}
    assert mine & real, (mine, list(real)[:3])


# -- Kineto -------------------------------------------------------------------------------------


def _kineto(run: Path, rank: int) -> dict[str, Any]:
    with gzip.open(run / "kineto" / f"synthetic_rank{rank:04d}.pt.trace.json.gz") as fh:
        return json.load(fh)


def test_kineto_traces(run_dir: Path, shared_samples: Path) -> None:
    with gzip.open(shared_samples / "kineto" / "tracelens_b200__eager_trace.json.gz") as fh:
        real = json.load(fh)
    real_rpc_args = set()
    for e in real["traceEvents"]:
        if e.get("name") == "record_param_comms":
            real_rpc_args |= set(e["args"])
    real_kernel_args = {
        "External id",
        "queued",
        "device",
        "context",
        "stream",
        "correlation",
        "registers per thread",
        "shared memory",
        "blocks per SM",
        "warps per SM",
        "grid",
        "block",
        "est. achieved occupancy %",
        "Collective name",
        "In msg nelems",
        "Out msg nelems",
        "Group size",
        "dtype",
        "In split size",
        "Out split size",
        "Process Group Name",
        "Process Group Description",
        "Process Group Ranks",
        "Src Rank",
        "Dst Rank",
    }
    calls = truth_calls(run_dir)
    for rank in (0, 13, 31):
        tr = _kineto(run_dir, rank)
        assert tr["commscope_synthetic"] is True
        assert set(real) - {"traceName"} <= set(tr) | {"with_stack", "trace_id"}
        assert set(tr["distributedInfo"]) == set(real["distributedInfo"])
        assert tr["distributedInfo"]["rank"] == rank and tr["distributedInfo"]["world_size"] == 32
        assert tr["baseTimeNanoseconds"] % 1_000_000_000 == 0
        evs = tr["traceEvents"]
        steps = [e for e in evs if e.get("name", "").startswith("ProfilerStep#")]
        assert [e["name"] for e in steps] == ["ProfilerStep#0", "ProfilerStep#1"]
        rpc = [e for e in evs if e.get("name") == "record_param_comms"]
        assert len(rpc) == calls[rank]
        kernels = {e["args"]["External id"]: e for e in evs if e.get("cat") == "kernel"}
        for e in rpc:
            assert list(e) == ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args"]
            assert set(e["args"]) <= real_rpc_args
            k = kernels[e["args"]["External id"]]
            assert set(k["args"]) <= real_kernel_args
            assert NCCL_KERNEL_NEW.match(k["name"].split("(")[0]), k["name"]
            assert k["args"]["Collective name"] == e["args"]["Collective name"]
            assert any(s["ts"] <= e["ts"] < s["ts"] + s["dur"] for s in steps)
        compute = [e for e in evs if e.get("cat") == "kernel" and e["tid"] == 7]
        assert len(compute) + len(rpc) == len(kernels)


def test_kineto_clock_skew_matches_truth(run_dir: Path) -> None:
    doc = json.loads((run_dir / "truth.json").read_text())
    skew = doc["scenario"]["clock_skew_ns"]["per_node"]
    assert skew[0] == 0 and any(skew[1:])
    ri = doc["per_rank_iteration"]
    cols = ri["columns"]
    start = {
        (r[cols.index("rank")], r[cols.index("iteration")]): r[cols.index("iter_start_ns")]
        for r in ri["rows"]
    }
    manifest = json.loads((run_dir / "manifest.json").read_text())
    t0 = None
    for rank in (0, 8, 16, 24):  # one rank per node
        tr = _kineto(run_dir, rank)
        step = next(e for e in tr["traceEvents"] if e.get("name") == "ProfilerStep#1")
        epoch = tr["baseTimeNanoseconds"] + round(step["ts"] * 1000)
        node = manifest["mapping"]["ranks"][rank]["node"]
        true = epoch - skew[node] - start[(rank, 1)]
        t0 = true if t0 is None else t0
        assert true == t0  # same anchor once each node's skew is removed


# -- nsys ---------------------------------------------------------------------------------------


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def test_nsys_exports(run_dir: Path, shared_samples: Path) -> None:
    real = sqlite3.connect(shared_samples / "nsys" / "nvfuser_report1.sqlite")
    real_tables = {r[0] for r in real.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    real_meta = {r[0] for r in real.execute("SELECT name FROM META_DATA_EXPORT")}
    calls = truth_calls(run_dir)
    for rank in (0, 17):
        con = sqlite3.connect(run_dir / "nsys" / f"synthetic_rank{rank:04d}.sqlite")
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert tables - real_tables == {"NVTX_PAYLOAD_SCHEMAS", "NVTX_PAYLOAD_SCHEMA_ENTRIES"}
        for t in tables & real_tables:
            mine, theirs = _columns(con, t), _columns(real, t)
            assert set(mine) <= set(theirs), t
            assert mine == [c for c in theirs if c in mine], t
        meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
        assert set(meta) - real_meta == {"COMMSCOPE_SYNTHETIC"}
        strings = dict(con.execute("SELECT id, value FROM StringIds"))
        dom = con.execute(
            "SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'NCCL'"
        ).fetchall()
        assert len(dom) == 1
        ranges = con.execute(
            "SELECT start, end, textId, binaryData FROM NVTX_EVENTS WHERE eventType = 59 AND domainId = ?",
            dom[0],
        ).fetchall()
        apis = [strings[t] for _s, _e, t, _b in ranges]
        assert len(apis) == calls[rank]
        decoder = PayloadDecoder.from_db(con, tables)
        sizes = {decoder.decode_binary(b, dom[0][0])[MSG_SIZE] for _s, _e, _t, b in ranges}  # type: ignore[index]
        assert min(sizes) > 0
        kernels = con.execute(
            "SELECT start, end, correlationId, shortName, streamId FROM CUPTI_ACTIVITY_KIND_KERNEL"
        ).fetchall()
        runtime = dict(
            con.execute("SELECT correlationId, start FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchall()
        )
        nccl = [k for k in kernels if strings[k[3]].startswith("nccl")]
        assert len(nccl) == calls[rank]
        assert all(NCCL_KERNEL_NEW.match(strings[k[3]]) for k in nccl)
        assert all(runtime[k[2]] < k[0] for k in kernels)
        # Each NCCL kernel's launch lies inside an NCCL API range.
        starts = sorted((s, e) for s, e, _t, _b in ranges)
        import bisect

        for k in nccl:
            launch = runtime[k[2]]
            i = bisect.bisect_right(starts, (launch, 1 << 62)) - 1
            assert starts[i][0] <= launch <= starts[i][1]
        steps = con.execute(
            "SELECT text FROM NVTX_EVENTS WHERE eventType = 59 AND domainId = 0"
        ).fetchall()
        assert [s[0] for s in steps] == ["iteration 0", "iteration 1"]
        anchor = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
        assert anchor > 1_600_000_000 * 10**9
        con.close()
