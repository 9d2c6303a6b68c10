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

import re
import shutil
import sqlite3
import struct
from collections import defaultdict
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
    """(inits, calls) of one export, straight from its NCCL-domain NVTX rows.

    A call's ``group`` is the rowid of the ``ncclGroupEnd`` that brings its thread's group
    depth back to 0 (None outside a group), followed here in (thread, start) order.
    """
    con = sqlite3.connect(path)
    dom = con.execute("SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'NCCL'")
    dom_id = dom.fetchone()[0]
    rows = con.execute(
        "SELECT n.rowid, s.value, n.binaryData, n.globalTid FROM NVTX_EVENTS n JOIN StringIds s "
        "ON s.id = n.textId WHERE n.domainId = ? ORDER BY n.globalTid, n.start, n.rowid",
        (dom_id,),
    ).fetchall()
    con.close()
    inits, calls = [], []
    depth, waiting, tid = 0, [], None
    for rowid, name, blob, gtid in rows:
        if gtid != tid:
            depth, waiting, tid = 0, [], gtid
        if name == "ncclGroupStart":
            depth += 1
            continue
        if name == "ncclGroupEnd":
            depth -= 1
            if depth == 0:
                for c in waiting:
                    c["group"] = rowid
                waiting = []
            continue
        if blob is None:
            continue
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
            call = {
                "line": rowid,
                "name": name,
                "comm": f"0x{comm:x}",
                "bytes": size,
                "peer": peer,
                "group": None,
            }
            calls.append(call)
            if depth > 0:
                waiting.append(call)
    calls.sort(key=lambda c: c["line"])
    return inits, calls


