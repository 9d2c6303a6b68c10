"""``commscope predict``: the analytical model's traffic and time prediction for one rank.

Why: users need the predicted per-type traffic of a layout (the paper's Table 3) and its time
terms before or next to a run, from a config file or from flags. The shared flag set and the
flag-to-config merge also serve ``commscope advise``.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from commscope.model.config import RunConfig, config_from_dict, config_to_dict
from commscope.model.predict import predict_run
from commscope.model.traffic import MODES
from commscope.pipeline.run_config import read_config_file

MIB = 2**20

#: flag dest -> (section, key) in the TOML layout.
_FLAG_KEYS: dict[str, tuple[str, str]] = {
    "layers": ("model", "layers"),
    "hidden": ("model", "hidden"),
    "seq": ("model", "seq"),
    "vocab": ("model", "vocab"),
    "global_batch": ("model", "global_batch"),
    "micro_batch": ("model", "micro_batch"),
    "micro_batches": ("model", "micro_batches"),
    "heads": ("model", "heads"),
    "precision": ("model", "precision"),
    "experts": ("model", "experts"),
    "top_k": ("model", "top_k"),
    "pp": ("parallel", "pp"),
    "tp": ("parallel", "tp"),
    "dp": ("parallel", "dp"),
    "ep": ("parallel", "ep"),
    "zero_stage": ("parallel", "zero_stage"),
    "sequence_parallel": ("parallel", "sequence_parallel"),
    "pipe_partitioned": ("parallel", "pipe_partitioned"),
    "partitioner": ("parallel", "partitioner"),
    "peak_flops": ("platform", "peak_flops"),
    "mu": ("platform", "mu"),
    "c_tp": ("platform", "c_tp"),
    "c_pp": ("platform", "c_pp"),
    "c_dp": ("platform", "c_dp"),
    "c_intra": ("platform", "c_intra"),
    "c_inter": ("platform", "c_inter"),
    "gpus_per_node": ("platform", "gpus_per_node"),
}
_REQUIRED_WITHOUT_CONFIG = (
    "layers",
    "hidden",
    "seq",
    "vocab",
    "global_batch",
    "micro_batch",
    "pp",
    "tp",
    "dp",
)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--config`` and the flags that override or replace it.

    Args:
        parser: the subcommand's parser.
    """
    parser.add_argument(
        "--config",
        metavar="FILE.toml",
        help="run configuration in commscope's TOML layout (see configs/gpt3b_paper.toml); "
        "flags below override its values",
    )
    model = parser.add_argument_group("model (required without --config)")
    model.add_argument("--layers", type=int, help="transformer layers l")
    model.add_argument("--hidden", type=int, help="hidden size h")
    model.add_argument("--seq", type=int, help="sequence length s")
    model.add_argument("--vocab", type=int, help="vocabulary size V before padding")
    model.add_argument("--global-batch", type=int, help="sequences per iteration gb")
    model.add_argument("--micro-batch", type=int, help="sequences per micro-batch b")
    model.add_argument("--micro-batches", type=int, help="m (default gb / (b * dp))")
    model.add_argument("--heads", type=int, help="attention heads (memory estimate only)")
    model.add_argument("--precision", choices=("fp16", "bf16", "fp32"), help="default fp16")
    model.add_argument("--experts", type=int, help="MoE experts per MoE layer (0 = dense)")
    model.add_argument("--top-k", type=int, help="MoE gating top-k")
    par = parser.add_argument_group("parallel layout")
    par.add_argument("--pp", type=int, help="pipeline stages p")
    par.add_argument("--tp", type=int, help="tensor-parallel size t")
    par.add_argument("--dp", type=int, help="data-parallel size d")
    par.add_argument("--ep", type=int, help="expert-parallel size (divides dp)")
    par.add_argument("--zero-stage", type=int, choices=(0, 1, 2, 3), help="DeepSpeed ZeRO stage")
    par.add_argument(
        "--sequence-parallel",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Megatron sequence parallelism",
    )
    par.add_argument(
        "--pipe-partitioned",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="DeepSpeed partitioned pipeline p2p (A/t messages, meta tensors, TP all-gathers)",
    )
    par.add_argument(
        "--partitioner",
        choices=("old", "new"),
        help="DeepSpeed type:transformer partitioner behaviour (before/after Dec 2023)",
    )
    par.add_argument(
        "--mapping",
        help="rank mapping: 'default' (DeepSpeed [pipe,data,model]), 'customized' (paper "
        "Fig. 12, [data,pipe,model]) or an axis order such as 'data-pipe-model'",
    )
    plat = parser.add_argument_group(
        "platform (defaults: the paper's RTX3090 testbed, placeholder bandwidths)"
    )
    plat.add_argument("--peak-flops", type=float, help="F, peak FLOP/s per GPU")
    plat.add_argument("--mu", type=float, help="achieved / peak compute utilisation")
    plat.add_argument("--c-tp", type=float, help="TP bus bandwidth, bytes/s")
    plat.add_argument("--c-pp", type=float, help="PP bandwidth, bytes/s")
    plat.add_argument("--c-dp", type=float, help="DP bus bandwidth, bytes/s")
    plat.add_argument("--c-intra", type=float, help="intra-node bus bandwidth (mapping-aware)")
    plat.add_argument("--c-inter", type=float, help="inter-node bus bandwidth (mapping-aware)")
    plat.add_argument("--gpus-per-node", type=int, help="GPUs per node")


