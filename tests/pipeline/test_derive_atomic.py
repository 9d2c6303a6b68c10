"""Atomic derive (issue 23): one derive's marts become visible together, from one snapshot.

Why: a derive killed after its first mart left 1 new and 10 old marts, and ``report`` built a
page from the mix without a word; a derive reading while an ingest committed could see the
communicators of two batches and the comm_ops of one; ``serve`` killed between ingest and
derive said "changed: no" forever after. These tests kill or break a derive midway, commit
during its table copy, and interrupt the serve cycle at the function level (no Prefect server).

Data: the bundled DeepSpeed sample (PP=2 x DP=2): ranks 0-1 first, then ranks 2-3 and the
Kineto traces, so the two derives give different marts (``bubble_ratio`` has 6 rows, then 3).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import commscope.pipeline.derive as derive_mod
from commscope.parsers.schema import TABLES
from commscope.pipeline.cli import main as cli_main
from commscope.pipeline.derive import connect_for_derive, derive_run, missing_marts
from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.store import Store

RUN = "r"
SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "ds_pipe_pp2_dp2_cpu"
FIRST = [SAMPLE / "deepspeed" / "rank0.log", SAMPLE / "deepspeed" / "rank1.log"]
KINETO_RANK2 = SAMPLE / "kineto" / "rank2.pt.trace.json.gz"
"""A trace with comm_ops rows: committed while derive copies the tables after comm_ops."""
LATER = [SAMPLE / "deepspeed" / "rank2.log", SAMPLE / "deepspeed" / "rank3.log", SAMPLE / "kineto"]


def _fingerprint(df: pl.DataFrame) -> tuple[int, list[int]]:
    """Row count and the sorted row hashes: equal frames (in any row order) are equal here."""
    return df.height, sorted(df.hash_rows().to_list()) if df.height else []


def _visible(store: Store) -> dict[str, tuple[int, list[int]]]:
    """Every mart of the run as the catalog's views show it (what `query` and reports see)."""
    con = store.connect(read_only=True)
    try:
        return {
            mart: _fingerprint(
                con.sql(f'SELECT * FROM "{mart}" WHERE run_id = $r', params={"r": RUN}).pl()
            )
            for mart in store.materialised_marts()
        }
    finally:
        con.close()


def _files(store: Store) -> set[str]:
    """Every file under marts/ and model_inputs/ (relative paths)."""
    out: set[str] = set()
    for base in (store.marts_dir(), store.model_inputs_dir()):
        if base.exists():
            out |= {str(f.relative_to(store.root)) for f in base.rglob("*") if f.is_file()}
    return out


@pytest.fixture
def derived(tmp_path: Path) -> Iterator[tuple[Store, dict[str, tuple[int, list[int]]]]]:
    """A store whose run was derived from ranks 0-1, then grew by ranks 2-3 and Kineto."""
    store = Store.open(tmp_path / "store")
    ingest_paths(store, FIRST, run_id=RUN)
    derive_run(store, RUN)
    before = _visible(store)
    assert before["bubble_ratio"][0] == 6
    ingest_paths(store, LATER, run_id=RUN)
    yield store, before


def _kill_after_first_mart(project_root: Path, store: Path) -> subprocess.CompletedProcess:
    """Run a derive in a child process that SIGKILLs itself right after its first mart."""
    script = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "import commscope.pipeline.derive as d\n"
        "from commscope.pipeline.store import Store\n"
        "orig = d._copy_atomic\n"
        "def killing(*a, **k):\n"
        "    orig(*a, **k)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "d._copy_atomic = killing\n"
        "d.derive_run(Store.open(Path(sys.argv[1])), sys.argv[2])\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script, str(store), RUN],
        cwd=project_root,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_killed_derive_leaves_previous_set_visible(derived: Any, project_root: Path) -> None:
    from commscope.reports import data as rd
    from commscope.reports.html import build_report

    store, before = derived
    files_before = _files(store)
    r = _kill_after_first_mart(project_root, store.root)
    assert r.returncode == -9, r.stderr[-2000:]
    # The kill came after one mart of the new derive was written...
    new = _files(store) - files_before
    assert new and all(f.startswith("marts/bubble_ratio/") for f in new), new
    # ...yet the catalog and the report's reader see the old complete set, nothing mixed.
    assert _visible(store) == before
    assert missing_marts(store, RUN) == []
    data = rd.load_run(store, RUN)
    try:
        assert {k: _fingerprint(v) for k, v in data.marts.items()} == {
            k: v for k, v in before.items() if k in data.marts
        }
    finally:
        if data.con is not None:
            data.con.close()
    out = build_report(store, RUN, store.root.parent / "r.html")
    assert out.stat().st_size > 0
    # A re-run completes: the new set is visible and the killed derive's files are gone.
    derive_run(store, RUN)
    after = _visible(store)
    assert after["bubble_ratio"][0] == 3 and after != before
    from commscope.pipeline.derive import derive_stale

    assert not (new & _files(store))
    assert derive_stale(store, RUN) is None


