"""Issue 23, item 3: a bad value costs one row (or one value), never the file.

Each test builds its input at test time: real samples (``../shared/samples``, skipped when
absent) with one value swapped for an out-of-range one, or a small hand-written trace or log.
Every parse must keep the rest of the input and keep the accounting exact
(``total = parsed + ignored + rejected``, one ``rejects`` row per rejected event or line).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from commscope.parsers._io import Source
from commscope.parsers._kineto_events import MAX_EVENT_BYTES
from commscope.parsers._kineto_meta import MAX_HEADER_VALUE, ValueScanner
from commscope.parsers.registry import LineCounts, load_all
from commscope.parsers.schema import conform
from commscope.pipeline.ingest import _fill_provenance

BAD = '"__BAD__"'
"""Placeholder put where the bad token goes (the JSON writer cannot write some of them)."""


class Parsed:
    """A parse of one file by a named parser: counts, frames (conformed), warnings."""

    def __init__(self, path: Path, fmt: str = "kineto", rank: int | None = None) -> None:
        parser = load_all()[fmt]
        self.counts = LineCounts()
        self.frames: dict[str, list[pl.DataFrame]] = {}
        self.warnings: list[str] = []
        for chunk in parser.parse(Source(path), run_id="t", rank=rank):
            self.counts += chunk.counts
            self.warnings += chunk.warnings
            for table, df in chunk.tables.items():
                conform(_fill_provenance(df, table, "t", str(path), fmt), table)
                self.frames.setdefault(table, []).append(df)
        assert self.counts.balanced, self.counts
        assert self.height("rejects") == self.counts.rejected, self.counts

    def get(self, table: str) -> pl.DataFrame:
        frames = self.frames.get(table)
        return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()

    def height(self, table: str) -> int:
        return sum(df.height for df in self.frames.get(table, []))

    def reasons(self) -> list[str]:
        rej = self.get("rejects")
        return rej["reason"].to_list() if rej.height else []


def _sample_doc(shared: Path, name: str) -> dict[str, Any]:
    data = (shared / "kineto" / name).read_bytes()
    return json.loads(gzip.decompress(data) if name.endswith(".gz") else data)  # type: ignore[no-any-return]


def _write(path: Path, doc: Any, token: str | None = None) -> Path:
    """Write ``doc`` as JSON, with the first :data:`BAD` placeholder replaced by ``token``."""
    text = json.dumps(doc)
    if token is not None:
        assert BAD in text
        text = text.replace(BAD, token, 1)
    path.write_text(text)
    return path


NCCL_SAMPLE = "hta_nccl_parser_config__nccl_data.json.gz"  # deviceProperties, base, External id
SMALL_SAMPLE = "hta_trace_filter__sampled_rank-0.json.gz"  # 4,855 events


@pytest.fixture(scope="module")
def nccl_doc(shared_samples: Path) -> dict[str, Any]:
    return _sample_doc(shared_samples, NCCL_SAMPLE)


@pytest.fixture(scope="module")
def nccl_clean(nccl_doc: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Parsed:
    return Parsed(_write(tmp_path_factory.mktemp("clean") / "rank0.json", nccl_doc))


def _heights(p: Parsed) -> dict[str, int]:
    return {t: p.height(t) for t in ("kernels", "markers", "comm_ops", "trace_meta")}


def _line_of(doc: dict[str, Any], ev: dict[str, Any]) -> int:
    """The 1-based event number (``source_line``) of ``ev`` in ``doc``."""
    return next(i for i, e in enumerate(doc["traceEvents"], 1) if e is ev)


def _first(doc: dict[str, Any], cat: str, key: str | None = None) -> dict[str, Any]:
    """The first event of category ``cat`` (with ``args[key]`` when ``key`` is given)."""
    for ev in doc["traceEvents"]:
        if (
            ev.get("cat") == cat
            and ev.get("ph") == "X"
            and (key is None or key in ev.get("args", {}))
        ):
            return ev  # type: ignore[no-any-return]
    raise AssertionError(f"no {cat} event in the sample")


# --------------------------------------------------------------------------------------------
# Kineto: values out of range in the header, the trailer and in events


@pytest.mark.parametrize(
    ("where", "token"),
    [
        ("totalGlobalMem", str(2**64 - 1)),
        ("totalGlobalMem", "NaN"),
        ("totalGlobalMem", "1e400"),
        ("rank", str(10**30)),
        ("rank", str(2**40)),
        ("rank", "-7"),
        ("baseTimeNanoseconds", str(2**70)),
        ("baseTimeNanoseconds", "-Infinity"),
    ],
)
def test_kineto_bad_top_level_value_keeps_the_trace(
    nccl_doc: dict[str, Any], nccl_clean: Parsed, tmp_path: Path, where: str, token: str
) -> None:
    """REAL sample, one top-level value out of range: every event is still read.

    It used to drop the whole trace (0 events, exit 0) or fail it as an internal error.
    """
    doc = json.loads(json.dumps(nccl_doc))
    if where == "totalGlobalMem":
        doc["deviceProperties"][0]["totalGlobalMem"] = "__BAD__"
    elif where == "rank":
        doc["distributedInfo"]["rank"] = "__BAD__"
    else:
        doc["baseTimeNanoseconds"] = "__BAD__"
    p = Parsed(_write(tmp_path / "trace.json", doc, token))
    assert p.counts == nccl_clean.counts
    assert _heights(p) == _heights(nccl_clean)
    meta = p.get("trace_meta")
    if where == "rank":
        assert meta["rank"].to_list() == [None]  # not a wrapped or clamped number
        assert any("distributedInfo" in w and "out of range" in w for w in p.warnings)
    elif where == "baseTimeNanoseconds":
        assert any("baseTimeNanoseconds" in w for w in p.warnings)
        assert meta["aligned"].to_list() == [False]  # relative ts without its base
    else:
        assert meta["rank"].to_list() == nccl_clean.get("trace_meta")["rank"].to_list()
        if token != str(2**64 - 1):  # NaN/1e400 also read as null by Python's json
            assert any("totalGlobalMem" not in w or "null" in w for w in p.warnings)


@pytest.mark.parametrize(
    ("cat", "key", "token"),
    [
        ("kernel", "External id", str(2**64)),
        ("kernel", "External id", "NaN"),
        ("kernel", "correlation", "Infinity"),
        ("kernel", "stream", "-Infinity"),
        ("kernel", "device", "1e400"),
        ("cpu_op", "External id", str(-(2**64))),
        ("cpu_op", "Sequence number", "9" * 5000),
    ],
)
def test_kineto_bad_arg_costs_that_value(
    nccl_doc: dict[str, Any],
    nccl_clean: Parsed,
    tmp_path: Path,
    cat: str,
    key: str,
    token: str,
) -> None:
    """REAL sample, one arg of one event out of range: only that value is lost (null).

    ``External id`` of 2**64 or a NaN used to cost the rest of the trace (an "unreadable
    tail" after the event before it).
    """
    doc = json.loads(json.dumps(nccl_doc))
    ev = _first(doc, cat, key if key != "Sequence number" else None)
    ev.setdefault("args", {})[key] = "__BAD__"
    p = Parsed(_write(tmp_path / "trace.json", doc, token))
    assert p.counts == nccl_clean.counts
    assert _heights(p) == _heights(nccl_clean)
    assert any("1 event(s) hold a number out of range" in w for w in p.warnings)
    if key == "correlation":  # the kernel is kept, without its correlation
        row = p.get("kernels").filter(pl.col("source_line") == _line_of(doc, ev))
        assert row["correlation"].to_list() == [None]


def test_kineto_non_scalar_tid_is_no_thread(tmp_path: Path) -> None:
    """A range whose ``tid`` is a list (found by tests/fuzz/test_fuzz_kineto.py) used to crash
    the launch-to-kernel linking (an unhashable dict key); now it is a call on no thread."""
    doc = {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "nccl:all_reduce",
                "pid": 7,
                "tid": [],
                "ts": 10.0,
                "dur": 5.0,
                "args": {"External id": 1},
            },
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mul",
                "pid": 7,
                "tid": 8,
                "ts": 20.0,
                "dur": 1.0,
                "args": {"External id": 2},
            },
        ]
    }
    p = Parsed(_write(tmp_path / "trace.json", doc))
    assert p.get("comm_ops")["op"].to_list() == ["all_reduce"]


@pytest.mark.parametrize(
    ("field", "token", "reason"),
    [
        ("ts", "NaN", "out of range"),
        ("ts", "Infinity", "out of range"),
        ("dur", "-Infinity", "out of range"),
        ("ts", "1e400", "out of range"),
        ("ts", "1e300", "out of range"),
        ("dur", "1e300", "out of range"),
        ("ts", "-1e18", "out of range"),
        ("dur", "-5", "negative duration"),
        ("ts", str(2**64), "out of range"),
    ],
)
def test_kineto_bad_time_rejects_that_event(
    nccl_doc: dict[str, Any],
    nccl_clean: Parsed,
    tmp_path: Path,
    field: str,
    token: str,
    reason: str,
) -> None:
    """REAL sample, one kernel's ts/dur unusable: that kernel is a reject with the reason.

    NaN used to cost the rest of the trace, 1e300 failed the file ("internal error") and
    -1e18 µs wrapped silently to a wrong ts_ns.
    """
    doc = json.loads(json.dumps(nccl_doc))
    ev = _first(doc, "kernel")
    ev[field] = "__BAD__"
    p = Parsed(_write(tmp_path / "trace.json", doc, token))
    clean = nccl_clean.counts
    assert p.counts.total == clean.total
    assert p.counts.rejected == clean.rejected + 1
    assert p.counts.parsed == clean.parsed - 1
    assert p.height("kernels") == nccl_clean.height("kernels") - 1
    assert p.height("comm_ops") == nccl_clean.height("comm_ops")
    (why,) = p.reasons()
    assert reason in why
    # no wrapped time: every kept ts_ns is one the clean parse has too
    assert set(p.get("kernels")["ts_ns"].to_list()) <= set(nccl_clean.get("kernels")["ts_ns"])


def test_kineto_rank_out_of_range_in_file_name_or_option(tmp_path: Path) -> None:
    """SYNTHETIC: a rank of 10**30 from the file name or --rank is unknown, not a failure."""
    doc = {"traceEvents": [_kernel(i) for i in range(3)]}
    p = Parsed(_write(tmp_path / f"rank{10**30}.json", doc))
    assert p.get("trace_meta")["rank"].to_list() == [None]
    assert p.height("kernels") == 3
    p = Parsed(_write(tmp_path / "trace.json", doc), rank=2**40)
    assert p.get("trace_meta")["rank"].to_list() == [None]
    assert any("--rank" in w and "out of range" in w for w in p.warnings)


def _kernel(i: int, **over: Any) -> dict[str, Any]:
    ev = {
        "ph": "X",
        "cat": "kernel",
        "name": f"ampere_sgemm_{i}",
        "pid": 0,
        "tid": 7,
        "ts": 1_700_000_000_000_000.0 + 10 * i,
        "dur": 5.0,
        "args": {"device": 0, "stream": 7, "correlation": i},
    }
    ev.update(over)
    return ev


@pytest.mark.parametrize("piece", [64, None])
@pytest.mark.parametrize(
    "token", ["NaN", "Infinity", "-Infinity", "1e400", str(2**64), "-" + "9" * 400]
)
def test_kineto_every_event_kept_around_a_bad_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, piece: int | None, token: str
) -> None:
    """SYNTHETIC: 40 kernels, one with a bad number in an unread arg and one in ts.

    Whatever the piece size (64 bytes: every event a piece of its own), 39 kernels are kept,
    the one with the bad ts is the only reject, and the count is exact.
    """
    import commscope.parsers._kineto_events as events_mod

    if piece is not None:
        monkeypatch.setattr(events_mod, "PIECE_BYTES", piece)
    events = [_kernel(i) for i in range(40)]
    events[5]["args"]["unread"] = "__BAD__"
    events[30]["ts"] = "__BAD__"
    text = json.dumps({"traceEvents": events}, indent=1)
    text = text.replace(BAD, token)
    path = tmp_path / "trace.json"
    path.write_text(text)
    p = Parsed(path)
    assert p.counts == LineCounts(total=40, parsed=39, ignored=0, rejected=1)
    assert p.get("kernels")["source_line"].to_list() == [i + 1 for i in range(40) if i != 30]
    (why,) = p.reasons()
    assert "read as null" in why
    assert p.get("rejects")["line_no"].to_list() == [31]


# --------------------------------------------------------------------------------------------
# Kineto: oversized strings (item 7): linear, bounded, the rest kept


def test_value_scanner_crosses_strings_and_escapes() -> None:
    """The scanner finds a value's end across blocks, with escapes cut at a block end."""
    value = b'{"a": "x\\"}]\\\\", "b": [1, {"c": "]"}], "d": "' + b"y\\n" * 1000 + b'"}'
    for block in (1, 2, 3, 7, 64, len(value) + 5):
        scan = ValueScanner()
        data = value + b", 5"
        ends = []
        for start in range(0, len(data), block):
            end = scan.feed(data[start : start + block])
            if end is not None:
                ends.append(start + end)
                break
        assert ends == [len(value)], block
    assert ValueScanner().feed(b"  12345 ]") == 7
    assert ValueScanner().feed(b'"abc\\"d"  ') == 8


def test_kineto_oversized_string_in_an_event_rejects_that_event(tmp_path: Path) -> None:
    """SYNTHETIC: a 24 MB kernel name (over :data:`MAX_EVENT_BYTES`): that event is a reject
    with the reason and is skipped unread; the events around it are kept.

    A 300 MB string used to take 8.6 min (ijson's cost grows with the square of a string).
    """
    size = 3 * MAX_EVENT_BYTES
    events = [_kernel(i) for i in range(6)]
    events[2]["name"] = "__BAD__"
    text = json.dumps({"schemaVersion": 1, "traceEvents": events, "displayTimeUnit": "ms"})
    # escapes and brackets inside the string: nothing in it may end the event early
    huge = '"' + ('k\\"}, {]' * (size // 8)) + '"'
    path = tmp_path / "trace.json"
    path.write_text(text.replace(BAD, huge))
    p = Parsed(path)
    assert p.counts == LineCounts(total=6, parsed=5, ignored=0, rejected=1)
    assert p.get("kernels")["source_line"].to_list() == [1, 2, 4, 5, 6]
    (why,) = p.reasons()
    assert f"exceeds the limit of {MAX_EVENT_BYTES} bytes" in why
    assert len(p.get("rejects")["raw"][0]) <= 4096


def test_kineto_oversized_event_last_and_cut(tmp_path: Path) -> None:
    """SYNTHETIC: an oversized last event is a reject; one cut by the end of the file is the
    unreadable tail; either way the events before it are kept and the count is exact."""
    events = [_kernel(i) for i in range(3)]
    events.append(_kernel(3, name="__BAD__"))
    text = json.dumps({"traceEvents": events})
    huge = '"' + "z" * (MAX_EVENT_BYTES + 10) + '"'
    path = tmp_path / "trace.json"
    path.write_text(text.replace(BAD, huge))
    p = Parsed(path)
    assert p.counts == LineCounts(total=4, parsed=3, ignored=0, rejected=1)
    cut = text.replace(BAD, huge)[: -len(text) // 4]
    path.write_text(cut)
    p = Parsed(path)
    assert p.height("kernels") == 3
    assert p.counts.rejected == 1 and p.counts.total == 4
    assert "unreadable tail" in p.reasons()[0]


def test_kineto_oversized_header_value_is_skipped(tmp_path: Path) -> None:
    """SYNTHETIC: a header key larger than :data:`MAX_HEADER_VALUE` (before ``traceEvents``)
    is skipped with a warning naming it; the other keys and every event are read.

    A 300 MB header string used to take 13.8 min (ijson's token stream).
    """
    events = [_kernel(i) for i in range(4)]
    doc = {
        "schemaVersion": 1,
        "INFO": "__BAD__",
        "distributedInfo": {"rank": 3, "world_size": 4},
        "traceEvents": events,
    }
    huge = '"' + ("i\\u00e9[{" * (MAX_HEADER_VALUE // 8 + 1000)) + '"'
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(doc).replace(BAD, huge))
    p = Parsed(path)
    assert p.counts == LineCounts(total=4, parsed=4, ignored=0, rejected=0)
    assert p.get("trace_meta")["rank"].to_list() == [3]
    assert any("'INFO' skipped" in w and "exceeds the limit" in w for w in p.warnings)


def test_kineto_invalid_utf8_in_one_event_keeps_the_rest(tmp_path: Path) -> None:
    """SYNTHETIC: invalid UTF-8 in one kernel name costs that name's bytes (U+FFFD), not the
    rest of the trace (it used to end the trace at that event)."""
    events = [_kernel(i) for i in range(10)]
    events[4]["name"] = "__BAD__"
    data = json.dumps({"traceEvents": events}).encode().replace(b'"__BAD__"', b'"k\xff\xfe"')
    path = tmp_path / "trace.json"
    path.write_bytes(data)
    p = Parsed(path)
    assert p.counts == LineCounts(total=10, parsed=10, ignored=0, rejected=0)
    assert p.get("kernels")["name"][4] == "k\ufffd\ufffd"


def test_kineto_only_bad_events_is_all_rejects(tmp_path: Path) -> None:
    """SYNTHETIC: every kernel has a NaN ts: all rejected with the reason, none stored."""
    events = [_kernel(i, ts="__BAD__") for i in range(5)]
    text = json.dumps({"traceEvents": events}).replace(BAD, "NaN")
    path = tmp_path / "trace.json"
    path.write_text(text)
    p = Parsed(path)
    assert p.counts == LineCounts(total=5, parsed=0, ignored=0, rejected=5)
    assert all("read as null" in r for r in p.reasons())


# --------------------------------------------------------------------------------------------
# DeepSpeed: one bad line costs that line; ranks; linear regexes on long lines

DS_VERBOSE = "deepspeed_comms/ds_pr2012_docs_verbose_v0.7_format.log"
DS_SUMMARY = "deepspeed_comms/ds_pr2012_docs_log_summary_zero3.txt"


def _ds_lines(shared: Path, name: str) -> list[str]:
    return (shared / name).read_text().splitlines()


def test_deepspeed_huge_size_costs_that_line(shared_samples: Path, tmp_path: Path) -> None:
    """REAL line x 40 plus the same line with a 5,000-digit size: 40 rows and one reject.

    The whole file used to fail (int() of more than 4,300 digits raised).
    """
    good = _ds_lines(shared_samples, DS_VERBOSE)[0]
    size = re.search(r"msg size: ([0-9.]+) ", good)
    assert size is not None
    bad = good.replace(size.group(1), "9" * 5000, 1)
    path = tmp_path / "ds.log"
    path.write_text("\n".join([good] * 20 + [bad] + [good] * 20) + "\n")
    p = Parsed(path, "deepspeed_comms")
    assert p.counts == LineCounts(total=41, parsed=40, ignored=0, rejected=1)
    assert p.height("comm_ops") == 40
    assert p.get("rejects")["line_no"].to_list() == [21]
    assert "out of range" in p.reasons()[0]


@pytest.mark.parametrize(
    "rank", ["[Rank -7] rank=-7", "[Rank -7] rank=0", "[Rank 99999999999] rank=0"]
)
def test_deepspeed_bad_rank_is_a_reject(shared_samples: Path, tmp_path: Path, rank: str) -> None:
    """REAL line with ``[Rank -7]`` or a rank beyond int32: a reject with the reason, never a
    row of rank -7 (it used to be stored as rank -7) nor of a rank made up from elsewhere."""
    good = _ds_lines(shared_samples, DS_VERBOSE)[0]
    assert "[Rank 0] rank=0" in good
    bad = good.replace("[Rank 0] rank=0", rank)
    path = tmp_path / "ds.log"
    path.write_text("\n".join([good] * 5 + [bad] + [good] * 5) + "\n")
    p = Parsed(path, "deepspeed_comms")
    assert p.counts == LineCounts(total=11, parsed=10, ignored=0, rejected=1)
    assert p.get("comm_ops")["rank"].unique().to_list() == [0]
    assert "rank is negative or out of range" in p.reasons()[0]


def test_deepspeed_summary_row_huge_count_costs_that_row(
    shared_samples: Path, tmp_path: Path
) -> None:
    """REAL summary table with one row's count 5,000 digits long and one latency beyond float:
    those rows are rejects, every other row is kept (the file used to fail)."""
    lines = _ds_lines(shared_samples, DS_SUMMARY)
    clean = tmp_path / "clean.log"
    clean.write_text("\n".join(lines) + "\n")
    base = Parsed(clean, "deepspeed_comms")
    rows = [i for i, line in enumerate(lines) if re.match(r" {20}[0-9]", line)]
    assert len(rows) > 4
    bad = list(lines)
    i, j = rows[1], rows[3]
    cells = bad[i].split()
    bad[i] = bad[i].replace(f" {cells[2]} ", " " + "7" * 5000 + " ", 1)
    bad[j] = bad[j].replace(bad[j].split()[3], "9" * 400 + ".00", 1)
    path = tmp_path / "ds.log"
    path.write_text("\n".join(bad) + "\n")
    p = Parsed(path, "deepspeed_comms")
    assert p.counts.total == base.counts.total
    assert p.counts.rejected == base.counts.rejected + 2
    assert p.height("comm_summaries") == base.height("comm_summaries") - 2
    assert sorted(p.get("rejects")["line_no"].to_list()) == [i + 1, j + 1]


def test_deepspeed_ms_beyond_int64_ns_is_a_reject(shared_samples: Path, tmp_path: Path) -> None:
    """REAL line with a latency whose ns do not fit int64: a reject, not a wrapped duration."""
    good = _ds_lines(shared_samples, DS_VERBOSE)[0]
    ms = re.search(r"time \(ms\): ([0-9.]+) ", good)
    assert ms is not None
    bad = good.replace(f"time (ms): {ms.group(1)} ", "time (ms): 99999999999999.99 ", 1)
    path = tmp_path / "ds.log"
    path.write_text("\n".join([good, bad, good]) + "\n")
    p = Parsed(path, "deepspeed_comms")
    assert p.counts == LineCounts(total=3, parsed=2, ignored=0, rejected=1)
    assert (p.get("comm_ops")["dur_ns"] >= 0).all()


_DS_LONG_SHAPES = {
    "digits": "1" * 1000,  # a record-name line of digits (the tqdm prefix alternative)
    "tqdm": "9" * 1000 + "%|",
    "callers": "x | [Caller Func: " * 60,  # the caller split
    "labels": "ab: " * 250,
}


@pytest.mark.parametrize("shape", sorted(_DS_LONG_SHAPES))
def test_deepspeed_long_line_after_summary_header_is_linear(
    shared_samples: Path, tmp_path: Path, shape: str
) -> None:
    """REAL summary header, then a 400 KB record-name line, then a data row: parsed in a
    subprocess under a generous hang guard (60 s). Quadratic backtracking took 38 s on a
    200 KB line, 4x that on 400 KB; linear scans take milliseconds."""
    import subprocess
    import sys

    lines = _ds_lines(shared_samples, DS_SUMMARY)
    header = next(line for line in lines if line.startswith("Comm. Op"))
    row = next(line for line in lines if re.match(r" {20}[0-9]", line))
    unit = _DS_LONG_SHAPES[shape]
    name = (unit * (400_000 // len(unit) + 1))[:400_000]
    path = tmp_path / "ds.log"
    path.write_text("\n".join([header, name, row]) + "\n")
    code = (
        "import sys; from pathlib import Path; from commscope.parsers._io import Source; "
        "from commscope.parsers.registry import load_all; "
        "p = load_all()['deepspeed_comms']; "
        "n = sum(c.counts.total for c in p.parse(Source(Path(sys.argv[1])), run_id='t')); "
        "print(n)"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.split() == ["3"]


# --------------------------------------------------------------------------------------------
# ingest: keeping less than was read is said; nothing usable is an error


def _ingest(tmp_path: Path, *paths: Path, fmt: str | None = None) -> Any:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    args = [sys.executable, "-m", "commscope", "ingest", *map(str, paths), "--run", "r"]
    args += ["--store", str(tmp_path / "store")]
    if fmt:
        args += ["--format", fmt]
    return subprocess.run(args, cwd=root, capture_output=True, text=True, timeout=300)


def test_ingest_says_what_it_rejected_and_fails_on_nothing_usable(
    shared_samples: Path, tmp_path: Path
) -> None:
    """REAL DeepSpeed line: a file with one bad line says "kept 40 of 41 lines; 1 rejected:
    <reason>"; a file whose every line is rejected makes the ingest exit 1 with one line
    naming it and the reason (it used to print "ingested" and exit 0)."""
    good = _ds_lines(shared_samples, DS_VERBOSE)[0]
    partial = tmp_path / "partial.log"
    bad = good.replace("[Rank 0] rank=0", "[Rank -7] rank=-7")
    partial.write_text("\n".join([good] * 40 + [bad]) + "\n")
    unusable = tmp_path / "unusable.log"
    unusable.write_text("\n".join([bad] * 3) + "\n")
    proc = _ingest(tmp_path, partial, unusable, fmt="deepspeed_comms")
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {ln.split()[0]: ln for ln in proc.stdout.splitlines() if ln.startswith(str(tmp_path))}
    assert "kept 40 of 41 lines; 1 rejected: verbose comm op line: rank" in rows[str(partial)]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("commscope: error:")]
    assert errors == [
        f"commscope: error: {unusable}: nothing usable: 3 of 3 lines rejected: "
        "verbose comm op line: rank is negative or out of range"
    ]
    proc = _ingest(tmp_path / "b", partial)
    assert proc.returncode == 0, proc.stderr


def test_ingest_kineto_all_events_bad_is_an_error(tmp_path: Path) -> None:
    """SYNTHETIC trace whose every kernel has a NaN ts: exit 1, the file named, the reason."""
    events = [_kernel(i, ts="__BAD__") for i in range(4)]
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps({"traceEvents": events}).replace(BAD, "NaN"))
    proc = _ingest(tmp_path, path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"commscope: error: {path}: nothing usable: 4 of 4 events rejected: " in proc.stderr


# --------------------------------------------------------------------------------------------
# nsys and NCCL debug: out-of-range numbers cost that value or line


NSYS_SAMPLE = "nsys/nvfuser_report1.sqlite"


def test_nsys_rank_out_of_range_is_unknown_not_a_failed_file(
    shared_samples: Path, tmp_path: Path
) -> None:
    """REAL nsys export: a rank option of 2**40, and (in a copy) an ``MPI_RANKS`` row with
    rank 2**40: every row is kept with a null rank and a warning (the file used to fail:
    "conversion from i64 to i32 failed")."""
    import shutil
    import sqlite3

    src = shared_samples / NSYS_SAMPLE
    clean = Parsed(src, "nsys")
    p = Parsed(src, "nsys", rank=2**40)
    assert p.counts == clean.counts
    assert p.height("kernels") == clean.height("kernels")
    assert any("rank option 1099511627776 out of range" in w for w in p.warnings)
    copy = tmp_path / "mpi.sqlite"
    shutil.copy(src, copy)
    con = sqlite3.connect(copy)
    (gid,) = con.execute("SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1").fetchone()
    con.execute("CREATE TABLE MPI_RANKS (globalTid INTEGER, rank INTEGER)")
    con.execute("INSERT INTO MPI_RANKS VALUES (?, ?)", (gid, 2**40))
    con.commit()
    con.close()
    p = Parsed(copy, "nsys")
    assert p.counts == clean.counts
    assert p.get("kernels")["rank"].unique().to_list() == [None]
    assert any("out of range" in w and "mpi_ranks" in w for w in p.warnings)


NCCL_SAMPLE_LOG = "nccl_debug/gfbench_2.20.5_2rank_normal_rank0_debugfile.txt"


@pytest.mark.parametrize("digits", [25, 5000])
@pytest.mark.parametrize("what", ["pid", "tid", "dev", "init_rank", "topology"])
def test_nccl_debug_number_out_of_range_costs_that_line(
    shared_samples: Path, tmp_path: Path, what: str, digits: int
) -> None:
    """REAL NCCL log, one number (prefix pid/tid/device, an Init line's rank, a topology
    line's channel) made 25 or 5,000 digits long: the file still parses, with the same line
    count and at most that line lost (it used to fail as "internal error")."""
    lines = (shared_samples / NCCL_SAMPLE_LOG).read_text().split("\n")
    big = "9" * digits
    patterns = {
        "pid": (r"^([^:\s]+):(\d+):", lambda m: f"{m.group(1)}:{big}:"),
        "tid": (r"^([^:\s]+):(\d+):(\d+) ", lambda m: f"{m.group(1)}:{m.group(2)}:{big} "),
        "dev": (r" \[(\d+)\] NCCL INFO", lambda m: f" [{big}] NCCL INFO"),
        "init_rank": (r"comm 0x[0-9a-f]+ rank (\d+) nranks", None),
        "topology": (r"NCCL INFO (?:Channel|Ring|Tree) (\d+)", None),
    }
    pattern, sub = patterns[what]
    i = next(k for k, line in enumerate(lines) if re.search(pattern, line))
    m = re.search(pattern, lines[i])
    assert m is not None
    if sub is None:
        lines[i] = lines[i][: m.start(1)] + big + lines[i][m.end(1) :]
    else:
        lines[i] = re.sub(pattern, sub, lines[i], count=1)
    clean = tmp_path / "clean.log"
    clean.write_text((shared_samples / NCCL_SAMPLE_LOG).read_text())
    base = Parsed(clean, "nccl_debug")
    path = tmp_path / "nccl.log"
    path.write_text("\n".join(lines))
    p = Parsed(path, "nccl_debug")
    assert p.counts.total == base.counts.total
    assert p.counts.parsed >= base.counts.parsed - 1
    assert p.height("comm_ops") >= base.height("comm_ops") - 1


def test_kineto_overlong_name_rejects_that_event(tmp_path: Path) -> None:
    """SYNTHETIC: a 100,000-character kernel name (under the event limit) makes that event a
    reject with the reason; a 5,000-character collective name in args is no collective name.
    Stored strings stay bounded per value, so row buffers and name caches do too."""
    from commscope.parsers.kineto import MAX_NAME_CHARS

    events = [_kernel(i) for i in range(4)]
    events[1]["name"] = "k" * 100_000
    events[2]["args"]["Collective name"] = "a" * 5000
    path = _write(tmp_path / "trace.json", {"traceEvents": events})
    p = Parsed(path)
    assert p.counts == LineCounts(total=4, parsed=3, ignored=0, rejected=1)
    assert p.reasons() == [f"name longer than {MAX_NAME_CHARS} characters"]
