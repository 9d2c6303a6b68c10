"""``commscope report``: one self-contained HTML report of a run (offline, escaped, CSP)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import duckdb

from commscope.pipeline.sql_modules import SqlModuleError
from commscope.pipeline.store import Store, StoreError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``report`` subcommand."""
    p = sub.add_parser(
        "report",
        help="write one self-contained HTML report of a run (measured beside predicted)",
        description="Build an HTML page from the run's marts: headline numbers with the model's "
        "predictions and errors, iteration breakdown, traffic heatmaps, on/off timeline, message "
        "sizes, bandwidth, stragglers and bubbles, predictability, MoE non-uniformity and data "
        "quality. The page works offline (Vega inlined, no network request) and escapes all log "
        "text. The run is derived first when its marts are missing or --model is given.",
    )
    p.add_argument("run_id", help="run id")
    p.add_argument("-o", "--out", type=Path, default=None, help="HTML file (default: RUN_ID.html)")
    p.add_argument(
        "--model", type=Path, default=None, help="model/parallel config (TOML); re-derives the run"
    )
    p.add_argument(
        "--rank",
        type=int,
        default=0,
        help="rank of the paper's Table 3 (traffic per type at one rank; default 0, the paper's)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the report and print its path."""
    from commscope.pipeline.derive import ensure_derived
    from commscope.reports.html import build_report, check_out_path

    out = args.out or Path(f"{args.run_id}.html")
    try:
        store = Store.open(args.store, create=False)
        t0 = time.perf_counter()
        check_out_path(out)
        if args.run_id not in store.runs():
            raise ValueError(f"run {args.run_id!r} not in {store.root}")
        ensure_derived(store, args.run_id, config=args.model)
        path = build_report(store, args.run_id, out, paper_rank=args.rank)
    except (StoreError, SqlModuleError, OSError, ValueError) as exc:
        print(f"commscope: error: {exc}", file=sys.stderr)
        return 2
    except duckdb.Error as exc:  # one line, never a traceback
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"commscope: error: report failed: {text}", file=sys.stderr)
        return 2
    size = path.stat().st_size / 1e6
    print(f"wrote {path} ({size:.1f} MB, {time.perf_counter() - t0:.1f} s)")
    return 0
