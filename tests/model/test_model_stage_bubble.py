"""Per-stage bubble (issue 17 item 4): eqs. 5-7 generalised per stage, against hand-computed values.

The toy run below is small enough to compute every term by hand from the model's stated rules
(model/predict.py docstring): l = 2, h = 4, s = 2, V = 100 (padded to 128), b = 1,
gb = 2, so m = 2; (p, t, d) = (2, 1, 1); F·μ = 1000 FLOP/s; C_PP = 16 B/s; C_DP = 1024 B/s.

- FLOPs per layer and micro-batch, forward: 24bsh² + 4bs²h = 768 + 64 = 832; with recompute
  ×4 = 3328. The last stage adds the logits 6·b·s·V_pad·h = 6·1·2·128·4 = 6144.
  T_comp: stage 0 = 2·3328/1000 = 6.656 s; stage 1 = 2·(3328 + 6144)/1000 = 18.944 s.
- PP: one send + one receive of A = δbsh = 16 B per micro-batch on both stages:
  T_PP = 2·2·16/16 = 4 s.
- EmbTableSyn: δ·V_pad·h/t = 1024 B on a 2-rank ring (bus factor 1): 1024/1024 = 1 s.
- Own eq. 6: stage 0 = 10.656·(1 + 1/2) + 1 = 16.984 s; stage 1 = 22.944·1.5 + 1 = 35.416 s:
  stage 1 is critical, T_iter = 35.416 s for both stages.
- Bubble: stage 1 = (p-1)·22.944/m = 11.472 s (eq. 5); stage 0 = 35.416 - 10.656 - 1 = 23.76 s.
"""

from __future__ import annotations

import polars as pl
import pytest

from commscope.model import config_from_dict, pipeline_stage_times, predict_run, stage_time_rows
from commscope.model.equations import stage_bubble
from commscope.pipeline.derive import PREDICTION_COLUMNS, predictions
from commscope.pipeline.run_config import StoredConfig

TOY = {
    "model": {
        "layers": 2,
        "hidden": 4,
        "seq": 2,
        "vocab": 100,
        "global_batch": 2,
        "micro_batch": 1,
        "heads": 1,
    },
    "parallel": {"pp": 2, "tp": 1, "dp": 1},
    "platform": {"peak_flops": 1000.0, "mu": 1.0, "c_tp": 1e9, "c_pp": 16.0, "c_dp": 1024.0},
}

HAND = {  # stage -> term -> seconds (module docstring)
    0: {"t_comp": 6.656, "t_pp": 4.0, "t_emb": 1.0, "t_bubble": 23.76, "t_iter": 35.416},
    1: {"t_comp": 18.944, "t_pp": 4.0, "t_emb": 1.0, "t_bubble": 11.472, "t_iter": 35.416},
}


def test_stage_bubble_formula() -> None:
    # T_iter - m(comp + pp + tp + ep) - dp - emb = 100 - 4·(10+2+3+1) - 7 - 5
    assert stage_bubble(100.0, 4, 10.0, 2.0, 3.0, 7.0, 5.0, 1.0) == pytest.approx(24.0)


def test_toy_run_per_stage_terms_match_hand_computation() -> None:
    run = config_from_dict(TOY)
    stages = pipeline_stage_times(run)
    assert [st.stage for st in stages] == [0, 1]
    for st in stages:
        for term, value in HAND[st.stage].items():
            assert getattr(st, term) == pytest.approx(value, rel=1e-12), (st.stage, term)
        assert st.t_tp == st.t_dp == st.t_ep == 0.0


def test_every_stage_lives_the_same_iteration() -> None:
    run = config_from_dict(TOY)
    for st in pipeline_stage_times(run):
        assert st.t_comp + st.t_comm + st.t_bubble == pytest.approx(st.t_iter, rel=1e-12)


def test_rows_and_r_bubble_per_stage() -> None:
    rows = pl.DataFrame(stage_time_rows(config_from_dict(TOY)))
    assert set(rows["term"]) == {
        "t_iter",
        "t_comp",
        "t_tp",
        "t_pp",
        "t_dp",
        "t_emb",
        "t_ep",
        "t_bubble",
        "r_bubble",
    }
    r = {s: v for s, v in rows.filter(pl.col("term") == "r_bubble").select("stage", "value").rows()}
    assert r[0] == pytest.approx(23.76 / 35.416, rel=1e-12)
    assert r[1] == pytest.approx(11.472 / 35.416, rel=1e-12)


def test_predict_run_lists_every_stage() -> None:
    result = predict_run(config_from_dict(TOY))
    assert [s["stage"] for s in result["stages"]] == [0, 1]
    assert result["stages"][0]["t_bubble"] == pytest.approx(23.76, rel=1e-12)
    assert result["stages"][1]["r_bubble"] == pytest.approx(11.472 / 35.416, rel=1e-12)


def test_predicted_stage_times_relation_registered() -> None:
    assert PREDICTION_COLUMNS["predicted_stage_times"] == {
        "run_id": pl.Utf8(),
        "stage": pl.Int32(),
        "term": pl.Utf8(),
        "value": pl.Float64(),
    }
    out = predictions(StoredConfig("toy", TOY, "test"), "toy")["predicted_stage_times"]
    assert out.columns == ["run_id", "stage", "term", "value"]
    got = {
        (s, t): v
        for s, t, v in out.select("stage", "term", "value").rows()
        if t in ("t_bubble", "t_iter")
    }
    assert got == pytest.approx(
        {
            (0, "t_bubble"): 23.76,
            (1, "t_bubble"): 11.472,
            (0, "t_iter"): 35.416,
            (1, "t_iter"): 35.416,
        }
    )
    assert set(out["run_id"]) == {"toy"}


def test_predict_cli_prints_the_per_stage_bubble(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from commscope.pipeline.commands import predict as predict_cmd

    p = argparse.ArgumentParser(prog="commscope")
    predict_cmd.register(p.add_subparsers(dest="command", required=True))
    flags = ["--layers", "2", "--hidden", "4", "--seq", "2", "--vocab", "100"]
    flags += ["--global-batch", "2", "--micro-batch", "1", "--heads", "1"]
    flags += ["--pp", "2", "--tp", "1", "--dp", "1", "--peak-flops", "1000", "--mu", "1"]
    flags += ["--c-tp", "1e9", "--c-pp", "16", "--c-dp", "1024"]
    args = p.parse_args(["predict", *flags])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "one common iteration T_iter 35.416 s" in out
    table = out.split("(eqs. 5-7 per stage):")[1].splitlines()[2:4]
    rows = {line.split()[0]: line.split() for line in table}
    assert rows["0"][-2:] == ["23.760", f"{23.76 / 35.416:.4f}"]
    assert rows["1"][-2:] == ["11.472", f"{11.472 / 35.416:.4f}"]


def test_report_breakdown_shows_every_stage_predicted() -> None:
    from commscope.reports import data as rd

    bd = pl.DataFrame({"stage": [0, 1], "t_comp_ns": [6e9, 19e9], "t_bubble_ns": [24e9, 11e9]})
    preds = predictions(StoredConfig("toy", TOY, "test"), "toy")
    d = rd.RunData("toy", None, {}, marts={"iteration_breakdown": bd})
    d.predicted_stage_times = preds["predicted_stage_times"]
    out = rd.breakdown(d).filter(pl.col("source") == "predicted")
    bubble = {b: v for b, c, v in out.select("bar", "component", "seconds").rows() if c == "bubble"}
    assert bubble == pytest.approx({"stage 0 predicted": 23.76, "stage 1 predicted": 11.472})
