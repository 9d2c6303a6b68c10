"""Tests of the nccl_inspector parser: the real sample (issue 19 acceptance), one given/expect
case per record shape the plugin's writer code produces, quirks and bad values.

The oracle for the real sample reads the JSON lines itself (``json.loads`` per line) and
computes what each row must hold; hand-written lines follow the writer functions of NVIDIA/nccl
(``inspectorCommInfoHeader``, ``inspectorCommInfoMetaHeader``, ``inspectorCompletedColl``,
``inspectorCompletedP2p``: key order, ``%lf`` floats with six decimals) and are labelled
synthetic.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from commscope.parsers._io import Source
from commscope.parsers.nccl_inspector import NcclInspectorParser
from commscope.parsers.registry import REGISTRY, LineCounts, ParseError, load_all, sniff
from commscope.parsers.schema import conform
from commscope.pipeline.ingest import _fill_provenance

PARSER = NcclInspectorParser()
SAMPLE = "nccl_inspector/sugarlxn_inspector_v4.0_4rank_allreduce_tuner"


class Parsed:
    """One parse: frames per table (each conformed as ingest would), counts, warnings."""

    def __init__(self, path: Path, rank: int | None = None) -> None:
        self.counts = LineCounts()
        self.warnings: list[str] = []
        frames: dict[str, list[pl.DataFrame]] = {}
        for chunk in PARSER.parse(Source(path), run_id="t", rank=rank):
            self.counts += chunk.counts
            self.warnings += chunk.warnings
            for table, df in chunk.tables.items():
                conform(_fill_provenance(df, table, "t", str(path), PARSER.name), table)
                frames.setdefault(table, []).append(df)
        self.tables = {k: pl.concat(v) for k, v in frames.items()}
        assert self.counts.balanced, self.counts
        assert self.height("rejects") == self.counts.rejected

    def get(self, table: str) -> pl.DataFrame:
        return self.tables.get(table, pl.DataFrame())

    def height(self, table: str) -> int:
        return self.get(table).height

    def reasons(self) -> dict[int, str]:
        rej = self.get("rejects")
        return dict(zip(rej["line_no"], rej["reason"], strict=True)) if rej.height else {}


# --------------------------------------------------------------------------------------------
# Writers of synthetic lines, key for key as the plugin writes them


def header(cid: str, rank: int, n: int, nnodes: int = 1, comm_name: str | None = None) -> str:
    name = f'"comm_name":"{comm_name}",' if comm_name is not None else ""
    return f'{{"id":"{cid}",{name}"rank":{rank},"n_ranks":{n},"nnodes":{nnodes}}}'


def metadata(host: str = "node1", pid: int = 4242, ts: int = 1766299241932385) -> str:
    return (
        '{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":'
        f'"nccl_profiler_interface","dump_timestamp_us":{ts},"hostname":"{host}","pid":{pid}}}'
    )


def coll(
    op: str,
    sn: int,
    size: int,
    us: int,
    algbw: float,
    busbw: float,
    timing: str | None = "kernel_gpu",
    verbose: str = "",
) -> str:
    t = f'"coll_timing_source":"{timing}",' if timing is not None else ""
    return (
        f'{{"coll":"{op}","coll_sn":{sn},"coll_msg_size_bytes":{size},"coll_exec_time_us":{us},'
        f'{t}"coll_algobw_gbs":{algbw:.6f},"coll_busbw_gbs":{busbw:.6f}{verbose}}}'
    )


def p2p(op: str, sn: int, peer: int, size: int, us: int, bw: float) -> str:
    return (
        f'{{"p2p":"{op}","p2p_sn":{sn},"p2p_peer":{peer},"p2p_msg_size_bytes":{size},'
        f'"p2p_exec_time_us":{us},"p2p_timing_source":"kernel_gpu","p2p_algobw_gbs":{bw:.6f},'
        f'"p2p_busbw_gbs":{bw:.6f}}}'
    )


def record(hdr: str, perf: str, kind: str = "coll_perf", meta: str | None = None) -> str:
    return f'{{"header":{hdr},"metadata":{meta or metadata()},"{kind}":{perf}}}'


def bw(op: str, size: int, us: int, n: int) -> tuple[float, float]:
    """The plugin's inspectorComputeCollBw (algbw, busbw) in GB/s."""
    t = us / 1e6
    if op == "AllReduce":
        return size / 1e9 / t, size / 1e9 / t * (2 * (n - 1) / n)
    if op in ("AllGather", "ReduceScatter"):
        return size * n / 1e9 / t, size * n / 1e9 / t * ((n - 1) / n)
    return size / 1e9 / t, size / 1e9 / t


