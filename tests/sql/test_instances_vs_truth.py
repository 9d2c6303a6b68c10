"""Cross-rank instances and clock offsets of generated runs against the generator's truth (issue 18).

Three small generated runs, ingested and derived as a user would:

* tiny GPT (p, t, d) = (4, 2, 4), 32 ranks on 4 nodes, 2 iterations, Kineto only, a straggler, a
  slow node and clock skew between nodes: one stage per node, so the nodes share only p2p
  transfers and the stage-0/stage-3 EmbTableSyn (offsets found through p2p ends, two hops);
* the fault-injection GPT-3B config (customised mapping: DP groups across nodes; rank 30's files
  missing), 2 iterations, Kineto only: offsets from collective ends, instances on rank 30's
  groups flagged missing_ranks with exactly rank 30;
* the tiny GPT again with NCCL debug logs only (untimed): every instance matched by opCount.

Truth: gen/truth/instances.parquet (true clock) and truth.json["clock_offsets"] (file clock =
true + offset). The files carry the file clock; the marts align them with the estimated offsets,
so skew, transfer, wait and the last rank compare directly, arrivals up to one constant.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from generated_runs import GeneratedRun, generate_run, ingest_and_derive

from commscope.model.config import config_from_dict
from commscope.synthetic import GenerateOptions, Scenario, generate
from commscope.synthetic.presets import tiny_config

pytestmark = pytest.mark.slow

REL = 0.01
BOUND_NS = 5_000


def _tiny(tmp: Path, formats: tuple[str, ...]) -> GeneratedRun:
    opts = GenerateOptions(
        iterations=2,
        seed=3,
        formats=formats,
        scenario=Scenario(straggler_rank=5, slow_node=2, clock_skew_us=500.0),
    )
    generate(config_from_dict(tiny_config()), opts, tmp / "gen")
    return ingest_and_derive(tmp / "gen", tmp / "store", "tiny")


@pytest.fixture(scope="module")
def tiny_kineto(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    return _tiny(tmp_path_factory.mktemp("inst_kineto"), ("kineto",))


@pytest.fixture(scope="module")
def tiny_nccl(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    return _tiny(tmp_path_factory.mktemp("inst_nccl"), ("nccl",))


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    tmp = tmp_path_factory.mktemp("inst_faults")
    gen = generate_run(tmp, "synthetic_gpt3b_faults.toml", iterations=2, formats=("kineto",))
    return ingest_and_derive(gen, tmp / "store", "faults")


def _truth_offsets(d: GeneratedRun) -> dict[int, int]:
    return dict(enumerate(d.truth["clock_offsets"]["per_rank_ns"]))


def _joined(d: GeneratedRun, absent: frozenset[int] = frozenset()) -> pl.DataFrame:
    """Truth instances beside the mart's, keyed by the ranks seen (truth: its members without
    the ``absent`` ranks, whose files were not written; mart: int_instance_calls' ranks): a
    collective by its position in the iteration, p2p transfers of a pair by their order of end
    in the iteration (the truth names the pair, not the direction)."""
    truth = pl.read_parquet(d.gen / "truth" / "instances.parquet").with_columns(
        pl.col("members")
        .list.filter(~pl.element().is_in(list(absent)))
        .list.sort()
        .cast(pl.List(pl.Int64))
        .alias("seen"),
        (pl.col("op") == "send/recv").alias("p2p"),
        pl.col("iteration").cast(pl.Int32),
    )
    seen = d.query(
        "SELECT instance_key, list(DISTINCT rank::BIGINT) AS seen FROM int_instance_calls"
        " WHERE run_id = ? GROUP BY instance_key"
    ).with_columns(pl.col("seen").list.sort())
    got = (
        d.mart("collective_instances")
        .join(seen, on="instance_key")
        .with_columns(
            (pl.col("op") == "send/recv").alias("p2p"), pl.col("iteration").cast(pl.Int32)
        )
    )
    keys = ["seen", "iteration", "p2p"]
    got = got.with_columns(
        pl.when(pl.col("p2p") & pl.col("finish_ns").is_not_null())
        .then(pl.col("finish_ns").rank("ordinal").over(keys))
        .otherwise(pl.col("instance_seq").rank("ordinal").over(keys))
        .cast(pl.Int64)
        .sub(1)
        .alias("pos")
    )
    truth = truth.with_columns(
        pl.when(pl.col("p2p"))
        .then(pl.col("end_ns").rank("ordinal").over(keys).sub(1))
        .otherwise(pl.col("seq"))
        .cast(pl.Int64)
        .alias("pos")
    )
    return truth.join(got, on=[*keys, "pos"], how="full", suffix="_m")


def _check_offsets(d: GeneratedRun, ranks_with_files: set[int]) -> pl.DataFrame:
    got = d.query("SELECT * FROM int_clock_offsets WHERE run_id = ? ORDER BY rank")
    want = _truth_offsets(d)
    assert set(got["rank"]) == ranks_with_files
    for r in got.iter_rows(named=True):
        assert r["scope"] in ("reference", "host"), r
        assert r["error_bound_ns"] is not None and r["error_bound_ns"] < BOUND_NS, r
        err = abs(r["offset_ns"] - want[r["rank"]])
        assert err <= r["error_bound_ns"], (r, want[r["rank"]])
    return got


def _check_instances(j: pl.DataFrame) -> None:
    both = j.filter(pl.col("instance_key").is_not_null() & pl.col("seq").is_not_null())
    assert both.height == j.height, j.filter(
        pl.col("instance_key").is_null() | pl.col("seq").is_null()
    ).head()
    done = both.filter(pl.col("status") == "complete")
    assert done.height > 0
    assert done["last_rank_m"].to_list() == done["last_rank"].to_list()
    for col in ("skew_ns", "transfer_ns", "wait_ns"):
        tol = pl.max_horizontal(pl.col(col) * REL, pl.col("offset_bound_ns"))
        bad = done.filter((pl.col(f"{col}_m") - pl.col(col)).abs() > tol)
        assert bad.height == 0, bad.select("gkey", "iteration", "pos", col, f"{col}_m").head()
    assert (done["msg_bytes_m"] == done["msg_bytes"]).all()


def test_tiny_offsets_within_bound_through_p2p_hops(tiny_kineto: GeneratedRun) -> None:
    got = _check_offsets(tiny_kineto, set(range(32)))
    # nodes 1 and 2 share no collective with node 0: p2p ends, node 2 two hops away
    assert got.filter(pl.col("rank") == 16)["method"].item() == "p2p ends, 2 hops"
    assert tiny_kineto.mart("clock_offsets").height == 4


def test_tiny_every_truth_instance_found_last_rank_skew_transfer(tiny_kineto: GeneratedRun) -> None:
    j = _joined(tiny_kineto)
    _check_instances(j)
    assert (j["status"] == "complete").all()
    assert (j["ranks_seen"] == j["n_ranks"]).all()


def test_faults_offsets_from_collectives_and_missing_rank_flagged(faults: GeneratedRun) -> None:
    got = _check_offsets(faults, set(range(32)) - {30})
    assert got.filter(pl.col("scope") == "host")["method"].str.starts_with("collective").all()
    j = _joined(faults, frozenset({30}))
    _check_instances(j)
    with_30 = j.filter(pl.col("members").list.contains(30))
    assert with_30.height > 0
    assert (with_30["status"] == "missing_ranks").all()
    assert (with_30["ranks_seen"] == with_30["n_ranks"] - 1).all()
    # the groups' members come from the ranks that logged on them, so without rank 30's trace
    # they are 'pg:<name>/<n>': the missing rank is counted, not named (case tests name it)
    assert with_30["global_group"].str.starts_with("pg:").all()
    assert with_30["missing_ranks"].is_null().all()
    assert (j.filter(~pl.col("members").list.contains(30))["status"] == "complete").all()


def test_nccl_logs_match_by_opcount_without_gaps(tiny_nccl: GeneratedRun) -> None:
    got = tiny_nccl.mart("collective_instances")
    truth = pl.read_parquet(tiny_nccl.gen / "truth" / "instances.parquet")
    assert got.height == truth.height
    assert (got["status"] == "complete").all()
    assert got["missing_ranks"].is_null().all()
    assert (got.filter(pl.col("op") != "send/recv")["match_method"] == "seq").all()
    assert got["first_arrival_ns"].is_null().all()
    # per group, the sequence of (op, size) is the truth's in (iteration, seq) order
    want = (
        truth.filter(pl.col("op") != "send/recv")
        .with_columns(pl.col("members").list.sort().cast(pl.List(pl.Utf8)).list.join(","))
        .sort("iteration", "seq")
        .group_by("members", maintain_order=True)
        .agg("op", "msg_bytes")
        .sort("members")
    )
    mine = (
        got.filter(pl.col("op") != "send/recv")
        .sort("instance_seq")
        .group_by("global_group", maintain_order=True)
        .agg("op", "msg_bytes")
        .rename({"global_group": "members"})
        .sort("members")
    )
    assert mine.to_dicts() == want.to_dicts()
    # p2p: per unordered pair, as many transfers as the truth
    pairs = got.filter(pl.col("op") == "send/recv")["instance_key"].str.extract_groups(
        r"^p2p:(\d+)->(\d+)\|"
    )
    assert pairs.struct[0].is_not_null().all()
    assert len(pairs) == truth.filter(pl.col("op") == "send/recv").height
