"""Pass 1 of the one-pass NCCL parse on pass 2's split, and the plain lifecycle messages cut
from their tokens (issue 21, item 1): both must read exactly what the regex path reads.

* the token cut (``_plain_lifecycle_rows``) against the captures (``_captured_lifecycle_rows``)
  on random Init/Destroy messages, every one the capture-free pattern accepts;
* a log whose glued lifecycle line is repaired differently by pass 2 (which knows the host
  of a COLL line) and by pass 1 (lifecycle hosts only): the one-pass parse, which reads pass 1
  from pass 2's split, gives the two-pass parse's chunks without handing over to it.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from commscope.parsers._io import Source
from commscope.parsers.nccl_debug import NcclDebugParser, communicators
from commscope.parsers.nccl_debug.lines import _PLAIN_LIFECYCLE


def _message(rnd: random.Random) -> str:
    fn = rnd.choice(["", "ncclCommInitRank ", "ncclCommInitRankConfig ", "ncclCommSplit "])
    nranks = rnd.choice(["8", "1000", "99999999999", "٣"])
    text = (
        f"{fn}comm 0x{rnd.randrange(1 << 40):x} rank {rnd.randrange(100)} nranks {nranks} "
        f"cudaDev {rnd.randrange(8)}"
    )
    if rnd.random() < 0.5:
        text += f" nvmlDev {rnd.randrange(8)}"
    if rnd.random() < 0.7:
        text += f" busId {rnd.choice(['1000', 'ca000', '1A0'])}"
    if rnd.random() < 0.2:
        text += f" parent 0x{rnd.randrange(99):x} color {rnd.randrange(-3, 3)} key 0"
    if rnd.random() < 0.6:
        text += f" commId 0x{rnd.randrange(1 << 60):x}"
    text += rnd.choice(
        [
            " - Init START",
            " - Init COMPLETE",
            "- Init START",
            " - Init START ",
            " - Destroy COMPLETE",
            " - Abort COMPLETE",
            " - Init DONE",
        ]
    )
    if rnd.random() < 0.05:
        text = "[Rank 3] " + text
    if rnd.random() < 0.05:
        text = text.replace(" ", "  ", 1)
    return text


@pytest.mark.parametrize("seed", range(5))
def test_plain_messages_cut_from_tokens_as_the_patterns_capture(seed: int) -> None:
    rnd = random.Random(seed)
    msgs = [_message(rnd) for _ in range(3000)]
    df = pl.DataFrame(
        {"line_no": range(len(msgs)), "host": "h", "pid": 1, "tid": 2, "spliced": False},
        schema={
            "line_no": pl.Int64,
            "host": pl.Utf8,
            "pid": pl.Int64,
            "tid": pl.Int64,
            "spliced": pl.Boolean,
        },
    ).with_columns(msg=pl.Series(msgs))
    plain = df.get_column("msg").str.contains(_PLAIN_LIFECYCLE)
    assert 0 < plain.sum() < len(msgs)
    want = communicators._captured_lifecycle_rows(df.filter(plain))
    assert want.get_column("kind").null_count() == 0  # every plain message is a record
    assert_frame_equal(communicators._plain_lifecycle_rows(df.filter(plain)), want)


def _chunks(source: Source) -> list[Any]:
    out = []
    for chunk in NcclDebugParser().parse(source, run_id="r"):
        tables = {k: v.to_dicts() for k, v in sorted(chunk.tables.items())}
        c = chunk.counts
        out.append((tables, (c.total, c.parsed, c.rejected, c.ignored), chunk.warnings))
    return out


def test_pass1_repairs_with_its_own_hosts_on_pass2s_split(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    init = "comm 0x{c} rank 0 nranks 1 cudaDev 0 busId 1000 - Init {p}"
    coll = (
        "AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 root 0 "
        "comm 0x{c} [nranks=1] stream 0x9"
    )
    lines = [
        "ab:1:1 [0] NCCL INFO " + coll.format(c="a1"),  # "ab" known to pass 2 only
        "b:2:2 [0] NCCL INFO " + init.format(c="b1", p="START"),  # "b" known to both
        "b:2:2 [0] NCCL INFO " + init.format(c="b1", p="COMPLETE"),
        # glued to foreign text: pass 2 repairs "junkab" to "ab", pass 1 to "b"
        "foreign text junkab:2:2 [0] NCCL INFO " + init.format(c="b2", p="START"),
        "b:2:2 [0] NCCL INFO " + coll.format(c="b1"),
    ]
    path = tmp_path / "glued.log"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(NcclDebugParser, "one_pass", False)
    want = _chunks(Source(path))
    monkeypatch.setattr(NcclDebugParser, "one_pass", True)
    handed: list[Any] = []
    two = NcclDebugParser._parse_two_passes

    def spy(self: Any, *a: Any, **k: Any) -> Any:
        handed.append(a)
        return two(self, *a, **k)

    monkeypatch.setattr(NcclDebugParser, "_parse_two_passes", spy)
    got = _chunks(Source(path))
    assert not handed  # read once: the repair of the glued line is stable
    assert got == want
    comms = [t for t, _, _ in got if "communicators" in t][-1]["communicators"]
    assert {(r["comm_id"], r["host"]) for r in comms} == {("0xb1", "b"), ("0xb2", "b")}
