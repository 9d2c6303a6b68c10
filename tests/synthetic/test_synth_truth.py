"""Ground truth against the analytical model: per-rank calls and sizes equal ``traffic_rows``,
the traffic matrix equals ``predicted_matrix``, times add up, MoE non-uniformity trends."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from commscope.model.config import config_from_dict
from commscope.model.mapping import predicted_matrix
from commscope.model.traffic import traffic_rows
from commscope.synthetic import GenerateOptions, Scenario, generate
from commscope.synthetic.presets import tiny_config as tiny
from commscope.synthetic.program import UnsupportedConfig


def run_truth(tmp: Path, cfg: dict[str, Any], **opts: Any) -> dict[str, Any]:
    opts.setdefault("formats", ("nccl",))
    opts.setdefault("iterations", 2)
    res = generate(config_from_dict(cfg), GenerateOptions(**opts), tmp / "run")
    doc = json.loads((tmp / "run" / "truth.json").read_text())
    assert doc == json.loads(json.dumps(res.truth))
    return doc


def table(doc: dict[str, Any], key: str) -> pl.DataFrame:
    part = doc[key]
    return pl.DataFrame(part["rows"], schema=part["columns"], orient="row")


def model_counts(cfg: dict[str, Any], ignore_ep_size: bool = False) -> Counter[tuple[Any, ...]]:
    out: Counter[tuple[Any, ...]] = Counter()
    for row in traffic_rows(config_from_dict(cfg)):
        size = None if (ignore_ep_size and row["traffic_class"] == "EP") else int(row["msg_bytes"])
        out[(row["rank"], row["traffic_class"], row["op"], row["group"], size)] += int(row["count"])
    return out


def truth_counts(doc: dict[str, Any], ignore_ep_size: bool = False) -> Counter[tuple[Any, ...]]:
    out: Counter[tuple[Any, ...]] = Counter()
    iterations = doc["iterations"]
    for rank, cls, op, group, size, calls in table(doc, "per_rank_calls").iter_rows():
        assert calls % iterations == 0
        key_size = None if (ignore_ep_size and cls == "EP") else size
        out[(rank, cls, op, group, key_size)] += calls // iterations
    return out


CASES: dict[str, dict[str, Any]] = {
    "dense_default": tiny(),
    "customized_mapping": {**tiny(), "mapping": {"preset": "customized"}},
    "sequence_parallel": {
        **tiny(),
        "parallel": {"pp": 4, "tp": 2, "dp": 4, "sequence_parallel": True},
    },
    "no_recompute_untied": tiny(recompute=False, tied_embeddings=False),
    "zero1": {**tiny(), "parallel": {"pp": 2, "tp": 2, "dp": 4, "zero_stage": 1}},
    "pp1_tp1": tiny(pp=1, tp=1, dp=8),
    "pp2_uneven_layers": {**tiny(pp=2, layers=7), "parallel": {"pp": 2, "tp": 2, "dp": 2}},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_per_rank_calls_and_sizes_equal_the_model(tmp_path: Path, name: str) -> None:
    cfg = CASES[name]
    if name == "pp2_uneven_layers":
        cfg["model"]["global_batch"] = 2 * 4 * 2
    doc = run_truth(tmp_path, cfg)
    assert truth_counts(doc) == model_counts(cfg)


def test_moe_capacity_routing_equals_the_model_and_routed_keeps_counts(tmp_path: Path) -> None:
    cfg = tiny(pp=1, tp=1, dp=8, experts=8, top_k=2, moe_every=2)
    cfg["parallel"]["ep"] = 8
    doc = run_truth(tmp_path / "cap", cfg, scenario=Scenario(moe_routing="capacity"))
    assert truth_counts(doc) == model_counts(cfg)
    nf = doc["moe"]["per_iteration"]
    assert all(row["nf_abs"] == 0 for row in nf)
    routed = run_truth(tmp_path / "routed", cfg, iterations=1)
    assert truth_counts(routed, ignore_ep_size=True) == model_counts(cfg, ignore_ep_size=True)


def test_moe_nonuniformity_decreases_and_volume_grows(tmp_path: Path) -> None:
    cfg = tiny(pp=1, tp=1, dp=8, m=1, layers=2, experts=8, top_k=2, moe_every=2)
    cfg["parallel"]["ep"] = 8
    scn = Scenario(moe_decay_iterations=4.0)
    doc = run_truth(tmp_path, cfg, iterations=12, formats=("deepspeed",), scenario=scn)
    rows = doc["moe"]["per_iteration"]
    assert [r["iteration"] for r in rows] == list(range(12))
    first, last = rows[0], rows[-1]
    assert last["nf_rel"] < 0.5 * first["nf_rel"]
    assert last["cv"] < first["cv"]
    assert last["volume"] > 1.2 * first["volume"]
    assert first["nf_abs"] > 0 and first["nf_ratio"] > 1
    # NF recomputed independently from the Parquet traffic of iteration 0 (pairs i != j).
    traffic = pl.read_parquet(tmp_path / "run" / "truth" / "traffic.parquet")
    ep0 = traffic.filter(
        (pl.col("cls") == "EP") & (pl.col("iteration") == 0) & (pl.col("src") != pl.col("dst"))
    )
    assert ep0.height == 8 * 7
    assert ep0["bytes"].max() - ep0["bytes"].min() == pytest.approx(first["nf_abs"])


def test_time_terms_add_up_and_traffic_matrix_is_the_models(tmp_path: Path) -> None:
    cfg = tiny()
    doc = run_truth(tmp_path, cfg, iterations=3)
    ri = table(doc, "per_rank_iteration")
    assert ri.height == 32 * 3
    parts = ["T_comp", "T_TP", "T_PP", "T_DP", "T_EmbTableSyn", "T_EP", "T_bubble"]
    total = ri.select(pl.sum_horizontal(parts)).to_series()
    assert (total == ri["T_iter"]).all()
    assert (ri["T_sync_wait"] <= ri["T_TP"] + ri["T_DP"] + ri["T_EP"]).all()
    # Iterations follow each other on every rank.
    for _rank, part in ri.sort("iteration").partition_by("rank", as_dict=True).items():
        assert part["iter_start_ns"].slice(1).to_list() == part["iter_end_ns"].slice(0, 2).to_list()
    model = {
        (r["src_rank"], r["dst_rank"], r["traffic_class"]): r["bytes"]
        for r in predicted_matrix(config_from_dict(cfg))
    }
    traffic = pl.read_parquet(tmp_path / "run" / "truth" / "traffic.parquet")
    per_iter = traffic.group_by("src", "dst", "cls").agg((pl.col("bytes").sum() / 3).alias("b"))
    got = {(s, d, c): b for s, d, c, b in per_iter.iter_rows()}
    assert set(got) == set(model)
    for key, value in model.items():
        assert got[key] == pytest.approx(value, abs=1.0)
    dense = doc["traffic_matrix"]["TP"]
    assert dense[0][1] == round(model[(0, 1, "TP")])


def test_emb_table_syn_is_its_transfer_and_its_wait_is_bubble(tmp_path: Path) -> None:
    # The tied-embedding all-reduce pairs a first-stage rank with a last-stage rank; after both
    # posted, the transfer is one interval for both, so T_EmbTableSyn (transfer only) is the
    # same on both ends, although the first stage posts long before the last one (that wait is
    # bubble, not EmbTableSyn time: issue 17).
    doc = run_truth(tmp_path, tiny(), iterations=2)
    ri = table(doc, "per_rank_iteration")
    last = ri["stage"].max()
    for it in (0, 1):
        ends = ri.filter((pl.col("iteration") == it) & pl.col("stage").is_in([0, last]))
        first = sorted(ends.filter(pl.col("stage") == 0)["T_EmbTableSyn"].to_list())
        final = sorted(ends.filter(pl.col("stage") == last)["T_EmbTableSyn"].to_list())
        assert first == final
        assert min(first) > 0
    # the first stage's end-of-iteration wait for the last stage is bubble, far above its
    # transfer (the old call-to-end T_EmbTableSyn held it)
    stage0 = ri.filter(pl.col("stage") == 0)
    assert (stage0["T_bubble"] > 10 * stage0["T_EmbTableSyn"]).all()
    assert "included in T_TP/T_DP/T_EP" in doc["definitions"]["T_sync_wait"]


def test_busbw_and_intervals(tmp_path: Path) -> None:
    cfg = tiny()
    cfg["platform"].update({"c_tp": 10e9, "c_pp": 5e9, "c_dp": 2e9})
    doc = run_truth(tmp_path, cfg, comm_jitter=0.0)
    bus = table(doc, "busbw")
    dp = bus.filter(pl.col("cls") == "DP")
    assert dp.height >= 1
    # Transfer time = alpha + bus bytes / bandwidth, so busbw is a little below 2 GB/s = 16 Gbit/s.
    assert dp["busbw_transfer_gbps"].max() < 16.0 < 1.15 * dp["busbw_transfer_gbps"].max()
    assert (bus["busbw_call_gbps"] <= bus["busbw_transfer_gbps"] + 1e-9).all()
    intervals = pl.read_parquet(tmp_path / "run" / "truth" / "intervals.parquet")
    assert intervals.columns == ["rank", "iteration", "start_ns", "end_ns", "classes", "calls"]
    ri = table(doc, "per_rank_iteration")
    on = intervals.group_by("rank", "iteration").agg(
        (pl.col("end_ns") - pl.col("start_ns")).sum().alias("on")
    )
    joined = ri.join(on, on=["rank", "iteration"])
    comm = (
        joined["T_TP"]
        + joined["T_PP"]
        + joined["T_DP"]
        + joined["T_EmbTableSyn"]
        + joined["T_bubble"]
    )
    assert (joined["on"] == comm).all()


def test_unsupported_layouts_are_refused(tmp_path: Path) -> None:
    cfg = {**tiny(), "parallel": {"pp": 2, "tp": 2, "dp": 4, "zero_stage": 3}}
    with pytest.raises(UnsupportedConfig, match="ZeRO"):
        run_truth(tmp_path, cfg)
    with pytest.raises(ValueError, match="straggler_rank"):
        run_truth(tmp_path, tiny(), scenario=Scenario(straggler_rank=99))
