"""Fuzz the Kineto parser: mutated real trace events, truncated JSON and random bytes.

Every input gives rows or ParseError; counts balance; every frame conforms to the schema;
for a well-formed document ``total`` equals the number of ``traceEvents`` items (a plain
json walk). Fixed seed (``derandomize``) so CI is reproducible.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from fuzz_common import MORE, Scratch, fuzz_settings, parser_named, run_parser
from hypothesis import given
from hypothesis import strategies as st

SAMPLES = (
    "kineto/hta_trace_filter__sampled_rank-0.json.gz",
    "kineto/hta_nccl_parser_config__nccl_data.json.gz",
)
EXAMPLES = 4000

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),  # past int64: test_fuzz_kineto_numeric_edges
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
_values = st.recursive(
    _scalars,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=6,
)


def _events(shared: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    events: list[dict[str, Any]] = []
    top: dict[str, Any] = {}
    for s in SAMPLES:
        doc = json.loads(gzip.decompress((shared / s).read_bytes()))
        evs = doc["traceEvents"] if isinstance(doc, dict) else doc
        events += [e for e in evs if isinstance(e, dict)][:300]
        if isinstance(doc, dict):
            top.update({k: v for k, v in doc.items() if k != "traceEvents"})
    return events, top


_NOISE = st.binary(max_size=200)


def documents(
    events: list[dict[str, Any]], top: dict[str, Any]
) -> st.SearchStrategy[tuple[bytes, int | None]]:
    """Traces (bytes) with their event count when they are well-formed JSON."""
    pick = st.sampled_from(events)  # built once: per-draw construction is slow

    @st.composite
    def build(draw: st.DrawFn) -> tuple[bytes, int | None]:
        return _document(draw, pick, top)

    return build()


def _document(
    draw: st.DrawFn, pick: st.SearchStrategy[dict[str, Any]], top: dict[str, Any]
) -> tuple[bytes, int | None]:
    """One trace and its event count (None when the JSON is not well-formed)."""
    if draw(st.integers(0, 19)) == 0:
        return draw(_NOISE), None
    evs: list[Any] = []
    for _ in range(draw(st.integers(0, 20))):
        e = dict(draw(pick))
        for _ in range(draw(st.integers(0, 2))):
            key = draw(st.sampled_from([*sorted(e), "args", "ts", "dur", "ph", "cat", "name"]))
            if draw(st.booleans()):
                e.pop(key, None)
            else:
                e[key] = draw(_values)
        evs.append(e if draw(st.integers(0, 30)) else draw(_values))
    if draw(st.booleans()):
        body: Any = {**{k: v for k, v in top.items() if draw(st.booleans())}, "traceEvents": evs}
    else:
        body = evs
    data = json.dumps(body).encode()
    if draw(st.integers(0, 4)) == 0:
        return data[: draw(st.integers(0, len(data)))], None
    return data, len(evs)


def _fuzz(shared: Path, scratch: Scratch, *, more: bool) -> None:
    events, top = _events(shared)
    parser = parser_named("kineto")

    @fuzz_settings(EXAMPLES, more=more)
    @given(documents(events, top))
    def inner(doc: tuple[bytes, int | None]) -> None:
        data, n_events = doc
        path = scratch.write(data, "trace.json")
        counts = run_parser(parser, path)
        if counts is not None and n_events is not None and counts.total != n_events:
            # ijson (yajl2_c) stops on some valid JSON (e.g. numbers past int64/double range):
            # the unread tail must then be one accounted reject, never silently dropped.
            assert counts.total < n_events and counts.rejected >= 1, (counts, n_events)

    inner()


NUMERIC_EXAMPLES = 300

_EDGE_TOKENS = st.one_of(
    st.sampled_from(
        [
            "NaN",
            "Infinity",
            "-Infinity",
            "1e400",
            "-1e400",
            "1e300",
            "-1e300",
            "1.7976931348623157e308",
            "4.9e-324",
            "-1e18",
            "-1",
            "-0.0",
            "9" * 30,
            "-" + "9" * 30,
        ]
    ),
    st.integers(2**63 - 3, 2**64 + 3).map(str),  # int64 and uint64 edges
    st.integers(-(2**64) - 3, -(2**63) + 3).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)
"""Numbers JSON readers treat differently or that overflow a column (issue 23, item 3)."""

_NUMERIC_KEYS = ("ts", "dur", "pid", "tid")
_NUMERIC_ARGS = ("External id", "device", "stream", "correlation", "Seq", "In msg nelems", "Rank")


def numeric_documents(
    events: list[dict[str, Any]], top: dict[str, Any]
) -> st.SearchStrategy[tuple[bytes, int, int]]:
    """Well-formed traces whose numbers are swapped for edge values (placeholders replaced in
    the text, since a JSON writer cannot write some of them): (bytes, events, mutated)."""
    pick = st.sampled_from(events)

    @st.composite
    def build(draw: st.DrawFn) -> tuple[bytes, int, int]:
        evs: list[dict[str, Any]] = []
        tokens: list[str] = []
        mutated = 0
        for _ in range(draw(st.integers(1, 15))):
            e = json.loads(json.dumps(draw(pick)))
            n_bad = draw(st.integers(0, 2))
            mutated += n_bad > 0
            for _ in range(n_bad):
                key = draw(st.sampled_from(_NUMERIC_KEYS + _NUMERIC_ARGS))
                holder = f"__EDGE{len(tokens)}__"
                if key in _NUMERIC_KEYS:
                    e[key] = holder
                else:
                    if not isinstance(e.get("args"), dict):
                        e["args"] = {}
                    e["args"][key] = holder
                tokens.append(draw(_EDGE_TOKENS))
            evs.append(e)
        header = {k: v for k, v in top.items() if draw(st.booleans())}
        text = json.dumps({**header, "traceEvents": evs})
        for i, token in enumerate(tokens):
            text = text.replace(f'"__EDGE{i}__"', token, 1)
        return text.encode(), len(evs), mutated

    return build()


@pytest.mark.slow
def test_fuzz_kineto_numeric_edges(shared_samples: Path, scratch: Scratch) -> None:
    """Edge numbers (int64/uint64 bounds, NaN, Infinity, 1e400, 1e300, negative times) in
    event fields: never a failed file nor a lost tail; every event is counted and at most
    the events holding a bad number are rejected."""
    events, top = _events(shared_samples)
    parser = parser_named("kineto")

    @fuzz_settings(NUMERIC_EXAMPLES)
    @given(numeric_documents(events, top))
    def inner(doc: tuple[bytes, int, int]) -> None:
        data, n_events, mutated = doc
        path = scratch.write(data, "trace.json")
        counts = run_parser(parser, path)
        assert counts is not None, "a bad number failed the whole file"
        assert counts.total == n_events, (counts, n_events)
        assert counts.rejected <= mutated, (counts, mutated)

    inner()


@pytest.mark.slow
def test_fuzz_kineto(shared_samples: Path, scratch: Scratch) -> None:
    _fuzz(shared_samples, scratch, more=False)


@pytest.mark.slow
@MORE
def test_fuzz_kineto_more(shared_samples: Path, scratch: Scratch) -> None:
    _fuzz(shared_samples, scratch, more=True)
