"""``commscope query``: ad-hoc SQL over the store, read-only."""

from __future__ import annotations

import argparse
import json
import sys

import duckdb

from pipeline.commands._format import table
from pipeline.store import Store, StoreError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``query`` subcommand."""
    p = sub.add_parser(
        "query",
        help="run SQL over the store (read-only)",
        description=(
            "Run one SQL statement against the store's DuckDB catalog, where every canonical "
            "table (and every derived mart) is a view. The connection is read-only. "
            "Use '-' to read the SQL from standard input."
        ),
    )
    p.add_argument("sql", help="SQL text, or - for stdin")
    p.add_argument("--format", dest="out_format", choices=("table", "csv", "json"), default="table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the query and print the result."""
    sql = sys.stdin.read() if args.sql == "-" else args.sql
    try:
        store = Store.open(args.store, create=False)
        con = store.connect(read_only=True)
    except StoreError as exc:
        print(f"commscope: error: {exc}", file=sys.stderr)
        return 2
    try:
        rel = con.sql(sql)
        if rel is None:
            return 0
        df = rel.pl()
    except duckdb.Error as exc:
        print(f"commscope: error: query failed: {exc}", file=sys.stderr)
        return 1
    finally:
        con.close()
    if args.out_format == "csv":
        sys.stdout.write(df.write_csv())
    elif args.out_format == "json":
        sys.stdout.write(json.dumps(df.to_dicts(), default=str, indent=1) + "\n")
    else:
        print(table(df.columns, df.rows()))
        print(f"({df.height} rows)")
    return 0
