"""call_signatures on a real run, against the raw NCCL log lines (an independent oracle).

The bundled 4-process TP x DP run (``sample_traces/gpu_nccl_tp2_dp2_1gpu``) logs its
collectives with ``NCCL_DEBUG=INFO``. The oracle reads the log files by regex: each process's
rank from its world communicator's ``ncclCommInitRankConfig ... rank R nranks 4`` line, each
collective line's op, ``count`` x the datatype's size. It counts calls per (rank, op, bytes) and
compares them with the mart summed over traffic classes (the run's Kineto traces and Flight
Recorder dumps see the same calls, but only one source per rank is counted).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import polars as pl

from commscope.pipeline.store import Store

RUN = "gpu_tp2_dp2"
FOLDER = "gpu_nccl_tp2_dp2_1gpu"
WORLD_INIT = re.compile(r"ncclCommInitRank\w* comm \S+ rank (\d+) nranks 4 .*Init COMPLETE")
COLL = re.compile(r"NCCL INFO (\w+): opCount [0-9a-f]+ .* count (\d+) datatype (\d+) ")
OPS = {
    "AllReduce": "all_reduce",
    "AllGather": "all_gather",
    "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast",
}
# ncclDataType_t: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16
DTYPE_BYTES = [1, 1, 4, 4, 8, 8, 2, 4, 8, 2]


def _oracle(folder: Path) -> Counter[tuple[int, str, int]]:
    calls: Counter[tuple[int, str, int]] = Counter()
    for log in sorted((folder / "nccl").glob("*.log")):
        text = log.read_text()
        (rank,) = {int(m.group(1)) for m in WORLD_INIT.finditer(text)}
        for m in COLL.finditer(text):
            op = OPS.get(m.group(1))
            if op is not None:
                calls[(rank, op, int(m.group(2)) * DTYPE_BYTES[int(m.group(3))])] += 1
    return calls


def test_call_signatures_count_the_logged_calls(real_runs_store: Path, sample_traces: Path) -> None:
    want = _oracle(sample_traces / FOLDER)
    assert len({r for r, _, _ in want}) == 4  # one log per process
    mart = pl.read_parquet(
        Store.open(real_runs_store, create=False).mart_files(RUN)["call_signatures"]
    )
    got = mart.group_by("rank", "op", "msg_bytes").agg(
        pl.col("calls").sum(), pl.col("total_bytes").sum()
    )
    assert {(r, o, b): n for r, o, b, n, _ in got.iter_rows()} == dict(want)
    assert all(t == n * b for _, _, b, n, t in got.iter_rows())
    assert (mart["tol_bytes"] == 0.0).all()  # NCCL logs exact sizes
