"""Disk full: an ingest into a store on a full file system fails clearly and changes nothing.

Why: cluster scratch file systems fill up. An ingest that hits ENOSPC must say which file it
was ingesting and that the disk is full (not print a traceback or blame the parser), and it
must leave the store exactly as it was: same commit log, same views, no staged files left.

The store lives on a private 3 MB tmpfs, filled to the last byte after a first small ingest.
Needs root and a working ``mount -t tmpfs`` (skipped otherwise, e.g. in unprivileged CI).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from commscope.pipeline.store import Store

SMALL = "nccl_debug/gfbench_2.20.5_2rank_normal_rank0_debugfile.txt"
LARGE = "nccl_debug/nccltests_2.27.7_1proc_2gpu_allreduce.log"


def _mounted_tmpfs(mnt: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``mnt`` for the test (made writable again, unmounted)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(mnt)], check=False, capture_output=True)
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 3 MB tmpfs mounted for the test (unmounted afterwards)."""
    yield from _mounted_tmpfs(tmp_path / "mnt", "3m")


def _ingest(project_root: Path, store: Path, path: Path, run: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "commscope",
            "ingest",
            str(path),
            "--run",
            run,
            "--store",
            str(store),
        ],
        cwd=project_root,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _snapshot(store: Path) -> dict[str, str]:
    """Every file of the store (the lock file aside) with its content hash."""
    return {
        str(f.relative_to(store)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(store.rglob("*"))
        if f.is_file() and f.name != ".lock"
    }


def _fill(mnt: Path) -> None:
    """Write a filler file until the file system is full."""
    with (mnt / "filler").open("wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass


def _views(store: Path) -> dict[str, int]:
    con = Store.open(store, create=False).connect(read_only=True)
    try:
        return {
            t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("ingested_files", "comm_ops", "communicators", "rejects")
        }
    finally:
        con.close()


@pytest.fixture
def full_store(tmpfs: Path, shared_samples: Path, project_root: Path) -> tuple[Path, dict]:
    """A store with one small ingest, on a file system that is then filled up."""
    store = tmpfs / "store"
    r = _ingest(project_root, store, shared_samples / SMALL, "before")
    assert r.returncode == 0, r.stderr
    before = _views(store)
    assert before["ingested_files"] == 1 and before["comm_ops"] > 0
    _fill(tmpfs)
    return store, before


def test_disk_full_leaves_store_unchanged(
    full_store: tuple[Path, dict], shared_samples: Path, project_root: Path
) -> None:
    store, before = full_store
    files_before = _snapshot(store)
    big = shared_samples / LARGE
    r = _ingest(project_root, store, big, "after")
    assert r.returncode != 0
    err = r.stderr
    assert str(big) in err
    assert "No space left" in err
    # Nothing of the failed batch is visible or left behind.
    assert _snapshot(store) == files_before
    staging = store / ".staging"
    assert not staging.exists() or not any(staging.iterdir())
    (store.parent / "filler").unlink()
    assert _views(store) == before
    # With space again, the same ingest completes (the store still works).
    r = _ingest(project_root, store, big, "after")
    assert r.returncode == 0, r.stderr
    after = _views(store)
    assert after["ingested_files"] == 2 and after["comm_ops"] > before["comm_ops"]
    assert not staging.exists() or not any(staging.iterdir())


def test_disk_full_error_is_clear(
    full_store: tuple[Path, dict], shared_samples: Path, project_root: Path
) -> None:
    store, _ = full_store
    big = shared_samples / LARGE
    r = _ingest(project_root, store, big, "after")
    out = r.stdout + r.stderr
    assert r.returncode == 2
    assert "Traceback" not in out
    assert "internal error in parser" not in out
    assert "cannot write the store (No space left on device)" in r.stderr
    assert str(big) in r.stderr


# ---------------------------------------------------------------------------- derive and report
# Issue 23: derive/report on a full disk printed a DuckDB traceback and left an orphaned
# `.catalog.duckdb.<pid>.tmp`; a report onto a full disk left its temp file; a read-only store
# gave an OSError traceback. Now: one line naming what could not be written, exit 2, no orphan.

SMALL_RANK1 = "nccl_debug/gfbench_2.20.5_2rank_normal_rank1_debugfile.txt"


@pytest.fixture
def tmpfs8(tmp_path: Path) -> Iterator[Path]:
    """An 8 MB tmpfs (room for a small store, its marts and catalog), unmounted afterwards."""
    yield from _mounted_tmpfs(tmp_path / "mnt8", "8m")


def _cli(project_root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "commscope", *args],
        cwd=project_root,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _fill_to_the_byte(mnt: Path) -> None:
    """Fill the file system completely: big writes, then ever smaller ones down to one byte."""
    with (mnt / "filler").open("wb", buffering=0) as fh:
        size = 1 << 20
        while size:
            try:
                fh.write(b"\0" * size)
            except OSError:
                size //= 2


def _leftovers(root: Path) -> list[str]:
    """Temp files anywhere under ``root`` (what a failed write must not leave)."""
    return sorted(str(p) for p in root.rglob("*") if p.name.endswith((".tmp", ".tmp.wal")))


def _one_clear_line(r: subprocess.CompletedProcess, reason: str) -> str:
    out = r.stdout + r.stderr
    assert r.returncode == 2, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("commscope: error: ") and reason in last, r.stderr
    return last


def test_derive_disk_full_is_clear_and_leaves_nothing(
    tmpfs8: Path, shared_samples: Path, project_root: Path
) -> None:
    store = tmpfs8 / "store"
    assert _ingest(project_root, store, shared_samples / SMALL, "r").returncode == 0
    r = _cli(project_root, "derive", "r", "--store", str(store))
    assert r.returncode == 0, r.stderr
    assert _ingest(project_root, store, shared_samples / SMALL_RANK1, "r").returncode == 0
    _fill_to_the_byte(tmpfs8)
    files_before = _snapshot(store)
    r = _cli(project_root, "derive", "r", "--store", str(store))
    line = _one_clear_line(r, "No space left on device")
    assert str(store) in line  # names what could not be written
    assert _snapshot(store) == files_before  # the published marts are untouched
    assert _leftovers(store) == []
    (tmpfs8 / "filler").unlink()
    r = _cli(project_root, "derive", "r", "--store", str(store))
    assert r.returncode == 0, r.stderr
    assert _leftovers(store) == []


def test_report_disk_full_catalog_is_clear_without_orphans(
    tmpfs8: Path, shared_samples: Path, project_root: Path, tmp_path: Path
) -> None:
    store = tmpfs8 / "store"
    assert _ingest(project_root, store, shared_samples / SMALL, "r").returncode == 0
    assert _cli(project_root, "derive", "r", "--store", str(store)).returncode == 0
    (store / "catalog.duckdb").unlink()  # the report must rebuild it, on a full disk
    _fill_to_the_byte(tmpfs8)
    out = tmp_path / "r.html"
    r = _cli(project_root, "report", "r", "-o", str(out), "--store", str(store))
    line = _one_clear_line(r, "No space left on device")
    assert "catalog.duckdb" in line
    assert _leftovers(store) == []
    assert not list(store.glob(".catalog.duckdb*"))
    assert not out.exists()


def test_report_output_disk_full_leaves_no_temp_file(
    tmpfs8: Path, shared_samples: Path, project_root: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    assert _ingest(project_root, store, shared_samples / SMALL, "r").returncode == 0
    assert _cli(project_root, "derive", "r", "--store", str(store)).returncode == 0
    _fill_to_the_byte(tmpfs8)
    out = tmpfs8 / "r.html"
    r = _cli(project_root, "report", "r", "-o", str(out), "--store", str(store))
    line = _one_clear_line(r, "No space left on device")
    assert str(out) in line and "cannot write the report" in line
    assert sorted(p.name for p in tmpfs8.iterdir()) == ["filler"]


def test_read_only_store_derive_is_clear_and_report_reads(
    tmpfs8: Path, shared_samples: Path, project_root: Path, tmp_path: Path
) -> None:
    store = tmpfs8 / "store"
    assert _ingest(project_root, store, shared_samples / SMALL, "r").returncode == 0
    assert _cli(project_root, "derive", "r", "--store", str(store)).returncode == 0
    r = subprocess.run(["mount", "-o", "remount,ro", str(tmpfs8)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot remount read-only: {r.stderr.strip()}")
    files_before = _snapshot(store)
    r = _cli(project_root, "derive", "r", "--store", str(store))
    line = _one_clear_line(r, "store is read-only")  # the lock, before any work (fs_policy)
    assert str(store) in line
    # A derived run's report needs no write into the store: it is built.
    out = tmp_path / "r.html"
    r = _cli(project_root, "report", "r", "-o", str(out), "--store", str(store))
    assert r.returncode == 0, r.stderr[-3000:]
    assert out.stat().st_size > 0
    assert _snapshot(store) == files_before
