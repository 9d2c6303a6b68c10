"""One symlink and file-type policy for every path commscope reads (``commscope.pipeline.fs_policy``).

Issue 23, items 10 and 11: a ``manifest.json`` symlinked from outside the input tree was read
and stored; ``serve`` walked a symlinked run folder outside the watched tree; a file swapped
for a symlink (or another file) after discovery was read; ``/dev/zero`` or a FIFO named on
the command line failed silently (a FIFO could hang). Each vector has a test here.
"""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import commscope.pipeline.ingest as ing
from commscope.parsers._io import Source
from commscope.parsers.registry import ParseError
from commscope.pipeline import run_config as rc
from commscope.pipeline.cli import main
from commscope.pipeline.fs_policy import check_file
from commscope.pipeline.ingest import (
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNKNOWN,
    discover,
    ingest_file,
    ingest_paths,
)
from commscope.pipeline.runs import discover_runs
from commscope.pipeline.store import Store

RUN = "links"
LOG = "op AllReduce 1024\nop AllGather 2048\n"
SECRET = "op Secret 4242\n"
HANG_GUARD_S = 20


@contextmanager
def no_hang(seconds: int = HANG_GUARD_S) -> Iterator[None]:
    """Fail instead of hanging (a FIFO opened for reading blocks until a writer comes)."""

    def boom(signum: int, frame: object) -> None:
        raise TimeoutError(f"still blocked after {seconds} s")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def secret_rows(store: Store) -> int:
    """Rows of the secret file that reached the store (must stay 0)."""
    con = store.connect()
    try:
        row = con.execute("SELECT count(*) FROM comm_ops WHERE op = 'Secret'").fetchone()
    finally:
        con.close()
    return int(row[0]) if row else 0


# --------------------------------------------------------------------------- manifests


def _manifest(path: Path, pp: int) -> None:
    path.write_text(json.dumps({"config": {"parallel": {"pp": pp, "tp": 1, "dp": 1}}}))


def test_manifest_symlinked_from_outside_the_tree_is_not_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    _manifest(outside / "manifest.json", 7)
    tree = tmp_path / "in"
    tree.mkdir()
    (tree / "a.log").write_text(LOG)
    (tree / "manifest.json").symlink_to(outside / "manifest.json")
    store = Store.open(tmp_path / "store")
    with caplog.at_level(logging.WARNING):
        results = ingest_paths(store, [tree], run_id=RUN, fmt="test_lines")
    assert [r.status for r in results] == [STATUS_OK]
    assert rc.load(store, RUN) is None  # neither stored nor, therefore, shown in a report
    assert any("outside the input folder" in r.getMessage() for r in caplog.records)


def test_manifest_symlinked_inside_the_tree_is_read(tmp_path: Path) -> None:
    tree = tmp_path / "in"
    (tree / "meta").mkdir(parents=True)
    _manifest(tree / "meta" / "real.json", 3)
    (tree / "a.log").write_text(LOG)
    (tree / "manifest.json").symlink_to(tree / "meta" / "real.json")
    store = Store.open(tmp_path / "store")
    ingest_paths(store, [tree], run_id=RUN, fmt="test_lines")
    stored = rc.load(store, RUN)
    assert stored is not None and stored.config["parallel"]["pp"] == 3


def test_manifest_that_is_a_fifo_is_not_opened(tmp_path: Path) -> None:
    tree = tmp_path / "in"
    tree.mkdir()
    os.mkfifo(tree / "manifest.json")
    with no_hang():
        assert rc.read_manifest(tree) is None


# --------------------------------------------------------------------------- serve


