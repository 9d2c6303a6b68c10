"""Incremental ingest of growing files: appended lines only, same rows as one ingest.

Each test copies a real sample into tmp, grows the copy in steps (some steps end mid-line),
ingests after each step, and compares the store with a single ingest of the final file.
Expected line totals are counted here with plain byte counting, not by the parsers.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from commscope.parsers.schema import DATA_TABLES, conform
from commscope.pipeline.ingest import ingest_file
from commscope.pipeline.store import Store

NCCL = ("nccl_debug", "nccltests_2.27.7_1proc_2gpu_allreduce.log")
NCCL_INIT = ("nccl_debug", "p5_efa_2.22.3_2node_16rank_mpirun_tagged.log")
DS_VERBOSE = ("deepspeed_comms", "mlprof_thetagpu_2node_16gpu_verbose_run1.log")
DS_SUMMARY = ("deepspeed_comms", "mlprof_polaris_1node_4gpu_summary_ansi.log")


def _lines_in(data: bytes) -> int:
    """Lines as the parsers count them: newlines, plus one for a final line without one."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _tables(store: Store) -> dict[str, pl.DataFrame]:
    """Every data table of run 'r' (committed batches only, like the views), rows sorted."""
    batches = set(store.committed("r")["batch_id"].to_list())
    out = {}
    for t in DATA_TABLES:
        files = sorted(
            f for f in (store.tables_dir / t / "r").glob("*.parquet") if f.stem in batches
        )
        if not files:
            out[t] = pl.DataFrame()
            continue
        df = pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")
        out[t] = df.sort(df.columns, nulls_last=True)
    return out


def _line_start(data: bytes, line_no: int) -> int:
    """Byte offset of the start of 1-based line ``line_no``."""
    pos = 0
    for _ in range(line_no - 1):
        pos = data.index(b"\n", pos) + 1
    return pos


def _grow_and_compare(
    tmp_path: Path, sample: Path, cuts: list[int], *, fmt: str
) -> tuple[Store, pl.DataFrame]:
    """Grow a copy of ``sample`` through ``cuts`` (byte offsets), ingesting after each step."""
    data = sample.read_bytes()
    live = tmp_path / "live" / sample.name
    live.parent.mkdir()
    inc = Store.open(tmp_path / "inc")
    done = 0
    for cut in [*cuts, len(data)]:
        with live.open("ab") as fh:
            fh.write(data[done:cut])
        done = cut
        res = ingest_file(inc, live, run_id="r", fmt=fmt, follow=True)
        assert res.ok, res
    # A final line without newline waits in follow mode; a plain ingest then accounts it.
    if not data.endswith(b"\n"):
        assert ingest_file(inc, live, run_id="r", fmt=fmt).ok

    one = Store.open(tmp_path / "one")
    assert ingest_file(one, live, run_id="r", fmt=fmt).status == "ingested"
    got, want = _tables(inc), _tables(one)
    for t in DATA_TABLES:
        assert_frame_equal(got[t], want[t], check_dtypes=True), t
    log = inc.committed("r").sort("byte_start")
    assert log["lines_total"].sum() == _lines_in(data)
    assert log["byte_start"].to_list()[1:] == log["byte_end"].to_list()[:-1]
    assert log["byte_end"].max() == len(data)
    firsts = log["first_line_no"].to_list()
    assert firsts == [1] + [1 + _lines_in(data[: int(e)]) for e in log["byte_end"].to_list()[:-1]]
    return inc, log


def test_nccl_coll_log_grows_in_steps(tmp_path: Path, shared_samples: Path) -> None:
    sample = shared_samples.joinpath(*NCCL)
    data = sample.read_bytes()
    lines = data.split(b"\n")
    # Cut before COLL lines (not between a COLL line and its TUNING line), twice mid-line.
    colls = [i + 1 for i, ln in enumerate(lines) if b"opCount" in ln]
    a, b, c = colls[10], colls[400], colls[800]
    cuts = [
        _line_start(data, a) + 30,  # mid-line: completed by the next step
        _line_start(data, b),
        _line_start(data, c) + 55,
    ]
    inc, log = _grow_and_compare(tmp_path, sample, cuts, fmt="nccl_debug")
    assert log.height == 4
    assert log["parser_state"].null_count() == 0
    # comm_ops rows match COLL lines one to one (counted here, independently).
    con = inc.connect()
    n = con.execute("SELECT count(*) FROM comm_ops").fetchone()[0]
    ranks = con.execute("SELECT count(*) FROM comm_ops WHERE rank IS NULL").fetchone()[0]
    con.close()
    assert n == data.count(b" opCount ")
    assert ranks == 0  # communicators learnt in the first step still give ranks later


def test_nccl_init_and_destroy_across_steps(tmp_path: Path, shared_samples: Path) -> None:
    sample = shared_samples.joinpath(*NCCL_INIT)
    data = sample.read_bytes()
    lines = data.split(b"\n")
    last_init = max(i for i, ln in enumerate(lines) if b"Init COMPLETE" in ln) + 1
    cuts = [_line_start(data, last_init + 1) + 20, _line_start(data, last_init + 400)]
    inc, _ = _grow_and_compare(tmp_path, sample, cuts, fmt="nccl_debug")
    comms = conform(_tables(inc)["communicators"], "communicators")
    assert comms.num_rows == data.count(b"Init COMPLETE")


