"""``commscope serve``: option parsing and the in-process steps (fast); ``--once`` end to end in
a child process as a user runs it (no PREFECT_* configuration), in one process and through the
flow on Prefect's temporary server, with the same results; ``--every`` on its own server."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

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


def test_in_process_steps_retry_io_errors_and_record_failures_as_prefect_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The in-process steps retry an I/O error as often as the flows' tasks do (then give up),
    never retry other errors, and record a failure with Prefect's message for a failed task."""
    from commscope.pipeline import cycle

    calls: list[str] = []

    def flaky(store: str, path: str, run_id: str) -> dict[str, object]:
        calls.append(path)
        name = Path(path).name
        if name == "io.log" and calls.count(path) <= cycle.RETRIES:
            raise OSError(f"transient {calls.count(path)}")
        if name == "always_io.log":
            raise OSError("disk gone")
        if name == "bug.log":
            raise ValueError("boom")
        return {"path": path, "status": "ingested"}

    monkeypatch.setattr(cycle, "ingest_one", flaky)
    steps = cycle.InProcessSteps(retry_delay_s=0)
    runs = {"r": [tmp_path / n for n in ("io.log", "always_io.log", "bug.log", "ok.log")]}
    got = steps.ingest_files(str(tmp_path), runs)["r"]
    assert [g["status"] for g in got] == ["ingested", "error", "error", "ingested"]
    assert got[1]["message"] == "Task run encountered an exception OSError: disk gone"
    assert got[2]["message"] == "Task run encountered an exception ValueError: boom"
    counts = {Path(c).name: calls.count(c) for c in set(calls)}
    assert counts == {
        "io.log": cycle.RETRIES + 1,
        "always_io.log": cycle.RETRIES + 1,
        "bug.log": 1,  # a parse error is final
        "ok.log": 1,
    }


def test_in_process_ingest_stops_at_an_interrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during the in-process ingest stops it: the files not started are dropped rather
    than all ingested before the command can exit."""
    from commscope.pipeline import cycle

    calls: list[str] = []

    def interrupted(store: str, path: str, run_id: str) -> dict[str, object]:
        calls.append(path)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return {"path": path, "status": "ingested"}

    monkeypatch.setattr(cycle, "ingest_one", interrupted)
    runs = {"r": [tmp_path / f"{i}.log" for i in range(8)]}
    with pytest.raises(KeyboardInterrupt):
        cycle.InProcessSteps(threads=1).ingest_files(str(tmp_path), runs)
    assert 1 <= len(calls) <= 2  # the one interrupted, and one the thread took meanwhile


PROBE = (
    "import sys\n"
    "from commscope.pipeline.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "print('prefect imported:', 'prefect' in sys.modules, file=sys.stderr)\n"
    "sys.exit(rc)\n"
)
"""Runs the CLI as `commscope` does, then says on stderr whether Prefect was imported."""


def _serve_once(
    watch: Path, store: Path, reports: Path, state: Path, *extra: str
) -> tuple[int, dict[str, Any], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["XDG_STATE_HOME"] = str(state)  # Prefect's home, outside the store
    env["SOURCE_DATE_EPOCH"] = "1700000000"  # the reports' build time: one for both routes
    cmd = [sys.executable, "-c", PROBE, "serve", "--watch", str(watch), "--store", str(store)]
    cmd += ["--reports", str(reports), "--once", "--json", *extra]
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


ROUTES = ("plain", "flow")
_GENERATION = re.compile(r"g[0-9a-f]{16}-\d+-[0-9a-f]{8}")
_LONG_FLOAT = re.compile(r"-?\d+\.\d{9,}(?:e[-+]?\d+)?")
_DATASET = re.compile(r"data-[0-9a-f]{32}")
VARYING = {"ingested_at", "derived_at", "generation"}
"""Columns that say when or in which process a row was written, not what it holds."""


def _store_contents(store: Path) -> dict[str, pl.DataFrame]:
    """Every Parquet file of the store by its path (generation names masked), rows sorted, the
    columns of :data:`VARYING` dropped. (A table's files are named by their batch id, a digest
    of the run, the content, its byte range and the format.)"""
    out: dict[str, pl.DataFrame] = {}
    for f in sorted(store.rglob("*.parquet")):
        df = pl.read_parquet(f)
        df = df.drop([c for c in df.columns if c in VARYING])
        if df.width:
            df = df.sort(df.columns, nulls_last=True)
        out[_GENERATION.sub("G", f.relative_to(store).as_posix())] = df
    return out


def _report_text(path: Path) -> str:
    """A report's text without what two derives of one store may write differently: floats
    beyond 12 significant digits (DuckDB's threads add a mean's terms in either order, so its
    last bit may differ) and so the chart datasets' names (a digest of their values). Rows and
    records are compared in place: a report's bytes do not depend on the order of a mart's
    rows (tests/reports/test_reproducible.py); both routes build at ``SOURCE_DATE_EPOCH``."""
    page = _DATASET.sub("data-D", path.read_text())
    return _LONG_FLOAT.sub(lambda m: f"{float(m.group()):.12g}", page)


def _normal(summary: dict[str, Any], root: Path) -> str:
    """A summary as text with this route's folders named alike and worker pids dropped."""
    for info in summary.get("ingest", {}).values():
        info.pop("worker_pids", None)
    return json.dumps(summary, sort_keys=True).replace(str(root), "<root>")


