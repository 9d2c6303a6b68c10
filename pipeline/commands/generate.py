"""``commscope generate``: write a synthetic training run (logs in up to six formats + ground truth).

Why: real multi-rank logs are scarce; a generated run with known answers tests every derived
metric, benchmarks ingest at scale and demos without a cluster. The command is a thin shell
over :func:`commscope.synthetic.generate`: the config file gives the model, layout, platform and
mapping (the model's TOML layout) plus optional ``[generate]``/``[scenario]`` sections; flags
override them.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from commscope.model.config import RunConfig, normalize_order
from commscope.pipeline.commands._format import table
from commscope.pipeline.run_config import load_generate_config
from commscope.synthetic import FORMATS, generate, with_overrides
from commscope.synthetic.manifest import suggested_run_id
from commscope.synthetic.program import UnsupportedConfig


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``generate`` subcommand."""
    p = sub.add_parser(
        "generate",
        help="write a synthetic run (NCCL, DeepSpeed, Kineto, nsys) with ground truth",
        description=(
            "Simulate a PTD-P training run under DeepSpeed's 1F1B schedule from a config file "
            "(the model's TOML layout, plus optional [generate] and [scenario] sections) and "
            "write, from one event list: NCCL debug logs per rank, rank 0's DeepSpeed "
            "comms-logger output, Kineto traces and nsys SQLite exports per rank, truth.json "
            "(+ truth/*.parquet) and manifest.json. Everything is labelled synthetic. Flags "
            "override the config file."
        ),
    )
    p.add_argument("--config", type=Path, required=True, help="run config (TOML)")
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="run folder to write (empty or an earlier synthetic run)",
    )
    p.add_argument(
        "--formats",
        default=None,
        help=f"comma-separated subset of {','.join(FORMATS)} (default: config, else nccl,deepspeed,kineto,nsys)",
    )
    p.add_argument("--iterations", type=int, default=None, help="training iterations to simulate")
    p.add_argument("--seed", type=int, default=None, help="random seed (same seed, same bytes)")
    p.add_argument("--jobs", type=int, default=None, help="worker processes (lanes in parallel)")
    p.add_argument("--nccl-version", default=None, help="NCCL line shapes to write (2.18 .. 2.27)")
    p.add_argument("--deepspeed-version", default=None, help="DeepSpeed logger version to imitate")
    p.add_argument(
        "--kineto-compress", choices=("gz", "none"), default=None, help="Kineto trace compression"
    )
    p.add_argument("--run-name", default=None, help="suggested run id (prefixed 'synthetic_')")
    p.add_argument(
        "--mapping",
        default=None,
        help="rank mapping preset or axis order (default, customized, or e.g. data,pipe,model)",
    )
    s = p.add_argument_group("scenarios (override [scenario])")
    s.add_argument("--straggler-rank", type=int, default=None, help="this rank computes slower")
    s.add_argument(
        "--straggler-factor", type=float, default=None, help="its compute slowdown (default 1.5)"
    )
    s.add_argument(
        "--slow-node", type=int, default=None, help="this node's inter-node links are slow"
    )
    s.add_argument(
        "--slow-link-factor", type=float, default=None, help="their bandwidth factor (default 0.25)"
    )
    s.add_argument("--network", choices=("roce", "tcp"), default=None, help="inter-node network")
    s.add_argument(
        "--missing-rank",
        type=int,
        action="append",
        default=None,
        help="do not write this rank's files (repeatable)",
    )
    s.add_argument(
        "--clock-skew-us", type=float, default=None, help="max clock offset of a node, µs"
    )
    s.add_argument(
        "--truncate-rank", type=int, default=None, help="cut this rank's NCCL log mid-line"
    )
    s.add_argument(
        "--truncate-fraction", type=float, default=None, help="where to cut (fraction of bytes)"
    )
    s.add_argument(
        "--moe-routing", choices=("routed", "capacity"), default=None, help="MoE all-to-all splits"
    )
    p.add_argument(
        "--ingest",
        action="store_true",
        help="ingest the generated folder into --store afterwards (run id: the manifest's)",
    )
    p.set_defaults(func=run)


