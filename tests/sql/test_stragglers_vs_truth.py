"""rank_waits, stragglers and the instance-based C values against the generator's truth.

Generated runs (GPT-3B (p, t, d) = (4, 2, 4), 32 ranks on 4 nodes of 8, one pipeline stage per
node), ingested and derived as a user would:

* ``kineto``: Kineto traces only, 2 iterations; rank 5 computes 1.5x slower (a straggler), node
  2's inter-node links run at 0.25x (a slow link: the pipeline pairs 1-2 and 2-3), and every
  node's clock is off by up to 300 µs;
* ``nsys``: Nsight Systems exports only, 3 iterations; rank 13 computes 1.3x slower, clocks off
  by up to 500 µs, no slow link; NCCL 2.27, whose NVTX payloads name each call's communicator
  (commHash first) and whose CommInitRank payloads give its size and the caller's rank in it,
  so the calls get their groups and the instances match (with NCCL <= 2.24 payloads an nsys
  call has no communicator: classes come from the model's signatures, no instance matches).

Checked (issue 18 acceptance): the top offender of every iteration is truth.json's
``stragglers.per_iteration`` rank, exactly; each rank's wait per iteration and class is within
1 % of truth/rank_waits.parquet, the wait each rank caused within 1 % of
truth/waits_caused.parquet; the slow node's ranks have delay_location 'inside_call' and the
ranks that touch no slow link 'before_call'; the straggler is persistent, nobody else is; the
class C values (int_class_bandwidth) come from the instances' transfer time, within 1 % of the
truth's bus bytes / transfer time. The truth comes from the simulation's events
(synthetic/truth.py), never from the marts.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest
from generated_runs import GeneratedRun, make_run

pytestmark = pytest.mark.slow

REL_TOL = 0.01
"""Issue 18: wait within 1 % of truth."""
ROUNDING_NS = 1
"""Per call: the simulation's transfer start can lag the last arrival by 1 ns (floor rounding)."""
CROSS_STAGE = ("PP", "EmbTableSyn")


