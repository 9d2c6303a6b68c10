"""One size and bandwidth convention in SQL (issue 16 item 4).

The nccl-tests bus-bandwidth factor and the algbw byte count are written once, as the macros of
``sql/macros/comm_bus_factor.sql``; every other SQL file calls them and says so in its header.
The macros are checked against the nccl-tests definitions restated here in Python
(PERFORMANCE.md of nccl-tests: all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all,
gather, scatter (n-1)/n; everything else 1; algbw bytes = the per-rank count x n for all_gather,
reduce_scatter, gather, scatter).
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from commscope.pipeline.sql_modules import SQL_DIR, apply, discover

MACRO_FILE = SQL_DIR / "macros" / "comm_bus_factor.sql"
MACROS = ("comm_bus_factor", "comm_alg_bytes", "comm_bus_bytes")

# The ring factor written out: "(x - 1) / x" (any cast between) or "2 * (x - 1)".
_RING = (
    re.compile(r"\(\s*((?:\w+\.)?\w+)\s*-\s*1\s*\)\s*(?:::\s*\w+\s*)?/\s*\1\b", re.I),
    re.compile(r"\b2(?:\.0*)?\s*\*\s*\(\s*(?:\w+\.)?\w+\s*-\s*1\s*\)", re.I),
)


def _code(path: Path) -> str:
    return re.sub(r"--[^\n]*", "", path.read_text())


def _sql_files() -> list[Path]:
    return sorted(SQL_DIR.rglob("*.sql"))


def test_ring_factor_is_written_in_exactly_one_sql_file() -> None:
    holders = {p for p in _sql_files() if any(r.search(_code(p)) for r in _RING)}
    assert holders == {MACRO_FILE}


def test_the_pattern_finds_the_usual_spellings() -> None:
    for text in (
        "2.0 * (n - 1) / n",
        "(b.n - 1)::DOUBLE / b.n",
        "(nw - 1)::DOUBLE / nw",
        "1.0 * (c.group_size - 1) / c.group_size",
    ):
        assert any(r.search(text) for r in _RING), text
    # the pipeline bubble (p - 1) / (p - 1 + m) is another formula
    assert not any(r.search("(c.pp - 1) / (c.pp - 1 + c.micro_batches)") for r in _RING)


def test_every_file_using_the_macros_cites_them_in_its_header() -> None:
    users = [
        m
        for m in discover()
        if m.path != MACRO_FILE and re.search(rf"\b({'|'.join(MACROS)})\s*\(", _code(m.path))
    ]
    assert {m.name for m in users} >= {"effective_bandwidth", "int_flows_expanded"}
    for m in users:
        assert "comm_bus_factor.sql" in m.description + m.grain, m.path


def _nccl_tests(op: str, msg: float, n: int | None) -> tuple[float | None, float | None]:
    """(algbw bytes S, busbw factor) by nccl-tests' definitions."""
    per_rank = op in ("all_gather", "reduce_scatter", "gather", "scatter")
    ring = op in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter")
    if n is None or n < 1:
        s = None if per_rank else msg
        f = None if op == "all_reduce" or ring else 1.0
        return s, f
    s = msg * n if per_rank else msg
    if op == "all_reduce":
        return s, 2.0 * (n - 1) / n
    return s, ((n - 1) / n if ring else 1.0)


OPS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "gather",
    "scatter",
    "broadcast",
    "reduce",
    "send",
    "recv",
    "barrier",
    "other",
)


@pytest.mark.parametrize("op", OPS)
def test_macros_equal_the_nccl_tests_definitions(op: str) -> None:
    con = duckdb.connect()
    apply(con, tuple(m for m in discover() if m.layer == "macros"))
    for n in (None, 0, 1, 2, 3, 4, 8, 128):
        for msg in (1, 1000, 1_000_000):
            got = con.execute(
                "SELECT comm_alg_bytes($op, $msg, $n), comm_bus_factor($op, $n), "
                "comm_bus_bytes($op, $msg, $n)",
                {"op": op, "msg": msg, "n": n},
            ).fetchone()
            assert got is not None
            s, f = _nccl_tests(op, msg, n)
            assert got[0] == pytest.approx(s), (op, n, msg)
            assert got[1] == pytest.approx(f), (op, n, msg)
            bus = None if s is None or f is None else s * f
            assert got[2] == pytest.approx(bus), (op, n, msg)
