"""Truth for the cross-rank marts (issue 18): collective instances, clock offsets, stragglers.

One small generated run (32 ranks on 4 nodes, 2 iterations, Kineto only) with a straggler rank,
a slow node and clock skew; its truth is checked against itself, the simulation's event list and
the raw Kineto files it wrote.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from commscope.model.config import config_from_dict
from commscope.synthetic import GenerateOptions, Scenario, generate
from commscope.synthetic.presets import tiny_config as tiny
from commscope.synthetic.simulate import Simulation

STRAGGLER = 5
OPTS = GenerateOptions(
    iterations=2,
    seed=3,
    formats=("kineto",),
    scenario=Scenario(straggler_rank=STRAGGLER, slow_node=2, clock_skew_us=500.0),
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("instances") / "run"
    generate(config_from_dict(tiny()), OPTS, out)
    return out, json.loads((out / "truth.json").read_text())


def test_straggler_rank_is_named_in_every_iteration(run: tuple[Path, dict[str, Any]]) -> None:
    _out, doc = run
    s = doc["stragglers"]
    assert s["intended"]["straggler_rank"] == STRAGGLER
    assert s["intended"]["slow_node_ranks"] == list(range(16, 24))
    rows = [
        dict(zip(s["per_iteration"]["columns"], r, strict=True)) for r in s["per_iteration"]["rows"]
    ]
    assert [r["iteration"] for r in rows] == list(range(OPTS.iterations))
    for r in rows:
        assert r["rank"] == STRAGGLER
        assert 0 < r["wait_caused_ns"] <= r["same_stage_wait_ns"]


def test_instances_skew_transfer_and_waits_add_up(run: tuple[Path, dict[str, Any]]) -> None:
    out, doc = run
    inst = pl.read_parquet(out / "truth" / "instances.parquet")
    assert inst.height > 0
    assert inst.filter(pl.col("n_ranks") != pl.col("members").list.len()).height == 0
    assert inst.select("iteration", "group_id", "seq").is_duplicated().sum() == 0
    skew = pl.col("last_arrival_ns") - pl.col("first_arrival_ns")
    assert (inst["skew_ns"] == inst.select(skew).to_series()).all()
    xfer = pl.col("end_ns") - pl.col("last_arrival_ns")
    assert (inst["transfer_ns"] == inst.select(xfer).to_series()).all()
    assert inst.select(pl.col("last_rank").is_in(pl.col("members")).all()).item()
    # The transfer starts when the last member arrives (to the simulation's 1 ns floor rounding).
    lag = inst["transfer_start_ns"] - inst["last_arrival_ns"]
    assert lag.min() >= 0 and lag.max() <= 1
    # The instances' waits are the per-rank waits (T_sync_wait + T_bubble) of the time truth.
    ri = doc["per_rank_iteration"]
    per_rank = pl.DataFrame(ri["rows"], schema=ri["columns"], orient="row")
    expect = per_rank.group_by("iteration").agg(
        (pl.col("T_sync_wait") + pl.col("T_bubble")).sum().alias("wait_truth")
    )
    got = inst.group_by("iteration").agg(pl.col("wait_ns").sum())
    waits = pl.read_parquet(out / "truth" / "rank_waits.parquet")
    by_rank = waits.group_by("iteration").agg(pl.col("wait_ns").sum())
    joined = expect.join(got, on="iteration").join(by_rank, on="iteration", suffix="_r")
    assert joined.height == OPTS.iterations
    assert joined["wait_truth"].to_list() == joined["wait_ns"].to_list()
    assert joined["wait_ns"].to_list() == joined["wait_ns_r"].to_list()
    caused = pl.read_parquet(out / "truth" / "waits_caused.parquet")
    assert caused["wait_caused_ns"].sum() == inst["wait_ns"].sum()


def test_instances_equal_the_simulation_events(run: tuple[Path, dict[str, Any]]) -> None:
    """TP instances of lane 0, iteration 0, rebuilt from the event list by call order."""
    out, _doc = run
    sim = Simulation(config_from_dict(tiny()), OPTS)
    sim.run_boundaries()
    ev = sim.lane_events(0, 0).filter(pl.col("cls") == "TP").sort("rank", "seq")
    ev = ev.with_columns(pl.int_range(pl.len()).over("rank").alias("n"))
    pairs = {tuple(sim.cluster.group(r, "tp").members) for r in ev["rank"].unique().to_list()}
    inst = pl.read_parquet(out / "truth" / "instances.parquet").filter(
        (pl.col("iteration") == 0) & (pl.col("cls") == "TP")
    )
    for members in pairs:
        mine = ev.filter(pl.col("rank").is_in(list(members)))
        want = (
            mine.group_by("n")
            .agg(
                pl.col("t_post").min().alias("first_arrival_ns"),
                pl.col("t_post").max().alias("last_arrival_ns"),
                pl.col("t_end").max().alias("end_ns"),
            )
            .sort("n")
        )
        got = inst.filter(pl.col("members") == pl.lit(list(members), dtype=pl.List(pl.Int32)))
        got = got.sort("seq").select("first_arrival_ns", "last_arrival_ns", "end_ns")
        assert got.height == want.height > 0
        assert got.to_dicts() == want.drop("n").to_dicts()


def _first_comm_kernel_end_ns(path: Path) -> int:
    """Epoch ns (file clock) of the end of the first NCCL kernel, read from the raw trace."""
    trace = json.loads(gzip.decompress(path.read_bytes()))
    base = int(trace["baseTimeNanoseconds"])
    ends = [
        round((float(e["ts"]) + float(e["dur"])) * 1000)
        for e in trace["traceEvents"]
        if e.get("cat") == "kernel" and str(e.get("name", "")).startswith("nccl")
    ]
    return base + min(ends)


def test_clock_offsets_are_what_the_kineto_files_show(run: tuple[Path, dict[str, Any]]) -> None:
    out, doc = run
    offsets = doc["clock_offsets"]
    per_rank = offsets["per_rank_ns"]
    nodes = offsets["per_node"]
    assert nodes[0]["offset_ns"] == 0
    assert len({n["offset_ns"] for n in nodes}) == len(nodes)  # the skew really moves each node
    for n in nodes:
        assert all(per_rank[r] == n["offset_ns"] for r in n["ranks"])
    inst = pl.read_parquet(out / "truth" / "instances.parquet").filter(pl.col("iteration") == 0)
    for rank in range(doc["world_size"]):
        true_end = inst.filter(pl.col("members").list.contains(rank))["end_ns"].min()
        path = out / "kineto" / f"synthetic_rank{rank:04d}.pt.trace.json.gz"
        seen = _first_comm_kernel_end_ns(path) - OPTS.start_epoch_ns - true_end
        assert seen == per_rank[rank], rank


@pytest.mark.parametrize("rank", [0, 20, 31])
def test_any_straggler_rank_is_named(tmp_path: Path, rank: int) -> None:
    opts = GenerateOptions(
        iterations=3, seed=1, formats=("nccl",), scenario=Scenario(straggler_rank=rank)
    )
    doc = generate(config_from_dict(tiny()), opts, tmp_path / "run").truth
    rows = doc["stragglers"]["per_iteration"]["rows"]
    assert [r[:2] for r in rows] == [[k, rank] for k in range(3)]
