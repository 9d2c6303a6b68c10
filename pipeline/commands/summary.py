"""``commscope summary``: what the store holds per run."""

from __future__ import annotations

import argparse
import sys

from pipeline.commands._format import table
from pipeline.store import Store, StoreError
from pipeline.summary import LOGICAL_CALLS_NOTE, PER_SOURCE_NOTE, RunSummary, summarize


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``summary`` subcommand."""
    p = sub.add_parser(
        "summary",
        help="print per-run files, line accounting and traffic by operation",
        description="Summarise one run (or every run): ingested files and how their lines "
        "were accounted for, logical calls and bytes per operation and traffic class (each "
        "call once, from the one source that counts for its rank, so a rank logged by "
        "several tools is not counted twice), the same per source (each tool's own rows, "
        "labelled: not to be added up across sources), and table sizes.",
    )
    p.add_argument("--run", dest="run_id", default=None, help="one run (default: all runs)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the summaries."""
    try:
        store = Store.open(args.store, create=False)
    except StoreError as exc:
        print(f"commscope: error: {exc}", file=sys.stderr)
        return 2
    runs = [args.run_id] if args.run_id else store.runs()
    if not runs:
        print("the store holds no runs yet")
        return 0
    con = store.connect(read_only=True)
    try:
        for run_id in runs:
            print(render(summarize(store, run_id, con)))
    finally:
        con.close()
    return 0


def render(s: RunSummary) -> str:
    """The text block for one run."""
    out = [f"== run {s.run_id}", "", table(s.files.columns, s.files.rows()), ""]
    if s.ops.height:
        out += [LOGICAL_CALLS_NOTE, table(s.ops.columns, s.ops.rows()), ""]
    if s.ops_by_source.height:
        out += [PER_SOURCE_NOTE, table(s.ops_by_source.columns, s.ops_by_source.rows()), ""]
    out.append("rows: " + ", ".join(f"{k} {v:,}" for k, v in s.tables.items()))
    return "\n".join(out) + "\n"
