"""What-if ranking of layouts (ConfigTuner idea)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from commscope.model import ModelConfig, ParallelConfig, Platform, advise, mapping_orders

GPT3B = ModelConfig(
    layers=54, hidden=2000, seq=1024, vocab=50257, global_batch=1024, micro_batch=32
)
RTX3090 = Platform(gpus_per_node=8, gpu_memory_bytes=24 * 2**30)


def _factorizations(n: int) -> int:
    """Ordered (p, t, d) with p * t * d = n, counted by brute force."""
    return sum(1 for p in range(1, n + 1) for t in range(1, n + 1) if n % (p * t) == 0)


def test_gpt3b_on_32_gpus_is_ranked_quickly() -> None:
    advice = advise(GPT3B, 32, RTX3090)
    assert advice.elapsed_s < 2.0
    assert advice.candidates
    times = [c.t_iter for c in advice.candidates]
    assert times == sorted(times)
    # micro-batch options: 1, 2, 4, ..., 64 (32 is the model's own); two mappings.
    assert advice.search_space_size == _factorizations(32) * 7 * 2
    assert advice.valid + sum(advice.rejected.values()) == advice.search_space_size
    for c in advice.candidates:
        assert c.pp * c.tp * c.dp == 32
        assert c.micro_batch * c.micro_batches * c.dp == GPT3B.global_batch
        assert c.tp <= 8
        assert c.memory_bytes <= RTX3090.gpu_memory_bytes


def test_memory_filter_only_removes_what_does_not_fit() -> None:
    kept = advise(GPT3B, 32, RTX3090)
    everything = advise(GPT3B, 32, RTX3090, require_fit=False)
    assert everything.valid > kept.valid
    too_big = [c for c in everything.candidates if not c.fits]
    assert too_big and all(c.memory_bytes > RTX3090.gpu_memory_bytes for c in too_big)
    # ties collapsed: one row stands for every mapping in its tie class
    assert everything.valid - sum(len(c.mappings) for c in too_big) == kept.valid


def test_mappings_tie_unless_the_platform_is_mapping_aware() -> None:
    blind = advise(GPT3B, 32, RTX3090, micro_batch_options=[32])
    by_layout: dict[tuple, set[float]] = {}
    for c in blind.candidates:
        by_layout.setdefault((c.pp, c.tp, c.dp, c.micro_batch), set()).add(round(c.t_iter, 9))
    assert all(len(v) == 1 for v in by_layout.values())
    assert not blind.mapping_aware

    aware_pf = replace(RTX3090, c_intra=20e9, c_inter=1e9)
    aware = advise(GPT3B, 32, aware_pf, micro_batch_options=[32])
    assert aware.mapping_aware
    t = {
        c.mapping_name: c.t_iter
        for c in aware.candidates
        if (c.pp, c.tp, c.dp, c.micro_batch) == (4, 2, 4, 32)
    }
    # Default puts the 8 pipeline messages per stage pair across nodes; customized puts the
    # larger DP all-reduce there instead (Fig. 6: less PP time, more DP time).
    assert set(t) == {"default", "customized"} and t["default"] != t["customized"]


def test_zero2_with_pipeline_is_rejected() -> None:
    advice = advise(GPT3B, 32, RTX3090, template=ParallelConfig(pp=1, tp=1, dp=1, zero_stage=2))
    assert all(c.pp == 1 for c in advice.candidates)
    assert advice.rejected["ZeRO-2/3 with pipeline parallelism"] > 0


def test_mapping_orders_resolve_names() -> None:
    assert list(mapping_orders(["default", "customized"])) == ["default", "customized"]
    assert len(mapping_orders(["all"])) == 6
    assert mapping_orders(["data-pipe-model", "customized"]) == {
        "data-pipe-model": ("data", "pipe", "model")
    }
    with pytest.raises(ValueError):
        mapping_orders(["sideways"])
