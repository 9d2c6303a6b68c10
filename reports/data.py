"""Data preparation for reports: the marts of one run read into small, chart-ready frames.

Why: every number a report shows is computed here (Polars over the materialised marts, plus a
few bounded DuckDB queries), never inside chart code, so charts stay pure encodings and this
module is testable without HTML. Large runs are reduced here: rank x rank matrices become
node or rank-block matrices above :data:`MAX_AXIS` ranks, per-rank overviews become rank
blocks, and the on/off timeline shows a few selected ranks over a few iterations with at most
:data:`MAX_TIMELINE_ROWS` intervals. A 1024-rank report therefore embeds a bounded number of
rows whatever the run's size.

A mart's rows come in whatever order its derive wrote them (no ORDER BY on call-sized marts),
so no frame here depends on it: tables sort by a full key, a row picked among ties is picked by
a stated rule, and a float mean adds in the mart's grain order (its last bits would otherwise
move); chart records are then sorted by every column (:mod:`commscope.reports.charts`). Two
builds from the same marts give the same page.

A view that cannot be computed raises :class:`Unavailable` with the reason (mart not derived,
an older run without the mart, no data of that kind); the page then shows the view's gap from
:mod:`commscope.reports.gaps` (what the input lacks and what to record), or this reason where none is
found.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl

from commscope.pipeline.model_inputs import StoredConfig
from commscope.pipeline.sql_modules import mart_names
from commscope.reports.headline import Headline, model_platform
from commscope.reports.headline import headline as compute_headline

if TYPE_CHECKING:
    from commscope.pipeline.store import Store

# Largest rank axis drawn rank by rank; above it, ranks are grouped into nodes or blocks.
MAX_AXIS = 128
# Ranks and iterations shown in the detailed on/off timeline.
MAX_TIMELINE_ROWS = 5_000
# Rows shown in data-quality tables.
MAX_TABLE_ROWS = 200
# Above this many calls, message sizes of mixed power-of-two buckets are not re-read per call.
MAX_EXACT_SIZE_CALLS = 5_000_000
# Traffic classes in display order.
CLASSES = ["TP", "PP", "DP", "EP", "EmbTableSyn", "other"]


class Unavailable(Exception):
    """A view cannot be drawn for this run; the message says why."""


@dataclass
class RunData:
    """Everything the report of one run reads, loaded once.

    Attributes:
        run_id: the run.
        stored: the run's stored configuration (None when there is none).
        run_config: the one-row run_config frame as a dict (nulls when unknown).
        marts: materialised marts of this run, by name.
        missing: marts that could not be read, with the reason.
        predicted_times: the model's time terms (seconds, ratios), empty without a model.
        predicted_matrix: the model's rank x rank bytes per iteration and class.
        predicted_stage_times: the model's terms per stage (stage, term, value; seconds),
            every stage within one common iteration (its bubble by eqs. 5-7 per stage).
        predicted_signatures: the model's calls per iteration per rank and call signature
            (rank, stage, traffic_class, op, group_size, msg_bytes, count).
        predicted_platform: the constants the model used (bus bandwidth per class, stated,
            μ, F), as derive published them.
        con: a read-only catalog connection for the canonical tables (data quality, timeline).
        gaps: per view, why it is empty and what to record (commscope.reports.gaps.Gap), set by
            commscope.reports.html.run_sections.
        paper_rank: the rank of the paper's Table 3 (commscope.reports.paper).
        advice: the stored output of ``advise --run`` for this run (``advice/<run>.json``),
            or None.
    """

    run_id: str
    stored: StoredConfig | None
    run_config: dict[str, Any]
    marts: dict[str, pl.DataFrame] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    predicted_times: dict[str, float] = field(default_factory=dict)
    predicted_matrix: pl.DataFrame = field(default_factory=pl.DataFrame)
    predicted_stage_times: pl.DataFrame = field(default_factory=pl.DataFrame)
    predicted_signatures: pl.DataFrame = field(default_factory=pl.DataFrame)
    predicted_platform: pl.DataFrame = field(default_factory=pl.DataFrame)
    con: duckdb.DuckDBPyConnection | None = None
    gaps: dict[str, Any] = field(default_factory=dict)
    paper_rank: int = 0
    advice: dict[str, Any] | None = None

    def mart(self, name: str) -> pl.DataFrame:
        """A mart's rows for this run, or raise Unavailable with the reason."""
        if name not in self.marts:
            raise Unavailable(self.missing.get(name, f"mart {name} not read"))
        return self.marts[name]

    @property
    def synthetic(self) -> bool:
        """True when the run's config says its logs were generated."""
        return bool(self.run_config.get("synthetic"))

    @property
    def platform(self) -> dict[str, Any]:
        """The config's platform section (bandwidths in bytes/s), or empty."""
        if self.stored is None:
            return {}
        return dict(self.stored.config.get("platform", {}))

    def gpus_per_node(self) -> int | None:
        """GPUs per node from the config, else from the traffic matrix's node columns."""
        gpn = self.run_config.get("gpus_per_node")
        return int(gpn) if gpn else None

    def world(self) -> int:
        """Number of ranks: the run_world mart's world_size (int_run_world, the SQL's one
        definition: the config's pp*tp*dp, else the largest group, communicator, trace-stated
        world size or rank + 1 the logs show). A run whose frames carry no run_world (built by
        hand, or derived before the mart existed) is drawn on the ranks its marts show."""
        rw = self.marts.get("run_world")
        if rw is not None and rw.height and rw["world_size"][0] is not None:
            return int(rw["world_size"][0])
        seen = 0
        for name, cols in (
            ("on_off", ("rank",)),
            ("iterations", ("rank",)),
            ("traffic_matrix", ("src_rank", "dst_rank")),
        ):
            df = self.marts.get(name)
            if df is None or df.is_empty():
                continue
            for c in cols:
                m = df[c].max()
                if m is not None:
                    seen = max(seen, int(m) + 1)  # type: ignore[call-overload]
        return seen


