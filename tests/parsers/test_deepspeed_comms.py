"""Tests for the ``deepspeed_comms`` parser (DeepSpeed comms-logger verbose lines and summaries).

Expected counts and values are computed inside each test from the input text with plain ``re``
and ``decimal`` code, independently of the parser. Files written to ``tmp_path`` are labelled
SYNTHETIC; everything else is a real sample (../shared/samples, sample_traces/).
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from commscope.parsers import deepspeed_comms as dsc
from commscope.parsers._ds_sizes import size_to_bytes
from commscope.parsers._io import Source
from commscope.parsers.registry import LineCounts, ParseError, load_all
from commscope.parsers.schema import conform

load_all()
PARSER = dsc.DeepSpeedCommsParser()

UNIT_INDEX = {u: i for i, u in enumerate(["B", "KB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"])}
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
SIZE = r"0B|\d+(?:\.\d+)? [KMGTPEZY]?B"
MSG_SIZE = re.compile(rf"msg size: ({SIZE}) \|")
TIME_MS = re.compile(r"time \(ms\): (\d+\.\d+) \|")
RECORD = re.compile(r"comm op: (.*?) \| time")
SUMMARY_ROW = re.compile(rf" {{20}}({SIZE}) +(\d+) +-?\d+\.\d\d")


def indep_bytes(text: str) -> int:
    """Independent 1024-based conversion: round(value * 1024**unit_index), '0B' -> 0."""
    if text == "0B":
        return 0
    value, unit = text.split(" ")
    exact = Decimal(value) * (1024 ** UNIT_INDEX[unit])
    return int(exact.to_integral_value(rounding=ROUND_HALF_EVEN))


def line_count(data: bytes) -> int:
    """Lines as wc -l counts them, plus a final line without newline."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def text_lines(path: Path) -> list[str]:
    """The file's lines split on \\n only (\\r kept inside, trailing \\r dropped)."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


@dataclass
class Parsed:
    """Everything one parse produced, frames concatenated per table."""

    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    counts: LineCounts = field(default_factory=LineCounts)
    warnings: list[str] = field(default_factory=list)
    n_chunks: int = 0

    def get(self, table: str) -> pl.DataFrame:
        return self.tables.get(table, pl.DataFrame())


def run(path: Path, rank: int | None = None) -> Parsed:
    """Parse ``path``; conform every frame; check each chunk's accounting balances."""
    out = Parsed()
    frames: dict[str, list[pl.DataFrame]] = {}
    for chunk in PARSER.parse(Source(path), run_id="test_run", rank=rank):
        out.n_chunks += 1
        assert chunk.counts.balanced, chunk.counts
        out.counts += chunk.counts
        out.warnings.extend(chunk.warnings)
        for table, df in chunk.tables.items():
            conform(df, table)  # raises on unknown columns, bad types, nulls in required ones
            frames.setdefault(table, []).append(df)
    out.tables = {t: pl.concat(fs) for t, fs in frames.items()}
    return out


def write(tmp_path: Path, name: str, lines: list[str], *, newline: str = "\n") -> Path:
    """Write a SYNTHETIC log file."""
    path = tmp_path / name
    path.write_bytes(newline.join(lines).encode() + newline.encode())
    return path


def vline(
    rec: str,
    ms: str,
    size: str,
    *,
    algbw: str = "0.00",
    busbw: str = "0.00",
    ts: str = "2026-01-02 03:04:05,678",
    old: bool = False,
    caller: str | None = None,
) -> str:
    """A SYNTHETIC verbose line in the v0.10.1+ shape (or the v0.7-v0.10.0 shape with old)."""
    name = rec if caller is None else f"{rec} | [Caller Func: {caller}]"
    prefix = f"[{ts}] [INFO] [logging.py:123:log_dist] [Rank 0] "
    if old:
        return (
            f"{prefix}rank=0 | comm op: {name} | time (ms): {ms} | msg size: {size} | "
            f"algbw (Gbps): {algbw}  | busbw (Gbps): {busbw} "
        )
    return (
        f"{prefix}comm op: {name} | time (ms): {ms} | msg size: {size} | "
        f"algbw (Gbps): {algbw} | busbw (Gbps): {busbw}"
    )


def cells(*values: object) -> str:
    """A SYNTHETIC summary line: each cell padded to 20 like DeepSpeed's f'{x: <20}'."""
    return "".join(f"{v!s: <20}" for v in values)


LAT_HEADER = cells(
    "Comm. Op",
    "Message Size",
    "Count",
    "Total Latency(ms)",
    "Avg Latency(ms)",
    "tput_avg (Gbps)",
    "busbw_avg (Gbps)",
)
STRAG_HEADER = cells(
    "Comm. Op",
    "Message Size",
    "Count",
    "Total comm lat(ms)",
    "Total straggler(ms)",
    "Avg comm lat(ms)",
    "Avg straggler(ms)",
)


ASCTIME = re.compile(r"\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d{3})\] \[[A-Z]+\] ")


