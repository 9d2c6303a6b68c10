"""Every chart builder builds on real and synthetic marts, and its spec survives JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import altair as alt
import duckdb
import polars as pl
import pytest

from commscope.reports import charts
from commscope.reports import data as rd

pytestmark = pytest.mark.slow  # the session store ingests and derives three runs


def _builders(d: rd.RunData) -> dict[str, Callable[[], Any]]:
    def traffic() -> alt.LayerChart:
        t = rd.traffic(d)
        cls = t.cells["traffic_class"][0]
        cells = t.cells.filter(pl.col("traffic_class") == cls)
        return charts.traffic_heatmap(cells, t.boundaries, unit=t.unit, size=t.size, title=cls)

    def overview() -> alt.Chart:
        df, unit = rd.onoff_overview(d)
        return charts.onoff_overview(df, unit=unit)

    return {
        "headline_errors": lambda: charts.headline_errors(rd.headline(d)),
        "breakdown": lambda: charts.breakdown(rd.breakdown(d)),
        "traffic_heatmap": traffic,
        "onoff_overview": overview,
        "onoff_timeline": lambda: charts.onoff_timeline(rd.onoff_timeline(d)),
        "message_sizes": lambda: charts.message_sizes(rd.message_sizes(d)),
        "bandwidth": lambda: charts.bandwidth(*rd.bandwidth(d)),
        "stragglers": lambda: charts.stragglers(rd.stragglers(d)),
        "bubbles": lambda: charts.bubbles(rd.bubbles(d)),
        "predictability": lambda: charts.predictability(rd.predictability(d)),
    }


@pytest.fixture(scope="module")
def runs(report_store: Any) -> dict[str, rd.RunData]:
    out = {r: rd.load_run(report_store.store, r) for r in (report_store.sample, report_store.synth)}
    yield out
    for d in out.values():
        if d.con is not None:
            d.con.close()


BUILDERS = [
    "headline_errors",
    "breakdown",
    "traffic_heatmap",
    "onoff_overview",
    "onoff_timeline",
    "message_sizes",
    "bandwidth",
    "stragglers",
    "bubbles",
    "predictability",
]


@pytest.mark.parametrize("run", ["sample", "synth"])
@pytest.mark.parametrize("builder", BUILDERS)
def test_builder_round_trips(runs: dict[str, rd.RunData], run: str, builder: str) -> None:
    chart = _builders(runs[run])[builder]()
    spec = chart.to_dict()  # validates against the Vega-Lite schema
    again = json.loads(chart.to_json())
    assert again == json.loads(json.dumps(spec))
    rebuilt = type(chart).from_dict(again)
    assert rebuilt.to_dict() == spec
    # data is inline (Altair hoists it into top-level datasets) and non-empty
    assert any(len(rows) > 0 for rows in spec["datasets"].values())


def test_moe_builder_round_trips() -> None:
    df = pl.DataFrame(
        {
            "iteration": [0, 1, 0, 1],
            "metric": ["cv", "cv", "nf_rel", "nf_rel"],
            "value": [0.5, 0.4, 1.0, 0.8],
        }
    )
    chart = charts.moe(df)
    assert type(chart).from_dict(json.loads(chart.to_json())).to_dict() == chart.to_dict()


def test_moe_unavailable_without_all_to_all(runs: dict[str, rd.RunData]) -> None:
    with pytest.raises(rd.Unavailable, match="all-to-all"):
        rd.moe(runs["sample"])


def test_headline_iteration_time_is_the_model_tables(
    report_store: Any, runs: dict[str, rd.RunData]
) -> None:
    # one number per quantity (issue 17): the headline's T_iter is model_vs_measured's
    path = report_store.store.mart_files("synth")["model_vs_measured"]
    ((measured, predicted),) = duckdb.sql(
        f"SELECT measured, predicted FROM read_parquet('{path}') WHERE term = 'T_iter'"
    ).fetchall()
    head = rd.headline(runs["synth"])
    row = head.filter(pl.col("metric") == "iteration time T_iter").row(0, named=True)
    assert row["measured"] == pytest.approx(measured)
    assert row["predicted"] == pytest.approx(predicted)
    assert row["predicted"] is not None and row["predicted"] > 0  # the manifest carries a model


def test_traffic_cells_keep_bytes_per_iteration(
    report_store: Any, runs: dict[str, rd.RunData]
) -> None:
    path = report_store.store.mart_files("synth")["traffic_matrix"]
    ((expected,),) = duckdb.sql(
        f"SELECT sum(bytes) / count(DISTINCT iteration) FROM read_parquet('{path}') WHERE dst_rank IS NOT NULL"
    ).fetchall()
    t = rd.traffic(runs["synth"])
    got = t.cells.filter(pl.col("source") == "measured")["bytes"].sum()
    assert got == pytest.approx(expected, rel=1e-9)
    assert t.unit == "rank" and t.size == 8
    assert t.boundaries["pos"].to_list() == [4]  # two 4-GPU nodes


def test_large_runs_are_aggregated(
    runs: dict[str, rd.RunData], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rd, "MAX_AXIS", 4)  # pretend 8 ranks is "large"
    t = rd.traffic(runs["synth"])
    assert t.unit == "node" and t.size == 2
    assert t.cells["src"].max() <= 1 and t.cells["dst"].max() <= 1


def test_timeline_is_bounded(runs: dict[str, rd.RunData], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rd, "MAX_TIMELINE_ROWS", 50)
    df = rd.onoff_timeline(runs["synth"])
    assert 0 < df.height <= 50
    assert set(df["activity"]) == {"communication (on)"}
