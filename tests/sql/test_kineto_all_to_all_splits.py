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


def _recv_oracle() -> dict[tuple[str, int], str]:
    """(file name, event index) -> the receive bytes per member, from ``Out split size`` x
    ``Out msg nelems`` / sum x dtype size, for every all-to-all with a non-empty list."""
    out: dict[tuple[str, int], str] = {}
    for f in sorted((RUN / "kineto").glob("rank*.pt.trace.json.gz")):
        doc = json.loads(gzip.decompress(f.read_bytes()))
        for idx, ev in enumerate(doc["traceEvents"]):
            a = ev.get("args") or {}
            if ev.get("name") != "record_param_comms" or a.get("Collective name") not in A2A:
                continue
            split = json.loads(a["Out split size"])
            if split:
                row = a["Out msg nelems"] // sum(split) * DTYPE_BYTES[a["dtype"]]
                out[(f.name, idx)] = ",".join(str(s * row) for s in split)
    return out


def test_receive_splits_are_stored_per_member(run: GeneratedRun) -> None:
    """``Out split size`` is stored as recv_split_bytes, exactly as the JSON oracle reads it."""
    want = _recv_oracle()
    got = run.query(
        "SELECT source_file, source_line, recv_split_bytes FROM stg_store__comm_ops "
        "WHERE run_id = ? AND op = 'all_to_all' AND recv_split_bytes IS NOT NULL"
    )
    # per file, in event order (source_line follows the file's event order)
    have: dict[str, list[str]] = defaultdict(list)
    for f, _line, v in got.sort("source_file", "source_line").iter_rows():
        have[Path(f).name].append(v)
    by_file: dict[str, list[str]] = defaultdict(list)
    for (f, _idx), v in sorted(want.items()):
        by_file[f].append(v)
    assert len(want) > 0
    assert dict(have) == dict(by_file)


def test_what_each_rank_received_is_what_the_matrix_booked_to_it(run: GeneratedRun) -> None:
    """The receive side corroborates the send side: the bytes rank d's traces say it received
    from member s (its recv_split_bytes) equal the matrix's s -> d bytes (booked from s's sends)."""
    got = run.query(
        "SELECT rank, comm_id, recv_split_bytes FROM stg_store__comm_ops WHERE run_id = ? "
        "AND op = 'all_to_all' AND recv_split_bytes IS NOT NULL"
    )
    ranks_of: dict[str, list[int]] = {}
    for f in sorted((RUN / "kineto").glob("rank*.pt.trace.json.gz")):
        doc = json.loads(gzip.decompress(f.read_bytes()))
        for ev in doc["traceEvents"]:
            a = ev.get("args") or {}
            if ev.get("name") == "record_param_comms" and a.get("Collective name") in A2A:
                ranks_of[str(a.get("Process Group Name"))] = json.loads(a["Process Group Ranks"])
    received: dict[tuple[int, int], int] = defaultdict(int)
    for dst, comm, parts in got.iter_rows():
        for src, b in zip(ranks_of[comm], map(int, parts.split(",")), strict=True):
            if src != dst:
                received[(src, dst)] += b
    flows, _, _, _ = _oracle()
    uneven_sent: dict[tuple[int, int], int] = defaultdict(int)
    tm = run.mart("traffic_matrix").filter(pl.col("traffic_class") == "EP")
    booked = {
        (s, d): b
        for s, d, b in tm.group_by("src_rank", "dst_rank").agg(pl.col("bytes").sum()).iter_rows()
        if s != d and b > 0
    }
    assert received and set(received) == set(booked)
    # the matrix also holds the even exchanges (no split lists): only the uneven part compares
    even = {k: booked[k] - received[k] for k in booked}
    assert all(v >= 0 for v in even.values()), even
    for k in received:
        uneven_sent[k] = booked[k] - even[k]
    assert uneven_sent == received and booked == flows


@pytest.fixture(scope="module")
def with_nccl(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    """The same run with its NCCL logs too: NCCL is every rank's counted source."""
    store = tmp_path_factory.mktemp("kineto_splits_nccl") / "store"
    return ingest_and_derive(
        RUN, store, "both", paths=[RUN / "nccl", RUN / "kineto", RUN / "manifest.json"]
    )


def test_counted_nccl_log_books_what_kineto_saw(with_nccl: GeneratedRun) -> None:
    """With the NCCL log counted (it covers more steps than the profiled window), every logical
    all-to-all that Kineto also recorded is booked per peer from the log's grouped Send lines
    (split_source nccl_debug) or, for the even AlltoAll lines, as msg_bytes / n: over those
    calls the off-rank bytes per (src, dst) and the local bytes equal the Kineto JSON oracle."""
    flows, local, _, _ = _oracle()
    prim = with_nccl.query(
        "SELECT DISTINCT source_format FROM int_rank_primary_source WHERE run_id = ?"
    )
    assert prim["source_format"].to_list() == ["nccl_debug"]
    lines = with_nccl.query(
        "SELECT l.rank, l.op, l.peer_rank, l.msg_bytes, l.split_source, c.global_group, "
        "c.group_size FROM int_call_lines AS l JOIN int_calls AS c ON c.run_id = l.run_id "
        "AND c.rank = l.rank AND c.source_file = l.source_file AND c.source_line = l.call_line "
        "WHERE l.run_id = ? AND l.call_op = 'all_to_all' AND c.sources LIKE '%kineto%'"
    )
    assert set(lines["split_source"].drop_nulls()) == {"nccl_debug"}
    got: dict[tuple[int, int], int] = defaultdict(int)
    got_local: dict[int, int] = defaultdict(int)
    for rank, op, peer, nbytes, _src, group, n in lines.iter_rows():
        members = [int(m) for m in group.split(",")]
        if op == "all_to_all":  # an even exchange: msg_bytes / n to each member
            parts = [(m, nbytes // n) for m in members]
        elif op == "send":
            parts = [(members[peer], nbytes)]
        else:
            continue
        for dst, b in parts:
            if dst == rank:
                got_local[rank] += b
            else:
                got[(rank, dst)] += b
    assert dict(got) == flows
    assert dict(got_local) == local
