"""The model's per-stage bubble against a generated run's truth.json (issue 17 item 4).

truth.json comes from the simulation, not from the model or the marts. Per stage and
steady-state iteration (neither the first nor the last), the bubble as the issue defines it is
T_iter minus the stage's busy time: T_comp + T_TP + T_PP + T_DP + T_EP + the EmbTableSyn
*transfer* (bus bytes / the generator's transfer busbw). This holds whether truth.json books the
last stage's end-of-iteration EmbTableSyn wait as EmbTableSyn (before issue 17) or as bubble.
TP/DP calls stay whole calls (their sync wait included, as the paper's logger measures), a wait
the model has no term for, so the model's bubble sits just above truth: measured 3.5-5.0 %
above on this run; the bound below is 6 %. Taking eq. 5 per stage or rank 0's bubble for every
stage instead misses stage 0 or stage 3 by 1-22 % below, and fails.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import polars as pl
import pytest

from commscope.model import config_from_dict, pipeline_stage_times
from commscope.pipeline.cli import main as cli_main

pytestmark = pytest.mark.slow  # generates a 32-rank run

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "synthetic_gpt3b_4x2x4.toml"


def test_per_stage_bubble_matches_truth(tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["generate", "--config", str(CONFIG), "--out", str(out), "--iterations", "4"]
    assert cli_main([*argv, "--formats", "deepspeed"]) == 0
    truth = json.loads((out / "truth.json").read_text())
    pri = truth["per_rank_iteration"]
    df = pl.DataFrame(pri["rows"], schema=pri["columns"], orient="row")
    bw = pl.DataFrame(truth["busbw"]["rows"], schema=truth["busbw"]["columns"], orient="row")
    emb = bw.filter(pl.col("cls") == "EmbTableSyn")
    # transfer time of one EmbTableSyn call, ns: bus bytes / (Gbit/s -> bytes/ns)
    emb_xfer_ns = float((emb["bus_bytes_per_call"] / (emb["busbw_transfer_gbps"] / 8)).mean())
    busy = (
        pl.col("T_comp") + pl.col("T_TP") + pl.col("T_PP") + pl.col("T_DP") + pl.col("T_EP")
    ) + pl.when(pl.col("T_EmbTableSyn") > 0).then(emb_xfer_ns).otherwise(0.0)
    steady = df.filter((pl.col("iteration") > 0) & (pl.col("iteration") < 3))
    per = (
        steady.with_columns(bubble=(pl.col("T_iter") - busy) / 1e9, t_iter=pl.col("T_iter") / 1e9)
        .group_by("stage")
        .agg(pl.col("bubble", "t_iter").mean())
        .sort("stage")
    )
    cfg = tomllib.loads(CONFIG.read_text())
    cfg.pop("generate", None)
    model = pipeline_stage_times(config_from_dict(cfg))
    assert per["stage"].to_list() == [st.stage for st in model] == [0, 1, 2, 3]
    for st, row in zip(model, per.iter_rows(named=True), strict=True):
        ratio = st.t_bubble / row["bubble"]
        assert 1.0 <= ratio <= 1.06, (st.stage, st.t_bubble, row["bubble"])
        assert st.t_iter == pytest.approx(row["t_iter"], rel=0.01)
