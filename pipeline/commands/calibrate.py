"""``commscope calibrate``: fit the model's μ curve and bandwidths C to a derived run.

Why: ``advise --run`` ranks layouts with constants fitted to a measured run; this command
shows those constants alone, each with its source, the link kind (intra/inter node) each
class's C was measured on, and how well the calibrated model predicts the run's own T_iter.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

from commscope.model.traffic import MODES
from commscope.pipeline.store import Store, StoreError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``calibrate`` subcommand.

    Args:
        subparsers: the CLI's subparsers.
    """
    parser = subparsers.add_parser(
        "calibrate",
        help="fit mu and the bandwidths C to a derived run",
        description=textwrap.fill(
            "Read a derived run's model_vs_measured mart (measured T_comp and T_iter of rank "
            "0's stage, the transfer bus bandwidth C of each traffic class) and its stored "
            "config; fit mu at the run's layout (the curve's level; its shape stays the "
            "documented default) and take each class's C, labelled with the link kind "
            "(intra/inter node) its groups use. Prints every constant with its source and the "
            "calibrated model's T_iter of the run beside the measured one."
        ),
        epilog="example:\n  commscope calibrate gpt",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_id", help="the derived run")
    parser.add_argument(
        "mu_runs",
        nargs="*",
        help="other derived runs (other b or t) whose T_comp fits the mu curve's shape too",
    )
    parser.add_argument("--mode", choices=MODES, default="stage_exact", help="model mode")
    parser.add_argument("--json", action="store_true", help="print the calibration as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``commscope calibrate``.

    Args:
        args: parsed arguments.

    Returns:
        0 on success, 2 on a store or configuration error.
    """
    from commscope.pipeline.calibration import calibrate_from_store

    try:
        store = Store.open(args.store, create=False)
        cal = calibrate_from_store(store, args.run_id, args.mode, args.mu_runs)
    except (StoreError, ValueError, OSError) as exc:
        print(f"commscope calibrate: error: {exc}", file=sys.stderr)
        return 2
    data = cal.as_dict()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    curve = data["mu_curve"]
    lines = [
        f"run {cal.run_id}: calibrated constants",
        f"  mu_max  {curve['mu_max']:.4f}       {curve['source']}",
        f"  x_half  {curve['x_half']:.4g} FLOP  {curve['x_half_source'] or curve['source']}",
    ]
    for name, c in data["constants"].items():
        lines.append(f"  {name:<7} {c['value']:.4g}  {c['source']}")
    lines += ["", "C per class and link kind:"]
    for row in data["links"]:
        lines.append(
            f"  {row['traffic_class']:<3} {row['link']:<6} {row['bytes_per_s'] / 1e9:8.3f} GB/s"
        )
    if cal.measured_t_iter:
        lines += [
            "",
            f"T_iter: measured {cal.measured_t_iter:.3f} s, calibrated model "
            f"{cal.predicted_t_iter:.3f} s ({cal.rel_error:+.1%})",
        ]
    print("\n".join(lines))
    return 0
