"""``commscope derive``: compute a run's metrics (the marts) and store them as Parquet."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import duckdb

from commscope.pipeline import run_config as rc
from commscope.pipeline.commands._format import table
from commscope.pipeline.derive import DeriveProgress, DeriveResult, derive_run
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
            res = derive_run(
                store, run_id, config=args.config, progress=stderr_derive_progress(run_id)
            )
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
            print(derive_totals(res))
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


def stderr_derive_progress(
    run_id: str,
    *,
    stream: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> DeriveProgress:
    """A progress line for a derive on a terminal (no-op otherwise), rewritten in place:
    relations done of all, the one just done, the rate and the time since the rows were loaded;
    a newline after the last.

    No ETA: a derive's relations differ in cost by orders of magnitude (at 1024 ranks the
    first few intermediates take most of the time), so the share done does not predict the
    rest.
    """
    out = stream if stream is not None else sys.stderr
    show = out.isatty()
    start = clock()

    def report(name: str, done: int, total: int) -> None:
        if not show:
            return
        elapsed = clock() - start
        rate = f", {done / elapsed:.1f}/s" if done and elapsed > 0 else ""
        out.write(
            f"\r\x1b[K[derive {run_id}: {done}/{total} relations{rate}, "
            f"{name} done, {elapsed:.1f} s]"
        )
        if done >= total:
            out.write("\n")
        out.flush()

    return report


def derive_totals(res: DeriveResult) -> str:
    """One line of totals for a derive: marts and their rows, relations computed, wall time."""
    rows = sum(res.marts.values())
    relations = len(res.intermediate_seconds) + len(res.marts)
    return (
        f"total: {len(res.marts)} marts, {rows:,} rows, {relations} relations computed in "
        f"{res.wall_seconds:.1f} s (load {res.load_seconds:.1f} s)"
    )


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
