"""The straggler section: which rank the others waited for, skew, clock offsets, instance gaps.

Why: a per-rank trace shows a collective lasting long on the ranks that arrived early, not
which rank held them back. Issue 18 matches each collective across its ranks
(``collective_instances``), aligns the hosts' clocks (``clock_offsets``) and attributes the
wait to the last-arriving rank (``stragglers``); this module turns those marts into the
report's straggler section and into ``compare``'s straggler changes. It only reads marts
(no SQL, no derive, no model); every number comes from a mart row, aggregated for display
only where a large world needs it.

Large worlds stay bounded: the heatmap's rank axis becomes blocks of ranks above
:data:`MAX_HEAT_RANKS` ranks (a cell sums its ranks' wait and names the block's top
rank) and its iteration axis blocks of iterations above :data:`MAX_ITER_AXIS`; the tables show
the top :data:`MAX_OFFENDERS` offenders and at most :data:`commscope.reports.data.MAX_TABLE_ROWS` rows.

Units: waits in ms, skews and clock offsets in µs (1 ms = 1e6 ns, 1 µs = 1e3 ns).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from commscope.reports import charts
from commscope.reports import data as rd
from commscope.reports import gaps as rg
from commscope.reports.blocks import Block, guard

# Offenders shown in the table (and compared between runs).
MAX_OFFENDERS = 10
# Largest rank axis of the heatmap drawn rank by rank; above it, blocks of ranks (a cell of
# the largest block grid still gets ~8 px of the chart's height).
MAX_HEAT_RANKS = 64
# Largest iteration axis drawn iteration by iteration; above it, iterations are grouped.
MAX_ITER_AXIS = 50
# How the page names delay_location.
DELAY_TEXT = {
    "before_call": "before the call (arrived late: compute or data loading)",
    "inside_call": "inside the call (its transfers slower than the same kind of transfer "
    "elsewhere: a link)",
}
# Clock-offset rows shown; above it, the reference, per-rank and unaligned rows come first.
MAX_CLOCK_ROWS = 32
SCOPE_ORDER = {"reference": 0, "rank": 1, "unaligned": 2, "host": 3}
STATUS_TEXT = {
    "complete": "complete (every rank present and timed)",
    "untimed": "untimed (every rank present and consistent, no member timed: gap checks only)",
    "partly_timed": "partly timed (some members have no timeline)",
}
# States that are gaps of the matching or the recording (listed per group).
GAP_STATES = ("missing_ranks", "size_mismatch", "op_mismatch", "partly_timed")
STATUS_ORDER = {s: i for i, s in enumerate(GAP_STATES)}


def _ms(col: str) -> pl.Expr:
    return (pl.col(col).cast(pl.Float64) / 1e6).alias(col.removesuffix("_ns") + "_ms")


def _us(col: str) -> pl.Expr:
    return (pl.col(col).cast(pl.Float64) / 1e3).alias(col.removesuffix("_ns") + "_us")


def _has(df: pl.DataFrame, *cols: str) -> list[str]:
    return [c for c in cols if c in df.columns]


# ---------------------------------------------------------------------------- heatmap


@dataclass
class Heat:
    """Cells of the ranks x iterations heatmap of wait caused.

    Attributes:
        cells: (rank_axis, rank_end, iteration, wait_ms, instances_last, top_rank,
            top_wait_ms): one cell per rank (or block of ranks [rank_axis, rank_end)) and
            iteration (or iteration block, labelled by its first iteration) where wait was
            caused.
        block: ranks per cell of the rank axis (1: rank by rank).
        size: the rank axis is [0, size) in ranks.
        iteration_unit: "iteration" or "block of N iterations".
        measure: which wait the colour shows (same-stage, or all classes).
    """

    cells: pl.DataFrame
    block: int
    size: int
    iteration_unit: str
    measure: str


def heatmap(d: rd.RunData) -> Heat:
    """Wait caused per rank (or rank block) and iteration, from the stragglers mart.

    The colour is wait_caused_ns (same-stage classes: TP, DP, EP, other); a run whose
    same-stage waits are all zero (pipeline waits only) shows wait_caused_all_ns instead and
    says so.
    """
    st = d.mart("stragglers").filter(pl.col("iteration").is_not_null())
    if st.is_empty():
        raise rd.Unavailable("stragglers has no per-iteration rows")
    col, measure = "wait_caused_ns", "same-stage wait caused (TP, DP, EP, other)"
    if "wait_caused_all_ns" in st.columns and not (st["wait_caused_ns"].fill_null(0) > 0).any():
        col, measure = "wait_caused_all_ns", "wait caused, all classes (PP included)"
    world = max(d.world(), int(st["rank"].max()) + 1)  # type: ignore[arg-type]
    block = 1 if world <= MAX_HEAT_RANKS else math.ceil(world / MAX_HEAT_RANKS)
    iters = st["iteration"].unique().sort()
    i_block = 1 if iters.len() <= MAX_ITER_AXIS else math.ceil(iters.len() / MAX_ITER_AXIS)
    first = int(iters.min())  # type: ignore[arg-type]
    cells = (
        st.with_columns(
            rank_axis=(pl.col("rank") // block * block).cast(pl.Int32),
            iteration=(first + (pl.col("iteration") - first) // i_block * i_block).cast(pl.Int32),
            wait=pl.col(col).fill_null(0),
        )
        .group_by("rank_axis", "iteration")
        .agg(
            (pl.col("wait").sum() / 1e6).alias("wait_ms"),
            pl.col("instances_last").sum(),
            pl.col("rank")  # the lowest rank of those that caused the most
            .sort_by("wait", "rank", descending=[True, False])
            .first()
            .alias("top_rank"),
            (pl.col("wait").max() / 1e6).alias("top_wait_ms"),
        )
        .filter(pl.col("wait_ms") > 0)
        .with_columns(
            pl.col("wait_ms", "top_wait_ms").round(4), rank_end=pl.col("rank_axis") + block
        )
        .sort("rank_axis", "iteration")
    )
    if cells.is_empty():
        raise rd.Unavailable("no rank caused any wait (every complete instance was tied)")
    return Heat(
        cells,
        block,
        math.ceil(world / block) * block,
        "iteration" if i_block == 1 else f"block of {i_block} iterations",
        measure,
    )


# ---------------------------------------------------------------------------- offenders


def offenders(st: pl.DataFrame, top: int | None = MAX_OFFENDERS) -> pl.DataFrame:
    """The run's top offenders (run-level rows, iteration null) by rank_order, with their
    evidence: instances last, wait caused (same-stage and all classes, ms), share of the run's
    same-stage wait (%), where the delay sat, link excess (ms) and slow instances, iterations
    as top offender, persistent. ``top`` None: every rank that was last in an instance."""
    run = st.filter(pl.col("iteration").is_null())
    if run.is_empty():
        raise rd.Unavailable("stragglers has no run-level rows (iteration null)")
    order = "rank_order" if "rank_order" in run.columns else "wait_caused_ns"
    run = run.sort(order, "rank", descending=[order != "rank_order", False], nulls_last=True)
    if top is not None:
        run = run.head(top)
    cols: list[pl.Expr] = [pl.col(c) for c in _has(run, "rank_order", "rank", "instances_last")]
    cols += [_ms(c) for c in _has(run, "wait_caused_ns", "wait_caused_all_ns")]
    if "share" in run.columns:
        cols.append((pl.col("share") * 100).round(2).alias("share_pct"))
    cols += [pl.col(c) for c in _has(run, "delay_location")]
    cols += [_ms(c) for c in _has(run, "link_excess_ns")]
    cols += [pl.col(c) for c in _has(run, "slow_instances")]
    cols += [pl.col(c) for c in _has(run, "iterations_top", "persistent")]
    return run.select(cols)


def iterations_with_wait(st: pl.DataFrame) -> int:
    """Iterations in which some rank caused same-stage wait (persistent's denominator): the
    mart's iterations_with_waits where it has one, else counted from its per-iteration rows."""
    if "iterations_with_waits" in st.columns:
        n = st.filter(pl.col("iteration").is_null())["iterations_with_waits"].max()
        if n is not None:
            return int(n)  # type: ignore[arg-type]
    it = st.filter(pl.col("iteration").is_not_null() & (pl.col("wait_caused_ns").fill_null(0) > 0))
    return int(it["iteration"].n_unique())


def top_sentence(off: pl.DataFrame, n_iter: int) -> str:
    """One sentence naming the top offender and its evidence (from :func:`offenders`); a run
    whose waits are all pipeline waits (no same-stage wait) says so instead of naming a
    straggler."""
    r = off.row(0, named=True)
    delay = ""
    if r.get("delay_location"):
        delay = "; delay " + DELAY_TEXT.get(r["delay_location"], str(r["delay_location"]))
    if not r.get("wait_caused_ms"):
        text = (
            "No rank made its peers wait in same-stage collectives (TP, DP, EP, other): this "
            "run's waits sit in transfers between pipeline stages (PP, EmbTableSyn), the "
            "schedule's bubble, which names no straggler"
        )
        if r.get("wait_caused_all_ms"):
            text += (
                f". Rank {r['rank']} arrived last there most: in {r['instances_last']:,} "
                f"instances, {r['wait_caused_all_ms']:.4g} ms of wait caused{delay}"
            )
        return text + "."
    parts = [f"Rank {r['rank']} held the others back most"]
    if r.get("instances_last") is not None:
        parts.append(f"last to arrive in {r['instances_last']:,} instances")
    share = f" ({r['share_pct']:.1f} % of the run's)" if r.get("share_pct") is not None else ""
    parts.append(f"{r['wait_caused_ms']:.4g} ms of same-stage wait caused{share}")
    text = "; ".join(parts) + delay
    if r.get("iterations_top") is not None:
        tail = ": persistent" if r.get("persistent") else ""
        text += f"; top offender in {r['iterations_top']} of {n_iter} iterations with waits{tail}"
    return text + "."


# ---------------------------------------------------------------------------- skew


def skew_per_class(d: rd.RunData) -> pl.DataFrame:
    """Per traffic class over complete instances: count, median / p95 / max skew (µs), median
    transfer (µs), total wait (ms) and the largest clock bound (µs: skew is known ± it)."""
    ci = d.mart("collective_instances")
    ci = ci.filter((rg.instance_state(ci.columns) == "complete") & pl.col("skew_ns").is_not_null())
    if ci.is_empty():
        raise rd.Unavailable("no complete (timed on every member) instance")
    aggs = [
        pl.len().alias("instances"),
        (pl.col("skew_ns").median() / 1e3).alias("median_skew_us"),
        (pl.col("skew_ns").quantile(0.95, interpolation="linear") / 1e3).alias("p95_skew_us"),
        (pl.col("skew_ns").max() / 1e3).alias("max_skew_us"),
    ]
    if "transfer_ns" in ci.columns:
        aggs.append((pl.col("transfer_ns").median() / 1e3).alias("median_transfer_us"))
    if "wait_ns" in ci.columns:
        aggs.append((pl.col("wait_ns").sum() / 1e6).alias("wait_ms"))
    if "offset_bound_ns" in ci.columns:
        aggs.append((pl.col("offset_bound_ns").max() / 1e3).alias("clock_bound_us"))
    order = {c: i for i, c in enumerate(rd.CLASSES)}
    return (
        ci.group_by("traffic_class")
        .agg(aggs)
        .with_columns(_o=pl.col("traffic_class").replace_strict(order, default=99))
        .sort("_o", "traffic_class")
        .drop("_o")
    )


SKEW_STATS = {"median_skew_us": "median", "p95_skew_us": "p95", "max_skew_us": "max"}


def skew_chart_frame(skew: pl.DataFrame) -> pl.DataFrame:
    """Tidy (traffic_class, statistic, skew_us) of the median, p95 and max skew per class."""
    return (
        skew.select("traffic_class", *SKEW_STATS)
        .unpivot(index="traffic_class", variable_name="statistic", value_name="skew_us")
        .with_columns(pl.col("statistic").replace(SKEW_STATS))
    )


# ---------------------------------------------------------------------------- clocks


def rank_ranges(text: str | None) -> str | None:
    """'0,1,2,3,5' -> '0-3, 5' (a host's ranks, shorter on the page); other text unchanged."""
    if not text:
        return text
    try:
        ranks = sorted({int(x) for x in text.split(",")})
    except ValueError:
        return text
    out: list[str] = []
    start = prev = ranks[0]
    for r in [*ranks[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ", ".join(out)


def clock_table(d: rd.RunData) -> tuple[pl.DataFrame, str]:
    """The clock_offsets rows in µs, and a summary sentence (hosts, offset range, largest error
    bound, per-rank and unaligned rows).

    Rows are in host order (a host's row, then its ranks that disagree with it); above
    :data:`MAX_CLOCK_ROWS` rows the reference, per-rank and unaligned rows come first, so the
    cut keeps the exceptions.
    """
    co = d.mart("clock_offsets")
    if co.is_empty():
        raise rd.Unavailable("clock_offsets has no rows")
    rank = pl.col("rank") if "rank" in co.columns else pl.lit(None, pl.Int32)
    co = co.with_columns(rank.alias("rank")).sort("host", pl.col("rank"), nulls_last=False)
    if co.height > MAX_CLOCK_ROWS and "scope" in co.columns:
        order = pl.col("scope").replace_strict(SCOPE_ORDER, default=9, return_dtype=pl.Int32)
        co = co.sort(order, "host", "rank", nulls_last=False, maintain_order=True)
    cols: list[pl.Expr] = [pl.col(c) for c in _has(co, "host", "rank", "ranks")]
    cols += [_us(c) for c in _has(co, "offset_ns", "error_bound_ns")]
    cols += [pl.col(c) for c in _has(co, "scope", "n_instances", "method")]
    table = co.select(cols)
    if "ranks" in table.columns:
        shown = [rank_ranges(x) for x in table["ranks"].cast(pl.Utf8).to_list()]
        table = table.with_columns(ranks=pl.Series(shown, dtype=pl.Utf8))
    hosts = co.filter(pl.col("rank").is_null())
    scope = co["scope"] if "scope" in co.columns else pl.Series([], dtype=pl.Utf8)
    aligned = co.filter(pl.col("scope") != "unaligned") if "scope" in co.columns else co
    n_hosts = hosts["host"].n_unique() if hosts.height else co["host"].n_unique()
    parts = [f"{n_hosts} host{'s' if n_hosts != 1 else ''}"]
    ref = co.filter(pl.col("scope") == "reference") if "scope" in co.columns else co.head(0)
    if ref.height:
        parts.append(f"reference clock: host {ref['host'][0]}")
    if n_hosts == 1 and co.height == 1:
        parts.append("every rank shares the reference clock: no offset to estimate")
    elif aligned.height:
        lo, hi = aligned["offset_ns"].min(), aligned["offset_ns"].max()
        parts.append(f"offsets from {lo / 1e3:,.1f} to {hi / 1e3:,.1f} µs")  # type: ignore[operator]
        bound = aligned["error_bound_ns"].max()
        if bound is not None:
            parts.append(f"largest error bound {bound / 1e3:,.2f} µs")  # type: ignore[operator]
    n_rank = int((scope == "rank").sum())
    if n_rank:
        parts.append(
            f"{n_rank} rank{'s' if n_rank > 1 else ''} disagree{'' if n_rank > 1 else 's'} "
            "with its host beyond the bound (own rows)"
        )
    n_un = int((scope == "unaligned").sum())
    if n_un:
        parts.append(
            f"{n_un} rows unaligned (no matched timed instance shared with the reference: "
            "offset 0 assumed, bound unknown)"
        )
    text = "Clock offsets (aligned time = raw time - offset): " + "; ".join(parts) + "."
    return table, text


# ---------------------------------------------------------------------------- instance gaps


def instance_gaps(d: rd.RunData) -> tuple[pl.DataFrame, str]:
    """The gap checks: instances missing a rank, disagreeing in size or op, or timed on some
    members only, per group, class, op and state (count, iterations, the most frequent missing
    ranks), and a sentence with the counts per state (:func:`commscope.reports.gaps.instance_state`).
    Untimed instances (every rank present, nothing timed: NCCL debug logs) are counted in the
    sentence, not listed: they are no gap of the matching."""
    ci = d.mart("collective_instances")
    if ci.is_empty():
        raise rd.Unavailable("collective_instances has no rows")
    counts = rg.status_counts(ci)
    text = f"{ci.height:,} instances matched: " + ", ".join(
        f"{n:,} {STATUS_TEXT.get(s, s)}" for s, n in counts.items()
    )
    ci = ci.with_columns(rg.instance_state(ci.columns).alias("status"))
    bad = ci.filter(pl.col("status").is_in(GAP_STATES))
    if bad.is_empty():
        return bad.head(0), text + (
            ". Gap checks: no instance misses a rank, disagrees in size or op between ranks, "
            "or is timed on some members only."
        )
    keys = _has(bad, "global_group", "traffic_class", "op", "status")
    aggs = [pl.len().alias("instances")]
    if "iteration" in bad.columns:
        aggs += [
            pl.col("iteration").min().alias("first_iteration"),
            pl.col("iteration").max().alias("last_iteration"),
        ]
    if "ranks_expected" in bad.columns:
        aggs.append(pl.col("ranks_expected").max())
    if "ranks_seen" in bad.columns:
        aggs.append(pl.col("ranks_seen").min().alias("min_ranks_seen"))
    if "missing_ranks" in bad.columns:
        aggs.append(
            pl.col("missing_ranks").drop_nulls().mode().sort().first().alias("missing_ranks")
        )
    out = (
        bad.group_by(keys)
        .agg(aggs)
        .with_columns(_o=pl.col("status").replace_strict(STATUS_ORDER, default=9))
        .sort("_o", "instances", *keys, descending=[False, True] + [False] * len(keys))
        .drop("_o")
    )
    return out, text + "."


# ---------------------------------------------------------------------------- section


def section(d: rd.RunData) -> list[Block]:
    """The straggler section's blocks: heatmap and top offenders, skew per class, clock
    offsets, instance gaps; each view that the run cannot feed says why and what to record
    (its gap from :mod:`commscope.reports.gaps`: keys waits, skew, clocks, instances)."""

    def waits() -> list[Block]:
        st = d.mart("stragglers")
        off = offenders(st)
        heat = heatmap(d)
        n_iter = iterations_with_wait(st)
        return [
            Block("text", text=top_sentence(off, n_iter)),
            Block(
                "chart",
                chart=charts.wait_heatmap(
                    heat.cells,
                    block=heat.block,
                    size=heat.size,
                    iteration_unit=heat.iteration_unit,
                    measure=heat.measure,
                ),
                renderer="canvas" if heat.cells.height > 4000 else "svg",
            ),
            Block(
                "text",
                text=f"Top offenders over the run ({min(off.height, MAX_OFFENDERS)} shown of "
                f"{st.filter(pl.col('iteration').is_null()).height:,} ranks that were last in "
                "an instance); share = of the run's same-stage wait; link excess = the time its "
                "slow instances' transfers took beyond the usual transfer of the same (op, "
                "bytes, group size), slow_instances = how many (stragglers mart's header):",
            ),
            Block("table", frame=off),
        ]

    def skew() -> list[Block]:
        df = skew_per_class(d)
        cross = [c for c in ("PP", "EmbTableSyn") if c in df["traffic_class"].to_list()]
        note = (
            f"; {' and '.join(cross)} span pipeline stages, so their skew includes the "
            "pipeline schedule (the bubble), not only stragglers"
            if cross
            else ""
        )
        return [
            Block(
                "text",
                text="Skew per class (last arrival - first arrival of each complete instance, "
                f"on aligned clocks; known to ± the clock bound{note}):",
            ),
            Block("chart", chart=charts.skew_per_class(skew_chart_frame(df), df)),
            Block("table", frame=df),
        ]

    def clocks() -> list[Block]:
        table, text = clock_table(d)
        return [
            Block("text", text=text),
            Block("table", frame=table.head(MAX_CLOCK_ROWS), total_rows=table.height),
        ]

    def gaps() -> list[Block]:
        table, text = instance_gaps(d)
        out = [Block("text", text=text)]
        if table.height:
            out.append(
                Block(
                    "table",
                    frame=table.head(rd.MAX_TABLE_ROWS),
                    total_rows=table.height,
                    raw_columns=_has(table, "global_group", "missing_ranks"),  # type: ignore[arg-type]
                )
            )
        return out

    gaps_ = dict(d.gaps)
    w, c = gaps_.get("waits"), gaps_.get("clocks")
    if w is not None and c is not None and c.remedy and c.remedy == w.remedy:
        # one remedy for both views: say it once
        gaps_["clocks"] = rg.Gap(c.kind, c.reason, "record the same timelines (above)")
    blocks = (
        guard(waits, gaps_, "waits")
        + guard(skew, gaps_, "skew")
        + guard(clocks, gaps_, "clocks")
        + guard(gaps, gaps_, "instances")
    )
    # views with one cause (instances not matched: no waits, skew or gaps) say it once
    seen: set[str] = set()
    out = []
    for b in blocks:
        if b.kind == "na" and b.text in seen:
            continue
        seen.add(b.text)
        out.append(b)
    return out


# ---------------------------------------------------------------------------- compare


@dataclass
class StragglerChanges:
    """Straggler changes between two runs (``commscope compare``).

    Attributes:
        table: per rank in either run's top offenders: order, wait caused (ms), share (%),
            delay location and persistent flag in A and B, wait difference B - A (ms), and
            what changed.
        runs: per run ("A", "B"): run id, top offender, same-stage wait caused (ms), complete
            instances, persistent ranks; or "unavailable" with the reason.
        run_lines: one sentence per run (its top offender, wait caused, persistent ranks).
        lines: the text ``compare`` prints (a heading, run_lines, one line per offender).
    """

    table: pl.DataFrame
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    run_lines: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The changes as JSON-ready values."""
        return {"runs": self.runs, "offenders": self.table.to_dicts()}


def _run_summary(d: rd.RunData) -> tuple[dict[str, Any], pl.DataFrame | None]:
    """One run's straggler summary and all its offenders in order (None when it has none)."""
    out: dict[str, Any] = {"run_id": d.run_id}
    gap = d.gaps.get("waits")
    try:
        if gap is not None and gap.kind != "partial":
            raise rd.Unavailable(gap.text())
        st = d.mart("stragglers")
        off = offenders(st, top=None)
    except rd.Unavailable as exc:
        out["unavailable"] = str(exc)
        return out, None
    run = st.filter(pl.col("iteration").is_null())
    out["top_offender"] = int(off["rank"][0]) if off.height else None
    out["wait_caused_ms"] = float(run["wait_caused_ns"].fill_null(0).sum()) / 1e6
    if "persistent" in run.columns:
        out["persistent_ranks"] = sorted(
            int(r) for r in run.filter(pl.col("persistent").fill_null(False))["rank"]
        )
    ci = d.marts.get("collective_instances")
    if ci is not None:
        out["complete_instances"] = rg.status_counts(ci).get("complete", 0)
    return out, off


def _side(off: pl.DataFrame | None, tag: str) -> pl.DataFrame:
    schema = {
        "rank": pl.Int64,
        f"order_{tag}": pl.Int64,
        f"wait_caused_ms_{tag}": pl.Float64,
        f"share_pct_{tag}": pl.Float64,
        f"delay_{tag}": pl.Utf8,
        f"persistent_{tag}": pl.Boolean,
    }
    if off is None or off.is_empty():
        return pl.DataFrame(schema=schema)
    n = off.height
    get = {
        "rank_order": pl.col("rank_order")
        if "rank_order" in off.columns
        else pl.int_range(1, n + 1),
        "wait_caused_ms": pl.col("wait_caused_ms")
        if "wait_caused_ms" in off.columns
        else pl.lit(None),
        "share_pct": pl.col("share_pct") if "share_pct" in off.columns else pl.lit(None),
        "delay_location": pl.col("delay_location")
        if "delay_location" in off.columns
        else pl.lit(None),
        "persistent": pl.col("persistent") if "persistent" in off.columns else pl.lit(None),
    }
    return off.select(
        pl.col("rank").cast(pl.Int64),
        get["rank_order"].cast(pl.Int64).alias(f"order_{tag}"),
        get["wait_caused_ms"].cast(pl.Float64).alias(f"wait_caused_ms_{tag}"),
        get["share_pct"].cast(pl.Float64).alias(f"share_pct_{tag}"),
        get["delay_location"].cast(pl.Utf8).alias(f"delay_{tag}"),
        get["persistent"].cast(pl.Boolean).alias(f"persistent_{tag}"),
    )


def changes(
    off_a: pl.DataFrame | None, off_b: pl.DataFrame | None, top: int = MAX_OFFENDERS
) -> pl.DataFrame:
    """Ranks in either run's ``top`` offenders, A beside B (their place and wait in the other
    run even outside its top), with the wait difference B - A and what changed, first that
    applies: 'new top offender', 'no longer top offender', 'no wait caused in A' / 'in B',
    'now persistent', 'no longer persistent', 'entered the top N', 'left the top N', 'in
    both top N'.

    Args:
        off_a, off_b: every offender of each run (:func:`offenders` with ``top`` None), or
            None when the run has none.
        top: offenders per run to compare.
    """
    a, b = _side(off_a, "A"), _side(off_b, "B")
    keep = pl.col("order_A").le(top).fill_null(False) | pl.col("order_B").le(top).fill_null(False)
    out = a.join(b, on="rank", how="full", coalesce=True).filter(keep)
    pa, pb = pl.col("persistent_A").fill_null(False), pl.col("persistent_B").fill_null(False)
    change = (
        pl.when((pl.col("order_B") == 1) & (pl.col("order_A") != 1).fill_null(True))
        .then(pl.lit("new top offender"))
        .when((pl.col("order_A") == 1) & (pl.col("order_B") != 1).fill_null(True))
        .then(pl.lit("no longer top offender"))
        .when(pl.col("order_A").is_null())
        .then(pl.lit("no wait caused in A"))
        .when(pl.col("order_B").is_null())
        .then(pl.lit("no wait caused in B"))
        .when(pb & ~pa)
        .then(pl.lit("now persistent"))
        .when(pa & ~pb)
        .then(pl.lit("no longer persistent"))
        .when(pl.col("order_A") > top)
        .then(pl.lit(f"entered the top {top}"))
        .when(pl.col("order_B") > top)
        .then(pl.lit(f"left the top {top}"))
        .otherwise(pl.lit(f"in both top {top}"))
    )
    return (
        out.with_columns(
            diff_ms=pl.col("wait_caused_ms_B").fill_null(0)
            - pl.col("wait_caused_ms_A").fill_null(0),
            change=change,
            _o=pl.min_horizontal("order_A", "order_B"),
        )
        .sort("_o", "rank")
        .drop("_o")
        .select(
            "rank",
            "order_A",
            "order_B",
            "wait_caused_ms_A",
            "wait_caused_ms_B",
            "diff_ms",
            "share_pct_A",
            "share_pct_B",
            "delay_A",
            "delay_B",
            "persistent_A",
            "persistent_B",
            "change",
        )
    )


def compare(da: rd.RunData, db: rd.RunData) -> StragglerChanges:
    """Straggler changes from run A to run B (their gaps must be set: commscope.reports.html.run_sections)."""
    sa, off_a = _run_summary(da)
    sb, off_b = _run_summary(db)
    table = changes(off_a, off_b)
    run_lines = []
    for tag, s in (("A", sa), ("B", sb)):
        if "unavailable" in s:
            run_lines.append(f"{tag} {s['run_id']}: {s['unavailable']}")
            continue
        pers = ", ".join(map(str, s.get("persistent_ranks", []))) or "none"
        run_lines.append(
            f"{tag} {s['run_id']}: top offender rank {s['top_offender']}; "
            f"{s['wait_caused_ms']:.4g} ms same-stage wait caused by all ranks; "
            f"persistent offenders: {pers}."
        )
    lines = ["Stragglers (wait caused in same-stage collectives, ms):"]
    lines += [f"  {x}" for x in run_lines]
    for r in table.head(2 * MAX_OFFENDERS).iter_rows(named=True):
        a = "-" if r["order_A"] is None else _place(r["order_A"], r["wait_caused_ms_A"])
        b = "-" if r["order_B"] is None else _place(r["order_B"], r["wait_caused_ms_B"])
        lines.append(f"  rank {r['rank']}: A {a} -> B {b} ({r['change']})")
    return StragglerChanges(table, {"A": sa, "B": sb}, run_lines, lines)


def _place(order: int, wait_ms: float | None) -> str:
    wait = "?" if wait_ms is None else f"{wait_ms:.4g}"
    return f"#{order} {wait} ms"
