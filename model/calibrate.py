"""Fit μ and C_TP/C_PP/C_DP/C_EP to a run's own measured times, and report residuals.

Why: the paper's time model has two kinds of empirical constants, the GPU utilisation μ and
the effective bus bandwidths C, which it measured with NCCL micro-benchmarks (§5.2). A
run's own logs already hold per-type times, so they can parameterise the model instead: every
term is linear in one unknown (T_comp = FLOPs/(μF), T_X = bus bytes_X / C_X), and a
least-squares fit through the origin over one or more runs gives each constant. With one
run the fitted terms match exactly; the residuals of the terms that were *not* fitted
(bubble, iteration time) and of additional runs show how well the model explains the data.

Measured keys (seconds per iteration at the observed rank): ``comp``, ``tp``, ``pp`` (the
active part of p2p only: a ``recv`` waiting for the previous stage is bubble, §4.1), ``dp``,
``emb`` (optional: when missing, the embedding all-reduce is taken to be inside ``dp``),
``ep``, ``bubble``, ``iter``. Any subset may be given.

The bandwidths C are the bus bandwidth of the transfer (the part of a call after the group's
last member posted), not of the whole call: a per-rank T_TP/T_DP includes waiting for a slower
peer (sync wait), so a C fitted to those times would be the call-to-end figure. Where the run's
marts give the one C per class (``int_class_bandwidth.busbw_transfer_Bps``, read by
:func:`class_bandwidths`), :func:`calibrate` takes C from there and fits only what is left.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from commscope.model.config import Platform, RunConfig
from commscope.model.efficiency import (
    MuCurve,
    default_mu_curve,
    fit_mu_curve,
    fit_mu_level,
    layer_forward_flops,
)
from commscope.model.mapping import group_spans_nodes
from commscope.model.predict import critical_stage, stage_flops_per_microbatch, stage_times
from commscope.model.traffic import stage_items, stage_of_rank

MEASURED_KEYS: tuple[str, ...] = ("comp", "tp", "pp", "dp", "emb", "ep", "bubble", "iter")
CLASS_CONSTANTS: dict[str, str] = {"TP": "c_tp", "PP": "c_pp", "DP": "c_dp", "EP": "c_ep"}
"""Traffic class of ``int_class_bandwidth`` -> the platform constant it measures."""


def class_bandwidths(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The constants c_tp/c_pp/c_dp/c_ep (bytes/s) from ``int_class_bandwidth`` rows.

    Args:
        rows: rows with ``traffic_class`` and ``busbw_transfer_Bps`` (bus bytes / transfer
            time, bytes/s); other classes and rows without a positive value are skipped.

    Returns:
        Constant name -> bytes/s.

    Raises:
        ValueError: two rows give the same class (one C per class and run).
    """
    out: dict[str, float] = {}
    for row in rows:
        key = CLASS_CONSTANTS.get(str(row.get("traffic_class")))
        value = row.get("busbw_transfer_Bps")
        if key is None or value is None or not math.isfinite(value) or value <= 0:
            continue
        if key in out:
            raise ValueError(f"two rows give {key}: one C per class and run")
        out[key] = float(value)
    return out


@dataclass(frozen=True)
class Observation:
    """Measured per-type times of one rank of one run.

    Attributes:
        run: the run's configuration (its platform supplies F and the starting constants).
        measured: seconds per iteration by key (see :data:`MEASURED_KEYS`).
        rank: the rank the times were measured on.
    """

    run: RunConfig
    measured: Mapping[str, float]
    rank: int = 0

    def __post_init__(self) -> None:
        """Reject unknown keys and negative times."""
        unknown = sorted(set(self.measured) - set(MEASURED_KEYS))
        if unknown:
            raise ValueError(f"unknown measured key(s): {unknown}; use {MEASURED_KEYS}")
        if any(v < 0 or not math.isfinite(v) for v in self.measured.values()):
            raise ValueError("measured times must be finite and >= 0")