def test_serve_does_not_walk_a_symlinked_run_folder_outside_the_watched_tree(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.log").write_text(SECRET)
    watched = tmp_path / "watched"
    (watched / "run_a").mkdir(parents=True)
    (watched / "run_a" / "a.log").write_text(LOG)
    (watched / "run_b").symlink_to(outside, target_is_directory=True)
    files, folders, skipped = discover_runs([watched])
    walked = [f.resolve() for fs in files.values() for f in fs]
    assert walked == [(watched / "run_a" / "a.log").resolve()]
    assert all(f.is_relative_to(watched.resolve()) for f in walked)
    assert all(d.resolve().is_relative_to(watched.resolve()) for ds in folders.values() for d in ds)
    assert any("run_b" in s and "not followed" in s for s in skipped), skipped


# --------------------------------------------------------------------------- swapped files


def _swap_after_hash(monkeypatch: pytest.MonkeyPatch, path: Path, action: object) -> None:
    """Run ``action(path)`` once, after ingest checked and hashed the file, before parsing."""
    original = ing._scan  # the one content pass (hashes) before the parse

    def hashed_then_swapped(p: Path, *a: object, **kw: object) -> object:
        scanned = original(p, *a, **kw)  # type: ignore[arg-type]
        if not getattr(hashed_then_swapped, "done", False):
            hashed_then_swapped.done = True  # type: ignore[attr-defined]
            action(path)  # type: ignore[operator]
        return scanned

    monkeypatch.setattr(ing, "_scan", hashed_then_swapped)


@pytest.mark.parametrize("swap_to", ["symlink", "other_file"])
def test_a_file_swapped_after_it_was_checked_is_not_read(
    swap_to: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "secret.log"
    secret.write_text(SECRET)
    victim = tmp_path / "in" / "a.log"
    victim.parent.mkdir()
    victim.write_text(LOG)

    def swap(p: Path) -> None:
        if swap_to == "symlink":
            p.unlink()
            p.symlink_to(secret)
        else:  # another file renamed over it (atomic, as a rotation or an attacker does)
            other = p.with_name("other.tmp")
            other.write_text(SECRET)
            other.replace(p)

    _swap_after_hash(monkeypatch, victim, swap)
    store = Store.open(tmp_path / "store")
    res = ingest_file(store, victim, run_id=RUN, fmt="test_lines", symlink_ok=False)
    assert res.status == STATUS_ERROR, res
    assert "replaced" in (res.message or "")
    assert store.committed(RUN).is_empty()
    assert secret_rows(store) == 0


def test_a_walked_file_swapped_for_a_symlink_before_ingest_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "secret.log"
    secret.write_text(SECRET)
    tree = tmp_path / "in"
    tree.mkdir()
    (tree / "a.log").write_text(LOG)
    found = ing.discover_checked

    def discover_then_swap(paths: object) -> object:
        out = found(paths)  # type: ignore[arg-type]
        (tree / "a.log").unlink()
        (tree / "a.log").symlink_to(secret)
        return out

    monkeypatch.setattr(ing, "discover_checked", discover_then_swap)
    store = Store.open(tmp_path / "store")
    results = ingest_paths(store, [tree], run_id=RUN, fmt="test_lines")
    assert [r.status for r in results] == [STATUS_ERROR]
    assert "symlink" in (results[0].message or "")
    assert secret_rows(store) == 0


def test_a_named_symlink_is_still_read(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.log"
    real.write_text(LOG)
    link = tmp_path / "link.log"
    link.symlink_to(real)
    store = Store.open(tmp_path / "store")
    results = ingest_paths(store, [link], run_id=RUN, fmt="test_lines")
    assert [r.status for r in results] == [STATUS_OK]


# --------------------------------------------------------------------------- non-regular files


@pytest.mark.parametrize("kind", ["char_device", "fifo"])
def test_a_named_device_or_fifo_is_refused_with_one_line(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if kind == "char_device":
        path, word = Path("/dev/zero"), "character device"
        if not path.exists():
            pytest.skip("no /dev/zero")
    else:
        path, word = tmp_path / "pipe.log", "FIFO"
        os.mkfifo(path)
    with no_hang():
        code = main(["ingest", str(path), "--run", RUN, "--store", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip() == f"commscope: error: {path}: not a regular file ({word})"


def test_a_folder_walk_skips_a_fifo_with_a_note(tmp_path: Path) -> None:
    tree = tmp_path / "in"
    tree.mkdir()
    (tree / "a.log").write_text(LOG)
    os.mkfifo(tree / "b.log")
    files, notes = discover([tree])
    assert files == [tree / "a.log"]
    assert [(n.path, n.status) for n in notes] == [(str(tree / "b.log"), STATUS_UNKNOWN)]
    assert "not a regular file (FIFO)" in (notes[0].message or "")
    store = Store.open(tmp_path / "store")
    with no_hang():
        results = ingest_paths(store, [tree], run_id=RUN, fmt="test_lines")
    assert sorted(r.status for r in results) == sorted([STATUS_OK, STATUS_UNKNOWN])


def test_fifo_is_never_opened_for_a_blocking_read(tmp_path: Path) -> None:
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    with no_hang():
        assert check_file(fifo) == "not a regular file (FIFO)"
        with pytest.raises(ParseError, match="not a regular file"):
            Source(fifo).open()
        store = Store.open(tmp_path / "store")
        res = ingest_file(store, fifo, run_id=RUN, fmt="test_lines")
    assert res.status == STATUS_ERROR and res.message == "not a regular file (FIFO)"
