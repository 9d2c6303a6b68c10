"""Headline numbers of a run, measured beside predicted, like with like (issue 17 item 5).

Why: the report, ``commscope summary --json`` and ``commscope compare`` each showed headline
numbers, computed three ways, and one of them set a communication time that included the
pipeline bubble against a model term that does not. :func:`headline` is the one place they
are computed now; every row says what it includes, the measured and predicted sides include
the same things, and a run whose platform the model's constants do not describe says so
instead of printing a relative error of several thousand percent.

Sources (marts only; bytes/s and ns there, GB/s = 1e9 bytes/s and s here):

- time terms: the ``measured`` and ``predicted`` columns of the ``model_vs_measured`` mart (the
  model's table: rank 0's pipeline stage, steady-state iterations; predicted = rank 0,
  ``stage_exact``), so the headline and the model's table show one number per quantity. Without
  that mart the measured side falls back to the mean over every row of ``iteration_breakdown``
  (and ``iterations`` for T_iter), and the predicted side to ``predicted_times``.
- T_comm = T_TP + T_PP + T_DP + T_EP + T_EmbTableSyn on both sides (unclassified calls left
  out on both: the model has no term for them); R_comm = T_comm / T_iter and R_bubble =
  T_bubble / T_iter of these rows, on both sides (the paper's ratios; the model's own r_comm
  and r_bubble are the same quotients).
- C_*: the ``C_*`` rows of ``model_vs_measured`` (bus bytes / time of the class's calls), else
  the ``c_*_bytes_s`` columns of ``effective_bandwidth``; predicted: the bus bandwidth the model
  used for the class (:func:`commscope.model.predict.effective_bandwidths`: the config's C, or
  the model's default when the config states none).

Marts before the transfer/wait split of issue 17 (no ``t_sync_wait_ns`` column in
``iteration_breakdown``) still book the last stage's end-of-iteration EmbTableSyn wait as
EmbTableSyn time and time C over the whole call; the ``includes`` text then says so.

Calibration rule (:data:`CALIBRATION_FACTOR`): the model's constants describe a platform when
every quantity they set alone, T_comp (μ·F) and each C_* with a value on both sides, is within
a factor of 10 of what was measured. The paper reports about 90 % accuracy (Fig. 10) and the
report marks errors above 15 %; an order of magnitude is not a model error but another
platform (the bundled 2-core CPU recording runs 8,000 times slower than the RTX3090
constants). Outside it, no relative error is shown and the verdict says how to calibrate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from commscope.pipeline.model_inputs import BANDWIDTH_CLASSES  # the classes with a C_* row

CALIBRATION_FACTOR = 10.0
"""A measured/predicted ratio beyond this factor (either way) marks the platform uncalibrated."""

REL_ERROR_BAD = 0.15
"""|relative error| above this is marked (model_spec V18: flag if error > 15 %)."""

COMM_CLASSES = ("TP", "PP", "DP", "EP", "EmbTableSyn")
"""Classes whose times make up T_comm (the model's classes; 'other' has no model term)."""

# model_vs_measured term -> (iteration_breakdown column, predicted_times key)
_TERMS: dict[str, tuple[str, str]] = {
    "T_iter": ("t_iter_ns", "t_iter"),
    "T_comp": ("t_comp_ns", "t_comp"),
    "T_TP": ("t_tp_ns", "t_tp"),
    "T_PP": ("t_pp_ns", "t_pp"),
    "T_DP": ("t_dp_ns", "t_dp"),
    "T_EP": ("t_ep_ns", "t_ep"),
    "T_EmbTableSyn": ("t_emb_ns", "t_emb"),
    "T_bubble": ("t_bubble_ns", "t_bubble"),
}
_CLASS_TERM = {
    "TP": "T_TP",
    "PP": "T_PP",
    "DP": "T_DP",
    "EP": "T_EP",
    "EmbTableSyn": "T_EmbTableSyn",
}

SCHEMA: dict[str, pl.DataType] = {
    "metric": pl.Utf8(),
    "unit": pl.Utf8(),
    "includes": pl.Utf8(),
    "model": pl.Utf8(),
    "measured": pl.Float64(),
    "predicted": pl.Float64(),
    "rel_error": pl.Float64(),
    "status": pl.Utf8(),
    "measured_from": pl.Utf8(),
}
"""Columns of :attr:`Headline.rows`: ``includes`` = what the number includes, the same on the
measured and predicted side; ``model`` = how the model predicts it; ``status``: ok | off by
> 15 % | constants do not apply | not predicted | not measured."""


@dataclass(frozen=True)
class ModelPlatform:
    """The platform constants the model used for a run.

    Attributes:
        bandwidths: bus bandwidth per class (TP, PP, DP, EP), bytes/s.
        stated: classes whose C the run's config states (the others are the model's defaults).
        mu: GPU utilisation μ.
        peak_flops: F, FLOP/s.
    """

    bandwidths: Mapping[str, float]
    stated: frozenset[str] = frozenset()
    mu: float | None = None
    peak_flops: float | None = None


@dataclass(frozen=True)
class Headline:
    """The headline of one run.

    Attributes:
        rows: one row per metric (:data:`SCHEMA`).
        calibrated: True when the model's constants describe the platform (the calibration
            rule of the module docstring), False when they do not, None when nothing can be
            compared (no prediction or nothing measured).
        verdict: one sentence on the calibration and, when uncalibrated, how to calibrate.
        split: True when the marts separate transfer from waiting (issue 17 definitions).
    """

    rows: pl.DataFrame
    calibrated: bool | None
    verdict: str
    split: bool

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict: ``calibrated``, ``verdict``, ``split`` and ``rows`` (list of dicts)."""
        rows = [
            {
                k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in r.items()
            }
            for r in self.rows.iter_rows(named=True)
        ]
        return {
            "calibrated": self.calibrated,
            "verdict": self.verdict,
            "split": self.split,
            "rows": rows,
        }


def _f(v: object) -> float | None:
    if v is None:
        return None
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _mean(df: pl.DataFrame | None, col: str, scale: float = 1.0) -> float | None:
    if df is None or df.is_empty() or col not in df.columns:
        return None
    v = df[col].drop_nulls()
    return None if v.is_empty() else float(v.cast(pl.Float64).mean()) / scale  # type: ignore[arg-type]


def _mvm_values(mvm: pl.DataFrame | None) -> tuple[dict[str, float], dict[str, float]]:
    """measured and predicted by term from model_vs_measured (bytes/s kept for C_*)."""
    meas: dict[str, float] = {}
    pred: dict[str, float] = {}
    if mvm is None or mvm.is_empty() or "term" not in mvm.columns:
        return meas, pred
    for r in mvm.iter_rows(named=True):
        term = str(r["term"])
        m, p = _f(r.get("measured")), _f(r.get("predicted"))
        if m is not None:
            meas[term] = m
        if p is not None:
            pred[term] = p
    return meas, pred


def _sum(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def _rel(measured: float | None, predicted: float | None) -> float | None:
    if measured is None or predicted is None or predicted == 0:
        return None
    return (measured - predicted) / abs(predicted)


def has_split(marts: Mapping[str, pl.DataFrame]) -> bool:
    """True when the marts follow issue 17's transfer/wait split (``t_sync_wait_ns`` or
    ``busbw_transfer_Bps`` present)."""
    bd = marts.get("iteration_breakdown")
    eb = marts.get("effective_bandwidth")
    return bool(
        (bd is not None and "t_sync_wait_ns" in bd.columns)
        or (eb is not None and "busbw_transfer_Bps" in eb.columns)
    )


def headline(
    marts: Mapping[str, pl.DataFrame],
    predicted_times: Mapping[str, float],
    platform: ModelPlatform | None = None,
) -> Headline:
    """Compute the headline rows of one run (see the module docstring for every definition).

    Args:
        marts: the run's marts by name (``model_vs_measured``, ``iteration_breakdown``,
            ``iterations``, ``effective_bandwidth``; any may be missing).
        predicted_times: the model's terms for rank 0 (``predicted_times``: seconds, ratios).
        platform: the constants the model used (:func:`model_platform`); None without a model.

    Returns:
        The rows, the calibration verdict and whether the marts split transfer from waiting.
    """
    split = has_split(marts)
    mvm = marts.get("model_vs_measured")
    bd = marts.get("iteration_breakdown")
    mvm_meas, mvm_pred = _mvm_values(mvm)
    fallback_from = "iteration_breakdown (all ranks and iterations)"
    meas: dict[str, float | None] = {}
    src: dict[str, str] = {}
    pred: dict[str, float | None] = {}
    for term, (col, key) in _TERMS.items():
        if term in mvm_meas:
            meas[term], src[term] = mvm_meas[term], "model_vs_measured"
        else:
            meas[term], src[term] = _mean(bd, col, 1e9), fallback_from
        pred[term] = mvm_pred.get(term, _f(predicted_times.get(key)))
    if meas["T_iter"] is None:
        meas["T_iter"] = _mean(marts.get("iterations"), "duration_ns", 1e9)
        src["T_iter"] = "iterations (all ranks)"

    # T_comm: the model's classes on both sides; only classes measured or predicted count
    comm_meas = _sum([meas[_CLASS_TERM[c]] for c in COMM_CLASSES])
    comm_pred = _sum([pred[_CLASS_TERM[c]] for c in COMM_CLASSES])
    comm_src = src["T_TP"]

    emb = "EmbTableSyn transfer" if split else "EmbTableSyn whole call"
    legacy = "" if split else " (these marts predate the transfer/wait split)"
    if split and comm_src == "model_vs_measured":
        # model_vs_measured's class terms are transfer parts (int_breakdown_calls.xfer_ns)
        comm_what = (
            "TP+PP+DP+EP+EmbTableSyn, the transfer part of every call (after the last peer "
            "arrived); same-stage waiting is the T_sync_wait row, pipeline waiting is T_bubble; "
            "unclassified calls excluded, on both sides"
        )
    else:
        comm_what = (
            f"TP+PP+DP+EP+EmbTableSyn: TP, DP, EP whole calls (waiting for a peer of the same "
            f"stage included), PP transfer only, {emb}; bubble and unclassified calls excluded, "
            f"on both sides{legacy}"
        )
    rows: list[dict[str, Any]] = []

    def add(
        metric: str,
        unit: str,
        includes: str,
        model: str,
        measured: float | None,
        predicted: float | None,
        measured_from: str,
        constant_driven: bool = True,
    ) -> None:
        rows.append(
            {
                "metric": metric,
                "unit": unit,
                "includes": includes,
                "model": model,
                "measured": measured,
                "predicted": predicted,
                "rel_error": _rel(measured, predicted),
                "status": None,
                "measured_from": measured_from,
                "_constant_driven": constant_driven,
            }
        )

    sample = (
        "rank 0's stage, mean over its ranks and steady-state iterations"
        if src["T_iter"] == "model_vs_measured"
        else "mean over all ranks and iterations"
    )
    add(
        "iteration time T_iter",
        "s",
        f"one training step ({sample})",
        "eq. 6 at rank 0",
        meas["T_iter"],
        pred["T_iter"],
        src["T_iter"],
    )
    add(
        "compute time T_comp",
        "s",
        "compute kernels of the step (optimizer step included)",
        "the stage's FLOPs / (mu F) (eqs. 8-9, stage-exact)",
        meas["T_comp"],
        pred["T_comp"],
        src["T_comp"],
    )
    add(
        "communication time T_comm",
        "s",
        comm_what,
        "bus bytes / C per class (eqs. 2-4)",
        comm_meas,
        comm_pred,
        comm_src,
    )
    bubble_what = (
        "pipeline waits: PP send/recv waits (warm-up, drain) and the last stage's "
        "end-of-iteration EmbTableSyn wait"
        if split
        else "PP send/recv waits (warm-up, drain); the EmbTableSyn wait is still in T_comm" + legacy
    )
    add(
        "bubble T_bubble",
        "s",
        bubble_what,
        "eq. 5 at rank 0",
        meas["T_bubble"],
        pred["T_bubble"],
        src["T_bubble"],
    )
    add(
        "R_comm",
        "ratio",
        "T_comm / T_iter of the rows above, on both sides",
        "the same quotient of the predicted rows",
        _ratio(comm_meas, meas["T_iter"]),
        _ratio(comm_pred, pred["T_iter"]),
        comm_src,
    )
    add(
        "R_bubble",
        "ratio",
        "T_bubble / T_iter of the rows above, on both sides",
        "the same quotient of the predicted rows (eq. 7 with T_DP kept)",
        _ratio(meas["T_bubble"], meas["T_iter"]),
        _ratio(pred["T_bubble"], pred["T_iter"]),
        src["T_bubble"],
    )
    eq7 = mvm_pred.get("R_bubble_eq7", _f(predicted_times.get("r_bubble_eq7")))
    if eq7 is not None:
        add(
            "R_bubble (eq. 7)",
            "ratio",
            "the measured R_bubble above",
            "the paper's closed form (p-1)/(p-1+m), which needs no platform constant (the "
            "paper's Fig. 10 uses it)",
            _ratio(meas["T_bubble"], meas["T_iter"]),
            eq7,
            src["T_bubble"],
            constant_driven=False,
        )
    exposed = _mean(bd, "exposed_comm_ns", 1e9)
    if exposed is not None:
        add(
            "exposed communication",
            "s",
            "union of the step's communication intervals not under compute (waiting "
            "included); mean over all ranks and iterations",
            "no such term (the model assumes no overlap)",
            exposed,
            None,
            "iteration_breakdown",
            constant_driven=False,
        )
    eb = marts.get("effective_bandwidth")
    plat = platform or ModelPlatform({})
    bws = dict(plat.bandwidths)
    how = (
        "bus bytes / transfer time (after the last peer arrived)"
        if split
        else "bus bytes / whole call time (waiting for peers included; PP: transfer)" + legacy
    )
    for cls in BANDWIDTH_CLASSES:
        m = _f(mvm_meas.get(f"C_{cls}"))
        from_ = "model_vs_measured"
        if m is None:
            m = _mean(eb, f"c_{cls.lower()}_bytes_s")
            from_ = "effective_bandwidth"
        p = _f(mvm_pred.get(f"C_{cls}"))
        if p is None:
            p = _f(bws.get(cls))
        stated = cls in plat.stated or f"C_{cls}" in mvm_pred
        if m is None and (p is None or not stated):
            continue  # nothing measured and only a default on the model side
        model_c = f"the config's C_{cls}" if stated else "the model's default (config states none)"
        add(
            f"bus bandwidth C_{cls}",
            "GB/s",
            f"{how}, nccl-tests bus factors",
            model_c,
            None if m is None else m / 1e9,
            None if p is None else p / 1e9,
            from_,
        )
    calibrated, verdict = _calibration(rows, plat)
    for r in rows:
        constant = r.pop("_constant_driven")
        if r["predicted"] is None:
            r["status"] = "not predicted"
        elif r["measured"] is None:
            r["status"] = "not measured"
        elif calibrated is False and constant:
            r["rel_error"] = None
            r["status"] = "constants do not apply"
        elif r["rel_error"] is None:
            r["status"] = "ok" if r["measured"] == r["predicted"] else "not comparable"
        else:
            r["status"] = "ok" if abs(r["rel_error"]) <= REL_ERROR_BAD else "off by > 15 %"
    return Headline(pl.DataFrame(rows, schema=SCHEMA), calibrated, verdict, split)


def _calibration(rows: list[dict[str, Any]], plat: ModelPlatform) -> tuple[bool | None, str]:
    """Apply the calibration rule to the T_comp and C_* rows; say how to calibrate."""
    checks = []
    for r in rows:
        name = r["metric"]
        if not (name.startswith("compute time") or name.startswith("bus bandwidth")):
            continue
        m, p = r["measured"], r["predicted"]
        if m is None or p is None or m <= 0 or p <= 0:
            continue
        checks.append((name.split()[-1], m / p, m, r["unit"]))
    if not checks:
        return None, "No quantity set by the platform's constants is both measured and predicted"
    lo, hi = 1.0 / CALIBRATION_FACTOR, CALIBRATION_FACTOR
    off = [(n, ratio, m, u) for n, ratio, m, u in checks if not lo <= ratio <= hi]
    if not off:
        return True, (
            "The model's platform constants apply: T_comp and every C_* measured are within "
            f"a factor of {CALIBRATION_FACTOR:g} of the prediction"
        )
    parts = ", ".join(f"{n} measured {ratio:,.4g} x the prediction" for n, ratio, _, _ in off)
    suggest = []
    for n, _, m, u in checks:
        if n == "T_comp":
            t_pred = next(r["predicted"] for r in rows if r["metric"].startswith("compute time"))
            # T_comp = FLOPs / (mu F): the mu that gives the measured T_comp at the same F
            suggest.append(
                f"mu = {plat.mu * t_pred / m:.3g} at peak_flops = {plat.peak_flops:.3g}"
                if plat.mu is not None and plat.peak_flops is not None
                else f"mu x {t_pred / m:.3g}"
            )
        elif u == "GB/s":
            suggest.append(f"c_{n[2:].lower()} = {m * 1e9:.3g}")
    return False, (
        "The model's platform constants do not apply to this run "
        f"({parts}; rule: a factor beyond {CALIBRATION_FACTOR:g} on T_comp or a C_*), so no "
        "relative errors are shown. To calibrate, set this platform's [platform] constants "
        f"in the run's config (from this run: {'; '.join(suggest)}) and re-derive with "
        "`commscope derive RUN --config FILE`"
    )


# ---------------------------------------------------------------------------- run adapter


def model_platform(platform: pl.DataFrame | None) -> ModelPlatform | None:
    """The constants the model used for a run, as derive published them (``predicted_platform``:
    bus bandwidth per class in bytes/s, the classes whose C the config states, μ and F); None
    when the run has no model side (no model config, one the model cannot evaluate, or a derive
    from before the relation existed). Reads only: the model is evaluated by derive."""
    if platform is None or platform.is_empty():
        return None
    first = platform.row(0, named=True)
    return ModelPlatform(
        {str(r["traffic_class"]): float(r["busbw_Bps"]) for r in platform.iter_rows(named=True)},
        frozenset(str(r["traffic_class"]) for r in platform.iter_rows(named=True) if r["stated"]),
        float(first["mu"]) if first["mu"] is not None else None,
        float(first["peak_flops"]) if first["peak_flops"] is not None else None,
    )
