"""``commscope demo``: the main job on the bundled sample traces."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline.commands._format import table
from pipeline.commands.ingest import render_results
from pipeline.commands.summary import render
from pipeline.derive import derive_run
from pipeline.ingest import ingest_paths
from pipeline.store import Store, StoreError
from pipeline.summary import summarize

REPO_SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``demo`` subcommand."""
    p = sub.add_parser(
        "demo",
        help="ingest and derive the bundled sample traces (one run per folder), then summarise",
        description="Run the main job on sample_traces/: every sub-folder is one run; ingest "
        "it, derive its marts, then print each run's summary.",
    )
    p.add_argument("--samples", type=Path, default=REPO_SAMPLES, help="folder of run folders")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Ingest each run folder and print the summaries."""
    runs = sorted(d for d in args.samples.iterdir() if d.is_dir()) if args.samples.is_dir() else []
    if not runs:
        print(f"commscope: error: no run folders in {args.samples}", file=sys.stderr)
        return 2
    try:
        store = Store.open(args.store)
    except StoreError as exc:
        print(f"commscope: error: {exc}", file=sys.stderr)
        return 2
    ok = True
    for d in runs:
        results = ingest_paths(store, [d], run_id=d.name)
        print(f"ingested {d} as run {d.name}:")
        print(render_results(results) + "\n")
        ok = ok and any(r.ok for r in results)
        derived = derive_run(store, d.name)
        print(
            f"derived {len(derived.marts)} marts for {d.name}: "
            + ", ".join(f"{k} ({v} rows)" for k, v in derived.marts.items())
            + "\n"
        )
    con = store.connect(read_only=True)
    try:
        for d in runs:
            print(render(summarize(store, d.name, con)))
    finally:
        con.close()
    print(table(("store",), [(str(store.root),)]))
    return 0 if ok else 1