@dataclass(frozen=True)
class Calibration:
    """Result of :func:`calibrate`.

    Attributes:
        platform: the fitted platform (per-type bandwidths; ``c_intra``/``c_inter`` cleared).
        fitted: the constants that were fitted, by name (``mu``, ``c_tp``, ...).
        residuals: one dict per observation and measured term: ``observation, rank, term,
            measured, predicted, rel_error`` (predicted with the fitted platform).
        rms_rel_error: root-mean-square relative error per term over the observations.
    """

    platform: Platform
    fitted: dict[str, float]
    residuals: list[dict[str, Any]] = field(default_factory=list)
    rms_rel_error: dict[str, float] = field(default_factory=dict)


def _fit_slope(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope k of y = k·x through the origin; ``None`` if no x is positive."""
    sxx = sum(x * x for x, _ in points)
    if sxx <= 0:
        return None
    return sum(x * y for x, y in points) / sxx


def _unit_terms(obs: Observation, mode: str) -> dict[str, float]:
    """Each term's coefficient of its unknown (FLOPs/F for comp, bus bytes for the rest)."""
    run = obs.run
    stage = stage_of_rank(run, obs.rank)
    bus = {"TP": 0.0, "PP": 0.0, "DP": 0.0, "EmbTableSyn": 0.0, "EP": 0.0}
    for item in stage_items(run, stage, mode):
        bus[item.traffic_class] += item.bus_bytes
    comp = run.micro_batches * stage_flops_per_microbatch(run, stage, mode)
    return {
        "comp": comp / run.platform.peak_flops,
        "tp": bus["TP"],
        "pp": bus["PP"],
        "dp": bus["DP"],
        "emb": bus["EmbTableSyn"],
        "ep": bus["EP"],
    }


def calibrate(
    observations: Sequence[Observation],
    mode: str = "stage_exact",
    bandwidths: Mapping[str, float] | None = None,
) -> Calibration:
    """Fit μ and the per-type bandwidths to measured times.

    Args:
        observations: one or more measured runs sharing one platform (the first one's F,
            gpus_per_node and memory are kept; constants with no usable data keep their
            values from it).
        mode: ``"stage_exact"`` or ``"paper_uniform"``.
        bandwidths: measured C per constant (``c_tp``, ``c_pp``, ``c_dp``, ``c_ep``; bytes/s,
            e.g. :func:`class_bandwidths` of ``int_class_bandwidth``): taken as they are
            instead of fitted from the times, and listed in ``fitted``.

    Returns:
        The fitted platform, the fitted constants and the residuals of every measured term.

    Raises:
        ValueError: no observations, or a fit gives μ > 1 (peak FLOP/s set too low).
    """
    if not observations:
        raise ValueError("calibrate needs at least one observation")
    base = observations[0].run.platform
    units = [_unit_terms(o, mode) for o in observations]
    points: dict[str, list[tuple[float, float]]] = {k: [] for k in ("comp", "tp", "pp", "dp", "ep")}
    for obs, unit in zip(observations, units, strict=True):
        meas = obs.measured
        for key in ("comp", "tp", "pp", "ep"):
            if key in meas:
                points[key].append((unit[key], meas[key]))
        if "dp" in meas:
            x = unit["dp"] if "emb" in meas else unit["dp"] + unit["emb"]
            points["dp"].append((x, meas["dp"]))
        if "emb" in meas:
            points["dp"].append((unit["emb"], meas["emb"]))
    fitted: dict[str, float] = {}
    slope = _fit_slope(points["comp"])
    if slope is not None and slope > 0:
        mu = 1.0 / slope
        if mu > 1.0:
            raise ValueError(f"fitted mu = {mu:.3f} > 1: peak_flops is too low for these times")
        fitted["mu"] = mu
    measured_c = dict(bandwidths or {})
    unknown = sorted(set(measured_c) - set(CLASS_CONSTANTS.values()))
    if unknown:
        raise ValueError(f"unknown bandwidth constant(s): {unknown}")
    for key in ("tp", "pp", "dp", "ep"):
        if f"c_{key}" in measured_c:
            fitted[f"c_{key}"] = float(measured_c[f"c_{key}"])
            continue
        slope = _fit_slope(points[key])
        if slope is not None and slope > 0:
            fitted[f"c_{key}"] = 1.0 / slope
    platform = replace(base, c_intra=None, c_inter=None, **fitted)
    residuals: list[dict[str, Any]] = []
    squares: dict[str, list[float]] = {}
    for index, obs in enumerate(observations):
        run = replace(obs.run, platform=platform)
        st = stage_times(run, stage_of_rank(run, obs.rank), mode)
        predicted = {
            "comp": st.t_comp,
            "tp": st.t_tp,
            "pp": st.t_pp,
            "dp": st.t_dp if "emb" in obs.measured else st.t_dp + st.t_emb,
            "emb": st.t_emb,
            "ep": st.t_ep,
            "bubble": st.t_bubble,
            "iter": st.t_iter,
        }
        for term in MEASURED_KEYS:
            if term not in obs.measured:
                continue
            meas, pred = obs.measured[term], predicted[term]
            rel = (pred - meas) / meas if meas > 0 else (0.0 if pred == 0 else math.inf)
            residuals.append(
                {
                    "observation": index,
                    "rank": obs.rank,
                    "term": term,
                    "measured": meas,
                    "predicted": pred,
                    "rel_error": rel,
                }
            )
            squares.setdefault(term, []).append(rel * rel)
    rms = {term: math.sqrt(sum(v) / len(v)) for term, v in squares.items()}
    return Calibration(platform=platform, fitted=fitted, residuals=residuals, rms_rel_error=rms)


def calibrate_run(
    run: RunConfig,
    measured: Mapping[str, float],
    rank: int = 0,
    mode: str = "stage_exact",
    bandwidths: Mapping[str, float] | None = None,
) -> Calibration:
    """Calibrate from a single run's measured times (see :func:`calibrate`)."""
    return calibrate([Observation(run=run, measured=measured, rank=rank)], mode, bandwidths)


#: Traffic class -> the group kind whose node span says which link the class's traffic uses.
_CLASS_LINK_GROUP: dict[str, str] = {"TP": "tp", "PP": "pp", "DP": "dp", "EP": "ep"}


@dataclass(frozen=True)
class RunCalibration:
    """Constants of the what-if search fitted to one measured run (:func:`calibrate_measured`).

    Attributes:
        run_id: the measured run.
        run: the run's configuration with the calibrated platform (μ from ``mu_curve``).
        mu_curve: μ as a function of (b, s, h, t): the level from the run's T_comp, the
            shape (x_half) from the default curve.
        mu_measured: μ at the run's own layout, FLOPs / (T_comp · F).
        sources: constant name -> where it came from (``c_tp``, ``c_pp``, ...).
        links: one row per measured class: ``traffic_class, link`` (intra/inter: whether
            the class's groups span nodes under the run's mapping), ``constant``,
            ``bytes_per_s``, ``source``.
        measured_t_iter: the run's measured T_iter (s), when the run has one.
        predicted_t_iter: the calibrated model's T_iter of the run (slowest stage, s).
        mu_points: the measured (x, μ) points, one per run: ``run_id, x, mu``.
    """

    run_id: str
    run: RunConfig
    mu_curve: MuCurve
    mu_measured: float | None
    sources: dict[str, str]
    links: list[dict[str, Any]]
    measured_t_iter: float | None
    predicted_t_iter: float
    mu_points: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rel_error(self) -> float | None:
        """(predicted - measured) / measured T_iter, when measured."""
        if not self.measured_t_iter:
            return None
        return (self.predicted_t_iter - self.measured_t_iter) / self.measured_t_iter

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe summary."""
        pf = self.run.platform
        return {
            "run_id": self.run_id,
            "mu_measured": self.mu_measured,
            "mu_curve": {
                "mu_max": self.mu_curve.mu_max,
                "x_half": self.mu_curve.x_half,
                "source": self.mu_curve.source,
                "x_half_source": self.mu_curve.x_half_source,
                "points": self.mu_points,
            },
            "constants": {
                name: {"value": getattr(pf, name), "source": self.sources.get(name, "config")}
                for name in ("peak_flops", "mu", "c_tp", "c_pp", "c_dp", "c_ep")
                if getattr(pf, name) is not None
            },
            "links": self.links,
            "measured_t_iter": self.measured_t_iter,
            "predicted_t_iter": self.predicted_t_iter,
            "rel_error": self.rel_error,
        }


def calibrate_measured(
    run: RunConfig,
    run_id: str,
    measured: Mapping[str, float],
    bandwidths: Mapping[str, float],
    base_curve: MuCurve | None = None,
    mode: str = "stage_exact",
    extra_mu_points: Sequence[tuple[str, float, float]] = (),
) -> RunCalibration:
    """Fit the what-if search's constants to one run's measured terms.

    μ: the run's measured T_comp of rank 0's stage gives μ at the run's own (b, s, h, t)
    (:func:`calibrate`'s ``comp`` fit); the curve keeps ``base_curve``'s shape and takes its
    level from that point (:func:`~commscope.model.efficiency.fit_mu_level`). C: the measured
    transfer bus bandwidth per class (``bandwidths``: c_tp/c_pp/c_dp/c_ep), each labelled
    with the link kind its class uses under the run's mapping.

    Args:
        run: the run's configuration (its platform gives F and the constants not measured).
        run_id: the run's id (named in every source).
        measured: ``comp`` and ``iter`` (seconds per iteration at rank 0's stage), as
            :data:`MEASURED_KEYS`; either may be missing.
        bandwidths: measured C per constant name (bytes/s).
        base_curve: the curve whose shape is kept (default: the documented default).
        mode: the model mode.
        extra_mu_points: (run id, x, μ) measured on other layouts (:func:`measured_mu`); with
            them and this run's point at two or more distinct x, both μ_max and x_half are
            fitted (:func:`~commscope.model.efficiency.fit_mu_curve`) instead of the level only.

    Returns:
        The :class:`RunCalibration`.
    """
    pf = run.platform
    curve = base_curve or default_mu_curve(pf.peak_flops)
    sources: dict[str, str] = {}
    usable = {k: float(v) for k, v in bandwidths.items() if k in CLASS_CONSTANTS.values()}
    fit_on = {"comp": float(measured["comp"])} if measured.get("comp") else {}
    fitted = calibrate_run(run, fit_on, rank=0, mode=mode, bandwidths=usable).fitted
    mu_measured = fitted.get("mu")
    b, s, h, t = run.model.micro_batch, run.model.seq, run.model.hidden, run.parallel.tp
    x_run = layer_forward_flops(b, s, h, t)
    points = [(rid, x, mu) for rid, x, mu in extra_mu_points]
    if mu_measured is not None:
        points.insert(0, (run_id, x_run, mu_measured))
    if len({x for _, x, _ in points}) >= 2:
        ids = ", ".join(dict.fromkeys(rid for rid, _, _ in points))
        where = f"measured runs {ids} (T_comp of rank 0's stage, model_vs_measured; fitted)"
        curve = fit_mu_curve([(x, mu) for _, x, mu in points], where)
        sources["mu"] = where
    elif mu_measured is not None:
        where = f"measured run {run_id} (T_comp of rank 0's stage, model_vs_measured)"
        curve = fit_mu_level(curve, x_run, mu_measured, where)
        sources["mu"] = where
    for name in usable:
        sources[name] = f"measured run {run_id} (transfer busbw, int_class_bandwidth)"
    platform = replace(pf, c_intra=None, c_inter=None, mu=curve.mu(b, s, h, t), **usable)
    calibrated = replace(run, platform=platform)
    links: list[dict[str, Any]] = []
    for cls, name in CLASS_CONSTANTS.items():
        if name not in usable:
            continue
        spans = group_spans_nodes(calibrated, _CLASS_LINK_GROUP[cls])
        links.append(
            {
                "traffic_class": cls,
                "link": "inter" if spans else "intra",
                "constant": name,
                "bytes_per_s": usable[name],
                "source": sources[name],
            }
        )
    return RunCalibration(
        run_id=run_id,
        run=calibrated,
        mu_curve=curve,
        mu_measured=mu_measured,
        sources=sources,
        links=links,
        measured_t_iter=measured.get("iter"),
        predicted_t_iter=critical_stage(calibrated, mode).t_iter,
        mu_points=[{"run_id": rid, "x": x, "mu": mu} for rid, x, mu in points],
    )


def measured_mu(run: RunConfig, t_comp: float, mode: str = "stage_exact") -> tuple[float, float]:
    """(x, μ) of one run: its per-layer forward FLOPs and the μ its measured T_comp of rank 0's
    stage gives (FLOPs / (T_comp · F))."""
    fitted = calibrate_run(run, {"comp": t_comp}, rank=0, mode=mode).fitted
    m = run.model
    return layer_forward_flops(m.micro_batch, m.seq, m.hidden, run.parallel.tp), fitted["mu"]
