"""Fuzz the Flight Recorder parser: mutated real dumps (pickle and JSON), cut and flipped bytes.

Every input gives rows or a ParseError naming the file; counts balance; every frame conforms
to the schema; for a well-formed dump ``total`` equals the number of its entries (counted
from the document the test built). Byte flips can turn pickle opcodes into GLOBAL/REDUCE:
those must be refused like any other foreign pickle. Fixed seed (``derandomize``).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from fuzz_common import MORE, Scratch, fuzz_settings, parser_named, run_parser
from hypothesis import given
from hypothesis import strategies as st

from tests.oracle.fr_pickle_reference import oracle_load

SAMPLES = (
    "flight_recorder/nvrx_gpu_error_1st/_dump_14",
    "flight_recorder/nvrx_lock_gil_1st/_dump_0",
    "flight_recorder/nvrx_lock_gil_1st/_dump_9",
)
EXAMPLES = 1500

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=12),
    st.binary(max_size=8),
    st.sampled_from(["\ud800", "nccl:all_reduce\udcff", "BFloat16\udfff"]),  # lone surrogates
)
_values = st.recursive(
    _scalars,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=6,
)


def _samples(shared: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    top: dict[str, Any] = {}
    for s in SAMPLES:
        doc = oracle_load((shared / s).read_bytes())
        entries += doc["entries"]
        top.update({k: v for k, v in doc.items() if k != "entries"})
    return entries, top


def documents(
    entries: list[dict[str, Any]], top: dict[str, Any]
) -> st.SearchStrategy[tuple[bytes, str, int | None]]:
    """(bytes, file name, entry count when the dump is well-formed)."""
    pick = st.sampled_from(entries)
    entry_keys = st.sampled_from(sorted(entries[0]))
    top_keys = st.sampled_from([*sorted(top), "entries", "rank"])

    @st.composite
    def build(draw: st.DrawFn) -> tuple[bytes, str, int | None]:
        if draw(st.integers(0, 19)) == 0:
            return b"\x80\x02" + draw(st.binary(max_size=200)), "nccl_trace_rank_0", None
        evs: list[Any] = []
        for _ in range(draw(st.integers(0, 12))):
            e = dict(draw(pick))
            for _ in range(draw(st.integers(0, 3))):
                key = draw(entry_keys)
                if draw(st.booleans()):
                    e.pop(key, None)
                else:
                    e[key] = draw(_values)
            evs.append(e if draw(st.integers(0, 25)) else draw(_values))
        body: dict[str, Any] = {k: v for k, v in top.items() if draw(st.integers(0, 9))}
        body["entries"] = evs
        for _ in range(draw(st.integers(0, 2))):
            body[draw(top_keys)] = draw(_values)
        entries_ok = isinstance(body.get("entries"), list)
        n: int | None = len(body["entries"]) if entries_ok else None
        if draw(st.booleans()):
            data = pickle.dumps(body, protocol=draw(st.sampled_from([2, 4, 5])))
            name = f"_dump_{draw(st.integers(0, 99))}"
        else:
            data = json.dumps(body, default=repr).encode()
            name = f"_dump_{draw(st.integers(0, 99))}.json"
        kind = draw(st.integers(0, 9))
        if kind == 0:
            return data[: draw(st.integers(0, len(data)))], name, None
        if kind == 1 and data:
            i = draw(st.integers(0, len(data) - 1))
            data = data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1 :]
            return data, name, None
        return data, name, n

    return build()


def _fuzz(shared: Path, scratch: Scratch, *, more: bool) -> None:
    entries, top = _samples(shared)
    parser = parser_named("flight_recorder")

    @fuzz_settings(EXAMPLES, more=more)
    @given(documents(entries, top))
    def inner(doc: tuple[bytes, str, int | None]) -> None:
        data, name, n_entries = doc
        path = scratch.write(data, name)
        counts = run_parser(parser, path)
        if n_entries is not None:
            assert counts is not None, "a well-formed dump must parse"
            assert counts.total == n_entries, (counts, n_entries)

    inner()


@pytest.mark.slow
def test_fuzz_flight_recorder(shared_samples: Path, scratch: Scratch) -> None:
    _fuzz(shared_samples, scratch, more=False)


@pytest.mark.slow
@MORE
def test_fuzz_flight_recorder_more(shared_samples: Path, scratch: Scratch) -> None:
    _fuzz(shared_samples, scratch, more=True)
