"""Units on the page: every bandwidth says GB/s = 1e9 bytes/s, every size axis says bytes with
decimal (SI) prefixes, and no table mixes bytes/s with GB/s."""

from __future__ import annotations

import json

import polars as pl
import pytest

from commscope.reports import charts
from commscope.reports import data as rd


def _axis_titles(spec: dict) -> list[str]:
    """Every axis/legend title in a chart spec (nested layers included)."""
    out: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "title" and isinstance(v, str | list):
                    out.append(" ".join(v) if isinstance(v, list) else v)
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec.get("encoding", {}))
    for layer in spec.get("layer", []):
        walk(layer.get("encoding", {}))
    return out


def test_bandwidth_chart_states_decimal_gb_and_byte_sizes() -> None:
    pts = pl.DataFrame(
        {
            "series": ["all_reduce (DP)"] * 2,
            "op": ["all_reduce"] * 2,
            "traffic_class": ["DP"] * 2,
            "source": ["per call", "DeepSpeed summary"],
            "size_bytes": [1 << 20, 1 << 20],
            "busbw_gb_s": [10.0, 11.0],
            "calls": [3, 4],
        }
    )
    rules = pl.DataFrame({"traffic_class": ["DP"], "gb_s": [25.0]})
    titles = _axis_titles(charts.bandwidth(pts, rules).to_dict())
    assert "bus bandwidth (GB/s; 1 GB = 1e9 bytes)" in titles
    assert "message size (bytes; k = 1e3, M = 1e6, G = 1e9)" in titles
    assert not any("MiB" in t or "GiB" in t for t in titles)


def test_size_axes_use_si_prefixes() -> None:
    sizes = pl.DataFrame(
        {
            "series": ["x (DP)"],
            "size_bytes": [1024],
            "size_mib": [1024 / 2**20],
            "cdf_calls": [1.0],
            "cdf_all": [1.0],
            "calls": [1],
            "total_bytes": [1024],
        }
    )
    spec = charts.message_sizes(sizes).to_dict()
    for layer in spec["layer"]:
        assert layer["encoding"]["x"]["axis"]["format"] == "~s"  # 1k = 1e3: the title's prefixes
        assert layer["encoding"]["x"]["title"].startswith("message size (bytes; k = 1e3")
    cells = pl.DataFrame({"src": [0], "dst": [1], "src_end": [1], "dst_end": [2], "bytes": [5e5]})
    heat = charts.traffic_heatmap(
        cells, pl.DataFrame({"pos": []}, schema={"pos": pl.Int32}), unit="rank", size=2, title="t"
    )
    assert "bytes / iteration (k = 1e3, M = 1e6, G = 1e9)" in _axis_titles(
        json.loads(heat.to_json())
    )


def test_model_vs_measured_bandwidths_in_gb_s() -> None:
    # the mart keeps bytes/s; the page shows them in the headline's GB/s
    mvm = pl.DataFrame(
        {
            "term": ["C_DP", "T_iter"],
            "unit": ["bytes/s", "s"],
            "measured": [1.9e7, 0.11],
            "predicted": [2.5e10, 0.0002],
            "abs_error": [2.498e10, 0.1098],
            "rel_error": [-0.99924, 549.0],
            "n_samples": [16, 4],
            "term_order": [16, 10],
        }
    )
    d = rd.RunData("r", None, {}, marts={"model_vs_measured": mvm})
    out = rd.model_vs_measured(d)
    assert out["term"].to_list() == ["T_iter", "C_DP"]  # the mart's term_order
    assert out["unit"].to_list() == ["s", "GB/s"]
    assert out["measured"].to_list() == pytest.approx([0.11, 0.019])
    assert out["predicted"].to_list() == pytest.approx([0.0002, 25.0])
    assert out["rel_error"].to_list() == [549.0, -0.99924]  # a ratio: unchanged


def test_model_vs_measured_rows_in_one_order_whatever_the_mart_order() -> None:
    # the page shows the mart's term_order (a null one, a term outside the mart's list, after
    # them by name), whatever order the rows were read in
    terms = ["C_PP", "T_comp", "X_new", "C_DP", "T_bubble", "A_new"]
    order = [15, 1, None, 16, 7, None]
    mvm = pl.DataFrame(
        {"term": terms, "unit": ["s"] * 6, "measured": [1.0] * 6, "term_order": order}
    )
    want = ["T_comp", "T_bubble", "C_PP", "C_DP", "A_new", "X_new"]
    for shift in range(len(terms)):
        rolled = pl.concat([mvm.tail(shift), mvm.head(len(terms) - shift)]) if shift else mvm
        d = rd.RunData("r", None, {}, marts={"model_vs_measured": rolled})
        assert rd.model_vs_measured(d)["term"].to_list() == want
        # a run derived before the mart had term_order: by name, still one order
        old = rd.RunData("r", None, {}, marts={"model_vs_measured": rolled.drop("term_order")})
        assert rd.model_vs_measured(old)["term"].to_list() == sorted(terms)