def run_config_from_args(args: argparse.Namespace) -> RunConfig:
    """Build the run configuration from ``--config`` and the override flags.

    Args:
        args: parsed arguments of :func:`add_run_arguments`.

    Returns:
        The validated configuration.

    Raises:
        ValueError: missing required flags without ``--config``, or an invalid configuration.
        OSError: the config file cannot be read.
    """
    if args.config:
        # Validated like every config (commscope.pipeline.config_schema): one line naming file and key.
        data: dict[str, Any] = config_to_dict(config_from_dict(read_config_file(Path(args.config))))
    else:
        missing = [k for k in _REQUIRED_WITHOUT_CONFIG if getattr(args, k, None) is None]
        if missing:
            flags = ", ".join("--" + k.replace("_", "-") for k in missing)
            raise ValueError(f"without --config these flags are required: {flags}")
        data = {"model": {}, "parallel": {}, "platform": {}}
    given = {k for k in _FLAG_KEYS if getattr(args, k, None) is not None}
    # A changed batch split or pipeline invalidates derived settings stored in the file.
    if given & {"global_batch", "micro_batch", "dp"} and "micro_batches" not in given:
        data["model"]["micro_batches"] = None
    if given & {"layers", "pp"}:
        data["parallel"]["layers_per_stage"] = None
    for dest in given:
        section, key = _FLAG_KEYS[dest]
        data.setdefault(section, {})[key] = getattr(args, dest)
    if getattr(args, "mapping", None):
        data["mapping"] = {"order": args.mapping}
    return config_from_dict(data)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``predict`` subcommand.

    Args:
        subparsers: the CLI's subparsers.
    """
    parser = subparsers.add_parser(
        "predict",
        help="predict per-type traffic and time terms of a parallel layout (APNet'24 model)",
        description=textwrap.fill(
            "Predict one rank's per-iteration traffic (TP, PP, DP, EmbTableSyn, EP: message "
            "count, size, volume, bytes sent) and the time terms of eqs. 1-9 (T_comp, T_TP, "
            "T_PP, T_DP, T_bubble, T_iter, R_bubble, R_comm, MFU/HFU), and every pipeline "
            "stage's terms and bubble within one common iteration. Mode stage_exact uses "
            "DeepSpeed's real layer partition and reproduces the paper's Table 3; "
            "paper_uniform applies eqs. 2-4 literally. Sizes print in MiB (2^20 B), which is "
            "what DeepSpeed's comms logger labels MB."
        ),
        epilog=(
            "examples:\n"
            "  commscope predict --config configs/gpt3b_paper.toml\n"
            "  commscope predict --layers 54 --hidden 2000 --seq 1024 --vocab 50257 \\\n"
            "      --global-batch 1024 --micro-batch 32 --pp 4 --tp 2 --dp 4 --json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--mode", choices=MODES, default="stage_exact", help="model mode (default stage_exact)"
    )
    parser.add_argument("--rank", type=int, default=0, help="rank to report (default 0)")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print JSON: per-type {count, msg_bytes, volume_bytes, sent_bytes, bus_bytes}, "
        "time terms, ratios and op-level items",
    )
    parser.set_defaults(func=run)


def _fmt_num(value: float, digits: int = 2) -> str:
    """Thousands-separated number with ``digits`` decimals (none for integers)."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.{digits}f}"


