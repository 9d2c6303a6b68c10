"""Global ranks of NCCL logs without Init lines (issue 19 item 3): each rule, given/expect.

The logs are written here line by line (synthetic, labelled as such); each case states which
process must get which rank and with which ``rank_source``, or none. The real DLcomm sample is
checked against an oracle that reads the raw lines itself (tests/sql/test_rank_inference_real.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from commscope.parsers._io import Source
from commscope.parsers.nccl_debug import NcclDebugParser
from commscope.parsers.schema import conform

PARSER = NcclDebugParser()


def coll(proc: str, dev: int, op: str, n: int, root: int = 0, comm: str = "", seq: int = 0) -> str:
    """One COLL line of process ``host:pid`` on device ``dev`` (comm pointer per process)."""
    comm = comm or "0x" + format(abs(hash(proc)) % 0xFFFFFF, "x")
    return (
        f"{proc}:{proc.split(':')[1]} [{dev}] NCCL INFO {op}: opCount {seq:x} sendbuff 0x10 "
        f"recvbuff 0x20 count 4 datatype 7 op 0 root {root} comm {comm} [nranks={n}] "
        "stream 0x30"
    )


def parse_lines(
    tmp_path: Path, lines: list[str], rank: int | None = None
) -> tuple[pl.DataFrame, list[str]]:
    """comm_ops of a synthetic log (conformed, as stored) and the parser's warnings."""
    f = tmp_path / "nccl.log"
    f.write_text("# synthetic NCCL log, written by the test\n" + "\n".join(lines) + "\n")
    frames, warnings = [], []
    for chunk in PARSER.parse(Source(f), run_id="r", rank=rank):
        if "comm_ops" in chunk.tables:
            frames.append(chunk.tables["comm_ops"])
        warnings += chunk.warnings
    ops = pl.concat(frames).with_columns(run_id=pl.lit("r"))
    df = pl.from_arrow(conform(ops, "comm_ops"))
    assert isinstance(df, pl.DataFrame)
    return df, warnings


def ranks_of(df: pl.DataFrame) -> dict[str, tuple[int | None, str | None]]:
    """host:pid -> the one (rank, rank_source) of all its rows."""
    per = df.select(proc=pl.format("{}:{}", "host", "pid"), rank="rank", how="rank_source").unique()
    assert per["proc"].is_unique().all(), per  # one rank per process, on every row
    return {p: (r, h) for p, r, h in per.iter_rows()}


def test_peers_name_a_rank_and_the_last_process_takes_the_last_rank(tmp_path: Path) -> None:
    # 3 hosts (so devices say nothing): h0 sends to 1 and 2 -> it is 0; h1 receives from 0 and
    # sends to 2 -> it is 1; h2 logs no p2p: the last process left, rank 2.
    lines = [
        coll("h0:10", 0, "Send", 3, root=1),
        coll("h0:10", 0, "Send", 3, root=2),
        coll("h1:11", 0, "Recv", 3, root=0),
        coll("h1:11", 0, "Send", 3, root=2),
        coll("h2:12", 0, "AllReduce", 3),
        coll("h0:10", 0, "AllReduce", 3),
        coll("h1:11", 0, "AllReduce", 3),
    ]
    df, warnings = parse_lines(tmp_path, lines)
    assert ranks_of(df) == {
        "h0:10": (0, "inferred_peers"),
        "h1:11": (1, "inferred_peers"),
        "h2:12": (2, "inferred_peers"),
    }
    assert any("3 of 3 processes inferred" in w for w in warnings)


def test_devices_on_one_host_name_the_ranks(tmp_path: Path) -> None:
    # one host, two processes on devices 1 and 0, each with its 2-rank world and a 1-rank comm
    lines = [
        coll("n:20", 1, "AllReduce", 2, comm="0xa"),
        coll("n:21", 0, "AllReduce", 2, comm="0xb"),
        coll("n:20", 1, "AllReduce", 1, comm="0xc"),
        coll("n:21", 0, "AllReduce", 1, comm="0xd"),
    ]
    df, _ = parse_lines(tmp_path, lines)
    assert ranks_of(df) == {"n:20": (1, "inferred_device"), "n:21": (0, "inferred_device")}


def test_devices_that_contradict_the_peers_are_not_used(tmp_path: Path) -> None:
    # pid 30 on device 0 receives from ranks 0 and 2: it is rank 1, not 0, so device = rank
    # does not hold here and the other two processes stay unknown
    lines = [
        coll("n:30", 0, "Recv", 3, root=0),
        coll("n:30", 0, "Recv", 3, root=2),
        coll("n:31", 1, "AllReduce", 3),
        coll("n:32", 2, "AllReduce", 3),
    ]
    df, _ = parse_lines(tmp_path, lines)
    assert ranks_of(df) == {
        "n:30": (1, "inferred_peers"),
        "n:31": (None, None),
        "n:32": (None, None),
    }


