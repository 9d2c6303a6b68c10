"""``commscope summary``: what the store holds per run."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from commscope.pipeline.commands._format import table
from commscope.pipeline.store import Store, StoreError
from commscope.pipeline.summary import (
    LOGICAL_CALLS_NOTE,
    PER_SOURCE_NOTE,
    RunSummary,
    summarize,
)
from commscope.reports.data import stored_headline


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``summary`` subcommand."""
    p = sub.add_parser(
        "summary",
        help="print per-run files, line accounting and traffic by operation",
        description="Summarise one run (or every run): ingested files and how their lines "
        "were accounted for, logical calls and bytes per operation and traffic class (each "
        "call once however many tools of its rank logged it: int_calls, so a rank logged by "
        "several tools is not counted twice; timed_calls = calls some source timed), the same "
        "per source (each tool's own rows, "
        "labelled: not to be added up across sources), and table sizes.",
    )
    p.add_argument("--run", dest="run_id", default=None, help="one run (default: all runs)")
    p.add_argument(
        "--json",
        action="store_true",
        help="print JSON: per run its files, ops, table sizes and 'headline' (the report's "
        "headline rows, measured beside predicted, each saying what it includes; GB/s and s)",
    )
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
        summaries = [summarize(store, run_id, con) for run_id in runs]
    finally:
        con.close()
    if getattr(args, "json", False):
        print(json.dumps({"runs": [as_json(store, s) for s in summaries]}, indent=2, default=str))
        return 0
    for s in summaries:
        print(render(s))
    return 0


def as_json(store: Store, s: RunSummary) -> dict[str, Any]:
    """One run's summary as JSON; ``headline`` is :func:`commscope.reports.data.stored_headline`."""
    return {
        "run_id": s.run_id,
        "files": s.files.to_dicts(),
        "ops": s.ops.to_dicts(),
        "ops_from": s.ops_from,
        "ops_by_source": s.ops_by_source.to_dicts(),
        "tables": s.tables,
        "headline": stored_headline(store, s.run_id),
    }


def render(s: RunSummary) -> str:
    """The text block for one run."""
    out = [f"== run {s.run_id}", "", table(s.files.columns, s.files.rows()), ""]
    if s.ops.height:
        out += [f"{LOGICAL_CALLS_NOTE}; {s.ops_from}", table(s.ops.columns, s.ops.rows()), ""]
    if s.ops_by_source.height:
        out += [PER_SOURCE_NOTE, table(s.ops_by_source.columns, s.ops_by_source.rows()), ""]
    out.append("rows: " + ", ".join(f"{k} {v:,}" for k, v in s.tables.items()))
    return "\n".join(out) + "\n"
