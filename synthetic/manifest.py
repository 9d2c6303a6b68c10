"""The run manifest (``manifest.json``) of a generated run: what it is and how it was made.

Why: ingest records the ``config`` section of a ``manifest.json`` found beside the logs
(:mod:`commscope.pipeline.run_config`), so ``derive`` and ``report`` on a generated run need no extra
flags; the rest tells a reader (and the tests) everything the generator was asked to do.

Keys: ``schema``, ``run_id`` (suggested), ``synthetic`` (always true), ``generator`` (tool,
version, command), ``config`` (the model's TOML layout: ``model``, ``parallel``, ``platform``,
``mapping``; what ingest stores), ``generate`` (simulation options), ``scenario`` (every key) and
``scenario_active`` (the keys that differ from the defaults), ``seed``, ``iterations``,
``world_size``, ``nodes``, ``gpus_per_node``, ``versions`` (NCCL, DeepSpeed, torch, nsys),
``start_time_utc``, ``mapping`` (axis order and, per global rank: stage, data/model-parallel
index, node, local rank, host), ``formats``, ``files`` (per format, paths relative to the run
folder), ``missing_files``, ``truncated_files`` and ``truth`` (where the ground truth is).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from commscope.model.config import RunConfig, config_to_dict
from commscope.synthetic.scenario import GenerateOptions
from commscope.synthetic.simulate import Simulation

MANIFEST_SCHEMA = "commscope-synthetic-manifest/1"
GENERATOR_VERSION = "1.0.0"


def suggested_run_id(run: RunConfig, opts: GenerateOptions) -> str:
    """``synthetic_<model>_p<pp>t<tp>d<dp>_s<seed>`` (or ``generate.run_name``), store-safe."""
    if opts.run_name:
        name = opts.run_name
    else:
        par = run.parallel
        model = re.sub(r"[^A-Za-z0-9]+", "-", run.model.name).strip("-").lower() or "model"
        name = f"synthetic_{model}_p{par.pp}t{par.tp}d{par.dp}_s{opts.seed}"
    if not name.startswith("synthetic"):
        name = "synthetic_" + name
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def build_manifest(
    sim: Simulation,
    out: Path,
    files: dict[str, list[Path]],
    effects: dict[str, Any],
    command: str | None,
) -> dict[str, Any]:
    """The manifest dict (see the module docstring)."""
    run, opts, cl = sim.run, sim.opts, sim.cluster
    gen = opts.to_dict()
    gen.pop("scenario", None)

    def rel(p: Path) -> str:
        return str(p.relative_to(out)) if p.is_relative_to(out) else str(p)

    return {
        "schema": MANIFEST_SCHEMA,
        "run_id": suggested_run_id(run, opts),
        "synthetic": True,
        "generator": {
            "tool": "commscope generate",
            "version": GENERATOR_VERSION,
            "command": command,
        },
        "config": config_to_dict(run),
        "generate": gen,
        "scenario": opts.scenario.to_dict(),
        "scenario_active": opts.scenario.active(),
        "seed": opts.seed,
        "iterations": opts.iterations,
        "world_size": run.world,
        "nodes": cl.nodes,
        "gpus_per_node": cl.gpn,
        "versions": {
            "nccl": opts.nccl_version,
            "deepspeed": opts.deepspeed_version,
            "torch": opts.torch_version,
            "nsys": opts.nsys_version,
        },
        "start_time_utc": opts.start_time,
        "mapping": {
            "order": list(run.mapping),
            "ranks": [
                {
                    "global_rank": ri.rank,
                    "pipe_stage": ri.stage,
                    "data_parallel_rank": ri.dp,
                    "model_parallel_rank": ri.tp,
                    "node": ri.node,
                    "local_rank": ri.local_rank,
                    "host": ri.host,
                }
                for ri in cl.ranks
            ],
        },
        "formats": list(opts.formats),
        "files": {fmt: sorted(rel(p) for p in paths) for fmt, paths in files.items()},
        "missing_files": effects.get("missing_files", []),
        "truncated_files": effects.get("truncated_files", []),
        "truth": {"json": "truth.json", "parquet_dir": "truth"},
    }


def write_manifest(out: Path, manifest: dict[str, Any]) -> Path:
    """Write ``out/manifest.json``."""
    path = out / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2, allow_nan=False) + "\n")
    return path
