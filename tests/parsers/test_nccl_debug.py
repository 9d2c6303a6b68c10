"""Tests of the nccl_debug parser: every real sample, then synthetic edge cases.

Expected numbers are computed inside the tests from the raw text with plain ``re`` (never by
running the parser twice); semantic facts are checked against what each file itself logs.
Synthetic inputs are small inline strings written to ``tmp_path`` and labelled ``synthetic``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commscope.parsers import _nccl_enums as enums
from commscope.parsers._io import Source
from commscope.parsers.nccl_debug import NcclDebugParser
from commscope.parsers.registry import LineCounts, ParseError
from commscope.parsers.schema import conform

PARSER = NcclDebugParser()
SAMPLE_DIR = "nccl_debug"
CORI = "cori_2.5.6_2node_16rank_srun_labelled.out"
P5 = "p5_efa_2.22.3_2node_16rank_mpirun_tagged.log"
NCCLTESTS = "nccltests_2.27.7_1proc_2gpu_allreduce.log"
MEGATRON_TAIL = "megatron_4gpu_nccl2.19-2.20_tail_coll_excerpt.log"
MEGATRON_HEAD = "megatron_4gpu_nccl2.19-2.20_head_excerpt.log"
RADDET = "raddet_2.19-2.21_2rank_shared_debugfile_clobbered.log"
GF0 = "gfbench_2.20.5_2rank_normal_rank0_debugfile.txt"
GF1 = "gfbench_2.20.5_2rank_normal_rank1_debugfile.txt"
PERLMUTTER = "perlmutter_2.21.5_2node_8rank_podman_ofi.out"

# Independent, grep-level shapes of the records the parser turns into rows. They are applied to
# the text after the LAST "NCCL INFO " of a line (concurrent writers can splice lines).
COLL_T = re.compile(
    r"^[A-Za-z]+: opCount [0-9a-f]+ sendbuff \S+ recvbuff \S+ count \d+ datatype \d+ op \d+ "
    r"root -?\d+ comm 0x[0-9a-f]+ \[nranks=\d+\] stream \S+$"
)
LIFE_T = re.compile(
    r"comm 0x[0-9a-f]+ rank \d+ nranks \d+ .*(- Init (START|COMPLETE)|- (Destroy|Abort) COMPLETE)$"
)
TOPO_T = re.compile(
    r"^(Ring \d+ : |Channel \d+(/\d+)? : |Trees \[|Tree \d+ : |NVLS Head|NVLS Trees|CollNet \d+)"
)
CONN_T = re.compile(
    r"NCCL INFO (Channel|Ring) \d+(/\d+)? : \d+\[[0-9a-f]+\] -> \d+\[[0-9a-f]+\] .*via "
)

# Lines each sample must reject (1-based), read off the files by eye: spliced writes that cut
# an Init line (21) and a Trees line (80) in the Megatron head excerpt.
EXPECTED_REJECTS = {MEGATRON_HEAD: {21, 80}}


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def parse(
    path: Path, rank: int | None = None
) -> tuple[dict[str, pl.DataFrame], LineCounts, list[str]]:
    """Run the parser; concatenate the frames per table and sum the counts."""
    frames: dict[str, list[pl.DataFrame]] = {}
    counts = LineCounts()
    warnings: list[str] = []
    for chunk in PARSER.parse(Source(path), run_id="r", rank=rank):
        counts += chunk.counts
        warnings += chunk.warnings
        for name, df in chunk.tables.items():
            frames.setdefault(name, []).append(df)
    return {k: pl.concat(v) for k, v in frames.items()}, counts, warnings


def conform_all(tables: dict[str, pl.DataFrame], path: Path) -> None:
    """Every emitted frame must fit its canonical table (ingest adds run_id / path)."""
    for name, df in tables.items():
        df = df.with_columns(run_id=pl.lit("r"))
        if name == "rejects":
            df = df.with_columns(path=pl.lit(str(path)))
        out = conform(df, name)
        assert out.num_rows == df.height


def line_count(path: Path) -> int:
    """Lines as ``wc -l`` counts them, plus a final line without newline."""
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").split("\n")[: line_count(path)]


def tail(line: str) -> str | None:
    """Text after the last 'NCCL INFO ' of a line, or None."""
    return line.rsplit("NCCL INFO ", 1)[1] if "NCCL INFO " in line else None


def record_lines(path: Path) -> dict[str, int]:
    """Independent count of COLL, lifecycle and topology lines (by the last NCCL INFO tail)."""
    out = {"coll": 0, "life": 0, "topo": 0}
    for line in lines_of(path):
        t = tail(line)
        if t is None:
            continue
        if COLL_T.match(t):
            out["coll"] += 1
        elif LIFE_T.search(t):
            out["life"] += 1
        elif TOPO_T.match(t):
            out["topo"] += 1
    return out


def write(tmp_path: Path, text: str, name: str = "synthetic_nccl.log") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def sample(shared_samples: Path, name: str) -> Path:
    path = shared_samples / SAMPLE_DIR / name
    if not path.is_file():
        pytest.skip(f"sample {name} missing")
    return path


def sample_files(shared_samples: Path) -> list[Path]:
    return sorted(
        p for p in (shared_samples / SAMPLE_DIR).iterdir() if not p.name.endswith(".source.txt")
    )


# --------------------------------------------------------------------------------------------
# every sample
# --------------------------------------------------------------------------------------------


def test_every_sample_ingests_with_independent_counts(shared_samples: Path) -> None:
    files = sample_files(shared_samples)
    assert len(files) >= 9
    for path in files:
        tables, counts, _ = parse(path)
        conform_all(tables, path)
        assert counts.total == line_count(path), path.name
        assert counts.balanced, path.name
        rec = record_lines(path)
        assert tables["comm_ops"].height == rec["coll"], path.name
        assert counts.parsed == rec["coll"] + rec["life"] + rec["topo"], path.name
        rejected = set(tables["rejects"]["line_no"].to_list()) if "rejects" in tables else set()
        assert rejected == EXPECTED_REJECTS.get(path.name, set()), path.name
        assert counts.rejected == len(rejected)
        # p2p topology rows: one per connection line (no sample logs a connection twice)
        conn = sum(1 for ln in lines_of(path) if CONN_T.search(ln))
        topo = tables["topology"]
        assert topo.filter(pl.col("kind") == "p2p").height == conn, path.name


def test_sniff(shared_samples: Path, tmp_path: Path) -> None:
    for path in sample_files(shared_samples):
        assert PARSER.sniff(Source(path).head(), path) >= 45, path.name
    plain = write(tmp_path, "epoch 1 loss 0.3\nepoch 2 loss 0.2\n", "train.log")
    assert PARSER.sniff(plain.read_bytes(), plain) == 0


# --------------------------------------------------------------------------------------------
# Cori, NCCL 2.5.6, 16 ranks on 2 nodes, srun -l labels
# --------------------------------------------------------------------------------------------


def test_cori_world_communicator(shared_samples: Path) -> None:
    path = sample(shared_samples, CORI)
    tables, _, warnings = parse(path)
    comms = tables["communicators"]
    # independently: every Init COMPLETE line gives (host, rank, nranks)
    init = [
        re.search(
            r"(\S+):(\d+):\d+ \[\d+\] NCCL INFO comm (0x[0-9a-f]+) rank (\d+) nranks (\d+)", ln
        )
        for ln in lines_of(path)
        if ln.endswith("Init COMPLETE")
    ]
    expected = {(m[1], int(m[4])) for m in init if m}
    assert len(expected) == 16
    assert comms.height == 16
    assert set(comms["nranks"].to_list()) == {16}
    assert set(zip(comms["host"], comms["rank"], strict=True)) == expected
    assert comms["global_rank"].to_list() == comms["rank"].to_list()
    assert set(comms["host"].to_list()) == {"cgpu15", "cgpu16"}
    by_host = comms.group_by("host").agg(pl.col("rank").sort())
    assert dict(by_host.iter_rows()) == {"cgpu15": list(range(8)), "cgpu16": list(range(8, 16))}
    # one bare ' 0: NCCL version 2.5.6+cuda10.2' line: rank 0 through its srun label, the
    # others through the file-level fallback (warned)
    assert set(comms["nccl_version"].to_list()) == {"2.5.6"}
    assert any("nccl_version of 15 communicators inferred" in w for w in warnings)
    assert comms["comm_hash"].null_count() == 16  # no commId before 2.16


def test_cori_ring_neighbours_every_rank_and_channel(shared_samples: Path) -> None:
    path = sample(shared_samples, CORI)
    text = lines_of(path)
    # What the file logs: rank 0's ring-order lines 'Channel 0c/04 :    0   4   5 ...' and
    # pre-2.7 connection lines 'Ring 00 : 13[89000] -> 14[b2000] via P2P/IPC'; it has NO
    # 'Ring NN : a -> b -> c' neighbour lines (GRAPH subsystem, 2.10+).
    assert not any(re.search(r"Ring \d+ : -?\d+ -> \d+ -> -?\d+$", ln) for ln in text)
    orders = {}
    for ln in text:
        m = re.search(r"NCCL INFO Channel (\d+)/04 :((?: +\d+)+)$", ln)
        if m:
            orders[int(m[1])] = [int(x) for x in m[2].split()]
    assert sorted(orders) == [0, 1, 2, 3]
    tables, _, _ = parse(path)
    topo = tables["topology"].filter(pl.col("kind") == "ring_order")
    world = tables["communicators"].filter(pl.col("rank") == 0)["comm_id"].item()
    assert set(topo["comm_id"].to_list()) == {world}
    for ch, order in orders.items():
        n = len(order)
        for pos, r in enumerate(order):
            mine = topo.filter((pl.col("channel") == ch) & (pl.col("rank") == r))
            got = {
                d: mine.filter(pl.col("direction") == d)["peer_rank"].to_list()
                for d in ("next", "prev", "position")
            }
            assert got == {
                "next": [order[(pos + 1) % n]],
                "prev": [order[pos - 1]],
                "position": [pos],
            }
    # connection lines: NET ones name the socket transport and are logged by both sides
    p2p = tables["topology"].filter(pl.col("kind") == "p2p")
    net = p2p.filter(pl.col("transport") == "NET/Socket")
    assert net.height == sum(1 for ln in text if "via NET/Socket/" in ln)
    recv = net.filter(pl.col("direction") == "recv").row(0, named=True)
    assert recv["transport_detail"].startswith("NET/Socket/")
    assert set(p2p["transport"].unique().to_list()) == {"P2P/IPC", "NET/Socket"}
    trees = tables["topology"].filter(pl.col("kind") == "tree")
    # rank 0: 'Trees [0] 4/-1/-1->0->3|3->0->4/-1/-1 ...': up 3, down 4 on channel 0
    r0 = trees.filter((pl.col("rank") == 0) & (pl.col("channel") == 0))
    assert sorted(r0.select("direction", "peer_rank").iter_rows()) == [("down", 4), ("up", 3)]


# --------------------------------------------------------------------------------------------
# AWS p5, NCCL 2.22.3, 16 ranks on 2 nodes, mpirun --tag-output
# --------------------------------------------------------------------------------------------


def test_p5_world_and_ring_order(shared_samples: Path) -> None:
    path = sample(shared_samples, P5)
    text = lines_of(path)
    tables, _, warnings = parse(path)
    comms = tables["communicators"]
    # the MPI rank in '[1,N]<stdout>:' of each Init line must be the global rank found
    tag_rank = {}
    for ln in text:
        m = re.match(
            r"\[1,(\d+)\]<stdout>:\S+ \[\d+\] NCCL INFO ncclCommInitRank comm (0x[0-9a-f]+) ", ln
        )
        if m:
            tag_rank[m[2]] = int(m[1])
    assert len(tag_rank) == 16
    assert dict(zip(comms["comm_id"], comms["global_rank"], strict=True)) == tag_rank
    assert set(comms["host"].to_list()) == {"test-nccl-worker-0", "test-nccl-worker-1"}
    assert set(comms["nccl_version"].to_list()) == {"2.22.3"}
    assert not any("nccl_version" in w for w in warnings)
    assert comms["comm_hash"].n_unique() == 1
    topo = tables["topology"]
    assert topo["comm_id"].null_count() == 0
    order_lines = [ln for ln in text if re.search(r"NCCL INFO Channel \d+/16 :", ln)]
    ro = topo.filter(pl.col("kind") == "ring_order")
    assert ro.filter(pl.col("direction") == "next").height == 16 * len(order_lines)
    assert ro.filter(pl.col("direction") == "prev").height == 16 * len(order_lines)
    pairs = ro.group_by("rank", "channel").len()
    assert pairs.height == 16 * len(order_lines)
    assert set(pairs["len"].to_list()) == {3}  # next + prev + position
    assert "NET/AWS Libfabric" in topo["transport"].to_list()
    assert topo.filter(pl.col("kind") == "nvls").height > 0  # 'NVLS Head h: r r' lines


# --------------------------------------------------------------------------------------------
# nccl-tests 2.27.7: one process driving 2 GPUs
# --------------------------------------------------------------------------------------------


def test_nccltests_one_process_two_comms(shared_samples: Path) -> None:
    path = sample(shared_samples, NCCLTESTS)
    text = lines_of(path)
    coll_lines = [ln for ln in text if "opCount" in ln]
    assert len(coll_lines) == 990
    tables, _, warnings = parse(path)
    ops = tables["comm_ops"]
    assert ops.height == 990
    # comm pointer -> rank, from the Init lines (two comms in one pid)
    comm_rank = {
        m[1]: int(m[2])
        for ln in text
        if (m := re.search(r"ncclCommInitRankConfig comm (0x[0-9a-f]+) rank (\d+) ", ln))
    }
    assert len(comm_rank) == 2
    got = ops.select("comm_id", "rank", "group_rank").unique().sort("rank")
    assert [tuple(r) for r in got.iter_rows()] == sorted((c, r, r) for c, r in comm_rank.items())
    # msg_bytes = count x 4 (every line logs datatype 7 = float32)
    assert all(" datatype 7 " in ln for ln in coll_lines)
    counts = [int(re.search(r" count (\d+) ", ln)[1]) for ln in coll_lines]
    assert ops["count"].to_list() == counts
    assert ops["msg_bytes"].to_list() == [c * 4 for c in counts]
    assert set(ops["dtype"].to_list()) == {"float32"}
    assert set(ops["seq"].to_list()) == {0}
    assert set(ops["host"].to_list()) == {"mew0"}
    assert set(ops["tid"].to_list()) == {64904}
    assert ops["ts_ns"].null_count() == 990
    # result rows glued in front of the NCCL prefix still parse
    glued = [i + 1 for i, ln in enumerate(text) if "opCount" in ln and not ln.startswith("mew0:")]
    assert len(glued) > 0
    assert set(glued) <= set(ops["source_line"].to_list())
    # TUNING (rank 0 of each comm only): one per rank-0 call, all RING/SIMPLE
    n_tuning = sum(1 for ln in text if "Bytes -> Algo" in ln)
    tuned = ops.filter(pl.col("algorithm").is_not_null())
    assert tuned.height == n_tuning == 495
    assert set(tuned["group_rank"].to_list()) == {0}
    assert set(zip(tuned["algorithm"], tuned["protocol"], strict=True)) == {("RING", "SIMPLE")}
    assert not any("TUNING" in w for w in warnings)
    # lazily printed connection lines (other tids) go to the comm of the logging side
    p2p = tables["topology"].filter(pl.col("kind") == "p2p")
    by_rank = {r: c for c, r in comm_rank.items()}
    assert all(by_rank[r] == c for r, c in p2p.select("rank", "comm_id").iter_rows())


# --------------------------------------------------------------------------------------------
# Megatron-LM excerpts, NCCL 2.19
# --------------------------------------------------------------------------------------------


def test_megatron_tail_communicators_and_global_rank(shared_samples: Path) -> None:
    path = sample(shared_samples, MEGATRON_TAIL)
    text = lines_of(path)
    coll = [ln for ln in text if "opCount" in ln]
    assert len(coll) == 112
    tables, _, _ = parse(path)
    ops = tables["comm_ops"]
    assert ops.height == 112
    coll_comms = {re.search(r"comm (0x[0-9a-f]+) \[nranks=(\d+)\]", ln).groups() for ln in coll}
    got = set(ops.select("comm_id", pl.col("group_size").cast(pl.Utf8)).unique().iter_rows())
    assert got == coll_comms
    assert len(got) == 3  # the 4th comm of the file only appears in an Abort line
    aborts = {
        (m[1], int(m[2]), int(m[3]))
        for ln in text
        if (m := re.search(r"comm (0x[0-9a-f]+) rank (\d+) nranks (\d+) .* - Abort COMPLETE$", ln))
    }
    comms = tables["communicators"]
    assert len(aborts) == 4
    assert set(comms.select("comm_id", "rank", "nranks").iter_rows()) == aborts
    assert set(comms["nranks"].to_list()) == {2, 4}
    # the world comm (nranks 4) says rank 0: every row of the process is global rank 0
    assert ops["rank"].unique().to_list() == [0]
    assert comms["global_rank"].unique().to_list() == [0]
    assert set(ops["group_size"].to_list()) == {2, 4}
    # seq = opCount read as hex, dtype sizes from the enum, redop only where reducing
    opcounts = [int(re.search(r"opCount ([0-9a-f]+) ", ln)[1], 16) for ln in coll]
    assert ops["seq"].to_list() == opcounts
    sizes = {0: 1, 1: 1, 2: 4, 6: 2, 7: 4, 9: 2}  # NCCL datatype enum, nccl.h
    exp_bytes = [
        int(re.search(r" count (\d+) ", ln)[1]) * sizes[int(re.search(r" datatype (\d+) ", ln)[1])]
        for ln in coll
    ]
    assert ops["msg_bytes"].to_list() == exp_bytes
    n_max = sum(
        1 for ln in coll if ln.split("NCCL INFO ")[1].startswith("AllReduce") and " op 2 " in ln
    )
    assert ops.filter(pl.col("redop") == "max").height == n_max > 0
    assert (
        ops.filter(pl.col("op") != "all_reduce")["redop"].null_count()
        == ops.filter(pl.col("op") != "all_reduce").height
    )


def test_megatron_head_spliced_lines_rejected(shared_samples: Path) -> None:
    path = sample(shared_samples, MEGATRON_HEAD)
    tables, counts, _ = parse(path)
    rej = tables["rejects"].sort("line_no")
    assert rej["line_no"].to_list() == [21, 80]
    assert all("spliced" in r for r in rej["reason"].to_list())
    assert "communicators" not in tables or tables["communicators"].height == 0
    ring_lines = sum(1 for ln in lines_of(path) if re.search(r"Ring \d+ : \d+ -> \d+ -> \d+$", ln))
    ring = tables["topology"].filter(pl.col("kind") == "ring")
    assert ring.height == 2 * ring_lines
    assert ring["comm_id"].null_count() == ring.height  # no Init line in the excerpt
    assert counts.rejected == 2


# --------------------------------------------------------------------------------------------
# RADDet: two processes clobbering one NCCL_DEBUG_FILE
# --------------------------------------------------------------------------------------------


def test_raddet_clobbered_file(shared_samples: Path) -> None:
    path = sample(shared_samples, RADDET)
    tables, _, _ = parse(path)
    comms = tables["communicators"].sort("rank")
    assert comms.select("rank", "global_rank", "pid").rows() == [(0, 0, 803563), (1, 1, 803564)]
    # the Init COMPLETE of pid 803564 sits behind a cut '...ljm:80356' fragment: host repaired
    assert set(comms["host"].to_list()) == {"ljm"}
    topo = tables["topology"]
    assert set(topo["host"].to_list()) == {"ljm"}
    # the Trees line after two spliced fragments (line 8) is still parsed and attributed
    trees = topo.filter(pl.col("kind") == "tree")
    assert trees["source_line"].unique().to_list() == [8]
    assert trees["comm_id"].unique().to_list() == ["0x9497920"]
    shm = topo.filter(pl.col("kind") == "p2p")
    assert set(shm["transport"].to_list()) == {"SHM"}


# --------------------------------------------------------------------------------------------
# GF-Bench, NCCL 2.20.5, one NCCL_DEBUG_FILE per rank
# --------------------------------------------------------------------------------------------


def test_gfbench_per_rank_files(shared_samples: Path) -> None:
    p0, p1 = sample(shared_samples, GF0), sample(shared_samples, GF1)
    t0, _, _ = parse(p0)
    t1, _, _ = parse(p1)
    assert t0["comm_ops"]["rank"].unique().to_list() == [0]
    assert t1["comm_ops"]["rank"].unique().to_list() == [1]
    assert t0["communicators"]["comm_hash"].item() == t1["communicators"]["comm_hash"].item()
    opcounts = [
        int(m[1], 16) for ln in lines_of(p0) if (m := re.search(r"opCount ([0-9a-f]+) ", ln))
    ]
    assert t0["comm_ops"]["seq"].to_list() == opcounts
    assert opcounts[-1] == 10  # 'opCount a'
    # 2.20 TUNING lines '40 Bytes -> Algo 1 proto 0 time ...' (rank 0 file only)
    n_tune = sum(1 for ln in lines_of(p0) if "Bytes -> Algo 1 proto 0" in ln)
    ops0 = t0["comm_ops"]
    assert (
        ops0.filter((pl.col("algorithm") == "RING") & (pl.col("protocol") == "LL")).height == n_tune
    )
    assert t1["comm_ops"]["algorithm"].null_count() == t1["comm_ops"].height
    assert t0["communicators"]["nccl_version"].item() == "2.20.5"
    assert t1["communicators"]["nccl_version"].item() is None


def test_perlmutter_failed_run(shared_samples: Path) -> None:
    path = sample(shared_samples, PERLMUTTER)
    tables, counts, _ = parse(path)
    comms = tables["communicators"]
    starts = sum(1 for ln in lines_of(path) if ln.endswith("Init START"))
    assert comms.height == starts == 8
    assert sorted(comms["global_rank"].to_list()) == list(range(8))
    libfabric = sum(1 for ln in lines_of(path) if ln.startswith("libfabric:"))
    assert counts.ignored >= libfabric > 1000


# --------------------------------------------------------------------------------------------
# synthetic edge cases
# --------------------------------------------------------------------------------------------

INIT = (
    "{h}:{p}:{t} [{d}] NCCL INFO comm {c} rank {r} nranks {n} cudaDev {d} nvmlDev {d} "
    "busId {b} commId {i} - Init COMPLETE"
)
COLL = (
    "{h}:{p}:{p} [{d}] NCCL INFO {op}: opCount {oc} sendbuff {sb} recvbuff 0x7f0000001000 "
    "count {cnt} datatype {dt} op {ro} root {root} comm {c} [nranks={n}] stream 0x55aa"
)
DESTROY = (
    "{h}:{p}:{p} [0] NCCL INFO comm {c} rank {r} nranks {n} cudaDev 0 busId 1b000 - {what} COMPLETE"
)


def coll(**kw: object) -> str:
    base = {
        "h": "nodeA",
        "p": 100,
        "d": 0,
        "op": "AllReduce",
        "oc": "0",
        "sb": "0x7f0000000000",
        "cnt": 1024,
        "dt": 7,
        "ro": 0,
        "root": 0,
        "c": "0xc0",
        "n": 4,
    }
    base.update(kw)
    return COLL.format(**base)


def init(**kw: object) -> str:
    base = {
        "h": "nodeA",
        "p": 100,
        "t": 101,
        "d": 0,
        "c": "0xc0",
        "r": 0,
        "n": 4,
        "b": "1b000",
        "i": "0xaaaa",
    }
    base.update(kw)
    return INIT.format(**base)


def test_synthetic_timestamp_prefix_and_hex_opcount(tmp_path: Path) -> None:
    text = (
        "[2025-03-04 05:06:07.123456] "
        + coll(oc="1a")
        + "\n"
        + "[2025-03-04 05:06:08] "
        + coll(oc="ff")
        + "\n"
    )
    tables, counts, _ = parse(write(tmp_path, text))
    ops = tables["comm_ops"]
    t0 = int(datetime(2025, 3, 4, 5, 6, 7, 123456, tzinfo=UTC).timestamp()) * 10**9 + 123456000
    assert ops["ts_ns"].to_list() == [t0, t0 - 123456000 + 10**9]
    assert ops["seq"].to_list() == [0x1A, 0xFF]
    assert counts.parsed == 2


def test_synthetic_launcher_prefixes(tmp_path: Path) -> None:
    lines = [
        "[1,3]<stdout>:" + coll(p=11),
        " 3: " + coll(p=12),
        "(RayTrainWorker pid=13, ip=10.0.0.1) " + coll(p=13),
        "[default0]:" + coll(p=14),
        "[155] " + coll(p=15),
        "plain application output",
    ]
    tables, counts, _ = parse(write(tmp_path, "\n".join(lines) + "\n"))
    ops = tables["comm_ops"]
    assert ops["pid"].to_list() == [11, 12, 13, 14, 15]
    assert set(ops["host"].to_list()) == {"nodeA"}
    assert (counts.parsed, counts.ignored, counts.rejected) == (5, 1, 0)


def test_synthetic_truncated_last_line_rejected(tmp_path: Path) -> None:
    full = coll()
    text = full + "\n" + full[:-9]  # killed mid-line: no newline, stream cut
    tables, counts, _ = parse(write(tmp_path, text))
    assert tables["comm_ops"].height == 1
    rej = tables["rejects"]
    assert rej["line_no"].to_list() == [2]
    assert "no newline" in rej["reason"].item()
    assert (counts.total, counts.parsed, counts.rejected) == (2, 1, 1)


def test_synthetic_truncated_final_init_line_is_not_a_communicator(tmp_path: Path) -> None:
    text = init(c="0xc0", r=0, n=2) + "\n" + init(c="0xc1", r=1, n=2)  # no final newline
    tables, counts, _ = parse(write(tmp_path, text))
    assert tables["communicators"]["comm_id"].to_list() == ["0xc0"]
    assert tables["rejects"]["line_no"].to_list() == [2]
    assert (counts.parsed, counts.rejected) == (1, 1)


def test_synthetic_truncated_coll_line_rejected(tmp_path: Path) -> None:
    text = coll()[:80] + "\n" + coll() + "\n"
    tables, counts, _ = parse(write(tmp_path, text))
    assert tables["rejects"]["line_no"].to_list() == [1]
    assert counts.parsed == 1


def test_synthetic_bfloat16_and_send_nil_sendbuff(tmp_path: Path) -> None:
    # 2.12+: Send logs 'sendbuff (nil)' and passes its buffer in the recvbuff slot
    lines = [
        init(c="0xc0", r=2, n=4, i="0xfeed"),
        init(h="nodeB", p=200, t=201, c="0xd0", r=1, n=4, i="0xfeed"),
        coll(dt=9, cnt=100),
        coll(op="Send", sb="(nil)", cnt=256, root=1),
        coll(op="Recv", sb="(nil)", cnt=256, root=3),
    ]
    tables, _, _ = parse(write(tmp_path, "\n".join(lines) + "\n"))
    ops = tables["comm_ops"]
    bf = ops.row(0, named=True)
    assert (bf["dtype"], bf["msg_bytes"], bf["redop"]) == ("bfloat16", 200, "sum")
    send = ops.row(1, named=True)
    assert (send["op"], send["raw_op"], send["msg_bytes"], send["redop"]) == (
        "send",
        "Send",
        1024,
        None,
    )
    # the comm is a world comm (nranks 4 = largest): comm ranks are global ranks
    assert send["peer_rank"] == 1
    assert send["rank"] == 2
    assert ops.row(2, named=True)["peer_rank"] == 3
    assert enums.DTYPES[9] == ("bfloat16", 2)


def test_synthetic_subcommunicator_rank_is_not_global(tmp_path: Path) -> None:
    lines = [
        init(c="0xc0", r=3, n=4, i="0x1"),
        init(c="0xc1", r=1, n=2, i="0x2"),  # sub-comm: rank 1 of 2
        init(h="nodeB", p=200, t=201, c="0xe0", r=2, n=4, i="0x1"),
        init(h="nodeB", p=200, t=201, c="0xe1", r=0, n=2, i="0x2"),  # the other member
        coll(c="0xc1", n=2),
        coll(c="0xc1", n=2, op="Send", sb="(nil)", root=0),
        coll(c="0xc9", n=2),  # a comm the file never initialised
    ]
    tables, _, _ = parse(write(tmp_path, "\n".join(lines) + "\n"))
    ops = tables["comm_ops"]
    assert ops["rank"].to_list() == [3, 3, 3]
    assert ops["group_rank"].to_list() == [1, 1, None]
    assert ops["group_size"].to_list() == [2, 2, 2]
    # Send peer 0 of the sub-comm stays comm rank 0 (the SQL maps it through the group's members:
    # the process whose world rank is 2); peers are never half translated
    assert ops.row(1, named=True)["peer_rank"] == 0
    comms = tables["communicators"].sort("host", "comm_id")
    assert comms.select("comm_id", "rank", "global_rank").rows() == [
        ("0xc0", 3, 3),
        ("0xc1", 1, 3),
        ("0xe0", 2, 2),
        ("0xe1", 0, 2),
    ]


def test_synthetic_peer_kept_as_comm_rank_when_membership_unknown(tmp_path: Path) -> None:
    lines = [
        init(c="0xc0", r=3, n=4, i="0x1"),
        init(c="0xc1", r=1, n=2, i="0x2"),
        coll(c="0xc1", n=2, op="Recv", root=0),
    ]
    tables, _, _ = parse(write(tmp_path, "\n".join(lines) + "\n"))
    assert tables["comm_ops"].row(0, named=True)["peer_rank"] == 0


def test_synthetic_no_world_comm_means_no_global_rank(tmp_path: Path) -> None:
    # nodeA only shows a 2-rank comm while the file's world has 4 ranks: do not guess
    lines = [
        init(h="nodeB", p=200, t=201, c="0xe0", r=2, n=4),
        init(c="0xc1", r=1, n=2),
        coll(c="0xc1", n=2),
    ]
    tables, _, _ = parse(write(tmp_path, "\n".join(lines) + "\n"))
    assert tables["comm_ops"]["rank"].to_list() == [None]
    tables, _, _ = parse(write(tmp_path, "\n".join(lines) + "\n"), rank=7)
    assert tables["comm_ops"]["rank"].to_list() == [7]


def test_synthetic_comm_pointer_reused_after_destroy(tmp_path: Path) -> None:
    lines = [
        init(c="0xc0", r=0, n=2),
        coll(c="0xc0", n=2),
        DESTROY.format(h="nodeA", p=100, c="0xc0", r=0, n=2, what="Destroy"),
        init(c="0xc0", r=1, n=4),
        coll(c="0xc0", n=4),
    ]
    tables, counts, _ = parse(write(tmp_path, "\n".join(lines) + "\n"))
    ops = tables["comm_ops"]
    assert ops.select("group_rank", "group_size").rows() == [(0, 2), (1, 4)]
    assert ops["rank"].to_list() == [1, 1]  # global rank: rank in the 4-rank (world) comm
    assert tables["communicators"].height == 2
    assert counts.parsed == 5


def test_synthetic_single_process_two_gpus(tmp_path: Path) -> None:
    lines = [
        init(c="0xa0", r=0, n=2, d=0, b="17000", t=1),
        init(c="0xa1", r=1, n=2, d=1, b="65000", t=2),
        coll(c="0xa0", n=2),
        coll(c="0xa1", n=2),
    ]
    tables, _, _ = parse(write(tmp_path, "\n".join(lines) + "\n"))
    assert tables["comm_ops"]["rank"].to_list() == [0, 1]
    assert tables["communicators"].sort("comm_id")["global_rank"].to_list() == [0, 1]


def test_synthetic_spliced_and_prefixless_records_rejected(tmp_path: Path) -> None:
    cut = coll()[:70]
    lines = [
        cut + "nodeB:200:200 [1] NCCL INFO misc/utils.cc:235 memory stack hunk malloc(65536)",
        coll().split("NCCL INFO ")[1],  # a COLL line that lost its prefix
        cut + coll(h="nodeB", p=200),  # second prefix carries a whole COLL line: parsed
        "nodeA:100:100 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
    ]
    tables, counts, _ = parse(write(tmp_path, "\n".join(lines) + "\n"))
    rej = tables["rejects"].sort("line_no")
    assert rej["line_no"].to_list() == [1, 2]
    assert "spliced" in rej["reason"][0]
    assert "prefix" in rej["reason"][1]
    assert tables["comm_ops"]["pid"].to_list() == [200]
    assert (counts.parsed, counts.ignored, counts.rejected) == (1, 1, 2)


def test_synthetic_topology_shapes(tmp_path: Path) -> None:
    pre = "nodeA:100:101 [0] NCCL INFO "
    lines = [
        init(c="0xc0", r=0, n=3, i="0x1"),
        pre + "Channel 00/02 :    0   1   2",
        pre + "Ring 00 : 2 -> 0 -> 1",
        pre + "Tree 0 : -1 -> 0 -> 1/2/-1",
        pre + "Trees [0] 1/2/-1->0->-1 [1] -1/-1/-1->0->1",
        pre + "NVLS Trees : 1/-1/-1->0->-1 2/-1/-1->0->-1",
        pre + "Channel 01/1 : 0[0] -> 1[1] [send] via NET/IB/0(4)/GDRDMA(PCI)/Shared",
        pre + "CollNet 00/0 : 0 [receive] via COLLNET/SHARP/1/GDRDMA",
    ]
    tables, counts, _ = parse(write(tmp_path, "\n".join(lines) + "\n"))
    topo = tables["topology"]
    assert topo["comm_id"].unique().to_list() == ["0xc0"]

    def rows(kind: str) -> list[tuple]:
        return sorted(
            topo.filter(pl.col("kind") == kind)
            .select("rank", "channel", "direction", "peer_rank")
            .rows()
        )

    assert rows("ring") == [(0, 0, "next", 1), (0, 0, "prev", 2)]
    ro = rows("ring_order")
    assert (2, 0, "next", 0) in ro and (0, 0, "prev", 2) in ro and (1, 0, "position", 1) in ro
    # 'Tree 0' and 'Trees [0]' say the same: rows de-duplicated
    assert rows("tree") == [(0, 0, "down", 1), (0, 0, "down", 2), (0, 1, "up", 1)]
    assert rows("nvls") == [(0, 0, "down", 1), (0, 1, "down", 2)]
    net = topo.filter(pl.col("kind") == "p2p").row(0, named=True)
    assert (net["transport"], net["transport_detail"]) == (
        "NET/IB",
        "NET/IB/0(4)/GDRDMA(PCI)/Shared",
    )
    cn = topo.filter(pl.col("kind") == "collnet").row(0, named=True)
    assert (cn["transport"], cn["direction"], cn["peer_rank"]) == ("COLLNET/SHARP", "recv", None)
    assert counts.parsed == len(lines)


def test_synthetic_not_nccl_raises(tmp_path: Path) -> None:
    with pytest.raises(ParseError):
        parse(write(tmp_path, "hello\nworld\n"))
    tables, counts, _ = parse(write(tmp_path, "", "empty.log"))
    assert counts.total == 0
    assert "comm_ops" not in tables
    assert tables["communicators"].height == 0


@settings(max_examples=25, deadline=None)
@given(
    op=st.sampled_from([*enums.OPS, "PutSignal"]),
    opcount=st.integers(0, 2**40),
    count=st.integers(0, 2**34),
    dtype=st.integers(0, 13),
    redop=st.integers(0, 6),
)
def test_roundtrip_coll_fields(
    tmp_path_factory: pytest.TempPathFactory,
    op: str,
    opcount: int,
    count: int,
    dtype: int,
    redop: int,
) -> None:
    path = tmp_path_factory.mktemp("rt") / "synthetic_roundtrip.log"
    path.write_text(coll(op=op, oc=f"{opcount:x}", cnt=count, dt=dtype, ro=redop) + "\n")
    tables, _, _ = parse(path)
    row = tables["comm_ops"].row(0, named=True)
    assert row["seq"] == opcount
    assert row["count"] == count
    assert row["op"] == enums.OPS.get(op, "other")
    known = enums.DTYPES.get(dtype)
    assert row["dtype"] == (known[0] if known else f"dtype_{dtype}")
    assert row["msg_bytes"] == (count * known[1] if known else None)
    reducing = op in enums.REDUCING_OPS
    assert row["redop"] == (enums.redop_name(redop) if reducing else None)


# --------------------------------------------------------------------------------------------
# ncclCommSplit children (NCCL 2.21+: no commId; parent pointer, color and key instead)
# --------------------------------------------------------------------------------------------

SPLIT_T = re.compile(
    r"ncclCommSplit comm (0x[0-9a-f]+) rank (\d+) nranks (\d+) .* parent (0x[0-9a-f]+)"
    r"(?: (?:splitCount|childCount) \d+)? color (-?\d+) key (-?\d+) ?- Init (START|COMPLETE)$"
)
COMMID_T = re.compile(r" comm (0x[0-9a-f]+) .* commId (0x[0-9a-f]+) - Init COMPLETE$")


@pytest.mark.parametrize("version", ["2.21.5", "2.24.3"])
def test_generated_split_children_color_key_parent(tmp_path: Path, version: str) -> None:
    """synthetic (commscope generate): every split child gets color, key and its parent's commId."""
    from commscope.model.config import config_from_dict
    from commscope.synthetic import GenerateOptions, generate
    from commscope.synthetic.presets import tiny_config

    opts = GenerateOptions(iterations=1, seed=3, formats=("nccl",), nccl_version=version)
    generate(config_from_dict(tiny_config(pp=2, tp=2, dp=2, m=2)), opts, tmp_path / "gen")
    files = sorted((tmp_path / "gen").rglob("*.nccl.log"))
    assert len(files) == 8
    for path in files:
        # Independent: one child per (comm pointer) from the COMPLETE split lines; the parent's
        # commId from the parent's own Init COMPLETE line in the same file.
        hashes = {m.group(1): m.group(2) for m in map(COMMID_T.search, lines_of(path)) if m}
        want = {}
        for line in lines_of(path):
            m = SPLIT_T.search(line)
            if m and m.group(7) == "COMPLETE":
                comm, rank, _, parent, color, key, _ = m.groups()
                want[comm] = (int(rank), parent, hashes[parent], int(color), int(key))
        assert want, path
        tables, counts, _ = parse(path)
        conform_all(tables, path)
        assert counts.total == line_count(path)
        split = tables["communicators"].filter(pl.col("split_color").is_not_null())
        got = {
            r["comm_id"]: (
                r["rank"],
                r["parent_comm_id"],
                r["parent_comm_hash"],
                r["split_color"],
                r["split_key"],
            )
            for r in split.iter_rows(named=True)
        }
        assert got == want
        assert split["comm_hash"].null_count() == split.height
        assert (split["parent_nranks"] == 8).all()
        assert split["global_rank"].null_count() == 0