@pytest.mark.slow
def test_serve_once_in_process_gives_what_the_flow_gives(
    tmp_path: Path, shared_samples: Path, sample_traces: Path
) -> None:
    """serve --once runs the cycle in one process without importing Prefect; through the flow
    on Prefect's temporary server (--prefect) the same input gives the same exit status,
    summary, store (every table, mart and model input, row for row) and reports. A second
    in-process pass finds nothing changed."""
    watch = tmp_path / "watch"
    (watch / "job7").mkdir(parents=True)
    src = shared_samples / NCCL_SAMPLE
    for name in (NCCL_SAMPLE, NCCL_SAMPLE.replace("rank0", "rank1")):
        shutil.copy(shared_samples / name, watch / "job7")
    shutil.copytree(sample_traces / "ds_pipe_pp2_dp2_cpu", watch / "ds_cpu")  # has a manifest
    (watch / "bad").mkdir()  # a truncated .gz, cut past the sniffed head: a per-file error
    trunc = watch / "bad" / "trunc.log.gz"
    trunc.write_bytes(gzip.compress(src.read_bytes() * 200)[:-5000])
    (watch / "README").write_text("not a run\n")

    got: dict[str, tuple[int, dict[str, Any], str]] = {}
    for route, extra in zip(ROUTES, (("-v",), ("--prefect",)), strict=True):
        root = tmp_path / route
        got[route] = _serve_once(watch, root / "store", root / "reports", root / "state", *extra)
    (rc_a, sum_a, err_a), (rc_b, sum_b, err_b) = got["plain"], got["flow"]
    assert "prefect imported: False" in err_a, err_a[-3000:]
    # -v: where the cycle's time went, the parts adding up to its wall time (to the rounding)
    m = re.search(r"cycle in ([\d.]+) s: (.*)", err_a)
    assert m, err_a[-3000:]
    parts = {k.strip(): v for k, v in re.findall(r"([a-z ]+) ([\d.]+) s", m.group(2))}
    assert set(parts) == {"ingest files", "catalog", "derive", "report", "other"}
    assert abs(sum(float(v) for v in parts.values()) - float(m.group(1))) <= 0.3
    assert "prefect imported: True" in err_b, err_b[-3000:]
    assert (rc_a, rc_b) == (1, 1), (err_a[-3000:], err_b[-3000:])  # the bad file fails both
    assert str(trunc) in err_a and str(trunc) in err_b  # named in the messages of each
    assert [e.split(":")[0] for e in sum_a["errors"]] == ["bad"]
    assert str(trunc) in sum_a["errors"][0]
    assert _normal(sum_a, tmp_path / "plain") == _normal(sum_b, tmp_path / "flow")

    job = sum_a["runs"]["job7"]
    coll = sum(
        bool(re.search(r"NCCL INFO [A-Za-z]+: opCount ", ln)) for ln in src.read_text().splitlines()
    )
    assert (job["files"], job["new_files"], job["changed"]) == (2, 2, True)
    assert job["marts"] > 0 and sum_a["ingest"]["job7"]["rows"] >= 2 * coll
    assert sum_a["runs"]["ds_cpu"]["marts"] > 0

    a, b = _store_contents(tmp_path / "plain/store"), _store_contents(tmp_path / "flow/store")
    assert set(a) == set(b)
    assert any(k.startswith("marts/") for k in a) and any(k.startswith("tables/") for k in a)
    for key in a:  # floats summed in another order (DuckDB's threads) may differ in the last bit
        assert_frame_equal(a[key], b[key], rel_tol=1e-12, abs_tol=0.0), key
    reports = sorted(p.name for p in (tmp_path / "plain/reports").iterdir())
    assert reports == ["ds_cpu.html", "job7.html"]
    assert reports == sorted(p.name for p in (tmp_path / "flow/reports").iterdir())
    for name in reports:
        plain, flow = (_report_text(tmp_path / route / "reports" / name) for route in ROUTES)
        at = next((i for i, (x, y) in enumerate(zip(plain, flow, strict=False)) if x != y), None)
        assert plain == flow, (name, at, plain[at or 0 :][:300], flow[at or 0 :][:300])

    # Prefect's home: only the flow route made one, and outside the store.
    assert not (tmp_path / "plain/state").exists()
    assert [p.name for p in (tmp_path / "flow/state/commscope/prefect").iterdir()]
    assert not (tmp_path / "flow/store/.prefect").exists()

    rc, again, err = _serve_once(
        watch, tmp_path / "plain/store", tmp_path / "plain/reports", tmp_path / "plain/state"
    )
    assert rc == 1, err[-3000:]
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