def asctime_ns(line: str) -> int:
    """Independent reading of a line's logging ``asctime`` as naive UTC, epoch ns."""
    m = ASCTIME.search(line)
    assert m is not None, line
    y, mo, d, h, mi, sec, ms = (int(g) for g in m.groups())
    return int(datetime(y, mo, d, h, mi, sec, tzinfo=UTC).timestamp()) * 10**9 + ms * 10**6


def sample_files(shared_samples: Path) -> list[Path]:
    files = sorted(
        p
        for p in (shared_samples / "deepspeed_comms").iterdir()
        if p.is_file() and not p.name.endswith(".source.txt")
    )
    assert files, "no deepspeed_comms samples"
    return files


# -- real samples ---------------------------------------------------------------------------


def test_every_sample_ingests_with_independent_counts(shared_samples: Path) -> None:
    for path in sample_files(shared_samples):
        res = run(path)
        lines = text_lines(path)
        assert res.counts.total == line_count(path.read_bytes()) == len(lines), path.name
        assert res.counts.balanced, path.name
        assert res.get("rejects").height == 0, (path.name, res.get("rejects"))

        verbose = [(i + 1, ln) for i, ln in enumerate(lines) if "comm op:" in ln]
        ops = res.get("comm_ops")
        assert ops.height == len(verbose), path.name
        if verbose:
            ops = ops.sort("source_line")
            assert ops["source_line"].to_list() == [no for no, _ in verbose]
            sizes = [MSG_SIZE.search(ln).group(1) for _, ln in verbose]  # type: ignore[union-attr]
            assert ops["msg_bytes"].to_list() == [indep_bytes(s) for s in sizes], path.name
            records = [RECORD.search(ln).group(1) for _, ln in verbose]  # type: ignore[union-attr]
            assert ops["raw_op"].to_list() == records
            assert ops["rank"].to_list() == [0] * len(verbose)

        rows = [
            (i + 1, m) for i, ln in enumerate(lines) if (m := SUMMARY_ROW.search(ANSI.sub("", ln)))
        ]
        summ = res.get("comm_summaries")
        assert summ.height == len(rows), path.name
        if rows:
            summ = summ.sort("source_line")
            assert summ["source_line"].to_list() == [no for no, _ in rows]
            assert summ["msg_size_text"].to_list() == [m.group(1) for _, m in rows]
            assert summ["count"].to_list() == [int(m.group(2)) for _, m in rows]
            assert summ["msg_bytes"].to_list() == [indep_bytes(m.group(1)) for _, m in rows]
        parsed_min = len(verbose) + len(rows)
        assert res.counts.parsed >= parsed_min, path.name


def test_pr2012_summary_table(shared_samples: Path) -> None:
    path = shared_samples / "deepspeed_comms" / "ds_pr2012_docs_log_summary_zero3.txt"
    res = run(path)
    summ = res.get("comm_summaries").sort("source_line")
    lines = text_lines(path)
    # record names: the non-indented lines after the header, each followed by its rows
    names = [ln.rstrip() for ln in lines[1:] if ln and not ln.startswith(" ")]
    assert summ["raw_op"].unique(maintain_order=True).to_list() == names
    assert set(summ["summary_index"].to_list()) == {0}
    assert set(summ["table_kind"].to_list()) == {"latency"}
    assert set(summ["rank"].to_list()) == {0}
    assert summ["caller"].null_count() == summ.height
    assert res.counts.parsed == res.counts.total  # header + names + rows: nothing else

    # two distinct byte sizes printed as the same '6.0 MB' string under one op: two rows
    six = summ.filter(
        (pl.col("raw_op") == "all_gather_base") & (pl.col("msg_size_text") == "6.0 MB")
    )
    assert six["count"].to_list() == [219, 6]
    assert six["msg_bytes"].to_list() == [6 * 1024**2, 6 * 1024**2]
    assert six["total_latency_ms"].to_list() == [16.63, 0.51]

    zero = summ.filter(pl.col("msg_size_text") == "0B")
    n_zero = sum(1 for ln in lines if ln.startswith(" " * 20 + "0B "))
    assert zero.height == n_zero == 3
    assert zero["msg_bytes"].to_list() == [0, 0, 0]
    assert zero["raw_op"].to_list() == ["broadcast", "barrier", "log_summary_barrier"]
    assert zero["op"].to_list() == ["broadcast", "barrier", "barrier"]

    rs = summ.filter(pl.col("raw_op") == "reduce_scatter_base").row(0, named=True)
    assert rs["op"] == "reduce_scatter"
    assert rs["msg_bytes"] == round(Decimal("678.86") * 1024**2)
    assert (rs["count"], rs["total_latency_ms"], rs["avg_latency_ms"]) == (40, 602.29, 9.69)
    assert (rs["algbw_gbps"], rs["busbw_gbps"]) == (1468.06, 1376.31)
    assert rs["total_straggler_ms"] is None
    ops = dict(zip(summ["raw_op"], summ["op"], strict=True))
    assert ops["all_gather_base"] == "all_gather"