def test_synthetic_split_variants_childcount_and_nested(tmp_path: Path) -> None:
    """synthetic: 2.29 childCount + ``[Rank n]`` prefix, START-only child, nested split."""
    pre = "nodeA:100:101 [0] NCCL INFO "
    text = "\n".join(
        [
            pre + "[Rank 2] ncclCommInitRankConfig comm 0xa rank 2 nranks 8 cudaDev 0 nvmlDev 0 "
            "busId 1b000 commId 0xfeed - Init START",
            pre + "ncclCommInitRankConfig comm 0xa rank 2 nranks 8 cudaDev 0 nvmlDev 0 "
            "busId 1b000 commId 0xfeed - Init COMPLETE",
            pre + "ncclCommSplit comm 0xb rank 1 nranks 4 cudaDev 0 nvmlDev 0 busId 1b000 "
            "parent 0xa childCount 1 color 7 key 5- Init START",
            pre + "ncclCommSplit comm 0xb rank 1 nranks 4 cudaDev 0 nvmlDev 0 busId 1b000 "
            "parent 0xa childCount 1 color 7 key 5 - Init COMPLETE",
            pre + "ncclCommSplit comm 0xc rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1b000 "
            "parent 0xb childCount 1 color 3 key -1- Init START",
            "",
        ]
    )
    path = write(tmp_path, text)
    tables, counts, _ = parse(path)
    conform_all(tables, path)
    assert counts.total == 5
    comms = {r["comm_id"]: r for r in tables["communicators"].iter_rows(named=True)}
    assert set(comms) == {"0xa", "0xb", "0xc"}
    b, c = comms["0xb"], comms["0xc"]
    assert (b["split_color"], b["split_key"], b["parent_comm_hash"], b["parent_nranks"]) == (
        7,
        5,
        "0xfeed",
        8,
    )
    assert (c["split_color"], c["split_key"], c["parent_nranks"]) == (3, -1, 4)
    assert c["parent_comm_hash"] == "split:0xfeed/8:7"  # the parent is itself a split child
    assert b["global_rank"] == c["global_rank"] == 2


