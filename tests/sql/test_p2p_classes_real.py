"""Send/recv inside one pipeline stage is expert traffic, not pipeline traffic (real MoE job).

``sample_traces/gpu_nccl_pp2ep2_1gpu`` is a real 4-rank NCCL job, pipeline 2 stages x (data =
expert parallel) 2: stage 0 = ranks 0, 1 and stage 1 = ranks 2, 3 send activations and gradients
to each other (NCCL Send/Recv on the 4-rank world communicator), and each stage exchanges its
MoE tokens with an uneven ``all_to_all_single``, which NCCL logs as grouped Send/Recv on the
stage's 2-rank communicator (a send to itself included), after an AlltoAll of the token counts. The oracle reads the NCCL logs with a
regex: per rank, the bytes of its Send lines on the 2-rank communicator to the other member (EP),
to itself (local, never network), its AlltoAll blocks (one per member), and its Send lines on
the world communicator (PP); the traffic matrix must
book exactly those bytes under EP and PP.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

from commscope.pipeline.derive import derive_run
from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.store import Store

RUN = Path(__file__).resolve().parents[2] / "sample_traces" / "gpu_nccl_pp2ep2_1gpu"
INIT = re.compile(r"comm (0x[0-9a-f]+) rank (\d+) nranks (\d+) .*- Init COMPLETE")
SEND = re.compile(
    r"NCCL INFO Send: opCount [0-9a-f]+ sendbuff \S+ recvbuff \S+ count (\d+) datatype (\d+) "
    r"op \d+ root (\d+) comm (0x[0-9a-f]+) \[nranks=(\d+)\]"
)
A2A = re.compile(
    r"NCCL INFO AlltoAll: opCount [0-9a-f]+ sendbuff \S+ recvbuff \S+ count (\d+) datatype (\d+) "
    r".* comm (0x[0-9a-f]+) \[nranks=(\d+)\]"
)
DTYPE_BYTES = {4: 8, 7: 4, 9: 2}  # ncclInt64, ncclFloat32, ncclBfloat16 (the ones this job uses)


def oracle() -> dict[tuple[int, str], int]:
    """(global rank, 'EP' | 'PP' | 'local') -> bytes sent, from the raw NCCL logs."""
    out: dict[tuple[int, str], int] = defaultdict(int)
    for path in sorted((RUN / "nccl").glob("*.log")):
        text = path.read_text()
        comms = {m[1]: (int(m[2]), int(m[3])) for m in INIT.finditer(text)}
        world = next(r for r, n in comms.values() if n == 4)
        for m in SEND.finditer(text):
            count, dtype, root, comm, n = int(m[1]), int(m[2]), int(m[3]), m[4], int(m[5])
            size = count * DTYPE_BYTES[dtype]
            if n == 4:
                out[(world, "PP")] += size
            elif root == comms[comm][0]:
                out[(world, "local")] += size
            else:
                out[(world, "EP")] += size
        # the token counts go first, by NCCL's own AlltoAll: count elements to each member
        for m in A2A.finditer(text):
            block, n = int(m[1]) * DTYPE_BYTES[int(m[2])], int(m[4])
            out[(world, "EP")] += block * (n - 1)
            out[(world, "local")] += block
    return dict(out)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> pl.DataFrame:
    store = Store.open(tmp_path_factory.mktemp("pp2ep2") / "store")
    ingest_paths(store, [RUN / "nccl", RUN / "manifest.json"], run_id="pp2ep2")
    derive_run(store, "pp2ep2")
    return pl.read_parquet(store.mart_files("pp2ep2")["traffic_matrix"])


def test_stage_internal_p2p_is_expert_traffic(matrix: pl.DataFrame) -> None:
    want = oracle()
    assert {k for _, k in want} == {"EP", "PP", "local"}
    got = matrix.group_by("src_rank", "traffic_class").agg(
        pl.col("bytes").sum(), pl.col("local_bytes").sum()
    )
    for rank in range(4):
        row = {
            r["traffic_class"]: r
            for r in got.filter(pl.col("src_rank") == rank).iter_rows(named=True)
        }
        assert row["PP"]["bytes"] == want[(rank, "PP")], rank
        assert row["EP"]["bytes"] == want[(rank, "EP")], rank
        assert row["EP"]["local_bytes"] == want[(rank, "local")], rank
        # EP bytes stay inside the stage, PP bytes cross it
        ep = matrix.filter(
            (pl.col("src_rank") == rank) & (pl.col("traffic_class") == "EP") & (pl.col("bytes") > 0)
        )
        pp = matrix.filter(
            (pl.col("src_rank") == rank) & (pl.col("traffic_class") == "PP") & (pl.col("bytes") > 0)
        )
        assert set(ep["dst_rank"]) == {rank ^ 1}
        assert set(pp["dst_rank"]) == {(rank + 2) % 4}