def mart_path_reason(store: Store, name: str, run_id: str) -> str:
    """Why a mart is missing for a run, phrased for the page."""
    if name not in mart_names():
        return f"mart {name} is not defined by this version of commscope"
    return f"mart {name} was not derived for this run (run `commscope derive {run_id}`)"


def read_model_inputs(store: Store, run_id: str) -> dict[str, pl.DataFrame]:
    """The run's published model inputs as derive wrote them (``run_config`` and the
    analytical model's ``predicted_*`` frames), by relation name; empty before a derive."""
    return {name: pl.read_parquet(path) for name, path in store.model_input_files(run_id).items()}


def stored_config(run_config: dict[str, Any]) -> StoredConfig | None:
    """The run's configuration from its ``run_config`` row, or None when it has none."""
    raw = run_config.get("config_json")
    if not raw:
        return None
    return StoredConfig(
        run_id=str(run_config.get("run_id")),
        config=json.loads(str(raw)),
        source=str(run_config.get("config_source") or "unknown"),
        synthetic=bool(run_config.get("synthetic")),
    )


def read_advice(store: Store, run_id: str) -> dict[str, Any] | None:
    """The advice ``commscope advise --run RUN`` stored for the run (``advice/<run>.json``,
    :meth:`commscope.pipeline.store.Store.advice_path`), or None."""
    path = store.advice_path(run_id)
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def load_run(store: Store, run_id: str) -> RunData:
    """Read every published mart of a run, its config and the model's predictions.

    A pure reader: the config and the predictions are the ``run_config`` and ``predicted_*``
    relations the run's derive published beside its marts (the same generation), never
    recomputed here; a run that was not derived shows every view's reason instead (the
    command or flow decides whether to derive first).
    """
    inputs = read_model_inputs(store, run_id)
    rc_frame = inputs.get("run_config")
    rcfg: dict[str, Any] = (
        rc_frame.row(0, named=True)
        if rc_frame is not None and rc_frame.height
        else {"run_id": run_id, "config_source": "none"}
    )
    data = RunData(run_id, stored_config(rcfg), rcfg)
    published = store.mart_files(run_id)  # one published generation for every mart
    for name in mart_names():  # every mart sql/marts defines: no list of its own here
        path = published.get(name)
        if path is not None:
            data.marts[name] = pl.read_parquet(path)
        else:
            data.missing[name] = mart_path_reason(store, name, run_id)
    times = inputs.get("predicted_times")
    if times is not None:
        data.predicted_times = {
            str(r["term"]): float(r["value"]) for r in times.iter_rows(named=True)
        }
    data.predicted_matrix = inputs.get("predicted_matrix", pl.DataFrame())
    data.predicted_stage_times = inputs.get("predicted_stage_times", pl.DataFrame())
    data.predicted_signatures = inputs.get("predicted_signatures", pl.DataFrame())
    data.predicted_platform = inputs.get("predicted_platform", pl.DataFrame())
    data.advice = read_advice(store, run_id)
    data.con = store.connect(read_only=True)
    return data


