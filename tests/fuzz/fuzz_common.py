"""Shared pieces of the per-parser fuzz tests (imported by ``test_fuzz_*.py``) (hypothesis).

Each parser has a CI test (fixed seed via ``derandomize``: the same 3,000-4,000 inputs every
run, 10,000 across parsers) and a ``*_more`` variant that runs only when
``COMMSCOPE_FUZZ_EXAMPLES=N`` is set: N times as many inputs, from fresh random seeds (a failure
prints the example to reproduce). Both are ``slow``-marked (they take more than 5 s).

Speed: strategies are built once per test, not per example (building ``sampled_from`` over
hundreds of lines per draw cost about a quarter of the time); what is left is the parsers' own
per-file cost on tiny inputs.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from commscope.parsers._io import Source
from commscope.parsers.registry import LineCounts, ParseError, Parser, load_all
from commscope.parsers.schema import TABLES, conform
from commscope.pipeline.ingest import _fill_provenance

SCALE = int(os.environ.get("COMMSCOPE_FUZZ_EXAMPLES", "1") or "1")

MORE = pytest.mark.skipif(
    not os.environ.get("COMMSCOPE_FUZZ_EXAMPLES"),
    reason="set COMMSCOPE_FUZZ_EXAMPLES=N to fuzz N x the CI examples from fresh seeds",
)
"""Marks the ``*_more`` variants (run with ``COMMSCOPE_FUZZ_EXAMPLES=20 pytest tests/fuzz``)."""


def fuzz_settings(examples: int, *, more: bool = False) -> settings:
    """Hypothesis settings: fixed seed and ``examples`` inputs, or SCALE x more from fresh seeds."""
    return settings(
        max_examples=examples * (SCALE if more else 1),
        derandomize=not more,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.explicit, Phase.generate),
    )


def count_lines(data: bytes) -> int:
    """``wc -l`` plus one for a final line without newline (independent of the parsers)."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


_KIND = st.integers(0, 5)
_TOKEN = st.sampled_from([b"-1", b"0", b"99999999999999999999999", b"nan", b"inf", b"", b"x"])
_JUNK = st.binary(max_size=12)
_TEXT = st.text(max_size=40)


def mutate_line(line: bytes, draw: st.DrawFn) -> bytes:
    """One of: keep, truncate, flip a byte, insert junk, swap a number for another token."""
    kind = draw(_KIND)
    if kind == 0 or not line:
        return line
    if kind == 1:
        return line[: draw(st.integers(0, len(line)))]
    if kind == 2:
        i = draw(st.integers(0, len(line) - 1))
        return line[:i] + bytes([line[i] ^ draw(st.integers(1, 255))]) + line[i + 1 :]
    if kind == 3:
        i = draw(st.integers(0, len(line)))
        return line[:i] + draw(_JUNK) + line[i:]
    if kind == 4:
        token = draw(_TOKEN)
        out = bytearray()
        replaced = False
        for part in line.split(b" "):
            if not replaced and part[:1].isdigit() and draw(st.booleans()):
                part, replaced = token, True
            out += part + b" "
        return bytes(out[:-1])
    return draw(_TEXT).encode("utf-8", "surrogatepass")


def text_inputs(lines: list[bytes]) -> st.SearchStrategy[bytes]:
    """Files of real lines (mutated, duplicated, reordered) or random bytes."""
    pick = st.sampled_from(lines)
    count = st.integers(1, 25)
    sep_s = st.sampled_from([b"\n", b"\n", b"\r\n"])
    one_in_ten = st.integers(0, 9)
    noise = st.binary(max_size=300)

    @st.composite
    def build(draw: st.DrawFn) -> bytes:
        if draw(one_in_ten) == 0:
            return draw(noise)
        n = draw(count)
        picked = [mutate_line(draw(pick), draw) for _ in range(n)]
        sep = draw(sep_s)
        end = draw(st.sampled_from([sep, b""]))
        return sep.join(picked) + end

    return build()


class Scratch:
    """One reusable input file per test (hypothesis runs many examples per test call)."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="commscope_fuzz_"))

    def write(self, data: bytes, name: str = "input.log") -> Path:
        p = self.dir / name
        p.write_bytes(data)
        return p


def run_parser(parser: Parser, path: Path, *, rank: int | None = None) -> LineCounts | None:
    """Parse ``path``; None on ParseError. Checks every frame against the schema and rejects."""
    counts = LineCounts()
    rejects = 0
    try:
        for chunk in parser.parse(Source(path), run_id="fuzz", rank=rank):
            counts += chunk.counts
            for table, df in chunk.tables.items():
                assert table in TABLES, table
                # As ingest does: provenance columns are filled in, then the frame must fit.
                conform(_fill_provenance(df, table, "fuzz", str(path), parser.name), table)
                if table == "rejects":
                    rejects += df.height
                    if df.height:
                        assert df["line_no"].min() >= 1
                        assert df["raw"].str.len_chars().max() <= 4096
    except ParseError as exc:
        assert str(path) in str(exc)
        return None
    assert counts.balanced, counts
    assert rejects == counts.rejected, (rejects, counts)
    return counts


def parser_named(name: str) -> Parser:
    return load_all()[name]
