"""Reports of real inputs say why a view is empty and what to record to fill it."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.store import Store

POLARIS = "dlcomm_polaris_2.20.5_1node_4rank_pytorch_multimode_2comms_coll_tuning.log"


@pytest.fixture(scope="module")
def polaris_report(tmp_path_factory: pytest.TempPathFactory, project_root: Path) -> Path:
    """The report of a real NCCL 2.20 debug log of 4 ranks: COLL lines only (no Init line, so
    no global rank) and, as every NCCL debug log, no durations."""
    from commscope.pipeline.derive import ensure_derived
    from commscope.reports.html import build_report

    log = project_root.parent / "shared" / "samples" / "nccl_debug" / POLARIS
    if not log.exists():
        pytest.skip(f"shared sample {POLARIS} absent")
    base = tmp_path_factory.mktemp("polaris")
    store = Store.open(base / "store")
    ingest_paths(store, [log], run_id="polaris")
    ensure_derived(store, "polaris")  # reports only read: the caller derives first
    return build_report(store, "polaris", base / "polaris.html")


def _notes(page: str) -> list[str]:
    return [html.unescape(n) for n in re.findall(r'<p class="na">([^<]*)</p>', page)]


def test_nccl_debug_report_names_what_to_record(polaris_report: Path) -> None:
    notes = _notes(polaris_report.read_text())
    assert notes and all(n.startswith(("not available: ", "nothing to show: ")) for n in notes)
    timing = [n for n in notes if "133 of 133 calls have no duration" in n]
    # one per section: iteration breakdown, on/off (timeline and duty cycle share the note),
    # bandwidth, stragglers and bubbles (one note)
    assert len(timing) == 4
    assert all("calls come from NCCL debug logs, which time nothing" in n for n in timing)
    assert all("add a Kineto trace" in n for n in timing)
    # the cross-rank section: the calls are matched across ranks (their ranks inferred from the
    # communicators, issue 19), but no instance is timed on every member
    waits = [n for n in notes if "matched instances is timed on every member" in n]
    assert len(waits) == 1 and "NCCL debug logs, which time nothing" in waits[0]
    assert "record per-rank timelines from every rank of each group" in waits[0]
    # ranks are inferred (flagged rank_source) where the log has no Init line: no section
    # says that ranks are missing any more, and the traffic matrices are drawn
    assert not [n for n in notes if "have no global rank" in n]
    page = polaris_report.read_text()
    traffic = page[page.index('<section id="traffic">') : page.index('<section id="onoff">')]
    assert '<p class="na">' not in traffic
    # the straggler section's clock offsets: NCCL logs time nothing, so no offset either
    clocks = [n for n in notes if n.startswith("not available: no rank has a timed call")]
    assert len(clocks) == 1 and "record the same timelines" in clocks[0]


@pytest.mark.slow
def test_sample_report_says_why_collectives_lack_groups(sample_report: Path) -> None:
    # the bundled sample's gloo all_reduce/broadcast ranges name no process group: the traffic
    # section draws the PP matrix and says, above it, which collectives lack their group and
    # what to record (whether the parser left their group unknown or took the world group)
    page = html.unescape(sample_report.read_text())
    section = page[page.index('<section id="traffic">') : page.index('<section id="onoff">')]
    notes = re.findall(r'<p class="gap">([^<]*)</p>', section)
    assert len(notes) == 1
    assert "54 calls name no process group" in notes[0] or (
        "54 collectives name no process group" in notes[0]
    )
    assert "record with PyTorch >= 2.2 so record_param_comms carries Collective name" in notes[0]
    assert section.index('<p class="gap">') < section.index('class="chart"')
