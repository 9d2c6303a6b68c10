"""Communicator incarnations indexed: attribution in O(log n), same answer as a full scan.

Issue 21, item 1. Two kinds of test, neither timed (timings are in ``bench/ingest_scale.py``):

* a differential test: random registries (reused comm pointers, Init START/COMPLETE/Destroy in
  any order, several threads, ranks and devices) where :meth:`_Registry.attribute` must give
  what the rule gives when every incarnation of the process is scanned (``_scan`` below, the
  rule as the module docstring states it, written out again here);
* a scale test: a generated log of 1,000 ranks (one process each) whose lines are interleaved
  in one file, 10 incarnations per process (10,000 in all; the sub-communicator pointers are
  reused after each destroy), and one process with 10,000 incarnations. Every topology and COLL
  row must land on the incarnation the generator opened, and the index must answer each
  topology line in a number of tree steps bounded by the logarithm of the incarnations: a
  structural measure of the cost, not a clock.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from commscope.parsers import nccl_debug as nd
from commscope.parsers._io import Source
from commscope.parsers.nccl_debug import NcclDebugParser
from commscope.parsers.registry import LineCounts

# --------------------------------------------------------------------------------------------
# differential: index vs full scan
# --------------------------------------------------------------------------------------------


def _live(i: Any, line_no: int) -> bool:
    return i.end_line is None or i.end_line >= line_no


def _scan(reg: Any, host: str, pid: int, tid: int, line_no: int, rank: Any, dev: Any) -> Any:
    """The attribution rule over every incarnation of the process (the pre-index code)."""
    cands = [i for i in reg.incs if (i.host, i.pid) == (host, pid) and _live(i, line_no)]
    if rank is not None:
        cands = [i for i in cands if i.rank == rank]
    if dev is not None:
        cands = [i for i in cands if nd._dev_matches(i, dev)]
    if not cands:
        return None
    on_tid = [i for i in cands if tid in i.init_tids]
    if on_tid:
        started = [
            i
            for i in on_tid
            if i.has_start and i.first_init_line is not None and i.first_init_line <= line_no
        ]
        if started:
            return max(started, key=lambda i: i.first_init_line or 0)
        pending = [i for i in on_tid if i.complete_line is not None and i.complete_line >= line_no]
        if pending:
            return min(pending, key=lambda i: i.complete_line or 0)
        cands = on_tid
    if len(cands) == 1:
        return cands[0]
    before = [i for i in cands if i.source_line <= line_no]
    if before:
        return max(before, key=lambda i: i.source_line)
    return min(cands, key=lambda i: i.source_line)


def _set_events(reg: Any, events: list[Any]) -> None:
    """Give a registry its lifecycle events as pass 1 keeps them (event rows), as if scanned."""
    if events:
        reg.event_frames = [nd.communicators._events_frame(events)]
        reg.n_events = len(events)


def _random_registry(rnd: random.Random, n_events: int) -> Any:
    reg = nd._Registry()
    events: list[Any] = []
    line = 0
    for _ in range(n_events):
        line += rnd.randint(1, 3)
        kind = rnd.choice(["START", "COMPLETE", "COMPLETE", "END", "START"])
        rank = rnd.randint(0, 2)
        fields = {
            "comm": rnd.choice(["0xa0", "0xb0", "0xc0", "0xd0"]),
            "rank": str(rank),
            "nranks": rnd.choice(["4", "4", "2"]),
            "cudadev": str(rank),
            "busid": rnd.choice(["1000", "2000", "3000"]),
        }
        if rnd.random() < 0.3:
            fields["nvmldev"] = str(rnd.randint(0, 3))
        if kind != "END" and rnd.random() < 0.3:
            fields["parent"] = rnd.choice(["0xa0", "0xb0"])
            fields["color"] = str(rnd.randint(0, 1))
            fields["key"] = "0"
        events.append(
            nd._Event(line, "h", rnd.choice([1, 2]), rnd.choice([7, 8, 9]), kind, fields, False)
        )
    _set_events(reg, events)
    reg.finalize()
    return reg, line


@pytest.mark.parametrize("fast", [True, False], ids=["start_lines_first", "index_only"])
@pytest.mark.parametrize("seed", range(40))
def test_index_gives_the_full_scan_answer(
    seed: int, fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """:meth:`_Registry.attribute` answers as the scan does: through the index alone, and
    with its START-line shortcut for lines on an init thread (whose memo intervals must hold
    for the later queries too: queries in random order, many per key)."""
    monkeypatch.setattr(nd.communicators, "_FAST_ATTRIBUTION", fast)
    rnd = random.Random(seed)
    reg, last = _random_registry(rnd, rnd.choice([5, 30, 200]))
    for _ in range(300):
        q = (
            "h",
            rnd.choice([1, 2]),
            rnd.choice([7, 8, 9]),
            rnd.randint(0, last + 3),
            rnd.choice([None, 0, 1, 2]),
            rnd.choice([None, None, "0", "1", "1000", "02000", "ff"]),
        )
        assert reg.attribute(*q) is _scan(reg, *q), q


def test_parents_and_worlds_as_a_scan_would_find_them() -> None:
    """Split children find the latest live incarnation of their parent pointer (not themselves);
    in a several-GPU process a sub-communicator takes its world through that chain."""
    for seed in range(30):
        reg, _ = _random_registry(random.Random(1000 + seed), 120)
        for inc in reg.incs:
            if inc.parent is None:
                assert inc.parent_inc is None
                continue
            cands = [
                p
                for p in reg.by_proc[(inc.host, inc.pid)]
                if p.comm == inc.parent
                and p is not inc
                and p.window_start <= inc.window_start
                and _live(p, inc.window_start)
            ]
            want = max(cands, key=lambda p: p.window_start) if cands else None
            assert inc.parent_inc is want
        for incs in reg.by_proc.values():
            worlds = [i for i in incs if i.nranks == reg.world_size and i.identity_world]
            if len({w.rank for w in worlds}) < 2:
                continue  # one global rank per process: no per-incarnation world
            for inc in incs:
                if inc not in worlds:
                    world = _world_scan(inc, incs, worlds)
                    assert inc.global_rank == (world.rank if world else None)


def _world_scan(inc: Any, incs: list[Any], worlds: list[Any]) -> Any:
    """The world of a sub-communicator of a several-GPU process, by scanning (pre-index code)."""
    cur = inc
    for _ in range(len(incs)):
        if cur is None or cur.parent is None:
            break
        parents = [i for i in incs if i.comm == cur.parent and i.window_start <= cur.window_start]
        cur = max(parents, key=lambda i: i.window_start) if parents else None
        if cur is not None and any(cur is w for w in worlds):
            return cur
    same_dev = [
        w
        for w in worlds
        if (inc.bus_id is not None and w.bus_id == inc.bus_id)
        or (inc.bus_id is None and inc.cuda_dev is not None and w.cuda_dev == inc.cuda_dev)
    ]
    return same_dev[0] if len({w.rank for w in same_dev}) == 1 else None


# --------------------------------------------------------------------------------------------
# scale: 10,000 incarnations, 1,000 ranks interleaved in one file
# --------------------------------------------------------------------------------------------

RANKS = 1000
PER_PROCESS = 10
SUB = 8  # sub-communicator size


def _scale_log(path: Path) -> dict[tuple[int, int], str]:
    """Write the interleaved log; return {(rank, topology line_no): comm pointer expected}."""
    expected: dict[tuple[int, int], str] = {}
    lines: list[str] = []

    def emit(r: int, text: str, dev: int) -> None:
        lines.append(f"node{r // 8}:{10_000 + r}:{10_000 + r} [{dev}] NCCL INFO {text}\n")

    for k in range(PER_PROCESS):
        world = k == 0
        for step in range(6):
            for r in range(RANKS):
                dev = r % 8
                comm = f"0x7f{r:04x}00" if world else f"0x5{k % 2}{r:04x}00"
                nranks, me = (RANKS, r) if world else (SUB, r % SUB)
                head = f"comm {comm} rank {me} nranks {nranks} cudaDev {dev} busId {dev + 1}000"
                if step == 0:
                    emit(
                        r,
                        f"ncclCommInitRankConfig {head} commId 0x{k:x}{r // SUB:x} - Init START",
                        dev,
                    )
                elif step == 1:
                    peer = (me + 1) % nranks
                    emit(
                        r,
                        f"Channel {k:02d}/0 : {me}[{dev}] -> {peer}[{(dev + 1) % 8}] via P2P/IPC",
                        dev,
                    )
                    expected[(r, len(lines))] = comm
                elif step == 2:
                    emit(
                        r, f"Ring {k:02d} : {(me - 1) % nranks} -> {me} -> {(me + 1) % nranks}", dev
                    )
                    expected[(r, len(lines))] = comm
                elif step == 3:
                    emit(
                        r,
                        f"ncclCommInitRankConfig {head} commId 0x{k:x}{r // SUB:x} - Init COMPLETE",
                        dev,
                    )
                elif step == 4:
                    emit(
                        r,
                        f"AllReduce: opCount {k:x} sendbuff 0x1 recvbuff 0x2 count 1024 datatype 7 "
                        f"op 0 root 0 comm {comm} [nranks={nranks}] stream 0x9",
                        dev,
                    )
                elif step == 5 and not world:
                    emit(r, f"{head} - Destroy COMPLETE", dev)
    path.write_text("".join(lines))
    return expected


@pytest.fixture(scope="module")
def scale_parse(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("scale") / "interleaved.log"
    expected = _scale_log(path)
    indexes: list[Any] = []
    init = nd._IncIndex.__init__

    def keep(self: Any, incs: list[Any]) -> None:
        init(self, incs)
        indexes.append(self)

    mp = pytest.MonkeyPatch()
    mp.setattr(nd._IncIndex, "__init__", keep)
    mp.setattr(nd.communicators, "_FAST_ATTRIBUTION", False)  # every line through the index
    try:
        chunks = list(NcclDebugParser().parse(Source(path), run_id="r"))
    finally:
        mp.undo()
    fast = [c.tables.get("topology") for c in NcclDebugParser().parse(Source(path), run_id="r")]
    tables: dict[str, list[pl.DataFrame]] = {}
    counts = LineCounts()
    for c in chunks:
        counts += c.counts
        for name, df in c.tables.items():
            tables.setdefault(name, []).append(df)
    return {
        "expected": expected,
        "tables": {k: pl.concat(v) for k, v in tables.items()},
        "counts": counts,
        "indexes": indexes,
        "fast_topology": pl.concat([t for t in fast if t is not None]),
    }


def test_scale_start_line_shortcut_equals_the_index(scale_parse: dict[str, Any]) -> None:
    """:meth:`_Registry.attribute` with its START-line shortcut gives the index's topology
    rows."""
    assert scale_parse["fast_topology"].equals(scale_parse["tables"]["topology"])


def test_scale_every_row_on_its_incarnation(scale_parse: dict[str, Any]) -> None:
    t = scale_parse["tables"]
    counts = scale_parse["counts"]
    assert counts.balanced and counts.rejected == 0
    comms = t["communicators"]
    assert comms.height == RANKS * PER_PROCESS
    topo = t["topology"].unique("source_line")
    got = dict(zip(topo["source_line"].to_list(), topo["comm_id"].to_list(), strict=True))
    want = {line: comm for (_, line), comm in scale_parse["expected"].items()}
    assert got == want
    ops = t["comm_ops"]
    assert ops.height == RANKS * PER_PROCESS
    # global rank = the world comm's rank (pid - 10,000); group rank = rank in the comm
    assert (ops["rank"] == ops["pid"] - 10_000).all()
    sub = ops.filter(pl.col("group_size") == SUB)
    assert (sub["group_rank"] == sub["rank"] % SUB).all()
    assert ops["group_rank"].null_count() == 0


def test_scale_attribution_steps_are_logarithmic(scale_parse: dict[str, Any]) -> None:
    """Each topology line costs O(log n) tree steps; the groups hold O(n) incarnations."""
    (index,) = scale_parse["indexes"]
    n_lines = len(scale_parse["expected"])
    # per line at most 3 tree queries (started, before, and none else reaches a tree), each
    # at most 2 * (depth + 1) nodes: up the tree and down again
    depth = math.ceil(math.log2(PER_PROCESS)) + 1
    assert index.steps <= n_lines * 3 * 2 * depth
    held = sum(len(g.ends) for g in index.groups.values())
    assert held <= 4 * RANKS * PER_PROCESS  # (tid or any) x (rank or any), no device filter here


def test_one_process_with_ten_thousand_incarnations(tmp_path: Path) -> None:
    """The per-process index: 10,000 comms of one process, each initialised on its own thread
    and destroyed, plus one world comm alive throughout; each line finds its own comm."""
    n = 10_000
    lines = ["h:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 4 cudaDev 0 busId 1000 - Init START\n"]
    for i in range(n):
        c = f"0x{i % 3 + 16:x}"  # three pointers, reused
        lines += [
            f"h:1:{i + 2} [0] NCCL INFO comm {c} rank 0 nranks 2 cudaDev 0 busId 1000 - Init START\n",
            f"h:1:{i + 2} [0] NCCL INFO Channel 00/0 : 0[0] -> {i + 1}[1] via P2P/IPC\n",
            f"h:1:{i + 2} [0] NCCL INFO comm {c} rank 0 nranks 2 cudaDev 0 busId 1000 - Destroy COMPLETE\n",
        ]
    path = tmp_path / "one.log"
    path.write_text("".join(lines))
    indexes: list[Any] = []
    init = nd._IncIndex.__init__

    def keep(self: Any, incs: list[Any]) -> None:
        init(self, incs)
        indexes.append(self)

    mp = pytest.MonkeyPatch()
    mp.setattr(nd._IncIndex, "__init__", keep)
    mp.setattr(nd.communicators, "_FAST_ATTRIBUTION", False)  # every line through the index
    try:
        chunks = list(NcclDebugParser().parse(Source(path), run_id="r"))
    finally:
        mp.undo()
    topo = pl.concat([c.tables["topology"] for c in chunks if "topology" in c.tables])
    fast = [c.tables.get("topology") for c in NcclDebugParser().parse(Source(path), run_id="r")]
    assert pl.concat([t for t in fast if t is not None]).equals(topo)
    assert topo["comm_id"].to_list() == [f"0x{i % 3 + 16:x}" for i in range(n)]
    (index,) = indexes
    depth = math.ceil(math.log2(n + 1)) + 1
    assert index.steps <= n * 3 * 2 * depth


# --------------------------------------------------------------------------------------------
# the topology shortcut: repeated messages parsed once, repeated rows never built
# --------------------------------------------------------------------------------------------


def _tables_of(path: Path) -> dict[str, pl.DataFrame]:
    parts: dict[str, list[pl.DataFrame]] = {}
    for c in NcclDebugParser().parse(Source(path), run_id="r"):
        for name, df in c.tables.items():
            parts.setdefault(name, []).append(df)
    return {k: pl.concat(v) for k, v in parts.items()}


def test_topology_shortcut_changes_no_row(tmp_path: Path, shared_samples: Path) -> None:
    """A real log repeated (its communicators re-created on the same pointers, the same topology
    lines again) gives the same tables with the shortcut as with it restarting at every entry."""
    from commscope.parsers.nccl_debug import frames

    src = shared_samples / "nccl_debug" / "nccltests_2.27.7_1proc_2gpu_allreduce.log"
    if not src.exists():
        pytest.skip("../shared samples not present")
    path = tmp_path / "x5.log"
    path.write_bytes(src.read_bytes() * 5)
    fast = _tables_of(path)
    mp = pytest.MonkeyPatch()
    mp.setattr(frames, "_TOPO_MEMO", 1)
    try:
        slow = _tables_of(path)
    finally:
        mp.undo()
    assert fast.keys() == slow.keys()
    for name in fast:
        assert fast[name].equals(slow[name]), name
    assert fast["topology"].height > 0
