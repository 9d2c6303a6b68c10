"""``commscope derive``: compute a run's metrics (the marts) and store them as Parquet."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import duckdb

from commscope.pipeline import run_config as rc
from commscope.pipeline.commands._format import table
from commscope.pipeline.derive import DeriveResult, derive_run
from commscope.pipeline.sql_modules import SqlModuleError
from commscope.pipeline.store import Store, StoreError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``derive`` subcommand."""
    p = sub.add_parser(
        "derive",
        help="compute a run's marts (iterations, traffic matrix, bandwidth, ...) into the store",
        description="Run the SQL in sql/ over a run's ingested data and materialise every mart "
        "to Parquet; `commscope query` then sees them as views. The run's configuration comes "
        "from --config, else from what ingest recorded (a manifest beside the logs), else it is "
        "inferred from the communicators.",
    )
    p.add_argument("run_id", nargs="+", help="run id(s)")
    p.add_argument("--config", type=Path, default=None, help="model/parallel config (TOML)")
    p.set_defaults(func=run)


def _warn_without_model(store: Store, run_id: str) -> None:
    """A config without ``[model]``/``[parallel]`` gives no predictions: say so, never silently.

    (A config the model cannot evaluate is logged by :func:`commscope.pipeline.derive.predictions`.)
    """
    stored = rc.load(store, run_id)
    if stored is None:
        return
    missing = [s for s in ("model", "parallel") if s not in stored.config]
    if missing:
        print(
            f"commscope: warning: run {run_id}: the config ({stored.source}) has no "
            f"{' and '.join(f'[{s}]' for s in missing)} section: no predictions "
            "(predicted_* are empty; model_vs_measured has no model side)",
            file=sys.stderr,
        )


def run(args: argparse.Namespace) -> int:
    """Derive each run and print mart sizes."""
    try:
        store = Store.open(args.store, create=False)
        for run_id in args.run_id:
            if run_id not in store.runs():
                print(f"commscope: error: run {run_id!r} not in {store.root}", file=sys.stderr)
                return 2
            res = derive_run(store, run_id, config=args.config)
            print(
                f"run {run_id} (config: {res.config_source or 'none, inferred'}; "
                f"from {res.batches} committed batches)"
            )
            _warn_without_model(store, run_id)
            print(
                table(
                    ("mart", "rows", "seconds"),
                    [(k, v, res.seconds[k]) for k, v in res.marts.items()],
                )
            )
            if getattr(args, "verbose", False):
                print(render_steps(res))
    except (StoreError, SqlModuleError, OSError, ValueError) as exc:
        print(f"commscope: error: {exc}", file=sys.stderr)
        return 2
    except duckdb.Error as exc:  # one line, never a traceback (the store is left as it was)
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"commscope: error: derive failed: {text}", file=sys.stderr)
        return 2
    return 0


def render_steps(res: DeriveResult) -> str:
    """Where the derive's wall time went (``--verbose``): each step, the intermediates inside
    their step, and "other" for what lies between the steps, so the seconds add up to the wall."""
    rows: list[tuple[str, str, str]] = []
    wall = res.wall_seconds or sum(res.steps.values())

    def row(name: str, sec: float) -> tuple[str, str, str]:
        return (name, f"{sec:.3f}", f"{100 * sec / wall:.1f}" if wall > 0 else "-")

    for step, sec in res.steps.items():
        rows.append(row(step, sec))
        if step == "intermediates":
            rows += [row(f"  {k}", v) for k, v in res.intermediate_seconds.items()]
    rows.append(row("other", max(wall - sum(res.steps.values()), 0.0)))
    rows.append(row("total (wall)", wall))
    return table(("step", "seconds", "% of wall"), rows)
