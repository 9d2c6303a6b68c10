"""Concurrent ingests of one store lose nothing and add nothing twice.

Each test compares the store with a single, sequential ingest of the same final inputs: every
data table row for row, and the commit log's line totals with line counts taken here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from commscope.parsers.schema import DATA_TABLES
from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.store import Store

SAMPLES = [
    ("nccl_debug", "gfbench_2.20.5_2rank_normal_rank0_debugfile.txt"),
    ("nccl_debug", "gfbench_2.20.5_2rank_normal_rank1_debugfile.txt"),
    ("nccl_debug", "nccltests_2.27.7_1proc_2gpu_allreduce.log"),
    ("deepspeed_comms", "ds_pr2012_docs_log_summary_zero3.txt"),
    ("deepspeed_comms", "mlprof_thetagpu_2node_16gpu_verbose_run1.log"),
]


def _folder(tmp_path: Path, shared_samples: Path) -> Path:
    """A run folder holding copies of a few real samples."""
    run = tmp_path / "logs"
    run.mkdir()
    for fmt, name in SAMPLES:
        shutil.copy(shared_samples / fmt / name, run / name)
    return run


def _tables(store: Store) -> dict[str, pl.DataFrame]:
    """Every data table of run 'r' (committed batches only, like the views), rows sorted."""
    batches = set(store.committed("r")["batch_id"].to_list())
    out = {}
    for t in DATA_TABLES:
        files = [f for f in (store.tables_dir / t / "r").glob("*.parquet") if f.stem in batches]
        if not files:
            out[t] = pl.DataFrame()
            continue
        df = pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")
        out[t] = df.sort(df.columns, nulls_last=True)
    return out


def _same_as_single_ingest(store: Store, run: Path, tmp_path: Path) -> None:
    one = Store.open(tmp_path / "single")
    assert all(r.ok for r in ingest_paths(one, [run], run_id="r"))
    got, want = _tables(store), _tables(one)
    for t in DATA_TABLES:
        assert_frame_equal(got[t], want[t])
    lines = {
        str(f.resolve()): f.read_bytes().count(b"\n") + (not f.read_bytes().endswith(b"\n"))
        for f in run.iterdir()
    }
    log = store.committed("r").group_by("path").agg(pl.col("lines_total").sum())
    assert dict(log.iter_rows()) == lines


def _cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "commscope", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_jobs_2_gives_the_same_store_as_jobs_1(tmp_path: Path, shared_samples: Path) -> None:
    run = _folder(tmp_path, shared_samples)
    store = Store.open(tmp_path / "par")
    results = ingest_paths(store, [run], run_id="r", jobs=2)
    assert [r.status for r in results] == ["ingested"] * len(SAMPLES)
    _same_as_single_ingest(store, run, tmp_path)


@pytest.mark.slow
def test_two_cli_ingests_of_one_folder_at_once(tmp_path: Path, shared_samples: Path) -> None:
    run = _folder(tmp_path, shared_samples)
    store = tmp_path / "store"
    procs = [_cli("ingest", str(run), "--run", "r", "--store", str(store)) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    stdout = outs[0][0] + outs[1][0]
    # Each file was committed by exactly one of the two.
    for _, name in SAMPLES:
        rows = [ln for ln in stdout.splitlines() if name in ln]
        assert len(rows) == 2 and sum(" ingested" in r and "already" not in r for r in rows) == 1
    _same_as_single_ingest(Store.open(store), run, tmp_path)


@pytest.mark.slow
def test_ingest_while_another_runs_on_a_growing_log(tmp_path: Path, shared_samples: Path) -> None:
    """A CLI ingest runs while the log grows and a second ingest starts; a last one catches up."""
    run = _folder(tmp_path, shared_samples)
    live = run / "mlprof_thetagpu_2node_16gpu_verbose_run1.log"
    data = live.read_bytes()
    cuts = [len(data) // 4 + 5, len(data) // 2 + 9, 3 * len(data) // 4]
    live.write_bytes(data[: cuts[0]])
    store = tmp_path / "store"
    args = ("ingest", str(run), "--run", "r", "--store", str(store), "--follow")
    first = _cli(*args)
    time.sleep(0.5)
    with live.open("ab") as fh:
        fh.write(data[cuts[0] : cuts[1]])
    second = _cli(*args)
    with live.open("ab") as fh:
        fh.write(data[cuts[1] : cuts[2]])
    for p in (first, second):
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and "Traceback" not in err, (out, err)
    with live.open("ab") as fh:
        fh.write(data[cuts[2] :])
    last = _cli(*args)
    out, err = last.communicate(timeout=300)
    assert last.returncode == 0, (out, err)
    s = Store.open(store)
    log = s.committed("r").filter(pl.col("path") == str(live.resolve())).sort("byte_start")
    assert log["byte_start"].to_list()[1:] == log["byte_end"].to_list()[:-1]  # no overlap
    _same_as_single_ingest(s, run, tmp_path)