def stored_headline(store: Store, run_id: str) -> dict[str, Any]:
    """The run's headline rows as JSON (:func:`commscope.reports.headline.headline`, the same numbers as
    the report and ``compare``); ``{"available": false, "reason": ...}`` when the run's marts
    cannot be read."""
    try:
        data = load_run(store, run_id)
    except Exception as exc:  # no marts yet, an unreadable store: say why, keep the summary
        return {"available": False, "reason": f"{type(exc).__name__}: {exc}"}
    try:
        out: dict[str, Any] = {"available": True, **run_headline(data).to_json()}
        if data.missing:
            out["marts_missing"] = sorted(data.missing)
        return out
    finally:
        if data.con is not None:
            data.con.close()


def _query(data: RunData, sql: str, params: dict[str, Any] | None = None) -> pl.DataFrame:
    """Run a parameterised query on the run's catalog connection."""
    if data.con is None:
        raise Unavailable("no store connection")
    return data.con.sql(sql, params={"run_id": data.run_id, **(params or {})}).pl()


# ---------------------------------------------------------------------------- headline


def run_headline(data: RunData) -> Headline:
    """The run's headline (:func:`commscope.reports.headline.headline`: the one computation the report,
    ``summary --json`` and ``compare`` share)."""
    return compute_headline(
        data.marts,
        data.predicted_times,
        model_platform(data.predicted_platform),
    )


def headline(data: RunData) -> pl.DataFrame:
    """Headline rows, measured beside predicted (see :mod:`commscope.reports.headline`)."""
    return run_headline(data).rows


HEADLINE_TERMS = ("T_comm", "R_comm", "R_bubble", "R_bubble_eq7")
"""model_vs_measured terms the headline states with its own, like-with-like definition."""


def model_vs_measured(data: RunData, *, calibrated: bool | None = None) -> pl.DataFrame:
    """The model_vs_measured mart as a table (term, unit, measured, predicted, errors), its
    rows in the mart's term_order.

    T_comm, R_comm, R_bubble and R_bubble_eq7 are left out: the headline (:mod:`commscope.reports.headline`) states
    them with one definition on both sides, so the page shows one number per quantity. With
    ``calibrated`` False (the platform's constants do not apply) the errors are blanked.
    """
    df = data.mart("model_vs_measured")
    if df.is_empty():
        raise Unavailable("the run has no model prediction to compare with (no model config)")
    if "term" in df.columns:
        df = df.filter(~pl.col("term").is_in(HEADLINE_TERMS))
    if calibrated is False:
        df = df.with_columns(
            [pl.lit(None, pl.Float64).alias(c) for c in ("abs_error", "rel_error") if c in df]
        )
    cols = [
        c
        for c in ("term", "unit", "measured", "predicted", "abs_error", "rel_error", "n_samples")
        if c in df.columns
    ]
    if "term" in df.columns:
        # the mart's order (its term_order: the model's times, ratios, then bandwidths), whatever
        # order its rows were read in; a run derived before term_order existed, by name
        keys = [c for c in ("term_order", "term") if c in df.columns]
        df = df.sort(keys, nulls_last=True)
    out = df.select(cols).head(MAX_TABLE_ROWS)
    if "unit" not in out.columns:
        return out
    # bandwidths in the headline's unit: GB/s (1e9 bytes/s), not bytes/s
    bps = pl.col("unit") == "bytes/s"
    scaled = [
        pl.when(bps).then(pl.col(c) / 1e9).otherwise(pl.col(c)).alias(c)
        for c in ("measured", "predicted", "abs_error")
        if c in out.columns
    ]
    return out.with_columns(
        *scaled, pl.when(bps).then(pl.lit("GB/s")).otherwise("unit").alias("unit")
    )


# ---------------------------------------------------------------------------- breakdown

BREAKDOWN_COMPONENTS = [
    ("t_comp_ns", "t_comp", "compute"),
    ("t_tp_ns", "t_tp", "TP"),
    ("t_pp_ns", "t_pp", "PP"),
    ("t_dp_ns", "t_dp", "DP"),
    ("t_ep_ns", "t_ep", "EP"),
    ("t_emb_ns", "t_emb", "EmbTableSyn"),
    ("t_other_comm_ns", None, "other comm"),
    ("t_bubble_ns", "t_bubble", "bubble"),
    ("t_idle_ns", None, "idle"),
]


