"""The report page: sections, offline runtime, CSP hashes, escaping, missing marts, commands."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from typing import Any

import pytest

from commscope.pipeline.cli import main as cli_main
from commscope.reports import data as rd
from commscope.reports import html as rh
from tests.reports.conftest import HOSTILE_HOST

pytestmark = pytest.mark.slow  # the session store ingests and derives three runs

SCRIPT = re.compile(r"<script([^>]*)>(.*?)</script>", re.S)


def _csp(page: str) -> str:
    m = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert m, "no CSP meta tag"
    return m.group(1).replace("&#x27;", "'")


def test_sections_present(sample_report: Path) -> None:
    """Every section, but those left out of a run without their input (no Flight Recorder
    dumps in the sample: no hang triage)."""
    page = sample_report.read_text()
    for key, title, _, _ in rh.SECTIONS:
        assert (f"<h2>{title}</h2>" in page) != (key in rh.OPTIONAL_SECTIONS), title


def test_offline_runtime_and_csp_hashes(sample_report: Path) -> None:
    page = sample_report.read_text()
    scripts = SCRIPT.findall(page)
    executable = [body for attrs, body in scripts if "application/json" not in attrs]
    data_blocks = [body for attrs, body in scripts if "application/json" in attrs]
    assert len(executable) == 2  # the Vega bundle and the loader
    assert all("src=" not in attrs for attrs, _ in scripts)
    assert "vegaEmbed" in executable[0] and len(executable[0]) > 500_000
    policy = _csp(page)
    for body in executable:
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy
    assert "default-src 'none'" in policy and "connect-src 'none'" in policy
    assert "unsafe-eval" not in policy
    # every chart container has its spec, and no resource is loaded by URL
    assert page.count('<div class="chart" id=') == len(data_blocks) > 5
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert not re.search(r"<link\b", page)


def test_hostile_log_text_is_escaped(hostile_report: Path) -> None:
    page = hostile_report.read_text()
    assert HOSTILE_HOST not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the host and the rejected line
    markup = SCRIPT.sub("", page)  # the page outside script elements (the bundle has "<img")
    assert "<img" not in markup
    assert "&lt;img src=x onerror=alert(2)&gt;.log" in page  # the file name
    # only the two hashed scripts and inert JSON blocks: nothing from the log became a script
    attrs = [a for a, _ in SCRIPT.findall(page)]
    assert page.count("<script") == len(attrs)
    assert sum("application/json" not in a for a in attrs) == 2


def test_json_for_script_cannot_close_the_element() -> None:
    text = rh.json_for_script({"k": "</script><!-- & <b>"})
    assert "</" not in text and "<!--" not in text and "&" not in text
    import json

    assert json.loads(text) == {"k": "</script><!-- & <b>"}


def test_missing_mart_says_not_available(report_store: Any) -> None:
    d = rd.load_run(report_store.store, report_store.sample)
    try:
        d.marts.pop("bubble_ratio")
        d.missing["bubble_ratio"] = "mart bubble_ratio was not derived for this run"
        d.marts.pop("iteration_breakdown", None)
        d.missing["iteration_breakdown"] = "older run"
        sections = {s.key: s for s in rh.run_sections(d)}
    finally:
        assert d.con is not None
        d.con.close()
    texts = [b.text for b in sections["per-rank"].blocks if b.kind == "na"]
    assert texts == [
        "not available: mart bubble_ratio was not derived for this run; to get it, "
        f"run commscope derive {report_store.sample}."
    ]
    assert [b.kind for b in sections["breakdown"].blocks] == ["na"]
    # the straggler view falls back to on_off
    assert any(b.kind == "chart" for b in sections["per-rank"].blocks)


def test_report_and_compare_commands(report_store: Any, tmp_path: Path) -> None:
    store = str(report_store.store.root)
    out = tmp_path / "r.html"
    assert cli_main(["report", report_store.synth, "-o", str(out), "--store", store]) == 0
    page = out.read_text()
    assert "SYNTHETIC DATA" in page  # the generator's manifest says so
    cmp_out = tmp_path / "c.html"
    rc = cli_main(
        ["compare", report_store.sample, report_store.synth, "-o", str(cmp_out), "--store", store]
    )
    assert rc == 0
    cmp_page = cmp_out.read_text()
    assert "<h2>Differences</h2>" in cmp_page
    assert (
        f"<h3>{report_store.sample}</h3>" in cmp_page
        and f"<h3>{report_store.synth}</h3>" in cmp_page
    )
    assert cli_main(["report", "no_such_run", "-o", str(out), "--store", store]) == 2
