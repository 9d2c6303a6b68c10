"""Derive: compute the marts of ``sql/marts`` for one run and materialise them to Parquet.

The SQL runs in an in-memory DuckDB over the store's committed Parquet, with the run's
configuration (``run_config``) and the analytical model's predictions (``predicted_traffic``,
``predicted_matrix``, ``predicted_times``) registered as tables beside it. Each mart is written
to ``<store>/marts/<mart>/<run_id>.parquet`` by an atomic rename; the catalog then exposes it as
a view, so ``commscope query`` and the reports read materialised marts.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from pipeline import run_config as rc
from pipeline.sql_modules import apply, discover
from pipeline.store import Store, validate_run_id

log = logging.getLogger(__name__)


@dataclass
class DeriveResult:
    """What ``derive_run`` produced."""

    run_id: str
    marts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    config_source: str | None = None


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


def run_config_frame(stored: rc.StoredConfig | None, run_id: str) -> pl.DataFrame:
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


def predictions(stored: rc.StoredConfig | None, run_id: str) -> dict[str, pl.DataFrame]:
    """The model's per-rank traffic, matrix and time terms for the run's config (or empty)."""
    empty = {
        "predicted_traffic": pl.DataFrame(
            schema={
                "run_id": pl.Utf8,
                "rank": pl.Int32,
                "traffic_class": pl.Utf8,
                "count": pl.Int64,
                "msg_bytes": pl.Int64,
                "volume_bytes": pl.Int64,
                "sent_bytes": pl.Int64,
            }
        ),
        "predicted_matrix": pl.DataFrame(
            schema={
                "run_id": pl.Utf8,
                "src_rank": pl.Int32,
                "dst_rank": pl.Int32,
                "traffic_class": pl.Utf8,
                "bytes": pl.Int64,
                "intra_node": pl.Boolean,
            }
        ),
        "predicted_times": pl.DataFrame(
            schema={"run_id": pl.Utf8, "term": pl.Utf8, "value": pl.Float64}
        ),
    }
    if stored is None or "model" not in stored.config:
        return empty
    try:
        from reports import model as m
    except ImportError:  # model package not available
        return empty
    try:
        run = m.config_from_dict(stored.config)
        # One row per (rank, class): the model lists send/recv and sub-ops separately.
        traffic = (
            pl.DataFrame(m.traffic_rows(run))
            .group_by("rank", "traffic_class")
            .agg(
                pl.col("count").sum(),
                pl.col("msg_bytes").max(),
                pl.col("volume_bytes").sum(),
                pl.col("sent_bytes").sum(),
            )
            .with_columns(run_id=pl.lit(run_id))
        )
        matrix = pl.DataFrame(m.predicted_matrix(run)).with_columns(run_id=pl.lit(run_id))
        times: dict[str, Any] = m.time_terms(run, "stage_exact", 0)
        terms = pl.DataFrame([{"term": k, "value": float(v)} for k, v in times.items()])
        terms = terms.with_columns(run_id=pl.lit(run_id))
    except Exception as exc:  # a config the model cannot evaluate: derive without predictions
        log.warning("%s: model predictions unavailable: %s", run_id, exc)
        return empty
    out = {}
    for name, df in (
        ("predicted_traffic", traffic),
        ("predicted_matrix", matrix),
        ("predicted_times", terms),
    ):
        cols = empty[name].columns
        out[name] = df.select([c for c in cols if c in df.columns]).cast(
            {c: t for c, t in empty[name].schema.items() if c in df.columns}
        )
    return out


def connect_for_derive(
    store: Store, run_id: str, stored: rc.StoredConfig | None
) -> duckdb.DuckDBPyConnection:
    """An in-memory connection with the store's views, the run's config and predictions,
    and every SQL module (marts as live views)."""
    con = duckdb.connect()
    store.create_views(con)
    con.register("_run_config_df", run_config_frame(stored, run_id).to_arrow())
    con.execute("CREATE TABLE run_config AS SELECT * FROM _run_config_df")
    con.unregister("_run_config_df")
    for name, df in predictions(stored, run_id).items():
        con.register(f"_{name}_df", df.to_arrow())
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}_df")
        con.unregister(f"_{name}_df")
    apply(con)
    return con


def derive_run(store: Store, run_id: str, *, config: Path | None = None) -> DeriveResult:
    """Materialise every mart for ``run_id``.

    Args:
        store: the store.
        run_id: the run.
        config: a config file that overrides the stored one (and is stored).
    """
    validate_run_id(run_id)
    if config is not None:
        rc.save(
            store,
            rc.StoredConfig(run_id, rc.read_config_file(config), f"config:{config.resolve()}"),
        )
    stored = rc.load(store, run_id)
    result = DeriveResult(run_id, config_source=stored.source if stored else None)
    con = connect_for_derive(store, run_id, stored)
    try:
        for mod in discover():
            if mod.layer != "marts":
                continue
            t0 = time.perf_counter()
            dest_dir = store.marts_dir() / mod.name
            dest_dir.mkdir(parents=True, exist_ok=True)
            dest = dest_dir / f"{run_id}.parquet"
            tmp = dest_dir / f".{run_id}.{os.getpid()}.tmp"
            con.execute(
                f"COPY (SELECT * FROM {mod.name} WHERE run_id = $run_id) TO '{_q(str(tmp))}' "
                "(FORMAT parquet, COMPRESSION zstd)",
                {"run_id": run_id},
            )
            tmp.replace(dest)
            rows = con.execute(f"SELECT count(*) FROM read_parquet('{_q(str(dest))}')").fetchone()
            result.marts[mod.name] = int(rows[0]) if rows else 0
            result.seconds[mod.name] = time.perf_counter() - t0
    finally:
        con.close()
    store.refresh_catalog()
    return result


def _q(s: str) -> str:
    return s.replace("'", "''")
