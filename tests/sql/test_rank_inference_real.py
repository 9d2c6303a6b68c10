"""Ranks of real logs without Init lines (issue 19 item 3), checked by oracles on the raw files.

* DLcomm on Polaris (one node, 4 processes, NCCL 2.20.5, COLL lines only): the oracle reads the
  COLL lines with its own regex; the process that receives from roots 1, 2 and 3 of its 4-rank
  communicator is rank 0, every other process's rank is its ``[dev]`` (one process per GPU on
  one node). Every call must carry that rank, flagged as inferred, and the traffic matrix must
  not be empty.
* nsys 3-of-9 subset + the job's NCCL stdout, one run: the oracle maps host:pid -> rank and
  nranks from the log's Init lines and host/pid from each export's file name, and counts the
  NCCL API ranges and times the NCCL kernel with sqlite3. Every nsys call must get that rank
  (``inferred_process``), group size 9 and the kernel's duration.
"""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict
from pathlib import Path

import duckdb
import pytest

from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.store import Store
from tests.sql.conftest import materialised

DLCOMM = "nccl_debug/dlcomm_polaris_2.20.5_1node_4rank_pytorch_multimode_2comms_coll_tuning.log"
NSYS = "nsys/zhiyihu_ault_3node_9rank_allreduce_tree_nccl2.17_3of9"

COLL = re.compile(
    r"([^\s:\[\]]+):(\d+):\d+ \[(\d+)\] NCCL INFO ([A-Za-z]+): opCount [0-9a-f]+ sendbuff \S+ "
    r"recvbuff \S+ count \d+ datatype \d+ op \d+ root (\d+) comm (0x[0-9a-f]+) "
    r"\[nranks=(\d+)\] stream \S+$"
)
INIT = re.compile(
    r"^([^\s:]+):(\d+):\d+ \[\d+\] NCCL INFO comm 0x[0-9a-f]+ rank (\d+) nranks (\d+) .*"
    r"Init COMPLETE$"
)


@pytest.fixture(scope="module")
def con(
    tmp_path_factory: pytest.TempPathFactory, shared_samples: Path
) -> duckdb.DuckDBPyConnection:
    store = Store.open(tmp_path_factory.mktemp("ranks") / "store")
    for run_id, rel in (("dl", DLCOMM), ("ns", NSYS)):
        results = ingest_paths(store, [shared_samples / rel], run_id=run_id)
        assert all(r.ok for r in results), results
    # synthetic (written here): two hosts, one 2-rank world, no p2p: nothing names the ranks
    unk = tmp_path_factory.mktemp("unk") / "nccl_unknown.log"
    unk.write_text(
        "".join(
            f"{h}:{p}:{p} [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x10 recvbuff 0x20 "
            f"count 256 datatype 7 op 0 root 0 comm 0x{p} [nranks=2] stream 0x30\n"
            for h, p in (("a", 40), ("b", 41))
        )
    )
    assert all(r.ok for r in ingest_paths(store, [unk], run_id="unk"))
    return materialised(store)


def dlcomm_oracle(path: Path) -> tuple[dict[int, int], int, int]:
    """pid -> expected rank, the pid of rank 0 (from its Recv roots), number of COLL lines."""
    recv_roots: dict[int, set[int]] = defaultdict(set)
    devs: dict[int, set[int]] = defaultdict(set)
    n_lines = 0
    for line in path.read_text().splitlines():
        # a line two writers spliced holds the last writer's complete record at its end
        m = None
        for start in (i.start() for i in re.finditer(r"x3005c0s7b0n0:", line)):
            m = COLL.match(line, start) or m
        if m is None:
            continue
        n_lines += 1
        _, pid, dev, op, root, _, nranks = m.groups()
        devs[int(pid)].add(int(dev))
        if op == "Recv" and nranks == "4":
            recv_roots[int(pid)].add(int(root))
    zero = [p for p, roots in recv_roots.items() if roots == {1, 2, 3}]
    assert len(zero) == 1
    want = {p: next(iter(d)) for p, d in devs.items() if len(d) == 1}
    want[zero[0]] = 0
    assert sorted(want.values()) == [0, 1, 2, 3]
    return want, zero[0], n_lines


def test_dlcomm_every_call_has_its_inferred_rank(
    con: duckdb.DuckDBPyConnection, shared_samples: Path
) -> None:
    want, zero_pid, n_lines = dlcomm_oracle(shared_samples / DLCOMM)
    got = con.sql("SELECT pid, rank, rank_source FROM stg_store__comm_ops WHERE run_id = 'dl'").pl()
    assert got.height == n_lines == 133
    assert got["rank"].null_count() == 0
    for pid, rank, how in got.iter_rows():
        assert rank == want[pid], (pid, rank)
        assert how == ("inferred_peers" if pid == zero_pid else "inferred_device"), (pid, how)


