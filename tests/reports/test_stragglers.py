"""Given/expect tests of the straggler section (commscope.reports.stragglers) and compare's straggler
changes, on hand-built marts written to the column contract of issue 18 (PLAN.md: marts
collective_instances, clock_offsets, stragglers): the page's numbers are the mart's, a large
world stays bounded, and compare names who changed."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from commscope.reports import charts
from commscope.reports import data as rd
from commscope.reports import gaps as rg
from commscope.reports import html as rh
from commscope.reports import stragglers as rs

RUN = "r1"
STRAG_SCHEMA = {
    "run_id": pl.Utf8,
    "iteration": pl.Int64,
    "rank": pl.Int32,
    "instances_last": pl.Int64,
    "wait_caused_ns": pl.Int64,
    "wait_caused_all_ns": pl.Int64,
    "share": pl.Float64,
    "rank_order": pl.Int64,
    "delay_location": pl.Utf8,
    "link_excess_ns": pl.Int64,
    "iterations_top": pl.Int64,
    "persistent": pl.Boolean,
}


def strag(*rows: tuple[Any, ...], run: str = RUN) -> pl.DataFrame:
    """stragglers rows: (iteration, rank, instances_last, wait ns, wait all ns, share, order,
    delay_location, link_excess_ns, iterations_top, persistent)."""
    return pl.DataFrame([(run, *r) for r in rows], schema=STRAG_SCHEMA, orient="row")


# Rank 3 arrives late (compute) in both iterations; rank 1 once, on a slow link.
STRAGGLERS = strag(
    (0, 3, 5, 8_000_000, 9_000_000, 0.8, 1, "before_call", 0, None, None),
    (0, 1, 1, 2_000_000, 2_000_000, 0.2, 2, "inside_call", 500_000, None, None),
    (1, 3, 4, 6_000_000, 6_000_000, 1.0, 1, "before_call", 0, None, None),
    (None, 3, 9, 14_000_000, 15_000_000, 0.875, 1, "before_call", 0, 2, True),
    (None, 1, 1, 2_000_000, 2_000_000, 0.125, 2, "inside_call", 500_000, 0, False),
)


def instances(*rows: tuple[Any, ...]) -> pl.DataFrame:
    """collective_instances rows: (global_group, traffic_class, status, iteration, skew_ns,
    transfer_ns, wait_ns, offset_bound_ns, missing_ranks)."""
    df = pl.DataFrame(
        list(rows),
        schema={
            "global_group": pl.Utf8,
            "traffic_class": pl.Utf8,
            "status": pl.Utf8,
            "iteration": pl.Int32,
            "skew_ns": pl.Int64,
            "transfer_ns": pl.Int64,
            "wait_ns": pl.Int64,
            "offset_bound_ns": pl.Int64,
            "missing_ranks": pl.Utf8,
        },
        orient="row",
    )
    return df.with_columns(
        run_id=pl.lit(RUN),
        op=pl.lit("all_reduce"),
        ranks_expected=pl.lit(4, pl.Int64),
        ranks_seen=pl.when(pl.col("status") == "missing_ranks").then(3).otherwise(4),
        # the untimed row is timed on 2 of its 4 members (a timeline missing for 2 ranks)
        ranks_timed=pl.when(pl.col("status") == "untimed").then(2).otherwise(4),
    )


INSTANCES = instances(
    ("tp0", "TP", "complete", 0, 1_000, 50_000, 3_000, 1_500, None),
    ("tp0", "TP", "complete", 0, 2_000, 50_000, 6_000, 1_500, None),
    ("tp0", "TP", "complete", 1, 3_000, 50_000, 9_000, 2_500, None),
    ("tp0", "TP", "complete", 1, 4_000, 70_000, 12_000, 1_500, None),
    # not complete: its (wrongly present) skew must not count
    ("tp0", "TP", "size_mismatch", 1, 999_000_000, None, None, None, None),
    ("dp", "DP", "complete", 0, 10_000, 900_000, 20_000, 2_000, None),
    ("tp0", "TP", "missing_ranks", 0, None, None, None, None, "3"),
    ("tp0", "TP", "missing_ranks", 1, None, None, None, None, "3"),
    ("dp", "DP", "untimed", 1, None, None, None, None, None),
)

CLOCKS = pl.DataFrame(
    {
        "run_id": [RUN] * 3,
        "host": ["a", "b", "b"],
        "rank": [None, None, 5],
        "ranks": ["0-3", "4-7", "5"],
        "offset_ns": [0, -1_250_000, 40_000],
        "error_bound_ns": [1_000, 2_500, 900],
        "scope": ["reference", "host", "rank"],
        "n_instances": [12, 12, 4],
    },
    schema_overrides={"rank": pl.Int32},
)


def run_data(**marts: pl.DataFrame) -> rd.RunData:
    """A RunData of hand-built marts (no store: reports read only the frames)."""
    base = {
        "stragglers": STRAGGLERS,
        "collective_instances": INSTANCES,
        "clock_offsets": CLOCKS,
    }
    return rd.RunData(RUN, None, {}, marts={**base, **marts})


def test_offenders_are_the_marts_run_rows() -> None:
    off = rs.offenders(STRAGGLERS)
    assert off.to_dicts() == [
        {
            "rank_order": 1,
            "rank": 3,
            "instances_last": 9,
            "wait_caused_ms": 14.0,
            "wait_caused_all_ms": 15.0,
            "share_pct": 87.5,
            "delay_location": "before_call",
            "link_excess_ms": 0.0,
            "iterations_top": 2,
            "persistent": True,
        },
        {
            "rank_order": 2,
            "rank": 1,
            "instances_last": 1,
            "wait_caused_ms": 2.0,
            "wait_caused_all_ms": 2.0,
            "share_pct": 12.5,
            "delay_location": "inside_call",
            "link_excess_ms": 0.5,
            "iterations_top": 0,
            "persistent": False,
        },
    ]


def test_top_sentence_names_the_offender_and_its_evidence() -> None:
    text = rs.top_sentence(rs.offenders(STRAGGLERS), rs.iterations_with_wait(STRAGGLERS))
    assert text.startswith("Rank 3 held the others back most")
    for part in (
        "last to arrive in 9 instances",
        "14 ms of same-stage wait caused (87.5 % of the run's)",
        "delay before the call (arrived late: compute or data loading)",
        "top offender in 2 of 2 iterations with waits: persistent",
    ):
        assert part in text


def test_pipeline_only_waits_name_no_straggler() -> None:
    st = STRAGGLERS.with_columns(wait_caused_ns=pl.lit(0, pl.Int64), share=pl.lit(None))
    text = rs.top_sentence(rs.offenders(st), rs.iterations_with_wait(st))
    assert text.startswith("No rank made its peers wait in same-stage collectives")
    assert "Rank 3 arrived last there most: in 9 instances, 15 ms of wait caused" in text
    assert "held the others back" not in text


def test_heatmap_cells_are_the_marts_per_iteration_rows() -> None:
    heat = rs.heatmap(run_data())
    got = {(r["rank_axis"], r["iteration"]): r["wait_ms"] for r in heat.cells.iter_rows(named=True)}
    assert got == {(3, 0): 8.0, (1, 0): 2.0, (3, 1): 6.0}
    assert (heat.block, heat.size, heat.iteration_unit) == (1, 4, "iteration")
    assert heat.measure.startswith("same-stage")
    charts.wait_heatmap(
        heat.cells, block=1, size=4, iteration_unit="iteration", measure=heat.measure
    ).to_dict()


def test_charts_survive_a_json_round_trip() -> None:
    import json

    import altair as alt

    d = run_data()
    heat = rs.heatmap(d)
    skew = rs.skew_per_class(d)
    for chart in (
        charts.wait_heatmap(
            heat.cells, block=1, size=4, iteration_unit="iteration", measure=heat.measure
        ),
        charts.skew_per_class(rs.skew_chart_frame(skew), skew),
    ):
        spec = chart.to_dict()  # validates against the Vega-Lite schema
        again = json.loads(chart.to_json())
        assert again == json.loads(json.dumps(spec))
        assert type(chart).from_dict(again).to_dict() == spec
        assert isinstance(chart, alt.TopLevelMixin)


def test_heatmap_falls_back_to_all_classes_when_no_same_stage_wait() -> None:
    # a pipeline-only run: waits in PP only (wait_caused_ns 0, wait_caused_all_ns > 0)
    st = STRAGGLERS.with_columns(wait_caused_ns=pl.lit(0, pl.Int64))
    heat = rs.heatmap(run_data(stragglers=st))
    assert heat.measure.startswith("wait caused, all classes")
    assert heat.cells.filter((pl.col("rank_axis") == 3) & (pl.col("iteration") == 0))[
        "wait_ms"
    ].item() == pytest.approx(9.0)


def big_world(world: int = 1024, iters: int = 60, offender: int = 517) -> pl.DataFrame:
    """Every rank last once per iteration (wait = its rank number in µs); the offender 50 ms."""
    rows = []
    for it in range(iters):
        for r in range(world):
            wait = 50_000_000 if r == offender else (r + 1) * 1_000
            rows.append((it, r, 1, wait, wait, None, None, "before_call", 0, None, None))
    run = [
        (None, r, iters, iters * w, iters * w, None, i + 1, "before_call", 0, 0, False)
        for i, (r, w) in enumerate(
            sorted(
                ((r, 50_000_000 if r == offender else (r + 1) * 1_000) for r in range(world)),
                key=lambda x: -x[1],
            )
        )
    ]
    return strag(*rows, *run)


def test_large_world_heatmap_and_page_stay_bounded() -> None:
    st = big_world()
    d = run_data(stragglers=st)
    heat = rs.heatmap(d)
    # 1024 ranks in 64 blocks of 16, 60 iterations in 30 blocks of 2
    assert heat.block == 16 and heat.size == 1024
    assert heat.iteration_unit == "block of 2 iterations"
    assert heat.cells.height <= rs.MAX_HEAT_RANKS * rs.MAX_ITER_AXIS
    assert heat.cells.height == 64 * 30
    # no wait is lost by the blocks, and each block names its top rank
    per_it = st.filter(pl.col("iteration").is_not_null())
    assert heat.cells["wait_ms"].sum() == pytest.approx(per_it["wait_caused_ns"].sum() / 1e6)
    cell = heat.cells.filter((pl.col("rank_axis") == 512) & (pl.col("iteration") == 0)).row(
        0, named=True
    )
    assert cell["top_rank"] == 517 and cell["rank_end"] == 528
    assert cell["top_wait_ms"] == 50.0
    blocks = rs.section(d)
    html = rh._Page().blocks(blocks)
    assert "Rank 517 held the others back most" in html
    assert len(html) < 300_000, len(html)  # bounded whatever the world size
    off = next(b.frame for b in blocks if b.kind == "table")
    assert off is not None and off.height == rs.MAX_OFFENDERS


def test_skew_per_class_over_complete_instances_only() -> None:
    df = rs.skew_per_class(run_data())
    tp = df.row(0, named=True)
    assert df["traffic_class"].to_list() == ["TP", "DP"]  # the report's class order
    assert tp["instances"] == 4  # the size_mismatch row (999 ms skew) is left out
    assert tp["median_skew_us"] == pytest.approx(2.5)
    assert tp["p95_skew_us"] == pytest.approx(3.85)  # 1 + 0.95 * 3 µs, linear
    assert tp["max_skew_us"] == pytest.approx(4.0)
    assert tp["median_transfer_us"] == pytest.approx(50.0)
    assert tp["wait_ms"] == pytest.approx(0.030)
    assert tp["clock_bound_us"] == pytest.approx(2.5)
    points = rs.skew_chart_frame(df)
    assert set(points["statistic"]) == {"median", "p95", "max"}
    charts.skew_per_class(points, df).to_dict()


def test_clock_table_is_the_marts_rows_in_microseconds() -> None:
    table, text = rs.clock_table(run_data())
    assert table.select("host", "rank", "offset_us", "error_bound_us", "scope").rows() == [
        ("a", None, 0.0, 1.0, "reference"),
        ("b", None, -1250.0, 2.5, "host"),
        ("b", 5, 40.0, 0.9, "rank"),
    ]
    assert "2 hosts" in text and "reference clock: host a" in text
    assert "offsets from -1,250.0 to 40.0 µs" in text
    assert "largest error bound 2.50 µs" in text
    assert "1 rank disagrees with its host" in text


def test_rank_ranges() -> None:
    assert rs.rank_ranges("0,1,2,3,5,7,8") == "0-3, 5, 7-8"
    assert rs.rank_ranges("4") == "4"
    assert rs.rank_ranges("0-3") == "0-3"  # already a range: as the mart wrote it
    assert rs.rank_ranges(None) is None


def test_clock_table_of_many_hosts_shows_the_exceptions_first() -> None:
    n = 100
    co = pl.DataFrame(
        {
            "run_id": [RUN] * (n + 2),
            "host": [f"h{i:03d}" for i in range(n)] + ["h050", "h099"],
            "rank": [None] * n + [401, 792],
            "ranks": ["x"] * (n + 2),
            "offset_ns": [i * 1000 for i in range(n)] + [7, 0],
            "error_bound_ns": [100] * n + [200, None],
            "scope": ["reference"] + ["host"] * (n - 1) + ["rank", "unaligned"],
            "n_instances": [10] * n + [3, 0],
        },
        schema_overrides={"rank": pl.Int32},
    )
    table, text = rs.clock_table(run_data(clock_offsets=co))
    assert table["scope"].head(3).to_list() == ["reference", "rank", "unaligned"]
    assert "1 rows unaligned" in text
    blocks = rs.section(run_data(clock_offsets=co))
    shown = [b for b in blocks if b.kind == "table" and b.frame is not None and "scope" in b.frame]
    assert shown[0].frame is not None and shown[0].frame.height == rs.MAX_CLOCK_ROWS
    assert shown[0].total_rows == n + 2


def test_instance_gaps_per_group_and_status() -> None:
    table, text = rs.instance_gaps(run_data())
    assert text == (
        "9 instances matched: 5 complete (every rank present and timed), 2 missing_ranks, "
        "1 partly timed (some members have no timeline), 1 size_mismatch."
    )
    rows = table.select("global_group", "status", "instances", "missing_ranks").rows()
    assert rows == [
        ("tp0", "missing_ranks", 2, "3"),
        ("tp0", "size_mismatch", 1, None),
        ("dp", "partly_timed", 1, None),
    ]


def test_complete_instances_without_times_are_untimed() -> None:
    # NCCL debug logs: every rank present and consistent (status complete), nothing timed
    ci = INSTANCES.head(4).with_columns(
        ranks_timed=pl.Series([4, 4, 0, 0]), skew_ns=pl.Series([1_000, 2_000, None, None])
    )
    assert rg.status_counts(ci) == {"complete": 2, "untimed": 2}
    d = run_data(collective_instances=ci)
    assert rs.skew_per_class(d)["instances"].to_list() == [2]
    table, text = rs.instance_gaps(d)
    assert text == (
        "4 instances matched: 2 complete (every rank present and timed), 2 untimed (every rank "
        "present and consistent, no member timed: gap checks only). Gap checks: no instance "
        "misses a rank, disagrees in size or op between ranks, or is timed on some members only."
    )
    assert table.is_empty()  # untimed instances are no gap of the matching


def test_section_renders_offender_tables_and_escapes() -> None:
    page = rh._Page().blocks(rs.section(run_data()))
    assert "Rank 3 held the others back most" in page
    assert "<td>before_call</td>" in page and '<td class="n">87.5</td>' in page
    assert "Wait caused per rank and iteration" in page  # the heatmap's spec
    assert "reference clock: host a" in page
    assert "tp0" in page and "missing_ranks" in page


def test_empty_views_say_what_to_record() -> None:
    # the section shows each view's gap (commscope.reports.gaps) instead of its body
    d = run_data()
    untimed = rg.Gap("missing", "none of the 9 matched instances is timed", rg.REMEDY_TIMELINES)
    d.gaps = {"waits": untimed, "skew": untimed}
    page = rh._Page().blocks(rs.section(d))
    assert "not available: none of the 9 matched instances is timed" in page
    assert "Kineto" in page and "nsys" in page and "every rank of each group" in page
    assert "Rank 3 held" not in page
    assert "reference clock: host a" in page  # the clock view has its data


def test_one_remedy_for_waits_and_clocks_is_said_once() -> None:
    d = run_data()
    d.gaps = {
        "waits": rg.Gap("missing", "none of the 9 matched instances is timed", rg.REMEDY_TIMELINES),
        "clocks": rg.Gap("missing", "no rank has a timed call", rg.REMEDY_TIMELINES),
    }
    page = rh._Page().blocks(rs.section(d))
    assert page.count("nsys profile") == 1
    assert "not available: no rank has a timed call; to get it, record the same timelines" in page


def test_section_without_the_marts() -> None:
    # an older run: marts not derived; no gaps known (no store) -> 'not available (why)'
    d = rd.RunData(RUN, None, {}, missing={"stragglers": "mart stragglers was not derived"})
    page = rh._Page().blocks(rs.section(d))
    assert "mart stragglers was not derived" in page
    assert "not available (mart collective_instances not read)" in page


# ---------------------------------------------------------------------------- compare

B_STRAGGLERS = strag(
    (0, 2, 6, 9_000_000, 9_000_000, 0.9, 1, "inside_call", 3_000_000, None, None),
    (0, 3, 1, 1_000_000, 1_000_000, 0.1, 2, "before_call", 0, None, None),
    (None, 2, 6, 9_000_000, 9_000_000, 0.9, 1, "inside_call", 3_000_000, 1, True),
    (None, 3, 1, 1_000_000, 1_000_000, 0.1, 2, "before_call", 0, 0, False),
    run="r2",
)


def test_changes_between_runs() -> None:
    table = rs.changes(rs.offenders(STRAGGLERS, top=None), rs.offenders(B_STRAGGLERS, top=None))
    got = table.select("rank", "order_A", "order_B", "diff_ms", "change").rows()
    assert got == [
        (2, None, 1, 9.0, "new top offender"),
        (3, 1, 2, -13.0, "no longer top offender"),
        (1, 2, None, -2.0, "no wait caused in B"),
    ]
    assert table.filter(pl.col("rank") == 3)["persistent_A", "persistent_B"].row(0) == (
        True,
        False,
    )


def test_changes_show_the_other_runs_place_outside_its_top() -> None:
    # top 1: rank 3 leads A and is #2 in B; rank 2 leads B and caused no wait in A
    table = rs.changes(
        rs.offenders(STRAGGLERS, top=None), rs.offenders(B_STRAGGLERS, top=None), top=1
    )
    assert table.select("rank", "order_A", "order_B", "wait_caused_ms_B").rows() == [
        (2, None, 1, 9.0),
        (3, 1, 2, 1.0),
    ]
    # both lead their runs' top 2, persistence lost: the persistence change is named
    a = STRAGGLERS.with_columns(
        rank_order=pl.when(pl.col("rank") == 3).then(2).otherwise(1).cast(pl.Int64)
    )
    table = rs.changes(rs.offenders(a, top=None), rs.offenders(B_STRAGGLERS, top=None))
    assert dict(table.select("rank", "change").rows())[3] == "no longer persistent"


def test_compare_text_and_json() -> None:
    da = run_data()
    db = rd.RunData("r2", None, {}, marts={"stragglers": B_STRAGGLERS})
    ch = rs.compare(da, db)
    assert ch.runs["A"]["top_offender"] == 3 and ch.runs["B"]["top_offender"] == 2
    assert ch.runs["A"]["persistent_ranks"] == [3] and ch.runs["B"]["persistent_ranks"] == [2]
    assert ch.runs["A"]["wait_caused_ms"] == pytest.approx(16.0)
    assert ch.runs["A"]["complete_instances"] == 5
    text = "\n".join(ch.lines)
    assert "A r1: top offender rank 3" in text and "B r2: top offender rank 2" in text
    assert "rank 3: A #1 14 ms -> B #2 1 ms (no longer top offender)" in text
    assert "rank 2: A - -> B #1 9 ms (new top offender)" in text
    doc = ch.as_json()
    assert [o["rank"] for o in doc["offenders"]] == [2, 3, 1]


def test_compare_says_why_a_run_has_no_stragglers() -> None:
    da = run_data()
    db = rd.RunData("r2", None, {}, missing={"stragglers": "mart stragglers was not derived"})
    db.gaps = {}
    ch = rs.compare(da, db)
    assert ch.runs["B"] == {"run_id": "r2", "unavailable": "mart stragglers was not derived"}
    assert ch.table.filter(pl.col("change") == "no longer top offender")["rank"].to_list() == [3]
    assert ch.table.filter(pl.col("change") == "no wait caused in B")["rank"].to_list() == [1]
    assert "B r2: mart stragglers was not derived" in "\n".join(ch.lines)
