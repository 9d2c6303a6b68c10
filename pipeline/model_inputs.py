"""The relations derive registers beside the canonical tables: the run's configuration
(``run_config``) and the analytical model's predictions (``predicted_traffic``,
``predicted_signatures``, ``predicted_matrix``, ``predicted_times``, ``predicted_stage_times``,
``predicted_platform``),
with their column types.

Why a module of its own: derive computes them, the catalog (:mod:`commscope.pipeline.store`) creates
empty stand-ins of them so the SQL views bind, and ``commscope schema`` documents them; each
imports them from here, downward, without importing derive.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredConfig:
    """A run's configuration as stored (``config/<run_id>.json``, written by
    :mod:`commscope.pipeline.run_config`) and as derive publishes it (``run_config``); the reports
    read it back from the latter."""

    run_id: str
    config: dict[str, Any]
    source: str
    synthetic: bool = False

    def to_json(self) -> str:
        """Serialise for the store."""
        return json.dumps(
            {
                "run_id": self.run_id,
                "source": self.source,
                "synthetic": self.synthetic,
                "config": self.config,
            },
            indent=2,
            sort_keys=True,
        )


RUN_CONFIG_COLUMNS: dict[str, pl.DataType] = {
    "run_id": pl.Utf8(),
    "config_source": pl.Utf8(),
    "synthetic": pl.Boolean(),
    "pp": pl.Int32(),
    "tp": pl.Int32(),
    "dp": pl.Int32(),
    "ep": pl.Int32(),
    "gpus_per_node": pl.Int32(),
    "micro_batches": pl.Int32(),
    "mapping_order": pl.Utf8(),
    "config_json": pl.Utf8(),
}


def run_config_frame(stored: StoredConfig | None, run_id: str) -> pl.DataFrame:
    """One row describing the run's parallel layout (nulls when unknown)."""
    if stored is None:
        return pl.DataFrame(
            [{"run_id": run_id, "config_source": "none"}], schema=RUN_CONFIG_COLUMNS
        )
    cfg = stored.config
    par = cfg.get("parallel", {})
    plat = cfg.get("platform", {})
    mapping = cfg.get("mapping", {})
    model = cfg.get("model", {})
    order = mapping.get("order") or mapping.get("preset") or "default"
    m = model.get("micro_batches")
    if m is None and model.get("global_batch") and model.get("micro_batch") and par.get("dp"):
        m = int(model["global_batch"]) // (int(model["micro_batch"]) * int(par["dp"]))
    return pl.DataFrame(
        [
            {
                "run_id": run_id,
                "config_source": stored.source,
                "synthetic": stored.synthetic,
                "pp": par.get("pp"),
                "tp": par.get("tp"),
                "dp": par.get("dp"),
                "ep": par.get("ep"),
                "gpus_per_node": plat.get("gpus_per_node"),
                "micro_batches": m,
                "mapping_order": ",".join(order) if isinstance(order, list) else str(order),
                "config_json": json.dumps(cfg, sort_keys=True),
            }
        ],
        schema=RUN_CONFIG_COLUMNS,
    )


PREDICTION_COLUMNS: dict[str, dict[str, pl.DataType]] = {
    "predicted_traffic": {
        "run_id": pl.Utf8(),
        "rank": pl.Int32(),
        "traffic_class": pl.Utf8(),
        "count": pl.Int64(),
        "msg_bytes": pl.Int64(),
        "volume_bytes": pl.Int64(),
        "sent_bytes": pl.Int64(),
    },
    # One row per (rank, traffic_class, op, group_size, msg_bytes): the calls the model predicts
    # per iteration (commscope.model.traffic_rows, the pipeline neighbours' groups summed). msg_bytes
    # is the model's logged size of one message (reduce_scatter: the whole input, as DeepSpeed
    # logs it). int_comm_ops_classified classifies calls without known group members by it.
    "predicted_signatures": {
        "run_id": pl.Utf8(),
        "rank": pl.Int32(),
        "stage": pl.Int32(),
        "traffic_class": pl.Utf8(),
        "op": pl.Utf8(),
        "group_size": pl.Int32(),
        "msg_bytes": pl.Int64(),
        "count": pl.Int64(),
    },
    "predicted_matrix": {
        "run_id": pl.Utf8(),
        "src_rank": pl.Int32(),
        "dst_rank": pl.Int32(),
        "traffic_class": pl.Utf8(),
        "bytes": pl.Int64(),
        "intra_node": pl.Boolean(),
    },
    "predicted_times": {"run_id": pl.Utf8(), "term": pl.Utf8(), "value": pl.Float64()},
    "predicted_stage_times": {
        "run_id": pl.Utf8(),
        "stage": pl.Int32(),
        "term": pl.Utf8(),
        "value": pl.Float64(),
    },
    # One row per bandwidth class (TP, PP, DP, EP): the constants the model used for the run
    # (commscope.model.predict.effective_bandwidths), so the reports read them instead of
    # evaluating the model. stated: the config gives that class's C (c_tp, ..., or c_intra and
    # c_inter for all); mu and peak_flops repeat the platform's μ and F on every row.
    "predicted_platform": {
        "run_id": pl.Utf8(),
        "traffic_class": pl.Utf8(),
        "busbw_Bps": pl.Float64(),
        "stated": pl.Boolean(),
        "mu": pl.Float64(),
        "peak_flops": pl.Float64(),
    },
}

BANDWIDTH_CLASSES = ("TP", "PP", "DP", "EP")
"""The traffic classes whose bus bandwidth (C) the model states (``predicted_platform``)."""

