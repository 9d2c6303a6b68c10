"""What a reader sees on the charts: rank heatmaps label ranks, not fractions; colours do not
turn a 1 % spread into two classes; the traced world sets the axis."""

from __future__ import annotations

import polars as pl

from commscope.reports import charts
from tests.reports.test_gaps import call, run_data

NO_BOUNDS = pl.DataFrame({"pos": []}, schema={"pos": pl.Int32})


def _cells(values: list[float]) -> pl.DataFrame:
    n = len(values)
    return pl.DataFrame(
        {
            "src": list(range(n)),
            "dst": [(i + 1) % n for i in range(n)],
            "src_end": [i + 1 for i in range(n)],
            "dst_end": [(i + 1) % n + 1 for i in range(n)],
            "bytes": values,
        }
    )


def test_heatmap_labels_each_rank_at_its_cell_centre() -> None:
    spec = charts.traffic_heatmap(
        _cells([1.0, 2.0, 3.0, 4.0]), NO_BOUNDS, unit="rank", size=4, title="t"
    ).to_dict()
    for layer in spec["layer"]:
        for ch in ("x", "y"):
            if ch in layer["encoding"]:
                axis = layer["encoding"][ch]["axis"]
                assert axis["values"] == [0.5, 1.5, 2.5, 3.5]
                assert axis["labelExpr"] == "floor(datum.value)"


def test_near_uniform_volumes_use_a_linear_colour_scale() -> None:
    # ring shares of one buffer (466k..472k): a log scale spread over them looked bimodal
    near = charts.traffic_heatmap(
        _cells([466e3, 472e3, 470e3, 468e3]), NO_BOUNDS, unit="rank", size=4, title="t"
    ).to_dict()
    scale = near["layer"][0]["encoding"]["color"]["scale"]
    assert scale.get("type") != "log" and scale["domain"] == [0, 472e3]
    wide = charts.traffic_heatmap(
        _cells([1e3, 1e6, 1e9, 1e6]), NO_BOUNDS, unit="rank", size=4, title="t"
    ).to_dict()
    assert wide["layer"][0]["encoding"]["color"]["scale"]["type"] == "log"


def test_world_is_the_run_world_mart() -> None:
    # one traced rank of an 8-rank job: int_run_world gives 8 (its SQL cases: a trace-stated
    # world size); the report draws the axis the mart names, not the one rank it sees
    rw = pl.DataFrame({"run_id": ["r"], "world_size": [8], "world_source": ["seen"]})
    d = run_data([call(rank=0)], marts={"traffic_matrix": None, "run_world": rw})
    assert d.world() == 8
    assert d.con is not None and d.con.execute("SELECT 1").fetchall() == [(1,)]  # not blocked


def test_world_without_the_mart_is_the_ranks_the_marts_show() -> None:
    # frames derived before run_world existed: the ranks the marts show (on_off: rank 0)
    d = run_data([call(rank=0)], marts={"traffic_matrix": None, "iterations": None})
    assert d.world() == int(d.marts["on_off"]["rank"].max()) + 1