def _logical(calls: list[dict], sizes: dict[str, int]) -> list[dict]:
    """The calls as commscope keeps them: the Send/Recv of one group on one communicator with
    a Send to and a Recv from each of its n members are one all_to_all (line: the group's
    ncclGroupEnd; bytes: the Sends; splits per peer), everything else one call per range."""
    groups: dict[tuple[int, str], list[dict]] = defaultdict(list)
    for c in calls:
        if c["group"] is not None and c["name"] in ("ncclSend", "ncclRecv"):
            groups[(c["group"], c["comm"])].append(c)
    folded: dict[tuple[int, str], dict] = {}
    for (end, comm), members in groups.items():
        n = sizes[comm]
        sends = {c["peer"]: c["bytes"] for c in members if c["name"] == "ncclSend"}
        recvs = {c["peer"]: c["bytes"] for c in members if c["name"] == "ncclRecv"}
        if len(members) == 2 * n and set(sends) == set(recvs) == set(range(n)):
            folded[(end, comm)] = {
                "line": end,
                "op": "all_to_all",
                "comm": comm,
                "bytes": sum(sends.values()),
                "peer": None,
                "split": ",".join(str(sends[p]) for p in range(n)),
                "rsplit": ",".join(str(recvs[p]) for p in range(n)),
            }
    out = list(folded.values())
    for c in calls:
        if (c["group"], c["comm"]) not in folded:
            out.append({**c, "op": c["name"], "split": None, "rsplit": None})
    return sorted(out, key=lambda c: c["line"])


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Generator rank -> its export, copied under a name that gives no rank."""
    tmp = tmp_path_factory.mktemp("nsys_groups")
    gen = generate_run(
        tmp,
        "synthetic_moe_ep8.toml",
        iterations=1,
        profile_iterations=(0,),
        formats=("nccl", "nsys"),
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
        ops = pl.from_arrow(
            conform(
                pl.concat(frames, how="diagonal_relaxed").with_columns(run_id=pl.lit("r")),
                "comm_ops",
            )
        )
        assert isinstance(ops, pl.DataFrame)
        ops = ops.sort("source_line")
        world = max(i["nranks"] for i in inits)
        assert world == 8
        assert {i["rank"] for i in inits if i["nranks"] == world} == {true_rank}
        assert set(ops["rank"]) == {true_rank}
        assert set(ops["rank_source"]) == {"inferred_largest_comm"}
        by_comm = {i["comm"]: i for i in inits}
        logical = _logical(calls, {k: v["nranks"] for k, v in by_comm.items()})
        n_a2a = sum(c["op"] == "all_to_all" for c in logical)
        assert n_a2a > 0 and len(logical) == len(calls) - 15 * n_a2a  # 2 x 8 ranges -> 1
        assert ops.height == len(logical)
        folded = ops.filter(pl.col("op") == "all_to_all")
        assert set(folded["op_source"]) == {"nvtx_group"}
        assert set(folded["raw_op"]) == {"ncclGroupEnd"}
        assert ops.filter(pl.col("op") != "all_to_all")["op_source"].null_count() == (
            ops.height - folded.height
        )
        want = pl.DataFrame(
            {
                "source_line": [c["line"] for c in logical],
                "comm_id": [c["comm"] for c in logical],
                "msg_bytes": [c["bytes"] for c in logical],
                "peer_rank": [c["peer"] for c in logical],
                "group_size": [by_comm[c["comm"]]["nranks"] for c in logical],
                "group_rank": [by_comm[c["comm"]]["rank"] for c in logical],
                "split_bytes": [c["split"] for c in logical],
                "recv_split_bytes": [c["rsplit"] for c in logical],
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


@pytest.fixture(scope="module")
def nccl_twin(exports: dict[int, Path], tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    """The same generated run ingested from its NCCL debug logs only."""
    tmp = tmp_path_factory.mktemp("nsys_groups_nccl")
    gen = next(iter(exports.values())).parent.parent / "gen"
    return ingest_and_derive(gen, tmp / "store", "n", paths=[gen / "nccl", gen / "manifest.json"])


def _key(df: pl.DataFrame) -> pl.DataFrame:
    return df.sort(df.columns)


def test_all_to_all_traffic_and_sizes_equal_the_nccl_twin_and_truth(
    exports: dict[int, Path], derived: GeneratedRun, nccl_twin: GeneratedRun
) -> None:
    """An nsys-only run books the EP all-to-all exactly as its NCCL-log twin (grouped
    Send/Recv lines under one opCount) and as the generator's truth: same calls, sizes, flows."""
    calls = [
        run.query(
            "SELECT rank, op, msg_bytes, count(*) AS n FROM int_calls "
            "WHERE run_id = ? AND traffic_class = 'EP' GROUP BY ALL"
        )
        for run in (derived, nccl_twin)
    ]
    assert set(calls[0]["op"]) == {"all_to_all"}
    assert _key(calls[0]).equals(_key(calls[1]))
    # msg_bytes of each call = its Send ranges' bytes in the raw export (own route)
    raw_sizes: dict[int, list[int]] = {}
    for rank, path in exports.items():
        inits, raw = _raw(path)
        sizes = {i["comm"]: i["nranks"] for i in inits}
        raw_sizes[rank] = sorted(
            c["bytes"] for c in _logical(raw, sizes) if c["op"] == "all_to_all"
        )
    got = derived.query(
        "SELECT rank, list(msg_bytes ORDER BY msg_bytes) AS b FROM int_calls "
        "WHERE run_id = ? AND op = 'all_to_all' GROUP BY rank"
    )
    assert dict(zip(got["rank"], got["b"].to_list(), strict=True)) == raw_sizes
    # one iteration: the NCCL log's (undetected, null) and nsys' step range (0) are the same
    tms = [
        _key(
            pl.read_parquet(run.store.mart_files(run.run_id)["traffic_matrix"])
            .group_by("src_rank", "dst_rank", "traffic_class")
            .agg(pl.col("bytes").sum(), pl.col("local_bytes").sum())
        )
        for run in (derived, nccl_twin)
    ]
    assert tms[0].height > 0
    assert tms[0].equals(tms[1]), (tms[0], tms[1])
    truth = pl.read_parquet(derived.gen / "truth" / "traffic.parquet").filter(pl.col("cls") == "EP")
    ep = tms[0].filter(pl.col("traffic_class") == "EP", pl.col("src_rank") != pl.col("dst_rank"))
    want = dict(zip(zip(truth["src"], truth["dst"], strict=True), truth["bytes"], strict=True))
    have = dict(zip(zip(ep["src_rank"], ep["dst_rank"], strict=True), ep["bytes"], strict=True))
    assert have.keys() == want.keys()
    assert all(abs(have[k] - want[k]) <= 0.5 for k in want)


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    """MoE EP 8 over 2 iterations, NCCL logs of both and nsys exports of the 2nd (NCCL 2.27),
    ingested together: the exports' records pair with the log's calls by iteration (one
    iteration: see ``both_one_iteration``)."""
    return _nccl_and_nsys(tmp_path_factory.mktemp("nsys_groups_both"), 2, (1,))


def _nccl_and_nsys(tmp: Path, iterations: int, profiled: tuple[int, ...]) -> GeneratedRun:
    """MoE EP 8 with NCCL logs of every iteration and nsys exports of ``profiled`` (NCCL
    2.27), generated and ingested together as one run."""
    gen = generate_run(
        tmp,
        "synthetic_moe_ep8.toml",
        iterations=iterations,
        profile_iterations=profiled,
        formats=("nccl", "nsys"),
        nccl_version="2.27.3",
    )
    return ingest_and_derive(gen, tmp / "store", f"b{iterations}", paths=[gen])


