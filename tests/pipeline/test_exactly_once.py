"""Exactly-once ingestion across live logs, rotation, renames and compression (issue 23).

Each test copies a real sample (``../shared/samples``) into tmp, changes the copy the way a
cluster's logging does (a cut last line, rotation and gzip, a rename, a grown ``.gz``), ingests
after each step and compares the store's data rows with one ingest of the final content.
Expected counts come from byte counting here, never from the parsers.
"""

from __future__ import annotations

import errno
import gzip
import logging
import shutil
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import commscope.pipeline.store as store_mod
from commscope.parsers.schema import DATA_TABLES
from commscope.pipeline.ingest import STATUS_OK, STATUS_SKIPPED, ingest_file, ingest_paths
from commscope.pipeline.store import Store, StoreError

DS_VERBOSE = ("deepspeed_comms", "mlprof_thetagpu_2node_16gpu_verbose_run1.log")
NCCL = ("nccl_debug", "nccltests_2.27.7_1proc_2gpu_allreduce.log")
PROVENANCE = ("source_file", "path", "run_id")
"""Columns that name the file a row came from: a renamed or rotated copy changes them."""


def _data(store: Store, run: str = "r") -> dict[str, pl.DataFrame]:
    """Every data table of ``run`` (committed batches only, like the views), without the
    columns naming the file, rows sorted."""
    batches = set(store.committed(run)["batch_id"].to_list())
    out = {}
    for t in DATA_TABLES:
        files = sorted(
            f for f in (store.tables_dir / t / run).glob("*.parquet") if f.stem in batches
        )
        if not files:
            continue
        df = pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")
        df = df.drop([c for c in PROVENANCE if c in df.columns])
        out[t] = df.sort(df.columns, nulls_last=True)
    return out


def _single(tmp_path: Path, data: bytes, name: str) -> dict[str, pl.DataFrame]:
    """The data rows of one ingest of ``data`` into a fresh store."""
    one = tmp_path / "single" / name
    one.parent.mkdir(parents=True)
    one.write_bytes(data)
    store = Store.open(tmp_path / "single_store")
    assert ingest_file(store, one, run_id="r").status == STATUS_OK
    return _data(store)


def _assert_same(got: dict[str, pl.DataFrame], want: dict[str, pl.DataFrame]) -> None:
    assert sorted(got) == sorted(want)
    for t in want:
        assert_frame_equal(got[t], want[t], check_dtypes=False)


def _line_start(data: bytes, line_no: int) -> int:
    pos = 0
    for _ in range(line_no - 1):
        pos = data.index(b"\n", pos) + 1
    return pos


def _mid_line_cut(data: bytes, marker: bytes, nth: int) -> int:
    """An offset inside the ``nth`` line holding ``marker`` (the line is cut there)."""
    lines = data.split(b"\n")
    no = [i + 1 for i, ln in enumerate(lines) if marker in ln][nth]
    return _line_start(data, no) + len(lines[no - 1]) // 2


# ------------------------------------------------------------------ live logs (cut last line)


