"""``derive --verbose`` accounts for the wall time of a derive step by step (issue 21, item 4).

An accounting check, not a speed target: the steps are the whole of ``derive_run`` in order,
and what lies between them (a few Python statements) is a sliver of the wall time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from commscope.pipeline.cli import main
from commscope.pipeline.derive import derive_run
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
