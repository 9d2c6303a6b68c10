"""A Kineto ``gather`` or ``scatter`` pairs with the NCCL log lines PyTorch issued (issue 19).

No real sample has a gather seen by both tools, so the run is hand-built (synthetic, labelled
so): 2 ranks, one process each, one 2-rank world communicator. PyTorch's NCCL gather
(``torch/csrc/cuda/nccl.cpp`` ``gather``) is point-to-point under one group: the root (rank 0)
posts an ``ncclRecv`` from every other member, a non-root one ``ncclSend`` to the root, each the
per-rank buffer; ``record_param_comms`` names it ``gather`` with ``Rank`` = the root
(``opts.rootRank``) and ``In msg nelems`` = the per-rank input (ProcessGroupNCCL::gather). Rank
1 also sends 8 B to rank 0 between the gathers (a pipeline send, not a gather). Then two
scatters from root 1 (``scatter``: the root sends to every other member, a non-root receives
from the root; Kineto's ``In msg nelems`` is n x the per-rank output). The NCCL log is each
rank's counted source; each Kineto gather and scatter must pair with the line a regex oracle
over the raw log names: the k-th 16-B Send to root 0 on rank 1, the k-th 16-B Recv from member
1 on rank 0; the k-th 32-B Send to member 0 on rank 1 and Recv from root 1 on rank 0.
"""

from __future__ import annotations

import json
import re

import pytest
from generated_runs import GeneratedRun, ingest_and_derive

pytestmark = pytest.mark.slow

N_GATHER = 3
N_SCATTER = 2
LINE = (
    "node{r}:10{r}:10{r} [{r}] NCCL INFO {op}: opCount {oc:x} sendbuff 0x7f00 recvbuff 0x7f80 "
    "count {count} datatype 7 op 0 root {root} comm 0x55{r}0 [nranks=2] stream 0x9999\n"
)


def _nccl_log(r: int) -> str:
    text = (
        "# synthetic, hand-written for commscope's gather pairing test\n"
        f"node{r}:10{r}:10{r} [{r}] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        f"node{r}:10{r}:10{r} [{r}] NCCL INFO comm 0x55{r}0 rank {r} nranks 2 cudaDev {r} "
        f"busId {r + 1}000 commId 0xabc - Init COMPLETE\n"
    )
    oc = 0
    for k in range(N_GATHER):
        # a gather of 4 float32 per rank: root 0 receives from 1, rank 1 sends to 0
        op, peer = ("Recv", 1) if r == 0 else ("Send", 0)
        text += LINE.format(r=r, op=op, oc=oc, count=4, root=peer)
        oc += 1
        if r == 1 and k == 0:  # a pipeline send of 8 B to rank 0
            text += LINE.format(r=r, op="Send", oc=oc, count=2, root=0)
            oc += 1
        if r == 0 and k == 0:
            text += LINE.format(r=r, op="Recv", oc=oc, count=2, root=1)
            oc += 1
    for _ in range(N_SCATTER):
        # a scatter of 8 float32 per rank from root 1: rank 1 sends to 0, rank 0 receives
        op, peer = ("Recv", 1) if r == 0 else ("Send", 0)
        text += LINE.format(r=r, op=op, oc=oc, count=8, root=peer)
        oc += 1
    return text


def _kineto(r: int) -> dict:
    events = []
    for k in range(N_GATHER):
        ts = 1000.0 + 100 * k
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "record_param_comms",
                "pid": 100 + r,
                "tid": 100 + r,
                "ts": ts,
                "dur": 5.0,
                "args": {
                    "Collective name": "gather",
                    "Rank": 0,  # the root's group rank
                    "In msg nelems": 4,
                    "Out msg nelems": 8,
                    "dtype": "Float",
                    "Group size": 2,
                    "Process Group Name": "0",
                    "Process Group Ranks": "[0, 1]",
                    "Seq": k + 1,
                    "In split size": "[]",
                    "Out split size": "[]",
                },
            }
        )
    for k in range(N_SCATTER):
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "record_param_comms",
                "pid": 100 + r,
                "tid": 100 + r,
                "ts": 2000.0 + 100 * k,
                "dur": 5.0,
                "args": {
                    "Collective name": "scatter",
                    "Rank": 1,  # the root's group rank
                    "In msg nelems": 16,  # ProcessGroupNCCL: n x the per-rank output
                    "Out msg nelems": 8,
                    "dtype": "Float",
                    "Group size": 2,
                    "Process Group Name": "0",
                    "Process Group Ranks": "[0, 1]",
                    "Seq": N_GATHER + k + 1,
                    "In split size": "[]",
                    "Out split size": "[]",
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
    tmp = tmp_path_factory.mktemp("gather")
    src = tmp / "in"
    src.mkdir()
    for r in range(2):
        (src / f"nccl_rank{r}.log").write_text(_nccl_log(r))
        (src / f"rank{r}.pt.trace.json").write_text(json.dumps(_kineto(r)))
    return ingest_and_derive(src, tmp / "store", "gather")


def _oracle(log: str, rank: int) -> list[int]:
    """1-based line numbers of the lines the gathers and scatters are, from the raw log.

    Gather (root 0): the 16-B Send to root 0 (rank 1) or Recv from member 1 (rank 0); scatter
    (root 1): the 32-B Send to member 0 (rank 1) or Recv from root 1 (rank 0); in order."""
    want = "Recv" if rank == 0 else "Send"
    peer = 1 if rank == 0 else 0
    out = []
    for count in (4, 8):
        pat = re.compile(
            rf"NCCL INFO {want}: opCount \S+ .* count {count} datatype 7 op 0 root {peer} "
        )
        out += [i for i, line in enumerate(log.splitlines(), 1) if pat.search(line)]
    return out


def test_each_gather_pairs_with_the_line_pytorch_issued(run: GeneratedRun) -> None:
    got = run.query(
        "SELECT rank, source_line, role, match_method, anchor_line FROM int_call_sources "
        "WHERE run_id = ? AND source_format = 'kineto' ORDER BY rank, source_line"
    )
    for r in range(2):
        mine = got.filter(got["rank"] == r)
        want = _oracle(_nccl_log(r), r)
        assert len(want) == N_GATHER + N_SCATTER
        assert mine["role"].to_list() == ["paired"] * (N_GATHER + N_SCATTER), mine
        assert set(mine["match_method"]) == {"rooted"}
        assert mine["anchor_line"].to_list() == want
    # the call is one call with both sources; the pipeline send/recv of 8 B are not gathers
    calls = run.query(
        "SELECT rank, op, msg_bytes, sources, size_conflict FROM int_calls WHERE run_id = ? "
        "ORDER BY rank, source_line"
    )
    both = calls.filter(calls["sources"] == "kineto,nccl_debug")
    assert both.height == 2 * (N_GATHER + N_SCATTER)
    # the per-rank buffer in both sources (Kineto's scatter In msg nelems is n x that)
    assert set(both["msg_bytes"]) == {16, 32} and not both["size_conflict"].any()
    assert set(calls.filter(calls["msg_bytes"] == 8)["sources"]) == {"nccl_debug"}