def breakdown(data: RunData) -> pl.DataFrame:
    """Iteration time split into compute/TP/PP/DP/EP/bubble, per stage, measured vs predicted.

    Measured: per pipeline stage, the median over ranks and iterations of each term of
    iteration_breakdown. Predicted: the model's terms of every stage within one common
    iteration (predicted_stage_times; before it existed, stage 0's predicted_times).
    Returns a tidy frame (bar, source, component, order, seconds).
    """
    bd = data.mart("iteration_breakdown")
    if bd.is_empty():
        raise Unavailable("iteration_breakdown has no rows for this run (no timed iterations)")
    cols = [(c, lbl) for c, _, lbl in BREAKDOWN_COMPONENTS if c in bd.columns]
    stage = pl.col("stage") if "stage" in bd.columns else pl.lit(0)
    meas = (
        bd.with_columns(stage.fill_null(-1).alias("_stage"))
        .group_by("_stage")
        .agg([pl.col(c).median().alias(lbl) for c, lbl in cols])
        .unpivot(index="_stage", variable_name="component", value_name="ns")
        .with_columns(
            bar=pl.when(pl.col("_stage") < 0)
            .then(pl.lit("measured, all ranks"))
            .otherwise(pl.format("stage {} measured", pl.col("_stage"))),
            source=pl.lit("measured"),
            seconds=pl.col("ns").cast(pl.Float64) / 1e9,
        )
        .select("bar", "source", "component", "seconds")
    )
    labels = {key: lbl for _, key, lbl in BREAKDOWN_COMPONENTS if key is not None}
    pst = data.predicted_stage_times
    if not pst.is_empty() and {"stage", "term", "value"} <= set(pst.columns):
        # every stage within one common iteration, its own bubble (eqs. 5-7 per stage)
        pred_rows = [
            {
                "bar": f"stage {int(r['stage'])} predicted",
                "source": "predicted",
                "component": labels[r["term"]],
                "seconds": float(r["value"]),
            }
            for r in pst.iter_rows(named=True)
            if r["term"] in labels
        ]
    else:
        pt = data.predicted_times
        pred_rows = [
            {
                "bar": "stage 0 predicted",
                "source": "predicted",
                "component": lbl,
                "seconds": pt[key],
            }
            for key, lbl in labels.items()
            if key in pt
        ]
    pred = pl.DataFrame(
        pred_rows,
        schema={"bar": pl.Utf8, "source": pl.Utf8, "component": pl.Utf8, "seconds": pl.Float64},
    )
    order = {lbl: i for i, (_, _, lbl) in enumerate(BREAKDOWN_COMPONENTS)}
    out = pl.concat([meas, pred]).with_columns(
        order=pl.col("component").replace_strict(order, default=99, return_dtype=pl.Int32)
    )
    return out.filter(pl.col("seconds").is_not_null()).sort("bar", "order")


# ---------------------------------------------------------------------------- traffic


@dataclass
class Traffic:
    """Heatmap cells and node boundaries for the traffic-matrix views.

    Attributes:
        cells: (source, traffic_class, src, dst, src_end, dst_end, bytes): sending and
            receiving axis position (rank, node or block) and the cell's far edge.
        boundaries: positions (axis units) where a new node starts.
        unit: what one axis step is: "rank", "node" or "block of N ranks".
        size: number of axis steps.
    """

    cells: pl.DataFrame
    boundaries: pl.DataFrame
    unit: str
    size: int


