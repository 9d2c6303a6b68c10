"""``commscope compare``: two runs side by side in one HTML page, with their differences."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from commscope.pipeline.sql_modules import SqlModuleError
from commscope.pipeline.store import Store, StoreError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``compare`` subcommand."""
    p = sub.add_parser(
        "compare",
        help="write an HTML page comparing two runs (e.g. TCP vs RoCE, default vs custom mapping)",
        description="Every report view of RUN_A beside the same view of RUN_B, headed by the "
        "differences of the headline numbers (B - A) and the straggler changes (top offenders "
        "before/after, wait caused, persistent flags; also printed). Offline and escaped like "
        "`report`; runs whose marts are missing are derived first.",
    )
    p.add_argument("run_a", help="first run (A)")
    p.add_argument("run_b", help="second run (B)")
    p.add_argument("-o", "--out", type=Path, default=Path("compare.html"), help="HTML file")
    p.add_argument(
        "--json",
        action="store_true",
        help="print JSON instead of text: the page's path and the straggler changes (per run "
        "its top offender, wait caused, persistent ranks; per offender A beside B)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the comparison and print its path."""
    from commscope.pipeline.derive import ensure_derived
    from commscope.reports.html import compare_runs

    try:
        store = Store.open(args.store, create=False)
        t0 = time.perf_counter()
        for run_id in (args.run_a, args.run_b):
            if run_id not in store.runs():
                raise ValueError(f"run {run_id!r} not in {store.root}")
            ensure_derived(store, run_id)
        result = compare_runs(store, args.run_a, args.run_b, args.out)
    except (StoreError, SqlModuleError, OSError, ValueError) as exc:
        print(f"commscope: error: {exc}", file=sys.stderr)
        return 2
    path = result.path
    if getattr(args, "json", False):
        doc = {"html": str(path), "stragglers": result.stragglers.as_json()}
        print(json.dumps(doc, indent=2, default=str))
        return 0
    print("\n".join(result.stragglers.lines))
    size = path.stat().st_size / 1e6
    print(f"wrote {path} ({size:.1f} MB, {time.perf_counter() - t0:.1f} s)")
    return 0