def write(tmp_path: Path, lines: list[str], name: str = "node1-pid4242.log") -> Path:
    p = tmp_path / name
    p.write_text("".join(ln + "\n" for ln in lines))
    return p


# --------------------------------------------------------------------------------------------
# The real sample: issue 19's acceptance, against an oracle that reads the JSON itself


def _oracle(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def sample_files(shared_samples: Path) -> list[Path]:
    files = sorted((shared_samples / SAMPLE).glob("*.log"))
    assert len(files) == 4
    return files


def test_registered_and_sniffed(sample_files: list[Path]) -> None:
    assert load_all()["nccl_inspector"] is REGISTRY["nccl_inspector"]
    for f in sample_files:
        found = sniff(Source(f).head(), f)
        assert found is not None and found.name == "nccl_inspector", f


def test_sample_every_call_exact(sample_files: list[Path]) -> None:
    """4 x 448 AllReduce calls; size, exec time, sequence, comm id, ranks and busbw exact."""
    seen_ranks = set()
    for f in sample_files:
        recs = _oracle(f)
        p = Parsed(f)
        ops = p.get("comm_ops").sort("source_line")
        assert p.counts == LineCounts(total=448, parsed=448, ignored=0, rejected=0)
        assert ops.height == len(recs) == 448
        assert p.warnings == []
        for row, rec in zip(ops.iter_rows(named=True), recs, strict=True):
            h, m, c = rec["header"], rec["metadata"], rec["coll_perf"]
            assert c["coll"] == "AllReduce" and row["op"] == "all_reduce"
            assert row["raw_op"] == "AllReduce"
            assert row["msg_bytes"] == c["coll_msg_size_bytes"]
            assert row["dur_ns"] == c["coll_exec_time_us"] * 1000
            assert row["seq"] == c["coll_sn"]
            assert row["busbw_gbps"] / 8 == c["coll_busbw_gbs"]  # x 8 is exact
            assert row["algbw_gbps"] / 8 == c["coll_algobw_gbs"]
            assert row["timing_source"] == "kernel" and c["coll_timing_source"] == "kernel_gpu"
            assert row["comm_id"] == h["id"]
            assert row["rank"] == row["group_rank"] == h["rank"]
            assert row["group_size"] == h["n_ranks"] == 4
            assert (row["host"], row["pid"]) == (m["hostname"], m["pid"])
            # the file's busbw follows from its own size and time with NCCL's AllReduce factor
            t = c["coll_exec_time_us"] / 1e6
            assert c["coll_busbw_gbs"] == pytest.approx(
                c["coll_msg_size_bytes"] / t / 1e9 * 1.5, abs=1e-6
            )
        seen_ranks |= set(ops["rank"].to_list())
        comms = p.get("communicators")
        assert comms.height == 1
        assert comms.row(0, named=True)["comm_hash"] == recs[0]["header"]["id"]
        assert comms.row(0, named=True)["global_rank"] == recs[0]["header"]["rank"]
    assert seen_ranks == {0, 1, 2, 3}


@pytest.mark.slow
def test_sample_ingest_derive_effective_bandwidth(sample_files: list[Path], tmp_path: Path) -> None:
    """Ingest the folder (sniffed), derive: effective_bandwidth's busbw is the file's."""
    from commscope.pipeline.derive import derive_run
    from commscope.pipeline.ingest import ingest_paths
    from commscope.pipeline.store import Store

    store = Store.open(tmp_path / "store")
    results = ingest_paths(store, [sample_files[0].parent], run_id="insp")
    assert [r.format for r in results] == ["nccl_inspector"] * 4
    assert all(r.ok for r in results)
    derive_run(store, "insp")
    eb = pl.read_parquet(store.mart_files("insp")["effective_bandwidth"])
    recs = [r["coll_perf"] for f in sample_files for r in _oracle(f)]
    by_size: dict[int, list[float]] = {}
    for c in recs:
        by_size.setdefault(c["coll_msg_size_bytes"], []).append(c["coll_busbw_gbs"])
    assert eb.height == len(by_size) == 4
    for row in eb.iter_rows(named=True):
        logged = by_size[row["size_bucket_bytes"]]
        assert row["op"] == "all_reduce" and row["group_size"] == 4
        assert row["calls"] == row["timed_calls"] == 448
        assert row["timing_source"] == "kernel"
        med = float(pl.Series(logged).median())  # type: ignore[arg-type]
        assert row["logged_busbw_gbit_s"] == pytest.approx(med * 8, rel=1e-12)
        # recomputed from msg_bytes and dur_ns with the true group size: the file's own busbw
        # (it prints six decimals)
        assert row["busbw_gb_s"] == pytest.approx(med, abs=1e-6)


# --------------------------------------------------------------------------------------------
# One given/expect case per record shape


def test_v4_0_nccl_2_28_coll_record(tmp_path: Path) -> None:
    """synthetic, NCCL 2.28.1-2.29.7 shape: header without comm_name, coll_perf."""
    n = 8
    lines = []
    for op, sn, size, us in [
        ("AllReduce", 0, 1 << 20, 100),
        ("AllGather", 0, 1 << 18, 50),
        ("ReduceScatter", 0, 1 << 18, 40),
        ("Broadcast", 1, 4096, 10),
    ]:
        a, b = bw(op, size, us, n)
        lines.append(record(header("0xabc1234567890", 3, n), coll(op, sn, size, us, a, b)))
    p = Parsed(write(tmp_path, lines))
    ops = p.get("comm_ops").sort("source_line")
    assert ops.select("op", "raw_op", "seq", "msg_bytes", "dur_ns").rows() == [
        ("all_reduce", "AllReduce", 0, 1 << 20, 100_000),
        ("all_gather", "AllGather", 0, 1 << 18, 50_000),
        ("reduce_scatter", "ReduceScatter", 0, 1 << 18, 40_000),
        ("broadcast", "Broadcast", 1, 4096, 10_000),
    ]
    assert set(ops["rank"]) == {3} and set(ops["group_rank"]) == {3}
    assert set(ops["group_size"]) == {n} and set(ops["group_source"]) == {"logged"}
    assert set(ops["comm_id"]) == {"0xabc1234567890"}
    assert "ts_ns" not in ops.columns  # no record holds the start of the GPU interval
    # AllGather: the file's busbw = msg x n / t x (n-1)/n, so msg_bytes is the per-rank buffer
    ag = ops.row(1, named=True)
    assert ag["busbw_gbps"] / 8 == pytest.approx((1 << 18) * n / 50e-6 / 1e9 * (n - 1) / n)


def test_v4_0_verbose_record(tmp_path: Path) -> None:
    """synthetic, NCCL_INSPECTOR_DUMP_VERBOSE=1: event traces are read past; no start time."""
    verbose = (
        ',"event_trace_sn":{"coll_start_sn":1,"coll_stop_sn":2,"kernel_events":[{"channel_id":0,'
        '"kernel_start_sn":3,"kernel_stop_sn":48,"kernel_record_sn":47}]},"event_trace_ts":{'
        '"coll_start_ts":1752867229235059,"coll_stop_ts":1752867229235064,"kernel_events":[{'
        '"channel_id":0,"kernel_start_ts":1752867229235181,"kernel_stop_ts":1752867229275811,'
        '"kernel_record_ts":1752867229275811}]}'
    )
    a, b = bw("ReduceScatter", 2147483648, 41057, 8)
    line = record(
        header("0xe62dedaa97644a", 4, 8),
        coll("ReduceScatter", 1231, 2147483648, 41057, a, b, verbose=verbose),
    )
    p = Parsed(write(tmp_path, [line]))
    row = p.get("comm_ops").row(0, named=True)
    assert (row["op"], row["seq"], row["msg_bytes"], row["dur_ns"]) == (
        "reduce_scatter",
        1231,
        2147483648,
        41_057_000,
    )
    assert "ts_ns" not in p.get("comm_ops").columns  # host callback times are no GPU start


def test_v4_0_nccl_2_30_comm_name_and_p2p(tmp_path: Path) -> None:
    """synthetic, NCCL 2.30+ shape: header with comm_name; p2p_perf records (p2p_sn, peer)."""
    h = header("0x11223344556677", 1, 2, comm_name="PP Group 0")
    lines = [
        record(h, coll("AllReduce", 7, 8192, 4, *bw("AllReduce", 8192, 4, 2))),
        record(h, p2p("Send", 1, 0, 1 << 20, 20, (1 << 20) / 20e-6 / 1e9), kind="p2p_perf"),
        record(h, p2p("Recv", 2, 0, 1 << 20, 21, (1 << 20) / 21e-6 / 1e9), kind="p2p_perf"),
    ]
    p = Parsed(write(tmp_path, lines))
    ops = p.get("comm_ops").sort("source_line")
    assert ops.select("op", "seq", "peer_rank", "msg_bytes", "dur_ns", "rank").rows() == [
        ("all_reduce", 7, None, 8192, 4000, 1),
        ("send", 1, 0, 1 << 20, 20_000, 1),
        ("recv", 2, 0, 1 << 20, 21_000, 1),
    ]
    assert ops["busbw_gbps"][1] / 8 == pytest.approx((1 << 20) / 20e-6 / 1e9, abs=1e-6)
    assert p.counts.parsed == 3


def test_pre_release_record_without_timing_source(tmp_path: Path) -> None:
    """synthetic, the README's first example (no coll_timing_source): kept, clock unknown."""
    line = record(
        header("0x7f8c496ae9f661", 2, 8),
        coll("AllReduce", 1407, 17179869184, 61974, 277.210914, 485.119099, timing=None),
    )
    p = Parsed(write(tmp_path, [line]))
    row = p.get("comm_ops").row(0, named=True)
    assert row["dur_ns"] == 61_974_000 and row["timing_source"] is None
    assert any("without a timing source" in w for w in p.warnings)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("kernel_gpu", "kernel"), ("kernel_cpu", "profiler_cpu"), ("collective_cpu", "profiler_cpu")],
)
def test_timing_sources(tmp_path: Path, raw: str, expected: str) -> None:
    """A CPU-observed exec time is never a kernel duration."""
    line = record(header("0x1", 0, 2), coll("AllReduce", 0, 4096, 3, 1.0, 1.0, timing=raw))
    assert Parsed(write(tmp_path, [line])).get("comm_ops")["timing_source"][0] == expected


