"""The headline (reports/headline.py, issue 17 item 5): like with like, uncalibrated platforms,
and one set of numbers in the report, ``summary --json`` and ``compare``.

The unit cases give hand-written marts and check every row against hand-computed values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from commscope.reports.headline import CALIBRATION_FACTOR, ModelPlatform, headline

# model_vs_measured rows (seconds, ratios; C_* in bytes/s as the mart stores them)
MVM = [
    ("T_iter", "s", 10.0, 9.0),
    ("T_comp", "s", 5.0, 5.0),
    ("T_TP", "s", 2.0, 1.8),
    ("T_PP", "s", 0.5, 0.5),
    ("T_DP", "s", 0.4, 0.2),
    ("T_EmbTableSyn", "s", 0.1, 0.1),
    ("T_EP", "s", 0.0, 0.0),
    ("T_bubble", "s", 2.0, 2.4),
    ("T_comm", "s", 3.5, 2.6),  # includes 0.5 s of 'other' calls: the headline must not use it
    ("R_comm", "ratio", 0.37, 0.2889),
    ("R_bubble", "ratio", 0.19, 0.2667),
    ("R_bubble_eq7", "ratio", 0.19, 3 / 11),
    ("C_TP", "bytes/s", 5.0e9, 6.0e9),
    ("C_PP", "bytes/s", 2.0e9, 2.0e9),
    ("C_DP", "bytes/s", 3.0e9, 4.0e9),
]


def mvm_frame(rows: list[tuple[str, str, float | None, float | None]] = MVM) -> pl.DataFrame:
    return pl.DataFrame(
        [{"term": t, "unit": u, "measured": m, "predicted": p} for t, u, m, p in rows],
        schema={"term": pl.Utf8, "unit": pl.Utf8, "measured": pl.Float64, "predicted": pl.Float64},
    )


PLATFORM = ModelPlatform(
    {"TP": 6.0e9, "PP": 2.0e9, "DP": 4.0e9, "EP": 4.0e9},
    frozenset({"TP", "PP", "DP"}),
    mu=0.3,
    peak_flops=71e12,
)


def rows_by_metric(df: pl.DataFrame) -> dict[str, dict[str, Any]]:
    return {r["metric"]: r for r in df.iter_rows(named=True)}


def test_rows_like_with_like_from_the_model_table() -> None:
    h = headline({"model_vs_measured": mvm_frame()}, {}, PLATFORM)
    rows = rows_by_metric(h.rows)
    comm = rows["communication time T_comm"]
    # TP + PP + DP + EmbTableSyn + EP on both sides, not the mart's T_comm with 'other' in it
    assert comm["measured"] == pytest.approx(2.0 + 0.5 + 0.4 + 0.1)
    assert comm["predicted"] == pytest.approx(1.8 + 0.5 + 0.2 + 0.1)
    assert comm["rel_error"] == pytest.approx(3.0 / 2.6 - 1)
    assert "bubble and unclassified calls excluded" in comm["includes"]
    assert comm["model"] == "bus bytes / C per class (eqs. 2-4)"
    r_comm = rows["R_comm"]
    assert r_comm["measured"] == pytest.approx(3.0 / 10.0)
    assert r_comm["predicted"] == pytest.approx(2.6 / 9.0)
    r_bub = rows["R_bubble"]
    assert (r_bub["measured"], r_bub["predicted"]) == pytest.approx((0.2, 2.4 / 9.0))
    eq7 = rows["R_bubble (eq. 7)"]
    assert (eq7["measured"], eq7["predicted"]) == pytest.approx((0.2, 3 / 11))
    assert rows["iteration time T_iter"]["rel_error"] == pytest.approx(1 / 9)
    # bandwidths in GB/s on both sides
    c_dp = rows["bus bandwidth C_DP"]
    assert (c_dp["measured"], c_dp["predicted"], c_dp["unit"]) == (3.0, 4.0, "GB/s")
    assert c_dp["status"] == "off by > 15 %"
    assert rows["bus bandwidth C_PP"]["status"] == "ok"
    assert "bus bandwidth C_EP" not in rows  # nothing measured, only a default predicted
    assert h.calibrated is True
    assert all(h.rows["includes"].str.len_chars() > 20)
    assert set(h.rows["measured_from"]) == {"model_vs_measured"}


def test_includes_follow_the_marts_definitions() -> None:
    legacy = headline({"model_vs_measured": mvm_frame()}, {}, PLATFORM)
    assert not legacy.split
    legacy_rows = rows_by_metric(legacy.rows)
    assert "EmbTableSyn whole call" in legacy_rows["communication time T_comm"]["includes"]
    assert "whole call time" in legacy_rows["bus bandwidth C_TP"]["includes"]
    bd = pl.DataFrame({"t_iter_ns": [1], "t_sync_wait_ns": [0]})
    split = headline({"model_vs_measured": mvm_frame(), "iteration_breakdown": bd}, {}, PLATFORM)
    assert split.split
    rows = rows_by_metric(split.rows)
    # model_vs_measured's class terms are transfer parts: T_comm says so (sync wait its own row)
    assert "the transfer part of every call" in rows["communication time T_comm"]["includes"]
    assert "T_sync_wait row" in rows["communication time T_comm"]["includes"]
    assert "EmbTableSyn wait" in rows["bubble T_bubble"]["includes"]
    assert "transfer time (after the last peer arrived)" in rows["bus bandwidth C_TP"]["includes"]


def test_without_the_model_table_falls_back_to_the_breakdown() -> None:
    bd = pl.DataFrame(
        {
            "t_iter_ns": [10e9, 12e9],
            "t_comp_ns": [5e9, 5e9],
            "t_tp_ns": [2e9, 2e9],
            "t_pp_ns": [1e9, 1e9],
            "t_dp_ns": [0.0, 2e9],
            "t_ep_ns": [0.0, 0.0],
            "t_emb_ns": [0.0, 0.0],
            "t_bubble_ns": [2e9, 2e9],
            "exposed_comm_ns": [4e9, 4e9],
        }
    )
    eb = pl.DataFrame({"c_dp_bytes_s": [3e9, None]})
    h = headline(
        {"iteration_breakdown": bd, "effective_bandwidth": eb},
        {"t_iter": 11.0, "t_comp": 5.0, "t_tp": 2.0, "t_pp": 1.0, "t_dp": 1.0, "t_bubble": 2.0},
        PLATFORM,
    )
    rows = rows_by_metric(h.rows)
    assert rows["iteration time T_iter"]["measured"] == pytest.approx(11.0)
    assert rows["iteration time T_iter"]["status"] == "ok"
    assert rows["communication time T_comm"]["measured"] == pytest.approx(4.0)
    assert rows["communication time T_comm"]["predicted"] == pytest.approx(4.0)
    assert rows["exposed communication"]["measured"] == pytest.approx(4.0)
    assert rows["exposed communication"]["status"] == "not predicted"
    assert rows["bus bandwidth C_DP"]["measured"] == pytest.approx(3.0)
    assert rows["bus bandwidth C_DP"]["measured_from"] == "effective_bandwidth"
    assert "all ranks and iterations" in rows["iteration time T_iter"]["measured_from"]


def test_uncalibrated_platform_says_the_constants_do_not_apply() -> None:
    # the bundled CPU recording's shape: T_comp 8,000 x the RTX3090 constants' prediction
    rows = [(t, u, m, p) for t, u, m, p in MVM if t not in ("T_comp",)]
    rows.append(("T_comp", "s", 5.0, 5.0 / 8000))
    h = headline({"model_vs_measured": mvm_frame(rows)}, {}, PLATFORM)
    assert h.calibrated is False
    assert "do not apply" in h.verdict and "commscope derive RUN --config FILE" in h.verdict
    assert "T_comp measured 8,000 x the prediction" in h.verdict
    assert "mu = 0.0000375" in h.verdict.replace("3.75e-05", "0.0000375")
    by = rows_by_metric(h.rows)
    for metric in ("iteration time T_iter", "compute time T_comp", "bus bandwidth C_DP"):
        assert by[metric]["rel_error"] is None
        assert by[metric]["status"] == "constants do not apply"
        assert by[metric]["predicted"] is not None  # still shown, without an error
    # eq. 7 needs no platform constant: its error stays
    assert by["R_bubble (eq. 7)"]["rel_error"] == pytest.approx(0.2 / (3 / 11) - 1)
    assert h.rows["rel_error"].drop_nulls().abs().max() < 1  # no +838,100 %


@pytest.mark.parametrize(
    ("factor", "calibrated"),
    [(CALIBRATION_FACTOR * 0.99, True), (CALIBRATION_FACTOR * 1.01, False), (0.099, False)],
)
def test_calibration_rule_is_a_factor_of_ten_on_a_c(factor: float, calibrated: bool) -> None:
    rows = [(t, u, m, p) for t, u, m, p in MVM if t != "C_PP"]
    rows.append(("C_PP", "bytes/s", 2.0e9 * factor, 2.0e9))
    assert headline({"model_vs_measured": mvm_frame(rows)}, {}, PLATFORM).calibrated is calibrated


def test_no_prediction_no_verdict() -> None:
    rows = [(t, u, m, None) for t, u, m, _ in MVM]
    h = headline({"model_vs_measured": mvm_frame(rows)}, {}, None)
    assert h.calibrated is None
    assert set(h.rows["status"]) == {"not predicted"}
    assert json.loads(json.dumps(h.to_json()))["rows"][0]["predicted"] is None


def test_compare_puts_measured_rows_side_by_side() -> None:
    from commscope.reports.html import compare_headlines

    a_rows = [(t, u, m, p) for t, u, m, p in MVM if t != "C_TP"]
    ha = headline({"model_vs_measured": mvm_frame(a_rows)}, {}, PLATFORM)
    bd = pl.DataFrame({"t_sync_wait_ns": [0]})  # B's marts split transfer from waiting
    hb = headline({"model_vs_measured": mvm_frame(), "iteration_breakdown": bd}, {}, PLATFORM)
    table = compare_headlines(ha, hb)
    rows = {r["metric"]: r for r in table.iter_rows(named=True)}
    assert "R_bubble (eq. 7)" not in rows  # the same measured value as R_bubble
    assert rows["iteration time T_iter"]["A"] == rows["iteration time T_iter"]["B"] == 10.0
    assert rows["iteration time T_iter"]["diff"] == 0.0
    c_tp = rows["bus bandwidth C_TP"]
    assert (c_tp["unit"], c_tp["A"], c_tp["B"]) == ("GB/s", None, 5.0)
    comm = rows["communication time T_comm"]["includes"]
    assert comm.startswith("A: ") and "; B: " in comm  # unlike definitions are named, not hidden
    assert "model" not in table.columns  # compare is measured against measured


# ---------------------------------------------------------------------------- one set of numbers


@pytest.mark.slow  # the session store ingests and derives three runs
def test_same_numbers_in_report_summary_json_and_compare(
    report_store: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from commscope.pipeline.cli import main as cli_main
    from commscope.reports import data as rd
    from commscope.reports import html as rh

    store = report_store.store
    heads = {}
    for run in (report_store.sample, report_store.synth):
        d = rd.load_run(store, run)
        try:
            heads[run] = rd.run_headline(d)
            report_rows = rh._headline(d)[0 if heads[run].calibrated is not False else 1].frame
        finally:
            if d.con is not None:
                d.con.close()
        assert report_rows is not None
        assert report_rows.equals(heads[run].rows)
    assert heads[report_store.synth].calibrated is True
    assert heads[report_store.sample].calibrated is False  # 2-core CPU vs RTX3090 constants

    assert cli_main(["summary", "--json", "--store", str(store.root)]) == 0
    out = json.loads(capsys.readouterr().out)
    by_run = {r["run_id"]: r["headline"] for r in out["runs"]}
    for run, h in heads.items():
        assert by_run[run]["rows"] == h.to_json()["rows"]
        assert by_run[run]["calibrated"] == h.calibrated

    sample, synth = report_store.sample, report_store.synth
    table = rh.compare_headlines(heads[sample], heads[synth])
    got = {r["metric"]: (r["A"], r["B"]) for r in table.iter_rows(named=True)}
    for metric, (a, b) in got.items():
        ra = rows_by_metric(heads[sample].rows).get(metric, {}).get("measured")
        rb = rows_by_metric(heads[synth].rows).get(metric, {}).get("measured")
        assert (a, b) == (ra, rb), metric

    page = tmp_path / "sample.html"
    assert cli_main(["report", sample, "-o", str(page), "--store", str(store.root)]) == 0
    text = page.read_text()
    assert "constants do not apply to this run" in text
    section = text.split('<section id="headline">')[1].split("</section>")[0]
    assert 'class="n bad"' not in section  # no error in red: the constants do not apply
    cmp_page = tmp_path / "cmp.html"
    assert (
        cli_main(["compare", sample, synth, "-o", str(cmp_page), "--store", str(store.root)]) == 0
    )
    assert "communication time T_comm" in cmp_page.read_text()