def test_deepspeed_verbose_grows_in_steps(tmp_path: Path, shared_samples: Path) -> None:
    sample = shared_samples.joinpath(*DS_VERBOSE)
    data = sample.read_bytes()
    n = len(data)
    cuts = [n // 3 + 7, n // 2, 2 * n // 3 + 11]
    inc, _ = _grow_and_compare(tmp_path, sample, cuts, fmt="deepspeed_comms")
    ops = _tables(inc)["comm_ops"]
    assert ops.height == data.count(b"comm op:")
    conform(ops, "comm_ops")


def test_deepspeed_summary_tables_after_growth(tmp_path: Path, shared_samples: Path) -> None:
    sample = shared_samples.joinpath(*DS_SUMMARY)
    data = sample.read_bytes()
    first_table = data.index(b"Comm. Op")
    cuts = [first_table // 2 + 3, _line_start(data, data[:first_table].count(b"\n") + 1)]
    inc, _ = _grow_and_compare(tmp_path, sample, cuts, fmt="deepspeed_comms")
    assert _tables(inc)["comm_summaries"].height > 0


def test_partial_last_line_waits_in_follow_mode(tmp_path: Path, shared_samples: Path) -> None:
    data = shared_samples.joinpath(*NCCL).read_bytes()
    live = tmp_path / "nccl.log"
    cut = _line_start(data, 600) + 40
    live.write_bytes(data[:cut])
    store = Store.open(tmp_path / "s")
    res = ingest_file(store, live, run_id="r", follow=True)
    assert res.status == "ingested" and res.counts.total == 599
    assert res.counts.rejected == 0  # the cut line is not read yet
    again = ingest_file(store, live, run_id="r", follow=True)
    assert again.status == "already ingested" and "no new complete line" in (again.message or "")
    with live.open("ab") as fh:
        fh.write(data[cut : _line_start(data, 700)])
    more = ingest_file(store, live, run_id="r", follow=True)
    assert more.counts.total == 100 and "appended" in (more.message or "")
    assert store.committed("r")["lines_total"].sum() == 699


def test_cut_line_rejected_then_grown_continues(tmp_path: Path, shared_samples: Path) -> None:
    """Schema 1.3: a cut last line, once complete, is read from its start; nothing twice."""
    data = shared_samples.joinpath(*NCCL).read_bytes()
    live = tmp_path / "nccl.log"
    coll = [i + 1 for i, ln in enumerate(data.split(b"\n")) if b" opCount " in ln][300]
    cut = _line_start(data, coll + 1) - 20
    live.write_bytes(data[:cut])
    store = Store.open(tmp_path / "s")
    first = ingest_file(store, live, run_id="r")  # not follow: the cut COLL line is a reject
    assert first.counts.total == coll and first.counts.rejected == 1
    live.write_bytes(data)
    res = ingest_file(store, live, run_id="r")
    assert res.status == "ingested" and "appended" in (res.message or "")
    assert res.counts.total == _lines_in(data) - coll + 1  # the completed line and the rest
    assert res.counts.rejected == 0


@pytest.mark.parametrize("change", ["rewritten", "shrank"])
def test_rewritten_or_shrunk_file_is_new_content(
    tmp_path: Path, shared_samples: Path, change: str
) -> None:
    data = shared_samples.joinpath(*DS_VERBOSE).read_bytes()
    live = tmp_path / "ds.log"
    half = _line_start(data, 2000)
    live.write_bytes(data[:half])
    store = Store.open(tmp_path / "s")
    assert ingest_file(store, live, run_id="r").status == "ingested"
    if change == "rewritten":
        new = data[:10] + bytes([data[10] ^ 1]) + data[11:]  # one byte differs, and grew
    else:
        new = data[: _line_start(data, 1000)]
    live.write_bytes(new)
    res = ingest_file(store, live, run_id="r")
    assert res.status == "ingested"
    assert change in (res.message or ""), res.message
    assert res.counts.total == _lines_in(new)  # read from the start
    log = store.committed("r")
    assert log.height == 2 and log["byte_start"].to_list() == [0, 0]


def test_state_rebuilt_for_commits_without_state(tmp_path: Path, shared_samples: Path) -> None:
    """A commit from before schema 1.1 (no parser_state, no first_line_no) still resumes."""
    data = shared_samples.joinpath(*NCCL).read_bytes()
    live = tmp_path / "nccl.log"
    coll = [i + 1 for i, ln in enumerate(data.split(b"\n")) if b" opCount " in ln][500]
    mid = _line_start(data, coll)  # before a COLL line: its TUNING line comes after it
    live.write_bytes(data[:mid])
    store = Store.open(tmp_path / "s")
    ingest_file(store, live, run_id="r")
    # Strip the 1.1 columns from the commit-log row, as a 1.0 store has it.
    (row,) = list((store.tables_dir / "ingested_files" / "r").glob("*.parquet"))
    pl.read_parquet(row).drop("parser_state", "first_line_no").write_parquet(row)
    live.write_bytes(data)
    res = ingest_file(store, live, run_id="r")
    assert "appended" in (res.message or "")
    assert any("rebuilt" in w for w in res.warnings)
    one = Store.open(tmp_path / "one")
    ingest_file(one, live, run_id="r")
    got, want = _tables(store), _tables(one)
    assert_frame_equal(got["comm_ops"], want["comm_ops"])