# --------------------------------------------------------------------------------------------
# Quirks of the plugin, from its source


def test_uint8_wrapped_size_is_undone(tmp_path: Path) -> None:
    """synthetic: ncclUint8 is missing from the plugin's type table: size = 2**64 - count."""
    count = 1 << 20
    line = record(header("0x1", 0, 4), coll("AllReduce", 0, 2**64 - count, 100, 9e9, 1e10))
    p = Parsed(write(tmp_path, [line]))
    row = p.get("comm_ops").row(0, named=True)
    assert (row["msg_bytes"], row["dtype"]) == (count, "uint8")
    assert row["busbw_gbps"] is None and row["algbw_gbps"] is None
    assert any("wrapped size" in w for w in p.warnings)


def test_invalid_and_all2all_ops(tmp_path: Path) -> None:
    """synthetic: 'Invalid' (core names the plugin lacks) is other, bw 0 -> null; All2All's
    per-peer size becomes the whole per-rank send buffer."""
    lines = [
        record(header("0x1", 0, 4), coll("Invalid", 0, 4096, 10, 0.0, 0.0)),
        record(header("0x1", 0, 4), coll("All2All", 0, 4096, 10, 0.4096, 0.3072)),
    ]
    ops = Parsed(write(tmp_path, lines)).get("comm_ops").sort("source_line")
    assert ops.select("op", "raw_op", "msg_bytes").rows() == [
        ("other", "Invalid", 4096),
        ("all_to_all", "All2All", 4096 * 4),
    ]
    assert ops["busbw_gbps"][0] is None


