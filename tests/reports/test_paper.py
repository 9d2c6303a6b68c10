"""The paper's section (commscope.reports.paper): Table 3 assembly, the paper map, Fig. 1 at exact sizes,
Fig. 7's summary points, Figs. 5, 8 and 10 frames. Fast: hand-made frames, no store."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from commscope.pipeline import run_config as rc
from commscope.pipeline.model_inputs import predictions
from commscope.reports import charts
from commscope.reports import data as rd
from commscope.reports import paper as rp

MIB = 2**20
A = 131_072_000  # 2bsh of GPT-3B in bytes: 125 MiB
# The paper's Table 3 (rank 0, GPT-3B, (p, t, d) = (4, 2, 4)) as signatures per iteration.
TABLE3 = pl.DataFrame(
    {
        "traffic_class": ["TP", "PP", "PP", "DP", "EmbTableSyn"],
        "op": ["all_reduce", "send", "recv", "all_reduce", "all_reduce"],
        "group_size": [2, 2, 2, 4, 2],
        "msg_bytes": [A, A, A, 777_492_000, 100_864_000],
        "per_iteration": [680.0, 8.0, 8.0, 1.0, 1.0],
    },
    schema=rp.SIGNATURE_SCHEMA,
)


def _row(df: pl.DataFrame, cls: str) -> dict:
    return df.filter(pl.col("traffic type") == cls).row(0, named=True)


def test_table3_per_traffic_type() -> None:
    t = rp.table3(TABLE3, TABLE3)
    assert t["traffic type"].to_list() == ["TP", "PP", "DP", "EmbTableSyn"]
    tp, pp, dp, emb = (_row(t, c) for c in ("TP", "PP", "DP", "EmbTableSyn"))
    assert tp["messages / iteration, measured"] == 680
    assert tp["message size (MiB), measured"] == 125.0
    assert tp["volume (MiB / iteration), measured"] == 85_000.0
    assert pp["messages / iteration, measured"] == 16
    assert pp["ops measured"] == "8 recv + 8 send"
    assert dp["message size (MiB), predicted"] == pytest.approx(741.47, abs=0.005)
    assert emb["message size (MiB), predicted"] == pytest.approx(96.19, abs=0.005)
    assert t["match"].to_list() == [True] * 4


def test_table3_flags_a_mismatch_and_a_missing_prediction() -> None:
    fewer = TABLE3.with_columns(
        pl.when(pl.col("traffic_class") == "TP")
        .then(672.0)
        .otherwise(pl.col("per_iteration"))
        .alias("per_iteration")
    )
    t = rp.table3(fewer, TABLE3)
    assert _row(t, "TP")["match"] is False
    assert _row(t, "DP")["match"] is True
    alone = rp.table3(TABLE3, None)
    assert alone["messages / iteration, predicted"].is_null().all()
    assert alone["match"].is_null().all()


def test_signature_detail_keeps_exact_bytes() -> None:
    det = rp.signature_detail(TABLE3, TABLE3)
    assert det["message bytes"].to_list() == [A, A, A, 777_492_000, 100_864_000]
    shown = rp.display(det)
    assert shown["MiB"].to_list()[0] == "125"
    assert shown["MiB"].to_list()[3] == "741.47"


def test_predicted_signatures_are_the_derived_relation(project_root: Path) -> None:
    """Reports read the ``predicted_signatures`` relation derive publishes (the model's
    Table 3 call signatures of GPT-3B); without it they show none, never a model run of their
    own."""
    stored = rc.from_file("r", project_root / "configs" / "gpt3b_paper.toml")
    d = rd.RunData("r", stored, {})
    assert rp.predicted_signatures(d, 0) is None  # not derived: nothing predicted
    d.predicted_signatures = predictions(stored, "r")["predicted_signatures"]
    pred = rp.predicted_signatures(d, 0)
    assert pred is not None
    got = {
        (r["traffic_class"], r["op"], r["msg_bytes"]): r["per_iteration"] for r in pred.to_dicts()
    }
    assert got[("TP", "all_reduce", A)] == 680
    assert got[("PP", "send", A)] == 8 and got[("PP", "recv", A)] == 8
    assert got[("DP", "all_reduce", 777_492_000)] == 1
    assert got[("EmbTableSyn", "all_reduce", 100_864_000)] == 1
    assert rp.predicted_signatures(rd.RunData("r", None, {}), 0) is None


def test_paper_map_lists_every_item_with_a_status() -> None:
    m = rp.paper_map({"Table 3": "shown", "Fig. 5": "needs all-to-all split sizes"})
    items = m["item"].to_list()
    assert items == [i for i, _ in rp.PAPER_ITEMS]
    assert {"Table 3", "Fig. 1", "Fig. 2", "Fig. 10", "Fig. 8", "Fig. 11"} <= set(items)
    status = dict(zip(items, m["status"].to_list(), strict=True))
    assert status["Table 3"] == "shown"
    assert status["Fig. 5"] == "needs all-to-all split sizes"
    assert status["Fig. 8"].startswith("needs two runs: commscope compare")
    assert status["Fig. 11"].startswith("needs two runs: commscope compare")
    assert status["Fig. 1"] == "not computed"  # never silently "shown"


def test_moe_items_say_what_they_need() -> None:
    no_ep = pl.DataFrame(
        {
            "iteration": [0],
            "src_rank": [0],
            "dst_rank": [1],
            "traffic_class": ["DP"],
            "bytes": [10],
        }
    )
    d = rd.RunData("r", None, {}, marts={"traffic_matrix": no_ep})
    with pytest.raises(rp.Needs, match="needs all-to-all \\(EP\\) traffic"):
        rp.moe_maps(d)
    no_split = pl.DataFrame({"iteration": [0, 1], "nf_abs": [None, None], "nf_rel": [0.0, 0.0]})
    d = rd.RunData("r", None, {}, marts={"moe_nonuniform": no_split})
    with pytest.raises(rp.Needs, match="split sizes"):
        rp.moe_nf(d)


def test_fig5_plots_nf_abs_with_nf_rel_beside() -> None:
    mo = pl.DataFrame(
        {"iteration": [0, 1, 2], "nf_abs": [9e8, 5e8, 2e8], "nf_rel": [1.2, 0.7, 0.3]}
    )
    df = rp.moe_nf(rd.RunData("r", None, {}, marts={"moe_nonuniform": mo}))
    assert set(df["metric"]) == {"NF_abs (bytes)", "NF_rel"}
    spec = charts.moe_nf(df).to_dict()
    titles = [p["title"] for p in spec["hconcat"]]
    assert titles == ["NF_abs (bytes)", "NF_rel"]
    assert "Fig. 5" in json.dumps(spec["title"])


def test_fig1_plots_exact_sizes_not_power_of_two_buckets() -> None:
    # the mart's bucket of 125 MiB is 64 MiB (2^26); the figure must put it at 131,072,000
    ms = pl.DataFrame(
        {
            "source": ["comm_ops", "comm_ops"],
            "op": ["all_reduce", "all_reduce"],
            "traffic_class": ["TP", "DP"],
            "size_bucket_bytes": [2**26, 2**29],
            "min_bytes": [A, 777_492_000],
            "max_bytes": [A, 777_492_000],
            "calls": [680, 1],
            "total_bytes": [680 * A, 777_492_000],
            "cdf_calls": [1.0, 1.0],
        }
    )
    df = rd.message_sizes(rd.RunData("r", None, {}, marts={"message_sizes": ms}))
    assert sorted(df["size_bytes"].to_list()) == [A, 777_492_000]
    assert df["size_exact"].all()
    assert sorted(df["cdf_all"].to_list()) == [680 / 681, 1.0]  # share of all calls <= size
    spec = charts.message_sizes(df).to_dict()
    assert all(layer["encoding"]["x"]["field"] == "size_bytes" for layer in spec["layer"])
    for rows in spec["datasets"].values():
        sizes = [r["size_bytes"] for r in rows]
        assert A in sizes and 2**26 not in sizes


def test_fig7_summary_rows_are_points_never_joined_by_a_line() -> None:
    per_call = pl.DataFrame(
        {
            "series": ["all_reduce (TP)"] * 2,
            "source": ["per call"] * 2,
            "size_bytes": [2**20, A],
            "busbw_gb_s": [1.0, 5.7],
            "calls": [10, 680],
        }
    )
    summary = per_call.head(1).with_columns(
        source=pl.lit("DeepSpeed summary"), size_bytes=pl.lit(2**21), busbw_gb_s=pl.lit(0.1)
    )
    spec = charts.busbw_vs_size(
        per_call, summary, pl.DataFrame({"traffic_class": ["TP"], "gb_s": [6.0]})
    ).to_dict()
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert marks[:2] == ["line", "point"]
    line_rows = spec["datasets"][spec["layer"][0]["data"]["name"]]
    assert {r["source"] for r in line_rows} == {"per call"}


def test_fig10_and_fig6b_from_model_vs_measured() -> None:
    mv = pl.DataFrame(
        {
            "term": ["T_comp", "T_TP", "R_bubble", "T_comm", "R_comm", "C_TP"],
            "unit": ["s", "s", "ratio", "s", "ratio", "bytes/s"],
            "measured": [35.9, 15.5, 0.27, 17.2, 0.24, 5.75e9],
            "predicted": [35.9, 14.9, 0.27, 16.2, 0.23, 6e9],
        }
    )
    d = rd.RunData("r", None, {}, marts={"model_vs_measured": mv})
    f10 = rp.fig10(d)
    assert f10["term"].unique(maintain_order=True).to_list() == list(rp.FIG10_TERMS)
    assert f10.height == 8
    charts.model_vs_measured(f10).to_dict()
    bw = rp.class_bandwidth(d)
    assert bw.filter(pl.col("source") == "predicted")["gb_s"].to_list() == [6.0]


def test_fig8_normalises_b_to_a() -> None:
    def bd(comm: float, it: float, run: str) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "run_id": [run] * 2,
                "t_iter_ns": [it] * 2,
                "t_comm_ns": [comm] * 2,
                "t_tp_ns": [comm / 2] * 2,
                "t_pp_ns": [comm / 4] * 2,
                "t_dp_ns": [comm / 4] * 2,
                "t_bubble_ns": [0.0] * 2,
            }
        )

    df = rp.fig8(bd(40.0, 100.0, "tcp"), bd(20.0, 80.0, "roce"), "tcp", "roce")
    norm = {
        (r["run"], r["metric"]): r["value"]
        for r in df.filter(pl.col("panel") == "normalised").to_dicts()
    }
    assert norm[("tcp", "communication time")] == 1.0
    assert norm[("roce", "communication time")] == 0.5
    assert norm[("roce", "iteration time")] == 0.8
    ratio = df.filter((pl.col("panel") == "ratio") & (pl.col("run") == "tcp"))
    assert dict(zip(ratio["metric"], ratio["value"], strict=True))["TP"] == 0.2


def test_fig1_mixed_bucket_of_a_huge_run_keeps_its_mean_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # two DP sizes in one 2^29 bucket: re-read per call, unless the run is too large to
    ms = pl.DataFrame(
        {
            "source": ["comm_ops"],
            "op": ["all_reduce"],
            "traffic_class": ["DP"],
            "size_bucket_bytes": [2**29],
            "min_bytes": [672_532_000],
            "max_bytes": [777_492_000],
            "calls": [2],
            "total_bytes": [672_532_000 + 777_492_000],
            "cdf_calls": [1.0],
        }
    )
    monkeypatch.setattr(rd, "MAX_EXACT_SIZE_CALLS", 1)
    df = rd.message_sizes(rd.RunData("r", None, {}, marts={"message_sizes": ms}))
    assert df["size_bytes"].to_list() == [(672_532_000 + 777_492_000) // 2]
    assert df["size_exact"].to_list() == [False]


def test_fig5_needs_split_sizes_when_every_all_to_all_was_spread_uniformly() -> None:
    mo = pl.DataFrame(
        {
            "iteration": [0, 1],
            "nf_abs": [3e6, 1e6],
            "nf_rel": [0.1, 0.05],
            "pair_sizes": ["uniform_split", "uniform_split"],
        }
    )
    with pytest.raises(rp.Needs, match="needs all-to-all split sizes"):
        rp.moe_nf(rd.RunData("r", None, {}, marts={"moe_nonuniform": mo}))
    logged = mo.with_columns(pair_sizes=pl.lit("logged"))
    assert rp.moe_nf(rd.RunData("r", None, {}, marts={"moe_nonuniform": logged})).height == 4


def test_rounded_deepspeed_sizes_match_within_their_tolerance() -> None:
    # DeepSpeed prints 741.47 MB for 777,492,000 B; the parser stores 777,487,647 B, and
    # logged_size_tolerance gives 5,243.38 B at that size (sql/macros/logged_size_tolerance.sql)
    logged = TABLE3.with_columns(
        pl.when(pl.col("traffic_class") == "DP")
        .then(777_487_647)
        .otherwise(pl.col("msg_bytes"))
        .alias("msg_bytes"),
        tol_bytes=pl.when(pl.col("traffic_class") == "DP").then(5_243.38).otherwise(0.0),
    )
    t = rp.table3(logged, TABLE3)
    assert _row(t, "DP")["match"] is True
    det = rp.signature_detail(logged, TABLE3).filter(pl.col("traffic_class") == "DP")
    assert det["message bytes"].to_list() == [777_492_000]
    assert det["logged bytes"].to_list() == [777_487_647]
    assert det["predicted / iteration"].to_list() == [1.0]
    exact = logged.with_columns(tol_bytes=pl.lit(0.0))
    assert _row(rp.table3(exact, TABLE3), "DP")["match"] is False
