"""nsys calls get their communicator, size, comm rank and (with nothing else) global rank from
NCCL >= 2.25 NVTX payloads, checked against the raw exports read by a route of their own.

A generated MoE EP 8 run (8 ranks, 1 iteration, nsys exports only, NCCL 2.27: every NCCL API
payload starts with the communicator's commHash, and one ``ncclCommInitRankConfig`` range per
communicator of the rank carries commHash, No. of ranks, Rank, CUDA device). The exports are
copied under names without a rank, so the parser must take each file's rank from its
CommInitRank payloads. The oracle reads ``NVTX_EVENTS.binaryData`` with NCCL's C struct layout
(``src/include/nvtx_payload_schemas.h``: after nsys's 32-byte header, u64 comm at 0; CommInit:
i32 nranks at 8, i32 rank at 12; collectives: size_t bytes at 8; Send/Recv: i32 peer at 16),
never the export's payload schema tables that the parser uses.
"""

from __future__ import annotations

import shutil
import sqlite3
import struct
from pathlib import Path

import polars as pl
import pytest
from generated_runs import GeneratedRun, generate_run, ingest_and_derive

from commscope.parsers import nsys
from commscope.parsers._io import Source
from commscope.parsers.schema import conform

pytestmark = pytest.mark.slow

HEADER = 32


def _raw(path: Path) -> tuple[list[dict], list[dict]]:
    """(inits, calls) of one export, straight from its NCCL-domain NVTX rows."""
    con = sqlite3.connect(path)
    dom = con.execute("SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'NCCL'")
    dom_id = dom.fetchone()[0]
    rows = con.execute(
        "SELECT n.rowid, s.value, n.binaryData FROM NVTX_EVENTS n JOIN StringIds s "
        "ON s.id = n.textId WHERE n.domainId = ? AND n.binaryData IS NOT NULL ORDER BY n.rowid",
        (dom_id,),
    ).fetchall()
    con.close()
    inits, calls = [], []
    for rowid, name, blob in rows:
        body = bytes(blob)[HEADER:]
        (comm,) = struct.unpack_from("<Q", body, 0)
        if name.startswith("ncclCommInit"):
            nranks, rank = struct.unpack_from("<ii", body, 8)
            inits.append({"comm": f"0x{comm:x}", "nranks": nranks, "rank": rank})
        else:
            (size,) = struct.unpack_from("<Q", body, 8)
            peer = (
                struct.unpack_from("<i", body, 16)[0] if name in ("ncclSend", "ncclRecv") else None
            )
            calls.append({"line": rowid, "comm": f"0x{comm:x}", "bytes": size, "peer": peer})
    return inits, calls


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Generator rank -> its export, copied under a name that gives no rank."""
    tmp = tmp_path_factory.mktemp("nsys_groups")
    gen = generate_run(
        tmp,
        "synthetic_moe_ep8.toml",
        iterations=2,
        profile_iterations=(1,),
        formats=("nsys",),
        nccl_version="2.27.3",
    )
    out = tmp / "anonymous"
    out.mkdir()
    found = {}
    for i, f in enumerate(sorted((gen / "nsys").glob("*.sqlite"))):
        rank = int(f.stem.rsplit("rank", 1)[1])
        dst = out / f"job_node_{chr(97 + i)}.sqlite"  # no rank_N in the name
        shutil.copy(f, dst)
        found[rank] = dst
    assert len(found) == 8
    shutil.copy(gen / "manifest.json", out)  # the run's config (layout, classes)
    return found


def test_every_call_has_its_communicator_size_and_comm_rank(exports: dict[int, Path]) -> None:
    parser = nsys.NsysParser()
    for true_rank, path in exports.items():
        inits, calls = _raw(path)
        chunks = list(parser.parse(Source(path), run_id="r"))
        frames = [c.tables["comm_ops"] for c in chunks if "comm_ops" in c.tables]
        ops = pl.from_arrow(conform(pl.concat(frames).with_columns(run_id=pl.lit("r")), "comm_ops"))
        assert isinstance(ops, pl.DataFrame)
        ops = ops.sort("source_line")
        world = max(i["nranks"] for i in inits)
        assert world == 8
        assert {i["rank"] for i in inits if i["nranks"] == world} == {true_rank}
        assert set(ops["rank"]) == {true_rank}
        assert set(ops["rank_source"]) == {"inferred_largest_comm"}
        by_comm = {i["comm"]: i for i in inits}
        assert ops.height == len(calls)
        want = pl.DataFrame(
            {
                "source_line": [c["line"] for c in calls],
                "comm_id": [c["comm"] for c in calls],
                "msg_bytes": [c["bytes"] for c in calls],
                "peer_rank": [c["peer"] for c in calls],
                "group_size": [by_comm[c["comm"]]["nranks"] for c in calls],
                "group_rank": [by_comm[c["comm"]]["rank"] for c in calls],
            },
            schema_overrides={
                "peer_rank": pl.Int32,
                "group_size": pl.Int32,
                "group_rank": pl.Int32,
            },
        )
        got = ops.select(want.columns)
        assert got.equals(want), (path, got, want)
        assert set(ops["group_source"]) == {"logged"}
        comms = pl.concat(
            [c.tables["communicators"] for c in chunks if "communicators" in c.tables]
        )
        assert comms.height == len(inits)
        assert comms["global_rank"].null_count() == comms.height  # a guess is not evidence


@pytest.fixture(scope="module")
def derived(exports: dict[int, Path], tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    tmp = tmp_path_factory.mktemp("nsys_groups_store")
    any_path = next(iter(exports.values()))
    return ingest_and_derive(
        any_path.parent.parent / "gen", tmp / "store", "g", paths=[any_path.parent]
    )


def test_groups_are_the_ranks_that_initialised_the_communicator(
    exports: dict[int, Path], derived: GeneratedRun
) -> None:
    members: dict[str, set[int]] = {}
    sizes: dict[str, int] = {}
    for rank, path in exports.items():
        for i in _raw(path)[0]:
            members.setdefault(i["comm"], set()).add(rank)
            sizes[i["comm"]] = i["nranks"]
    got = derived.query(
        "SELECT comm_id, global_group, group_size, group_known, count(*) AS n "
        "FROM int_comm_ops_classified WHERE run_id = ? AND source_format = 'nsys' GROUP BY ALL"
    )
    assert got["global_group"].null_count() == 0
    assert got["group_known"].all()
    for comm, group, size, _, _ in got.iter_rows():
        assert size == sizes[comm] == len(members[comm])
        want = "world" if size == 8 else ",".join(map(str, sorted(members[comm])))
        assert group == want, comm
    # every instance is matched across all the ranks of its group, timed
    inst = derived.mart("collective_instances")
    assert inst.height > 0
    assert inst.group_by("status").len().rows() == [("complete", inst.height)]
    assert (inst["ranks_seen"] == inst["ranks_expected"]).all()
    assert set(inst["traffic_class"]) >= {"EP", "DP"}
