"""A generated MoE run (EP 8) in NCCL logs + Kineto + NCCL Inspector: each all-to-all is one
logical call (issue 19).

The generator writes an all-to-all as NCCL does for ``all_to_all_single`` with splits: a group
of a Send to and a Recv from each of the 8 members (itself included) under one opCount, i.e. 16
lines; Kineto records one all_to_all kernel of the whole send buffer; the Inspector records the
exchange per peer (Send/Recv records). Oracle: the simulation's own call counts
(``truth/counts.parquet``: calls per rank, op and size) and the generated NCCL lines read with a
regex (per rank, the bytes of its Send lines).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from generated_runs import GeneratedRun, ingest_and_derive
from polars.testing import assert_frame_equal

from commscope.pipeline.run_config import load_generate_config
from commscope.synthetic import generate, with_overrides

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SEND = re.compile(r"NCCL INFO Send: opCount \S+ .*? count (\d+) datatype (\d+) ")
DTYPE_SIZE = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    tmp = tmp_path_factory.mktemp("a2a")
    cfg, opts = load_generate_config(ROOT / "configs" / "synthetic_moe_ep8.toml")
    opts = with_overrides(
        opts, iterations=2, profile_iterations=(0, 1), formats=("nccl", "kineto", "inspector")
    )
    generate(cfg, opts, tmp / "gen")
    return ingest_and_derive(tmp / "gen", tmp / "store", "a2a")


def test_calls_equal_the_generators(run: GeneratedRun) -> None:
    """int_calls per (rank, op, size) = the simulation's calls: 2,304 all_to_all, not 36,864
    send/recv lines, and nothing counted once per source."""
    counts = pl.read_parquet(run.gen / "truth" / "counts.parquet")
    assert set(counts["op"]) == {"all_to_all", "all_reduce"}
    want = counts.group_by("rank", "op", "msg_bytes").agg(pl.col("calls").sum())
    got = run.query(
        "SELECT rank, op, msg_bytes, count(*) AS calls FROM int_calls WHERE run_id = ? GROUP BY ALL"
    )
    key = ["rank", "op", "msg_bytes"]
    assert_frame_equal(got.sort(key), want.sort(key), check_dtypes=False, check_column_order=False)
    # each all_to_all's size is its Send lines' bytes (raw lines, per rank)
    sent: Counter[int] = Counter()
    for log in sorted((run.gen / "nccl").glob("*.log")):
        rank = int(re.search(r"rank(\d+)", log.name)[1])  # type: ignore[index]
        for m in SEND.finditer(log.read_text()):
            sent[rank] += int(m[1]) * DTYPE_SIZE[int(m[2])]
    a2a = run.query(
        "SELECT rank, sum(msg_bytes)::BIGINT AS b, min(p2p_lines), max(p2p_lines) FROM int_calls "
        "WHERE run_id = ? AND op = 'all_to_all' GROUP BY rank"
    )
    assert {r: (b, lo, hi) for r, b, lo, hi in a2a.rows()} == {
        r: (b, 16, 16) for r, b in sent.items()
    }


def test_every_all_to_all_is_timed_by_its_kernel(run: GeneratedRun) -> None:
    """Every call sized and timed by a kernel, no size conflict (the Inspector's per-peer
    records paired with the group's lines are not compared with the call's size); every Kineto
    all_to_all paired."""
    got = run.query(
        "SELECT op, count(*) AS calls, count(dur_ns) AS timed, "
        "count(*) FILTER (WHERE timing_source = 'kernel') AS kernel, "
        "count(*) FILTER (WHERE size_conflict) AS conflicts FROM int_calls WHERE run_id = ? "
        "GROUP BY op ORDER BY op"
    )
    assert got.rows() == [("all_reduce", 32, 32, 32, 0), ("all_to_all", 2304, 2304, 2304, 0)]
    kin = run.query(
        "SELECT role, count(*) FROM int_call_sources WHERE run_id = ? AND source_format = "
        "'kineto' GROUP BY role"
    )
    assert kin.rows() == [("paired", 2304 + 32)]
    lines = run.query(
        "SELECT count(*) FILTER (WHERE line_match), count(*) FILTER (WHERE line_match AND "
        "op NOT IN ('send', 'recv')) FROM int_call_sources WHERE run_id = ? AND "
        "source_format = 'nccl_inspector'"
    ).row(0)
    assert lines[0] > 0 and lines[1] == 0


P2P_LINE = re.compile(
    r"^(\S+):(\d+):\d+ \[\d+\] NCCL INFO (Send|Recv): opCount (\w+) .*? count (\d+) "
    r"datatype (\d+) op \d+ root (\d+) comm (0x[0-9a-f]+) "
)


def _inspector_oracle(gen: Path) -> dict[tuple[int, str, int], int]:
    """(rank, Inspector file name, record line) -> the logical call's first NCCL line: each
    per-peer record is the k-th Send/Recv line of the same process, op, peer and size (the
    Inspector drops records under 8192 bytes, so its own counter cannot name the line)."""
    lines: dict[tuple[str, int], dict[tuple[str, int, int], list[int]]] = {}
    rank_of: dict[tuple[str, int], int] = {}
    for path in sorted((gen / "nccl").glob("*.log")):
        heads: dict[tuple[str, str], int] = {}
        for no, line in enumerate(path.read_text().splitlines(), start=1):
            if "Init COMPLETE" in line and "ncclCommInitRank" in line:
                m = re.match(r"^(\S+):(\d+):\d+ .* rank (\d+) nranks (\d+) ", line)
                assert m
                rank_of.setdefault((m[1], int(m[2])), int(m[3]))
            m = P2P_LINE.match(line)
            if m is None:
                continue
            head = heads.setdefault((m[8], m[4]), no)  # first line of (comm, opCount)
            nbytes = int(m[5]) * DTYPE_SIZE[int(m[6])]
            by_key = lines.setdefault((m[1], int(m[2])), {})
            by_key.setdefault((m[3], int(m[7]), nbytes), []).append(head)
    want: dict[tuple[int, str, int], int] = {}
    for path in sorted((gen / "inspector").glob("*.log")):
        seen: dict[tuple[str, int, int], list[tuple[int, int]]] = {}
        proc = None
        for no, text in enumerate(path.read_text().splitlines(), start=1):
            rec = json.loads(text)
            proc = (rec["metadata"]["hostname"], int(rec["metadata"]["pid"]))
            p = rec.get("p2p_perf")
            if p:
                key = (p["p2p"], int(p["p2p_peer"]), int(p["p2p_msg_size_bytes"]))
                seen.setdefault(key, []).append((int(p["p2p_sn"]), no))
        assert proc is not None
        for key, recs in seen.items():
            heads_of = lines[proc][key]
            for k, (_, no) in enumerate(sorted(recs)):
                want[(rank_of[proc], path.name, no)] = heads_of[k]
    return want


def test_every_inspector_per_peer_record_pairs_with_its_line(run: GeneratedRun) -> None:
    """Issue 19: each Inspector Send/Recv record of an all-to-all pairs with the NCCL line of
    the same process, op, peer and size at the same place (peer_order), i.e. with the group's
    logical call; before, 2,230 of 36,408 paired and the rest failed on size."""
    want = _inspector_oracle(run.gen)
    got = run.query(
        "SELECT rank, source_file, source_line, role, match_method, anchor_line, line_match "
        "FROM int_call_sources WHERE run_id = ? AND source_format = 'nccl_inspector' "
        "AND op IN ('send', 'recv')"
    )
    assert got.height == len(want) == 36_408
    assert set(got["role"]) == {"paired"} and set(got["match_method"]) == {"peer_order"}
    assert got["line_match"].all()
    pairs = {(r, Path(f).name, s): a for r, f, s, _, _, a, _ in got.iter_rows()}
    assert pairs == want
