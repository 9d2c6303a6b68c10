"""Chart builders: one function per report chart, each a pure encoding of a prepared frame.

Why: the frames come from :mod:`commscope.reports.data`, which does every computation; a builder only
maps columns to marks and channels (no aggregation, no transforms that change numbers), so
charts are easy to test (``to_dict()`` and a JSON round-trip) and to restyle (colours and fonts
live in :mod:`commscope.reports.theme` only). Comparisons of measured and predicted are one tidy frame
with a ``source`` column, or a layer of two marks. A chart's records are sorted by every
column (:func:`_data`), so the spec does not depend on the order of the frame's rows; an order
a person sees (an axis, a stack, which of two coinciding marks is on top) is stated in the
encoding.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from commscope.reports import theme

theme.enable()


def _data(df: pl.DataFrame) -> alt.InlineData:
    """Inline the frame's rows (bounded upstream by commscope.reports.data, so Altair's 5000-row guard
    does not apply); NaN becomes null so the spec is valid JSON.

    The records are sorted by every column: a chart's data, and so the page's bytes, do not
    depend on the order the frame's rows came in (a mart without ORDER BY, a group_by, rows
    that tie on a partial sort). No encoding depends on the records' order: an axis in a
    given order names it (:func:`_order`), lines are drawn in x order, stacks by ``order`` or
    colour.
    """
    floats = [c for c, t in df.schema.items() if t.is_float()]
    df = df.with_columns(pl.col(floats).fill_nan(None))
    if df.width and df.height > 1:
        df = df.sort(df.columns, nulls_last=True, maintain_order=True)
    return alt.InlineData(values=df.to_dicts())


def _order(df: pl.DataFrame, column: str) -> list[object]:
    """The values of ``column`` in the order the frame first lists them: the sort of an axis
    drawn in the prepared frame's order (commscope.reports.data gives it), stated in the spec
    since the records themselves are sorted (:func:`_data`). A null is left out (a sort list
    holds values only; Vega-Lite draws what it does not list after them)."""
    return df[column].drop_nulls().unique(maintain_order=True).to_list()


SOURCE_SCALE = alt.Scale(domain=["measured", "predicted"], range=[theme.MEASURED, theme.PREDICTED])
WIDTH = 420
HEIGHT = 260
# Units, stated on every axis that shows them: sizes in bytes with SI (decimal) prefixes,
# bandwidth in GB/s = 1e9 bytes/s (nccl-tests and the marts use the same decimal unit).
SIZE_TITLE = "message size (bytes; k = 1e3, M = 1e6, G = 1e9)"
BW_TITLE = "bus bandwidth (GB/s; 1 GB = 1e9 bytes)"
SIZE_AXIS = alt.Axis(format="~s", values=[10**i for i in range(13)])  # decades: 1 .. 1T
# Up to this many ranks (or nodes, blocks) a heatmap labels every one at its cell's centre.
MAX_LABELLED = 16


def _index_axis(size: int) -> alt.Axis:
    """An axis of rank (node, block) cells [i, i + 1): integer labels at the cell centres."""
    if size <= MAX_LABELLED:
        return alt.Axis(
            values=[i + 0.5 for i in range(size)],
            labelExpr="floor(datum.value)",
            labelOverlap=False,
            grid=False,
            ticks=False,
        )
    return alt.Axis(tickMinStep=1, format="d")


def headline_errors(
    df: pl.DataFrame, *, title: str = "Model error per headline number"
) -> alt.Chart:
    """Relative error (measured - predicted) / predicted of each headline number."""
    return (
        alt.Chart(_data(df), title=title, width=WIDTH)
        .mark_bar()
        .encode(
            y=alt.Y("metric:N", title=None, sort=_order(df, "metric")),
            x=alt.X("rel_error:Q", title="relative error", axis=alt.Axis(format="%")),
            color=alt.condition(
                "abs(datum.rel_error) > 0.15",
                alt.value(theme.PALETTE[3]),
                alt.value(theme.MEASURED),
            ),
            tooltip=[
                "metric:N",
                "unit:N",
                "measured:Q",
                "predicted:Q",
                alt.Tooltip("rel_error:Q", format=".1%"),
            ],
        )
    )


def breakdown(df: pl.DataFrame, *, title: str = "Iteration time breakdown") -> alt.Chart:
    """Stacked bars of an iteration's time per component, one bar per stage and source."""
    return (
        alt.Chart(_data(df), title=title, width=WIDTH)
        .mark_bar()
        .encode(
            y=alt.Y("bar:N", title=None, sort=_order(df, "bar")),
            x=alt.X("seconds:Q", title="time per iteration (s)", stack="zero"),
            color=alt.Color("component:N", title="component", sort=alt.SortField("order")),
            order=alt.Order("order:Q"),
            tooltip=["bar:N", "component:N", alt.Tooltip("seconds:Q", format=".4f")],
        )
    )