def test_pr2012_verbose_old_format(shared_samples: Path) -> None:
    path = shared_samples / "deepspeed_comms" / "ds_pr2012_docs_verbose_v0.7_format.log"
    ops = run(path).get("comm_ops").sort("source_line")
    assert ops["raw_op"].to_list() == ["reduce_scatter_base", "all_gather_base", "all_gather_base"]
    assert ops["op"].to_list() == ["reduce_scatter", "all_gather", "all_gather"]
    assert ops["dur_ns"].to_list() == [9_460_000, 110_000, 80_000]
    assert ops["algbw_gbps"].to_list() == [1204.52, 954.41, 1293.47]
    assert ops["busbw_gbps"].to_list() == [1129.23, 894.76, 1212.63]
    # asctime is naive local time, read as if it were UTC; it is the op's END (logged after
    # the timer stopped), so the start is asctime minus the op's latency
    first = datetime(2022, 6, 26, 1, 39, 55, tzinfo=UTC)
    assert ops["ts_ns"][0] == int(first.timestamp()) * 10**9 + 722 * 10**6 - 9_460_000
    ends = [asctime_ns(ln) for ln in text_lines(path)]
    assert (ops["ts_ns"] + ops["dur_ns"]).to_list() == ends


def test_polaris_ansi_summary(shared_samples: Path) -> None:
    path = shared_samples / "deepspeed_comms" / "mlprof_polaris_1node_4gpu_summary_ansi.log"
    raw = path.read_bytes()
    assert b"\x1b[" in raw  # the sample really is coloured
    res = run(path)
    assert res.get("comm_ops").height == 0
    summ = res.get("comm_summaries")
    assert summ["raw_op"].to_list() == ["broadcast"] * 8 + ["log_summary_barrier"]
    assert summ.filter(pl.col("msg_size_text") == "1.12 KB")["msg_bytes"].to_list() == [1147]
    assert res.counts.parsed == 1 + 2 + 9  # header, two record names, nine rows
    assert res.counts.ignored == res.counts.total - 12


def test_thetagpu_verbose_tqdm_and_latencies(shared_samples: Path) -> None:
    path = shared_samples / "deepspeed_comms" / "mlprof_thetagpu_2node_16gpu_verbose_run1.log"
    lines = text_lines(path)
    res = run(path)
    ops = res.get("comm_ops").sort("source_line")
    verbose = [ln for ln in lines if "comm op:" in ln]
    assert ops.height == len(verbose) == 3305
    # DeepSpeed 0.9.2: latencies are per op, kept as logged (ms -> ns exactly)
    expect = [int(Decimal(TIME_MS.search(ln).group(1)) * 10**6) for ln in verbose]  # type: ignore[union-attr]
    assert ops["dur_ns"].to_list() == expect
    assert not any("cumulative" in w for w in res.warnings)
    assert set(ops["op"].unique().to_list()) == {
        "broadcast",
        "all_gather",
        "all_reduce",
        "reduce",
        "barrier",
    }
    tqdm_lines = {i + 1 for i, ln in enumerate(lines) if "comm op:" in ln and "\r" in ln}
    assert len(tqdm_lines) == 9
    assert tqdm_lines <= set(ops["source_line"].to_list())
    assert ops["ts_ns"].null_count() == 0
    # the logged times (the ends) are in file order; starts may not be (millisecond cut)
    assert (ops["ts_ns"] + ops["dur_ns"]).is_sorted()


ASCTIME_TRUNCATION_NS = 1_000_000
"""``asctime`` shows the logging time cut (not rounded) to the millisecond."""


@pytest.mark.parametrize(
    ("folder", "name"),
    [
        ("shared", "deepspeed_comms/mlprof_thetagpu_2node_16gpu_verbose_run1.log"),  # 0.9.2
        ("shared", "deepspeed_comms/ds_pr2012_docs_verbose_v0.7_format.log"),  # 0.7 dev
        ("bundled", "ds_pipe_pp2_dp2_cpu/deepspeed/rank0.log"),  # 0.19.8, cumulative
    ],
)
def test_real_calls_of_rank0_do_not_overlap(
    folder: str, name: str, shared_samples: Path, sample_traces: Path
) -> None:
    """DeepSpeed's ``timed_op`` blocks (synchronize) before it logs, so rank 0's calls run
    one after another: each parsed [ts_ns, ts_ns + dur_ns] starts after the previous one
    ended, up to the millisecond ``asctime`` cut. Reading the logged time as the start
    (the old parser) makes 11 thetagpu calls and 25 recorded ones overlap their successor."""
    path = (shared_samples if folder == "shared" else sample_traces) / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    ops = run(path).get("comm_ops").sort("source_line")
    assert ops.height >= 3
    lines = [ln for ln in text_lines(path) if "comm op:" in ln]
    assert (ops["ts_ns"] + ops["dur_ns"]).to_list() == [asctime_ns(ln) for ln in lines]
    gap = ops["ts_ns"].slice(1) - (ops["ts_ns"] + ops["dur_ns"]).slice(0, ops.height - 1)
    assert gap.min() >= -ASCTIME_TRUNCATION_NS - 10_000  # + 10 us: time (ms) has 2 decimals


