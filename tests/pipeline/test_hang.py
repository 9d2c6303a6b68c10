"""Hang triage from Flight Recorder dumps (issue 19 item 4): the stuck ranks and collective.

The two shared nvrx runs are fault injections whose injector log names the faulted ranks
(``fault_injection.log``): LOCK_GIL on ranks 9 and 14 (their dumps are empty: they enqueued
nothing past what their peers completed), GPU_ERROR on ranks 12 and 14 (they launched the
collectives their peers completed, and never saw them complete). The per-rank counters are
checked against the pickles read by the test's own opcode walker.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from commscope.pipeline.hang import format_report, triage_files
from tests.oracle.fr_pickle_reference import oracle_load


def _dumps(shared: Path, scenario: str) -> list[Path]:
    return sorted((shared / "flight_recorder" / scenario).glob("_dump_*"))


def _injected(shared: Path, scenario: str) -> set[int]:
    text = (shared / "flight_recorder" / scenario / "fault_injection.log").read_text()
    head = text.split("Fault ranks:", 1)[1].split("]", 1)[0]
    return {int(x) for x in head.strip(" [").split(",")}


def test_lock_gil_names_ranks_that_never_reached_the_all_to_all(shared_samples: Path) -> None:
    report = triage_files(_dumps(shared_samples, "nvrx_lock_gil_1st"))
    assert not report.errors
    assert report.ranks == tuple(range(16))
    assert {r for r, _ in report.suspects} == _injected(shared_samples, "nvrx_lock_gil_1st")
    ep = [f for f in report.findings if f.desc == "EXPERT_MODEL_PARALLEL_GROUP" and f.blocking]
    assert len(ep) == 1
    (f,) = ep
    assert (f.group, f.seq, f.op, f.raw_op) == ("72", 45265, "all_to_all", "nccl:all_to_all")
    assert f.input_sizes == [[2048, 5120]]
    assert f.never_reached == (9, 14) and f.completed == ()
    assert f.never_completed == (8, 10, 11, 12, 13, 15)
    # the hung ranks have no entries: their counters come by creation order, as documented
    prog = {(p.group, p.rank): p for p in report.progress}
    assert (prog[("72", 9)].last_enqueued, prog[("72", 9)].last_completed) == (45264, 45264)
    assert prog[("72", 9)].mapping == "order" and prog[("72", 8)].mapping == "entry"
    text = format_report(report)
    assert "72:EXPERT_MODEL_PARALLEL_GROUP seq 45265 nccl:all_to_all" in text
    assert "suspect ranks (blocking findings): 9 (3), 14 (3)" in text


def test_gpu_error_names_ranks_that_never_completed_what_peers_completed(
    shared_samples: Path,
) -> None:
    report = triage_files(_dumps(shared_samples, "nvrx_gpu_error_1st"))
    assert {r for r, _ in report.suspects} == _injected(shared_samples, "nvrx_gpu_error_1st")
    f = next(f for f in report.findings if f.group == "74" and f.seq == 20530)
    assert (f.desc, f.op) == ("EXPERT_MODEL_PARALLEL_GROUP", "all_to_all")
    assert f.never_completed == (12, 14) and f.completed == (13, 15) and f.never_reached == ()
    assert f.blocking == (12, 14)
    # ranks 0-11 sit in the same collectives as their peers: waiting, never suspects
    for f in report.findings:
        if set(f.members) <= set(range(12)):
            assert f.blocking == ()


def test_last_completed_per_rank_and_group_equals_the_dumps(shared_samples: Path) -> None:
    """Oracle: each rank's pg_status read by the opcode walker, keyed through its entries."""
    for scenario in ("nvrx_lock_gil_1st", "nvrx_gpu_error_1st"):
        paths = _dumps(shared_samples, scenario)
        report = triage_files(paths)
        prog = {(p.group, p.rank): p for p in report.progress}
        checked = 0
        for path in paths:
            rank = int(path.name.rsplit("_", 1)[1])
            raw = oracle_load(path.read_bytes())
            assert sum(1 for p in report.progress if p.rank == rank) == len(raw["pg_config"])
            for e in raw["entries"]:
                st = raw["pg_status"][str(e["pg_id"])]
                p = prog[(e["process_group"][0], rank)]
                assert p.last_completed == st["last_completed_collective"]
                assert p.last_enqueued == st["last_enqueued_collective"]
                assert p.mapping == "entry"
                checked += 1
        assert checked == {"nvrx_lock_gil_1st": 142, "nvrx_gpu_error_1st": 289}[scenario]


def _dump(rank: int, enq: int, done: int, entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "version": "2.9",
        "pg_config": {
            "0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2]"},
            "1": {"name": "1", "desc": "DP", "ranks": "[0, 1, 2]"},
        },
        "pg_status": {
            "0": {
                "last_enqueued_collective": 0,
                "last_started_collective": -1,
                "last_completed_collective": 0,
            },
            "1": {
                "last_enqueued_collective": enq,
                "last_started_collective": -1,
                "last_completed_collective": done,
            },
        },
        "entries": entries,
    }