def test_sequence_gaps_are_counted(tmp_path: Path) -> None:
    """synthetic: NCCL <= 2.29 writes only the latest call per dump tick: gaps are reported."""
    lines = [
        record(header("0x1", 0, 2), coll("AllReduce", sn, 4096, 3, 1.0, 1.0)) for sn in (0, 1, 5)
    ] + [record(header("0x1", 0, 2), coll("AllGather", sn, 4096, 3, 1.0, 1.0)) for sn in (0, 1)]
    p = Parsed(write(tmp_path, lines))
    assert any(w.startswith("3 call(s) missing") for w in p.warnings), p.warnings


def test_world_rank_rule_with_a_sub_communicator(tmp_path: Path) -> None:
    """synthetic: the world comm (largest n_ranks) gives the global rank; sub-comm rows get it
    too, with their own comm rank in group_rank, never as rank."""
    lines = [
        record(header("0xaaaa", 5, 8), coll("AllReduce", 0, 4096, 3, 1.0, 1.0)),
        record(header("0xbbbb", 1, 2), coll("AllReduce", 0, 4096, 3, 1.0, 1.0)),
    ]
    p = Parsed(write(tmp_path, lines))
    ops = p.get("comm_ops").sort("source_line")
    assert ops.select("comm_id", "rank", "group_rank", "group_size").rows() == [
        ("0xaaaa", 5, 5, 8),
        ("0xbbbb", 5, 1, 2),
    ]
    comms = p.get("communicators").sort("comm_id")
    assert comms.select("comm_id", "rank", "nranks", "global_rank").rows() == [
        ("0xaaaa", 5, 8, 5),
        ("0xbbbb", 1, 2, 5),
    ]
    assert any("world size taken as the largest" in w for w in p.warnings)


