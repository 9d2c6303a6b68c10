"""Rank mapping, process groups and the predicted traffic matrix (spec A.6, V13)."""

from __future__ import annotations

import time
from dataclasses import replace
from itertools import permutations

import pytest

from commscope.model import (
    ModelConfig,
    ParallelConfig,
    Platform,
    RunConfig,
    effective_bandwidths,
    group_members,
    groups,
    matrix_summary,
    node_of,
    normalize_order,
    peers,
    predicted_matrix,
    rank_items,
    traffic_rows,
)

GPT3B = ModelConfig(
    layers=54, hidden=2000, seq=1024, vocab=50257, global_batch=1024, micro_batch=32
)


def run_424(mapping: str = "default", **platform: float) -> RunConfig:
    """GPT-3B on (4, 2, 4), 4 nodes of 8 GPUs."""
    return RunConfig(
        model=GPT3B,
        parallel=ParallelConfig(pp=4, tp=2, dp=4),
        platform=Platform(gpus_per_node=8, **platform),
        mapping=mapping,
    )


def test_v13_rank0_peers_under_deepspeed_default_mapping() -> None:
    run = run_424()
    assert peers(run, 0) == {"TP": [1], "PP": [8], "DP": [2, 4, 6], "EmbTableSyn": [24]}
    # rank = stage * 8 + dp * 2 + tp
    assert [run.coords(r) for r in (0, 1, 2, 8, 24)] == [
        (0, 0, 0),
        (0, 0, 1),
        (0, 1, 0),
        (1, 0, 0),
        (3, 0, 0),
    ]


def test_v13_only_pipeline_stage_traffic_leaves_rank0_node() -> None:
    records = [r for r in predicted_matrix(run_424()) if 0 in (r["src_rank"], r["dst_rank"])]
    intra = {r["traffic_class"] for r in records if r["intra_node"]}
    inter = {r["traffic_class"] for r in records if not r["intra_node"]}
    assert intra == {"TP", "DP"}
    # The spec says "PP is the only inter-node traffic of rank 0"; its EmbTableSyn peer 24 is
    # on node 3, so the embedding all-reduce crosses nodes too (both are stage-to-stage).
    assert inter == {"PP", "EmbTableSyn"}
    sent = {(r["dst_rank"], r["traffic_class"]) for r in records if r["src_rank"] == 0}
    # Ring expansion: rank 0 sends DP bytes only to its ring successor 2.
    assert sent == {(1, "TP"), (2, "DP"), (8, "PP"), (24, "EmbTableSyn")}


def test_customized_mapping_of_fig12() -> None:
    run = run_424("customized")
    assert run.mapping == ("data", "pipe", "model")
    assert peers(run, 0) == {"TP": [1], "PP": [2], "DP": [8, 16, 24], "EmbTableSyn": [6]}
    summary = matrix_summary(predicted_matrix(run))
    assert summary["PP"]["inter_node_bytes"] == 0
    assert summary["EmbTableSyn"]["inter_node_bytes"] == 0
    assert summary["DP"]["intra_node_bytes"] == 0
    default = matrix_summary(predicted_matrix(run_424()))
    assert default["DP"]["inter_node_bytes"] == 0
    assert default["PP"]["intra_node_bytes"] == 0
    # The mapping moves traffic between link types but not its total.
    for cls in ("TP", "PP", "DP", "EmbTableSyn"):
        assert sum(summary[cls].values()) == sum(default[cls].values())


def test_pp_matrix_carries_activations_forward_and_gradients_back() -> None:
    run = run_424()
    a = 2 * 32 * 1024 * 2000
    pp = {
        (r["src_rank"], r["dst_rank"]): r["bytes"]
        for r in predicted_matrix(run)
        if r["traffic_class"] == "PP"
    }
    m = run.micro_batches
    assert pp[(0, 8)] == m * a  # stage 0 -> 1: activations
    assert pp[(8, 0)] == m * a  # stage 1 -> 0: gradients
    assert pp[(8, 16)] == m * a and pp[(16, 8)] == m * a
    assert (0, 16) not in pp  # no traffic skips a stage


