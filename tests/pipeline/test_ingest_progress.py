"""Progress and totals of an ingest (issue 21, item 4): rate, ETA, files, lines, rows, MB/s.

The progress line is checked with a fake terminal and a fake clock (no timing); the totals line
against the per-file results it sums, and end to end through the CLI on a real sample.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from commscope.parsers.registry import LineCounts
from commscope.pipeline.cli import main
from commscope.pipeline.ingest import FileResult, ingest_totals, stderr_progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _result(mb: float, total: int = 10, parsed: int = 6, rejected: int = 1) -> FileResult:
    return FileResult(
        path="f",
        status="ingested",
        format="nccl_debug",
        counts=LineCounts(
            total=total, parsed=parsed, ignored=total - parsed - rejected, rejected=rejected
        ),
        rows={"comm_ops": parsed, "rejects": rejected},
        bytes=int(mb * 1e6),
    )


def test_progress_line_has_rate_and_eta() -> None:
    now = [100.0]
    out = _Tty()
    report = stderr_progress(300_000_000, stream=out, clock=lambda: now[0], min_bytes=0)
    now[0] += 10.0  # 100 MB in 10 s: 10 MB/s, 200 MB left: ETA 20 s
    report(_result(100), 1, 3)
    assert out.getvalue() == "\r[1/3 files,  33.3% of 300 MB, 10.0 MB/s, ETA 20 s]"
    now[0] += 20.0
    report(_result(200), 3, 3)
    assert out.getvalue().endswith("\r[3/3 files, 100.0% of 300 MB, 10.0 MB/s, 30.0 s]\n")


def test_progress_silent_off_a_terminal_or_for_small_inputs() -> None:
    out = io.StringIO()
    stderr_progress(10**10, stream=out, min_bytes=0)(_result(1), 1, 1)
    tty = _Tty()
    stderr_progress(1000, stream=tty)(_result(0.001), 1, 1)
    assert out.getvalue() == tty.getvalue() == ""


def test_totals_sum_the_files() -> None:
    line = ingest_totals([_result(2.0), _result(3.0, total=20, parsed=10, rejected=0)], 2.0)
    assert line == (
        "total: 2 files (2 ok), 30 lines (16 parsed, 13 ignored, 1 rejected), 17 rows, "
        "5.0 MB in 2.0 s (2.50 MB/s)"
    )


def test_cli_prints_the_totals(
    tmp_path: Path, shared_samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = sorted(
        (shared_samples / "nccl_debug").glob("gfbench_2.20.5_2rank_normal_rank*_debugfile.txt")
    )
    assert len(files) == 2
    rc = main(["ingest", "--store", str(tmp_path / "s"), "--run", "r", *map(str, files)])
    out = capsys.readouterr().out
    assert rc == 0, out
    m = re.search(
        r"^total: 2 files \(2 ok\), (\d+) lines \((\d+) parsed, (\d+) ignored, "
        r"(\d+) rejected\), (\d+) rows, ([\d.]+) kB in [\d.]+ s",
        out,
        re.M,
    )
    assert m, out
    lines = sum(f.read_bytes().count(b"\n") for f in files)  # both end with a newline
    assert int(m[1]) == lines == int(m[2]) + int(m[3]) + int(m[4])
    assert float(m[6]) == pytest.approx(sum(f.stat().st_size for f in files) / 1e3, abs=0.05)