def test_multi_gpu_process_and_rank_option(tmp_path: Path) -> None:
    """synthetic: one process with two world ranks (nccl-tests -g 2): sub-comm rows get null,
    and parse(rank=) fills only those."""
    lines = [
        record(header("0xaaaa", 0, 4), coll("AllReduce", 0, 4096, 3, 1.0, 1.0)),
        record(header("0xaaaa", 1, 4), coll("AllReduce", 0, 4096, 3, 1.0, 1.0)),
        record(header("0xbbbb", 0, 2), coll("AllReduce", 0, 4096, 3, 1.0, 1.0)),
    ]
    path = write(tmp_path, lines)
    assert Parsed(path).get("comm_ops").sort("source_line")["rank"].to_list() == [0, 1, None]
    assert Parsed(path, rank=9).get("comm_ops").sort("source_line")["rank"].to_list() == [0, 1, 9]


def test_gzip_copy_reads_the_same(tmp_path: Path) -> None:
    lines = [record(header("0x1", 0, 2), coll("AllReduce", i, 4096, 3, 1.0, 1.0)) for i in (0, 1)]
    plain = write(tmp_path, lines)
    gz = tmp_path / "node1-pid4242.log.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = Parsed(plain), Parsed(gz)
    assert a.counts == b.counts and a.get("comm_ops").equals(b.get("comm_ops"))