def traffic_heatmap(
    cells: pl.DataFrame,
    boundaries: pl.DataFrame,
    *,
    unit: str,
    size: int,
    title: str,
    domain: tuple[float, float] | None = None,
) -> alt.LayerChart:
    """One rank x rank (or node/block) heatmap of bytes per iteration, with node boundaries.

    Args:
        cells: (src, dst, src_end, dst_end, bytes) of one source and class.
        boundaries: positions where a new node starts (axis units).
        unit: what one axis step is ("rank", "node", "block of N ranks").
        size: number of axis steps (the domain is [0, size]).
        title: chart title.
        domain: (min, max) bytes of the colour scale, for heatmaps drawn side by side on one
            scale (measured vs predicted, two iterations, two runs); default: this one's cells.
    """
    side = 260
    # log colours only where volumes span a decade or more; a near-uniform matrix (ring shares
    # of one buffer) would otherwise look bimodal over a 1 % spread
    lo = float(cells["bytes"].min() or 0) if cells.height else 0.0  # type: ignore[arg-type]
    hi = float(cells["bytes"].max() or 0) if cells.height else 0.0  # type: ignore[arg-type]
    if domain is not None:
        lo, hi = domain
    color_scale = (
        alt.Scale(type="log", scheme="viridis", domain=[lo, hi])
        if lo > 0 and hi / lo >= 10
        else alt.Scale(scheme="viridis", domain=[0, hi or 1])
    )
    xs = alt.Scale(domain=[0, size], nice=False)
    ys = alt.Scale(domain=[0, size], nice=False, reverse=True)
    rect = (
        alt.Chart(_data(cells))
        .mark_rect()
        .encode(
            x=alt.X("dst:Q", title=f"receiving {unit}", scale=xs, axis=_index_axis(size)),
            x2="dst_end:Q",
            y=alt.Y("src:Q", title=f"sending {unit}", scale=ys, axis=_index_axis(size)),
            y2="src_end:Q",
            color=alt.Color(
                "bytes:Q",
                title=["bytes / iteration", "(k = 1e3, M = 1e6, G = 1e9)"],
                scale=color_scale,
                legend=alt.Legend(format=".3~s", titleLimit=300),
            ),
            tooltip=[
                alt.Tooltip("src:Q", title=f"from {unit}"),
                alt.Tooltip("dst:Q", title=f"to {unit}"),
                alt.Tooltip("bytes:Q", format=".4s"),
            ],
        )
    )
    vrule = (
        alt.Chart(_data(boundaries))
        .mark_rule(color="#e45756", strokeWidth=1)
        .encode(x=alt.X("pos:Q", scale=xs, axis=_index_axis(size)))
    )
    hrule = (
        alt.Chart(_data(boundaries))
        .mark_rule(color="#e45756", strokeWidth=1)
        .encode(y=alt.Y("pos:Q", scale=ys, axis=_index_axis(size)))
    )
    return alt.layer(rect, vrule, hrule, title=title, width=side, height=side)


