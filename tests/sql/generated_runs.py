"""One way for the SQL tests to make a synthetic run: generate, ingest, derive, read back.

Why: the end-to-end tests against the generator's truth (marts vs truth, wait/transfer split,
classes on any source, issue 17's acceptance) all need the same three steps through the Python
API; they differ only in the config, the generator overrides and what is ingested.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from commscope.pipeline import run_config as rc
from commscope.pipeline.derive import connect_for_derive, derive_run, materialise_intermediates
from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.run_config import load_generate_config
from commscope.pipeline.store import Store
from commscope.synthetic import generate, with_overrides

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"


@dataclass(frozen=True)
class GeneratedRun:
    """A generated, ingested and derived run: its generator folder, store and run id."""

    gen: Path
    store: Store
    run_id: str

    @cached_property
    def truth(self) -> dict[str, Any]:
        """The generator's truth.json."""
        return json.loads((self.gen / "truth.json").read_text())

    def truth_table(self, key: str = "per_rank_iteration") -> pl.DataFrame:
        """A columnar table of truth.json (default: per rank and iteration)."""
        table = self.truth[key]
        return pl.DataFrame(table["rows"], schema=table["columns"], orient="row")

    def mart(self, name: str) -> pl.DataFrame:
        """The mart as derive materialised it for this run."""
        return pl.read_parquet(self.store.mart_files(self.run_id)[name])

    def truth_traffic(self) -> pl.DataFrame:
        """truth/traffic.parquet with the traffic_matrix mart's column names (bytes as want)."""
        return pl.read_parquet(self.gen / "truth" / "traffic.parquet").select(
            pl.col("iteration").cast(pl.Int32),
            pl.col("src").cast(pl.Int32).alias("src_rank"),
            pl.col("dst").cast(pl.Int32).alias("dst_rank"),
            pl.col("cls").alias("traffic_class"),
            pl.col("bytes").alias("want"),
        )

    @cached_property
    def _derived(self) -> duckdb.DuckDBPyConnection:
        """The run's rows with every intermediate computed once into a table, as derive holds
        them (the catalog's live intermediate views re-plan every shared subtree per query:
        minutes for the instance views)."""
        con, _ = connect_for_derive(self.store, self.run_id, rc.load(self.store, self.run_id))
        materialise_intermediates(con)
        return con

    def query(self, sql: str) -> pl.DataFrame:
        """Run SQL on the run's intermediate tables and marts (as derive computes them), with
        the run id bound to its one ``?``."""
        return self._derived.sql(sql, params=[self.run_id]).pl()


def generate_run(tmp: Path, config: str, **overrides: Any) -> Path:
    """Generate ``configs/<config>`` with generator ``overrides`` into ``tmp/gen``."""
    run, opts = load_generate_config(CONFIGS / config)
    gen = tmp / "gen"
    generate(run, with_overrides(opts, **overrides), gen)
    return gen


def ingest_and_derive(
    gen: Path,
    store_dir: Path,
    run_id: str,
    *,
    paths: Sequence[Path] | None = None,
    config: Path | None = None,
) -> GeneratedRun:
    """Ingest ``paths`` (default: the whole generator folder) as ``run_id`` and derive it."""
    store = Store.open(store_dir)
    ingest_paths(store, list(paths) if paths is not None else [gen], run_id=run_id, config=config)
    derive_run(store, run_id)
    return GeneratedRun(gen, store, run_id)


def make_run(tmp: Path, config: str, run_id: str, **overrides: Any) -> GeneratedRun:
    """Generate ``configs/<config>``, ingest every file it wrote, derive."""
    return ingest_and_derive(generate_run(tmp, config, **overrides), tmp / "store", run_id)


_SHARED: dict[tuple[Any, ...], GeneratedRun] = {}


def shared_run(factory: Any, config: str, run_id: str, **overrides: Any) -> GeneratedRun:
    """:func:`make_run`, made once per test session for each (config, run id, overrides) and
    shared by every test module that asks for the same run (treat it as read-only).

    Why: several truth tests read the same generated run (MoE EP 8 as shipped: the wait split
    and issue 17's acceptance; GPT-3B 4 iterations profiled on [1, 2]: the same two); each made
    its own, paying generate + ingest + derive again.

    Args:
        factory: pytest's ``tmp_path_factory`` (session scope).
        config: the file under ``configs/``.
        run_id: the run id.
        overrides: generator overrides, as for :func:`make_run`.
    """
    key = (config, run_id, tuple(sorted((k, repr(v)) for k, v in overrides.items())))
    if key not in _SHARED:
        _SHARED[key] = make_run(factory.mktemp(f"shared_{run_id}"), config, run_id, **overrides)
    return _SHARED[key]