# --------------------------------------------------------------------------------------------
# Bad input: one line or one value lost, never the file; errors name the file


GOOD = record(header("0x1", 0, 2), coll("AllReduce", 0, 4096, 3, 1.0, 1.0))


def test_bad_lines_are_rejected_with_reasons(tmp_path: Path) -> None:
    lines = [
        GOOD,
        GOOD[:120],  # cut
        '["coll_perf", 1]',
        '{"header":{"id":"0x1","rank":0,"n_ranks":2},"metadata":{}}',
        '{"header":[],"coll_perf":{"coll":"AllReduce"}}',
        '{"header":{"id":"0x1"},"coll_perf":{"coll_sn":3}}',
        "some launcher text",
        "",
        GOOD,
    ]
    p = Parsed(write(tmp_path, lines))
    assert p.counts == LineCounts(total=9, parsed=2, ignored=2, rejected=5)
    reasons = p.reasons()
    assert reasons[2].startswith("not valid JSON")
    assert reasons[3] == "JSON value is not an object"
    assert "without 'coll_perf'" in reasons[4]
    assert "'header'" in reasons[5]
    assert "operation name" in reasons[6]


def test_cut_final_line(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text(GOOD + "\n" + GOOD[:-5])
    p = Parsed(path)
    assert p.counts == LineCounts(total=2, parsed=1, ignored=0, rejected=1)
    assert p.reasons() == {2: "final line has no newline (file cut mid-line)"}
    path.write_text(GOOD + "\n" + GOOD)  # a whole record without its newline is kept
    assert Parsed(path).counts.parsed == 2


@pytest.mark.parametrize(
    ("key", "token", "column"),
    [
        ("coll_msg_size_bytes", str(2**64), "msg_bytes"),
        ("coll_msg_size_bytes", '"4096"', "msg_bytes"),
        ("coll_exec_time_us", str(2**63), "dur_ns"),
        ("coll_exec_time_us", "-3", "dur_ns"),
        ("coll_sn", "1e400", "seq"),
        ("coll_sn", "true", "seq"),
        ("coll_busbw_gbs", "NaN", "busbw_gbps"),
        ("coll_busbw_gbs", "Infinity", "busbw_gbps"),
        ("n_ranks", str(2**40), "group_size"),
        ("rank", "7", "group_rank"),  # >= n_ranks
        ("pid", "-1", "pid"),
        ("hostname", '"\\ud800"', "host"),  # a lone surrogate: no UTF-8 string holds it
    ],
)
def test_bad_value_costs_that_value(tmp_path: Path, key: str, token: str, column: str) -> None:
    line = GOOD
    old = {
        "coll_msg_size_bytes": '"coll_msg_size_bytes":4096',
        "coll_exec_time_us": '"coll_exec_time_us":3',
        "coll_sn": '"coll_sn":0',
        "coll_busbw_gbs": '"coll_busbw_gbs":1.000000',
        "n_ranks": '"n_ranks":2',
        "rank": '"rank":0',
        "pid": '"pid":4242',
        "hostname": '"hostname":"node1"',
    }[key]
    assert old in line
    line = line.replace(old, f'"{key}":{token}')
    p = Parsed(write(tmp_path, [line, GOOD]))
    assert p.counts == LineCounts(total=2, parsed=2, ignored=0, rejected=0)
    ops = p.get("comm_ops").sort("source_line")
    assert ops[column][0] is None and ops[column][1] is not None
    assert any("set null" in w and key in w for w in p.warnings), p.warnings
    if column == "dur_ns":
        assert ops["timing_source"][0] == "none"


def test_overlong_line_is_rejected(tmp_path: Path) -> None:
    from commscope.parsers._io import MAX_LINE_BYTES

    big = GOOD[:-2] + ',"pad":"' + "x" * (MAX_LINE_BYTES + 10) + '"}}'
    p = Parsed(write(tmp_path, [GOOD, big, GOOD]))
    assert p.counts == LineCounts(total=3, parsed=2, ignored=0, rejected=1)
    assert "longer than" in p.reasons()[2]


def test_deeply_nested_json_is_one_reject(tmp_path: Path) -> None:
    nested = '{"header":' + "[" * 100_000 + "]" * 100_000 + "}"
    p = Parsed(write(tmp_path, [GOOD, nested]))
    assert p.counts.rejected == 1 and p.counts.parsed == 1


def test_not_inspector_output_raises_naming_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, ["hello", "world"], name="notes.txt")
    with pytest.raises(ParseError, match=r"notes\.txt") as exc:
        list(PARSER.parse(Source(path), run_id="t"))
    assert "no NCCL Inspector record" in str(exc.value)


