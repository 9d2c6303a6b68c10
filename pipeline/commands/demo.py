"""``commscope demo``: the main job, one watch cycle, on bundled and synthetic data.

Why: the README's first command should show the whole pipeline as it runs in production: a
small synthetic cluster run (GPT-3B at (p, t, d) = (4, 2, 4), 32 ranks, 2 iterations, seed 0,
labelled synthetic in its folder name, run id and manifest) is generated beside the store,
then one cycle of ``process_cluster_logs`` (what ``serve`` runs on a schedule) ingests it
together with ``sample_traces/`` (a real DeepSpeed CPU recording and NCCL runs), derives the
marts and writes one HTML report per run. The cycle runs in this process as ``serve --once``
does (``cycle.process_folders``: the flow's steps, store, reports and summary, without the
10-25 s of a Prefect server started and stopped for one cycle); ``--prefect`` runs it through
the Prefect flow on Prefect's temporary local server, as does a configured
``PREFECT_API_URL``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from commscope.pipeline.commands._format import table
from commscope.pipeline.commands.serve import (
    add_flow_options,
    check_flow_options,
    render_summary,
    run_once,
)
from commscope.pipeline.commands.summary import render
from commscope.pipeline.store import Store, StoreError
from commscope.pipeline.summary import summarize
from commscope.resources import configs_dir, sample_traces_dir

REPO_SAMPLES = sample_traces_dir()
SYNTHETIC_CONFIG = configs_dir() / "synthetic_gpt3b_4x2x4.toml"
SYNTHETIC_RUN = "synthetic_gpt3b_4x2x4"
SYNTHETIC_FORMATS = "nccl,deepspeed,kineto"


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``demo`` subcommand."""
    p = sub.add_parser(
        "demo",
        help="generate a small synthetic run, then ingest, derive and report it with the "
        "bundled sample traces (one cycle of the serve flow)",
        description="Generate a 32-rank synthetic run (GPT-3B, (4,2,4), 2 iterations, seed 0) "
        "into generated/ beside the store, then run one cycle of the process_cluster_logs "
        "flow (as serve --once) on sample_traces/ and generated/ (every sub-folder is one "
        "run): ingest, derive, one HTML report per run. Prints each run's summary and the "
        "report paths.",
    )
    p.add_argument("--samples", type=Path, default=REPO_SAMPLES, help="folder of run folders")
    p.add_argument(
        "--generated",
        type=Path,
        default=None,
        help="folder for the synthetic run folder (default: generated/ beside the store)",
    )
    p.add_argument(
        "--synthetic-formats",
        default=SYNTHETIC_FORMATS,
        help=f"formats of the synthetic run (default: {SYNTHETIC_FORMATS}; 'none' skips it)",
    )
    add_flow_options(p)
    # Kept for old scripts: the cycle runs in this process (no Prefect) by default now.
    p.add_argument("--no-flows", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def generate_synthetic(dest_root: Path, formats: str) -> Path:
    """Write the demo's synthetic run folder (kept if an identical one is there)."""
    from commscope.pipeline.run_config import load_generate_config
    from commscope.synthetic import generate, with_overrides

    out = dest_root / SYNTHETIC_RUN
    wanted = tuple(f.strip() for f in formats.split(",") if f.strip())
    marker = out / ".commscope_demo_formats"
    if (out / "manifest.json").exists() and marker.exists() and marker.read_text() == formats:
        return out
    run_cfg, opts = load_generate_config(SYNTHETIC_CONFIG)
    opts = with_overrides(
        opts,
        iterations=2,
        seed=0,
        formats=wanted,
        run_name=SYNTHETIC_RUN.removeprefix("synthetic_"),
    )
    generate(run_cfg, opts, out, command=f"commscope demo (config {SYNTHETIC_CONFIG.name})")
    marker.write_text(formats)
    return out


def run(args: argparse.Namespace) -> int:
    """Generate, process through the flows, print the summaries and report paths."""
    if not args.samples.is_dir() or not any(d.is_dir() for d in args.samples.iterdir()):
        print(f"commscope: error: no run folders in {args.samples}", file=sys.stderr)
        return 2
    problem = check_flow_options(args)
    if problem:
        print(f"commscope: error: {problem}", file=sys.stderr)
        return 2
    try:
        store = Store.open(args.store)
    except StoreError as exc:
        print(f"commscope: error: {exc}", file=sys.stderr)
        return 2
    roots = [args.samples]
    if args.synthetic_formats != "none":
        gen_root = args.generated or store.root.parent / "generated"
        t0 = time.perf_counter()
        try:
            out = generate_synthetic(gen_root, args.synthetic_formats)
        except (OSError, ValueError) as exc:
            print(f"commscope: error: generating the synthetic run: {exc}", file=sys.stderr)
            return 2
        print(f"synthetic run {out} ({time.perf_counter() - t0:.1f} s)", flush=True)
        roots.append(gen_root)
    summary = run_once(args, roots)
    print(render_summary(summary) + "\n")
    _print_summaries(store, list(summary["runs"]))
    print(f'store: {store.root}  (try: commscope query --store {store.root} "SHOW TABLES")')
    reports = [(rid, e["report"]) for rid, e in summary["runs"].items() if e["report"]]
    if reports:
        print(table(("run", "report (open in a browser)"), reports))
    return 1 if summary["errors"] else 0


def _print_summaries(store: Store, runs: list[str]) -> None:
    stored = set(store.runs())
    for rid in runs:
        if rid in stored:
            # A connection per run: summarize leaves a result open on a shared connection.
            print(render(summarize(store, rid)))