def test_dlcomm_traffic_matrix_is_not_empty(con: duckdb.DuckDBPyConnection) -> None:
    tm = con.sql(
        "SELECT src_rank, dst_rank, sum(bytes) AS b FROM traffic_matrix WHERE run_id = 'dl' "
        "GROUP BY ALL"
    ).pl()
    assert tm.height > 0
    assert set(tm["src_rank"].to_list()) == {0, 1, 2, 3}
    assert tm["b"].sum() > 0


def nsys_oracle(folder: Path) -> dict[str, dict[str, int]]:
    """File name -> rank, nranks (the log's Init line of the same host:pid), NCCL API calls,
    NCCL kernel duration (sqlite3 on the export)."""
    ranks: dict[tuple[str, int], tuple[int, int]] = {}
    for log in folder.glob("*.o"):
        for line in log.read_text(errors="replace").splitlines():
            m = INIT.match(line)
            if m:
                ranks[(m[1], int(m[2]))] = (int(m[3]), int(m[4]))
    out: dict[str, dict[str, int]] = {}
    for f in sorted(folder.glob("*.sqlite")):
        m = re.search(r"_([a-z0-9]+)\.[a-z.]+_(\d+)\.sqlite$", f.name)
        assert m
        rank, nranks = ranks[(m[1], int(m[2]))]
        db = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
        try:
            (calls,) = db.execute(
                "SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
                "WHERE coalesce(e.text, s.value) IN ('ncclAllReduce', 'ncclAllGather', "
                "'ncclReduceScatter', 'ncclBroadcast', 'ncclReduce', 'ncclSend', 'ncclRecv')"
            ).fetchone()
            (dur,) = db.execute(
                'SELECT k."end" - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k '
                "JOIN StringIds s ON s.id = k.shortName WHERE s.value LIKE 'ncclKernel%'"
            ).fetchone()
        finally:
            db.close()
        out[f.name] = {"rank": rank, "nranks": nranks, "calls": calls, "dur": dur}
    return out


def test_nsys_calls_take_rank_and_group_from_the_nccl_log(
    con: duckdb.DuckDBPyConnection, shared_samples: Path
) -> None:
    want = nsys_oracle(shared_samples / NSYS)
    assert sorted(w["rank"] for w in want.values()) == [1, 3, 6]
    got = con.sql(
        "SELECT source_file, rank, rank_source, group_size, group_source, timing_source, dur_ns "
        "FROM stg_store__comm_ops WHERE run_id = 'ns' AND source_format = 'nsys'"
    ).pl()
    per_file = got.group_by("source_file").len()
    assert {Path(f).name: n for f, n in per_file.iter_rows()} == {
        k: w["calls"] for k, w in want.items()
    }
    for f, rank, how, size, gsrc, timing, dur in got.iter_rows():
        w = want[Path(f).name]
        assert (rank, how) == (w["rank"], "inferred_process")
        assert (size, gsrc) == (w["nranks"], "inferred_process") == (9, "inferred_process")
        assert (timing, dur) == ("kernel", w["dur"])
    # the exports' kernels (no pid on them; one process per export) land on the same ranks
    kernels = con.sql(
        "SELECT source_file, list(DISTINCT rank) AS ranks FROM stg_store__kernels "
        "WHERE run_id = 'ns' GROUP BY ALL"
    ).pl()
    assert {Path(f).name: r for f, r in kernels.iter_rows()} == {
        k: [w["rank"]] for k, w in want.items()
    }


@pytest.mark.xfail(
    strict=True,
    reason="no file of this job logs the AllReduce's size: the NCCL log has no COLL lines "
    "(NCCL_DEBUG=INFO without COLL output), NCCL 2.17's NVTX ranges carry no payload, and "
    "the patched NCCL's ncclNet* ranges give per-chunk network sizes, not the call's buffer",
)
def test_nsys_calls_have_a_message_size(con: duckdb.DuckDBPyConnection) -> None:
    sizes = con.sql(
        "SELECT msg_bytes FROM stg_store__comm_ops WHERE run_id = 'ns' AND source_format = 'nsys'"
    ).pl()
    assert sizes.height == 3 and sizes["msg_bytes"].null_count() == 0


def test_unknown_ranks_key_the_matrix_on_the_process(con: duckdb.DuckDBPyConnection) -> None:
    ops = con.execute(
        "SELECT count(*), count(rank), count(rank_source) FROM stg_store__comm_ops "
        "WHERE run_id = 'unk'"
    ).fetchone()
    assert ops == (2, 0, 0)
    tm = con.execute(
        "SELECT src_process, src_rank, dst_rank, bytes FROM traffic_matrix WHERE run_id = 'unk' "
        "ORDER BY src_process"
    ).fetchall()
    # 256 float32 = 1024 bytes; a 2-rank ring all_reduce sends 2(n-1)/n x 1024 per rank
    assert tm == [("a:40", None, None, 1024.0), ("b:41", None, None, 1024.0)]
    # ranked rows never carry a process key
    assert con.execute(
        "SELECT count(*) FROM traffic_matrix WHERE run_id = 'dl' AND src_process IS NOT NULL"
    ).fetchone() == (0,)
