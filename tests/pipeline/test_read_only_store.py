"""A store that cannot be written (issue 23, item 9): one line, never an OSError traceback.

Writers (ingest, derive) stop with ``store is read-only: <path>``; readers (query, summary,
report to a writable ``-o``) still work, on a read-only copy at another path too, where the
catalog is stale and cannot be rewritten (its views are then built in memory).
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from commscope.pipeline.cli import main
from commscope.pipeline.store import Store, StoreReadOnlyError

SMALL = "nccl_debug/gfbench_2.20.5_2rank_normal_rank0_debugfile.txt"
RUN = "ro"


@pytest.fixture
def filled_store(tmp_path: Path, shared_samples: Path) -> Path:
    """A store holding one small real NCCL log."""
    root = tmp_path / "store"
    assert main(["ingest", str(shared_samples / SMALL), "--run", RUN, "--store", str(root)]) == 0
    return root


def _deny_lock(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    """Make creating ``.lock`` fail as on a read-only file system (works without root)."""
    real_open = Path.open

    def fake_open(self: Path, mode: str = "r", *args: object, **kwargs: object) -> object:
        if self.name == ".lock" and "a" in mode:
            raise OSError(code, os.strerror(code), str(self))
        return real_open(self, mode, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "open", fake_open)


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_lock_on_a_read_only_store_is_a_store_error(
    code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store.open(tmp_path / "s")
    _deny_lock(monkeypatch, code)
    with (
        pytest.raises(StoreReadOnlyError, match=f"store is read-only: {store.root}"),
        store.lock(),
    ):
        pass


def test_readers_work_and_writers_say_read_only_without_root(
    filled_store: Path,
    shared_samples: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (filled_store / "catalog.duckdb").unlink()  # stale/missing catalog: must be rebuilt
    _deny_lock(monkeypatch, errno.EROFS)
    capsys.readouterr()
    store = str(filled_store)
    assert main(["query", "SELECT count(*) AS n FROM comm_ops", "--store", store]) == 0
    assert main(["summary", "--store", store]) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "comm_ops" in out.out
    code = main(["ingest", str(shared_samples / SMALL), "--run", "other", "--store", store])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == f"commscope: error: store is read-only: {filled_store}"
    assert not (filled_store / "catalog.duckdb").exists()  # nothing written


@pytest.fixture
def read_only_mount(filled_store: Path, tmp_path: Path) -> Iterator[Path]:
    """``filled_store`` (derived) seen read-only through a bind mount at another path."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to bind-mount a folder read-only")
    assert main(["derive", RUN, "--store", str(filled_store)]) == 0
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "--bind", str(filled_store), str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot bind-mount: {r.stderr.decode().strip()}")
    try:
        r = subprocess.run(["mount", "-o", "remount,bind,ro", str(mnt)], capture_output=True)
        if r.returncode != 0:
            pytest.skip(f"cannot remount read-only: {r.stderr.decode().strip()}")
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_read_only_mount_at_another_path(
    read_only_mount: Path,
    shared_samples: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = str(read_only_mount)
    before = sorted(p.name for p in read_only_mount.iterdir())
    capsys.readouterr()
    assert main(["query", "SELECT count(*) FROM comm_ops", "--store", store]) == 0
    assert main(["summary", "--store", store]) == 0
    out = tmp_path / "report.html"
    assert main(["report", RUN, "-o", str(out), "--store", store]) == 0
    assert out.stat().st_size > 0
    assert "Traceback" not in capsys.readouterr().err
    for argv in (
        ["ingest", str(shared_samples / SMALL), "--run", "other"],
        ["derive", RUN],
    ):
        assert main([*argv, "--store", store]) == 2
        err = capsys.readouterr().err
        assert err.strip() == f"commscope: error: store is read-only: {read_only_mount}", argv
    assert sorted(p.name for p in read_only_mount.iterdir()) == before
