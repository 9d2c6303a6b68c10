"""Read a derived run's measured terms from the store and calibrate the what-if search with them.

Why: ``advise --run`` and ``calibrate`` fit μ and the bandwidths C to what a run measured.
The model package does no I/O, so the store reading lives here: the run's stored
configuration (``runs/<run>/config.json``) and its ``model_vs_measured`` mart (measured
T_comp and T_iter of rank 0's stage in steady state; C_TP/C_PP/C_DP/C_EP, the transfer bus
bandwidth of each class from ``int_class_bandwidth``). The advice written for a run
(``advice/<run>.json``) is what the report's "what the model suggests" section reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from commscope.model.calibrate import RunCalibration, calibrate_measured, measured_mu
from commscope.model.config import RunConfig, config_from_dict
from commscope.pipeline import run_config as rc
from commscope.pipeline.store import Store, StoreError

#: model_vs_measured term -> the calibration's measured key or bandwidth constant.
_TERMS: dict[str, str] = {
    "T_comp": "comp",
    "T_iter": "iter",
    "C_TP": "c_tp",
    "C_PP": "c_pp",
    "C_DP": "c_dp",
    "C_EP": "c_ep",
}


def stored_run_config(store: Store, run_id: str) -> RunConfig:
    """The run's stored configuration as a :class:`RunConfig`.

    Raises:
        StoreError: the run has no usable stored configuration.
    """
    stored = rc.load(store, run_id)
    if stored is None or "model" not in stored.config:
        raise StoreError(
            f"run {run_id!r} has no stored model configuration (ingest it with --config)"
        )
    return config_from_dict(stored.config)


def measured_terms(store: Store, run_id: str) -> dict[str, float]:
    """The run's measured T_comp, T_iter (s) and C_* (bytes/s) from its ``model_vs_measured`` mart.

    Keys: ``comp``, ``iter``, ``c_tp``, ``c_pp``, ``c_dp``, ``c_ep`` (those measured and > 0).

    Raises:
        StoreError: the run has no derived ``model_vs_measured`` (run ``derive`` first).
    """
    path = store.mart_files(run_id).get("model_vs_measured")
    if path is None:
        raise StoreError(
            f"run {run_id!r} has no model_vs_measured mart (run `commscope derive {run_id}`)"
        )
    out: dict[str, float] = {}
    for row in pl.read_parquet(path).iter_rows(named=True):
        key = _TERMS.get(str(row["term"]))
        value = row["measured"]
        if key is not None and value is not None and value > 0:
            out[key] = float(value)
    return out


def calibrate_from_store(
    store: Store, run_id: str, mode: str = "stage_exact", mu_runs: Sequence[str] = ()
) -> RunCalibration:
    """Calibrate the what-if search's constants to a derived run (see
    :func:`commscope.model.calibrate.calibrate_measured`).

    Args:
        store: the store.
        run_id: the run whose C, T_comp and T_iter calibrate the model.
        mode: the model mode.
        mu_runs: other derived runs of the same model on the same GPUs whose measured T_comp
            add (x, μ) points, so the μ curve's shape is fitted too.
    """
    run = stored_run_config(store, run_id)
    terms = measured_terms(store, run_id)
    measured = {k: v for k, v in terms.items() if k in ("comp", "iter")}
    bandwidths = {k: v for k, v in terms.items() if k.startswith("c_")}
    points: list[tuple[str, float, float]] = []
    for other in mu_runs:
        if other == run_id:
            continue
        comp = measured_terms(store, other).get("comp")
        if comp is None:
            raise StoreError(f"run {other!r} has no measured T_comp")
        x, mu = measured_mu(stored_run_config(store, other), comp, mode)
        points.append((other, x, mu))
    return calibrate_measured(run, run_id, measured, bandwidths, mode=mode, extra_mu_points=points)


def save_advice(store: Store, run_id: str, payload: dict[str, Any]) -> Path:
    """Write the advice for a run (atomically); the report reads it back."""
    dest = store.advice_path(run_id)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(payload, indent=2))
    tmp.replace(dest)
    return dest
