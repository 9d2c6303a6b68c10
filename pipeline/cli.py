"""The ``commscope`` command line: thin commands over the library.

Each module in ``pipeline/commands/`` adds one subcommand through ``register(subparsers)`` and
runs it with ``run(args) -> int``. Every command takes ``--store`` and has ``--help``.

Start-up cost: :func:`main` imports only the module of the command it runs. The top-level
``--help`` lists the commands from :data:`COMMANDS` (one line each) without importing any
command module, since they import polars, duckdb and the store (~0.35 s of CPU together);
``tests/pipeline/test_cli.py`` checks that :data:`COMMANDS` matches the modules' own help.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

from commscope.pipeline.settings import STORE_ENV, default_store

COMMANDS: dict[str, str] = {
    "advise": "rank parallel layouts (p, t, d, b, m, mapping) by predicted iteration time",
    "calibrate": "fit mu and the bandwidths C to a derived run",
    "collect": "run a training command with NCCL/DeepSpeed logging set up, write a manifest",
    "compare": "write an HTML page comparing two runs (e.g. TCP vs RoCE, default vs custom "
    "mapping)",
    "demo": "generate a small synthetic run, then ingest, derive and report it with the "
    "bundled sample traces (one cycle of the serve flow)",
    "derive": "compute a run's marts (iterations, traffic matrix, bandwidth, ...) into the store",
    "generate": "write a synthetic run (NCCL, DeepSpeed, Kineto, nsys) with ground truth",
    "hang": "name the stuck ranks and collectives from Flight Recorder dumps",
    "ingest": "parse log/trace files or folders into the store",
    "predict": "predict per-type traffic and time terms of a parallel layout (APNet'24 model)",
    "query": "run SQL over the store (read-only unless --write)",
    "report": "write one self-contained HTML report of a run (measured beside predicted)",
    "schema": "print the documented columns of the canonical tables, marts and views",
    "serve": "watch a log folder: ingest new/grown files, derive and report changed runs",
    "summary": "print per-run files, line accounting and traffic by operation",
}
"""Every subcommand (the module ``commscope.pipeline.commands.<name>``) with its one-line help, as the
module registers it: what ``commscope --help`` lists without importing the modules."""


def version() -> str:
    """The installed commscope version (``unknown`` when run from a source tree only)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("commscope")
    except PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    """``--version``: print the version and exit (looked up only when asked for)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"commscope {version()}")
        parser.exit()


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


def command_modules() -> list[str]:
    """Names of the subcommand modules in ``pipeline/commands/`` (without importing them)."""
    import commscope.pipeline.commands as commands

    return sorted(m.name for m in pkgutil.iter_modules(commands.__path__) if m.name[0] != "_")


def build_parser(load: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser with every subcommand.

    Args:
        load: import and register only these commands' modules; every other command is listed
            by its :data:`COMMANDS` help line alone (what ``main`` uses: no other module's
            imports are paid). ``None`` registers every module (tests, docs).
    """
    parser = argparse.ArgumentParser(
        prog="commscope",
        description="Turn the communication logs of distributed training into answers.",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    parent = store_parent()
    names = command_modules() if load is None else sorted(set(COMMANDS) | set(load))
    for name in names:
        if load is None or name in load:
            module = importlib.import_module(f"commscope.pipeline.commands.{name}")
            _register(module, sub, parent)
        else:
            sub.add_parser(name, help=COMMANDS[name], add_help=False)
    return parser


def _selected(argv: list[str]) -> str | None:
    """The subcommand named on the command line (its first word not an option), if known.

    The top-level parser has no option that takes a value, so that word is the command.
    """
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in COMMANDS else None


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
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _selected(argv)
    parser = build_parser(load=() if command is None else (command,))
    args = parser.parse_args(argv)
    from commscope.pipeline.commands._format import SafeFormatter

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
