"""The paper in the report: every table and figure of APNet'24 the run's data supports.

Why: commscope reproduces Li et al., *Understanding Communication Characteristics of
Distributed Training* (APNet'24, ``../shared/papers``). A reader who knows the paper looks for
its Table 3 and its figures by number; this section draws each one the run can feed, titled
with the paper's number, and a *paper map* lists every table and figure with its status for
this run: shown, or which input it needs.

What each item reads (no SQL here writes; marts and predictions are only read):

- **Table 3** (traffic per type at one rank, default rank 0): measured from
  the ``call_signatures`` mart (``int_comm_ops_classified WHERE counted``: the one source per
  rank whose calls count, by traffic_class, op and msg_bytes) and divided by the rank's iterations with traffic
  (``traffic_matrix``, else ``iterations``); predicted from ``predicted_signatures`` when the
  store has it, else from the pure model (:func:`commscope.model.rank_items`) on the run's config.
  Sizes in MiB (2^20 bytes): the paper's "MB" is DeepSpeed's logger unit, which divides by 1024
  (model_spec §A.5); bytes are given exactly beside them.
- **Fig. 1**: :func:`commscope.reports.data.message_sizes` (exact sizes, no power-of-two floor).
- **Fig. 2**: :func:`commscope.reports.data.traffic`, measured beside predicted, one colour scale per class.
- **Figs. 4-5**: ``traffic_matrix`` per iteration (EP and DP, network pairs only) and
  ``moe_nonuniform`` (NF_abs as the paper plots it, NF_rel beside it).
- **Fig. 6**: ``iteration_breakdown`` (each term over T_iter, per stage) and the measured C of
  each class (``model_vs_measured``'s C_* rows).
- **Fig. 7**: ``effective_bandwidth`` (per-call rows as lines, summary rows as points only).
- **Fig. 10**: ``model_vs_measured`` (T_comp, R_bubble, T_comm, R_comm).
- **Figs. 8 and 11** need two runs: :func:`compare_blocks` (``commscope compare A B``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from commscope.reports import charts
from commscope.reports import data as rd
from commscope.reports.blocks import Block

log = logging.getLogger(__name__)

MIB = 2**20
"""The paper's "MB": DeepSpeed's comms logger divides by 1024 (model_spec §A.5)."""
DEFAULT_RANK = 0
"""Table 3's rank (the paper's rank_0)."""
CLASS_ORDER = {c: i for i, c in enumerate(rd.CLASSES)}
# Fig. 6 / Fig. 8 components: iteration_breakdown column -> label.
RATIO_TERMS = [
    ("t_tp_ns", "TP"),
    ("t_pp_ns", "PP"),
    ("t_dp_ns", "DP"),
    ("t_ep_ns", "EP"),
    ("t_emb_ns", "EmbTableSyn"),
    ("t_other_comm_ns", "other comm"),
    ("t_bubble_ns", "bubble"),
]
# Fig. 10's four quantities (model_vs_measured terms).
FIG10_TERMS = ("T_comp", "R_bubble", "T_comm", "R_comm")

# The paper's tables and figures in order: (number, what it shows).
PAPER_ITEMS: list[tuple[str, str]] = [
    ("Table 1", "hardware platforms of the paper's testbed"),
    ("Table 2", "models and configurations the paper trained"),
    ("Table 3", "traffic volume and composition at one rank, per traffic type"),
    ("Table 4", "notation of the analytical model"),
    ("Fig. 1", "message size distribution"),
    ("Fig. 2", "traffic heatmaps (rank x rank)"),
    ("Fig. 3", "default parallelism mapping (illustration)"),
    ("Fig. 4", "MoE traffic heatmaps of two iterations"),
    ("Fig. 5", "MoE non-uniform factor over iterations"),
    ("Fig. 6", "communication ratio and bandwidth utilisation"),
    ("Fig. 7", "bus bandwidth vs message size"),
    ("Fig. 8", "TCP vs RoCEv2"),
    ("Fig. 9", "1F1B pipeline schedule (illustration)"),
    ("Fig. 10", "analytical model vs measured"),
    ("Fig. 11", "traffic heatmaps: default vs customized mapping"),
    ("Fig. 12", "customized parallelism mapping (illustration)"),
    ("Fig. 13", "overhead of pure-DP models vs training scale"),
]
# Items that are no measurement of a run: their fixed status.
FIXED_STATUS = {
    "Table 1": "not a measurement: the paper's testbed (this run's platform: Run configuration)",
    "Table 2": "not a measurement: the paper's model list (this run's model: Run configuration)",
    "Table 4": "not a measurement: notation",
    "Fig. 3": "illustration of a mapping: Fig. 2's predicted matrix draws this run's pairs",
    "Fig. 8": "needs two runs: commscope compare RUN_TCP RUN_ROCE (generate --network tcp)",
    "Fig. 9": "illustration of the schedule: the On/off pattern section shows the measured one",
    "Fig. 11": "needs two runs: commscope compare RUN_DEFAULT RUN_CUSTOM (generate --mapping "
    "customized)",
    "Fig. 12": "illustration of a mapping: compare a customized-mapping run (Fig. 11)",
    "Fig. 13": "needs several pure-DP runs at different scales (not supported)",
}


class Needs(rd.Unavailable):
    """An item cannot be drawn: the message names the input it needs (the paper map's status)."""


# ---------------------------------------------------------------------------- Table 3


def rank_iterations(d: rd.RunData, rank: int) -> int:
    """Iterations with traffic of ``rank``: the traffic_matrix mart (the counted source's calls
    by iteration), else the iterations mart; 0 when neither has the rank."""
    tm = d.marts.get("traffic_matrix")
    if tm is not None and not tm.is_empty():
        mine = tm.filter(
            ((pl.col("src_rank") == rank) | (pl.col("dst_rank") == rank))
            & pl.col("iteration").is_not_null()
        )
        if mine.height:
            return int(mine["iteration"].n_unique())
    it = d.marts.get("iterations")
    if it is not None and not it.is_empty():
        return int(it.filter(pl.col("rank") == rank)["iteration"].n_unique())
    return 0


SIGNATURE_SCHEMA = {
    "traffic_class": pl.Utf8,
    "op": pl.Utf8,
    "group_size": pl.Int32,
    "msg_bytes": pl.Int64,
    "per_iteration": pl.Float64,
}


def measured_signatures(d: rd.RunData, rank: int = DEFAULT_RANK) -> pl.DataFrame:
    """Calls per iteration of ``rank`` per (traffic_class, op, group_size, msg_bytes).

    Reads the ``call_signatures`` mart (the counted calls of ``int_comm_ops_classified``, one
    source per rank so no call is counted twice, that move data) and divides by
    :func:`rank_iterations`. ``tol_bytes`` is how far the logged size may lie from the true one
    (the SQL macro ``logged_size_tolerance``: DeepSpeed prints sizes rounded; 0 for exact
    sources).
    """
    sig = d.marts.get("call_signatures")
    if sig is None:
        raise Needs("needs the call_signatures mart (derive the run again)")
    df = sig.filter(pl.col("rank") == rank)
    if df.is_empty():
        raise Needs(f"needs communication calls of rank {rank} with message sizes")
    n_iter = rank_iterations(d, rank)
    if n_iter <= 0:
        raise Needs(f"needs iterations of rank {rank} (no iteration markers or detected period)")
    return df.select(
        "traffic_class",
        "op",
        pl.col("group_size").cast(pl.Int32),
        pl.col("msg_bytes").cast(pl.Int64),
        (pl.col("calls") / n_iter).alias("per_iteration"),
        pl.col("tol_bytes").cast(pl.Float64).fill_null(0.0),
    ).sort(pl.all(), nulls_last=True)  # one order whatever the mart's (sums, ties below)


def snap_to_predicted(measured: pl.DataFrame, predicted: pl.DataFrame | None) -> pl.DataFrame:
    """``measured`` with ``size_key``: the predicted size of the same class and op that lies
    within the measured size's ``tol_bytes`` (the nearest), else the measured size itself.
    Matching measured with predicted compares ``size_key``; the logged size stays in
    ``msg_bytes``."""
    m = measured if "tol_bytes" in measured.columns else measured.with_columns(tol_bytes=0.0)
    m = m.with_row_index("_i")
    if predicted is None or predicted.is_empty():
        return m.drop("_i").with_columns(size_key=pl.col("msg_bytes"))
    cand = (
        m.join(
            predicted.select("traffic_class", "op", pl.col("msg_bytes").alias("_p")).unique(),
            on=["traffic_class", "op"],
        )
        .filter((pl.col("_p") - pl.col("msg_bytes")).abs() <= pl.col("tol_bytes"))
        .sort((pl.col("_p") - pl.col("msg_bytes")).abs(), "_p")  # equally near: the smaller
        .group_by("_i", maintain_order=True)
        .agg(pl.col("_p").first())
    )
    return (
        m.join(cand, on="_i", how="left")
        .with_columns(size_key=pl.coalesce("_p", "msg_bytes"))
        .drop("_i", "_p")
    )


def predicted_signatures(d: rd.RunData, rank: int = DEFAULT_RANK) -> pl.DataFrame | None:
    """The model's messages per iteration of ``rank`` per signature, or None without a model.

    From the ``predicted_signatures`` relation the run's derive published
    (:func:`commscope.reports.data.load_run`); reports run no model.
    """
    sig = d.predicted_signatures
    if sig.is_empty() or "rank" not in sig.columns:
        return None
    df = sig.filter(pl.col("rank") == rank).select(
        "traffic_class", "op", "group_size", "msg_bytes", pl.col("count").alias("per_iteration")
    )
    if df.is_empty():
        return None
    return df.cast(SIGNATURE_SCHEMA).sort(pl.all(), nulls_last=True)  # type: ignore[arg-type]


def _count_text(x: pl.Expr) -> pl.Expr:
    """A per-iteration count as text: whole numbers without decimals ("8"), else 2 decimals."""
    whole = (x - x.round(0)).abs() < 1e-6  # sums of fractional per-iteration counts
    return (
        pl.when(whole)
        .then(x.round(0).cast(pl.Int64).cast(pl.Utf8))
        .otherwise(x.round(2).cast(pl.Utf8))
    )


def display(df: pl.DataFrame) -> pl.DataFrame:
    """A table for the page: float columns as text with thousands separators, whole numbers
    without decimals (85,000 MiB rather than 8.5e+04), others to 2 decimals."""
    out = []
    for name, dtype in df.schema.items():
        if not dtype.is_float():
            out.append(pl.col(name))
            continue
        x = pl.col(name)
        out.append(
            pl.when(x.is_null())
            .then(pl.lit(None, pl.Utf8))
            .when((x - x.round(0)).abs() < 1e-6)
            .then(x.map_elements(lambda v: f"{v:,.0f}", return_dtype=pl.Utf8))
            .otherwise(x.map_elements(lambda v: f"{v:,.2f}", return_dtype=pl.Utf8))
            .alias(name)
        )
    return df.select(out)


def _class_rows(sig: pl.DataFrame, source: str) -> pl.DataFrame:
    """Per traffic class: messages, dominant message size, volume and the op split."""
    s = sig.with_columns(volume=pl.col("per_iteration") * pl.col("msg_bytes"))
    ops = (
        s.group_by("traffic_class", "op")
        .agg(pl.col("per_iteration").sum())
        .sort("traffic_class", "op")
        .group_by("traffic_class", maintain_order=True)
        .agg(
            pl.format("{} {}", _count_text(pl.col("per_iteration")), pl.col("op"))
            .str.join(" + ")
            .alias(f"ops {source}")
        )
    )
    return (
        s.sort("volume", "msg_bytes", descending=[True, False], maintain_order=True)
        .group_by("traffic_class", maintain_order=True)
        .agg(
            pl.col("per_iteration").sum().alias(f"messages / iteration, {source}"),
            (pl.col("msg_bytes").first() / MIB).alias(f"message size (MiB), {source}"),
            (pl.col("volume").sum() / MIB).alias(f"volume (MiB / iteration), {source}"),
            pl.col("msg_bytes").n_unique().alias(f"sizes {source}"),
        )
        .join(ops, on="traffic_class", how="left")
    )


def table3(measured: pl.DataFrame, predicted: pl.DataFrame | None) -> pl.DataFrame:
    """Table 3: per traffic type, messages per iteration, message size and volume per
    iteration, measured beside predicted, and whether every signature matches.

    Args:
        measured: :func:`measured_signatures` rows.
        predicted: :func:`predicted_signatures` rows, or None (predicted columns null).

    Returns:
        One row per class in report order. ``message size`` is the size carrying most of
        the class's volume (the paper's column; on a tie the smaller); ``sizes`` counts
        distinct sizes; ``ops`` is the split by op (PP: "8 recv + 8 send"); ``match`` is True
        when measured and predicted have the same signatures (op, size) with the same counts.
    """
    meas = _class_rows(measured, "measured")
    pred = (
        _class_rows(predicted, "predicted")
        if predicted is not None
        else _class_rows(pl.DataFrame(schema=SIGNATURE_SCHEMA), "predicted")
    )
    out = meas.join(pred, on="traffic_class", how="full", coalesce=True)
    if predicted is not None:
        keys = ["traffic_class", "op", "size_key"]
        both = (
            snap_to_predicted(measured, predicted)
            .group_by(keys)
            .agg(pl.col("per_iteration").sum().alias("m"))
            .join(
                predicted.with_columns(size_key=pl.col("msg_bytes"))
                .group_by(keys)
                .agg(pl.col("per_iteration").sum().alias("p")),
                on=keys,
                how="full",
                coalesce=True,
            )
            .with_columns(ok=(pl.col("m").fill_null(0) - pl.col("p").fill_null(0)).abs() < 1e-9)
            .group_by("traffic_class")
            .agg(pl.col("ok").all().alias("match"))
        )
        out = out.join(both, on="traffic_class", how="left")
    else:
        out = out.with_columns(match=pl.lit(None, pl.Boolean))
    order = pl.col("traffic_class").replace_strict(CLASS_ORDER, default=99, return_dtype=pl.Int32)
    return (
        out.sort(order)
        .rename({"traffic_class": "traffic type"})
        .select(
            "traffic type",
            "messages / iteration, measured",
            "messages / iteration, predicted",
            "message size (MiB), measured",
            "message size (MiB), predicted",
            "volume (MiB / iteration), measured",
            "volume (MiB / iteration), predicted",
            "ops measured",
            "ops predicted",
            "match",
        )
    )


MAX_SIZES_LISTED = 8
"""Above this many distinct sizes of one (class, op) (all-to-all splits), Table 3's signature
detail shows one row for them: count, mean size and the size range."""


def signature_detail(measured: pl.DataFrame, predicted: pl.DataFrame | None) -> pl.DataFrame:
    """Table 3 by signature (class, op, group size, exact bytes): per-iteration counts.

    ``message bytes`` is the predicted size a measured signature matched within its logged
    size's tolerance (:func:`snap_to_predicted`), else the logged size; ``logged bytes`` is
    the size as logged (DeepSpeed prints it rounded to 0.01 of its unit).

    A (class, op) with more than :data:`MAX_SIZES_LISTED` distinct sizes (variable all-to-all
    splits) is one row: its calls per iteration, ``message bytes`` null, ``MiB`` the mean size,
    and ``sizes`` the number and range of its sizes.
    """
    keys = ["traffic_class", "op", "msg_bytes"]
    m = (
        snap_to_predicted(measured, predicted)
        .group_by("traffic_class", "op", "size_key")
        .agg(
            pl.col("group_size").max(),
            pl.col("msg_bytes").min().alias("logged bytes"),
            pl.col("per_iteration").sum().alias("measured / iteration"),
        )
        .rename({"size_key": "msg_bytes"})
    )
    if predicted is not None:
        p = predicted.group_by(keys).agg(
            pl.col("group_size").max().alias("gs_p"),
            pl.col("per_iteration").sum().alias("predicted / iteration"),
        )
        m = m.join(p, on=keys, how="full", coalesce=True).with_columns(
            pl.coalesce("group_size", "gs_p").alias("group_size")
        )
    else:
        m = m.with_columns(pl.lit(None, pl.Float64).alias("predicted / iteration"))
    m = m.with_columns(
        pl.col("msg_bytes").n_unique().over("traffic_class", "op").alias("_n"),
        (pl.col("msg_bytes") / MIB).alias("MiB"),
        pl.lit(None, pl.Utf8).alias("sizes"),
    )
    many = m.filter(pl.col("_n") > MAX_SIZES_LISTED)
    if many.height:
        w = pl.col("measured / iteration").fill_null(0) + pl.col("predicted / iteration").fill_null(
            0
        )
        collapsed = many.group_by("traffic_class", "op").agg(
            pl.col("group_size").max(),
            pl.lit(None, pl.Int64).alias("msg_bytes"),
            pl.col("measured / iteration").sum(),
            pl.col("predicted / iteration").sum(),
            pl.col("_n").first(),
            ((pl.col("msg_bytes") * w).sum() / w.sum() / MIB).alias("MiB"),
            pl.format(
                "{} sizes, {} to {} bytes",
                pl.col("_n").first(),
                pl.col("msg_bytes").min(),
                pl.col("msg_bytes").max(),
            ).alias("sizes"),
        )
        m = pl.concat(
            [m.filter(pl.col("_n") <= MAX_SIZES_LISTED), collapsed], how="diagonal_relaxed"
        )
    order = pl.col("traffic_class").replace_strict(CLASS_ORDER, default=99, return_dtype=pl.Int32)
    return m.sort(order, "op", "msg_bytes", nulls_last=True).select(
        "traffic_class",
        "op",
        "group_size",
        pl.col("msg_bytes").alias("message bytes"),
        "logged bytes",
        "MiB",
        "measured / iteration",
        "predicted / iteration",
        "sizes",
    )


# ---------------------------------------------------------------------------- figures


def shared_domain(cells: pl.DataFrame) -> tuple[float, float]:
    """One colour domain [min, max] of ``bytes`` for a set of heatmaps drawn side by side."""
    if cells.is_empty():
        return (0.0, 1.0)
    lo = float(cells["bytes"].min())  # type: ignore[arg-type]
    hi = float(cells["bytes"].max())  # type: ignore[arg-type]
    return (lo, hi if hi > lo else lo + 1.0)


@dataclass
class MoeMaps:
    """Fig. 4: network traffic of two iterations (first and last with EP traffic)."""

    cells: pl.DataFrame  # (iteration, src, dst, src_end, dst_end, bytes)
    size: int
    iterations: list[int]


def moe_maps(d: rd.RunData) -> MoeMaps:
    """Rank x rank bytes (EP all-to-all + DP, sender != receiver) of the first and last
    iteration with EP traffic, as the paper's Fig. 4 (its diagonal neighbours mix both)."""
    tm = d.mart("traffic_matrix")
    ep = tm.filter(pl.col("traffic_class") == "EP")
    if ep.is_empty():
        raise Needs("needs all-to-all (EP) traffic")
    known = tm.filter(
        pl.col("dst_rank").is_not_null()
        & (pl.col("src_rank") != pl.col("dst_rank"))
        & pl.col("traffic_class").is_in(["EP", "DP"])
        & pl.col("iteration").is_not_null()
    )
    its = sorted(known.filter(pl.col("traffic_class") == "EP")["iteration"].unique().to_list())
    if not its:
        raise Needs("needs all-to-all (EP) traffic with known destinations")
    pick = [its[0], its[-1]] if len(its) > 1 else its
    world = max(d.world(), int(known["src_rank"].max()) + 1, int(known["dst_rank"].max()) + 1)  # type: ignore[arg-type]
    if world > rd.MAX_AXIS:
        raise Needs(f"drawn up to {rd.MAX_AXIS} ranks (this run has {world})")
    cells = (
        known.filter(pl.col("iteration").is_in(pick))
        .group_by("iteration", "src_rank", "dst_rank")
        .agg(pl.col("bytes").sum().cast(pl.Float64))
        .select(
            "iteration",
            pl.col("src_rank").cast(pl.Int32).alias("src"),
            pl.col("dst_rank").cast(pl.Int32).alias("dst"),
            (pl.col("src_rank") + 1).cast(pl.Int32).alias("src_end"),
            (pl.col("dst_rank") + 1).cast(pl.Int32).alias("dst_end"),
            "bytes",
        )
        .sort("iteration", "src", "dst")
    )
    return MoeMaps(cells, world, pick)


def moe_nf(d: rd.RunData) -> pl.DataFrame:
    """Fig. 5: NF_abs (max - min pair bytes per iteration, the paper's factor) and NF_rel
    ((max - min) / mean) per iteration, tidy (iteration, metric, value)."""
    mo = d.mart("moe_nonuniform")
    if mo.is_empty():
        raise Needs("needs all-to-all (EP) traffic")
    if "nf_abs" not in mo.columns or mo["nf_abs"].drop_nulls().is_empty():
        raise Needs("needs all-to-all split sizes (per-pair volumes)")
    if "pair_sizes" in mo.columns and (mo["pair_sizes"] == "uniform_split").all():
        raise Needs(
            "needs all-to-all split sizes (the logs hold each all-to-all's total only, spread "
            "as S/n per peer: NF is not the routing's; NCCL debug logs hold the splits)"
        )
    return (
        mo.select(
            pl.col("iteration").cast(pl.Int32),
            pl.col("nf_abs").cast(pl.Float64).alias("NF_abs (bytes)"),
            pl.col("nf_rel").cast(pl.Float64).alias("NF_rel"),
        )
        .unpivot(index="iteration", variable_name="metric", value_name="value")
        .filter(pl.col("value").is_not_null())
        .sort("metric", "iteration")
    )


def comm_ratios(bd: pl.DataFrame, by: str = "stage") -> pl.DataFrame:
    """Each communication term and the bubble over T_iter (median over ranks and iterations),
    per ``by`` (stage, or run for Fig. 8), tidy (group, component, ratio)."""
    cols = [(c, lbl) for c, lbl in RATIO_TERMS if c in bd.columns]
    if bd.is_empty() or "t_iter_ns" not in bd.columns or not cols:
        raise Needs("needs timed iterations (iteration_breakdown)")
    g = pl.col(by) if by in bd.columns else pl.lit(0)
    return (
        bd.filter(pl.col("t_iter_ns") > 0)
        .with_columns(g.cast(pl.Utf8).alias("group"))
        .group_by("group")
        .agg([(pl.col(c) / pl.col("t_iter_ns")).median().alias(lbl) for c, lbl in cols])
        .unpivot(index="group", variable_name="component", value_name="ratio")
        .filter(pl.col("ratio").is_not_null())
        .sort("group", "component")
    )


def class_bandwidth(d: rd.RunData) -> pl.DataFrame:
    """Fig. 6b: each class's C (bus GB/s over transfers) measured and the model's, from
    model_vs_measured's C_* rows, tidy (traffic_class, source, gb_s)."""
    mv = d.mart("model_vs_measured")
    c = mv.filter(pl.col("term").str.starts_with("C_"))
    # a class the layout does not have (tp = 1: no TP) shows no bar, whatever the model lists
    degree = {"TP": "tp", "PP": "pp", "DP": "dp", "EP": "ep"}
    absent = [
        f"C_{cls}"
        for cls, key in degree.items()
        if d.run_config.get(key) is not None and int(d.run_config[key]) <= 1
    ]
    c = c.filter(~pl.col("term").is_in(absent))
    if c.is_empty():
        raise Needs("needs timed calls with group sizes and a model config (C_* terms)")
    scale = pl.when(pl.col("unit") == "bytes/s").then(1e-9).otherwise(1.0)
    return (
        c.select(
            pl.col("term").str.slice(2).alias("traffic_class"),
            (pl.col("measured") * scale).alias("measured"),
            (pl.col("predicted") * scale).alias("predicted"),
        )
        .unpivot(index="traffic_class", variable_name="source", value_name="gb_s")
        .filter(pl.col("gb_s").is_not_null())
        .sort("traffic_class", "source")
    )


def busbw_points(d: rd.RunData) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Fig. 7: (per-call points, summary points, model rules). Per-call rows are lines per
    op/class; DeepSpeed summary rows (one per logged size, rank 0) are points only, so no
    line joins a summary to per-call points."""
    pts, rules = rd.bandwidth(d)
    per_call = pts.filter(pl.col("source") != rd.BW_SOURCES["comm_summaries"])
    summary = pts.filter(pl.col("source") == rd.BW_SOURCES["comm_summaries"])
    return per_call, summary, rules


def fig10(d: rd.RunData) -> pl.DataFrame:
    """Fig. 10: T_comp, R_bubble, T_comm and R_comm, measured beside the model, tidy
    (term, unit, source, value)."""
    mv = d.mart("model_vs_measured")
    rows = mv.filter(pl.col("term").is_in(FIG10_TERMS))
    if rows.is_empty():
        raise Needs("needs a model config ([model], [parallel], [platform]) and timed iterations")
    order = {t: i for i, t in enumerate(FIG10_TERMS)}
    return (
        rows.select("term", "unit", "measured", "predicted")
        .unpivot(index=["term", "unit"], variable_name="source", value_name="value")
        .filter(pl.col("value").is_not_null())
        .with_columns(order=pl.col("term").replace_strict(order, return_dtype=pl.Int32))
        .sort("order", "source")
    )


# ---------------------------------------------------------------------------- the section


def paper_map(status: dict[str, str]) -> pl.DataFrame:
    """Every table and figure of the paper with its status for this run.

    Args:
        status: item number -> "shown" or what it needs; items absent here take their fixed
            status (:data:`FIXED_STATUS`) or "not computed".
    """
    return pl.DataFrame(
        [
            {
                "item": item,
                "what": what,
                "status": status.get(item, FIXED_STATUS.get(item, "not computed")),
            }
            for item, what in PAPER_ITEMS
        ],
        schema={"item": pl.Utf8, "what": pl.Utf8, "status": pl.Utf8},
    )


# Items drawn from a view another section guards with a gap (commscope.reports.gaps): (view, section).
ITEM_VIEW = {
    "Fig. 1": ("sizes", "Message sizes"),
    "Fig. 2": ("traffic", "Traffic matrices"),
    "Fig. 5": ("moe", "MoE non-uniformity"),
    "Fig. 6": ("breakdown", "Iteration breakdown"),
    "Fig. 7": ("bandwidth", "Effective bandwidth"),
    "Fig. 10": ("model", "Headline numbers"),
}


def _attempt(
    item: str,
    status: dict[str, str],
    fn: Callable[[], list[Block]],
    gaps: dict[str, Any] | None = None,
) -> list[Block]:
    """Build one item's blocks; record 'shown' or what it needs in ``status``.

    An item whose view has a gap (:mod:`commscope.reports.gaps`, not partial) refers to the section
    that states the cause and what to record, rather than repeating it.
    """

    view, title = ITEM_VIEW.get(item, ("", ""))
    gap = (gaps or {}).get(view) if view else None
    if gap is not None and gap.kind != "partial":
        status[item] = f"not available: same cause as the '{title}' section"
        return [Block("na", text=f"not available: {item}: same cause as the '{title}' section.")]
    try:
        blocks = fn()
    except rd.Unavailable as exc:
        status[item] = str(exc) if isinstance(exc, Needs) else f"not available: {exc}"
        return [Block("na", text=f"not available: {item}: {status[item]}")]
    except Exception as exc:  # one item's bug must not lose the section
        log.exception("paper item %s failed", item)
        status[item] = f"failed: {type(exc).__name__}: {exc}"
        return [Block("na", text=f"not available: {item}: {status[item]}")]
    status.setdefault(item, "shown")
    return blocks


def section(d: rd.RunData, rank: int = DEFAULT_RANK) -> list[Block]:
    """The blocks of the "paper" section: the paper map, then every item the run supports."""

    status: dict[str, str] = {}
    body: list[Block] = []

    def t3() -> list[Block]:
        if not (d.run_config.get("pp") and d.run_config.get("tp") and d.run_config.get("dp")):
            raise Needs("needs a parallel config (pp, tp, dp) to name the traffic types")
        meas = measured_signatures(d, rank)
        pred = predicted_signatures(d, rank)
        if pred is None:
            status["Table 3"] = "shown, measured only (the predicted side needs a model config)"
        notes: list[Block] = []
        p2p_ep = meas.filter(
            (pl.col("traffic_class") == "EP") & pl.col("op").is_in(["send", "recv"])
        )
        if p2p_ep.height:
            notes.append(
                Block(
                    "text",
                    text="EP: the log records each all-to-all as NCCL's grouped send/recv (one "
                    "per peer, the routed split sizes), the model one all_to_all of the "
                    "capacity buffer: the EP rows differ in op, count and size by construction; "
                    "the volume of the send rows (what the rank routed) compares with the "
                    "model's all_to_all volume (its capacity bound).",
                )
            )
        return [
            Block(
                "text",
                text=f"Table 3: traffic volume and composition at rank {rank} per iteration, "
                "measured beside predicted. MiB = 2^20 bytes (the paper's 'MB', DeepSpeed's "
                "logger unit); volume = messages x size (the paper's PP '~1 GB' counts sent "
                "bytes only, half of this). Measured: the rank's counted calls "
                "(int_comm_ops_classified WHERE counted) over its iterations with traffic.",
            ),
            Block("table", frame=display(table3(meas, pred))),
            *notes,
            Block("text", text="Table 3 by signature (exact message bytes):"),
            Block("table", frame=display(signature_detail(meas, pred))),
        ]

    def f1() -> list[Block]:
        df = rd.message_sizes(d)
        approx = df.filter(~pl.col("size_exact"))
        note = (
            [
                Block(
                    "text",
                    text=f"Fig. 1: {approx.height} points are the mean size of a power-of-two "
                    "bucket holding several sizes (summary rows, or too many calls to re-read).",
                )
            ]
            if approx.height
            else []
        )
        title = "Fig. 1: message size distribution (exact sizes, CDF of calls)"
        return [*note, Block("chart", chart=charts.message_sizes(df, title=title))]

    def f2() -> list[Block]:
        t = rd.traffic(d)
        out: list[Block] = []
        present = set(t.cells["traffic_class"].unique().to_list())
        for cls in [c for c in rd.CLASSES if c in present] + sorted(present - set(rd.CLASSES)):
            cells = t.cells.filter(pl.col("traffic_class") == cls)
            dom = shared_domain(cells)
            for source in ("measured", "predicted"):
                part = cells.filter(pl.col("source") == source)
                if part.is_empty():
                    continue
                chart = charts.traffic_heatmap(
                    part,
                    t.boundaries,
                    unit=t.unit,
                    size=t.size,
                    title=f"Fig. 2: {cls} traffic, {source}",
                    domain=dom,
                )
                out.append(
                    Block("chart", chart=chart, renderer="canvas" if part.height > 4000 else "svg")
                )
        return [
            Block(
                "text",
                text="Fig. 2: bytes per iteration from each sending to each receiving "
                f"{t.unit}, per class; measured and predicted of a class share one colour scale.",
            ),
            *out,
        ]

    def f4() -> list[Block]:
        mm = moe_maps(d)
        dom = shared_domain(mm.cells)
        out = []
        for it in mm.iterations:
            cells = mm.cells.filter(pl.col("iteration") == it).drop("iteration")
            out.append(
                Block(
                    "chart",
                    chart=charts.traffic_heatmap(
                        cells,
                        pl.DataFrame({"pos": []}, schema={"pos": pl.Int32}),
                        unit="rank",
                        size=mm.size,
                        title=f"Fig. 4: EP + DP traffic, iteration {it}",
                        domain=dom,
                    ),
                )
            )
        return out

    def f5() -> list[Block]:
        df = moe_nf(d)
        mo = d.mart("moe_nonuniform")
        notes = mo["case_note"].drop_nulls().unique().to_list() if "case_note" in mo.columns else []
        text = [Block("text", text=f"Fig. 5: {notes[0]}.")] if len(notes) == 1 else []
        return [*text, Block("chart", chart=charts.moe_nf(df))]

    def f6() -> list[Block]:
        out = [
            Block(
                "chart",
                chart=charts.comm_ratio(
                    comm_ratios(d.mart("iteration_breakdown")),
                    group_title="pipeline stage",
                    title="Fig. 6a: communication ratio per stage (term / T_iter)",
                ),
            )
        ]
        try:
            out.append(Block("chart", chart=charts.class_bandwidth(class_bandwidth(d))))
        except rd.Unavailable as exc:
            out.append(Block("na", text=f"not available: Fig. 6b: {exc}"))
        return out

    def f7() -> list[Block]:
        per_call, summary, rules = busbw_points(d)
        return [
            Block(
                "text",
                text="Fig. 7: lines with filled points are per-call medians per size; hollow "
                "diamonds are DeepSpeed summary rows (rank 0, one per logged size), never joined "
                "to them by a line; dashed: the model's C_*.",
            ),
            Block("chart", chart=charts.busbw_vs_size(per_call, summary, rules)),
        ]

    def f10() -> list[Block]:
        return [Block("chart", chart=charts.model_vs_measured(fig10(d)))]

    for item, fn in (
        ("Table 3", t3),
        ("Fig. 1", f1),
        ("Fig. 2", f2),
        ("Fig. 4", f4),
        ("Fig. 5", f5),
        ("Fig. 6", f6),
        ("Fig. 7", f7),
        ("Fig. 10", f10),
    ):
        body += _attempt(item, status, fn, d.gaps)
    return [
        Block("text", text="Paper map: every table and figure of APNet'24 and its status here."),
        Block("table", frame=paper_map(status)),
        *body,
    ]


# ---------------------------------------------------------------------------- two runs


def fig8(bd_a: pl.DataFrame, bd_b: pl.DataFrame, run_a: str, run_b: str) -> pl.DataFrame:
    """Fig. 8: communication time and iteration time of B normalised to A, and each run's
    TP/PP/DP (and EP, EmbTableSyn, bubble) time over iteration; tidy (panel, run, metric,
    value). Medians over ranks and iterations of iteration_breakdown."""
    rows: list[dict[str, Any]] = []
    med: dict[str, dict[str, float]] = {}
    for run, bd in ((run_a, bd_a), (run_b, bd_b)):
        if bd.is_empty():
            raise Needs(f"needs timed iterations of {run} (iteration_breakdown)")
        med[run] = {
            "communication": float(bd["t_comm_ns"].median() or 0),  # type: ignore[arg-type]
            "iteration": float(bd["t_iter_ns"].median() or 0),  # type: ignore[arg-type]
        }
        for r in comm_ratios(bd, by="run_id").iter_rows(named=True):
            rows.append(
                {"panel": "ratio", "run": run, "metric": r["component"], "value": r["ratio"]}
            )
    for metric in ("communication", "iteration"):
        base = med[run_a][metric]
        for run in (run_a, run_b):
            rows.append(
                {
                    "panel": "normalised",
                    "run": run,
                    "metric": f"{metric} time",
                    "value": med[run][metric] / base if base else None,
                }
            )
    return pl.DataFrame(
        rows,
        schema={"panel": pl.Utf8, "run": pl.Utf8, "metric": pl.Utf8, "value": pl.Float64},
    )


def total_cells(d: rd.RunData, source: str = "measured") -> rd.Traffic:
    """Fig. 11: all classes' bytes per iteration per rank pair (one heatmap per run)."""
    t = rd.traffic(d)
    cells = (
        t.cells.filter(pl.col("source") == source)
        .group_by("src", "dst", "src_end", "dst_end")
        .agg(pl.col("bytes").sum())
        .sort("src", "dst")
    )
    if cells.is_empty():
        raise Needs(f"needs {source} traffic with known destinations in {d.run_id}")
    return rd.Traffic(cells, t.boundaries, t.unit, t.size)


def compare_blocks(da: rd.RunData, db: rd.RunData) -> list[Block]:
    """Figs. 8 and 11 from two runs (A, B): TCP vs RoCE and default vs customized mapping."""

    status: dict[str, str] = {}

    def f8() -> list[Block]:
        df = fig8(
            da.mart("iteration_breakdown"), db.mart("iteration_breakdown"), da.run_id, db.run_id
        )
        return [
            Block(
                "text",
                text=f"Fig. 8: {db.run_id} (B) normalised to {da.run_id} (A), and each run's "
                "communication terms over iteration time (medians over ranks and iterations). "
                "The paper compares TCP (A) with RoCEv2 (B).",
            ),
            Block("chart", chart=charts.normalised(df.filter(pl.col("panel") == "normalised"))),
            Block(
                "chart",
                chart=charts.comm_ratio(
                    df.filter(pl.col("panel") == "ratio").select(
                        pl.col("run").alias("group"),
                        pl.col("metric").alias("component"),
                        pl.col("value").alias("ratio"),
                    ),
                    group_title="run",
                    title="Fig. 8b: time over iteration per class",
                ),
            ),
        ]

    def f11() -> list[Block]:
        ta, tb = total_cells(da), total_cells(db)
        dom = shared_domain(pl.concat([ta.cells, tb.cells]))
        return [
            Block(
                "text",
                text="Fig. 11: measured bytes per iteration per rank pair, all classes, one "
                "colour scale; the paper compares the default mapping (A) with a customized one "
                "(B).",
            ),
            *[
                Block(
                    "chart",
                    chart=charts.traffic_heatmap(
                        t.cells,
                        t.boundaries,
                        unit=t.unit,
                        size=t.size,
                        title=f"Fig. 11: {run}",
                        domain=dom,
                    ),
                    renderer="canvas" if t.cells.height > 4000 else "svg",
                )
                for run, t in ((da.run_id, ta), (db.run_id, tb))
            ],
        ]

    return _attempt("Fig. 8", status, f8) + _attempt("Fig. 11", status, f11)
