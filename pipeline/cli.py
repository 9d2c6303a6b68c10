"""The ``commscope`` command line: thin commands over the library.

Each module in ``pipeline/commands/`` adds one subcommand through ``register(subparsers)`` and
runs it with ``run(args) -> int``. Every command takes ``--store`` and has ``--help``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
from pathlib import Path

from pipeline.commands._format import SafeFormatter
from pipeline.settings import STORE_ENV, default_store


def store_parent() -> argparse.ArgumentParser:
    """The options every command shares."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--store",
        type=Path,
        default=default_store(),
        help=f"store folder (default: ${STORE_ENV} or ./commscope_store)",
    )
    parent.add_argument("-v", "--verbose", action="store_true", help="log more detail")
    return parent


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every registered subcommand."""
    import pipeline.commands as commands

    parser = argparse.ArgumentParser(
        prog="commscope",
        description="Turn the communication logs of distributed training into answers.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    parent = store_parent()
    for mod in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"pipeline.commands.{mod.name}")
        _register(module, sub, parent)
    return parser


def _register(
    module: object, sub: argparse._SubParsersAction, parent: argparse.ArgumentParser
) -> None:
    """Call a command module's register() so its parser inherits the shared options."""
    original = sub.add_parser

    def add_parser(name: str, **kwargs: object) -> argparse.ArgumentParser:
        parents = list(kwargs.pop("parents", []))  # type: ignore[call-overload]
        return original(name, parents=[parent, *parents], **kwargs)  # type: ignore[arg-type]

    sub.add_parser = add_parser  # type: ignore[method-assign]
    try:
        module.register(sub)  # type: ignore[attr-defined]
    finally:
        sub.add_parser = original  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = logging.StreamHandler()
    # Log messages quote file names and log text: escape sequences in them must not act.
    handler.setFormatter(SafeFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(
        level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
        handlers=[handler],
    )
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("commscope: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