def onoff_overview(
    df: pl.DataFrame, *, unit: str, title: str = "Communication duty cycle, all ranks"
) -> alt.Chart:
    """Heatmap of the share of each iteration a rank (or block) spends communicating."""
    size = int(df["rank_end"].max() or 0) if df.height else 0  # type: ignore[arg-type]
    return (
        alt.Chart(_data(df), title=title, width=WIDTH)
        .mark_rect()
        .encode(
            x=alt.X("iteration:O", title="iteration"),
            y=alt.Y(
                "rank_axis:Q",
                title=unit,
                scale=alt.Scale(domain=[0, size], reverse=True, nice=False),
                axis=_index_axis(size),
            ),
            y2="rank_end:Q",
            color=alt.Color(
                "duty_cycle:Q", title="on share", scale=alt.Scale(domain=[0, 1], scheme="blues")
            ),
            tooltip=[
                "rank_axis:Q",
                "iteration:O",
                alt.Tooltip("duty_cycle:Q", format=".1%"),
                alt.Tooltip("on_ms:Q", format=".2f"),
                alt.Tooltip("iteration_ms:Q", format=".2f"),
            ],
        )
    )


def onoff_timeline(
    df: pl.DataFrame, *, title: str = "On/off timeline of selected ranks"
) -> alt.Chart:
    """Gantt of communication (on) and compute intervals per selected rank."""
    return (
        alt.Chart(_data(df), title=title, width=2 * WIDTH)
        .mark_bar(height=8)
        .encode(
            x=alt.X("start_ms:Q", title="time from first shown iteration start (ms)"),
            x2="end_ms:Q",
            y=alt.Y("rank:O", title="rank"),
            yOffset=alt.YOffset("activity:N"),
            color=alt.Color("activity:N", title="activity"),
            tooltip=["rank:O", "iteration:O", "activity:N", "start_ms:Q", "end_ms:Q"],
        )
    )


def message_sizes(
    df: pl.DataFrame, *, title: str = "Message sizes (CDF of calls)"
) -> alt.LayerChart:
    """Cumulative share of all calls by exact message size (Fig. 1), with each op/class's
    sizes as points on it.

    ``size_bytes`` is the size itself (a 125 MiB message plots at 131,072,000 bytes, not at a
    power-of-two bucket); the step line (``cdf_all``) rises at each size by that size's share
    of all calls; a point per op/class and size sits on it, its tooltip giving the op/class's
    calls and own CDF (``cdf_calls``).
    """
    x = alt.X("size_bytes:Q", title=SIZE_TITLE, scale=alt.Scale(type="log"), axis=SIZE_AXIS)
    y = alt.Y("cdf_all:Q", title="share of all calls <= size", scale=alt.Scale(domain=[0, 1]))
    steps = df.group_by("size_bytes").agg(pl.col("cdf_all").first()).sort("size_bytes")
    line = (
        alt.Chart(_data(steps)).mark_line(interpolate="step-after", color="#444").encode(x=x, y=y)
    )
    points = (
        alt.Chart(_data(df))
        .mark_point(filled=True, size=60)
        .encode(
            x=x,
            y=y,
            color=alt.Color("series:N", title="op (class)"),
            tooltip=[
                "series:N",
                alt.Tooltip("size_bytes:Q", title="message bytes", format=","),
                alt.Tooltip("size_mib:Q", title="MiB", format=".2f"),
                "calls:Q",
                "total_bytes:Q",
                alt.Tooltip("cdf_calls:Q", title="CDF within op (class)", format=".1%"),
                alt.Tooltip("cdf_all:Q", title="CDF of all calls", format=".1%"),
            ],
        )
    )
    return alt.layer(line, points, title=title, width=WIDTH, height=HEIGHT)