@pytest.mark.parametrize("order", list(permutations(("pipe", "data", "model"))))
def test_coords_and_rank_of_are_inverse(order: tuple[str, str, str]) -> None:
    run = replace(run_424(), mapping=order)
    seen = set()
    for rank in range(run.world):
        coords = run.coords(rank)
        assert run.rank_of(*coords) == rank
        seen.add(coords)
    assert len(seen) == run.world
    # The last axis of the order varies fastest.
    fastest = {"pipe": 0, "data": 1, "model": 2}[order[-1]]
    assert run.coords(1)[fastest] == 1


@pytest.mark.parametrize("mapping", ["default", "customized", "model-pipe-data"])
@pytest.mark.parametrize(("kind", "size"), [("tp", 2), ("dp", 4), ("pp", 4)])
def test_groups_partition_the_ranks(mapping: str, kind: str, size: int) -> None:
    run = run_424(mapping)
    found = groups(run, kind)
    flat = [r for g in found for r in g]
    assert sorted(flat) == list(range(run.world))
    assert all(len(g) == size for g in found)


def test_emb_groups_pair_first_and_last_stage() -> None:
    run = run_424()
    pairs = groups(run, "emb")
    assert len(pairs) == 8  # d * t pairs
    assert all(run.coords(a)[0] == 0 and run.coords(b)[0] == 3 for a, b in pairs)
    assert all(run.coords(a)[1:] == run.coords(b)[1:] for a, b in pairs)


def test_expert_groups_follow_deepspeed() -> None:
    model = replace(GPT3B, layers=8, global_batch=64, micro_batch=1, experts=8, top_k=2)
    run = RunConfig(model=model, parallel=ParallelConfig(pp=1, tp=1, dp=8, ep=4))
    assert group_members(run, "ep", 5) == [4, 5, 6, 7]  # consecutive DP chunks
    assert group_members(run, "edp", 5) == [1, 5]  # strided remainder
    assert peers(run, 5)["EP"] == [4, 6, 7]


def test_mapping_aware_bandwidths_follow_the_mapping() -> None:
    links = {"c_intra": 20e9, "c_inter": 2e9}
    default = effective_bandwidths(run_424(**links))
    custom = effective_bandwidths(run_424("customized", **links))
    assert (default["TP"], default["DP"], default["PP"]) == (20e9, 20e9, 2e9)
    assert (custom["TP"], custom["DP"], custom["PP"]) == (20e9, 2e9, 20e9)
    assert effective_bandwidths(run_424())["PP"] == Platform().c_pp  # per-type when not aware


def test_node_of_and_order_aliases() -> None:
    assert [node_of(r, 8) for r in (0, 7, 8, 31)] == [0, 0, 1, 3]
    assert normalize_order("pp,dp,tp") == ("pipe", "data", "model")
    assert normalize_order(["tensor", "pipeline", "data"]) == ("model", "pipe", "data")
    with pytest.raises(ValueError, match="once"):
        normalize_order("pipe-pipe-model")
    with pytest.raises(ValueError, match="unknown mapping axis"):
        normalize_order("pipe-data-expert")


def test_rows_and_matrix_for_1024_ranks_are_fast() -> None:
    model = ModelConfig(
        layers=96, hidden=12288, seq=2048, vocab=50257, global_batch=1536, micro_batch=1
    )
    run = RunConfig(model=model, parallel=ParallelConfig(pp=8, tp=8, dp=16))
    started = time.perf_counter()
    rows = traffic_rows(run)
    matrix = predicted_matrix(run)
    elapsed = time.perf_counter() - started
    assert elapsed < 5.0
    assert {r["rank"] for r in rows} == set(range(1024))
    per_rank = len(rank_items(run, 0))
    assert sum(1 for r in rows if r["rank"] == 0) == per_rank
    assert {r["src_rank"] for r in matrix} == set(range(1024))
