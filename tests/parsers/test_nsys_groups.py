"""Which grouped ncclSend/ncclRecv sets of an nsys export fold into one all_to_all.

Hand-built rows as the nsys parser holds them back (one per Send/Recv range made inside a group,
with the rowid of the ncclGroupEnd closing it). Expected rows computed by hand.
"""

from __future__ import annotations

import polars as pl

from commscope.parsers._nsys_groups import OP_SOURCE, fold_groups


def _row(end: int, line: int, op: str, peer: int | None, size: int | None, **kw: object) -> dict:
    return {
        "rank": 1,
        "host": "h",
        "pid": 7,
        "source_line": line,
        "op": op,
        "raw_op": "ncclSend" if op == "send" else "ncclRecv",
        "comm_id": kw.get("comm", "0xa"),
        "group_size": kw.get("n", 2),
        "group_rank": 1,
        "group_source": "logged",
        "peer_rank": peer,
        "msg_bytes": size,
        "redop": None,
        "ts_ns": 1000 + end,
        "dur_ns": 50,
        "timing_source": "kernel",
        "launch_ts_ns": line,
        "kernel_count": 1,
        "iteration": 3,
        "rank_source": None,
        "group_end": end,
    }


def test_only_a_full_exchange_on_one_communicator_folds() -> None:
    rows = [
        # group 100: an all-to-all on a 2-rank comm (itself included), uneven
        _row(100, 1, "send", 0, 30),
        _row(100, 2, "recv", 0, 30),
        _row(100, 3, "send", 1, 10),
        _row(100, 4, "recv", 1, 20),
        # group 200: a pipeline batch on a 4-rank comm (send to 2, recv from 0): not folded
        _row(200, 11, "send", 2, 8, n=4),
        _row(200, 12, "recv", 0, 8, n=4),
        # group 300: a 2-rank exchange missing its Recv from 1 (PyTorch skips zero sizes)
        _row(300, 21, "send", 0, 5),
        _row(300, 22, "recv", 0, 5),
        _row(300, 23, "send", 1, 5),
        # group 400: a full exchange on 0xa plus a send on another comm 0xb in the same group:
        # the 0xa set folds, the 0xb send stays
        _row(400, 31, "send", 0, 4),
        _row(400, 32, "recv", 0, 4),
        _row(400, 33, "send", 1, 6),
        _row(400, 34, "recv", 1, 2),
        _row(400, 35, "send", 1, 9, comm="0xb"),
        # group 500: a peer without a payload (NCCL <= 2.24): not folded
        _row(500, 41, "send", None, None),
        _row(500, 42, "recv", None, None),
    ]
    out = fold_groups([pl.DataFrame(rows[:7]), pl.DataFrame(rows[7:])])
    assert out is not None
    out = out.sort("source_line")
    folded = out.filter(pl.col("op_source") == OP_SOURCE)
    assert folded.select(
        "source_line", "op", "raw_op", "msg_bytes", "split_bytes", "recv_split_bytes", "peer_rank"
    ).rows() == [
        (100, "all_to_all", "ncclGroupEnd", 40, "30,10", "30,20", None),
        (400, "all_to_all", "ncclGroupEnd", 10, "4,6", "4,2", None),
    ]
    assert folded["launch_ts_ns"].to_list() == [1, 31]  # the first range's CPU issue
    assert folded["ts_ns"].to_list() == [1100, 1400]
    assert folded["kernel_count"].to_list() == [1, 1]
    rest = out.filter(pl.col("op_source").is_null())
    assert rest["source_line"].to_list() == [11, 12, 21, 22, 23, 35, 41, 42]
    assert "group_end" not in out.columns
    assert fold_groups([]) is None
