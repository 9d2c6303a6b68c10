"""``bench/floor_native.py``: the native floor must do the regex script's work, or its speed
bounds nothing.

On the real samples the bench repeats (nccl-tests log, DeepSpeed verbose log), the floor's
Parquet rows must equal, field by field and in line order, what a plain Python reader pulls out
with the regex script's own patterns (``bench/baseline_regex.py``), and its line classes must
add up to the file's lines. No timing.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from bench.baseline_regex import DS_COMM, NCCL_COLL
from bench.floor_native import run
from bench.ingest_scale import DEEPSPEED, NCCLTESTS

_AT_LINE_START = re.compile(r"[^\s:\[\]]+:\d+:\d+ \[\d+\] ")


def _lines(path: Path) -> list[str]:
    """Lines cut at ``\n`` only, as the parsers number them (text mode would also cut at the
    ``\r`` of the DeepSpeed log's progress bars)."""
    body = path.read_bytes().decode("utf-8", errors="replace")
    return body.split("\n")[:-1] if body.endswith("\n") else body.split("\n")


@pytest.mark.skipif(not NCCLTESTS.exists(), reason=f"{NCCLTESTS} absent")
def test_coll_rows_are_the_regex_scripts(tmp_path: Path) -> None:
    want = []
    for no, line in enumerate(_lines(NCCLTESTS), start=1):
        m = NCCL_COLL.search(line)
        # the floor takes a COLL line whose prefix opens the line (not glued to other output)
        if m and _AT_LINE_START.fullmatch(line[: m.start()]):
            op, opc, count, dt, redop, root, comm, nranks = m.groups()
            want.append(
                (
                    no,
                    op,
                    int(opc, 16),
                    int(count),
                    int(dt),
                    int(redop),
                    int(root),
                    comm,
                    int(nranks),
                )
            )
    got = run(NCCLTESTS, tmp_path / "f.parquet")
    rows = pl.read_parquet(tmp_path / "f.parquet").select(
        "line_no", "op", "opcount", "count", "datatype", "redop", "root", "comm", "nranks"
    )
    assert rows.rows() == want
    assert got["rows"] == got["coll"] == len(want) > 900
    assert got["lines"] == len(_lines(NCCLTESTS))
    assert got["lines"] == got["coll"] + got["comm_op"] + got["nccl_other"] + got["rest"]


@pytest.mark.skipif(not DEEPSPEED.exists(), reason=f"{DEEPSPEED} absent")
def test_comm_op_rows_are_the_regex_scripts(tmp_path: Path) -> None:
    want = []
    for no, line in enumerate(_lines(DEEPSPEED), start=1):
        m = DS_COMM.search(line)
        if m:
            op, ms, size, alg, bus = m.groups()
            want.append((no, op, float(ms), size, float(alg), float(bus)))
    got = run(DEEPSPEED, tmp_path / "f.parquet")
    rows = pl.read_parquet(tmp_path / "f.parquet").select(
        "line_no", "op", "time_ms", "msg_size", "algbw", "busbw"
    )
    assert rows.rows() == want
    assert got["rows"] == got["comm_op"] == len(want) > 3000
    assert got["lines"] == got["coll"] + got["comm_op"] + got["nccl_other"] + got["rest"]
