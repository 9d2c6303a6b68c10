"""The report in a real headless Chromium: charts render, no console error, no request leaves.

Skipped when /usr/bin/chromium is absent unless COMMSCOPE_REQUIRE_BROWSER=1 (CI sets it). The
browser is driven over the DevTools pipe (tests/reports/cdp.py): Network events show every
request, Runtime/Log events every console message, CSP violation and exception, and
Page.javascriptDialogOpening any alert() a hostile log could have injected.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.reports.cdp import CHROMIUM, Browser
from tests.reports.conftest import HOSTILE_HOST

pytestmark = pytest.mark.slow

if not CHROMIUM.exists():
    if os.environ.get("COMMSCOPE_REQUIRE_BROWSER") == "1":
        raise RuntimeError(f"COMMSCOPE_REQUIRE_BROWSER=1 but {CHROMIUM} is missing")
    pytest.skip(f"{CHROMIUM} not installed", allow_module_level=True)

CHART_STATE = (
    "JSON.stringify(Array.from(document.querySelectorAll('div.chart')).map("
    "d => [d.id, d.getAttribute('data-rendered'), d.querySelectorAll('svg, canvas').length]))"
)


def _open(page: Path, tmp: Path) -> tuple[list[list[Any]], list[dict[str, Any]], str]:
    """Load a page, wait for the loader to finish, screenshot it; return chart states, events
    and the page's text."""
    import json

    browser = Browser(tmp / "profile")
    try:
        session = browser.open_page(page.resolve().as_uri())
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if browser.evaluate(
                session, "document.body && document.body.getAttribute('data-charts-done')"
            ):
                break
            browser.pump(0.25)
        else:
            pytest.fail("charts did not finish rendering in 90 s")
        browser.pump(0.5)  # late console messages
        states = json.loads(browser.evaluate(session, CHART_STATE))
        text = str(browser.evaluate(session, "document.body.innerText"))
        shot = browser.screenshot(session, tmp / f"{page.stem}.png")
        assert shot.stat().st_size > 10_000
        return states, list(browser.events), text
    finally:
        browser.close()


def _problems(events: list[dict[str, Any]], page: Path) -> list[str]:
    out = []
    page_url = page.resolve().as_uri()
    for ev in events:
        method, params = ev.get("method", ""), ev.get("params", {})
        if method == "Network.requestWillBeSent" and params["request"]["url"] != page_url:
            out.append(f"request: {params['request']['url'][:200]}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            out.append(f"console: {str(params.get('args'))[:300]}")
        elif method == "Runtime.exceptionThrown":
            out.append(f"exception: {str(params)[:300]}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            out.append(f"log: {params['entry'].get('text', '')[:300]}")
        elif method == "Page.javascriptDialogOpening":
            out.append(f"dialog: {params.get('message')}")
    return out


def test_sample_report_renders_offline(sample_report: Path, tmp_path: Path) -> None:
    states, events, _ = _open(sample_report, tmp_path)
    assert len(states) > 5
    assert all(state == "ok" and n >= 1 for _, state, n in states), states
    assert _problems(events, sample_report) == []
    assert any(ev.get("method") == "Network.requestWillBeSent" for ev in events)  # events do flow


def test_hostile_report_runs_no_injected_script(hostile_report: Path, tmp_path: Path) -> None:
    states, events, text = _open(hostile_report, tmp_path)
    assert all(state == "ok" for _, state, _ in states), states
    assert _problems(events, hostile_report) == []  # no alert dialog, no CSP violation
    assert HOSTILE_HOST in text  # shown as text
