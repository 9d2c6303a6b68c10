"""Fuzz the NCCL Inspector parser value by value: records of the plugin's shape whose every
value may be swapped for another JSON value (huge, negative, fractional, NaN, strings, lists,
objects, null) give rows, never a crash.

The line-level fuzz (test_fuzz_text_logs.py) cuts and flips bytes, so most of its inputs are
not JSON; this one keeps the JSON valid and varies what it holds. Each input balances, every
frame conforms to the canonical schema, every well-formed record line is parsed (a record
loses values, never itself), and a non-null ``msg_bytes`` / ``dur_ns`` is one the file can
justify. Fixed seed (``derandomize``), 1,000 inputs.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pytest
from fuzz_common import MORE, Scratch, fuzz_settings, parser_named, run_parser
from hypothesis import given
from hypothesis import strategies as st

from commscope.parsers._io import Source

EXAMPLES = 1000

_ODD = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**31, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 1.5, 1e308]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["\ud800", "a\udfff", "\x00\t", "é" * 300]),  # lone surrogates, control
    st.booleans(),
    st.none(),
    st.just([]),
    st.just({}),
)

_HEADER = {"id": "0x7f364d6ca6f1ba", "rank": 1, "n_ranks": 4, "nnodes": 1}
_META = {
    "inspector_output_format_version": "v4.0",
    "git_rev": "",
    "rec_mechanism": "nccl_profiler_interface",
    "dump_timestamp_us": 1766299241932385,
    "hostname": "stone",
    "pid": 2029565,
}
_COLL = {
    "coll": "AllReduce",
    "coll_sn": 3,
    "coll_msg_size_bytes": 134217728,
    "coll_exec_time_us": 19041,
    "coll_timing_source": "kernel_gpu",
    "coll_algobw_gbs": 7.04888,
    "coll_busbw_gbs": 10.57332,
}
_P2P = {
    "p2p": "Send",
    "p2p_sn": 1,
    "p2p_peer": 0,
    "p2p_msg_size_bytes": 1048576,
    "p2p_exec_time_us": 20,
    "p2p_timing_source": "kernel_gpu",
    "p2p_algobw_gbs": 52.4288,
    "p2p_busbw_gbs": 52.4288,
}


@st.composite
def _record(draw: st.DrawFn) -> dict[str, Any]:
    kind, perf = draw(st.sampled_from([("coll_perf", _COLL), ("p2p_perf", _P2P)]))
    doc = {"header": dict(_HEADER), "metadata": dict(_META), kind: dict(perf)}
    for part in ("header", "metadata", kind):
        for key in list(doc[part]):
            if key in ("coll", "p2p"):  # the operation name is what makes a record
                if draw(st.integers(0, 15)) == 0:
                    doc[part][key] = draw(st.sampled_from(["Invalid", "All2All", "AllGatherV"]))
                continue
            if draw(st.integers(0, 3)) == 0:
                doc[part][key] = draw(_ODD)
    return doc


_FILES = st.lists(_record(), min_size=1, max_size=12)


def _justified(size: Any, exec_us: Any, n: Any, row: dict[str, Any]) -> None:
    """A value the parser kept is the file's (sizes > 2**63: the plugin's uint8 wrap; an
    all-to-all's per-peer size x n_ranks)."""
    if row["msg_bytes"] is not None:
        assert isinstance(size, int | float) and not isinstance(size, bool)
        assert size == int(size)
        if row["op"] == "all_to_all":
            assert row["msg_bytes"] == int(size) * n
        else:
            assert row["msg_bytes"] in (int(size), 2**64 - int(size))
    if row["dur_ns"] is not None:
        assert isinstance(exec_us, int | float) and not isinstance(exec_us, bool)
        assert exec_us == int(exec_us)
        assert row["dur_ns"] == int(exec_us) * 1000


def _check(scratch: Scratch, docs: list[dict[str, Any]]) -> None:
    data = "".join(json.dumps(d) + "\n" for d in docs).encode()
    parser = parser_named("nccl_inspector")
    path = scratch.write(data)
    counts = run_parser(parser, path)
    assert counts is not None
    assert counts.parsed == counts.total == len(docs), counts
    rows = [
        r
        for chunk in parser.parse(Source(path), run_id="fuzz")
        for r in chunk.tables.get("comm_ops", pl.DataFrame()).iter_rows(named=True)
    ]
    for row in rows:
        doc = docs[row["source_line"] - 1]
        kind = "coll" if "coll_perf" in doc else "p2p"
        perf = doc[f"{kind}_perf"]
        size, exec_us = perf[f"{kind}_msg_size_bytes"], perf[f"{kind}_exec_time_us"]
        _justified(size, exec_us, doc["header"]["n_ranks"], row)


@pytest.mark.slow
def test_fuzz_inspector_values(scratch: Scratch) -> None:
    @fuzz_settings(EXAMPLES)
    @given(_FILES)
    def inner(docs: list[dict[str, Any]]) -> None:
        _check(scratch, docs)

    inner()


@pytest.mark.slow
@MORE
def test_fuzz_inspector_values_more(scratch: Scratch) -> None:
    @fuzz_settings(EXAMPLES, more=True)
    @given(_FILES)
    def inner(docs: list[dict[str, Any]]) -> None:
        _check(scratch, docs)

    inner()
