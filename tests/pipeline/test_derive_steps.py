"""``derive --verbose`` accounts for the wall time of a derive step by step (issue 21, item 4).

An accounting check, not a speed target: the steps are the whole of ``derive_run`` in order,
and what lies between them (a few Python statements) is a sliver of the wall time.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from commscope.pipeline.cli import main
from commscope.pipeline.commands.derive import derive_totals, stderr_derive_progress
from commscope.pipeline.derive import DeriveResult, derive_run, relation_count
from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.store import Store

STEPS = ["prepare", "load", "intermediates", "marts", "close", "model inputs", "publish", "catalog"]


def test_steps_add_up_to_the_wall(
    tmp_path: Path, shared_samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = sorted(
        (shared_samples / "nccl_debug").glob("gfbench_2.20.5_2rank_normal_rank*_debugfile.txt")
    )
    store = Store.open(tmp_path / "s")
    ingest_paths(store, files, run_id="r", build_catalog=False)
    res = derive_run(store, "r")
    assert list(res.steps) == STEPS
    assert res.steps["intermediates"] >= sum(res.intermediate_seconds.values())
    assert res.steps["marts"] >= sum(res.seconds.values())
    other = res.wall_seconds - sum(res.steps.values())
    assert 0 <= other <= 0.05 * res.wall_seconds + 0.05
    assert main(["derive", "--store", str(tmp_path / "s"), "-v", "r"]) == 0
    out = capsys.readouterr().out
    for step in [*STEPS, "other", "total (wall)"]:
        assert f"\n{step} " in out, out
    assert "\ntotal: " in out and " marts, " in out


def test_progress_counts_every_relation_once(tmp_path: Path, shared_samples: Path) -> None:
    files = sorted(
        (shared_samples / "nccl_debug").glob("gfbench_2.20.5_2rank_normal_rank*_debugfile.txt")
    )
    store = Store.open(tmp_path / "s")
    ingest_paths(store, files, run_id="r", build_catalog=False)
    calls: list[tuple[str, int, int]] = []
    res = derive_run(
        store, "r", progress=lambda name, done, total: calls.append((name, done, total))
    )
    assert calls[0] == ("load", 0, relation_count())
    names = [name for name, _, _ in calls[1:]]
    # every mart and every intermediate derive handled, each once, counted 1..total
    assert names == [*res.intermediate_seconds, *res.marts]
    assert [done for _, done, _ in calls[1:]] == list(range(1, len(calls)))
    assert calls[-1][1] == calls[-1][2] == relation_count()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_on_a_terminal_and_totals(capsys: pytest.CaptureFixture[str]) -> None:
    ticks = iter([0.0, 2.0, 4.0])
    out = _Tty()
    report = stderr_derive_progress("r1", stream=out, clock=lambda: next(ticks))
    report("int_a", 1, 2)
    report("traffic_matrix", 2, 2)
    text = out.getvalue()
    assert "[derive r1: 1/2 relations, 0.5/s, int_a done, 2.0 s]" in text
    assert text.endswith("[derive r1: 2/2 relations, 0.5/s, traffic_matrix done, 4.0 s]\n")
    quiet = io.StringIO()  # not a terminal: nothing written
    stderr_derive_progress("r1", stream=quiet)("int_a", 1, 2)
    assert quiet.getvalue() == ""
    res = DeriveResult("r1", marts={"a": 3, "b": 1_000}, intermediate_seconds={"int_a": 0.5})
    res.wall_seconds, res.load_seconds = 12.25, 1.5
    assert derive_totals(res) == (
        "total: 2 marts, 1,003 rows, 3 relations computed in 12.2 s (load 1.5 s)"
    )
