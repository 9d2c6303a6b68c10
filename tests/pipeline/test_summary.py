"""``commscope summary`` counts logical calls: each call once, from its rank's counted source.

A rank logged by several tools (NCCL debug, Kineto, DeepSpeed) has each call once per tool in
``comm_ops``; the summary's traffic totals must equal one tool's totals, and the per-source
counts appear only under their own label. Two routes: hand-made rows on an in-memory catalog
(fast), and a generated MoE run in three formats whose totals are counted from the raw NCCL
logs with a regex (slow).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from commscope.pipeline.commands.summary import render
from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.store import Store
from commscope.pipeline.summary import (
    LOGICAL_CALLS_NOTE,
    OPS_COMPUTED,
    OPS_FROM_DERIVE,
    PER_SOURCE_NOTE,
    summarize,
)
from tests.sql.conftest import calls_catalog

ROOT = Path(__file__).resolve().parents[2]


def _calls(fmt: str, rank: int, timed: bool) -> list[dict[str, object]]:
    """Rank ``rank``'s 3 all_reduce of 100 B and one send of 50 B, as ``fmt`` logs them."""
    rows: list[dict[str, object]] = []
    for i, (op, size) in enumerate([("all_reduce", 100)] * 3 + [("send", 50)]):
        rows.append(
            {
                "run_id": "r",
                "rank": rank,
                "source_format": fmt,
                "source_file": f"{fmt}_{rank}",
                "source_line": i + 1,
                "op": op,
                "msg_bytes": size,
                "peer_rank": 1 - rank if op == "send" else None,
                "ts_ns": 1000 * i,
                "dur_ns": 10 if timed else None,
            }
        )
    return rows


def test_logical_calls_count_each_call_once_across_three_sources() -> None:
    one = _calls("nccl_debug", 0, False) + _calls("nccl_debug", 1, False)
    rows = one + _calls("kineto", 0, True) + _calls("kineto", 1, True)
    rows += _calls("deepspeed_comms", 0, True)
    con = calls_catalog(rows)
    try:
        s = summarize(None, "r", con)  # type: ignore[arg-type]  # con given: no store needed
    finally:
        con.close()
    # the oracle: the one-source rows, summed here
    want_calls = Counter(str(r["op"]) for r in one)
    want_bytes: Counter[str] = Counter()
    for r in one:
        want_bytes[str(r["op"])] += int(r["msg_bytes"])  # type: ignore[call-overload]
    got = s.ops.group_by("op").agg(pl.col("calls").sum(), pl.col("bytes").sum())
    assert dict(zip(got["op"], got["calls"], strict=True)) == dict(want_calls)
    assert dict(zip(got["op"], got["bytes"], strict=True)) == dict(want_bytes)
    # per-source rows stay, under their own label, one per (source, op)
    by = {(f, o): c for f, o, c in s.ops_by_source.select("source_format", "op", "calls").rows()}
    assert by == {
        ("deepspeed_comms", "all_reduce"): 3,
        ("deepspeed_comms", "send"): 1,
        ("kineto", "all_reduce"): 6,
        ("kineto", "send"): 2,
        ("nccl_debug", "all_reduce"): 6,
        ("nccl_debug", "send"): 2,
    }
    text = render(s)
    assert LOGICAL_CALLS_NOTE in text and PER_SOURCE_NOTE in text
    assert text.index(LOGICAL_CALLS_NOTE) < text.index(PER_SOURCE_NOTE)


NCCL_CALL = re.compile(
    r"NCCL INFO (AllReduce|Send|Recv|AllGather|ReduceScatter|Broadcast|AllToAll): opCount (\S+) "
    r".*? count (\d+) datatype (\d+) op \d+ root (\d+) comm (\S+) \[nranks=(\d+)\]"
)
OPS = {
    "AllReduce": "all_reduce",
    "Send": "send",
    "Recv": "recv",
    "AllGather": "all_gather",
    "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast",
    "AllToAll": "all_to_all",
}
OPS_P2P = ("send", "recv")
DTYPE_SIZE = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 1, 11: 1}