def test_unpinned_version_warns(tmp_path: Path) -> None:
    line = GOOD.replace('"v4.0"', '"v5.1"')
    p = Parsed(write(tmp_path, [line]))
    assert p.counts.parsed == 1
    assert any("'v5.1'" in w and "not pinned" in w for w in p.warnings)


def test_sniff_leaves_other_json_alone(tmp_path: Path) -> None:
    kineto = b'{"schemaVersion": 1, "traceEvents": [{"ph": "X"}]}'
    assert PARSER.sniff(kineto, Path("t.json")) == 0
    assert PARSER.sniff(b"[1,2]", Path("x.log")) == 0
    assert PARSER.sniff((GOOD + "\n").encode(), Path("x.log")) == 95
    assert PARSER.sniff(b'{"header":{"id":"0x1","rank":0,"n_ranks":2', Path("x")) == 80


# --------------------------------------------------------------------------------------------
# The vectorised path for the plugin's exact lines gives what the json path gives


def _both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Parsed, Parsed]:
    import commscope.parsers.nccl_inspector as mod

    fast = Parsed(path, rank=7)
    monkeypatch.setattr(mod, "FAST_PATH", False)
    slow = Parsed(path, rank=7)
    monkeypatch.setattr(mod, "FAST_PATH", True)
    return fast, slow


def _same(fast: Parsed, slow: Parsed) -> None:
    assert fast.counts == slow.counts
    assert fast.warnings == slow.warnings
    for table in ("comm_ops", "communicators", "rejects"):
        a, b = fast.get(table), slow.get(table)
        if a.height or b.height:
            key = "source_line" if table != "rejects" else "line_no"
            assert a.sort(key).equals(b.sort(key)), table


