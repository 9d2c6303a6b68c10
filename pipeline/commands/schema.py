"""``commscope schema``: the documented columns of the canonical tables, marts and views."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``schema`` subcommand."""
    p = sub.add_parser(
        "schema",
        help="print the documented columns of the canonical tables, marts and views",
        description="Print the canonical schema (all tables, or one), with units and meaning; "
        "with a mart, intermediate or staging view's name (or a model input: run_config, "
        "predicted_*), its documented columns. Without a name: every table in full, then one "
        "line per mart and view.",
    )
    p.add_argument("table", nargs="?", default=None, help="one table, mart or view (default: all)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the schema docs."""
    from commscope.parsers.schema import TABLES, describe
    from commscope.pipeline.sql_modules import describe_modules

    name = args.table
    if name is None:
        print(describe(None))
        print("Marts and views (`commscope schema NAME` for the columns of one):")
        print(describe_modules(None))
        return 0
    if name in TABLES:
        print(describe(name))
        return 0
    try:
        print(describe_modules(name))
        return 0
    except KeyError:
        pass
    from commscope.pipeline.model_inputs import INPUT_COLUMNS

    if name in INPUT_COLUMNS:
        print(f"{name}  (model input: written by derive per run from its config)")
        for col, dtype in INPUT_COLUMNS[name].items():
            print(f"  {col:<28} {dtype}")
        return 0
    print(
        f"commscope: error: unknown table or view {name!r}; `commscope schema` lists them",
        file=sys.stderr,
    )
    return 2