def bandwidth(
    points: pl.DataFrame, rules: pl.DataFrame, *, title: str = "Bus bandwidth vs message size"
) -> alt.LayerChart:
    """Median busbw per size bucket and op/class (Fig. 7), with the model's C_* as rules.

    Per-call rows and DeepSpeed summary rows are separate lines (shape = source), so one
    series never zigzags between two ways of measuring.
    """
    lo = float(points["busbw_gb_s"].min() or 0) if points.height else 0.0  # type: ignore[arg-type]
    hi = float(points["busbw_gb_s"].max() or 0) if points.height else 0.0  # type: ignore[arg-type]
    y_scale = alt.Scale(type="log") if lo > 0 and hi / lo >= 100 else alt.Scale()
    pts = (
        alt.Chart(_data(points))
        .mark_line(point=True)
        .encode(
            x=alt.X("size_bytes:Q", title=SIZE_TITLE, scale=alt.Scale(type="log"), axis=SIZE_AXIS),
            y=alt.Y("busbw_gb_s:Q", title=BW_TITLE, scale=y_scale, axis=alt.Axis(format="~g")),
            color=alt.Color("series:N", title="op (class)"),
            shape=alt.Shape("source:N", title="measured from"),
            detail="source:N",
            tooltip=[
                "series:N",
                "source:N",
                "size_bytes:Q",
                alt.Tooltip("busbw_gb_s:Q", format=".3f"),
                "calls:Q",
            ],
        )
    )
    if rules.is_empty():  # no model bandwidths: an empty layer only makes Vega warn
        return alt.layer(pts, title=title, width=WIDTH, height=HEIGHT)
    rule = alt.Chart(_data(rules)).mark_rule(strokeDash=[4, 3], color="#666").encode(y="gb_s:Q")
    text = (
        alt.Chart(_data(rules))
        .mark_text(align="left", dx=4, dy=-6, color="#666")
        .encode(y="gb_s:Q", x=alt.value(0), text="traffic_class:N")
    )
    return alt.layer(pts, rule, text, title=title, width=WIDTH, height=HEIGHT)


def stragglers(df: pl.DataFrame, *, title: str = "Communication time per rank") -> alt.Chart:
    """Mean communication time per iteration per rank; outliers highlighted."""
    return (
        alt.Chart(_data(df), title=title, width=2 * WIDTH)
        .mark_bar()
        .encode(
            x=alt.X("rank:O", title="rank", axis=alt.Axis(labelOverlap=True)),
            y=alt.Y("comm_ms:Q", title="communication per iteration (ms)"),
            color=alt.Color(
                "straggler:N",
                title="outlier",
                scale=alt.Scale(domain=[False, True], range=[theme.MEASURED, theme.PALETTE[3]]),
            ),
            tooltip=[
                "rank:O",
                "stage:O",
                alt.Tooltip("comm_ms:Q", format=".3f"),
                alt.Tooltip("exposed_ms:Q", format=".3f"),
            ],
        )
    )


def bubbles(df: pl.DataFrame, *, title: str = "Pipeline bubble per stage") -> alt.Chart:
    """Bubble ratio per stage, measured beside predicted."""
    return (
        alt.Chart(_data(df), title=title, width=WIDTH)
        .mark_bar()
        .encode(
            x=alt.X("stage:O", title="pipeline stage"),
            xOffset="source:N",
            y=alt.Y("bubble_ratio:Q", title="bubble / iteration", axis=alt.Axis(format="%")),
            color=alt.Color("source:N", title=None, scale=SOURCE_SCALE),
            tooltip=["stage:O", "source:N", alt.Tooltip("bubble_ratio:Q", format=".1%")],
        )
    )


def predictability(
    df: pl.DataFrame, *, title: str = "Iteration-to-iteration predictability"
) -> alt.Chart:
    """Matrix similarity, volume ratio and repeated call sequences over iterations."""
    return (
        alt.Chart(_data(df), title=title, width=WIDTH)
        .mark_line(point=True)
        .encode(
            x=alt.X("iteration:O", title="iteration"),
            y=alt.Y("value:Q", title="value (1 = same as previous)"),
            color=alt.Color("metric:N", title="metric"),
            tooltip=["iteration:O", "metric:N", alt.Tooltip("value:Q", format=".4f")],
        )
    )


