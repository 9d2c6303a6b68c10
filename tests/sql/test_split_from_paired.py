"""Per-member all-to-all bytes from a paired Kineto record when the counted NCCL log has none.

Hand-built run (synthetic, labelled so): 2 ranks, one 2-rank world communicator. Each rank's
NCCL debug log (its counted source) writes each exchange as one ``AlltoAll`` line (the line of
``ncclAlltoAll``: a count per peer, no per-peer sizes), while its Kineto trace records the same
``all_to_all`` with ``In split size`` (rows per member) and ``Out split size``. (A real
ncclAlltoAll moves even blocks; the case stands for any counted record without per-peer sizes.)
The traffic matrix must book each member's bytes from the Kineto split (``int_call_lines``
``split_source`` kineto), not msg_bytes / n. Oracle: the traces read with ``json`` (member j
gets split[j] x In msg nelems / sum x 4 bytes), the log only for the call count.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict

import polars as pl
import pytest
from generated_runs import GeneratedRun, ingest_and_derive

pytestmark = pytest.mark.slow

SPLITS = {0: [[3, 1], [3, 1]], 1: [[2, 2], [0, 4]]}
"""rank -> per exchange, rows sent to member 0 and 1 (4 float32 per row, 4 rows in all)."""
ROW = 4


def _nccl_log(r: int) -> str:
    text = (
        "# synthetic, hand-written for commscope's paired-split test\n"
        f"node{r}:10{r}:10{r} [{r}] NCCL INFO NCCL version 2.28.3+cuda12.9\n"
        f"node{r}:10{r}:10{r} [{r}] NCCL INFO comm 0x55{r}0 rank {r} nranks 2 cudaDev {r} "
        f"busId {r + 1}000 commId 0xabc - Init COMPLETE\n"
    )
    for k in range(len(SPLITS[r])):
        text += (
            f"node{r}:10{r}:10{r} [{r}] NCCL INFO AlltoAll: opCount {k:x} sendbuff 0x7f00 "
            f"recvbuff 0x7f80 count {2 * ROW} datatype 7 op 0 root 0 comm 0x55{r}0 [nranks=2] "
            "stream 0x9999\n"
        )
    return text


def _kineto(r: int) -> dict:
    events = []
    for k, split in enumerate(SPLITS[r]):
        recv = [SPLITS[j][k][r] for j in range(2)]
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "record_param_comms",
                "pid": 100 + r,
                "tid": 100 + r,
                "ts": 1000.0 + 100 * k,
                "dur": 5.0,
                "args": {
                    "Collective name": "all_to_allv",
                    "Rank": r,
                    "In msg nelems": sum(split) * ROW,
                    "Out msg nelems": sum(recv) * ROW,
                    "dtype": "Float",
                    "Group size": 2,
                    "Process Group Name": "0",
                    "Process Group Ranks": "[0, 1]",
                    "Seq": k + 1,
                    "In split size": json.dumps(split),
                    "Out split size": json.dumps(recv),
                },
            }
        )
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": r, "world_size": 2},
        "traceEvents": events,
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    tmp = tmp_path_factory.mktemp("paired_split")
    src = tmp / "in"
    src.mkdir()
    for r in range(2):
        (src / f"nccl_rank{r}.log").write_text(_nccl_log(r))
        (src / f"rank{r}.pt.trace.json").write_text(json.dumps(_kineto(r)))
    return ingest_and_derive(src, tmp / "store", "split")


def test_traffic_follows_the_paired_kineto_split(run: GeneratedRun) -> None:
    flows: dict[tuple[int, int], int] = defaultdict(int)
    local: dict[int, int] = defaultdict(int)
    n_lines = 0
    for r in range(2):
        n_lines += len(re.findall(r"NCCL INFO AlltoAll: opCount", _nccl_log(r)))
        for ev in _kineto(r)["traceEvents"]:
            a = ev["args"]
            split = json.loads(a["In split size"])
            row = a["In msg nelems"] // sum(split) * 4
            for dst, rows in enumerate(split):
                if dst == r:
                    local[r] += rows * row
                else:
                    flows[(r, dst)] += rows * row
    prim = run.query("SELECT DISTINCT source_format FROM int_rank_primary_source WHERE run_id = ?")
    assert prim["source_format"].to_list() == ["nccl_debug"]
    lines = run.query(
        "SELECT call_op, op, split_source, count(*) AS n FROM int_call_lines WHERE run_id = ? "
        "GROUP BY ALL"
    )
    assert lines.rows() == [("all_to_all", "send", "kineto", 2 * n_lines)]
    tm = run.mart("traffic_matrix")
    got = tm.group_by("src_rank", "dst_rank").agg(
        pl.col("bytes").sum(), pl.col("local_bytes").sum()
    )
    off = {(s, d): b for s, d, b, _ in got.iter_rows() if s != d and b}
    loc = {s: lb for s, d, _, lb in got.iter_rows() if s == d and lb}
    assert off == dict(flows) and loc == dict(local)
    # an even booking (msg_bytes / 2 each way) would have given another matrix
    assert off != {(0, 1): 64, (1, 0): 64}
