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

from reports.model.config import Platform, RunConfig
from reports.model.predict import stage_flops_per_microbatch, stage_times
from reports.model.traffic import stage_items, stage_of_rank

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