def test_recorded_rank0_calls_enclose_kineto_ranges(sample_traces: Path) -> None:
    """Independent clock: the same run's Kineto trace of rank 0 (gloo:* CPU ranges, steps
    2-4). DeepSpeed's timer starts before the call and stops after it (and a sync), so every
    parsed DeepSpeed call of the same op and size, nearest by end, encloses its Kineto range
    within the millisecond ``asctime`` cut."""
    from commscope.parsers import kineto

    run_dir = sample_traces / "ds_pipe_pp2_dp2_cpu"
    ds_log, trace = (
        run_dir / "deepspeed" / "rank0.log",
        run_dir / "kineto" / "rank0.pt.trace.json.gz",
    )
    if not (ds_log.exists() and trace.exists()):
        pytest.skip("recorded sample not present")
    frames = [
        c.tables["comm_ops"]
        for c in kineto.KinetoParser().parse(Source(trace), run_id="t", rank=0)
        if "comm_ops" in c.tables
    ]
    ki = (
        pl.concat(frames)
        .select(
            "op", "msg_bytes", pl.col("ts_ns").alias("k_start"), pl.col("dur_ns").alias("k_dur")
        )
        .with_columns((pl.col("k_start") + pl.col("k_dur")).alias("k_end"))
        .sort("k_end")
    )
    ds = (
        run(ds_log)
        .get("comm_ops")
        .select("op", "msg_bytes", "ts_ns", (pl.col("ts_ns") + pl.col("dur_ns")).alias("end"))
        .sort("end")
    )
    j = ki.join_asof(
        ds, left_on="k_end", right_on="end", by=["op", "msg_bytes"], strategy="nearest"
    )
    assert j.height == 36 and j["ts_ns"].null_count() == 0  # 3 steps x 12 calls
    assert j.filter(pl.col("k_dur") > 5_000_000).height >= 5  # long calls tell start from end
    slack = ASCTIME_TRUNCATION_NS + 10_000
    assert (j["ts_ns"] <= j["k_start"] + slack).all()
    assert (j["end"] >= j["k_end"] - slack).all()


def test_sniff_samples(shared_samples: Path) -> None:
    d = shared_samples / "deepspeed_comms"
    for name in (
        "ds_pr2012_docs_log_summary_zero3.txt",
        "ds_pr2012_docs_verbose_v0.7_format.log",
        "mlprof_polaris_1node_4gpu_summary_ansi.log",
        "mlprof_thetagpu_2node_16gpu_verbose_run1.log",
    ):
        path = d / name
        assert PARSER.sniff(Source(path).head(), path) >= 90, name


# -- the project's recorded sample (DeepSpeed 0.19.8, cumulative latencies) -----------------


def test_recorded_sample_cumulative(sample_traces: Path) -> None:
    path = sample_traces / "ds_pipe_pp2_dp2_cpu" / "deepspeed" / "rank0.log"
    if not path.exists():
        pytest.skip("recorded sample not present")
    lines = text_lines(path)
    res = run(path)
    assert res.counts.total == len(lines)
    assert res.get("rejects").height == 0
    assert any("cumulative per-op latencies detected" in w for w in res.warnings)
    ops = res.get("comm_ops").sort("source_line")
    verbose = [ln for ln in lines if "comm op:" in ln]
    assert ops.height == len(verbose) > 0
    assert ops["dur_ns"].min() >= 0  # type: ignore[operator]

    # independent: the last logged (cumulative) value per record, and the logged sequence
    logged: dict[str, list[Decimal]] = {}
    for ln in verbose:
        rec = RECORD.search(ln).group(1)  # type: ignore[union-attr]
        logged.setdefault(rec, []).append(Decimal(TIME_MS.search(ln).group(1)))  # type: ignore[union-attr]
    for rec, values in logged.items():
        assert values == sorted(values), rec  # the real 0.19.8 behaviour: only ever grows
    sums = ops.group_by("raw_op").agg(pl.col("dur_ns").sum())
    got = dict(zip(sums["raw_op"], sums["dur_ns"], strict=True))
    assert got == {rec: int(v[-1] * 10**6) for rec, v in logged.items()}

    # the summary counts each (record, size) once per call logged before it
    summ = res.get("comm_summaries")
    assert summ.height > 0
    first_summary_line = summ["source_line"].min()
    before = ops.filter(pl.col("source_line") < first_summary_line)
    calls = before.group_by("raw_op", "msg_bytes").len()
    joined = summ.join(calls, on=["raw_op", "msg_bytes"], how="left")
    assert joined["count"].to_list() == joined["len"].to_list()


def test_recorded_sample_other_ranks(sample_traces: Path) -> None:
    files = sorted((sample_traces / "ds_pipe_pp2_dp2_cpu" / "deepspeed").glob("rank[1-9]*.log"))
    if not files:
        pytest.skip("recorded sample not present")
    for path in files:
        res = run(path)
        assert res.counts.total == line_count(path.read_bytes())
        assert res.counts.ignored == res.counts.total  # only rank 0 prints comms output
        assert PARSER.sniff(Source(path).head(), path) > 0


# -- SYNTHETIC edge cases -------------------------------------------------------------------


