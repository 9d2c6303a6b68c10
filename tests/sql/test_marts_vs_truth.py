"""Marts against the synthetic generator's ground truth (issue 6: every mart equals truth.json).

Two small runs are generated through ``commscope.synthetic``'s Python API, ingested and derived:
GPT-3B at (p, t, d) = (4, 2, 4) on 32 ranks, 2 iterations, in all four formats (so every rank is
logged by NCCL, Kineto and nsys, and rank 0 also by DeepSpeed: the marts must count each rank
once), and the 8-rank MoE run (EP 8) for 3 iterations. The expected values are read from the
generator's truth files (``truth.json``, ``truth/*.parquet``), which the generator computes from
its own event list, independently of every parser and SQL object.

Tolerances: bytes and counts are exact (up to float rounding of ring shares); times are exact
up to the clock offset of the files (truth is relative to the run start); bandwidths within the
generator's comm jitter.
"""

from __future__ import annotations

import polars as pl
import pytest
from generated_runs import GeneratedRun, make_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def gpt(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    """GPT-3B 4x2x4, 32 ranks, 2 iterations, every format."""
    return make_run(
        tmp_path_factory.mktemp("truth_gpt"), "synthetic_gpt3b_4x2x4.toml", "gpt", iterations=2
    )


@pytest.fixture(scope="session")
def moe(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    """MoE EP 8, 8 ranks, 3 iterations, NCCL and Kineto."""
    return make_run(
        tmp_path_factory.mktemp("truth_moe"),
        "synthetic_moe_ep8.toml",
        "moe",
        iterations=3,
        profile_iterations=(),
        formats=("nccl", "kineto"),
    )


def test_traffic_matrix_equals_truth_per_iteration_pair_and_class(gpt: GeneratedRun) -> None:
    got = gpt.mart("traffic_matrix").select(
        "iteration", "src_rank", "dst_rank", "traffic_class", pl.col("bytes").alias("got")
    )
    want = gpt.truth_traffic()
    assert got["iteration"].null_count() == 0 and got["dst_rank"].null_count() == 0
    assert set(want["traffic_class"]) == {"TP", "PP", "DP", "EmbTableSyn"}
    j = got.join(want, on=["iteration", "src_rank", "dst_rank", "traffic_class"], how="full")
    assert j.height == want.height == got.height
    diff = j.filter((pl.col("got").fill_null(-1) - pl.col("want").fill_null(-2)).abs() > 0.5)
    assert diff.height == 0, diff.head()


def test_each_rank_counted_once_despite_four_sources(gpt: GeneratedRun) -> None:
    # every rank is in three formats (rank 0 in four); its logged volume is counted once
    per_rank = gpt.mart("traffic_matrix").group_by("src_rank").agg(pl.col("bytes").sum())
    want = gpt.truth_traffic().group_by("src_rank").agg(pl.col("want").sum())
    j = per_rank.join(want, on="src_rank")
    assert j.height == gpt.truth["world_size"]
    assert (j["bytes"] - j["want"]).abs().max() < 1.0  # type: ignore[operator]


def test_iterations_count_and_boundaries(gpt: GeneratedRun) -> None:
    it = gpt.mart("iterations")
    ri = pl.read_parquet(gpt.gen / "truth" / "rank_iteration.parquet")
    n_iter = gpt.truth["iterations"]
    assert it.group_by("rank").len()["len"].to_list() == [n_iter] * gpt.truth["world_size"]
    j = it.join(
        ri.with_columns(pl.col("rank").cast(pl.Int32), pl.col("iteration").cast(pl.Int32)),
        on=["rank", "iteration"],
    )
    assert j.height == ri.height
    # file clocks are offset from the truth's run-relative clock by one constant per run
    offset = (j["start_ns"] - j["iter_start_ns"]).unique()
    assert offset.len() == 1
    assert ((j["end_ns"] - j["iter_end_ns"]) == offset[0]).all()
    assert (j["duration_ns"] == j["T_iter"]).all()


def test_on_off_on_time_and_cycles_per_rank_iteration(gpt: GeneratedRun) -> None:
    iv = (
        pl.read_parquet(gpt.gen / "truth" / "intervals.parquet")
        .group_by("rank", "iteration")
        .agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias("on_true"), pl.len().alias("n"))
        .with_columns(pl.col("rank").cast(pl.Int32), pl.col("iteration").cast(pl.Int32))
    )
    oo = gpt.mart("on_off").join(iv, on=["rank", "iteration"])
    assert oo.height == iv.height == gpt.truth["world_size"] * gpt.truth["iterations"]
    assert ((oo["on_ns"] - oo["on_true"]).abs() <= 1).all()
    assert (oo["cycles"] == oo["n"]).all()
    assert ((oo["on_ns"] + oo["off_ns"]) == oo["iteration_ns"]).all()


def test_effective_bandwidth_busbw_within_jitter(gpt: GeneratedRun) -> None:
    """Aggregate busbw per (class, op, group size) = bus bytes / call time, as truth's call busbw."""
    t = gpt.truth["busbw"]
    tb = pl.DataFrame([dict(zip(t["columns"], r, strict=True)) for r in t["rows"]])
    tb = tb.with_columns(
        (pl.col("bus_bytes_per_call") * pl.col("calls")).alias("bus"),
        (pl.col("bus_bytes_per_call") * pl.col("calls") * 8 / pl.col("busbw_call_gbps")).alias(
            "ns"
        ),
    )
    want = tb.group_by(pl.col("cls").alias("traffic_class"), "op", "group_size").agg(
        (pl.col("bus").sum() * 8 / pl.col("ns").sum()).alias("want")
    )
    eb = gpt.mart("effective_bandwidth").filter(pl.col("source") == "comm_ops")
    n = pl.col("group_size").cast(pl.Float64)
    factor = pl.when(pl.col("op") == "all_reduce").then(2 * (n - 1) / n).otherwise(pl.lit(1.0))
    got = eb.group_by("traffic_class", "op", "group_size").agg(
        (
            (factor * pl.col("total_bytes")).sum()
            * 8
            / (pl.col("mean_dur_ns") * pl.col("calls")).sum()
        ).alias("got")
    )
    j = want.join(
        got.with_columns(pl.col("group_size").cast(pl.Int64)),
        on=["traffic_class", "op", "group_size"],
    )
    assert j.height == want.height, (want, got)
    jitter = 0.05  # generator comm jitter 0.02, with margin for per-call rounding
    bad = j.filter(((pl.col("got") / pl.col("want")) - 1).abs() > jitter)
    assert bad.height == 0, bad


def test_moe_nonuniform_factor_per_iteration(moe: GeneratedRun) -> None:
    want = pl.DataFrame(moe.truth["moe"]["per_iteration"])
    got = moe.mart("moe_nonuniform")
    j = got.join(want.with_columns(pl.col("iteration").cast(pl.Int32)), on="iteration", suffix="_t")
    assert j.height == moe.truth["iterations"]
    assert ((j["volume_bytes"] - j["volume"]).abs() <= 1).all()
    assert ((j["nf_abs"] - j["nf_abs_t"]).abs() <= 1).all()
    assert ((j["nf_dest"] - j["nf_dest_t"]).abs() <= 1).all()
    for col in ("nf_rel", "cv"):
        assert ((j[col] - j[f"{col}_t"]).abs() <= 1e-9 * (1 + j[f"{col}_t"].abs())).all(), col


def test_moe_total_ep_volume_equals_truth(moe: GeneratedRun) -> None:
    want = sum(r["volume"] for r in moe.truth["moe"]["per_iteration"])
    got = moe.mart("moe_nonuniform")["volume_bytes"].sum()
    assert abs(got - want) <= 1.0