def format_prediction(result: dict[str, Any]) -> str:
    """Human-readable report of :func:`commscope.model.predict.predict_run` output.

    Args:
        result: the prediction.

    Returns:
        Multi-line text: header, per-type traffic table, time terms and ratios.
    """
    cfg = result["config"]
    par, model = cfg["parallel"], cfg["model"]
    coords = result["coords"]
    lines = [
        f"{model['name']}: (l, h, s, V, gb, b, m) = ({model['layers']}, {model['hidden']}, "
        f"{model['seq']}, {model['vocab']}, {model['global_batch']}, {model['micro_batch']}, "
        f"{result['micro_batches']}); (p, t, d) = ({par['pp']}, {par['tp']}, {par['dp']}); "
        f"mapping {'-'.join(cfg['mapping']['order'])}; mode {result['mode']}",
        f"rank {result['rank']}: stage {result['stage']} (pipe {coords['pipe']}, data "
        f"{coords['data']}, model {coords['model']}), node {result['node']}; layers per stage "
        f"{result['layers_per_stage']}; padded vocab {result['padded_vocab']}",
        "",
        f"Traffic per iteration at rank {result['rank']} (MiB = 2^20 B):",
        f"{'type':<12} {'count':>8} {'msg bytes':>15} {'msg MiB':>10} {'volume MiB':>13} "
        f"{'sent MiB':>13}",
    ]
    for cls, row in result["traffic"].items():
        lines.append(
            f"{cls:<12} {_fmt_num(row['count']):>8} {_fmt_num(row['msg_bytes'], 0):>15} "
            f"{row['msg_bytes'] / MIB:>10,.2f} {row['volume_bytes'] / MIB:>13,.2f} "
            f"{row['sent_bytes'] / MIB:>13,.2f}"
        )
    lines += [
        "",
        "Time terms per iteration (s): "
        f"T_comp {result['t_comp']:.3f}  T_TP {result['t_tp']:.3f}  T_PP {result['t_pp']:.3f}  "
        f"T_DP {result['t_dp']:.3f}  T_Emb {result['t_emb']:.3f}  T_EP {result['t_ep']:.3f}",
        f"  T_bubble {result['t_bubble']:.3f}  T_comm {result['t_comm']:.3f}  "
        f"T_iter {result['t_iter']:.3f}  (critical stage {int(result['critical_stage'])}: "
        f"{result['t_iter_critical']:.3f})",
        f"R_bubble (eq. 7) {result['r_bubble_eq7']:.4f}  R_bubble {result['r_bubble']:.4f}  "
        f"R_comm {result['r_comm']:.4f}  MFU {result['mfu']:.3f}  HFU {result['hfu']:.3f}",
        *format_stages(result.get("stages", [])),
        f"N (eq. 10) {result['n_params']:,}  FLOPs/iteration (eq. 11) "
        f"{result['flops_per_iteration']:.4e}  memory estimate "
        f"{result['memory_bytes'] / 2**30:.2f} GiB",
    ]
    return "\n".join(lines)


def format_stages(stages: list[dict[str, Any]]) -> list[str]:
    """Lines of the per-stage table: every stage within one common iteration.

    Args:
        stages: ``predict_run(...)["stages"]``.

    Returns:
        A heading and one line per stage (times in s), or nothing without stages.
    """
    if not stages:
        return []
    head = "".join(f" {h:>9}" for h in ("T_comp", "T_TP", "T_PP", "T_DP", "T_Emb", "T_EP"))
    lines = [
        "",
        "Per stage, one common iteration T_iter "
        f"{stages[0]['t_iter']:.3f} s (the critical stage's eq. 6); bubble = T_iter - the "
        "stage's own work (eqs. 5-7 per stage):",
        f"{'stage':>5}{head} {'T_bubble':>9} {'R_bubble':>9}",
    ]
    for st in stages:
        terms = "".join(
            f" {st[k]:>9.3f}" for k in ("t_comp", "t_tp", "t_pp", "t_dp", "t_emb", "t_ep")
        )
        lines.append(f"{st['stage']:>5}{terms} {st['t_bubble']:>9.3f} {st['r_bubble']:>9.4f}")
    return lines


def run(args: argparse.Namespace) -> int:
    """Execute ``commscope predict``.

    Args:
        args: parsed arguments.

    Returns:
        0 on success, 2 on a configuration error.
    """
    try:
        run_config = run_config_from_args(args)
        result = predict_run(run_config, mode=args.mode, rank=args.rank)
    except (ValueError, OSError) as exc:
        print(f"commscope predict: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_prediction(result))
    return 0