def test_synthetic_new_format_and_op_mapping(tmp_path: Path) -> None:
    recs = [
        ("all_reduce", "all_reduce"),
        ("all_gather_into_tensor", "all_gather"),
        ("reduce_scatter_tensor", "reduce_scatter"),
        ("all_to_all_single", "all_to_all"),
        ("isend", "send"),
        ("irecv", "recv"),
        ("monitored_barrier", "barrier"),
        ("gather", "gather"),
        ("scatter", "scatter"),
        ("my_custom_name", "other"),
    ]
    lines = ["some unrelated output"]
    lines += [vline(r, "0.50", "2.0 KB", algbw="1.23", busbw="4.56") for r, _ in recs]
    path = write(tmp_path, "synthetic_new.log", lines)
    res = run(path)
    ops = res.get("comm_ops").sort("source_line")
    assert ops["raw_op"].to_list() == [r for r, _ in recs]
    assert ops["op"].to_list() == [o for _, o in recs]
    assert ops["msg_bytes"].to_list() == [2048] * len(recs)
    assert ops["algbw_gbps"].to_list() == [1.23] * len(recs)
    assert ops["busbw_gbps"].to_list() == [4.56] * len(recs)
    assert ops["rank"].to_list() == [0] * len(recs)
    assert ops["caller"].null_count() == len(recs)
    assert (res.counts.parsed, res.counts.ignored) == (len(recs), 1)


def test_synthetic_debug_caller_format(tmp_path: Path) -> None:
    lines = [
        vline("broadcast", "1.00", "4.0 MB", caller="_broadcast_model"),
        vline("all_reduce", "2.00", "8.0 B", caller="<module>", old=True),
        LAT_HEADER,
        "broadcast | [Caller Func: _broadcast_model]",
        cells("", "4.0 MB", 1, "1.00", "1.00", "33.55", "33.55"),
        "all_reduce | [Caller Func: <module>]",
        cells("", "8.0 B", 1, "2.00", "2.00", "0.00", "0.00"),
    ]
    res = run(write(tmp_path, "synthetic_debug.log", lines))
    ops = res.get("comm_ops").sort("source_line")
    assert ops["raw_op"].to_list() == ["broadcast", "all_reduce"]
    assert ops["caller"].to_list() == ["_broadcast_model", "<module>"]
    assert ops["msg_bytes"].to_list() == [4 * 1024**2, 8]
    summ = res.get("comm_summaries").sort("source_line")
    assert summ["raw_op"].to_list() == ["broadcast", "all_reduce"]
    assert summ["caller"].to_list() == ["_broadcast_model", "<module>"]
    assert summ["op"].to_list() == ["broadcast", "all_reduce"]
    assert res.counts.parsed == res.counts.total == len(lines)


def test_synthetic_straggler_table(tmp_path: Path) -> None:
    lines = [
        "before",
        LAT_HEADER,
        "all_reduce",
        cells("", "1.0 MB", 10, "12.34", "1.20", "13.98", "10.49"),
        "_______________________________",
        "Breakdown with straggler effect",
        "-------------------------------",
        STRAG_HEADER,
        "all_reduce",
        cells("", "1.0 MB", 10, "10.00", "2.34", "0.98", "0.22"),
        "after",
    ]
    res = run(write(tmp_path, "synthetic_straggler.log", lines))
    summ = res.get("comm_summaries").sort("source_line")
    assert summ["summary_index"].to_list() == [0, 1]
    assert summ["table_kind"].to_list() == ["latency", "straggler"]
    lat, strag = summ.row(0, named=True), summ.row(1, named=True)
    assert (lat["total_latency_ms"], lat["avg_latency_ms"]) == (12.34, 1.20)
    assert (lat["algbw_gbps"], lat["busbw_gbps"]) == (13.98, 10.49)
    assert lat["total_straggler_ms"] is None
    assert (strag["total_latency_ms"], strag["total_straggler_ms"]) == (10.00, 2.34)
    assert (strag["avg_latency_ms"], strag["avg_straggler_ms"]) == (0.98, 0.22)
    assert strag["algbw_gbps"] is None
    assert strag["msg_bytes"] == 1024**2
    # two headers, two names, two rows; the banner and the other text are ignored
    assert (res.counts.parsed, res.counts.ignored, res.counts.rejected) == (6, 5, 0)


def _cumulative_lines(values: dict[str, list[str]]) -> list[str]:
    """SYNTHETIC verbose lines, records interleaved round-robin."""
    out = []
    for k in range(max(len(v) for v in values.values())):
        for rec, vals in values.items():
            if k < len(vals):
                out.append(vline(rec, vals[k], "256.0 KB"))
    return out


def test_synthetic_cumulative_detected_from_data(tmp_path: Path) -> None:
    values = {
        "reduce_scatter_tensor": ["12.26", "20.80", "29.01", "32.56", "44.00"],
        "send": ["2.35", "2.58", "10.94", "15.83", "16.09"],
    }
    res = run(write(tmp_path, "synthetic_cumulative.log", _cumulative_lines(values)))
    assert any("cumulative per-op latencies detected" in w for w in res.warnings)
    ops = res.get("comm_ops").sort("source_line")
    for rec, vals in values.items():
        ns = [int(Decimal(v) * 10**6) for v in vals]
        expect = [ns[0]] + [b - a for a, b in itertools.pairwise(ns)]
        assert ops.filter(pl.col("raw_op") == rec)["dur_ns"].to_list() == expect
        assert sum(expect) == ns[-1]