def test_timing_and_group_source_on_every_sample(shared_samples: Path) -> None:
    """Issue 16: NCCL logs no duration (timing_source 'none' everywhere); a COLL line that
    names its communicator size ([nranks=N]) gives group_source 'logged', with that N."""
    nranks = re.compile(r"\[nranks=(\d+)\]")
    for path in sample_files(shared_samples):
        logged = sorted(
            int(m.group(1))
            for ln in lines_of(path)
            if (t := tail(ln)) is not None and COLL_T.match(t) and (m := nranks.search(t))
        )
        tables, _, _ = parse(path)
        ops = tables["comm_ops"]
        if not logged:
            assert ops.height == 0, path.name
            continue
        assert ops["timing_source"].to_list() == ["none"] * ops.height, path.name
        assert "dur_ns" not in ops.columns or ops["dur_ns"].null_count() == ops.height
        with_size = ops.filter(pl.col("group_source") == "logged")
        assert sorted(with_size["group_size"].to_list()) == logged, path.name
        assert ops.filter(pl.col("group_source").is_null())["group_size"].null_count() == (
            ops.height - len(logged)
        )


def test_gpu_recording_torch_splits_with_hash_colors(sample_traces: Path) -> None:
    """real (sample_traces/gpu_nccl_tp2_dp2_1gpu, NCCL 2.28.9 via torch 2.11): PyTorch passes a
    hash of the group as ncclCommSplit's color (10 digits, ``color 2130503744``); the split lines
    are communicators, not "out of range" rejects, and every COLL line is a call."""
    files = sorted((sample_traces / "gpu_nccl_tp2_dp2_1gpu" / "nccl").glob("nccl.*.log"))
    assert len(files) == 4
    colors: dict[int, set[int]] = {}
    for path in files:
        # Independent: the split children (COMPLETE lines) and COLL lines read off the text.
        want = {}
        for line in lines_of(path):
            m = SPLIT_T.search(line)
            if m and m.group(7) == "COMPLETE":
                want[m.group(1)] = (int(m.group(2)), int(m.group(3)), int(m.group(5)))
        coll = record_lines(path)["coll"]
        assert len(want) == 2 and max(c for _, _, c in want.values()) > 999_999_999
        tables, counts, _ = parse(path)
        conform_all(tables, path)
        assert counts.rejected == 0
        assert counts.total == line_count(path)
        split = tables["communicators"].filter(pl.col("split_color").is_not_null())
        got = {
            r["comm_id"]: (r["rank"], r["nranks"], r["split_color"])
            for r in split.iter_rows(named=True)
        }
        assert got == want
        assert tables["comm_ops"].height == coll
        for _, _, c in want.values():
            colors.setdefault(c, set()).add(path.name)
    # two TP and two DP children: each color names one child of two members (processes)
    assert len(colors) == 4 and all(len(v) == 2 for v in colors.values())


def test_native_alltoall_msg_bytes_is_the_whole_send_buffer(tmp_path: Path) -> None:
    """NCCL 2.28's ncclAlltoAll logs the per-peer count (sample_traces/gpu_nccl_pp2ep2_1gpu:
    torch's all_to_all_single of 2 int64 counts over 2 ranks logs ``count 1 datatype 4``); the
    canonical all_to_all size is the whole per-rank send buffer: count x size x nranks."""
    lines = [
        init(c="0xc0", r=0, n=4),
        coll(op="AlltoAll", cnt=1, dt=4, n=2, c="0xc1"),
        coll(op="AlltoAll", cnt=1000, dt=9, n=4),
        coll(op="Send", sb="(nil)", cnt=1000, dt=9, n=4, root=2),
    ]
    tables, _, _ = parse(write(tmp_path, "\n".join(lines) + "\n"))
    ops = tables["comm_ops"]
    assert ops["op"].to_list() == ["all_to_all", "all_to_all", "send"]
    assert ops["msg_bytes"].to_list() == [1 * 8 * 2, 1000 * 2 * 4, 1000 * 2]
