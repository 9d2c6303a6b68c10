"""Generate a synthetic run folder: logs in every format, ground truth and manifest.

Why: the orchestration (which lanes, which writers, which process) is kept apart from the
simulation and the formats, so each can be tested alone. Lanes are independent once the
iteration boundaries are known, so they are written one after the other (bounded memory: one
lane and one iteration of events at a time) or by ``jobs`` worker processes.

Output folder layout::

    manifest.json                        run manifest (ingest records its config)
    truth.json                           ground truth (see truth.py)
    truth/*.parquet                      per-rank-iteration times, calls, traffic, on-intervals,
                                         collective instances, rank waits, waits caused
    nccl/synthetic_rank<NNNN>.nccl.log   NCCL debug output per rank
    deepspeed/synthetic_rank0000.deepspeed.log   DeepSpeed comms logger (rank 0)
    kineto/synthetic_rank<NNNN>.pt.trace.json.gz Kineto trace per rank
    nsys/synthetic_rank<NNNN>.sqlite     nsys SQLite export per rank
    inspector/<host>-pid<pid>.log        NCCL Inspector JSON Lines per process (on request)
    flight_recorder/nccl_trace_rank_<R>  PyTorch Flight Recorder dump per rank (on request)

A writer class may define ``finish_run(sim, out)``: called once after every lane is written
(the Flight Recorder resolves a hang across lanes there); what it returns goes into the
scenario effects under the writer's name.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from commscope.model.config import RunConfig
from commscope.synthetic.common import Names
from commscope.synthetic.manifest import build_manifest, write_manifest
from commscope.synthetic.scenario import GenerateOptions
from commscope.synthetic.simulate import Simulation, TailRecord
from commscope.synthetic.truth import LaneTruth, assemble
from commscope.synthetic.write_deepspeed import DeepSpeedWriter
from commscope.synthetic.write_flight_recorder import FlightRecorderWriter
from commscope.synthetic.write_inspector import InspectorWriter
from commscope.synthetic.write_kineto import KinetoWriter
from commscope.synthetic.write_nccl import NcclWriter
from commscope.synthetic.write_nsys import NsysWriter

WRITERS: dict[str, type] = {
    "nccl": NcclWriter,
    "deepspeed": DeepSpeedWriter,
    "kineto": KinetoWriter,
    "nsys": NsysWriter,
    "inspector": InspectorWriter,
    "flight_recorder": FlightRecorderWriter,
}
_OUTPUTS = (*WRITERS, "truth", "truth.json", "manifest.json")

ProgressFn = Callable[[int, int], None]


@dataclass
class GenerateResult:
    """What :func:`generate` produced."""

    out: Path
    manifest: dict[str, Any]
    truth: dict[str, Any]
    files: dict[str, list[Path]]
    bytes_written: int
    seconds: float


def _prepare(out: Path) -> None:
    """Create ``out``; clear a previous synthetic run there; refuse any other non-empty folder."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    entries = list(out.iterdir())
    if not entries:
        return
    manifest = out / "manifest.json"
    previous = False
    if manifest.is_file():
        try:
            previous = bool(json.loads(manifest.read_text()).get("synthetic"))
        except (OSError, ValueError):
            previous = False
    if not previous:
        raise ValueError(
            f"{out} is not empty and holds no earlier synthetic run; choose an empty folder"
        )
    for name in _OUTPUTS:
        p = out / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def write_lane(sim: Simulation, out: Path, lane: int) -> dict[str, Any]:
    """Simulate and write every iteration of one lane; return its truth and files."""
    names = Names(out)
    missing = set(sim.opts.scenario.missing_ranks)
    ranks = [r for r in sim.cluster.lane_ranks(lane) if r not in missing]
    writers = [WRITERS[f](sim, names) for f in sim.opts.formats]
    for w in writers:
        w.open_lane(ranks)
    truth = LaneTruth(sim, lane, out / "truth" / "parts")
    for k in range(sim.opts.iterations):
        events = sim.lane_events(lane, k)
        for w in writers:
            w.write_lane(k, events)
        truth.add(k, events)
    files: dict[str, list[Path]] = {}
    truncated = []
    for w in writers:
        files[w.name] = w.close_lane()
        info = getattr(w, "truncated", None)
        if info:
            info = dict(info)
            info["format"] = w.name
            info["file"] = str(Path(str(info["file"])).relative_to(out))
            truncated.append(info)
    return {"truth": truth.finish(), "files": files, "truncated": truncated}


# -- worker processes ------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _init_worker(
    run: RunConfig,
    opts: GenerateOptions,
    starts: list[list[int]],
    tails: list[dict[int, list[TailRecord]]],
    out: str,
) -> None:
    sim = Simulation(run, opts)
    sim.iter_start = starts
    sim.tails = tails
    _WORKER["sim"] = sim
    _WORKER["out"] = Path(out)


def _lane_job(lane: int) -> dict[str, Any]:
    return write_lane(_WORKER["sim"], _WORKER["out"], lane)