VERSION_LINE = (
    "[2026-01-02 03:04:05,000] [INFO] [logging.py:123:log_dist] [Rank 0] "
    "DeepSpeed info: version={}, git-hash=unknown, git-branch=unknown"
)


@pytest.mark.parametrize(
    ("version", "old", "logged_ms", "expect_dur_ms"),
    [
        # < 0.10.1: "rank=0 | comm op: ..." shape, per-op latencies
        ("0.9.2", True, ["2.50", "1.25", "4.00"], ["2.50", "1.25", "4.00"]),
        # 0.10.1 - 0.18.2: current shape, per-op latencies
        ("0.14.4", False, ["2.50", "1.25", "4.00"], ["2.50", "1.25", "4.00"]),
        # >= 0.18.3: the running sum per record name, differenced
        ("0.19.8", False, ["2.50", "3.75", "7.75"], ["2.50", "1.25", "4.00"]),
    ],
)
def test_synthetic_timestamp_is_the_end_of_the_op(
    tmp_path: Path, version: str, old: bool, logged_ms: list[str], expect_dur_ms: list[str]
) -> None:
    """Given three calls logged at 03:04:05.010/.020/.030, expect each to start at its
    logged time minus its own latency (DeepSpeed logs after the timer stopped)."""
    stamps = ["2026-01-02 03:04:05,010", "2026-01-02 03:04:05,020", "2026-01-02 03:04:05,030"]
    lines = [VERSION_LINE.format(version)]
    lines += [
        vline("all_reduce", ms, "4.0 MB", ts=ts, old=old)
        for ms, ts in zip(logged_ms, stamps, strict=True)
    ]
    ops = run(write(tmp_path, f"synthetic_end_{version}.log", lines)).get("comm_ops")
    base = int(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()) * 10**9
    dur = [int(Decimal(ms) * 10**6) for ms in expect_dur_ms]
    ends = [base + k * 10_000_000 for k in (1, 2, 3)]
    assert ops.sort("source_line")["dur_ns"].to_list() == dur
    assert ops.sort("source_line")["ts_ns"].to_list() == [
        e - d for e, d in zip(ends, dur, strict=True)
    ]
    assert set(ops["timing_source"]) == {"logged"}


def test_synthetic_cumulative_from_version_hint_with_few_lines(tmp_path: Path) -> None:
    lines = [
        "[2026-01-02 03:04:05,000] [INFO] [logging.py:123:log_dist] [Rank 0] "
        "DeepSpeed info: version=0.19.8, git-hash=unknown, git-branch=unknown",
        vline("all_reduce", "1.00", "4.0 B"),
        vline("all_reduce", "3.00", "4.0 B"),
    ]
    res = run(write(tmp_path, "synthetic_hint.log", lines))
    assert any("DeepSpeed 0.19.8" in w and "cumulative" in w for w in res.warnings)
    assert res.get("comm_ops")["dur_ns"].to_list() == [1_000_000, 2_000_000]


def test_synthetic_data_overrides_version_hint(tmp_path: Path) -> None:
    # an old version line, but the values only grow: the data decides, with a warning
    vals = [f"{v}.00" for v in range(1, 11)]
    lines = [
        "[2023-01-02 03:04:05,000] [INFO] [logging.py:96:log_dist] [Rank 0] "
        "DeepSpeed info: version=0.9.2, git-hash=unknown, git-branch=unknown",
        *_cumulative_lines({"all_reduce": vals}),
    ]
    res = run(write(tmp_path, "synthetic_conflict.log", lines))
    assert any("suggests per_op latencies but the data says cumulative" in w for w in res.warnings)
    assert res.get("comm_ops")["dur_ns"].to_list() == [1_000_000] * 10


def test_synthetic_per_op_kept_and_undetermined_warning(tmp_path: Path) -> None:
    per_op = {"all_reduce": ["1.00", "0.50", "0.70", "0.20", "0.90"], "send": ["0.10"] * 6}
    res = run(write(tmp_path, "synthetic_perop.log", _cumulative_lines(per_op)))
    assert not any("cumulative" in w for w in res.warnings)
    ops = res.get("comm_ops").filter(pl.col("raw_op") == "all_reduce")
    assert ops["dur_ns"].to_list() == [int(Decimal(v) * 10**6) for v in per_op["all_reduce"]]

    few = _cumulative_lines({"all_reduce": ["1.00", "2.00", "3.00"]})
    res = run(write(tmp_path, "synthetic_few.log", few))
    assert any("could not tell per-op from cumulative" in w for w in res.warnings)
    assert res.get("comm_ops")["dur_ns"].to_list() == [1_000_000, 2_000_000, 3_000_000]


def test_synthetic_cumulative_restart(tmp_path: Path) -> None:
    vals = ["1.00", "2.00", "3.00", "4.00", "5.00", "6.00", "7.00", "8.00", "9.00", "10.00"]
    vals += ["0.50", "1.50"]  # a new process appends to the same log: the timer restarts
    vals += [f"{v}.00" for v in range(2, 110)]  # > 100 pairs: one decrease is <= 1 %
    res = run(write(tmp_path, "synthetic_restart.log", _cumulative_lines({"barrier": vals})))
    assert any("cumulative per-op latencies detected" in w for w in res.warnings)
    assert any("fell below their predecessor" in w for w in res.warnings)
    dur = res.get("comm_ops")["dur_ns"].to_list()
    assert dur[10] == 500_000 and dur[11] == 1_000_000
    assert min(dur) >= 0


