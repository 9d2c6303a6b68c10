"""``commscope serve``: option parsing (fast) and ``--once`` end to end on Prefect's embedded
server in a child process, as a user runs it (no PREFECT_* configuration)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from commscope.pipeline.cli import main
from commscope.pipeline.commands.serve import parse_every

NCCL_SAMPLE = "nccl_debug/gfbench_2.20.5_2rank_normal_rank0_debugfile.txt"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("5m", 300), ("1.5h", 5400), ("90", 90), ("2 min", 120), ("1d", 86400)],
)
def test_parse_every(text: str, seconds: float) -> None:
    assert parse_every(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "5x", "-1m", "0", "m5"])
def test_parse_every_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_every(text)


def test_serve_bad_options_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Option errors are reported before Prefect starts."""
    assert main(["serve", "--watch", str(tmp_path / "nope"), "--once"]) == 2
    assert "not a folder" in capsys.readouterr().err
    args = ["serve", "--watch", str(tmp_path), "--store", str(tmp_path / "s"), "--once"]
    assert main([*args, "--run-layout", "pattern"]) == 2
    assert "--run-pattern" in capsys.readouterr().err
    assert main([*args, "--run-pattern", "(unclosed"]) == 2
    assert "bad --run-pattern" in capsys.readouterr().err
    assert main(["serve", "--watch", str(tmp_path), "--every", "soon"]) == 2
    assert "bad interval" in capsys.readouterr().err


def _serve_once(watch: Path, store: Path, reports: Path) -> tuple[int, dict, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["XDG_STATE_HOME"] = str(store.parent / "state")  # Prefect's home, outside the store
    cmd = [sys.executable, "-m", "commscope", "serve", "--watch", str(watch), "--store"]
    cmd += [str(store), "--reports", str(reports), "--once", "--json", "--no-report"]
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )
    start = proc.stdout.find("{")
    summary = json.loads(proc.stdout[start:]) if start >= 0 else {}
    return proc.returncode, summary, proc.stderr


@pytest.mark.slow
def test_serve_once_embedded_server(tmp_path: Path, shared_samples: Path) -> None:
    """serve --once ingests and derives each run folder on the embedded server (state in
    $XDG_STATE_HOME/commscope/prefect/<hash>, outside the store); a second pass finds nothing
    changed."""
    watch = tmp_path / "watch"
    (watch / "job7").mkdir(parents=True)
    src = shared_samples / NCCL_SAMPLE
    shutil.copy(src, watch / "job7")
    (watch / "README").write_text("not a run\n")
    store, reports = tmp_path / "store", tmp_path / "reports"
    rc, summary, err = _serve_once(watch, store, reports)
    assert rc == 0, err[-3000:]
    coll = sum(
        bool(re.search(r"NCCL INFO [A-Za-z]+: opCount ", ln)) for ln in src.read_text().splitlines()
    )
    run = summary["runs"]["job7"]
    assert (run["files"], run["new_files"], run["changed"]) == (1, 1, True)
    assert run["marts"] > 0
    assert summary["ingest"]["job7"]["lines"] == len(src.read_text().splitlines())
    assert summary["ingest"]["job7"]["rows"] >= coll
    # The embedded server's home is outside the store (nothing executable where queries write).
    assert not (store / ".prefect").exists()
    assert [p.name for p in (tmp_path / "state" / "commscope" / "prefect").iterdir()]
    assert any((store / "marts").glob("*/job7/*.parquet"))

    rc, again, err = _serve_once(watch, store, reports)
    assert rc == 0, err[-3000:]
    assert (again["runs"]["job7"]["new_files"], again["runs"]["job7"]["changed"]) == (0, False)


def _committed_paths(store: Path) -> set[str]:
    from commscope.pipeline.store import Store

    if not (store / "STORE.json").exists():
        return set()
    try:
        return set(Store.open(store, create=False).committed()["path"].to_list())
    except Exception:  # the store is being written by the server's flow; try again later
        return set()


@pytest.mark.slow
def test_serve_every_runs_on_schedule(tmp_path: Path, shared_samples: Path) -> None:
    """serve --every: after the first pass, a file dropped into the watched folder is ingested
    by a later *scheduled* run (this failed with SQLAlchemy 2.1: the scheduler never fired)."""
    import time

    watch, store = tmp_path / "watch", tmp_path / "store"
    (watch / "job1").mkdir(parents=True)
    shutil.copy(shared_samples / NCCL_SAMPLE, watch / "job1" / "rank0.log")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    cmd = [sys.executable, "-m", "commscope", "serve", "--watch", str(watch), "--store"]
    cmd += [str(store), "--reports", str(tmp_path / "r"), "--every", "5s", "--no-report"]
    cmd += ["--no-derive"]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and len(_committed_paths(store)) < 1:
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]  # type: ignore[union-attr]
            time.sleep(1)
        assert len(_committed_paths(store)) == 1
        late = watch / "job1" / "rank1.log"
        shutil.copy(shared_samples / NCCL_SAMPLE.replace("rank0", "rank1"), late)
        while time.monotonic() < deadline and str(late.resolve()) not in _committed_paths(store):
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]  # type: ignore[union-attr]
            time.sleep(1)
        assert str(late.resolve()) in _committed_paths(store), "no scheduled run picked it up"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