def moe(df: pl.DataFrame, *, title: str = "MoE all-to-all non-uniformity") -> alt.Chart:
    """NF_rel, CV and matrix stability over iterations (Fig. 5)."""
    return (
        alt.Chart(_data(df), title=title, width=WIDTH)
        .mark_line(point=True)
        .encode(
            x=alt.X("iteration:O", title="iteration"),
            y=alt.Y("value:Q", title="value"),
            color=alt.Color("metric:N", title="metric"),
            tooltip=["iteration:O", "metric:N", alt.Tooltip("value:Q", format=".4f")],
        )
    )


# ---------------------------------------------------------------------------- the paper's figures
# (commscope.reports.paper prepares the frames; each chart is titled with the paper's figure number)


def moe_nf(df: pl.DataFrame, *, title: str = "Fig. 5: MoE non-uniform factor") -> alt.HConcatChart:
    """NF_abs over iterations as the paper plots it (bytes: max - min pair volume), NF_rel
    ((max - min) / mean) beside it, from a tidy (iteration, metric, value) frame."""
    panels = []
    for metric, y_title, fmt in (
        ("NF_abs (bytes)", "NF_abs = max - min pair bytes (k = 1e3, M = 1e6, G = 1e9)", "~s"),
        ("NF_rel", "NF_rel = (max - min) / mean", "~g"),
    ):
        panels.append(
            alt.Chart(
                _data(df.filter(pl.col("metric") == metric)), title=metric, width=WIDTH // 2 + 60
            )
            .mark_line(point=True)
            .encode(
                x=alt.X("iteration:Q", title="iteration", axis=alt.Axis(format="d", tickMinStep=1)),
                y=alt.Y("value:Q", title=y_title, axis=alt.Axis(format=fmt)),
                tooltip=["iteration:Q", alt.Tooltip("value:Q", format=".4~s")],
            )
        )
    return alt.hconcat(*panels, title=title)


def comm_ratio(df: pl.DataFrame, *, group_title: str, title: str) -> alt.Chart:
    """Stacked bars of each communication term (and the bubble) over iteration time, one bar
    per group (pipeline stage, or run), from a tidy (group, component, ratio) frame (Figs. 6, 8)."""
    return (
        alt.Chart(_data(df), title=title, width=WIDTH)
        .mark_bar()
        .encode(
            x=alt.X("group:N", title=group_title, sort=_order(df, "group")),
            y=alt.Y("ratio:Q", title="share of iteration time", axis=alt.Axis(format="%")),
            color=alt.Color("component:N", title="term"),
            tooltip=["group:N", "component:N", alt.Tooltip("ratio:Q", format=".2%")],
        )
    )


def class_bandwidth(
    df: pl.DataFrame, *, title: str = "Fig. 6b: bandwidth utilisation C per class"
) -> alt.Chart:
    """Each class's bus bandwidth C (GB/s), measured beside the model's (tidy traffic_class,
    source, gb_s)."""
    return (
        alt.Chart(_data(df), title=title, width=WIDTH)
        .mark_bar()
        .encode(
            x=alt.X("traffic_class:N", title="traffic class"),
            xOffset="source:N",
            y=alt.Y("gb_s:Q", title=BW_TITLE),
            color=alt.Color("source:N", title=None, scale=SOURCE_SCALE),
            tooltip=["traffic_class:N", "source:N", alt.Tooltip("gb_s:Q", format=".3f")],
        )
    )


