"""The hang marts (SQL over the store) agree with ``commscope hang`` (Python over the dump files).

``pipeline/hang.py`` reads the dump files themselves; ``int_hang_group_progress``,
``hang_progress`` and ``hang_collectives`` compute the same triage from what the
flight_recorder parser stored (comm_ops entries, communicators with the pg_status counters).
Two routes, one answer: every finding, its op and member states, every rank's counters per
group, and the suspects. Real inputs: the two nvrx fault injections (16 ranks) and the bundled
GPU hang; synthetic: dumps without pg_status (counters from the entries).
"""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from commscope.pipeline.derive import connect_for_derive
from commscope.pipeline.hang import HangReport, triage_files
from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.store import Store
from tests.pipeline.test_hang import _dump, _e


def _ranks(rs: tuple[int, ...]) -> str | None:
    return ",".join(map(str, rs)) or None


def _marts(tmp_path: Path, paths: list[Path]) -> tuple[pl.DataFrame, pl.DataFrame]:
    store = Store.open(tmp_path / "store")
    results = ingest_paths(store, paths, run_id="h")
    assert all(r.status == "ingested" for r in results), results
    con, _ = connect_for_derive(store, "h", None)  # the run's rows, every SQL module
    try:
        coll = pl.from_arrow(con.sql("SELECT * FROM hang_collectives WHERE run_id = 'h'").arrow())
        prog = pl.from_arrow(con.sql("SELECT * FROM hang_progress WHERE run_id = 'h'").arrow())
    finally:
        con.close()
    return coll, prog


def _agree(report: HangReport, coll: pl.DataFrame, prog: pl.DataFrame) -> None:
    want = {
        (f.group, f.seq): (
            f.desc,
            _ranks(f.members),
            f.op,
            f.raw_op,
            f.first_created_ns,
            _ranks(f.never_reached),
            _ranks(f.never_completed),
            _ranks(f.started),
            _ranks(f.completed),
            _ranks(f.unknown),
            _ranks(f.blocking),
        )
        for f in report.findings
    }
    got = {
        (r["group_name"], r["seq"]): (
            r["group_desc"],
            r["group_ranks"],
            r["op"],
            r["raw_op"],
            r["first_created_ns"],
            r["never_reached"],
            r["never_completed"],
            r["started"],
            r["completed"],
            r["unknown"],
            r["blocking"],
        )
        for r in coll.iter_rows(named=True)
    }
    assert got == want
    assert coll["is_blocking"].to_list() == [b is not None for b in coll["blocking"]]
    want_p = {
        (p.group, p.rank): (p.desc, p.last_enqueued, p.last_completed, p.pending_entries, p.mapping)
        for p in report.progress
    }
    got_p = {
        (r["group_name"], r["rank"]): (
            r["group_desc"],
            r["last_enqueued_seq"],
            r["last_completed_seq"],
            r["pending_entries"],
            r["counter_source"],
        )
        for r in prog.iter_rows(named=True)
    }
    assert got_p == want_p
    blocks: dict[int, int] = {}
    for b in coll["blocking"].drop_nulls():
        for r in b.split(","):
            blocks[int(r)] = blocks.get(int(r), 0) + 1
    assert sorted(blocks.items(), key=lambda kv: (-kv[1], kv[0])) == report.suspects


@pytest.mark.parametrize("scenario", ["nvrx_lock_gil_1st", "nvrx_gpu_error_1st"])
def test_marts_agree_with_hang_on_the_nvrx_fault_injections(
    shared_samples: Path, tmp_path: Path, scenario: str
) -> None:
    paths = sorted((shared_samples / "flight_recorder" / scenario).glob("_dump_*"))
    report = triage_files(paths)
    coll, prog = _marts(tmp_path, paths)
    _agree(report, coll, prog)
    assert prog.height == len(report.progress) > 100
    assert coll["is_blocking"].sum() >= 1


def test_marts_agree_with_hang_on_the_recorded_gpu_hang(
    sample_traces: Path, tmp_path: Path
) -> None:
    paths = sorted((sample_traces / "gpu_nccl_hang_1gpu" / "flight_recorder").glob("nccl_*"))
    report = triage_files(paths)
    coll, prog = _marts(tmp_path, paths)
    _agree(report, coll, prog)
    dp = coll.filter(pl.col("group_desc") == "DP").row(0, named=True)
    assert (dp["seq"], dp["op"], dp["never_reached"], dp["blocking"]) == (
        5,
        "reduce_scatter",
        "2",
        "2",
    )
    behind = prog.filter(pl.col("is_behind")).select("group_desc", "rank").rows()
    assert sorted(behind) == [("DP", 2), ("default_pg", 2)]


@pytest.mark.parametrize("stuck", [0, 2])
def test_marts_agree_on_dumps_without_pg_status(tmp_path: Path, stuck: int) -> None:
    """Counters from the entries: rank ``stuck`` completed 4 and enqueued nothing more."""
    paths = []
    for r in range(3):
        doc: dict[str, Any] = _dump(r, 0, 0, [])
        del doc["pg_status"]
        done = {**_e(4, 50), "state": "completed"}
        doc["entries"] = [done] if r == stuck else [done, _e(5, 100 + r)]
        p = tmp_path / f"nccl_trace_rank_{r}"
        p.write_bytes(pickle.dumps(doc, protocol=2))
        paths.append(p)
    report = triage_files(paths)
    coll, prog = _marts(tmp_path, paths)
    _agree(report, coll, prog)
    assert coll.select("seq", "never_reached", "blocking").rows() == [(5, str(stuck), str(stuck))]
    assert set(prog.filter(pl.col("group_name") == "1")["counter_source"]) == {"entries"}