@pytest.mark.slow
def test_generated_run_in_three_formats_sums_like_the_nccl_logs(tmp_path: Path) -> None:
    """MoE EP 8, 2 iterations, NCCL + Kineto + DeepSpeed (rank 0): totals = the NCCL logs'."""
    from commscope.pipeline.run_config import load_generate_config
    from commscope.synthetic import generate, with_overrides

    run, opts = load_generate_config(ROOT / "configs" / "synthetic_moe_ep8.toml")
    opts = with_overrides(
        opts, iterations=2, profile_iterations=(0, 1), formats=("nccl", "kineto", "deepspeed")
    )
    gen = tmp_path / "gen"
    generate(run, opts, gen)
    store = Store.open(tmp_path / "store")
    ingest_paths(store, [gen], run_id="moe")
    calls: Counter[str] = Counter()
    nbytes: Counter[str] = Counter()
    for log in sorted((gen / "nccl").glob("*.log")):
        # Send/Recv lines of one (comm, opCount) with a Send to and a Recv from every member are
        # one all_to_all (NCCL's grouped p2p of all_to_all_single) of its Send lines' bytes
        groups: dict[tuple[str, str], list[tuple[str, int, int, int]]] = {}
        for m in NCCL_CALL.finditer(log.read_text()):
            op, size = OPS[m.group(1)], int(m.group(3)) * DTYPE_SIZE[int(m.group(4))]
            if op in ("send", "recv"):
                line = (op, int(m.group(5)), int(m.group(7)), size)
                groups.setdefault((m.group(6), m.group(2)), []).append(line)
                continue
            calls[op] += 1
            nbytes[op] += size
        for lines in groups.values():
            n = lines[0][2]
            if all(sorted(r for o, r, _, _ in lines if o == x) == list(range(n)) for x in OPS_P2P):
                calls["all_to_all"] += 1
                nbytes["all_to_all"] += sum(b for o, _, _, b in lines if o == "send")
                continue
            for op, _, _, size in lines:
                calls[op] += 1
                nbytes[op] += size
    assert calls["all_reduce"] > 0 and calls["all_to_all"] > 0  # the EP exchanges, as one call each
    s = summarize(store, "moe")
    assert set(s.ops_by_source["source_format"]) == {"nccl_debug", "kineto", "deepspeed_comms"}
    got = s.ops.group_by("op").agg(pl.col("calls").sum(), pl.col("bytes").sum())
    assert dict(zip(got["op"], got["calls"], strict=True)) == dict(calls)
    assert dict(zip(got["op"], got["bytes"], strict=True)) == dict(nbytes)
    # every per-source total is one tool's view; their sum over sources would overcount
    per_source = s.ops_by_source.group_by("op").agg(pl.col("calls").sum())
    assert (
        dict(zip(per_source["op"], per_source["calls"], strict=True))["all_reduce"]
        > calls["all_reduce"]
    )


def test_underived_run_is_summarised_from_its_own_rows_and_agrees_with_derive(
    tmp_path: Path,
) -> None:
    """A run with no derive yet: its logical calls are computed for the run alone, never
    through the catalog's live ``int_calls`` view (which re-reads the store's files at every
    reference of the chain: on this 4-rank sample 50 s, and past 128 free file handles "Too
    many open files"), and they equal what ``call_totals`` holds once derived (the oracle)."""
    import resource

    from commscope.pipeline.derive import derive_run

    store = Store.open(tmp_path / "store")
    ingest_paths(store, [ROOT / "sample_traces" / "gpu_nccl_pp2ep2_1gpu"], run_id="r")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    budget = sum(1 for _ in Path("/proc/self/fd").iterdir()) + 128
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(budget, soft), hard))
    try:
        live = summarize(store, "r")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    derive_run(store, "r")
    derived = summarize(store, "r")
    assert live.ops.height > 0 and {"EP", "PP", "DP"} <= set(live.ops["traffic_class"])
    assert live.ops.to_dicts() == derived.ops.to_dicts()
    assert (live.ops_from, derived.ops_from) == (OPS_COMPUTED, OPS_FROM_DERIVE)
    assert OPS_COMPUTED in render(live) and OPS_FROM_DERIVE in render(derived)
    # a file ingested after the derive: the stored totals are named stale, not passed off
    ingest_paths(store, [ROOT / "sample_traces" / "gpu_nccl_tp2_dp2_1gpu" / "nccl"], run_id="r")
    assert "STALE: derived from" in summarize(store, "r").ops_from
