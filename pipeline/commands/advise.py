"""``commscope advise``: rank parallel layouts of a model on a cluster by predicted time.

Why: the ConfigTuner idea. Since communication is predictable, the model can rank the valid
(p, t, d, b, m) and rank mappings before anything runs. ``--run RUN`` calibrates μ and the
bandwidths C to a derived run's own measurements, places that run's layout in the ranking
beside its measured T_iter, and stores the advice for the report
(``advice/<run>.json``). Every constant printed carries its source.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from dataclasses import replace
from typing import Any

from commscope.model.advise import DEFAULT_MAPPINGS, Advice, advise
from commscope.model.config import RunConfig
from commscope.model.efficiency import default_mu_curve
from commscope.model.traffic import MODES
from commscope.pipeline.commands.predict import add_run_arguments, run_config_from_args
from commscope.pipeline.store import StoreError

GIB = 2**30


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``advise`` subcommand.

    Args:
        subparsers: the CLI's subparsers.
    """
    parser = subparsers.add_parser(
        "advise",
        help="rank parallel layouts (p, t, d, b, m, mapping) by predicted iteration time",
        description=textwrap.fill(
            "Search the valid (p, t, d, micro-batch, mapping) of the model on --gpus GPUs the "
            "ConfigTuner way (rules, memory, tied mappings evaluated once, branch and bound on "
            "a compute lower bound), predict the slowest stage's iteration time and its terms "
            "with the analytical model, and print them fastest first, with the number of "
            "configurations evaluated beside the exhaustive count. μ follows a curve of the "
            "work per kernel (the documented default, or fitted to --run). With --run the "
            "run's stored config is the base, its measured C and T_comp calibrate the model, "
            "its own layout is placed in the ranking beside its measured T_iter, and the "
            "advice is stored for `commscope report`."
        ),
        epilog="examples:\n  commscope advise --config configs/gpt3b_paper.toml --gpus 32 --top 10"
        "\n  commscope advise --run gpt --gpu-memory-gib 24",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_arguments(parser)
    parser.add_argument("--run", help="calibrate from this derived run of the store")
    parser.add_argument(
        "--mu-runs",
        help="comma-separated other derived runs (other b or t) whose T_comp fits the mu "
        "curve's shape too (with --run)",
    )
    parser.add_argument(
        "--gpus", type=int, help="GPUs to place the job on (default: the config's world)"
    )
    parser.add_argument(
        "--top", type=int, default=10, help="layouts to print (default 10; 0 = all)"
    )
    parser.add_argument(
        "--exhaustive",
        action="store_true",
        help="predict every valid layout (no branch and bound beyond --top)",
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
        "--gpu-memory-gib", type=float, help="device memory per GPU, GiB (overrides the config)"
    )
    parser.add_argument(
        "--no-memory-filter",
        action="store_true",
        help="keep layouts whose memory estimate exceeds the GPU memory",
    )
    parser.add_argument(
        "--constant-mu",
        action="store_true",
        help="use the platform's single mu instead of the mu curve (the paper's model)",
    )
    parser.add_argument(
        "--simulate",
        type=int,
        default=0,
        metavar="K",
        help="run the generator's simulator on the top K layouts and the run's own (its own "
        "compute and link models, the config's platform, no jitter) and print the simulated "
        "T_iter beside the prediction",
    )
    parser.add_argument(
        "--sim-overhead-us",
        type=float,
        default=25.0,
        help="the simulator's fixed cost per compute kernel step for --simulate, us (default 25; "
        "0 = the generator's default, FLOPs / (mu F) only)",
    )
    parser.add_argument("--mode", choices=MODES, default="stage_exact", help="model mode")
    parser.add_argument("--json", action="store_true", help="print the advice as JSON")
    parser.set_defaults(func=run)


def _mapping_names(text: str) -> list[str]:
    """Split ``--mappings`` on ',' or ';' (axis orders are written with '-')."""
    return [p.strip() for p in text.replace(";", ",").split(",") if p.strip()]


def _row(label: str, c: Any) -> str:
    maps = ",".join(c.mappings) if c.mappings else c.mapping_name
    return (
        f"{label:>4} {c.pp:>3} {c.tp:>3} {c.dp:>3} {c.micro_batch:>4} {c.micro_batches:>5} "
        f"{maps:<18} {c.t_iter:>9.3f} {c.t_comp:>8.3f} {c.t_tp:>7.3f} {c.t_pp:>7.3f} "
        f"{c.t_dp + c.t_emb:>7.3f} {c.t_bubble:>8.3f} {c.mu:>6.3f} {c.mfu:>6.3f} "
        f"{c.memory_bytes / GIB:>8.2f}"
    )


def format_advice(advice: Advice, top: int) -> str:
    """Text report of an :class:`Advice`: search statistics, constants, the ranked table."""
    lines = [
        f"search space: {advice.search_space_size} (p, t, d, b, mapping) tuples (exhaustive), "
        f"{advice.valid} valid, {advice.evaluated} evaluated; searched in "
        f"{advice.elapsed_s:.3f} s",
    ]
    if advice.rejected:
        lines.append(
            "rejected: " + "; ".join(f"{n} {why}" for why, n in sorted(advice.rejected.items()))
        )
    if advice.memory_pruned_unchecked:
        lines.append(
            f"  ({advice.memory_pruned_unchecked} of the memory rejections not estimated: a "
            "smaller b of the same (p, t, d) already did not fit)"
        )
    if advice.pruned:
        lines.append(
            "not evaluated: " + "; ".join(f"{n} {why}" for why, n in sorted(advice.pruned.items()))
        )
    if not advice.mapping_aware:
        lines.append("platform is not mapping-aware (no c_intra/c_inter): mappings tie")
    lines += ["", "constants:"]
    for k in advice.constants:
        lines.append(f"  {k.name:<17} {k.value:>12.4g} {k.unit:<6} {k.source}")
    lines += [
        "",
        f"{'#':>4} {'p':>3} {'t':>3} {'d':>3} {'b':>4} {'m':>5} {'mappings':<18} "
        f"{'T_iter s':>9} {'T_comp':>8} {'T_TP':>7} {'T_PP':>7} {'T_DP':>7} {'bubble':>8} "
        f"{'mu':>6} {'MFU':>6} {'mem GiB':>8}",
    ]
    shown = advice.candidates if top <= 0 else advice.candidates[:top]
    for i, c in enumerate(shown, start=1):
        lines.append(_row(str(i), c))
    base = advice.baseline
    if base is not None:
        lines += ["", f"the run's own layout (rank {advice.baseline_rank}):", _row("run", base)]
        if advice.baseline_measured_t_iter:
            err = (base.t_iter - advice.baseline_measured_t_iter) / advice.baseline_measured_t_iter
            lines.append(
                f"  measured T_iter {advice.baseline_measured_t_iter:.3f} s, predicted "
                f"{base.t_iter:.3f} s ({err:+.1%})"
            )
        if advice.expected_gain is not None and advice.candidates:
            lines.append(
                f"  expected gain of #1 over it: {advice.expected_gain:.3f}x "
                f"(predicted T_iter {advice.candidates[0].t_iter:.3f} s vs {base.t_iter:.3f} s)"
            )
    return "\n".join(lines)


def simulate_top(
    advice: Advice, config: RunConfig, k: int, overhead_us: float = 25.0
) -> dict[str, float]:
    """Simulated T_iter (s) of the top ``k`` layouts and the baseline, keyed ``p,t,d,b``.

    The simulator runs each layout of ``config`` (its platform: the constants a generated run
    was made with) with its own compute and link models; layouts it does not simulate are
    left out.
    """
    from commscope.synthetic.check_layouts import layout_run, simulated_t_iter
    from commscope.synthetic.program import UnsupportedConfig

    out: dict[str, float] = {}
    chosen = list(advice.candidates[:k])
    if advice.baseline is not None:
        chosen.append(advice.baseline)
    for c in chosen:
        key = ",".join(map(str, c.layout))
        if key in out:
            continue
        try:
            run = layout_run(config, c.pp, c.tp, c.dp, c.micro_batch)
            out[key] = simulated_t_iter(run, compute_overhead_us=overhead_us)
        except UnsupportedConfig:
            continue
    return out


def _names(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _options(args: argparse.Namespace) -> list[int] | None:
    if not args.micro_batch_options:
        return None
    return [int(x) for x in args.micro_batch_options.split(",") if x.strip()]


def run(args: argparse.Namespace) -> int:
    """Execute ``commscope advise``.

    Args:
        args: parsed arguments.

    Returns:
        0 on success, 2 on a configuration or store error.
    """
    calibration = None
    store = None
    try:
        if args.run:
            from commscope.pipeline.calibration import calibrate_from_store
            from commscope.pipeline.store import Store

            store = Store.open(args.store, create=False)
            calibration = calibrate_from_store(store, args.run, args.mode, _names(args.mu_runs))
            base: RunConfig = calibration.run
            from commscope.pipeline.calibration import stored_run_config

            sim_config = stored_run_config(store, args.run)
            if args.config or any(
                getattr(args, k, None) is not None for k in ("layers", "hidden", "pp", "tp", "dp")
            ):
                print(
                    "commscope advise: note: --run takes the model from the run's stored "
                    "config; --config and model flags are ignored",
                    file=sys.stderr,
                )
        else:
            base = run_config_from_args(args)
            sim_config = base
        platform = base.platform
        sources: dict[str, str] = dict(calibration.sources) if calibration else {}
        if args.gpu_memory_gib is not None:
            platform = replace(platform, gpu_memory_bytes=int(args.gpu_memory_gib * GIB))
            sources["gpu_memory_bytes"] = "--gpu-memory-gib"
        curve = None
        if not args.constant_mu:
            curve = calibration.mu_curve if calibration else default_mu_curve(platform.peak_flops)
        keep = None if (args.exhaustive or args.top <= 0) else args.top
        result = advise(
            base.model,
            args.gpus if args.gpus is not None else base.world,
            platform,
            template=base.parallel,
            micro_batch_options=_options(args),
            mappings=_mapping_names(args.mappings),
            max_tp=args.max_tp,
            require_fit=not args.no_memory_filter,
            mode=args.mode,
            mu_curve=curve,
            keep=keep,
            baseline=replace(base, platform=platform) if calibration else None,
            baseline_measured_t_iter=calibration.measured_t_iter if calibration else None,
            sources=sources,
        )
    except (ValueError, OSError, StoreError) as exc:
        print(f"commscope advise: error: {exc}", file=sys.stderr)
        return 2
    simulated = {}
    if args.simulate > 0:
        simulated = simulate_top(result, sim_config, args.simulate, args.sim_overhead_us)
    payload = result.as_dict(args.top)
    if simulated:
        payload["simulated_t_iter"] = simulated
    if calibration is not None and store is not None:
        from commscope.pipeline.calibration import save_advice

        payload["calibration"] = calibration.as_dict()
        payload["run_id"] = args.run
        save_advice(store, args.run, payload)
    if args.json:
        print(json.dumps(payload, indent=2))
    else:
        print(format_advice(result, args.top))
        if simulated:
            print("\nsimulated by the generator (its own compute and link models, no jitter):")
            for key, value in simulated.items():
                pred = next(
                    (
                        c.t_iter
                        for c in [*result.candidates, result.baseline]
                        if c is not None and ",".join(map(str, c.layout)) == key
                    ),
                    None,
                )
                extra = f", predicted {pred:.3f} s" if pred is not None else ""
                print(f"  (p, t, d, b) = ({key}): {value:.3f} s{extra}")
    return 0