def _apply_mapping(run_cfg: RunConfig, mapping: str | None) -> RunConfig:
    if not mapping:
        return run_cfg
    from dataclasses import replace

    return replace(run_cfg, mapping=normalize_order(mapping))


def run(args: argparse.Namespace) -> int:
    """Generate the run folder and print what was written."""
    try:
        run_cfg, opts = load_generate_config(args.config)
        run_cfg = _apply_mapping(run_cfg, args.mapping)
        changes: dict[str, Any] = {
            "iterations": args.iterations,
            "seed": args.seed,
            "jobs": args.jobs,
            "nccl_version": args.nccl_version,
            "deepspeed_version": args.deepspeed_version,
            "kineto_compress": args.kineto_compress,
            "run_name": args.run_name,
            "straggler_rank": args.straggler_rank,
            "straggler_factor": args.straggler_factor,
            "slow_node": args.slow_node,
            "slow_link_factor": args.slow_link_factor,
            "network": args.network,
            "clock_skew_us": args.clock_skew_us,
            "truncate_rank": args.truncate_rank,
            "truncate_fraction": args.truncate_fraction,
            "moe_routing": args.moe_routing,
        }
        if args.formats:
            changes["formats"] = tuple(f for f in args.formats.split(",") if f.strip())
        if args.missing_rank:
            changes["missing_ranks"] = tuple(args.missing_rank)
        opts = with_overrides(opts, **changes)
        command = (
            "commscope generate " + " ".join(shlex.quote(a) for a in sys.argv[2:])
            if len(sys.argv) > 2
            else None
        )
        result = generate(run_cfg, opts, args.out, command=command, progress=_progress)
    except (OSError, ValueError, UnsupportedConfig) as exc:
        print(f"commscope: error: {exc}", file=sys.stderr)
        return 2
    if sys.stderr.isatty():
        print(file=sys.stderr)
    rows = [(fmt, len(paths)) for fmt, paths in result.files.items()]
    print(table(("format", "files"), rows))
    summary = result.truth.get("summary", {})
    means = summary.get("mean_per_iteration_ns", {})
    if means:
        print()
        print(f"truth, rank {summary.get('rank')} mean per iteration:")
        print(
            table(
                ("term", "seconds"),
                [(k, v / 1e9) for k, v in means.items() if k != "R_bubble"]
                + [("R_bubble", means.get("R_bubble", 0.0))],
            )
        )
    run_id = suggested_run_id(run_cfg, opts)
    print()
    print(
        f"wrote {result.out} ({result.bytes_written / 1e6:,.1f} MB, {result.seconds:.1f} s wall, "
        f"{run_cfg.world} ranks x {opts.iterations} iterations; manifest.json, truth.json)"
    )
    if args.ingest:
        return _ingest(args, result.out, run_id)
    print(f"ingest with: commscope ingest {result.out} --run {run_id}")
    return 0


def _ingest(args: argparse.Namespace, out: Path, run_id: str) -> int:
    from commscope.pipeline import run_config as rc
    from commscope.pipeline.commands.ingest import print_config_note, render_results
    from commscope.pipeline.ingest import ingest_paths
    from commscope.pipeline.store import Store, StoreError

    try:
        store = Store.open(args.store)
        # The generated folder's manifest holds the run's config (the model's sections of
        # --config, --mapping applied): recorded, so derive computes the model's predictions.
        read = rc.from_inputs(run_id, [out])
        results = ingest_paths(store, [out], run_id=run_id, checked_config=read)
    except (StoreError, OSError, ValueError) as exc:
        print(f"commscope: error: {exc}", file=sys.stderr)
        return 2
    print(render_results(results))
    print(f"ingested as run {run_id} into {store.root}")
    if any(r.ok for r in results):
        print_config_note(store, run_id, read)
        print(f"derive with: commscope derive {run_id} --store {store.root}")
    return 0 if any(r.ok for r in results) else 1


def _progress(done: int, total: int) -> None:
    if sys.stderr.isatty():
        print(f"\rgenerating: lane {done}/{total}", end="", file=sys.stderr, flush=True)
