"""``bench/ingest_scale.py``'s rounds: both inputs every round, order swapped every other round,
the median round chosen, and the fixed-cost input cut from the log's first lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import ingest_scale
from bench._common import Context, Measurement


def test_median_at_picks_the_middle_round() -> None:
    assert ingest_scale._median_at([1.3, 0.9, 1.1]) == 2
    assert ingest_scale._median_at([1.0, 4.0, 2.0, 3.0]) == 2  # the lower middle of four
    assert ingest_scale._median_at([5.0]) == 0


@pytest.mark.parametrize("quick", [False, True])
def test_rounds_alternate_the_order_and_pair_base_with_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quick: bool
) -> None:
    calls: list[str] = []

    def fake_ingest(ctx: Context, name: str, path: Path) -> Measurement:
        calls.append(name)
        return Measurement(1.0, 0.0, 0.0, 0, {"name": name}, "", cpu_s=float(len(calls)))

    monkeypatch.setattr(ingest_scale, "_ingest", fake_ingest)
    ctx = Context(workdir=tmp_path, quick=quick)
    runs = ingest_scale._rounds(ctx, ("few", tmp_path / "a"), ("many", tmp_path / "b"))
    n = 1 if quick else ingest_scale.SCALE_ROUNDS
    assert len(runs) == n
    assert all(b.out["name"] == "few" and o.out["name"] == "many" for b, o in runs)
    want = [("few", "many") if i % 2 == 0 else ("many", "few") for i in range(n)]
    assert calls == [name for pair in want for name in pair]


def test_head_keeps_the_first_lines(tmp_path: Path) -> None:
    src = tmp_path / "log"
    src.write_bytes(b"".join(f"line {i}\n".encode() for i in range(ingest_scale.HEAD_LINES * 3)))
    out = ingest_scale._head(src, tmp_path / "head.log")
    lines = out.read_bytes().splitlines()
    assert len(lines) == ingest_scale.HEAD_LINES and lines[-1] == b"line 99"
