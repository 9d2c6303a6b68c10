"""The shared TOML/dict configuration layout and its validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commscope.model import (
    CUSTOMIZED_ORDER,
    DEFAULT_ORDER,
    ModelConfig,
    ParallelConfig,
    RunConfig,
    config_from_dict,
    config_to_dict,
    load_config,
)

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def minimal() -> dict:
    return {
        "model": {
            "layers": 4,
            "hidden": 64,
            "seq": 32,
            "vocab": 100,
            "global_batch": 16,
            "micro_batch": 2,
        },
        "parallel": {"pp": 2, "tp": 2, "dp": 2},
    }


def test_paper_configs_describe_the_papers_settings() -> None:
    gpt3 = load_config(CONFIGS / "gpt3b_paper.toml")
    assert (gpt3.model.layers, gpt3.model.hidden, gpt3.model.seq) == (54, 2000, 1024)
    assert (gpt3.model.global_batch, gpt3.model.micro_batch, gpt3.micro_batches) == (1024, 32, 8)
    assert (gpt3.parallel.pp, gpt3.parallel.tp, gpt3.parallel.dp) == (4, 2, 4)
    assert gpt3.mapping == DEFAULT_ORDER
    assert gpt3.platform.gpu_memory_bytes == 24 * 2**30
    gpt15 = load_config(CONFIGS / "gpt1_5b_paper.toml")
    assert (gpt15.model.layers, gpt15.model.hidden, gpt15.model.global_batch) == (48, 1600, 512)
    assert (gpt15.parallel.pp, gpt15.parallel.tp, gpt15.parallel.dp) == (4, 2, 2)
    assert gpt15.world == 16 and gpt3.world == 32


@pytest.mark.parametrize("name", ["gpt3b_paper.toml", "gpt1_5b_paper.toml"])
def test_json_round_trip_is_exact(name: str) -> None:
    run = load_config(CONFIGS / name)
    data = json.loads(json.dumps(config_to_dict(run)))
    assert config_from_dict(data) == run


def test_defaults_and_derived_micro_batches() -> None:
    run = config_from_dict(minimal())
    assert run.micro_batches == 16 // (2 * 2)
    assert run.mapping == DEFAULT_ORDER
    assert run.model.dtype_bytes == 2
    assert run.model.num_heads == 1  # h / 64


def test_mapping_preset_and_order() -> None:
    data = minimal()
    data["mapping"] = {"preset": "customized"}
    assert config_from_dict(data).mapping == CUSTOMIZED_ORDER
    data["mapping"] = {"order": ["model", "pipe", "data"]}
    assert config_from_dict(data).mapping == ("model", "pipe", "data")
    data["mapping"] = {"order": ["pipe"], "preset": "default"}
    with pytest.raises(ValueError, match="either order or preset"):
        config_from_dict(data)


@pytest.mark.parametrize(
    ("section", "key", "value", "message"),
    [
        ("model", "layerz", 4, "unknown key"),
        ("model", "micro_batches", 3, "gb = b"),
        ("model", "precision", "fp8", "precision"),
        ("model", "global_batch", 18, "multiple of micro_batch"),
        ("parallel", "pp", 5, "exceeds layers"),
        ("parallel", "tp", 3, "must divide hidden"),
        ("parallel", "ep", 3, "must divide dp"),
        ("parallel", "partitioner", "newest", "partitioner"),
        ("parallel", "layers_per_stage", [1, 2], "sum to model.layers"),
        ("platform", "mu", 1.5, "mu"),
    ],
)
def test_invalid_configs_are_rejected(section: str, key: str, value: object, message: str) -> None:
    data = minimal()
    data.setdefault(section, {})[key] = value
    with pytest.raises(ValueError, match=message):
        config_from_dict(data)


def test_unknown_section_and_missing_parallel() -> None:
    with pytest.raises(ValueError, match="unknown section"):
        config_from_dict({**minimal(), "modle": {}})
    with pytest.raises(ValueError, match=r"\[parallel\]"):
        config_from_dict({"model": minimal()["model"]})


def test_layers_per_stage_override_is_used() -> None:
    data = minimal()
    data["parallel"]["layers_per_stage"] = [3, 1]
    run = config_from_dict(data)
    assert run.parallel.layers_per_stage == (3, 1)


def test_configs_are_hashable_values() -> None:
    model = ModelConfig(layers=4, hidden=64, seq=32, vocab=100, global_batch=16, micro_batch=2)
    a = RunConfig(model, ParallelConfig(pp=2, tp=2, dp=2))
    b = RunConfig(model, ParallelConfig(pp=2, tp=2, dp=2), mapping="pipe,data,model")
    assert a == b and hash(a) == hash(b)