def busbw_vs_size(
    per_call: pl.DataFrame,
    summary: pl.DataFrame,
    rules: pl.DataFrame,
    *,
    title: str = "Fig. 7: bus bandwidth vs message size",
) -> alt.LayerChart:
    """Per-call busbw as one line per op/class (filled points); DeepSpeed summary rows as
    hollow diamonds with no line, so no line joins a summary to per-call points; the model's
    C_* as dashed rules."""
    both = pl.concat([per_call, summary], how="vertical_relaxed")
    lo = float(both["busbw_gb_s"].min() or 0) if both.height else 0.0  # type: ignore[arg-type]
    hi = float(both["busbw_gb_s"].max() or 0) if both.height else 0.0  # type: ignore[arg-type]
    y_scale = alt.Scale(type="log") if lo > 0 and hi / lo >= 100 else alt.Scale()
    x = alt.X("size_bytes:Q", title=SIZE_TITLE, scale=alt.Scale(type="log"), axis=SIZE_AXIS)
    y = alt.Y("busbw_gb_s:Q", title=BW_TITLE, scale=y_scale, axis=alt.Axis(format="~g"))
    tip = [
        "series:N",
        "source:N",
        alt.Tooltip("size_bytes:Q", format=","),
        alt.Tooltip("busbw_gb_s:Q", format=".3f"),
        "calls:Q",
    ]
    layers: list[alt.Chart] = []
    if per_call.height:
        layers.append(
            alt.Chart(_data(per_call))
            .mark_line(point=True)
            .encode(x=x, y=y, color=alt.Color("series:N", title="op (class)"), tooltip=tip)
        )
    if summary.height:
        layers.append(
            alt.Chart(_data(summary))
            .mark_point(shape="diamond", size=90, filled=False, strokeWidth=2)
            .encode(x=x, y=y, color=alt.Color("series:N", title="op (class)"), tooltip=tip)
        )
    if not rules.is_empty():
        layers.append(
            alt.Chart(_data(rules)).mark_rule(strokeDash=[4, 3], color="#666").encode(y="gb_s:Q")
        )
        layers.append(
            alt.Chart(_data(rules))
            .mark_text(align="left", dx=4, dy=-6, color="#666")
            .encode(y="gb_s:Q", x=alt.value(0), text="traffic_class:N")
        )
    return alt.layer(*layers, title=title, width=WIDTH, height=HEIGHT)