def test_nccl_logs_cut_where_rank_2_stops_posting(sample_traces: Path, tmp_path: Path) -> None:
    """The bundled hang's real NCCL logs, rank 2's cut (at test time) before its step-2
    ReduceScatter, as if it had never woken up: hang_collectives names rank 2 on each of its
    three communicators. Oracle: the logs' own COLL lines (regex), per process the last
    opCount on each communicator pointer, and the pointer's Init line for its members."""
    src = sample_traces / "gpu_nccl_hang_1gpu" / "nccl"
    logs = tmp_path / "nccl"
    logs.mkdir()
    for f in sorted(src.glob("*.log")):
        text = f.read_text()
        if f.name == "nccl.vm.727.log":  # rank 2 (manifest.json pids)
            cut = text.index("NCCL INFO ReduceScatter: opCount 4 ")
            text = text[: text.rindex("\n", 0, cut) + 1]
        (logs / f.name).write_text(text)
    pids = {725: 0, 726: 1, 727: 2, 728: 3}
    coll_re = re.compile(r"^\S+:(\d+):\d+ .*?opCount ([0-9a-f]+) .* comm (0x[0-9a-f]+) ", re.M)
    last: dict[tuple[int, str], int] = {}
    for f in logs.glob("*.log"):
        for pid, op_count, comm in coll_re.findall(f.read_text()):
            key = (pids[int(pid)], comm)
            last[key] = max(last.get(key, -1), int(op_count, 16))
    store = Store.open(tmp_path / "store")
    ingest_paths(store, [logs], run_id="h")
    con, _ = connect_for_derive(store, "h", None)
    try:
        coll = pl.from_arrow(con.sql("SELECT * FROM hang_collectives").arrow())
        prog = pl.from_arrow(con.sql("SELECT * FROM hang_progress").arrow())
    finally:
        con.close()
    assert isinstance(coll, pl.DataFrame) and isinstance(prog, pl.DataFrame)
    # every rank's last opCount per communicator, as the lines say (group identities aside)
    for rank in range(4):
        want = sorted(v for (r, _), v in last.items() if r == rank)
        got = sorted(prog.filter(pl.col("rank") == rank)["last_enqueued_seq"].to_list())
        assert got == want, rank
    assert set(prog["source"]) == {"nccl_debug"}
    rows = {
        (r["group_ranks"], r["seq"]): (r["op"], r["never_reached"], r["reached"], r["blocking"])
        for r in coll.iter_rows(named=True)
    }
    assert rows == {
        ("0,2", 4): ("reduce_scatter", "2", "0", "2"),  # DP: rank 2 stopped after opCount 3
        ("0,1,2,3", 2): ("all_reduce", "2", "0,1,3", "2"),  # the world's loss all_reduce
        ("2,3", 18): ("all_reduce", "2", "3", "2"),  # TP: rank 2's next layer all_reduce
    }
    assert (
        last[(2, "0x2b3d2590")],
        last[(2, "0x239c6f20")],
        last[(2, "0x2b1a6590")],
    ) == (3, 1, 17)


@pytest.mark.slow
def test_generated_faults_run_hang_and_truncated_log(project_root: Path, tmp_path: Path) -> None:
    """configs/synthetic_gpt3b_faults.toml (32 ranks, 2 iterations, NCCL logs + Flight
    Recorder dumps): truth.json plants a hang (rank 12 never posts its DP all-reduce, in the
    dumps only) and cuts rank 3's NCCL log at 60 %. The dumps name rank 12 on its DP group,
    as commscope hang does; the NCCL logs name only rank 3 (a cut log looks like a rank that
    stopped posting: the documented caveat), never rank 12."""
    from commscope.pipeline.cli import main as cli_main

    gen = tmp_path / "gen"
    assert (
        cli_main(
            [
                "generate",
                "--config",
                str(project_root / "configs" / "synthetic_gpt3b_faults.toml"),
                "--out",
                str(gen),
                "--iterations",
                "2",
                "--formats",
                "nccl,flight_recorder",
            ]
        )
        == 0
    )
    truth = json.loads((gen / "truth.json").read_text())["scenario"]["active"]
    store = Store.open(tmp_path / "store")
    ingest_paths(store, [gen], run_id="h")
    con, _ = connect_for_derive(store, "h", None)
    try:
        coll = pl.from_arrow(con.sql("SELECT * FROM hang_collectives").arrow())
        prog = pl.from_arrow(con.sql("SELECT * FROM hang_progress").arrow())
    finally:
        con.close()
    assert isinstance(coll, pl.DataFrame) and isinstance(prog, pl.DataFrame)
    fr_paths = sorted(p for p in gen.rglob("*") if p.is_file() and "nccl_trace_rank_" in p.name)
    report = triage_files(fr_paths)
    fr = coll.filter(pl.col("source") == "flight_recorder")
    _agree(report, fr, prog.filter(pl.col("source") == "flight_recorder"))
    assert report.suspects == [(truth["hang_rank"], 1)]
    nccl = coll.filter(pl.col("source") == "nccl_debug")
    assert set(nccl["blocking"]) == {str(truth["truncate_rank"])}