def _all_to_all_pairing(run: GeneratedRun) -> tuple[list[tuple], list[tuple]]:
    """How the nsys all_to_all records paired (role, method, count) and what the logical
    all_to_all calls hold (sources, duration source, size conflict, count)."""
    src = run.query(
        "SELECT role, match_method, count(*) AS n FROM int_call_sources WHERE run_id = ? "
        "AND source_format = 'nsys' AND op = 'all_to_all' GROUP BY ALL"
    )
    calls = run.query(
        "SELECT sources, duration_source, size_conflict, count(*) AS n FROM int_calls "
        "WHERE run_id = ? AND op = 'all_to_all' GROUP BY ALL ORDER BY ALL"
    )
    return src.rows(), calls.rows()


def _folded_and_groups(run: GeneratedRun) -> tuple[int, int]:
    """From the raw files: the all_to_alls the nsys exports' grouped ranges make, and the
    NCCL logs' all-to-all groups (the distinct opCounts of their Send lines)."""
    folded = 0
    for path in sorted((run.gen / "nsys").glob("*.sqlite")):
        inits, raw = _raw(path)
        sizes = {i["comm"]: i["nranks"] for i in inits}
        folded += sum(c["op"] == "all_to_all" for c in _logical(raw, sizes))
    groups = 0
    for log in sorted((run.gen / "nccl").glob("*.log")):
        groups += len(set(SEND_LINE.findall(log.read_text())))
    return folded, groups


SEND_LINE = re.compile(r"NCCL INFO Send: opCount (\S+) ")


def test_folded_all_to_all_pairs_with_the_nccl_group_once(both: GeneratedRun) -> None:
    """With the NCCL log counted, each folded nsys all_to_all is a record of the log's grouped
    Send/Recv call (no size conflict, timed by its kernel): one call, counted once."""
    prim = both.query("SELECT DISTINCT source_format FROM int_rank_primary_source WHERE run_id = ?")
    assert prim["source_format"].to_list() == ["nccl_debug"]
    folded, groups = _folded_and_groups(both)
    src, calls = _all_to_all_pairing(both)
    assert src == [("paired", "iteration", folded)]
    assert calls == [
        ("nccl_debug", None, False, groups - folded),
        ("nccl_debug,nsys", "nsys", False, folded),
    ]
    truth = pl.read_parquet(both.gen / "truth" / "traffic.parquet").filter(pl.col("cls") == "EP")
    tm = pl.read_parquet(both.store.mart_files(both.run_id)["traffic_matrix"])
    ep = (
        tm.filter(pl.col("traffic_class") == "EP", pl.col("src_rank") != pl.col("dst_rank"))
        .group_by("src_rank", "dst_rank")
        .agg(pl.col("bytes").sum())
    )
    want = truth.group_by("src", "dst").agg(pl.col("bytes").sum())
    have = dict(zip(zip(ep["src_rank"], ep["dst_rank"], strict=True), ep["bytes"], strict=True))
    exp = dict(zip(zip(want["src"], want["dst"], strict=True), want["bytes"], strict=True))
    assert have.keys() == exp.keys() and all(abs(have[k] - exp[k]) <= 0.5 for k in exp)


@pytest.fixture(scope="module")
def both_one_iteration(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    """MoE EP 8 over ONE iteration, NCCL logs and nsys exports of it (NCCL 2.27), ingested
    together: the NCCL log's period detector takes one grouped all-to-all for the period, so
    its 'iterations' are single calls while the exports' step holds them all."""
    return _nccl_and_nsys(tmp_path_factory.mktemp("nsys_groups_both_one"), 1, (0,))


def test_iteration_numberings_that_disagree_fall_back_to_order(
    both_one_iteration: GeneratedRun,
) -> None:
    """Where the exports' step holds more all-to-alls than the log's detected 'iteration' of
    the same number, pairing by iteration would pair one call per rank; every folded nsys
    all_to_all pairs by order instead, with the log's k-th grouped call (the raw files count)."""
    run = both_one_iteration
    folded, groups = _folded_and_groups(run)
    assert folded == groups > 0  # one iteration, profiled whole: every log call is in a trace
    src, calls = _all_to_all_pairing(run)
    assert src == [("paired", "order", folded)]
    assert calls == [("nccl_debug,nsys", "nsys", False, folded)]