def traffic(data: RunData) -> Traffic:
    """Bytes per iteration from rank i to rank j per class, measured and predicted.

    Measured: traffic_matrix with a known destination, summed over iterations and divided by
    the number of iterations with traffic (the predicted matrix is per iteration). Above
    MAX_AXIS ranks the axes are nodes (when nodes are known and few enough) or equal rank
    blocks; cells then hold the block's total.
    """
    tm = data.mart("traffic_matrix")
    world = data.world()
    gpn = data.gpus_per_node()
    known = tm.filter(pl.col("dst_rank").is_not_null())
    n_iter = max(1, known["iteration"].n_unique())
    meas = (
        known.group_by("src_rank", "dst_rank", "traffic_class")
        .agg(pl.col("bytes").sum() / n_iter)
        .with_columns(source=pl.lit("measured"))
    )
    pm = data.predicted_matrix
    if not pm.is_empty():
        pred = pm.select(
            "src_rank", "dst_rank", "traffic_class", pl.col("bytes").cast(pl.Float64)
        ).with_columns(source=pl.lit("predicted"))
        both = pl.concat([meas.cast({"bytes": pl.Float64}), pred], how="diagonal_relaxed")
    else:
        both = meas.cast({"bytes": pl.Float64})
    if both.is_empty():
        raise Unavailable("no rank-to-rank traffic with known destinations in this run")
    world = max(world, int(both["src_rank"].max()) + 1, int(both["dst_rank"].max()) + 1)  # type: ignore[arg-type]
    block, unit = 1, "rank"
    if world > MAX_AXIS:
        if gpn and math.ceil(world / gpn) <= MAX_AXIS:
            block, unit = gpn, "node"
        else:
            block = math.ceil(world / MAX_AXIS)
            unit = f"block of {block} ranks"
    cells = (
        both.with_columns(
            src=(pl.col("src_rank") // block).cast(pl.Int32),
            dst=(pl.col("dst_rank") // block).cast(pl.Int32),
        )
        .group_by("source", "traffic_class", "src", "dst")
        .agg(pl.col("bytes").sum())
        .filter(pl.col("bytes") > 0)
        .with_columns(src_end=pl.col("src") + 1, dst_end=pl.col("dst") + 1)
        .sort("source", "traffic_class", "src", "dst")
    )
    bounds: list[int] = []
    if block == 1 and gpn and gpn < world:
        bounds = list(range(gpn, world, gpn))
    elif unit.startswith("block") and gpn and gpn < world:
        bounds = [b for b in range(gpn, world, gpn) if b % block == 0][:MAX_AXIS]
        bounds = [b // block for b in bounds]
    size = math.ceil(world / block)
    return Traffic(cells, pl.DataFrame({"pos": bounds}, schema={"pos": pl.Int32}), unit, size)


# ---------------------------------------------------------------------------- on/off


def _rank_blocks(n_ranks: int) -> int:
    return 1 if n_ranks <= MAX_AXIS else math.ceil(n_ranks / MAX_AXIS)


def onoff_overview(data: RunData) -> tuple[pl.DataFrame, str]:
    """Duty cycle (communication-active share) per rank (or rank block) and iteration."""
    oo = data.mart("on_off")
    if oo.is_empty():
        raise Unavailable("on_off has no rows (no timed iterations in this run)")
    block = _rank_blocks(data.world())
    unit = "rank" if block == 1 else f"rank block of {block}"
    df = (
        oo.sort("rank", "iteration")  # means of a block add in one order (their last bits)
        .with_columns(rank_axis=(pl.col("rank") // block).cast(pl.Int32))
        .group_by("rank_axis", "iteration", maintain_order=True)
        .agg(
            pl.col("duty_cycle").mean(),
            (pl.col("on_ns").mean() / 1e6).alias("on_ms"),
            (pl.col("iteration_ns").mean() / 1e6).alias("iteration_ms"),
        )
        .with_columns(rank_end=pl.col("rank_axis") + 1)
        .sort("rank_axis", "iteration")
    )
    return df, unit


def onoff_timeline(data: RunData) -> pl.DataFrame:
    """On (communication) and compute intervals of sampled ranks over the middle iterations.

    Reads the on_off_timeline mart (a bounded sample chosen in SQL: at most 8 ranks and the 3
    middle iterations); times are ms from the earliest shown interval. Compute intervals are
    dropped first when the rows exceed MAX_TIMELINE_ROWS, then the tail is cut.
    """
    df = data.mart("on_off_timeline")
    if df.is_empty():
        raise Unavailable("on_off_timeline has no rows (no timed intervals in this run)")
    df = df.select("rank", "iteration", "activity", "ts_ns", "end_ns")
    if df.is_empty():
        raise Unavailable("no timed communication intervals for the selected ranks")
    if df.height > MAX_TIMELINE_ROWS:  # drop compute first (the view is about comm on/off)
        df = df.filter(pl.col("activity") == "comm")
    if df.height > MAX_TIMELINE_ROWS:
        df = df.sort("ts_ns", "rank", "iteration", "activity", "end_ns").head(MAX_TIMELINE_ROWS)
    t0 = int(df["ts_ns"].min())  # type: ignore[arg-type]
    return df.select(
        pl.col("rank").cast(pl.Int32),
        pl.col("iteration").cast(pl.Int32),
        pl.col("activity").replace({"comm": "communication (on)"}),
        ((pl.col("ts_ns") - t0) / 1e6).round(4).alias("start_ms"),
        ((pl.col("end_ns") - t0) / 1e6).round(4).alias("end_ms"),
    ).sort("rank", "start_ms")


# ---------------------------------------------------------------------------- sizes, bandwidth


def message_sizes(data: RunData) -> pl.DataFrame:
    """Calls per exact message size and op/class, with the CDF of calls (Fig. 1).

    Per-call logs are preferred over DeepSpeed summaries. The message_sizes mart groups sizes
    into power-of-two buckets and keeps each bucket's smallest and largest size: where those
    agree (one size per bucket, the usual case) the size is exact; otherwise the per-call sizes
    are read from the call_signatures mart (the counted calls that move data, per exact size).
    Summary buckets holding several sizes, and mixed buckets of runs above
    :data:`MAX_EXACT_SIZE_CALLS` calls (a bounded report time), keep their mean size
    (``size_exact`` false).
    ``size_bytes`` is never floored to a power of two: 125 MiB is 131,072,000 bytes.
    ``cdf_calls`` is the share of the op/class's calls of this size or smaller, ``cdf_all`` the
    share of all calls (every op and class).
    """
    ms = data.mart("message_sizes")
    if ms.is_empty():
        raise Unavailable("no communication calls with message sizes in this run")
    src = "comm_ops" if (ms["source"] == "comm_ops").any() else "comm_summaries"
    sel = ms.filter(pl.col("source") == src)
    single = pl.col("min_bytes") == pl.col("max_bytes")
    if "min_bytes" in sel.columns and sel.select(single.all()).item():
        exact = sel.select(
            "op", "traffic_class", pl.col("min_bytes").alias("size_bytes"), "calls", "total_bytes"
        ).with_columns(size_exact=pl.lit(True))
    elif src == "comm_ops" and int(sel["calls"].sum()) <= MAX_EXACT_SIZE_CALLS:
        exact = (
            data.mart("call_signatures")
            .group_by("op", "traffic_class", pl.col("msg_bytes").alias("size_bytes"))
            .agg(pl.col("calls").sum(), pl.col("total_bytes").sum())
            .with_columns(size_exact=pl.lit(True))
        )
    else:  # summaries, or too many calls to re-read: a mixed bucket keeps its mean size
        exact = sel.select(
            "op",
            "traffic_class",
            pl.when(single)
            .then(pl.col("min_bytes"))
            .otherwise(pl.col("total_bytes") // pl.col("calls"))
            .alias("size_bytes"),
            "calls",
            "total_bytes",
            single.alias("size_exact"),
        )
    out = (
        exact.with_columns(
            pl.col("size_bytes").cast(pl.Int64).clip(lower_bound=1),
            pl.col("calls").cast(pl.Int64),
            pl.col("total_bytes").cast(pl.Int64),
        )
        .sort("op", "traffic_class", "size_bytes")
        .with_columns(
            source=pl.lit(src),
            series=pl.format("{} ({})", pl.col("op"), pl.col("traffic_class")),
            size_mib=pl.col("size_bytes") / 2**20,
            cdf_calls=pl.col("calls").cum_sum().over("op", "traffic_class")
            / pl.col("calls").sum().over("op", "traffic_class"),
        )
    )
    per_size = (
        out.group_by("size_bytes")
        .agg(pl.col("calls").sum().alias("_c"))
        .sort("size_bytes")
        .with_columns(cdf_all=pl.col("_c").cum_sum() / pl.col("_c").sum())
        .drop("_c")
    )
    return (
        out.join(per_size, on="size_bytes", how="left")
        .select(
            "source",
            "series",
            "op",
            "traffic_class",
            "size_bytes",
            "size_mib",
            "size_exact",
            "calls",
            "total_bytes",
            "cdf_calls",
            "cdf_all",
        )
        .sort("series", "size_bytes")
    )


# How the page names effective_bandwidth's sources (one line each in the chart).
BW_SOURCES = {"comm_ops": "per call", "comm_summaries": "DeepSpeed summary"}


def bandwidth(data: RunData) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Bus bandwidth vs message size per op and class, and the config's link bandwidths.

    Returns (points, rules): points (series, op, traffic_class, source, size_bytes,
    busbw_gb_s, calls) from effective_bandwidth; rules (traffic_class, gb_s) from the
    config's c_tp/c_pp/c_dp/c_ep (the model's assumed busbw).
    """
    eb = data.mart("effective_bandwidth")
    pts = eb.filter(pl.col("busbw_gb_s").is_not_null() & (pl.col("busbw_gb_s") > 0))
    if pts.is_empty():
        raise Unavailable("no timed calls with a known group size (busbw needs both)")
    pts = pts.select(
        pl.format("{} ({})", pl.col("op"), pl.col("traffic_class")).alias("series"),
        "op",
        "traffic_class",
        pl.col("source").replace(BW_SOURCES),
        pl.coalesce("msg_bytes", "size_bucket_bytes").clip(lower_bound=1).alias("size_bytes"),
        "busbw_gb_s",
        "calls",
    ).sort("series", "size_bytes")
    plat = data.platform
    rules = pl.DataFrame(
        [
            {"traffic_class": cls, "gb_s": float(plat[k]) / 1e9}
            for cls, k in (("TP", "c_tp"), ("PP", "c_pp"), ("DP", "c_dp"), ("EP", "c_ep"))
            if plat.get(k)
        ],
        schema={"traffic_class": pl.Utf8, "gb_s": pl.Float64},
    )
    return pts, rules


# ---------------------------------------------------------------------------- per rank


def stragglers(data: RunData) -> pl.DataFrame:
    """Communication time per rank (mean per iteration), flagged when far above the median.

    From iteration_breakdown (comm_ns, exposed_comm_ns) when derived, else on_off (on_ns). A
    rank is flagged when its time exceeds the median by more than 3 median absolute
    deviations and by more than 10%: in a synchronous job the slow rank waits least and its
    peers wait in collectives, so both tails matter; the chart shows all ranks.
    """
    bd = data.marts.get("iteration_breakdown")
    if bd is not None and not bd.is_empty():
        per = bd.group_by("rank").agg(
            (pl.col("comm_ns").mean() / 1e6).alias("comm_ms"),
            (pl.col("exposed_comm_ns").mean() / 1e6).alias("exposed_ms"),
            pl.col("stage").first().cast(pl.Int32).alias("stage"),
        )
    else:
        oo = data.mart("on_off")
        if oo.is_empty():
            raise Unavailable("neither iteration_breakdown nor on_off has rows for this run")
        per = oo.group_by("rank").agg(
            (pl.col("on_ns").mean() / 1e6).alias("comm_ms"),
            pl.lit(None, pl.Float64).alias("exposed_ms"),
            pl.lit(None, pl.Int32).alias("stage"),
        )
    per = per.filter(pl.col("rank").is_not_null())
    med = per["comm_ms"].median() or 0.0
    mad = (per["comm_ms"] - med).abs().median() or 0.0
    return per.with_columns(
        straggler=(pl.col("comm_ms") - med).abs().gt(3 * float(mad))  # type: ignore[arg-type]
        & (pl.col("comm_ms") - med).abs().gt(0.1 * float(med))  # type: ignore[arg-type]
    ).sort("rank")


def bubbles(data: RunData) -> pl.DataFrame:
    """Bubble ratio per pipeline stage: measured (mean over iterations) and predicted."""
    br = data.mart("bubble_ratio")
    if br.is_empty():
        raise Unavailable("bubble_ratio has no rows (no timed iterations per stage)")
    # a mean's last bits depend on the order it adds: add in the mart's grain order
    agg = (
        br.sort("stage", "iteration", nulls_last=True)
        .group_by("stage", maintain_order=True)
        .agg(
            pl.col("bubble_ratio").mean().alias("measured"),
            pl.col("predicted_bubble_ratio").mean().alias("predicted"),
        )
    )
    return (
        agg.unpivot(index="stage", variable_name="source", value_name="bubble_ratio")
        .filter(pl.col("bubble_ratio").is_not_null())
        .with_columns(pl.col("stage").cast(pl.Int32))
        .sort("stage", "source")
    )


# ---------------------------------------------------------------------------- regularity


def predictability(data: RunData) -> pl.DataFrame:
    """Per iteration: whole-matrix similarity to the previous iteration, volume ratio, and the
    share of ranks whose call sequence repeats the previous iteration's."""
    pr = data.mart("predictability")
    run = pr.filter(pl.col("scope") == "run").select(
        "iteration", "matrix_similarity", "volume_ratio"
    )
    same = (
        pr.filter((pl.col("scope") == "rank") & pl.col("signature_same_as_prev").is_not_null())
        .group_by("iteration")
        .agg(pl.col("signature_same_as_prev").cast(pl.Float64).mean().alias("same_sequence_share"))
    )
    df = run.join(same, on="iteration", how="full", coalesce=True).unpivot(
        index="iteration", variable_name="metric", value_name="value"
    )
    df = df.filter(pl.col("value").is_not_null()).sort("metric", "iteration")
    if df.is_empty():
        raise Unavailable("fewer than two iterations with traffic: nothing to compare")
    return df


def moe(data: RunData) -> pl.DataFrame:
    """MoE all-to-all non-uniformity per iteration (NF_rel, CV, matrix stability)."""
    mo = data.mart("moe_nonuniform")
    if mo.is_empty():
        raise Unavailable("the run has no all-to-all (EP) traffic")
    return (
        mo.select("iteration", "nf_rel", "cv", "matrix_stability")
        .unpivot(index="iteration", variable_name="metric", value_name="value")
        .filter(pl.col("value").is_not_null())
        .sort("metric", "iteration")
    )


# ---------------------------------------------------------------------------- data quality


def files(data: RunData) -> pl.DataFrame:
    """Ingested files with their line accounting (parsed + ignored + rejected = total)."""
    df = _query(
        data,
        "SELECT path, format, bytes, lines_total, lines_parsed, lines_ignored, lines_rejected, "
        "rows_written, warnings FROM ingested_files WHERE run_id = $run_id ORDER BY ALL",
    )
    if df.is_empty():
        raise Unavailable("no ingested files recorded for this run")
    return df.with_columns(
        accounted=(
            pl.col("lines_parsed") + pl.col("lines_ignored") + pl.col("lines_rejected")
            == pl.col("lines_total")
        )
    )


def call_sources(data: RunData) -> tuple[pl.DataFrame, dict[str, int]]:
    """What each source format gave the logical calls (the call_sources mart: records paired or
    not and why, sizes and durations given, size conflicts), and the run's totals (calls,
    timed calls, calls logged by several tools, size conflicts; the call_totals mart)."""
    df = data.mart("call_sources")
    if df.is_empty():
        raise Unavailable("the run has no communication calls")
    tot = data.mart("call_totals")
    totals = {
        k: int(tot[k].sum()) if not tot.is_empty() else 0
        for k in ("calls", "timed_calls", "multi_source_calls", "size_conflicts")
    }
    return df.drop("run_id", strict=False).sort("source_format"), totals


def rejects(data: RunData) -> tuple[pl.DataFrame, int]:
    """The first rejected lines (path, line, reason, raw cut to 200 chars) and the total."""
    total = _query(data, "SELECT count(*) AS n FROM rejects WHERE run_id = $run_id")["n"][0]
    df = _query(
        data,
        "SELECT path, line_no, reason, left(raw, 200) AS raw FROM rejects "
        f"WHERE run_id = $run_id ORDER BY path, line_no, reason, raw LIMIT {MAX_TABLE_ROWS}",
    )
    return df, int(total)


def ranks_coverage(data: RunData) -> dict[str, Any]:
    """Expected ranks (the run's world size, :meth:`RunData.world`) and the ranks present in
    trace_meta or the on/off mart; missing = expected - present."""
    tm = _query(data, "SELECT DISTINCT rank FROM trace_meta WHERE run_id = $run_id")
    present = {int(r) for r in tm["rank"].drop_nulls()}
    oo = data.marts.get("on_off")
    if oo is not None:
        present |= {int(r) for r in oo["rank"].drop_nulls()}
    expected = data.world() or None
    missing = sorted(set(range(expected)) - present) if expected else []
    return {"expected": expected, "present": len(present), "missing": missing}


def clock_alignment(data: RunData) -> pl.DataFrame:
    """Per source format: ranks with trace metadata, how many were clock-aligned, hosts."""
    df = _query(
        data,
        "SELECT source_format, count(DISTINCT rank) AS ranks, "
        "count(DISTINCT rank) FILTER (WHERE aligned) AS aligned_ranks, "
        "count(DISTINCT host) AS hosts, min(clock_anchor_ns) AS min_anchor_ns, "
        "max(clock_anchor_ns) AS max_anchor_ns, "
        "string_agg(DISTINCT host, ', ' ORDER BY host) AS host_names "
        "FROM trace_meta WHERE run_id = $run_id GROUP BY source_format ORDER BY source_format",
    )
    return df.with_columns(pl.col("host_names").str.slice(0, 500))


def config_text(data: RunData) -> tuple[str, str]:
    """The run's configuration as pretty JSON and where it came from."""
    if data.stored is None:
        return "", "none: the layout was inferred from the communicators"
    return json.dumps(data.stored.config, indent=2, sort_keys=True), data.stored.source
