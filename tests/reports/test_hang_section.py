"""The report's hang-triage section (issue 19 item 4) on the bundled real GPU hang.

``gpu_nccl_hang_1gpu`` (sample_traces/README.md): rank 2 sleeps before its DP reduce_scatter
(DP group {0, 2}, collective seq 5); rank 0 waits in it, ranks 1 and 3 in the world
all_reduce (seq 3) that rank 2 never posts. The section must name rank 2 and both
collectives, and agree with ``commscope hang --json`` on the same run (the CLI reads the dump
files; the report reads the marts).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import polars as pl
import pytest

from commscope.pipeline.cli import main as cli_main
from commscope.pipeline.derive import derive_run
from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.store import Store
from commscope.reports import data as rd
from commscope.reports import hang as rh
from commscope.reports.html import OPTIONAL_SECTIONS, build_report


@pytest.fixture(scope="module")
def hang_store(tmp_path_factory: pytest.TempPathFactory, sample_traces: Path) -> Store:
    store = Store.open(tmp_path_factory.mktemp("hang") / "store")
    ingest_paths(store, [sample_traces / "gpu_nccl_hang_1gpu"], run_id="hang")
    derive_run(store, "hang")
    return store


def _ranks(rs: list[int]) -> str | None:
    return ",".join(map(str, rs)) or None


def test_section_names_rank_2_and_agrees_with_commscope_hang(
    hang_store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = rd.load_run(hang_store, "hang")
    t = rh.triage(data)
    assert t is not None and t.dumped_ranks == [0, 1, 2, 3]
    assert t.suspects == [(2, 2)]
    text = rh.sentence(t)
    assert text.startswith("Rank 2 holds the others up (2 collectives)")
    assert "reduce_scatter #5 of group 3 (DP; ranks 0, 2): never reached by 2" in text
    assert "all_reduce #3 of group 0 (default_pg; ranks 0-3): never reached by 2" in text

    assert cli_main(["hang", "hang", "--json", "--store", str(hang_store.root)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [tuple(s) for s in doc["suspects"]] == t.suspects
    cli = {
        (f["group"], f["seq"]): (
            f["desc"],
            f["op"],
            _ranks(f["never_reached"]),
            _ranks(f["never_completed"]),
            _ranks(f["completed"]),
            _ranks(f["blocking"]),
        )
        for f in doc["findings"]
    }
    fr_findings = t.findings.filter(pl.col("source") == "flight_recorder")
    page = {
        (r["group_name"], r["seq"]): (
            r["group_desc"],
            r["op"],
            r["never_reached"],
            r["never_completed"],
            r["completed"],
            r["blocking"],
        )
        for r in fr_findings.iter_rows(named=True)
    }
    assert page == cli
    # the run's NCCL logs show every rank posting everything (rank 2 woke up after 100 s and
    # posted the rest; the peers had aborted): no NCCL finding, so the sentence cites the dumps
    assert t.findings.height == fr_findings.height and "NCCL logs" not in text
    last = {
        (p["group"], p["rank"]): (p["last_enqueued"], p["last_completed"]) for p in doc["progress"]
    }
    assert {
        (r["group_name"], r["rank"]): (r["last_enqueued_seq"], r["last_completed_seq"])
        for r in t.progress.filter(pl.col("source") == "flight_recorder").iter_rows(named=True)
    } == last

    out = build_report(hang_store, "hang", tmp_path / "hang.html")
    body = html.unescape(re.sub(r"<[^>]+>", " ", out.read_text()))
    assert "Hang triage" in body
    assert "Rank 2 holds the others up (2 collectives)" in body
    assert "nccl:_reduce_scatter_base" in body


def _frame(rows: list[dict[str, object]], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=schema)


PROGRESS = {
    "source": pl.Utf8,
    "group_name": pl.Utf8,
    "group_desc": pl.Utf8,
    "group_ranks": pl.Utf8,
    "group_size": pl.Int64,
    "is_p2p_group": pl.Boolean,
    "rank": pl.Int32,
    "last_enqueued_seq": pl.Int64,
    "last_started_seq": pl.Int64,
    "last_completed_seq": pl.Int64,
    "counter_source": pl.Utf8,
    "pending_entries": pl.Int64,
    "group_last_enqueued_seq": pl.Int64,
    "group_last_completed_seq": pl.Int64,
    "is_behind": pl.Boolean,
}
COLLECTIVES = {
    "source": pl.Utf8,
    "group_name": pl.Utf8,
    "group_desc": pl.Utf8,
    "group_ranks": pl.Utf8,
    "seq": pl.Int64,
    "op": pl.Utf8,
    "first_created_ns": pl.Int64,
    "never_reached": pl.Utf8,
    "reached": pl.Utf8,
    "never_completed": pl.Utf8,
    "completed": pl.Utf8,
    "blocking": pl.Utf8,
    "is_blocking": pl.Boolean,
}


def test_no_dumps_no_section_and_no_hang_one_line() -> None:
    """No Flight Recorder dumps: the section is left out. Dumps where every group completed
    what it enqueued: one line."""
    empty = rd.RunData(
        "r",
        None,
        {},
        marts={"hang_progress": _frame([], PROGRESS), "hang_collectives": _frame([], COLLECTIVES)},
    )
    assert rh.triage(empty) is None and rh.section(empty) == []
    assert "hang" in OPTIONAL_SECTIONS
    row = {
        "source": "flight_recorder",
        "group_name": "0",
        "group_desc": "default_pg",
        "group_ranks": "0,1",
        "group_size": 2,
        "is_p2p_group": False,
        "last_enqueued_seq": 7,
        "last_started_seq": -1,
        "last_completed_seq": 7,
        "counter_source": "entry",
        "pending_entries": 0,
        "group_last_enqueued_seq": 7,
        "group_last_completed_seq": 7,
        "is_behind": False,
    }
    calm = rd.RunData(
        "r",
        None,
        {},
        marts={
            "hang_progress": _frame([{**row, "rank": 0}, {**row, "rank": 1}], PROGRESS),
            "hang_collectives": _frame([], COLLECTIVES),
        },
    )
    blocks = rh.section(calm)
    assert blocks[0].text == (
        "Flight Recorder dumps of 2 ranks: every process group's members completed every "
        "collective they enqueued (no hang in a collective group)."
    )
    assert len(blocks) == 3  # the line, the progress table's caption and the table


def test_nccl_only_finding_names_the_rank_that_stopped_posting() -> None:
    """NCCL logs only (no dumps): the section shows the communicators with a finding."""
    base = {
        "source": "nccl_debug",
        "group_desc": None,
        "group_ranks": "0,2",
        "group_size": 2,
        "is_p2p_group": False,
        "last_started_seq": None,
        "last_completed_seq": None,
        "counter_source": "nccl_log",
        "pending_entries": None,
        "group_last_enqueued_seq": 7,
        "group_last_completed_seq": None,
    }
    prog = [
        {**base, "group_name": "nccl:split:0xa/4:9", "rank": 0, "last_enqueued_seq": 7}
        | {"is_behind": False},
        {**base, "group_name": "nccl:split:0xa/4:9", "rank": 2, "last_enqueued_seq": 3}
        | {"is_behind": True},
        {**base, "group_name": "nccl:0xb", "rank": 0, "last_enqueued_seq": 7}
        | {"is_behind": False},
    ]
    coll = [
        {
            "source": "nccl_debug",
            "group_name": "nccl:split:0xa/4:9",
            "group_desc": None,
            "group_ranks": "0,2",
            "seq": 4,
            "op": "reduce_scatter",
            "first_created_ns": None,
            "never_reached": "2",
            "reached": "0",
            "never_completed": None,
            "completed": None,
            "blocking": "2",
            "is_blocking": True,
        }
    ]
    d = rd.RunData(
        "r",
        None,
        {},
        marts={
            "hang_progress": _frame(prog, PROGRESS),
            "hang_collectives": _frame(coll, COLLECTIVES),
        },
    )
    t = rh.triage(d)
    assert t is not None and t.dumped_ranks == [] and t.suspects == [(2, 1)]
    assert t.progress["group_name"].unique().to_list() == ["nccl:split:0xa/4:9"]
    assert rh.sentence(t) == (
        "Rank 2 holds the others up (1 collective), by the NCCL logs of 2 ranks. "
        "reduce_scatter #4 of group nccl:split:0xa/4:9 (ranks 0, 2): never reached by 2; "
        "posted by 0. NCCL logs show what was posted, not what completed: a collective cannot "
        "complete without every member."
    )
