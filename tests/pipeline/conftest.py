"""A test-only line parser ('test_lines', never sniffed) for store and ingest tests.

Format (synthetic): 'op NAME BYTES' lines become comm_ops rows, lines starting with 'bad' are
rejected, lines 'boom' make the parser raise mid-file, everything else is ignored.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from commscope.parsers._io import Source, iter_line_blocks
from commscope.parsers.registry import REGISTRY, LineCounts, ParsedChunk, register


class _TestLines:
    name = "test_lines"
    version = "0"

    def sniff(self, head: bytes, path: Path) -> int:
        return 0

    def parse(
        self, source: Source, *, run_id: str, rank: int | None = None
    ) -> Iterator[ParsedChunk]:
        for block in iter_line_blocks(source, block_bytes=64):
            s = pl.Series("l", block.lines, dtype=pl.Utf8)
            if s.str.contains("^boom$").any():
                raise RuntimeError("boom")
            nos = pl.int_range(block.first_line_no, block.first_line_no + len(s), eager=True)
            ok = s.str.contains(r"^op \w+ \d+$")
            bad = s.str.starts_with("bad")
            parts = s.filter(ok).str.split(" ")
            ops = pl.DataFrame(
                {
                    "op": parts.list.get(1),
                    "msg_bytes": parts.list.get(2).cast(pl.Int64),
                    "source_line": nos.filter(ok),
                    "rank": pl.Series([rank] * int(ok.sum()), dtype=pl.Int32),
                }
            )
            rej = pl.DataFrame({"line_no": nos.filter(bad), "raw": s.filter(bad)}).with_columns(
                reason=pl.lit("bad line")
            )
            n, p, r = len(s), int(ok.sum()), int(bad.sum())
            yield ParsedChunk({"comm_ops": ops, "rejects": rej}, LineCounts(n, p, n - p - r, r))


if "test_lines" not in REGISTRY:
    register(_TestLines)


@pytest.fixture
def lines_file(tmp_path: Path) -> Path:
    """A small synthetic input for the test parser."""
    p = tmp_path / "in" / "a.log"
    p.parent.mkdir()
    p.write_text("\n".join([f"op send {i}" for i in range(50)] + ["noise", "bad one", "op recv 7"]))
    return p