def _e(seq: int, created: int) -> dict[str, Any]:
    return {
        "record_id": seq,
        "pg_id": 1,
        "process_group": ("1", "DP"),
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": "nccl:all_reduce",
        "time_created_ns": created,
        "input_sizes": [[8]],
        "input_dtypes": ["Float"],
        "output_sizes": [[8]],
        "output_dtypes": ["Float"],
        "state": "scheduled",
        "is_p2p": False,
    }


@pytest.mark.parametrize("stuck", [0, 2])
def test_synthetic_rank_that_never_reached(tmp_path: Path, stuck: int) -> None:
    """Three ranks; all completed 4; the stuck rank never enqueued 5, the others wait in it."""
    paths = []
    for r in range(3):
        doc = _dump(r, 4, 4, []) if r == stuck else _dump(r, 5, 4, [_e(5, 100 + r)])
        p = tmp_path / f"nccl_trace_rank_{r}"
        p.write_bytes(pickle.dumps(doc, protocol=2))
        paths.append(p)
    report = triage_files(paths)
    assert report.suspects == [(stuck, 1)]
    (f,) = report.findings
    assert (f.group, f.seq, f.op, f.never_reached) == ("1", 5, "all_reduce", (stuck,))
    assert f.first_created_ns == min(100 + r for r in range(3) if r != stuck)


def test_unreadable_dump_is_listed_not_fatal(tmp_path: Path) -> None:
    good = tmp_path / "nccl_trace_rank_0"
    good.write_bytes(pickle.dumps(_dump(0, 1, 1, []), protocol=2))
    bad = tmp_path / "nccl_trace_rank_1"
    bad.write_bytes(b"\x80\x02cos\nsystem\n.")
    report = triage_files([good, bad])
    assert report.ranks == (0,)
    assert len(report.errors) == 1 and "os.system" in report.errors[0]
    assert str(bad) in report.errors[0]


def test_hang_command_on_an_ingested_run_and_on_files(
    shared_samples: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from commscope.pipeline.cli import main

    folder = shared_samples / "flight_recorder" / "nvrx_lock_gil_1st"
    store = tmp_path / "store"
    assert main(["ingest", str(folder), "--run", "lg", "--store", str(store)]) == 0
    capsys.readouterr()
    assert main(["hang", "lg", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "suspect ranks (blocking findings): 9 (3), 14 (3)" in out
    assert "72:EXPERT_MODEL_PARALLEL_GROUP seq 45265 nccl:all_to_all" in out
    assert main(["hang", "--dumps", str(folder), "--json", "--store", str(store)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [s[0] for s in doc["suspects"]] == [9, 14]
    assert any(f["group"] == "72" and f["never_reached"] == [9, 14] for f in doc["findings"])
    assert main(["hang", "nope", "--store", str(store)]) == 1


def test_dumps_without_pg_status_use_their_entries(tmp_path: Path) -> None:
    """Older dumps (no pg_status), full ring buffers: counters from the entries' states."""
    paths = []
    for r in range(3):
        doc = _dump(r, 0, 0, [])
        del doc["pg_status"]
        done = {**_e(4, 50), "state": "completed"}
        doc["entries"] = [done] if r == 1 else [done, _e(5, 100 + r)]
        p = tmp_path / f"nccl_trace_rank_{r}"
        p.write_bytes(pickle.dumps(doc, protocol=2))
        paths.append(p)
    report = triage_files(paths)
    assert {
        (p.rank, p.last_enqueued, p.last_completed, p.mapping)
        for p in report.progress
        if p.group == "1"
    } == {
        (0, 5, 4, "entries"),
        (1, 4, 4, "entries"),
        (2, 5, 4, "entries"),
    }
    assert report.suspects == [(1, 1)]
    (f,) = report.findings
    assert (f.seq, f.never_reached, f.never_completed) == (5, (1,), (0, 2))


def test_real_gpu_hang_names_rank_2_and_the_dp_reduce_scatter(sample_traces: Path) -> None:
    """The recorded hang (sample_traces/README.md): rank 2 sleeps before its DP
    reduce_scatter (DP group {0,2}, seq 5); rank 0 is stuck in it, ranks 1 and 3 in the world
    all_reduce (seq 3), which rank 2 never posts. Rank 0 did post that all_reduce: it is in
    its dump (scheduled, behind the reduce_scatter on its stream), it never started."""
    folder = sample_traces / "gpu_nccl_hang_1gpu" / "flight_recorder"
    report = triage_files(sorted(folder.glob("nccl_trace_rank_*")))
    assert report.suspects == [(2, 2)]
    dp, world = report.findings
    assert (dp.group, dp.desc, dp.seq, dp.op) == ("3", "DP", 5, "reduce_scatter")
    assert (dp.never_reached, dp.never_completed, dp.started) == ((2,), (0,), (0,))
    assert (world.group, world.seq, world.op) == ("0", 3, "all_reduce")
    assert (world.never_reached, world.never_completed, world.started) == ((2,), (0, 1, 3), (1, 3))
