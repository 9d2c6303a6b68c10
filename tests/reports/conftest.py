"""Report test fixtures: one store with the bundled sample run, a small synthetic run and a run
whose log text is hostile HTML, ingested and derived once per session."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from commscope.pipeline.cli import main as cli_main
from commscope.pipeline.derive import derive_run
from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.store import Store

HOSTILE_HOST = "<script>alert(1)</script>"
HOSTILE_FILE = "<img src=x onerror=alert(2)>.log"
SMALL_CONFIG_EDITS = {
    r"(?m)^pp = 4": "pp = 2",
    r"(?m)^dp = 4": "dp = 2",
    r"(?m)^gpus_per_node = 8": "gpus_per_node = 4",
    r"(?m)^global_batch = 1024": "global_batch = 256",
    r"(?m)^micro_batches = 8": "micro_batches = 4",
    r"(?m)^partitioner = .*$": "",
}


@dataclass(frozen=True)
class ReportStore:
    """The session store and the runs in it."""

    store: Store
    sample: str
    synth: str
    hostile: str


@pytest.fixture(scope="session")
def report_store(
    tmp_path_factory: pytest.TempPathFactory, sample_traces: Path, project_root: Path
) -> ReportStore:
    """Ingest and derive: the real DeepSpeed PP=2 x DP=2 sample, an 8-rank synthetic run
    (p, t, d) = (2, 2, 2) on two 4-GPU nodes (NCCL + Kineto, 3 iterations), and an NCCL log
    with a hostile host name, file name and rejected line."""
    base = tmp_path_factory.mktemp("reports")
    store = Store.open(base / "store")
    sample = sample_traces / "ds_pipe_pp2_dp2_cpu"
    ingest_paths(store, [sample], run_id="sample")
    derive_run(store, "sample")

    text = (project_root / "configs" / "synthetic_gpt3b_4x2x4.toml").read_text()
    for pat, rep in SMALL_CONFIG_EDITS.items():
        text = re.sub(pat, rep, text)
    cfg = base / "small.toml"
    cfg.write_text(text)
    gen = base / "gen"
    rc = cli_main(
        [
            "generate",
            "--config",
            str(cfg),
            "--out",
            str(gen),
            "--iterations",
            "3",
            "--formats",
            "nccl,kineto",
        ]
    )
    assert rc == 0
    ingest_paths(store, [gen], run_id="synth")
    derive_run(store, "synth")

    hostile = base / "hostile"
    hostile.mkdir()
    src = next(
        (project_root.parent / "shared" / "samples" / "nccl_debug").glob("gfbench_*rank0*.txt"),
        None,
    )
    lines = src.read_text().splitlines()[:200] if src else []
    lines = [re.sub(r"^[^:\s]+:", HOSTILE_HOST + ":", ln) for ln in lines]
    if not lines:  # shared samples absent: a minimal NCCL log of our own
        lines = [
            f"{HOSTILE_HOST}:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 "
            "busId 4f000 commId 0x5 - Init COMPLETE",
            f"{HOSTILE_HOST}:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7 recvbuff 0x7 "
            "count 10 datatype 7 op 0 root 0 comm 0x1 [nranks=2] stream 0x1",
        ]
    lines.append(f"{HOSTILE_HOST}:1:1 [0] NCCL INFO AllReduce: opCount {HOSTILE_HOST} sendbuff")
    (hostile / HOSTILE_FILE).write_text("\n".join(lines) + "\n")
    ingest_paths(store, [hostile], run_id="hostile")
    derive_run(store, "hostile")
    return ReportStore(store, "sample", "synth", "hostile")


@pytest.fixture(scope="session")
def sample_report(report_store: ReportStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTML report of the bundled sample run."""
    from commscope.reports.html import build_report

    out = tmp_path_factory.mktemp("html") / "sample.html"
    return build_report(report_store.store, report_store.sample, out)


@pytest.fixture(scope="session")
def hostile_report(report_store: ReportStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTML report of the run with hostile log text."""
    from commscope.reports.html import build_report

    out = tmp_path_factory.mktemp("html") / "hostile.html"
    return build_report(report_store.store, report_store.hostile, out)
