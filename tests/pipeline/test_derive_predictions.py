"""The model inputs derive registers beside the store: ``predicted_signatures`` (issue 17).

Oracle: APNet'24 Table 3 (GPT-3B, (p, t, d) = (4, 2, 4), rank 0, per iteration): 680 TP
all-reduces of 125 MiB, 8 PP sends and 8 receives of 125 MiB, one DP all-reduce of 741.47 MiB and
one EmbTableSyn all-reduce of 96.19 MiB, written here as the paper prints them (MiB with two
decimals), not from the model.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from commscope.pipeline import run_config as rc
from commscope.pipeline.derive import INPUT_COLUMNS, PREDICTION_COLUMNS, predictions
from commscope.pipeline.sql_modules import MODEL_INPUTS

ROOT = Path(__file__).resolve().parents[2]
MIB = 2**20


def _paper() -> rc.StoredConfig:
    cfg = rc.read_config_file(ROOT / "configs" / "gpt3b_paper.toml")
    return rc.StoredConfig("r", cfg, "config:gpt3b_paper.toml")


def test_predicted_signatures_of_rank0_are_table3() -> None:
    sig = predictions(_paper(), "r")["predicted_signatures"]
    assert sig.schema == pl.Schema(PREDICTION_COLUMNS["predicted_signatures"])
    r0 = sig.filter(pl.col("rank") == 0)
    got = {
        (cls, op): (gs, round(b / MIB, 2), n)
        for cls, op, gs, b, n in r0.select(
            "traffic_class", "op", "group_size", "msg_bytes", "count"
        ).rows()
    }
    assert got == {
        ("TP", "all_reduce"): (2, 125.0, 680),
        ("PP", "send"): (2, 125.0, 8),
        ("PP", "recv"): (2, 125.0, 8),
        ("DP", "all_reduce"): (4, 741.47, 1),
        ("EmbTableSyn", "all_reduce"): (2, 96.19, 1),
    }
    assert set(r0["stage"]) == {0} and set(r0["run_id"]) == {"r"}
    # every rank of the 32 has its signatures; a middle stage sends to both neighbours: one
    # row per (op, size), its count summed over the two groups
    assert sig["rank"].n_unique() == 32
    mid = sig.filter((pl.col("rank") == 8) & (pl.col("traffic_class") == "PP"))
    assert sorted(mid.select("op", "count").rows()) == [("recv", 16), ("send", 16)]
    # signatures are unique per (rank, class, op, group size, size)
    keys = ["rank", "traffic_class", "op", "group_size", "msg_bytes"]
    assert sig.select(keys).is_unique().all()


def test_no_config_gives_empty_typed_signatures() -> None:
    sig = predictions(None, "r")["predicted_signatures"]
    assert sig.height == 0
    assert sig.schema == pl.Schema(PREDICTION_COLUMNS["predicted_signatures"])


def test_sql_knows_every_model_input() -> None:
    assert set(INPUT_COLUMNS) == MODEL_INPUTS


def test_predicted_platform_states_the_configs_constants() -> None:
    """Oracle: the config file's own [platform] values (configs/gpt3b_paper.toml: c_tp 6e9,
    c_pp 2e9, c_dp 4e9, no c_ep so EP uses c_dp, mu 0.3, peak_flops 71e12), read here by hand;
    the reports read these rows back instead of running the model."""
    from commscope.reports.headline import model_platform

    plat = predictions(_paper(), "r")["predicted_platform"]
    assert plat.schema == pl.Schema(PREDICTION_COLUMNS["predicted_platform"])
    got = {r["traffic_class"]: (r["busbw_Bps"], r["stated"]) for r in plat.iter_rows(named=True)}
    assert got == {"TP": (6e9, True), "PP": (2e9, True), "DP": (4e9, True), "EP": (4e9, False)}
    assert set(plat["mu"]) == {0.3} and set(plat["peak_flops"]) == {71e12}
    mp = model_platform(plat)
    assert mp is not None and mp.bandwidths == {"TP": 6e9, "PP": 2e9, "DP": 4e9, "EP": 4e9}
    assert mp.stated == frozenset({"TP", "PP", "DP"}) and mp.mu == 0.3
    assert model_platform(predictions(None, "r")["predicted_platform"]) is None