def test_failed_derive_keeps_previous_set_and_leaves_no_files(
    derived: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, before = derived
    files_before = _files(store)
    orig = derive_mod._copy_atomic
    calls = {"n": 0}

    def failing(*args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("injected failure after the first mart")
        orig(*args, **kwargs)

    monkeypatch.setattr(derive_mod, "_copy_atomic", failing)
    with pytest.raises(RuntimeError, match="injected"):
        derive_run(store, RUN)
    assert calls["n"] == 2
    assert _files(store) == files_before  # nothing of the failed generation stays
    assert _visible(store) == before
    monkeypatch.undo()
    derive_run(store, RUN)
    assert _visible(store)["bubble_ratio"][0] == 3


class _CommitDuringCopy(dict):
    """TABLES, iterated by the table copy: after the first table, an ingest commits."""

    def __init__(self, hook: Any) -> None:
        super().__init__(TABLES)
        self.hook = hook

    def __iter__(self) -> Iterator[str]:
        for i, name in enumerate(super().__iter__()):
            if i == 1 and self.hook is not None:
                hook, self.hook = self.hook, None
                hook()
            yield name


def test_derive_reads_one_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store.open(tmp_path / "store")
    ingest_paths(store, FIRST, run_id=RUN)
    assert next(iter(TABLES)) == "comm_ops"  # copied before the concurrent commit below
    monkeypatch.setattr(
        derive_mod,
        "TABLES",
        _CommitDuringCopy(lambda: ingest_paths(store, [KINETO_RANK2], run_id=RUN)),
    )
    con, _ = connect_for_derive(store, RUN, None)
    try:
        batches = [b for (b,) in con.execute("SELECT batch_id FROM ingested_files").fetchall()]
        got = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in TABLES}
    finally:
        con.close()
    assert store.committed(RUN).height == 3  # the commit did land meanwhile
    # Every table holds exactly the rows of the batches its commit log lists.
    for table in TABLES:
        files = [store.tables_dir / table / RUN / f"{b}.parquet" for b in batches]
        expected = sum(pl.read_parquet(f).height for f in files if f.exists())
        assert got[table] == expected, table


def test_derive_records_its_snapshot(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store")
    ingest_paths(store, FIRST, run_id=RUN)
    res = derive_run(store, RUN)
    row = store.derived(RUN)
    snap = store.snapshot(RUN)
    assert row is not None
    assert (row["snapshot"], row["batches"]) == (snap.key, len(FIRST))
    assert (res.generation, res.snapshot, res.batches) == (row["generation"], snap.key, 2)
    ingest_paths(store, LATER[:1], run_id=RUN)
    from commscope.pipeline.derive import derive_stale

    assert derive_stale(store, RUN) is not None
    assert store.snapshot(RUN).key != row["snapshot"]


def test_snapshot_names_the_batches_of_the_commit_rows(tmp_path: Path) -> None:
    """The snapshot lists the commit-log folder; the oracle reads every commit row."""
    store = Store.open(tmp_path / "store")
    assert store.snapshot(RUN).batch_ids == ()
    ingest_paths(store, FIRST, run_id=RUN)
    log_dir = store.tables_dir / "ingested_files" / RUN
    (log_dir / f".{next(log_dir.glob('*.parquet')).name}.123.tmp").write_bytes(b"partial")
    rows = sorted(set(store.committed(RUN)["batch_id"].to_list()))
    assert len(rows) == len(FIRST)
    assert list(store.snapshot(RUN).batch_ids) == rows  # the temp file is not a batch
    ingest_paths(store, LATER[:1], run_id=RUN)
    rows = sorted(set(store.committed(RUN)["batch_id"].to_list()))
    assert list(store.snapshot(RUN).batch_ids) == rows and len(rows) == len(FIRST) + 1


def test_serve_redoes_what_an_interrupted_cycle_left(derived: Any) -> None:
    """serve killed after ingest, before derive: the next cycle (nothing new) re-derives."""
    from commscope.pipeline.runs import run_update_reason

    store, _ = derived  # ranks 2-3 committed after the last derive: the interrupted cycle
    out = store.root.parent / "reports" / f"{RUN}.html"
    out.parent.mkdir()
    out.write_text("old report")
    reason = run_update_reason(store, RUN, new_files=0, out=out)
    assert reason is not None and "stale" in reason
    derive_run(store, RUN)
    # the report predates the marts: it is redone too
    old = time.time() - 3600
    os.utime(out, (old, old))
    assert run_update_reason(store, RUN, new_files=0, out=out) == "report older than the marts"
    out.write_text("new report")
    assert run_update_reason(store, RUN, new_files=0, out=out) is None
    assert run_update_reason(store, RUN, new_files=0, out=out.with_name("none.html")) is not None
    assert run_update_reason(store, RUN, new_files=0, out=out, report=False) is None


def test_store_in_pre_generation_layout_stays_readable(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store")
    ingest_paths(store, FIRST, run_id=RUN)
    derive_run(store, RUN)
    before = _visible(store)
    # Rewrite the store as the previous version left it: marts/<mart>/<run>.parquet.
    for base in (store.marts_dir(), store.model_inputs_dir()):
        for f in list(base.glob(f"*/{RUN}/*.parquet")):
            f.replace(f.parent.parent / f"{RUN}.parquet")
            f.parent.rmdir()
    for f in store.derived_dir().iterdir():
        f.unlink()
    store.derived_dir().rmdir()
    store.catalog_path.unlink()
    assert set(store.mart_files(RUN)) == set(before)  # read in place, before any migration
    assert _visible(store) == before  # the catalog rebuild migrates the marts
    assert store.derived(RUN) is not None
    assert not list(store.marts_dir().glob("*/*.parquet"))
    derive_run(store, RUN)
    assert _visible(store) == before
    assert all(len(list(d.glob("*.parquet"))) == 1 for d in store.marts_dir().glob(f"*/{RUN}"))


def test_report_to_a_folder_is_refused_without_temp_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = Store.open(tmp_path / "store")
    ingest_paths(store, FIRST, run_id=RUN)
    derive_run(store, RUN)
    folder = tmp_path / "out"
    folder.mkdir()
    rc = cli_main(["report", RUN, "-o", str(folder), "--store", str(store.root)])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"{folder}: is a folder" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "store"]
    assert not any(folder.iterdir())


def test_publish_on_a_full_disk_leaves_nothing(
    derived: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last write (the pointer) fails: one clear error, no temp file, old set visible."""
    import errno

    import pyarrow.parquet as pq

    from commscope.pipeline.store import StoreError

    store, before = derived
    files_before = _files(store)
    real = pq.write_table

    def full(table: Any, where: Any, *args: Any, **kwargs: Any) -> None:
        real(table, where, *args, **kwargs)  # the temp file is written, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device", str(where))

    monkeypatch.setattr(pq, "write_table", full)
    with pytest.raises(StoreError, match=r"derived/r\.parquet: cannot write the store \(No space"):
        derive_run(store, RUN)
    monkeypatch.undo()
    assert _files(store) == files_before
    assert not [p for p in store.root.rglob("*") if p.name.endswith(".tmp")]
    assert _visible(store) == before


def test_concurrent_derives_publish_one_complete_set(derived: Any, project_root: Path) -> None:
    """Two derives of one run at once: both succeed, one set is published, none is left over."""
    store, _ = derived
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "commscope", "derive", RUN, "--store", str(store.root)],
            cwd=project_root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    row = store.derived(RUN)
    assert row is not None
    gen = f"{row['generation']}.parquet"
    for base in (store.marts_dir(), store.model_inputs_dir()):
        for d in base.glob(f"*/{RUN}"):
            assert [f.name for f in d.iterdir()] == [gen], d
    assert set(store.mart_files(RUN)) == set(store.materialised_marts())
    assert _visible(store)["bubble_ratio"][0] == 3