@pytest.fixture(scope="module")
def kineto(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    """Kineto only, 2 iterations: straggler rank 5, slow node 2, clock skew 300 µs."""
    return make_run(
        tmp_path_factory.mktemp("strag_kineto"),
        "synthetic_gpt3b_4x2x4.toml",
        "kineto",
        iterations=2,
        formats=("kineto",),
        straggler_rank=5,
        straggler_factor=1.5,
        slow_node=2,
        slow_link_factor=0.25,
        clock_skew_us=300.0,
    )


@pytest.fixture(scope="module")
def nsys(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    """nsys only (NCCL 2.27 payloads), 3 iterations: straggler rank 13, clock skew 500 µs."""
    return make_run(
        tmp_path_factory.mktemp("strag_nsys"),
        "synthetic_gpt3b_4x2x4.toml",
        "nsys",
        iterations=3,
        formats=("nsys",),
        straggler_rank=13,
        straggler_factor=1.3,
        clock_skew_us=500.0,
        nccl_version="2.27.3",
    )


@pytest.fixture(params=["kineto", "nsys"])
def run(request: pytest.FixtureRequest) -> GeneratedRun:
    """Each generated run in turn."""
    d: GeneratedRun = request.getfixturevalue(request.param)
    return d


def _per_iteration(d: GeneratedRun) -> pl.DataFrame:
    table = d.truth["stragglers"]["per_iteration"]
    return pl.DataFrame(table["rows"], schema=table["columns"], orient="row")


def _within(got: pl.Expr, want: pl.Expr, calls: pl.Expr) -> pl.Expr:
    return (got - want).abs() <= REL_TOL * want + ROUNDING_NS * calls


def test_top_offender_is_named_exactly_in_every_iteration(run: GeneratedRun) -> None:
    truth = _per_iteration(run)
    assert truth.height == run.truth["iterations"]
    intended = run.truth["stragglers"]["intended"]["straggler_rank"]
    assert set(truth["rank"]) == {intended}  # the scenario's straggler leads every iteration
    st = run.mart("stragglers").filter(pl.col("iteration").is_not_null())
    top = st.filter(pl.col("rank_order") == 1).select("iteration", "rank")
    got = truth.join(top, on="iteration", how="left", suffix="_m")
    assert got["rank_m"].to_list() == got["rank"].to_list(), got
    # over all classes too (pipeline waits included): truth's rank_all_classes
    top_all = (
        st.sort("wait_caused_all_ns", "rank", descending=[True, False])
        .group_by("iteration", maintain_order=True)
        .first()
    )
    j = truth.join(top_all.select("iteration", pl.col("rank").alias("got")), on="iteration")
    assert j["got"].to_list() == j["rank_all_classes"].to_list()


def test_rank_waits_within_1_percent_of_truth(run: GeneratedRun) -> None:
    want = pl.read_parquet(run.gen / "truth" / "rank_waits.parquet")
    got = run.mart("rank_waits").rename({"traffic_class": "cls"})
    j = want.join(got, on=["iteration", "rank", "cls"], how="full", suffix="_m", coalesce=True)
    assert j.filter(pl.col("wait_ns").is_null() | pl.col("wait_ns_m").is_null()).height == 0, j
    assert (j["calls"] == j["calls_m"]).all()
    bad = j.filter(~_within(pl.col("wait_ns_m"), pl.col("wait_ns"), pl.col("calls")))
    assert bad.height == 0, bad
    # and within the clock alignment: a call's wait is off by at most the two members' offset
    # bounds (raw clocks would be off by the skew, up to hundreds of µs per cross-node call)
    bound = run.query("SELECT max(error_bound_ns) FROM int_clock_offsets WHERE run_id = ?").item()
    assert bound is not None and bound < 5_000  # issue 18: bound under 5 µs
    per_call = (pl.col("wait_ns_m") - pl.col("wait_ns")).abs() / pl.col("calls")
    worst = j.select(per_call.max()).item()
    assert worst <= 2 * bound + ROUNDING_NS, (worst, bound)
    for cls, kind in got.select("cls", "wait_kind").unique().iter_rows():
        assert kind == ("bubble" if cls in CROSS_STAGE else "sync"), (cls, kind)


def test_wait_caused_within_1_percent_of_truth(run: GeneratedRun) -> None:
    caused = pl.read_parquet(run.gen / "truth" / "waits_caused.parquet")
    same = ~pl.col("cls").is_in(CROSS_STAGE)
    want = caused.group_by("iteration", "rank").agg(
        pl.col("wait_caused_ns").filter(same).sum().alias("want"),
        pl.col("wait_caused_ns").sum().alias("want_all"),
        pl.col("instances_last").sum().alias("instances"),
    )
    got = run.mart("stragglers").filter(pl.col("iteration").is_not_null())
    j = want.join(got, on=["iteration", "rank"], how="left")
    # every rank truth charges with wait is a straggler row
    assert j.filter((pl.col("want_all") > 0) & pl.col("wait_caused_ns").is_null()).height == 0
    j = j.filter(pl.col("wait_caused_ns").is_not_null())
    # the instance count bounds the rounding: each caused wait sums at most group-size waits
    slack = 8 * pl.col("instances")
    bad = j.filter(
        ~_within(pl.col("wait_caused_ns"), pl.col("want"), slack)
        | ~_within(pl.col("wait_caused_all_ns"), pl.col("want_all"), slack)
    )
    assert bad.height == 0, bad
    # shares of one iteration add up to 1 (same-stage wait is there in every iteration)
    sums = got.group_by("iteration").agg(pl.col("share").sum())
    assert ((sums["share"] - 1).abs() < 1e-9).all()


def test_persistent_straggler_is_flagged_and_nobody_else(run: GeneratedRun) -> None:
    intended = run.truth["stragglers"]["intended"]["straggler_rank"]
    runs = run.mart("stragglers").filter(pl.col("iteration").is_null())
    assert runs.filter(pl.col("persistent"))["rank"].to_list() == [intended]
    top = runs.filter(pl.col("rank_order") == 1).row(0, named=True)
    assert top["rank"] == intended
    assert top["iterations_top"] == top["iterations_with_waits"] == run.truth["iterations"]
    # a compute straggler: the delay sits before its calls
    strag = run.mart("stragglers").filter(pl.col("rank") == intended)
    assert set(strag["delay_location"]) == {"before_call"}


def test_slow_link_ranks_are_inside_call(kineto: GeneratedRun) -> None:
    intended = kineto.truth["stragglers"]["intended"]
    slow = set(intended["slow_node_ranks"])
    assert slow == set(range(16, 24))
    st = kineto.mart("stragglers")
    mine = st.filter(pl.col("rank").is_in(list(slow)))
    assert mine.height > 0
    assert set(mine["delay_location"]) == {"inside_call"}, mine
    assert (mine["link_excess_ns"] > 0).all()
    # node 0 (ranks 0-7) touches no slow link: its pipeline pairs go to node 1
    clean = st.filter(pl.col("rank") < 8)
    assert clean.height > 0 and set(clean["delay_location"]) == {"before_call"}
    assert (clean["link_excess_ns"] == 0).all()


def test_nsys_without_a_slow_link_is_all_before_call(nsys: GeneratedRun) -> None:
    st = nsys.mart("stragglers")
    assert st.height > 0
    assert set(st["delay_location"]) == {"before_call"}


def _truth_class_c(truth: dict[str, Any]) -> dict[str, float]:
    """Per class: Σ bus bytes / Σ transfer time, bytes/s, from truth's busbw rows."""
    cols = truth["busbw"]["columns"]
    acc: dict[str, list[float]] = {}
    for values in truth["busbw"]["rows"]:
        r = dict(zip(cols, values, strict=True))
        bus = r["calls"] * r["bus_bytes_per_call"]
        a = acc.setdefault(r["cls"], [0.0, 0.0])
        a[0] += bus
        a[1] += bus * 8 / r["busbw_transfer_gbps"]  # ns
    return {k: b / x * 1e9 for k, (b, x) in acc.items()}


def test_class_c_comes_from_instance_transfer_time(kineto: GeneratedRun) -> None:
    got = kineto.query(
        "SELECT traffic_class, busbw_transfer_Bps, xfer_source FROM int_class_bandwidth "
        "WHERE run_id = ?"
    )
    want = _truth_class_c(kineto.truth)
    assert set(got["traffic_class"]) == set(want)
    for cls, c, source in got.iter_rows():
        assert source == "peers", cls
        assert abs(c - want[cls]) / want[cls] <= REL_TOL, (
            f"C_{cls} {c:.4g} vs truth {want[cls]:.4g}"
        )