INPUT_COLUMNS: dict[str, dict[str, pl.DataType]] = {
    "run_config": RUN_CONFIG_COLUMNS,
    **PREDICTION_COLUMNS,
}
"""Relations the SQL reads beside the canonical tables (``EXTERNAL_INPUTS`` of sql_modules):
the run's configuration and the analytical model's predictions, with their column types."""


def predictions(stored: StoredConfig | None, run_id: str) -> dict[str, pl.DataFrame]:
    """The model's per-rank traffic, call signatures, matrix, time terms (rank 0) and per-stage
    time terms (``predicted_stage_times``: every stage within one common iteration, its bubble by
    eqs. 5-7 per stage, :func:`commscope.model.predict.pipeline_stage_times`) for the run's config
    (or empty)."""
    empty = {name: pl.DataFrame(schema=cols) for name, cols in PREDICTION_COLUMNS.items()}
    if stored is None or "model" not in stored.config:
        return empty
    # the platform's constants stand on their own: a config whose traffic the model cannot
    # predict may still state its bandwidths
    empty["predicted_platform"] = platform_frame(stored.config, run_id)
    try:
        from commscope import model as m
    except ImportError:  # model package not available
        return empty
    try:
        run = m.config_from_dict(stored.config)
        rows = pl.DataFrame(m.traffic_rows(run))
        # One row per (rank, class): the model lists send/recv and sub-ops separately.
        traffic = (
            rows.group_by("rank", "traffic_class")
            .agg(
                pl.col("count").sum(),
                pl.col("msg_bytes").max(),
                pl.col("volume_bytes").sum(),
                pl.col("sent_bytes").sum(),
            )
            .with_columns(run_id=pl.lit(run_id))
        )
        # One row per call signature: a stage-1 rank's PP sends to both neighbours are one.
        signatures = (
            rows.group_by("rank", "stage", "traffic_class", "op", "group_size", "msg_bytes")
            .agg(pl.col("count").sum())
            .sort("rank", "traffic_class", "op", "msg_bytes")
            .with_columns(run_id=pl.lit(run_id))
        )
        matrix = pl.DataFrame(m.predicted_matrix(run)).with_columns(run_id=pl.lit(run_id))
        times: dict[str, Any] = m.time_terms(run, "stage_exact", 0)
        terms = pl.DataFrame([{"term": k, "value": float(v)} for k, v in times.items()])
        terms = terms.with_columns(run_id=pl.lit(run_id))
        # every stage within one common iteration: per-stage bubble (eqs. 5-7 per stage)
        stage_terms = pl.DataFrame(m.stage_time_rows(run, "stage_exact")).with_columns(
            run_id=pl.lit(run_id)
        )
    except Exception as exc:  # a config the model cannot evaluate: derive without predictions
        log.warning("%s: model predictions unavailable: %s", run_id, exc)
        return empty
    out = dict(empty)  # relations the model does not fill here stay empty
    for name, df in (
        ("predicted_traffic", traffic),
        ("predicted_signatures", signatures),
        ("predicted_matrix", matrix),
        ("predicted_times", terms),
        ("predicted_stage_times", stage_terms),
    ):
        cols = empty[name].columns
        out[name] = df.select([c for c in cols if c in df.columns]).cast(
            {c: t for c, t in empty[name].schema.items() if c in df.columns}
        )
    return out


def platform_frame(config: dict[str, Any], run_id: str) -> pl.DataFrame:
    """``predicted_platform`` of a config: bus bandwidth per class (bytes/s,
    :func:`commscope.model.predict.effective_bandwidths`), whether the config states it, μ and
    F; no rows when the model cannot evaluate the config."""
    cols = PREDICTION_COLUMNS["predicted_platform"]
    try:
        from commscope import model as m

        run = m.config_from_dict(config)
        bws = m.effective_bandwidths(run)
    except Exception:  # a config the model cannot evaluate: no model side
        return pl.DataFrame(schema=cols)
    plat = config.get("platform", {}) or {}
    if plat.get("c_intra") and plat.get("c_inter"):
        stated = set(BANDWIDTH_CLASSES)
    else:
        stated = {c for c in BANDWIDTH_CLASSES if plat.get(f"c_{c.lower()}")}
    rows = [
        {
            "run_id": run_id,
            "traffic_class": c,
            "busbw_Bps": float(bws[c]),
            "stated": c in stated,
            "mu": float(run.platform.mu),
            "peak_flops": float(run.platform.peak_flops),
        }
        for c in BANDWIDTH_CLASSES
        if c in bws
    ]
    return pl.DataFrame(rows, schema=cols)


def input_frames(stored: StoredConfig | None, run_id: str) -> dict[str, pl.DataFrame]:
    """``run_config`` and the ``predicted_*`` frames of one run (typed; predictions may be empty)."""
    return {"run_config": run_config_frame(stored, run_id), **predictions(stored, run_id)}


def empty_inputs() -> dict[str, pl.DataFrame]:
    """Every input relation with its columns and no rows."""
    return {name: pl.DataFrame(schema=cols) for name, cols in INPUT_COLUMNS.items()}


def register_tables(con: duckdb.DuckDBPyConnection, frames: dict[str, pl.DataFrame]) -> None:
    """Create (or replace) one DuckDB table per frame, keeping the frame's column types."""
    for name, df in frames.items():
        con.register(f"_{name}_df", df.to_arrow())
        con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM _{name}_df")
        con.unregister(f"_{name}_df")
