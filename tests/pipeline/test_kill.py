"""Crash safety: SIGKILL ``commscope ingest`` at random points, then check the store.

Why: a job's ingest can die at any instruction (OOM killer, node drain, Ctrl-C twice). The
store promises atomic visibility (a batch is visible only once its commit-log row exists) and
exactly-once ingestion (a re-run adds each batch once). This test kills a real ingest
subprocess at several seeded random moments on one store and, after every kill, checks
independently of the store's own bookkeeping that:

* the store opens and every view is readable through ``Store.connect``;
* every table's view holds exactly the rows of the Parquet files of committed batches
  (counted from the files' footers), so a data file of an uncommitted batch is never visible;
* the commit log has one row per committed batch file and each batch's ``rows_written``
  equals the rows of its data files (a committed batch is complete).

Finally it re-runs the ingest to completion and compares the store with a clean single
ingest of the same input: per-table row counts and an order-independent content hash of
every view (``ingested_at`` excluded: it is the commit time).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from commscope.parsers.schema import TABLES
from commscope.pipeline.store import Store

pytestmark = pytest.mark.slow

RUN = "killrun"
CONFIG = "configs/synthetic_gpt3b_4x2x4.toml"
KEEP_RANKS = 4
"""Ranks whose files are kept (the whole 32-rank run takes ~10x longer to ingest)."""
KILLS = 5
SEED = 20240610
EXCLUDED = {"ingested_files": ("ingested_at",)}
"""Columns that legitimately differ between two ingests of the same bytes."""


def _cli(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "commscope", *map(str, args)]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, project_root: Path) -> Path:
    """A generated run (NCCL, DeepSpeed, Kineto) cut to the first ranks."""
    out = tmp_path_factory.mktemp("kill") / "gen"
    subprocess.run(
        _cli(
            "generate",
            "--config",
            project_root / CONFIG,
            "--out",
            out,
            "--iterations",
            "4",
            "--formats",
            "nccl,deepspeed,kineto",
        ),
        check=True,
        capture_output=True,
        cwd=project_root,
    )
    shutil.rmtree(out / "truth", ignore_errors=True)
    for f in list(out.rglob("*rank*")):
        digits = "".join(c for c in f.name.split("rank", 1)[1][:4] if c.isdigit())
        if f.is_file() and digits and int(digits) >= KEEP_RANKS:
            f.unlink()
    return out


def _ingest(project_root: Path, store: Path, run_dir: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        _cli("ingest", run_dir, "--run", RUN, "--store", store),
        cwd=project_root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _committed_batches(store: Path) -> set[str]:
    """Batch ids with a commit-log file (read from the folder, not through the store API)."""
    log_dir = store / "tables" / "ingested_files" / RUN
    return {p.stem for p in log_dir.glob("*.parquet")} if log_dir.is_dir() else set()


def _file_rows(store: Path, table: str, batches: set[str] | None) -> int:
    """Rows in the table's Parquet files of these batches (None: every batch file)."""
    d = store / "tables" / table / RUN
    if not d.is_dir():
        return 0
    return sum(
        pq.read_metadata(f).num_rows
        for f in d.glob("*.parquet")
        if batches is None or f.stem in batches
    )


def check_consistent(store_root: Path) -> dict[str, int]:
    """Assert the store invariants after a crash; return each view's row count."""
    if not (store_root / "STORE.json").exists():
        # Killed before the store was initialised: nothing may be half-written in it.
        assert not _committed_batches(store_root)
        return {t: 0 for t in TABLES}
    store = Store.open(store_root, create=False)
    committed = _committed_batches(store_root)
    con = store.connect(read_only=True)
    try:
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
        log = con.execute("SELECT batch_id, rows_written FROM ingested_files").fetchall()
    finally:
        con.close()
    assert sorted(b for b, _ in log) == sorted(committed)
    assert counts["ingested_files"] == len(committed)
    for t in TABLES:
        if t != "ingested_files":
            assert counts[t] == _file_rows(store_root, t, committed), t
    # Every committed batch is complete: its log row's row total is in its data files.
    for batch, written in log:
        on_disk = sum(
            pq.read_metadata(f).num_rows
            for t in TABLES
            if t != "ingested_files"
            for f in [store_root / "tables" / t / RUN / f"{batch}.parquet"]
            if f.exists()
        )
        assert on_disk == written, batch
    return counts


def content(store_root: Path) -> dict[str, tuple[int, int]]:
    """Per view: (row count, order-independent sum of row hashes)."""
    con = Store.open(store_root, create=False).connect(read_only=True)
    try:
        out: dict[str, tuple[int, int]] = {}
        for t in TABLES:
            excl = EXCLUDED.get(t)
            cols = f"* EXCLUDE ({', '.join(excl)})" if excl else "*"
            row = con.execute(
                f"SELECT count(*), coalesce(sum(hash(r)::HUGEINT), 0) "
                f"FROM (SELECT {cols} FROM {t}) r"
            ).fetchone()
            out[t] = (int(row[0]), int(row[1]))
        return out
    finally:
        con.close()


def test_sigkill_at_random_points(run_dir: Path, project_root: Path, tmp_path: Path) -> None:
    clean = tmp_path / "clean"
    t0 = time.monotonic()
    p = _ingest(project_root, clean, run_dir)
    # Start-up (imports) ends about when the store's STORE.json appears.
    while p.poll() is None and not (clean / "STORE.json").exists():
        time.sleep(0.01)
    startup = time.monotonic() - t0
    _, err = p.communicate(timeout=120)
    duration = time.monotonic() - t0
    assert p.returncode == 0, err.decode()[-2000:]
    expected = content(clean)
    n_inputs = sum(1 for sub in ("nccl", "deepspeed", "kineto") for f in (run_dir / sub).iterdir())
    assert expected["ingested_files"][0] == n_inputs
    assert expected["comm_ops"][0] > 0 and expected["kernels"][0] > 0

    rng = random.Random(SEED)
    # Each ingest resumes where the killed one stopped: one kill during start-up, then kills
    # that each let about 1/KILLS of the work happen, so they land all over the ingest
    # (store creation, parsing, commits, catalog) rather than after it.
    work = max(duration - startup, 0.1)
    points = [0.05] + [startup + rng.uniform(0, 2 * work / KILLS) for _ in range(KILLS - 1)]
    store = tmp_path / "killed"
    seen_batches: list[int] = []
    killed_before_end = 0
    for at in points:
        p = _ingest(project_root, store, run_dir)
        try:
            p.wait(timeout=at)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
            killed_before_end += 1
        assert p.stderr is not None
        p.stderr.close()
        counts = check_consistent(store)
        seen_batches.append(counts["ingested_files"])
    # Progress is kept across kills: no committed batch is ever lost.
    assert seen_batches == sorted(seen_batches)
    assert killed_before_end >= 1, "every ingest finished before its kill point"

    p = _ingest(project_root, store, run_dir)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err.decode()[-2000:]
    check_consistent(store)
    assert content(store) == expected
    # The re-run replaced every orphan: no data file of an uncommitted batch is left.
    committed = _committed_batches(store)
    for t in TABLES:
        assert _file_rows(store, t, None) == _file_rows(store, t, committed), t
    staging = store / ".staging"
    assert not staging.exists() or not any(staging.iterdir())
