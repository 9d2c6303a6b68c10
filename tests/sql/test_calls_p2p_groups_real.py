"""Grouped Send/Recv that is not an all-to-all stays one call per line (issue 19, batched p2p).

The only real NCCL log in ../shared/samples/nccl_debug with p2p lines is the DLcomm Polaris job
(PyTorch 2.3, NCCL 2.20.5, 4 ranks): under ONE opCount (5) of the 4-rank communicator, ranks
1-3 each log one ``Send`` to root 0 and rank 0 logs three ``Recv`` lines (roots 1, 2, 3), i.e.
a gather-shaped NCCL group (PyTorch's gather / a batch_isend_irecv of the receiver), not an
exchange with every member. Each line is a transfer of its own peer and size (which a Kineto
``send``/``recv`` record or a dump p2p entry, one per isend/irecv, also has), so the lines are
not folded into one call (int_p2p_groups takes only a Send to and a Recv from every member),
and the traffic matrix books each Send once, the receiver's Recv lines not again.

Oracle: the log read with a regex (the opCount-5 Send/Recv lines, the sender's device = its
rank as in test_rank_inference_real, root 0).
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.store import Store
from tests.sql.conftest import materialised

pytestmark = pytest.mark.slow

DLCOMM = "nccl_debug/dlcomm_polaris_2.20.5_1node_4rank_pytorch_multimode_2comms_coll_tuning.log"
P2P = re.compile(
    r"x3005c0s7b0n0:(\d+):\d+ \[(\d+)\] NCCL INFO (Send|Recv): opCount (\w+) sendbuff \S+ "
    r"recvbuff \S+ count (\d+) datatype (\d+) op \d+ root (\d+) comm (0x[0-9a-f]+) "
    r"\[nranks=4\] stream \S+$"
)
DTYPE_BYTES = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2}


@pytest.fixture(scope="module")
def con(
    tmp_path_factory: pytest.TempPathFactory, shared_samples: Path
) -> duckdb.DuckDBPyConnection:
    store = Store.open(tmp_path_factory.mktemp("p2pgroups") / "store")
    results = ingest_paths(store, [shared_samples / DLCOMM], run_id="dl")
    assert all(r.ok for r in results), results
    return materialised(store)


def test_gather_shaped_group_stays_one_call_per_line(
    con: duckdb.DuckDBPyConnection, shared_samples: Path
) -> None:
    lines = [m for m in map(P2P.search, (shared_samples / DLCOMM).read_text().splitlines()) if m]
    assert {m[4] for m in lines} == {"5"}  # one opCount: one NCCL group
    sends = [m for m in lines if m[3] == "Send"]
    recvs = [m for m in lines if m[3] == "Recv"]
    assert len(sends) == 3 and {m[7] for m in sends} == {"0"}
    assert len(recvs) == 3 and {m[7] for m in recvs} == {"1", "2", "3"}
    assert len({m[1] for m in recvs}) == 1  # all three Recv lines: one process, rank 0
    calls = con.sql(
        "SELECT rank, op, count(*) AS n, count(p2p_lines) AS folded, sum(msg_bytes) AS b "
        "FROM int_calls WHERE run_id = 'dl' AND op IN ('send', 'recv', 'all_to_all', "
        "'gather') GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    nbytes = {int(m[2]): int(m[5]) * DTYPE_BYTES[int(m[6])] for m in sends}  # device = rank
    want = [(r, "send", 1, 0, nbytes[r]) for r in sorted(nbytes)]
    recv_bytes = sum(int(m[5]) * DTYPE_BYTES[int(m[6])] for m in recvs)
    want.insert(0, (0, "recv", 3, 0, recv_bytes))
    assert [tuple(int(v) if isinstance(v, int) else v for v in c) for c in calls] == want
    flows = con.sql(
        "SELECT src_rank, dst_rank, placement, sum(bytes) AS b FROM int_flows_expanded "
        "WHERE run_id = 'dl' AND op IN ('send', 'recv') GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    want_flows = [(r, 0, "p2p", nbytes[r]) for r in sorted(nbytes)]  # no recv_only: booked once
    assert [(s, d, p, int(b)) for s, d, p, b in flows] == want_flows
