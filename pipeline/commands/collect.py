"""``commscope collect -- CMD ...``: run a training launch with analysable logging.

A thin shell over :func:`commscope.pipeline.collect.collect` (see its module docstring for every variable
it sets and what the manifest holds).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from commscope.pipeline.collect import collect
from commscope.pipeline.store import StoreError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``collect`` subcommand."""
    p = sub.add_parser(
        "collect",
        help="run a training command with NCCL/DeepSpeed logging set up, write a manifest",
        description=(
            "Run CMD with NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,COLL,P2P,NET,GRAPH,TUNING and "
            "NCCL_DEBUG_FILE=<out>/nccl/%%h.%%p.log (values you exported are kept), write a "
            "DeepSpeed comms_logger section to <out>/ds_comms_logger.json (and print what to "
            "merge into your ds_config), tee stdout/stderr to <out>/stdout.log and write "
            "<out>/manifest.json, which `commscope ingest <out>` reads. Exits with CMD's code."
        ),
    )
    p.add_argument("--out", type=Path, default=None, help="collection folder")
    p.add_argument("--run-id", default=None, help="run id (default: the folder name)")
    p.add_argument("--config", type=Path, default=None, help="run config (TOML) for the manifest")
    p.add_argument("--pp", type=int, default=None, help="pipeline-parallel size")
    p.add_argument("--tp", type=int, default=None, help="tensor-parallel size")
    p.add_argument("--dp", type=int, default=None, help="data-parallel size")
    p.add_argument(
        "--profiler",
        action="store_true",
        help="set COMMSCOPE_PROFILE_DIR=<out>/profiler and print a torch.profiler snippet",
    )
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the command; return its exit code (2 for a usage error)."""
    from commscope.pipeline.run_config import read_config_file

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print(
            "commscope: error: no command given (commscope collect [...] -- CMD ...)",
            file=sys.stderr,
        )
        return 2
    config: dict[str, Any] | None = None
    if args.config is not None:
        try:
            config = read_config_file(args.config)
        except (OSError, ValueError) as exc:  # a ConfigError names the file and the key
            print(f"commscope: error: {exc}", file=sys.stderr)
            return 2
    par = {k: getattr(args, k) for k in ("pp", "tp", "dp") if getattr(args, k) is not None}
    if par:
        config = config or {}
        config["parallel"] = {**config.get("parallel", {}), **par}
    out = args.out or Path(f"commscope_collect_{datetime.now(UTC):%Y%m%d-%H%M%S}")
    try:
        res = collect(cmd, out, run_id=args.run_id, config=config, profiler=args.profiler)
    except StoreError as exc:
        print(f"commscope: error: {exc}", file=sys.stderr)
        return 2
    return res.exit_code
