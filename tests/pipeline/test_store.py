"""Store guarantees: exactly-once, atomic visibility, concurrency, safe run ids."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import polars as pl
import pytest

from commscope.pipeline.ingest import ingest_file, ingest_paths
from commscope.pipeline.store import Store, StoreError, validate_run_id


def _count(store: Store, table: str = "comm_ops") -> int:
    con = store.connect()
    try:
        return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        con.close()


def test_ingest_then_reingest_adds_nothing(store_dir: Path, lines_file: Path) -> None:
    store = Store.open(store_dir)
    first = ingest_file(store, lines_file, run_id="r", fmt="test_lines")
    assert first.status == "ingested"
    assert first.counts.total == 53 and first.counts.parsed == 51 and first.counts.rejected == 1
    assert _count(store) == 51
    assert _count(store, "rejects") == 1
    again = ingest_paths(store, [lines_file.parent], run_id="r", fmt="test_lines")
    assert [r.status for r in again] == ["already ingested"]
    # Same content under another name is the same data: still nothing added.
    copy = lines_file.with_name("copy.log")
    copy.write_bytes(lines_file.read_bytes())
    assert ingest_file(store, copy, run_id="r", fmt="test_lines").status == "already ingested"
    assert _count(store) == 51
    # Another run is another run.
    assert ingest_file(store, lines_file, run_id="r2", fmt="test_lines").status == "ingested"
    assert _count(store) == 102


def test_parser_crash_leaves_nothing_visible(store_dir: Path, tmp_path: Path) -> None:
    store = Store.open(store_dir)
    f = tmp_path / "crash.log"
    # Blocks are 64 bytes in the test parser: several chunks are staged before the crash.
    f.write_text("\n".join(["op send 1"] * 40 + ["boom"]))
    res = ingest_file(store, f, run_id="r", fmt="test_lines")
    assert res.status == "error" and "boom" in (res.message or "")
    assert _count(store) == 0
    assert _count(store, "ingested_files") == 0
    assert not any((store.root / ".staging").iterdir())


def test_uncommitted_files_are_invisible(store_dir: Path, lines_file: Path) -> None:
    store = Store.open(store_dir)
    ingest_file(store, lines_file, run_id="r", fmt="test_lines")
    # A data file without a commit-log row (a crash between move and commit) is not visible.
    orphan = store.tables_dir / "comm_ops" / "r" / "deadbeef.parquet"
    src = next((store.tables_dir / "comm_ops" / "r").glob("*.parquet"))
    orphan.write_bytes(src.read_bytes())
    assert _count(store) == 51


def _ingest_worker(args: tuple[str, str]) -> str:
    import importlib.util

    # Register the test parser in the child (a fresh interpreter) from the conftest file.
    spec = importlib.util.spec_from_file_location(
        "_cs_test_lines", Path(__file__).with_name("conftest.py")
    )
    assert spec and spec.loader
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    root, path = args
    return ingest_file(Store.open(Path(root)), Path(path), run_id="r", fmt="test_lines").status


def test_concurrent_ingests_commit_once(store_dir: Path, lines_file: Path) -> None:
    Store.open(store_dir)
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        statuses = pool.map(_ingest_worker, [(str(store_dir), str(lines_file))] * 4)
    assert statuses.count("ingested") == 1
    assert statuses.count("already ingested") == 3
    assert _count(Store.open(store_dir)) == 51


@pytest.mark.parametrize("bad", ["", "../x", "a/b", ".hidden", "x" * 200, "a b"])
def test_run_ids_must_be_safe_path_components(bad: str) -> None:
    with pytest.raises(StoreError):
        validate_run_id(bad)


def test_views_have_comments_and_catalog_is_readonly(store_dir: Path, lines_file: Path) -> None:
    store = Store.open(store_dir)
    ingest_file(store, lines_file, run_id="r", fmt="test_lines")
    con = store.connect(read_only=True)
    try:
        comment = con.execute(
            "SELECT comment FROM duckdb_columns() WHERE table_name = 'comm_ops' AND column_name = 'msg_bytes'"
        ).fetchone()[0]
        assert "bytes" in comment
        with pytest.raises(Exception, match="read-only"):
            con.execute("CREATE TABLE x AS SELECT 1")
    finally:
        con.close()


def test_catalog_follows_a_moved_store(tmp_path: Path, lines_file: Path) -> None:
    store = Store.open(tmp_path / "a")
    ingest_file(store, lines_file, run_id="r", fmt="test_lines")
    (tmp_path / "a").rename(tmp_path / "b")
    moved = Store.open(tmp_path / "b")
    assert _count(moved) == 51
    assert moved.committed("r").select(pl.col("lines_total").sum()).item() == 53