def test_synthetic_truncated_line_at_eof_is_rejected(tmp_path: Path) -> None:
    full = vline("all_reduce", "1.00", "1.0 KB")
    path = tmp_path / "synthetic_truncated.log"
    path.write_bytes((full + "\n" + full[:-25]).encode())  # killed mid-line, no newline
    res = run(path)
    assert res.counts.total == 2 == line_count(path.read_bytes())
    assert (res.counts.parsed, res.counts.rejected, res.counts.ignored) == (1, 1, 0)
    rej = res.get("rejects")
    assert rej["line_no"].to_list() == [2]
    assert rej["raw"].to_list() == [full[:-25]]
    assert "does not match" in rej["reason"][0]


def test_synthetic_crlf_line_endings(tmp_path: Path) -> None:
    lines = [
        "header text",
        vline("all_reduce", "1.25", "6.14 MB", old=True),
        vline("broadcast", "0.75", "0B"),
        LAT_HEADER,
        "all_reduce",
        cells("", "6.14 MB", 1, "1.25", "1.25", "1.00", "1.00"),
    ]
    lf = run(write(tmp_path, "synthetic_lf.log", lines))
    crlf_path = write(tmp_path, "synthetic_crlf.log", lines, newline="\r\n")
    assert crlf_path.read_bytes().count(b"\r\n") == len(lines)
    crlf = run(crlf_path)
    assert crlf.counts == lf.counts
    assert crlf.counts.total == len(lines)
    for table in ("comm_ops", "comm_summaries"):
        assert crlf.get(table).equals(lf.get(table)), table
    ops = crlf.get("comm_ops").sort("source_line")
    assert ops["msg_bytes"].to_list() == [indep_bytes("6.14 MB"), 0]
    assert crlf.get("comm_summaries")["msg_bytes"].to_list() == [indep_bytes("6.14 MB")]


def test_synthetic_overflowing_cells_fall_back_to_regex(tmp_path: Path) -> None:
    big = "123456789012345678.25"  # 21 characters: runs into the next cell, no space
    lines = [LAT_HEADER, "all_reduce", cells("", "1.0 GB", 7, big, "3.50", "0.01", "0.02")]
    assert big + "3.50" in lines[2]
    res = run(write(tmp_path, "synthetic_overflow.log", lines))
    row = res.get("comm_summaries").row(0, named=True)
    assert row["total_latency_ms"] == float(big)
    assert (row["avg_latency_ms"], row["algbw_gbps"], row["busbw_gbps"]) == (3.5, 0.01, 0.02)
    assert row["msg_bytes"] == 1024**3
    assert row["count"] == 7


def test_synthetic_bad_rows_inside_table_are_rejected(tmp_path: Path) -> None:
    lines = [
        LAT_HEADER,
        cells("", "1.0 KB", 1, "0.10", "0.10", "0.00", "0.00"),  # before any record name
        "all_reduce",
        cells("", "2.0 KB", 3, "0.30", "0.10", "0.16", "0.12"),
        cells("", "4.0 KB", 3, "0.30", "0.10")[:55],  # cut short
        cells("", "8.0 KB", 2, "0.20", "0.10", "0.65", "0.49"),
        "",
        cells("", "9.0 KB", 2, "0.20", "0.10", "0.65", "0.49"),  # after the table: not a row
    ]
    res = run(write(tmp_path, "synthetic_bad_rows.log", lines))
    rej = res.get("rejects").sort("line_no")
    assert rej["line_no"].to_list() == [2, 5]
    assert rej["reason"].to_list() == [
        "summary row before any record-name line",
        "malformed latency summary row",
    ]
    assert res.get("comm_summaries")["msg_size_text"].to_list() == ["2.0 KB", "8.0 KB"]
    assert (res.counts.parsed, res.counts.rejected, res.counts.ignored) == (4, 2, 2)


def test_synthetic_prefixed_and_coloured_summary(tmp_path: Path) -> None:
    green, reset = "\x1b[32m", "\x1b[0m"
    tag = "[2026-01-02 03:04:05,678] [INFO] [logging.py:123:log_dist] [Rank 0] "
    lines = [
        f"{tag}{LAT_HEADER}",
        f"{tag}{green}broadcast{reset}",
        f"{tag}{cells('', '36.0 KB', 2, '0.20', '0.10', '3.31', '3.31')}",
        "worker-0: all_gather",
        "worker-0: " + cells("", "128.0 B", 1, "0.10", "0.10", "0.01", "0.01"),
        "\rTraining:  10%|#         | 1/10 [00:02<00:21,  2.40s/it]reduce",
        "\rTraining:  10%|#         | 1/10 [00:02<00:21,  2.40s/it]"
        + cells("", "372.0 B", 1, "0.04", "0.04", "0.08", "0.08"),
    ]
    res = run(write(tmp_path, "synthetic_prefixed.log", lines))
    summ = res.get("comm_summaries").sort("source_line")
    assert summ["raw_op"].to_list() == ["broadcast", "all_gather", "reduce"]
    assert summ["msg_bytes"].to_list() == [36 * 1024, 128, 372]
    assert res.counts.parsed == len(lines)


