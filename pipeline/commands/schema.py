"""``commscope schema``: the documented columns of the canonical tables."""

from __future__ import annotations

import argparse
import sys

from parsers.schema import SchemaError, describe


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``schema`` subcommand."""
    p = sub.add_parser(
        "schema",
        help="print the canonical tables and their documented columns",
        description="Print the canonical schema (all tables, or one), with units and meaning.",
    )
    p.add_argument("table", nargs="?", default=None, help="one table (default: all)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the schema docs."""
    try:
        print(describe(args.table))
    except SchemaError as exc:
        print(f"commscope: error: {exc}", file=sys.stderr)
        return 2
    return 0
