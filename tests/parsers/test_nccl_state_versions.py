"""Resume states of the NCCL parser across versions (issue 21, item 1).

The parser writes state version 2 (lifecycle events as columns); stores written before it hold
version 1 (events as ``[line_no, host, pid, tid, kind, fields, spliced]`` rows). A version-1
state written by main's parser (72eb4fd, ``data/nccl_state_v1_main.json``: the first half of a
generated 12-rank log) must resume exactly as the version-2 state of the same prefix does, and
the two states must carry the same content (:func:`state_v1`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from commscope.parsers._io import Source
from commscope.parsers.nccl_debug import STATE_VERSION, NcclDebugParser, state_v1

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "data" / "nccl_state_v1_main.json"


def _log(tmp: Path) -> tuple[Path, int, dict[str, Any]]:
    sys.path.insert(0, str(ROOT))
    from bench.ingest_scale import interleaved_log

    fx = json.loads(FIXTURE.read_text())
    path = interleaved_log(tmp / "incs.log", **fx["log"])
    return path, int(fx["cut"]), fx["state"]


def _parse(path: Path, **kw: Any) -> tuple[dict[str, pl.DataFrame], list[Any], dict[str, Any]]:
    frames: dict[str, list[pl.DataFrame]] = {}
    meta: list[Any] = []
    state: dict[str, Any] = {}
    source = kw.pop("source")
    for chunk in NcclDebugParser().parse(source, run_id="r", **kw):
        for name, df in chunk.tables.items():
            frames.setdefault(name, []).append(df)
        meta.append((chunk.counts, chunk.warnings))
        if chunk.state is not None:
            state = chunk.state
    return {k: pl.concat(v) for k, v in frames.items()}, meta, state


def _canonical(state: dict[str, Any]) -> str:
    return json.dumps(state, sort_keys=True, default=str)


def test_v2_state_holds_the_v1_content(tmp_path: Path) -> None:
    path, cut, v1 = _log(tmp_path)
    assert v1["v"] == 1 and len(v1["events"]) > 10
    _, _, v2 = _parse(path, source=Source(path, end_offset=cut))
    assert v2["v"] == STATE_VERSION == 2
    assert isinstance(v2["events"], dict)  # columns, not rows
    assert _canonical(state_v1(v2)) == _canonical(v1)
    assert state_v1(v1) is v1  # a version-1 state is already in that form


@pytest.mark.parametrize("which", ["v1_from_main", "v2"])
def test_resume_from_either_version_equals_one_parse(tmp_path: Path, which: str) -> None:
    path, cut, v1 = _log(tmp_path)
    data = path.read_bytes()
    line_no = data.count(b"\n", 0, cut) + 1
    if which == "v2":
        _, _, prior = _parse(path, source=Source(path, end_offset=cut))
    else:
        prior = v1
    tail = Source(path, start_offset=cut, first_line_no=line_no)
    got, meta, end = _parse(path, source=tail, resume=prior)
    # the same rows as the tail of one parse of the whole file
    whole, _, whole_end = _parse(path, source=Source(path))
    ops = whole["comm_ops"].filter(pl.col("source_line") >= line_no)
    assert got["comm_ops"].equals(ops)
    assert got["comm_ops"].height > 0 and got["comm_ops"]["rank"].null_count() == 0
    # communicators: only those not emitted by the first half, as one parse gives them
    new = whole["communicators"].join(
        _parse(path, source=Source(path, end_offset=cut))[0]["communicators"],
        on=list(whole["communicators"].columns),
        how="anti",
        nulls_equal=True,
    )
    assert got["communicators"].sort("source_line").equals(new.sort("source_line"))
    assert end["v"] == STATE_VERSION
    assert _canonical(state_v1(end)) == _canonical(state_v1(whole_end))
    assert all(not w for _, w in meta)


def test_unknown_state_version_is_ignored(tmp_path: Path) -> None:
    """A state of a version this parser does not know resumes nothing (a full registry is
    not guessed from it): the tail parses as a file of its own."""
    path, cut, _ = _log(tmp_path)
    data = path.read_bytes()
    tail = Source(path, start_offset=cut, first_line_no=data.count(b"\n", 0, cut) + 1)
    plain, _, _ = _parse(path, source=tail)
    odd, _, _ = _parse(path, source=tail, resume={"v": 99, "events": {"line_no": [1]}})
    assert odd["comm_ops"].equals(plain["comm_ops"])


@pytest.mark.parametrize("n", [0, 1, 5])
def test_event_columns_round_trip(n: int) -> None:
    """The version-2 encoding of event columns (values joined by a separator, nulls empty)
    reads back the same rows, and falls back to a list for a value the join cannot hold."""
    from commscope.parsers.nccl_debug import communicators as c

    rows = {
        "line_no": list(range(1, n + 1)),
        "host": [f"h{i}" for i in range(n)],
        "pid": [7] * n,
        "tid": [i * 3 for i in range(n)],
        "kind": ["START", "END", "COMPLETE", "START", "END"][:n],
        "spliced": [i % 2 == 0 for i in range(n)],
        **{f: [None] * n for f in c._EVENT_FIELDS},
    }
    rows["comm"] = [f"0x{i}" for i in range(n)]
    rows["rank"] = [None if i == 1 else str(i) for i in range(n)]
    if n:
        rows["parent"] = ["a b"] + [None] * (n - 1)  # holds the separator: kept as a list
    ev = pl.DataFrame(rows, schema=c._EVENT_SCHEMA)
    enc = c._encode_events(ev)
    assert json.loads(json.dumps(enc)) == enc
    assert isinstance(enc["line_no"], str) and "color" not in enc["fields"]
    if n:
        assert isinstance(enc["fields"]["parent"], list)
    assert c._state_events(json.loads(json.dumps(enc))).equals(ev)


def test_event_columns_all_odd_round_trip() -> None:
    """Every text column holding values the join cannot carry: all kept as lists."""
    from commscope.parsers.nccl_debug import communicators as c

    rows: dict[str, list[Any]] = {f: ["x y", ""] for f in c._EVENT_FIELDS}
    rows |= {"line_no": [1, 2], "host": ["a b", ""], "pid": [1, 2], "tid": [3, 4]}
    rows |= {"kind": ["", "x y"], "spliced": [False, True]}
    ev = pl.DataFrame(rows, schema=c._EVENT_SCHEMA)
    enc = json.loads(json.dumps(c._encode_events(ev)))
    assert isinstance(enc["host"], list) and isinstance(enc["line_no"], str)
    assert c._state_events(enc).equals(ev)
