"""advise as ConfigTuner (issue 22): μ curve, memory feasibility, pruned search with ties
collapsed, constants with sources, calibration from a run, and the ranking checked by the
generator's simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commscope.model.advise import Advice, advise
from commscope.model.config import ModelConfig, ParallelConfig, RunConfig, load_config
from commscope.model.efficiency import (
    MuCurve,
    default_mu_curve,
    fit_mu_curve,
    fit_mu_level,
    layer_forward_flops,
)
from commscope.model.predict import stage_memory_breakdown
from commscope.pipeline.calibration import calibrate_from_store
from commscope.pipeline.cli import main
from commscope.reports.data import read_advice
from commscope.synthetic.check_layouts import layout_run, simulated_t_iter

ROOT = Path(__file__).resolve().parents[2]
PAPER = load_config(ROOT / "configs" / "gpt3b_paper.toml")  # GPT-3B, 24 GiB RTX3090
GIB = 2**30


# ------------------------------------------------------------------------ memory (oracle)


def _gpt3b(zero: int = 0, recompute: bool = True) -> RunConfig:
    model = ModelConfig(
        layers=54,
        hidden=2000,
        seq=1024,
        vocab=50257,
        global_batch=1024,
        micro_batch=32,
        recompute=recompute,
    )
    par = ParallelConfig(pp=4, tp=2, dp=4, zero_stage=zero, partitioner="old")
    return RunConfig(model=model, parallel=par)


# Hand-computed for GPT-3B (l, h, s, V) = (54, 2000, 1024, 50257) at (p, t, d) = (4, 2, 4),
# b = 32, m = 8, stage 0 (14 layers, the old partitioner), fp16, a = h // 64 = 31 heads:
#   parameters (Megatron, per TP rank): 14 (12h²/t + 7h/t + 6h) + V_pad h/t + s h
#     = 14 * 24,019,000 + 50,432 * 1,000 + 1,024 * 2,000 = 388,746,000 (V_pad = 50,432)
#   mixed-precision Adam (ZeRO paper): 2 + 2 + 12 bytes per parameter
#   activations (Korthikanti et al. 2023, TP without SP): one layer sbh(10 + 24/t + 5as/(ht))
#     = 65,536,000 * (10 + 12 + 39.68) = 4,042,260,480 bytes; with recompute
#     4 in flight (min(m, p)) * 14 layers * 2bsh (131,072,000) = 7,340,032,000 + one layer.
PARAMS_STAGE0 = 388_746_000
LAYER_WORKING_SET = 4_042_260_480
CHECKPOINTS = 7_340_032_000


@pytest.mark.parametrize(
    ("zero", "recompute", "expect"),
    [
        (
            0,
            True,
            {
                "weights": 2 * PARAMS_STAGE0,
                "gradients": 2 * PARAMS_STAGE0,
                "optimizer": 12 * PARAMS_STAGE0,
                "activations": CHECKPOINTS + LAYER_WORKING_SET,
            },
        ),
        (
            1,
            True,
            {
                "weights": 2 * PARAMS_STAGE0,
                "gradients": 2 * PARAMS_STAGE0,
                "optimizer": 3 * PARAMS_STAGE0,  # 12 bytes / d = 4
                "activations": CHECKPOINTS + LAYER_WORKING_SET,
            },
        ),
        (
            0,
            False,
            {
                "weights": 2 * PARAMS_STAGE0,
                "gradients": 2 * PARAMS_STAGE0,
                "optimizer": 12 * PARAMS_STAGE0,
                "activations": 4 * 14 * LAYER_WORKING_SET,
            },
        ),
    ],
)
def test_memory_breakdown_matches_hand_computed_numbers(
    zero: int, recompute: bool, expect: dict[str, int]
) -> None:
    got = stage_memory_breakdown(_gpt3b(zero, recompute), 0)
    for part, value in expect.items():
        assert got[part] == pytest.approx(value, rel=1e-9), part
    assert got["total"] == pytest.approx(sum(expect.values()), rel=1e-9)


# ------------------------------------------------------------------------ μ curve


def test_mu_curve_saturates_and_fits_back() -> None:
    truth = MuCurve(mu_max=0.4, x_half=2e9, source="given")
    xs = [layer_forward_flops(b, 1024, 2000, t) for b in (1, 4, 32) for t in (1, 8)]
    fitted = fit_mu_curve([(x, truth.mu_at(x)) for x in xs], "points")
    assert fitted.mu_max == pytest.approx(0.4, rel=1e-9)
    assert fitted.x_half == pytest.approx(2e9, rel=1e-9)
    assert truth.mu(1, 1024, 2000, 8) < truth.mu(32, 1024, 2000, 1) < 0.4
    level = fit_mu_level(truth, xs[0], 0.2, "run r")
    assert level.mu_at(xs[0]) == pytest.approx(0.2)
    assert level.x_half == truth.x_half and level.x_half_source == "given"
    with pytest.raises(ValueError, match="distinct"):
        fit_mu_curve([(xs[0], 0.3)], "one point")


# ------------------------------------------------------------------------ search


def _paper_advice(**kw: object) -> Advice:
    return advise(
        PAPER.model,
        32,
        PAPER.platform,
        template=PAPER.parallel,
        mu_curve=default_mu_curve(PAPER.platform.peak_flops),
        **kw,  # type: ignore[arg-type]
    )


def test_infeasible_layouts_are_excluded_and_counted() -> None:
    advice = _paper_advice()
    limit = PAPER.platform.gpu_memory_bytes
    assert limit == 24 * GIB
    assert advice.rejected["does not fit in GPU memory"] > 0
    assert advice.memory_pruned_unchecked > 0
    assert all(c.memory_bytes <= limit for c in advice.candidates)
    unfiltered = _paper_advice(require_fit=False)
    too_big = {c.layout for c in unfiltered.candidates if c.memory_bytes > limit}
    assert too_big and not too_big & {c.layout for c in advice.candidates}
    assert advice.valid + sum(advice.rejected.values()) == advice.search_space_size


def test_ties_collapsed_each_layout_once() -> None:
    advice = _paper_advice()
    layouts = [c.layout for c in advice.candidates]
    assert len(layouts) == len(set(layouts))
    assert all(c.mappings == ("default", "customized") for c in advice.candidates)
    assert advice.pruned["tied mapping"] == len(advice.candidates)


def test_branch_and_bound_keeps_the_exhaustive_top() -> None:
    full = _paper_advice()
    pruned = _paper_advice(keep=5)
    assert pruned.evaluated < full.evaluated < full.valid
    assert pruned.pruned["lower bound above the k-th best"] > 0
    top = [(c.layout, c.t_iter) for c in full.candidates[:5]]
    assert [(c.layout, c.t_iter) for c in pruned.candidates[:5]] == top


def test_every_constant_has_a_source() -> None:
    advice = _paper_advice()
    names = {c.name for c in advice.constants}
    assert {"peak_flops", "mu_max", "x_half", "c_tp", "c_pp", "c_dp", "gpu_memory_bytes"} <= names
    assert all(c.source for c in advice.constants)
    by = {c.name: c.source for c in advice.constants}
    assert by["mu_max"].startswith("default curve") and by["c_tp"] == "config"


def test_top5_order_agrees_with_the_simulator() -> None:
    """GPT-3B on 32 GPUs with the default calibration: the advised top 5 in the order of the
    generator's simulated T_iter (its own compute and link models); the paper's layout is
    slower than all of them there too."""
    advice = _paper_advice(keep=5)
    top = advice.candidates[:5]
    simulated = [simulated_t_iter(layout_run(PAPER, c.pp, c.tp, c.dp, c.micro_batch)) for c in top]
    assert simulated == sorted(simulated), list(
        zip([c.layout for c in top], simulated, strict=True)
    )
    for c, sim in zip(top, simulated, strict=True):
        assert c.t_iter == pytest.approx(sim, rel=0.03)
    baseline = simulated_t_iter(layout_run(PAPER, 4, 2, 4, 32))
    assert baseline > simulated[-1]


# ------------------------------------------------------------------------ from a run


@pytest.fixture(scope="module")
def gpt_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The generated GPT-3B 4x2x4 run (3 iterations, NCCL + DeepSpeed logs), derived."""
    from tests.sql.generated_runs import make_run

    run = make_run(
        tmp_path_factory.mktemp("i22"),
        "synthetic_gpt3b_4x2x4.toml",
        "gpt",
        formats=("nccl", "deepspeed"),
    )
    return run.store.root, run.run_id