def test_nothing_to_infer_stays_null_with_a_warning(tmp_path: Path) -> None:
    # two hosts, no p2p: the world is known but nothing names who is who
    lines = [coll("a:40", 0, "AllReduce", 2), coll("b:41", 0, "AllReduce", 2)]
    df, warnings = parse_lines(tmp_path, lines)
    assert ranks_of(df) == {"a:40": (None, None), "b:41": (None, None)}
    assert any("neither Send/Recv peers nor devices" in w for w in warnings)


def test_no_world_no_inference(tmp_path: Path) -> None:
    # three processes but 2-rank communicators: not one world, nothing inferred, even with
    # devices 0..1 that would fit
    lines = [
        coll("n:50", 0, "Recv", 2, root=1),
        coll("n:51", 1, "AllReduce", 2),
        coll("n:52", 0, "AllReduce", 2),
    ]
    df, warnings = parse_lines(tmp_path, lines)
    assert df["rank"].null_count() == df.height
    assert df["rank_source"].null_count() == df.height
    assert any("a world needs all of them" in w for w in warnings)


def test_inference_that_contradicts_the_recvs_is_dropped(tmp_path: Path) -> None:
    # h0 sends to 1 and 2 (-> rank 0), h1 receives from 2 and sends to 0 (-> rank 1); but h1
    # logs Recv lines and none from rank 0, to whom h0 sent: contradiction, nothing kept
    lines = [
        coll("h0:60", 0, "Send", 3, root=1),
        coll("h0:60", 0, "Send", 3, root=2),
        coll("h1:61", 0, "Recv", 3, root=2),
        coll("h1:61", 0, "Send", 3, root=0),
        coll("h2:62", 0, "AllReduce", 3),
    ]
    df, warnings = parse_lines(tmp_path, lines)
    assert df["rank"].null_count() == df.height
    assert any("rank inference dropped" in w for w in warnings)


def test_logged_and_option_ranks_are_marked(tmp_path: Path) -> None:
    init = "n:70:70 [0] NCCL INFO comm 0xa rank 1 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE"
    df, _ = parse_lines(tmp_path, [init, coll("n:70", 0, "AllReduce", 2, comm="0xa")])
    assert ranks_of(df) == {"n:70": (1, "logged")}
    # no Init line, one process that is no world of its own: the caller's rank, marked option
    df, _ = parse_lines(tmp_path, [coll("n:71", 0, "AllReduce", 2)], rank=5)
    assert ranks_of(df) == {"n:71": (5, "option")}


def test_a_resumed_parse_infers_from_the_whole_file(tmp_path: Path) -> None:
    # the Send/Recv lines that name rank 0 come after the cut: the resumed parse still names
    # the first part's process (from the state), and the appended rows get the same ranks
    head = [coll("n:80", 0, "AllReduce", 2), coll("n:81", 1, "AllReduce", 2)]
    tail = [coll("n:81", 1, "Send", 2, root=0), coll("n:80", 0, "Recv", 2, root=1)]
    f = tmp_path / "grow.log"
    f.write_text("\n".join(head) + "\n")
    state = None
    for chunk in PARSER.parse(Source(f), run_id="r"):
        state = chunk.state or state
    size = f.stat().st_size
    f.write_text("\n".join(head + tail) + "\n")
    rows = []
    for chunk in PARSER.parse(
        Source(f, start_offset=size, first_line_no=len(head) + 1), run_id="r", resume=state
    ):
        if "comm_ops" in chunk.tables:
            rows.append(chunk.tables["comm_ops"])
    got = pl.concat(rows).select("pid", "rank", "rank_source").sort("pid").rows()
    # rule 2 names both now; alone, the head was inferred from the devices
    assert got == [(80, 0, "inferred_peers"), (81, 1, "inferred_peers")]


@pytest.mark.parametrize("n", [2, 5])
def test_many_ranks_one_host_oracle(tmp_path: Path, n: int) -> None:
    # processes in shuffled pid order on devices 0..n-1; rank 0 receives from everyone:
    # oracle = the device, from the line's own [d] field read back with a regex
    lines = []
    for d in range(n):
        pid = 1000 + (d * 7) % n
        lines.append(coll(f"x:{pid}", d, "AllGather", n))
        if d:
            lines.append(coll(f"x:{pid}", d, "Send", n, root=0))
            lines.append(coll(f"x:{1000}", 0, "Recv", n, root=d))
    df, _ = parse_lines(tmp_path, lines)
    want = {}
    for ln in lines:
        m = re.match(r"x:(\d+):\d+ \[(\d+)\]", ln)
        assert m
        want[f"x:{m[1]}"] = int(m[2])
    assert {p: r for p, (r, _) in ranks_of(df).items()} == want