def _run_lanes(sim: Simulation, out: Path, progress: ProgressFn | None) -> list[dict[str, Any]]:
    lanes = list(range(sim.lanes))
    jobs = min(sim.opts.jobs, len(lanes))
    results: list[dict[str, Any]] = []
    if jobs <= 1:
        for i, lane in enumerate(lanes):
            results.append(write_lane(sim, out, lane))
            if progress:
                progress(i + 1, len(lanes))
        return results
    saved = os.environ.get("POLARS_MAX_THREADS")
    os.environ["POLARS_MAX_THREADS"] = "1"
    try:
        with ProcessPoolExecutor(
            max_workers=jobs,
            mp_context=get_context("spawn"),
            initializer=_init_worker,
            initargs=(sim.run, sim.opts, sim.iter_start, sim.tails, str(out)),
        ) as pool:
            for i, res in enumerate(pool.map(_lane_job, lanes)):
                results.append(res)
                if progress:
                    progress(i + 1, len(lanes))
    finally:
        if saved is None:
            os.environ.pop("POLARS_MAX_THREADS", None)
        else:
            os.environ["POLARS_MAX_THREADS"] = saved
    return results


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def generate(
    run: RunConfig,
    opts: GenerateOptions,
    out: Path,
    *,
    command: str | None = None,
    progress: ProgressFn | None = None,
) -> GenerateResult:
    """Simulate ``run`` under ``opts`` and write the run folder ``out``.

    Args:
        run: model, parallel layout, platform and mapping.
        opts: simulation options and scenario.
        out: the run folder (created; must be empty or hold an earlier synthetic run).
        command: the command line, recorded in the manifest.
        progress: called with (lanes done, lanes total).

    Returns:
        Paths, manifest, truth, bytes written and wall time.

    Raises:
        ValueError: invalid scenario for this run, unsupported layout, or a non-empty folder.
    """
    t0 = time.perf_counter()
    sim = Simulation(run, opts)
    _prepare(out)
    sim.run_boundaries()
    results = _run_lanes(sim, out, progress)
    files: dict[str, list[Path]] = {f: [] for f in opts.formats}
    truncated: list[dict[str, Any]] = []
    for res in results:
        for fmt, paths in res["files"].items():
            files[fmt].extend(paths)
        truncated += res["truncated"]
    finished: dict[str, Any] = {}
    for fmt in opts.formats:
        finish = getattr(WRITERS[fmt], "finish_run", None)
        if finish is not None:
            finished[fmt] = finish(sim, out)
    effects = scenario_effects(sim, out, truncated)
    if finished.get("flight_recorder"):
        effects["hang"] = finished["flight_recorder"]
    truth = assemble(sim, out, [r["truth"] for r in results], effects)
    manifest = build_manifest(sim, out, files, effects, command)
    write_manifest(out, manifest)
    return GenerateResult(out, manifest, truth, files, _dir_bytes(out), time.perf_counter() - t0)


def scenario_effects(sim: Simulation, out: Path, truncated: list[dict[str, Any]]) -> dict[str, Any]:
    """How each active scenario shows in this run (recorded in truth.json and the manifest)."""
    scn = sim.opts.scenario
    names = Names(out)
    eff: dict[str, Any] = {"active": scn.active()}
    if scn.straggler_rank is not None:
        eff["straggler"] = {
            "rank": scn.straggler_rank,
            "compute_factor": scn.straggler_factor,
            "shows_as": "longer compute on that rank; its TP group waits in every TP call "
            "(T_sync_wait), its pipeline's neighbours wait in p2p (T_bubble), other replicas wait in the DP all-reduce",
        }
    if scn.slow_node is not None:
        slow = [g for g in sim.cluster.groups if g.link == "slow"]
        eff["slow_link"] = {
            "node": scn.slow_node,
            "bandwidth_factor": scn.slow_link_factor,
            "groups_affected": [
                {"kind": g.kind, "members": list(g.members)} for g in slow if g.kind != "world"
            ],
            "shows_as": "longer transfers (lower busbw_transfer_gbps, link 'slow') on inter-node groups with a member on that node",
        }
    eff["network"] = {
        "kind": scn.network,
        "inter_node_factor": 1.0 if scn.network == "roce" else round(1 / 1.8, 6),
        "shows_as": "NCCL 'Using network IB' + 'via NET/IB/...' (RoCE) or 'Using network Socket' + 'via NET/Socket/0' (TCP); inter-node busbw",
    }
    eff["mapping"] = {
        "order": list(sim.run.mapping),
        "inter_node_groups": sorted(
            {g.kind for g in sim.cluster.groups if g.link != "intra" and g.kind != "world"}
        ),
    }
    if scn.missing_ranks:
        eff["missing_files"] = [
            str(p.relative_to(out))
            for r in scn.missing_ranks
            for p in (
                [names.nccl(r)] * ("nccl" in sim.opts.formats)
                + [names.kineto(r, sim.opts.kineto_compress)] * ("kineto" in sim.opts.formats)
                + [names.nsys(r)] * ("nsys" in sim.opts.formats)
                + [names.deepspeed()] * ("deepspeed" in sim.opts.formats and r == 0)
                + [names.inspector(sim.cluster.ranks[r].host, sim.cluster.ranks[r].pid)]
                * ("inspector" in sim.opts.formats)
                + [names.flight_recorder(r)] * ("flight_recorder" in sim.opts.formats)
            )
        ]
    skews = sim.cluster.node_skew_ns
    if any(skews):
        eff["clock_skew_ns"] = {
            "per_node": skews,
            "shows_as": "Kineto ts, nsys utcEpochNs and DeepSpeed asctime read node clock = true time + skew",
        }
    if truncated:
        eff["truncated_files"] = truncated
    if sim.run.model.is_moe and sim.cluster.ep > 1:
        eff["moe"] = {"routing": scn.moe_routing, "ep": sim.cluster.ep}
    return eff