@pytest.mark.slow
def test_advise_run_predicts_its_own_t_iter(
    gpt_run: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    from commscope.pipeline.store import Store

    root, run_id = gpt_run
    cal = calibrate_from_store(Store.open(root, create=False), run_id)
    assert cal.measured_t_iter and abs(cal.rel_error or 1) < 0.05
    assert cal.mu_measured == pytest.approx(0.3, rel=0.02)  # the generator's mu
    assert {row["traffic_class"]: row["link"] for row in cal.links} == {
        "TP": "intra",
        "PP": "inter",
        "DP": "intra",
    }
    argv = ["advise", "--store", str(root), "--run", run_id, "--gpu-memory-gib", "24", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["baseline"]["pp"] == 4 and data["baseline"]["micro_batch"] == 32
    measured = data["baseline_measured_t_iter"]
    assert abs(data["baseline"]["t_iter"] - measured) / measured < 0.05
    assert data["baseline_rank"] > 1 and data["expected_gain"] > 1
    sources = {c["name"]: c["source"] for c in data["constants"]}
    assert sources["c_tp"].startswith(f"measured run {run_id}")
    assert sources["mu_max"].startswith(f"measured run {run_id}")
    assert sources["gpu_memory_bytes"] == "--gpu-memory-gib"
    assert read_advice(Store.open(root, create=False), run_id)["run_id"] == run_id
    # the report's section reads the stored advice (no model run inside reports/)
    from commscope.reports import advice as ra
    from commscope.reports import data as rd

    stored = read_advice(Store.open(root, create=False), run_id)
    blocks = ra.section(rd.RunData(run_id, None, {}, advice=stored))
    assert [b.kind for b in blocks] == ["text", "text", "table", "text", "table"]
    ranking = blocks[2].frame
    assert ranking is not None and ranking["rank"][-1] == f"run ({data['baseline_rank']})"
    assert "expected gain" in blocks[0].text
    assert ra.section(rd.RunData(run_id, None, {})) == []
    assert main(["calibrate", "--store", str(root), run_id, "--json"]) == 0
    cal_json = json.loads(capsys.readouterr().out)
    assert abs(cal_json["rel_error"]) < 0.05


# ------------------------------------------------------------------------ simulator


def test_simulator_compute_overhead_is_charged_per_kernel_step() -> None:
    """p = t = d = 1, recompute, 4 layers, m = 4: per micro-batch the forward runs
    embedding + 4 x (attention, MLP) + logits = 10 kernel steps and the backward runs
    logits + 4 x (attention, MLP recomputed, MLP, attention backward) + embedding = 18; so
    the overhead adds 4 x 28 = 112 steps to an iteration (no pipeline, no bubble)."""
    model = ModelConfig(
        layers=4, hidden=256, seq=128, vocab=1000, global_batch=8, micro_batch=2, heads=4
    )
    run = RunConfig(model=model, parallel=ParallelConfig(pp=1, tp=1, dp=1))
    plain = simulated_t_iter(run, compute_overhead_us=0.0)
    charged = simulated_t_iter(run, compute_overhead_us=100.0)
    assert charged - plain == pytest.approx(112 * 100e-6, abs=1e-8)


def test_ties_on_a_mapping_aware_platform_are_exact() -> None:
    """Every mapping predicted on its own (the oracle): the rows of one layout are the
    distinct predictions, and each row's mappings are exactly those giving its T_iter."""
    from dataclasses import replace

    from commscope.model.advise import mapping_orders
    from commscope.model.predict import critical_stage

    aware = replace(PAPER.platform, c_intra=20e9, c_inter=2e9)
    advice = advise(
        PAPER.model, 32, aware, template=PAPER.parallel, micro_batch_options=[8], mappings=["all"]
    )
    orders = mapping_orders(["all"])
    assert advice.pruned["tied mapping"] > 0
    for layout in {c.layout for c in advice.candidates}:
        rows = [c for c in advice.candidates if c.layout == layout]
        p, t, d, b = layout
        run = replace(layout_run(PAPER, p, t, d, b), platform=aware)
        oracle: dict[str, float] = {
            name: critical_stage(replace(run, mapping=order)).t_iter
            for name, order in orders.items()
        }
        assert sorted(n for c in rows for n in c.mappings) == sorted(oracle)
        for c in rows:
            assert {round(oracle[n], 9) for n in c.mappings} == {round(c.t_iter, 9)}
        assert len({round(c.t_iter, 9) for c in rows}) == len(rows)


def test_advise_simulate_prints_the_simulators_order(capsys: pytest.CaptureFixture[str]) -> None:
    config = str(ROOT / "configs" / "gpt3b_paper.toml")
    argv = ["advise", "--config", config, "--gpus", "32", "--top", "5", "--simulate", "5"]
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    keys = [
        ",".join(map(str, (c["pp"], c["tp"], c["dp"], c["micro_batch"])))
        for c in data["candidates"]
    ]
    simulated = [data["simulated_t_iter"][k] for k in keys]
    assert len(simulated) == 5 and simulated == sorted(simulated)
    assert main(argv) == 0
    assert "simulated by the generator" in capsys.readouterr().out


TINY = """
[model]
name = "tiny"
layers = 8
hidden = 512
seq = 256
vocab = 1000
global_batch = 64
micro_batch = {b}

[parallel]
pp = 2
tp = 2
dp = 2

[platform]
peak_flops = 2e12
mu = 0.3
gpus_per_node = 4

[generate]
iterations = 3
seed = 3
formats = ["nccl", "deepspeed"]
compute_overhead_us = 200.0
"""


@pytest.mark.slow
def test_two_runs_fit_the_mu_curve_shape(tmp_path: Path) -> None:
    """Two generated runs at b = 2 and b = 8 whose simulator charges 200 us per compute
    kernel step: the fit finds the simulator's mu (0.3) and an x_half near the one that fixed
    cost gives. Per layer and micro-batch the simulator runs 6 kernel steps (2 forward, 2
    recomputed, 2 backward) where the curve charges 4 x_half / (mu_max F), so x_half is about
    1.5 * 200 us * mu * F = 1.8e8 FLOPs; rank 0's stage also runs two embedding steps per
    micro-batch over its 4 layers (6.5 steps per layer: 1.95e8), and jitter adds a little."""
    from commscope.pipeline.run_config import load_generate_config
    from commscope.synthetic.generator import generate
    from tests.sql.generated_runs import ingest_and_derive

    store = tmp_path / "store"
    for b in (2, 8):
        cfg = tmp_path / f"tiny{b}.toml"
        cfg.write_text(TINY.format(b=b))
        run, opts = load_generate_config(cfg)
        generate(run, opts, tmp_path / f"gen{b}")
        ingest_and_derive(tmp_path / f"gen{b}", store, f"b{b}")
    from commscope.pipeline.store import Store

    cal = calibrate_from_store(Store.open(store, create=False), "b2", mu_runs=["b8"])
    assert cal.mu_curve.source.startswith("measured runs b2, b8")
    assert cal.mu_curve.mu_max == pytest.approx(0.3, rel=0.05)
    assert 1.8e8 <= cal.mu_curve.x_half <= 1.6 * 1.8e8
    assert [p["run_id"] for p in cal.mu_points] == ["b2", "b8"]