def test_fast_path_takes_every_sample_line(
    sample_files: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import commscope.parsers.nccl_inspector as mod

    for f in sample_files:
        fast, slow = _both(f, monkeypatch)
        _same(fast, slow)

    def no_json(_: str) -> None:
        raise AssertionError("json path taken")

    monkeypatch.setattr(mod.json, "loads", no_json)
    assert Parsed(sample_files[0]).counts.parsed == 448


def test_fast_path_equals_json_path_on_mixed_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """synthetic: plugin-shaped lines of every kind beside lines only the json path reads."""
    h30 = header("0xABCDEF0123", 2, 4, comm_name="DP Group 0")
    lines = [
        record(header("0xaaaa", 5, 8), coll("AllReduce", 0, 4096, 3, *bw("AllReduce", 4096, 3, 8))),
        record(header("0xbbbb", 1, 2), coll("AllGather", 4, 1 << 20, 0, 0.0, 0.0)),
        record(header("0xbbbb", 1, 2), coll("Invalid", 0, 1024, 9, 0.0, 0.0, timing="kernel_cpu")),
        record(h30, coll("ReduceScatter", 9, 65536, 17, 1.5, 1.1, timing="collective_cpu")),
        record(h30, coll("All2All", 1, 4096, 3, 1.0, 1.0)),
        record(h30, p2p("Recv", 3, 1, 4096, 2, 2.048), kind="p2p_perf"),
        record(header("0xcccc", 9, 4), coll("Reduce", 0, 4096, 3, 1.0, 1.0)),  # rank >= n
        record(header("0xdddd", 0, 2), coll("AllReduce", 0, 2**64 - 16, 3, 1.0, 1.0)),
        record(header("0xdddd", 0, 2), coll("AllReduce", 2, 4096, 3, 1.0, 1.0, timing=None)),
        record(header("0xeeee", 0, 16), coll("AllReduce", 0, 4096, 3, 1.0, 1.0)),
        "not a record",
        GOOD[:50],
    ]
    path = write(tmp_path, lines)
    _same(*_both(path, monkeypatch))
    path.write_text("".join(ln + "\n" for ln in lines[:-1]) + lines[0])  # no final newline
    _same(*_both(path, monkeypatch))


# --------------------------------------------------------------------------------------------
# Incremental ingest of a growing dump: the same rows as one ingest of the final file


def test_growing_dump_ingested_in_steps(tmp_path: Path, sample_files: list[Path]) -> None:
    """REAL lines (rank 0's world comm) then synthetic lines of a 2-rank sub-communicator of
    the same process: the appended lines keep the global rank learnt in the first step, and
    each communicator is listed once."""
    from polars.testing import assert_frame_equal

    from commscope.parsers.schema import DATA_TABLES
    from commscope.pipeline.ingest import ingest_file
    from commscope.pipeline.store import Store

    real = sample_files[0].read_bytes().split(b"\n")[:60]
    meta = metadata(host="stone", pid=2029565)
    sub = [
        record(header("0x5ab", 1, 2), coll("AllGather", i, 4096, 3, 2.7, 1.3), meta=meta)
        for i in range(20)
    ]
    data = b"\n".join(real) + b"\n" + "".join(s + "\n" for s in sub).encode()
    starts = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    cuts = [starts[20] + 40, starts[59], starts[65] + 7]  # mid-line, line start, mid-line
    live = tmp_path / "live" / "stone-pid2029565.log"
    live.parent.mkdir()
    inc = Store.open(tmp_path / "inc")
    done = 0
    for cut in [*cuts, len(data)]:
        with live.open("ab") as fh:
            fh.write(data[done:cut])
        done = cut
        assert ingest_file(inc, live, run_id="r", follow=True).ok
    one = Store.open(tmp_path / "one")
    assert ingest_file(one, live, run_id="r").status == "ingested"

    def tables(store: Store) -> dict[str, pl.DataFrame]:
        batches = set(store.committed("r")["batch_id"].to_list())
        out = {}
        for t in DATA_TABLES:
            files = [f for f in (store.tables_dir / t / "r").glob("*.parquet") if f.stem in batches]
            df = pl.concat([pl.read_parquet(f) for f in files]) if files else pl.DataFrame()
            out[t] = df.sort(df.columns, nulls_last=True) if df.height else df
        return out

    got, want = tables(inc), tables(one)
    for t in DATA_TABLES:
        assert_frame_equal(got[t], want[t]), t
    log = inc.committed("r")
    assert log.height == 4 and log["parser_state"].null_count() == 0
    ops = got["comm_ops"]
    assert ops.height == 80
    assert ops.filter(pl.col("comm_id") == "0x5ab")["rank"].unique().to_list() == [0]
    assert got["communicators"].height == 2


def test_sniff_claims_only_the_inspector_samples(shared_samples: Path) -> None:
    """Of every shared sample (NCCL logs, Kineto JSON, nsys, Flight Recorder pickles and JSON,
    DeepSpeed logs), the parser claims exactly the four Inspector dumps."""
    claimed = [
        p.relative_to(shared_samples).parts[0]
        for p in sorted(shared_samples.rglob("*"))
        if p.is_file() and PARSER.sniff(Source(p).head(), p) > 0
    ]
    assert claimed == ["nccl_inspector"] * 4