def test_synthetic_tables_and_ops_across_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = ["noise"] * 3
    lines += _cumulative_lines({"all_reduce": [f"{v}.00" for v in range(1, 13)]})
    lines += [LAT_HEADER, "all_reduce"]
    lines += [cells("", f"{k}.0 KB", 1, "1.00", "1.00", "0.01", "0.01") for k in range(1, 9)]
    lines += ["noise", LAT_HEADER, "send", cells("", "0B", 1, "1.00", "1.00", "0.00", "0.00")]
    path = write(tmp_path, "synthetic_blocks.log", lines)
    whole = run(path)
    monkeypatch.setattr(dsc, "_BLOCK_BYTES", 300)  # a few lines per block
    cut = run(path)
    assert cut.n_chunks > 5
    assert cut.counts == whole.counts
    assert cut.counts.total == len(lines)
    n_rows = sum(1 for ln in lines if SUMMARY_ROW.search(ln))
    assert cut.get("comm_summaries").height == n_rows == 9
    assert cut.get("comm_summaries")["summary_index"].to_list() == [0] * 8 + [1]
    for table in ("comm_ops", "comm_summaries"):
        assert cut.get(table).equals(whole.get(table)), table
    assert cut.get("comm_ops")["dur_ns"].to_list() == [1_000_000] * 12


def test_synthetic_spliced_and_exit_warnings(tmp_path: Path) -> None:
    a = vline("all_reduce", "1.00", "4.0 B")
    b = vline("broadcast", "2.00", "8.0 B")
    lines = [a[:100] + b, "wrong comm_op specified"]
    assert lines[0].count("comm op:") == 2
    res = run(write(tmp_path, "synthetic_spliced.log", lines))
    assert res.get("comm_ops")["raw_op"].to_list() == ["broadcast"]
    assert any("more than one 'comm op:' record" in w for w in res.warnings)
    assert any("wrong comm_op specified" in w for w in res.warnings)


def test_synthetic_sniff_and_binary(tmp_path: Path) -> None:
    plain = write(tmp_path, "notes.txt", ["hello", "world"])
    assert PARSER.sniff(plain.read_bytes(), plain) == 0
    v = write(tmp_path, "x.log", [vline("all_reduce", "1.00", "4.0 B")])
    assert PARSER.sniff(v.read_bytes(), v) >= 90
    binary = tmp_path / "blob.log"
    binary.write_bytes(b"\x00\x01comm op: \x00" * 10)
    assert PARSER.sniff(binary.read_bytes(), binary) == 0
    with pytest.raises(ParseError):
        list(PARSER.parse(Source(binary), run_id="test_run"))


def _convert_size(size_bytes: int) -> str:
    """DeepSpeed's convert_size (deepspeed/utils/comms_logging.py), re-typed for the test."""
    if size_bytes == 0:
        return "0B"
    size_name = ("B", "KB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB")
    i = math.floor(math.log(size_bytes, 1024))
    s = round(size_bytes / math.pow(1024, i), 2)
    return f"{s} {size_name[i]}"


@given(st.integers(min_value=0, max_value=2**62))
def test_size_to_bytes_inverts_convert_size(n: int) -> None:
    text = _convert_size(n)
    got = size_to_bytes(text)
    assert got == indep_bytes(text)
    if n:
        unit = 1024 ** UNIT_INDEX[text.split(" ")[1]]
        assert abs(got - n) <= 0.005 * unit + 1  # two decimals of the unit, at most


def test_size_to_bytes_edges() -> None:
    assert size_to_bytes("0B") == 0
    assert size_to_bytes("1024.0 KB") == 1024**2
    assert size_to_bytes("1.45 GB") == indep_bytes("1.45 GB")
    assert size_to_bytes("9.99 YB") is None  # does not fit int64
    assert size_to_bytes("12 parsecs") is None


def test_timing_source_logged_where_a_latency_is(shared_samples: Path, tmp_path: Path) -> None:
    """Issue 16: a verbose line's own latency is the call's duration (timing_source 'logged')."""
    for path in sample_files(shared_samples):
        verbose = [ln for ln in text_lines(path) if "comm op:" in ln]
        timed = sum(1 for ln in verbose if TIME_MS.search(ln))
        ops = run(path).get("comm_ops")
        if not verbose:
            continue
        assert ops.filter(pl.col("timing_source") == "logged").height == timed, path.name
        assert ops.filter(pl.col("timing_source") == "logged")["dur_ns"].null_count() == 0, (
            path.name
        )
        assert set(ops["timing_source"]) <= {"logged", "none"}
    path = write(tmp_path, "synthetic_ds.log", [vline("all_reduce", "9.46", "64.0 MB")])
    ops = run(path).get("comm_ops")
    assert ops.select("timing_source", "dur_ns").rows() == [("logged", 9_460_000)]
