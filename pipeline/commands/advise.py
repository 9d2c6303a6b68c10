"""``commscope advise``: rank parallel layouts of a model on a cluster by predicted time.

Why: the ConfigTuner idea. Since communication is predictable, the model can rank every
valid (p, t, d, b, m) and rank mapping before anything runs; the output also states how big
the search space was and how long the search took.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

from pipeline.commands.predict import add_run_arguments, run_config_from_args
from reports.model.advise import DEFAULT_MAPPINGS, Advice, advise
from reports.model.traffic import MODES


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``advise`` subcommand.

    Args:
        subparsers: the CLI's subparsers.
    """
    parser = subparsers.add_parser(
        "advise",
        help="rank parallel layouts (p, t, d, b, m, mapping) by predicted iteration time",
        description=textwrap.fill(
            "Enumerate every valid (p, t, d, micro-batch, mapping) of the model on --gpus "
            "GPUs, predict the slowest stage's iteration time and the peak memory per GPU "
            "with the analytical model, and print them fastest first, with the size of the "
            "search space and the time the search took. The model, global batch and "
            "platform come from --config and/or flags; the layout in them is only the "
            "template for options that are not searched (ep, ZeRO, sequence parallelism). "
            "Mappings only change times on a mapping-aware platform (--c-intra and --c-inter)."
        ),
        epilog="example:\n  commscope advise --config configs/gpt3b_paper.toml --gpus 32 --top 10",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--gpus", type=int, help="GPUs to place the job on (default: the config's world)"
    )
    parser.add_argument(
        "--top", type=int, default=10, help="layouts to print (default 10; 0 = all)"
    )
    parser.add_argument(
        "--mappings",
        default=",".join(DEFAULT_MAPPINGS),
        help="comma-separated mappings: default, customized, all (every axis order), or an "
        "axis order written with '-' (e.g. data-pipe-model); default 'default,customized'",
    )
    parser.add_argument(
        "--micro-batch-options",
        help="comma-separated micro-batch sizes to try (default 1,2,4,...,64 plus the config's)",
    )
    parser.add_argument("--max-tp", type=int, help="largest TP size (default: GPUs per node)")
    parser.add_argument(
        "--no-memory-filter",
        action="store_true",
        help="keep layouts whose memory estimate exceeds the GPU memory",
    )
    parser.add_argument("--mode", choices=MODES, default="stage_exact", help="model mode")
    parser.add_argument("--json", action="store_true", help="print the ranking as JSON")
    parser.set_defaults(func=run)


def _mapping_names(text: str) -> list[str]:
    """Split ``--mappings`` on ',' or ';' (axis orders are written with '-')."""
    return [p.strip() for p in text.replace(";", ",").split(",") if p.strip()]


def format_advice(advice: Advice, top: int) -> str:
    """Text report of an :class:`Advice`: search statistics, then the ranked table."""
    lines = [
        f"search space: {advice.search_space_size} (p, t, d, b, mapping) tuples, "
        f"{advice.valid} valid; searched in {advice.elapsed_s:.3f} s",
    ]
    if advice.rejected:
        lines.append(
            "rejected: " + "; ".join(f"{n} {why}" for why, n in sorted(advice.rejected.items()))
        )
    if not advice.mapping_aware:
        lines.append("platform is not mapping-aware (no c_intra/c_inter): mappings tie")
    lines += [
        "",
        f"{'#':>3} {'p':>3} {'t':>3} {'d':>3} {'b':>4} {'m':>5} {'mapping':<18} "
        f"{'T_iter s':>10} {'R_bubble':>9} {'R_comm':>7} {'MFU':>6} {'mem GiB':>8}",
    ]
    shown = advice.candidates if top <= 0 else advice.candidates[:top]
    for i, c in enumerate(shown, start=1):
        lines.append(
            f"{i:>3} {c.pp:>3} {c.tp:>3} {c.dp:>3} {c.micro_batch:>4} {c.micro_batches:>5} "
            f"{c.mapping_name:<18} {c.t_iter:>10.3f} {c.r_bubble:>9.4f} {c.r_comm:>7.4f} "
            f"{c.mfu:>6.3f} {c.memory_bytes / 2**30:>8.2f}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Execute ``commscope advise``.

    Args:
        args: parsed arguments.

    Returns:
        0 on success, 2 on a configuration error.
    """
    try:
        base = run_config_from_args(args)
        options = None
        if args.micro_batch_options:
            options = [int(x) for x in args.micro_batch_options.split(",") if x.strip()]
        result = advise(
            base.model,
            args.gpus if args.gpus is not None else base.world,
            base.platform,
            template=base.parallel,
            micro_batch_options=options,
            mappings=_mapping_names(args.mappings),
            max_tp=args.max_tp,
            require_fit=not args.no_memory_filter,
            mode=args.mode,
        )
    except (ValueError, OSError) as exc:
        print(f"commscope advise: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        shown = result.candidates if args.top <= 0 else result.candidates[: args.top]
        print(
            json.dumps(
                {
                    "search_space_size": result.search_space_size,
                    "valid": result.valid,
                    "rejected": result.rejected,
                    "elapsed_s": result.elapsed_s,
                    "mapping_aware": result.mapping_aware,
                    "candidates": [c.as_dict() for c in shown],
                },
                indent=2,
            )
        )
    else:
        print(format_advice(result, args.top))
    return 0
