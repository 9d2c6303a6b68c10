"""A Kineto all_to_all with uneven splits books each member's own bytes in the traffic matrix.

``sample_traces/gpu_nccl_pp2ep2_1gpu`` (real: 4 ranks, pipeline 2 x expert 2, PyTorch 2.x,
NCCL 2.28): each stage's MoE layer runs an uneven ``all_to_all_single`` whose
``record_param_comms`` carries ``In split size`` (rows along dim 0 per member, e.g.
``"[118, 394]"``). Ingested alone (the Kineto traces, no NCCL log: Kineto is every rank's
counted source), the flows of each exchange must follow the splits, not msg_bytes / n.

(The shared Kineto samples in ../shared/samples/kineto carry only ``"In split size": "[]"``,
even exchanges: hta_nccl_parser_config 48 events, tracelens_b200 2, tracelens_mi300 30.)

Oracle (independent of commscope): each trace read with ``json``; the rank from
``distributedInfo``; every ``record_param_comms`` of an all-to-all with a non-empty split list:
member ``j`` of ``Process Group Ranks`` gets ``split[j] x In msg nelems / sum(split) x dtype
size`` bytes (an even all-to-all without splits, the token counts: msg_bytes / n each), the
caller's own block local.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest
from generated_runs import GeneratedRun, ingest_and_derive

pytestmark = pytest.mark.slow

RUN = Path(__file__).resolve().parents[2] / "sample_traces" / "gpu_nccl_pp2ep2_1gpu"
DTYPE_BYTES = {"BFloat16": 2, "Half": 2, "Float": 4, "Double": 8, "Long": 8, "Int": 4}
A2A = {"all_to_all", "all_to_allv", "alltoall", "alltoall_base"}


def _oracle() -> tuple[dict[tuple[int, int], int], dict[int, int], int, dict[int, int]]:
    """(bytes per (src, dst) off-rank, local bytes per rank, exchanges with splits, local
    bytes per rank had every exchange been even)."""
    flows: dict[tuple[int, int], int] = defaultdict(int)
    even: dict[int, int] = defaultdict(int)
    local: dict[int, int] = defaultdict(int)
    n = 0
    for f in sorted((RUN / "kineto").glob("rank*.pt.trace.json.gz")):
        doc = json.loads(gzip.decompress(f.read_bytes()))
        me = doc["distributedInfo"]["rank"]
        for ev in doc["traceEvents"]:
            a = ev.get("args") or {}
            if ev.get("name") != "record_param_comms" or a.get("Collective name") not in A2A:
                continue
            split = json.loads(a["In split size"])
            ranks = json.loads(a["Process Group Ranks"])
            if split:
                n += 1
                row = a["In msg nelems"] // sum(split) * DTYPE_BYTES[a["dtype"]]
            else:  # an even exchange (the token counts): msg_bytes / n to each member
                split = [1] * len(ranks)
                row = a["In msg nelems"] * DTYPE_BYTES[a["dtype"]] // len(ranks)
            even[me] += a["In msg nelems"] * DTYPE_BYTES[a["dtype"]] // len(ranks)
            for dst, rows in zip(ranks, split, strict=True):
                if dst == me:
                    local[me] += rows * row
                else:
                    flows[(me, dst)] += rows * row
    return dict(flows), dict(local), n, dict(even)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    store = tmp_path_factory.mktemp("kineto_splits") / "store"
    return ingest_and_derive(RUN, store, "splits", paths=[RUN / "kineto"])


def test_split_bytes_are_stored_per_member(run: GeneratedRun) -> None:
    _, _, n, _ = _oracle()
    got = run.query(
        "SELECT split_bytes, msg_bytes FROM stg_store__comm_ops WHERE run_id = ? "
        "AND op = 'all_to_all' AND split_bytes IS NOT NULL"
    )
    assert got.height == n > 0
    sums = got["split_bytes"].str.split(",").list.eval(pl.element().cast(pl.Int64)).list.sum()
    assert (sums == got["msg_bytes"]).all()  # the splits add up to the whole send buffer


def test_traffic_matrix_follows_the_splits(run: GeneratedRun) -> None:
    flows, local, _, even = _oracle()
    tm = run.mart("traffic_matrix").filter(pl.col("traffic_class") == "EP")
    got = tm.group_by("src_rank", "dst_rank").agg(pl.col("bytes").sum())
    got_off = {(s, d): b for s, d, b in got.iter_rows() if s != d and d is not None and b > 0}
    assert got_off == flows
    got_local = tm.group_by("src_rank").agg(pl.col("local_bytes").sum())
    assert {s: b for s, b in got_local.iter_rows() if b} == local
    # uneven indeed: an even split would keep msg_bytes / 2 local on every rank
    assert all(local[r] != even[r] for r in even)