def test_serve_task_holds_back_a_cut_last_line(
    tmp_path: Path, shared_samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """serve's per-file task reads a live log as `--follow` does: a cut line waits."""
    import commscope.pipeline.flows as fl

    monkeypatch.setattr(fl, "get_run_logger", lambda: logging.getLogger("test"))
    data = shared_samples.joinpath(*DS_VERBOSE).read_bytes()
    live = tmp_path / "watch" / "run1" / "ds.log"
    live.parent.mkdir(parents=True)
    cut = _mid_line_cut(data, b"comm op:", 40)
    live.write_bytes(data[:cut])
    store = tmp_path / "store"
    first = fl.ingest_file_task.fn(str(store), str(live), "r")  # cycle 1: line cut
    assert first["status"] == STATUS_OK and first["counts"]["rejected"] == 0
    live.write_bytes(data)  # the line completes, the rest follows
    fl.ingest_file_task.fn(str(store), str(live), "r")  # cycle 2
    again = fl.ingest_file_task.fn(str(store), str(live), "r")  # cycle 3: nothing new
    assert again["status"] == STATUS_SKIPPED
    got = _data(Store.open(store))
    assert got["comm_ops"].height == data.count(b"comm op:")
    _assert_same(got, _single(tmp_path, data, "ds.log"))


@pytest.mark.parametrize("sample", [DS_VERBOSE, NCCL], ids=["deepspeed", "nccl"])
def test_plain_ingest_of_a_cut_line_later_completed_stores_nothing_twice(
    tmp_path: Path, shared_samples: Path, sample: tuple[str, str]
) -> None:
    """Without --follow the cut line is a reject; once complete it is read from its start,
    and every data row is stored once (the earlier reject is the cut line's only trace)."""
    data = shared_samples.joinpath(*sample).read_bytes()
    marker = b"comm op:" if sample is DS_VERBOSE else b" opCount "
    live = tmp_path / "live" / "x.log"
    live.parent.mkdir()
    cut = _mid_line_cut(data, marker, 20)
    live.write_bytes(data[:cut])
    store = Store.open(tmp_path / "s")
    first = ingest_file(store, live, run_id="r")
    assert first.counts.rejected >= 1 and first.counts.total == data[:cut].count(b"\n") + 1
    still_cut = data[: cut + 3]  # grows, still inside the same line
    live.write_bytes(still_cut)
    assert ingest_file(store, live, run_id="r").status == STATUS_SKIPPED
    live.write_bytes(data)
    res = ingest_file(store, live, run_id="r")
    assert res.status == STATUS_OK and "appended" in (res.message or "")
    # The cut line is read again (once complete), every other line once.
    log = store.committed("r")
    assert log["lines_total"].sum() == data.count(b"\n") + 1
    got = _data(store)
    want = _single(tmp_path, data, "x.log")
    assert got["comm_ops"].height == data.count(marker)
    _assert_same(
        {t: df for t, df in got.items() if t != "rejects"},
        {t: df for t, df in want.items() if t != "rejects"},
    )
    extra = got["rejects"].height - want.get("rejects", pl.DataFrame()).height
    assert extra == first.counts.rejected


# ------------------------------------------------------------------ rotation, renames, .gz


@pytest.mark.parametrize("compress", [False, True], ids=["rotated", "rotated_gz"])
def test_rotated_copy_of_an_ingested_log_adds_nothing(
    tmp_path: Path, shared_samples: Path, compress: bool
) -> None:
    """logrotate: ``x.log`` -> ``x.log.1`` (then gzipped); a new, empty ``x.log`` starts."""
    data = shared_samples.joinpath(*DS_VERBOSE).read_bytes()
    folder = tmp_path / "logs"
    folder.mkdir()
    live = folder / "x.log"
    live.write_bytes(data)
    store = Store.open(tmp_path / "s")
    ingest_paths(store, [folder], run_id="r")
    before = _data(store)
    rotated = folder / "x.log.1"
    live.rename(rotated)
    if compress:
        with gzip.open(folder / "x.log.1.gz", "wb") as fh:
            fh.write(rotated.read_bytes())
        rotated.unlink()
    live.write_bytes(b"")
    results = ingest_paths(store, [folder], run_id="r")
    assert all(r.status != STATUS_OK for r in results), results
    _assert_same(_data(store), before)
    assert store.committed("r").height == 1


def test_renamed_log_that_grew_adds_only_the_new_lines(
    tmp_path: Path, shared_samples: Path
) -> None:
    data = shared_samples.joinpath(*NCCL).read_bytes()
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    colls = [i + 1 for i, ln in enumerate(data.split(b"\n")) if b" opCount " in ln]
    half = _line_start(data, colls[500])  # before a COLL line (its TUNING line follows it)
    a.write_bytes(data[:half])
    store = Store.open(tmp_path / "s")
    assert ingest_file(store, a, run_id="r").status == STATUS_OK
    a.rename(b)
    with b.open("ab") as fh:
        fh.write(data[half:])
    res = ingest_file(store, b, run_id="r")
    assert res.status == STATUS_OK and "continues" in (res.message or ""), res
    assert res.counts.total == data.count(b"\n") - data[:half].count(b"\n")
    _assert_same(_data(store), _single(tmp_path, data, "a.log"))


@pytest.mark.parametrize("members", [1, 2], ids=["recompressed", "appended_member"])
def test_gz_whose_content_grew_adds_only_the_new_lines(
    tmp_path: Path, shared_samples: Path, members: int
) -> None:
    """A ``.gz`` rewritten with more content, or with a second member appended."""
    data = shared_samples.joinpath(*DS_VERBOSE).read_bytes()
    p = tmp_path / "x.log.gz"
    third = _line_start(data, data.count(b"\n") // 3)
    p.write_bytes(gzip.compress(data[:third]))
    store = Store.open(tmp_path / "s")
    assert ingest_file(store, p, run_id="r").status == STATUS_OK
    if members == 1:
        p.write_bytes(gzip.compress(data))
    else:
        p.write_bytes(gzip.compress(data[:third]) + gzip.compress(data[third:]))
    res = ingest_file(store, p, run_id="r")
    assert res.status == STATUS_OK and "appended" in (res.message or ""), res
    assert res.counts.total == data.count(b"\n") - data[:third].count(b"\n")
    _assert_same(_data(store), _single(tmp_path, data, "x.log"))


# ------------------------------------------------------------------ policy: truncated, replaced, deleted


def test_truncated_replaced_and_deleted_files_policy(tmp_path: Path, shared_samples: Path) -> None:
    """Content versions accumulate: a truncated (copytruncate) or replaced file's new content
    is added as new content, what was stored stays; a deleted file's rows stay."""
    nccl = shared_samples.joinpath(*NCCL).read_bytes()
    ds = shared_samples.joinpath(*DS_VERBOSE).read_bytes()
    live = tmp_path / "x.log"
    live.write_bytes(ds)
    store = Store.open(tmp_path / "s")
    ingest_file(store, live, run_id="r")
    n_ds = ds.count(b"comm op:")
    # copytruncate: the log is emptied and written again from the start with new lines.
    live.write_bytes(b"")
    assert ingest_file(store, live, run_id="r").status != STATUS_OK
    part = ds[: _line_start(ds, 2000)].replace(b"comm op:", b"comm op:", 1)
    new = part[:30] + b"X" + part[31:]  # new content (differs from the stored version)
    live.write_bytes(new)
    res = ingest_file(store, live, run_id="r")
    assert res.status == STATUS_OK and "new content" in (res.message or "")
    assert _data(store)["comm_ops"].height == n_ds + new.count(b"comm op:")
    # Replaced by another log entirely: added, the earlier versions stay.
    live.write_bytes(nccl)
    assert ingest_file(store, live, run_id="r").status == STATUS_OK
    ops = _data(store)["comm_ops"].height
    assert ops == n_ds + new.count(b"comm op:") + nccl.count(b" opCount ")
    # Deleted: the store is the archive of what was logged; its rows stay.
    live.unlink()
    results = ingest_paths(store, [tmp_path / "x.log"], run_id="r")
    assert results[0].status == "error"
    assert _data(store)["comm_ops"].height == ops


# ------------------------------------------------------------------ per-file cost


def test_commit_log_work_per_file_does_not_grow_with_the_run(
    tmp_path: Path, shared_samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commit-log files read per ingested file stay constant as a run grows 100 -> 400 files
    (counted, not timed: the old code re-read the whole log for every file, O(n^2))."""
    line = next(
        ln for ln in shared_samples.joinpath(*NCCL).read_bytes().split(b"\n") if b" opCount " in ln
    )
    calls = 0
    real = store_mod._commit_rows

    def counted(path: Path) -> pl.DataFrame:
        nonlocal calls
        calls += 1
        return real(path)

    monkeypatch.setattr(store_mod, "_commit_rows", counted)
    store = Store.open(tmp_path / "s")
    folder = tmp_path / "many"
    folder.mkdir()
    per_file: list[float] = []
    for step in range(4):
        for i in range(100):
            n = step * 100 + i
            (folder / f"f{n:04d}.log").write_bytes(
                line.replace(b"opCount ", f"opCount {n:x}".encode() + b"0", 1) + b"\n"
            )
        calls = 0
        files = sorted(folder.glob("*.log"))[step * 100 :]
        results = ingest_paths(store, files, run_id="r", build_catalog=False)
        assert [r.status for r in results] == [STATUS_OK] * 100
        per_file.append(calls / 100)
    assert per_file[-1] <= 3, per_file
    assert per_file[-1] <= per_file[0] + 1, per_file
    assert store.committed("r").height == 400


# ------------------------------------------------------------------ failure at commit


def test_failed_commit_log_write_leaves_no_data_file(
    tmp_path: Path, shared_samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No inode (or space) left for the commit-log row: the data files are taken back, so
    "nothing from this file was stored" is true, and a later ingest stores the file once."""
    src = shared_samples.joinpath(*NCCL)
    p = tmp_path / "x.log"
    shutil.copy(src, p)
    store = Store.open(tmp_path / "s")
    real = store_mod._write_atomic

    def no_inode(table: object, dest: Path) -> None:
        if dest.parent.parent.name == "ingested_files":
            raise OSError(errno.ENOSPC, "No space left on device")
        real(table, dest)  # type: ignore[arg-type]

    monkeypatch.setattr(store_mod, "_write_atomic", no_inode)
    with pytest.raises(StoreError, match="nothing from this file was stored"):
        ingest_file(store, p, run_id="r")
    left = [f for f in store.tables_dir.rglob("*") if f.is_file() and "_schema" not in f.parts]
    assert left == []
    assert not any((store.root / ".staging").iterdir())
    monkeypatch.setattr(store_mod, "_write_atomic", real)
    assert ingest_file(store, p, run_id="r").status == STATUS_OK
    assert _data(store)["comm_ops"].height == src.read_bytes().count(b" opCount ")
