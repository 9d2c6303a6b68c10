"""iteration_breakdown and bubble_ratio against the synthetic generator's truth.json.

A 32-rank GPT-3B (p, t, d) = (4, 2, 4) run of 2 iterations is generated as Kineto traces,
ingested and its marts computed. The generator's per-rank, per-iteration truth (truth.py:
whole collective calls for TP/DP/EmbTableSyn/EP, active transfer for PP, the waiting part of
send/recv as bubble) must be found exactly, except where the trace itself moves a boundary:
``ProfilerStep#k`` starts ``STEP_LEAD_NS`` before the rank's iteration (write_kineto.py), so the
marker window shifts compute by at most that much between adjacent iterations (and the first
window begins with that much idle time). The run has no clock skew, so send/recv pairs align.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from commscope.pipeline import run_config as rc
from commscope.pipeline.derive import predictions, run_config_frame
from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.sql_modules import with_dependencies
from commscope.pipeline.store import Store
from commscope.synthetic.write_kineto import STEP_LEAD_NS
from tests.sql.conftest import create_materialised

RUN = "syn"
CONFIG = "configs/synthetic_gpt3b_4x2x4.toml"
EXACT = {
    "T_TP": "t_tp_ns",
    "T_PP": "t_pp_ns",
    "T_DP": "t_dp_ns",
    "T_EmbTableSyn": "t_emb_ns",
    "T_EP": "t_ep_ns",
    "T_bubble": "t_bubble_ns",
    "T_iter": "t_iter_ns",
}


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory: pytest.TempPathFactory, project_root: Path) -> dict[str, Any]:
    """Generate, ingest and connect: the marts over the run and its truth.json."""
    base = tmp_path_factory.mktemp("syn_breakdown")
    out = base / "gen"
    cmd = [sys.executable, "-m", "commscope", "generate", "--config", CONFIG, "--out", str(out)]
    cmd += ["--iterations", "2", "--formats", "kineto", "--jobs", "1"]
    proc = subprocess.run(cmd, cwd=project_root, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    store = Store.open(base / "store")
    ingest_paths(store, [out / "kineto", out / "manifest.json"], run_id=RUN)
    stored = rc.load(store, RUN)
    con = duckdb.connect()
    store.create_views(con)
    con.register("_rc", run_config_frame(stored, RUN).to_arrow())
    con.execute("CREATE TABLE run_config AS SELECT * FROM _rc")
    for name, df in predictions(stored, RUN).items():
        con.register(f"_{name}", df.to_arrow())
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}")
    create_materialised(con, with_dependencies(("iteration_breakdown", "bubble_ratio")))
    truth = json.loads((out / "truth.json").read_text())
    table = truth["per_rank_iteration"]
    return {
        "truth": pl.DataFrame(table["rows"], schema=table["columns"], orient="row"),
        "breakdown": con.sql(f"SELECT * FROM iteration_breakdown WHERE run_id = '{RUN}'").pl(),
        "bubble": con.sql(f"SELECT * FROM bubble_ratio WHERE run_id = '{RUN}'").pl(),
        "world": truth["world_size"],
        "iterations": truth["iterations"],
    }


@pytest.mark.slow
def test_every_rank_and_iteration_is_measured(synthetic: dict[str, Any]) -> None:
    got = synthetic["breakdown"]
    assert got.height == synthetic["world"] * synthetic["iterations"] == synthetic["truth"].height
    assert set(got["source"].unique()) == {"kineto"}
    assert set(got["comp_source"].unique()) == {"kernels"}
    assert set(got["pp_split"].unique()) == {"paired"}


@pytest.mark.slow
def test_breakdown_terms_equal_truth(synthetic: dict[str, Any]) -> None:
    j = synthetic["truth"].join(
        synthetic["breakdown"], on=["rank", "iteration"], how="left", suffix="_m"
    )
    assert j["t_iter_ns"].null_count() == 0
    assert (j["stage"] == j["stage_m"]).all()
    for term, col in EXACT.items():
        diff = (j[col] - j[term]).abs().max()
        assert diff is not None and diff <= 1, f"{term}: max |measured - truth| = {diff} ns"
    comp = (j["t_comp_ns"] - j["T_comp"]).abs().max()
    assert comp is not None and comp <= STEP_LEAD_NS, f"T_comp off by {comp} ns"
    # the timeline tiles the iteration: no overlap, idle only from the marker's lead
    assert j["overlap_ns"].max() == 0
    assert j["t_idle_ns"].max() <= STEP_LEAD_NS
    assert j["t_other_comm_ns"].max() == 0
    r_bubble = (j["r_bubble"] - j["R_bubble"]).abs().max()
    assert r_bubble is not None and r_bubble < 1e-9


@pytest.mark.slow
def test_bubble_ratio_per_stage_equals_truth(synthetic: dict[str, Any]) -> None:
    truth = (
        synthetic["truth"]
        .group_by("stage", "iteration")
        .agg(
            pl.len().alias("ranks_t"),
            (pl.col("T_bubble").sum() / pl.col("T_iter").sum()).alias("ratio_t"),
        )
    )
    got = synthetic["bubble"].join(truth, on=["stage", "iteration"], how="full", coalesce=True)
    assert got.height == truth.height
    assert (got["ranks"] == got["ranks_t"]).all()
    assert ((got["bubble_ratio"] - got["ratio_t"]).abs() < 1e-9).all()
    assert got["bubble_ratio"].is_between(0, 1).all()
    p, m = 4, 8  # the config's pp and micro_batches: eq. 7
    assert ((got["predicted_bubble_ratio"] - (p - 1) / (p - 1 + m)).abs() < 1e-12).all()