def model_vs_measured(
    df: pl.DataFrame, *, title: str = "Fig. 10: analytical model vs measured"
) -> alt.HConcatChart:
    """T_comp and T_comm (s) and R_bubble and R_comm (ratios), measured beside predicted, from
    a tidy (term, unit, source, value) frame."""
    panels = []
    for unit, y_title, fmt in (("s", "time per iteration (s)", "~g"), ("ratio", "ratio", "%")):
        part = df.filter(pl.col("unit") == unit)
        if part.is_empty():
            continue
        panels.append(
            alt.Chart(_data(part), width=WIDTH // 2)
            .mark_bar()
            .encode(
                x=alt.X("term:N", title=None, sort=_order(part, "term")),
                xOffset="source:N",
                y=alt.Y("value:Q", title=y_title, axis=alt.Axis(format=fmt)),
                color=alt.Color("source:N", title=None, scale=SOURCE_SCALE),
                tooltip=["term:N", "source:N", alt.Tooltip("value:Q", format=".4g")],
            )
        )
    return alt.hconcat(*panels, title=title)


def normalised(df: pl.DataFrame, *, title: str = "Fig. 8a: B normalised to A") -> alt.Chart:
    """Communication and iteration time of each run over run A's (tidy run, metric, value;
    runs in the frame's order, A first)."""
    runs = _order(df, "run")
    return (
        alt.Chart(_data(df), title=title, width=WIDTH)
        .mark_bar()
        .encode(
            x=alt.X("metric:N", title=None),
            xOffset=alt.XOffset("run:N", sort=runs),
            y=alt.Y("value:Q", title="time / run A's time"),
            color=alt.Color("run:N", title="run", sort=runs),
            tooltip=["run:N", "metric:N", alt.Tooltip("value:Q", format=".3f")],
        )
    )


# ---------------------------------------------------------------------------- stragglers
# (commscope.reports.stragglers prepares the frames from the collective_instances and stragglers marts)


def wait_heatmap(
    cells: pl.DataFrame,
    *,
    block: int,
    size: int,
    iteration_unit: str,
    measure: str,
    title: str = "Wait caused per rank and iteration",
) -> alt.Chart:
    """Heatmap of the wait each rank (or rank block) caused its peers per iteration (or
    iteration block): the rank the others waited for stands out as a dark row.

    Args:
        cells: (rank_axis, rank_end, iteration, wait_ms, instances_last, top_rank,
            top_wait_ms): a cell spans ranks [rank_axis, rank_end); cells with no wait caused
            are absent (white).
        block: ranks per cell of the rank axis (1: rank by rank).
        size: the rank axis is [0, size) in ranks.
        iteration_unit: "iteration" or "block of N iterations" (labelled by its first).
        measure: what the colour sums (same-stage waits, or all classes).
    """
    rank_title = "rank" if block == 1 else f"rank (cells: blocks of {block} ranks)"
    rows = size // block
    cols = cells["iteration"].n_unique() if cells.height else 1
    width = max(WIDTH, min(2 * WIDTH, 16 * cols))  # a few iterations need no double width
    return (
        alt.Chart(_data(cells), title=title, width=width, height=max(160, min(520, 18 * rows)))
        .mark_rect()
        .encode(
            x=alt.X("iteration:O", title=iteration_unit, axis=alt.Axis(labelAngle=0)),
            y=alt.Y(
                "rank_axis:Q",
                title=rank_title,
                scale=alt.Scale(domain=[0, size], reverse=True, nice=False),
                axis=_index_axis(size),
            ),
            y2="rank_end:Q",
            color=alt.Color(
                "wait_ms:Q",
                title=["wait caused (ms)", measure],
                scale=alt.Scale(scheme="orangered", domainMin=0),
                legend=alt.Legend(titleLimit=320),
            ),
            tooltip=[
                alt.Tooltip("rank_axis:Q", title="rank" if block == 1 else "first rank"),
                alt.Tooltip("iteration:O", title=iteration_unit),
                alt.Tooltip("wait_ms:Q", title="wait caused (ms)", format=".4g"),
                alt.Tooltip("instances_last:Q", title="instances last"),
                alt.Tooltip("top_rank:Q", title="top rank"),
                alt.Tooltip("top_wait_ms:Q", title="top rank's wait (ms)", format=".4g"),
            ],
        )
    )


def skew_per_class(
    points: pl.DataFrame,
    ranges: pl.DataFrame,
    *,
    title: str = "Arrival skew per class (complete instances)",
) -> alt.LayerChart:
    """Median, p95 and max arrival skew (µs) per traffic class as points on a line from the
    median to the max; a log axis where the skews span a decade or more.

    Args:
        points: tidy (traffic_class, statistic, skew_us), statistic in median / p95 / max.
        ranges: one row per class with median_skew_us and max_skew_us (the line's ends).
    """
    lo = float(points["skew_us"].min() or 0) if points.height else 0.0  # type: ignore[arg-type]
    hi = float(points["skew_us"].max() or 0) if points.height else 0.0  # type: ignore[arg-type]
    y_scale = alt.Scale(type="log") if lo > 0 and hi / lo >= 10 else alt.Scale(zero=True)
    x = alt.X(
        "traffic_class:N",
        title="traffic class",
        sort=_order(ranges, "traffic_class"),
        axis=alt.Axis(labelAngle=0),
    )
    y_title = "skew: last - first arrival (µs)"
    line = (
        alt.Chart(_data(ranges.select("traffic_class", "median_skew_us", "max_skew_us")))
        .mark_rule(color="#999", strokeWidth=2)
        .encode(
            x=x,
            y=alt.Y("median_skew_us:Q", title=y_title, scale=y_scale),
            y2="max_skew_us:Q",
        )
    )
    stats = ["median", "p95", "max"]
    dots = (
        alt.Chart(_data(points))
        .mark_point(filled=True, size=90)
        # drawn median, p95, max: where two coincide the larger statistic shows
        .transform_calculate(z=f"indexof({stats}, datum.statistic)")
        .encode(
            x=x,
            y=alt.Y("skew_us:Q", title=y_title, scale=y_scale),
            order=alt.Order("z:Q"),
            color=alt.Color("statistic:N", title="skew", sort=stats),
            tooltip=["traffic_class:N", "statistic:N", alt.Tooltip("skew_us:Q", format=".4g")],
        )
    )
    return alt.layer(line, dots, title=title, width=WIDTH, height=HEIGHT)
