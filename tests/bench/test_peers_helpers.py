"""The pure helpers of ``bench/peers.py`` (issue 16, item 6): sizes, busbw, op names, Δ, table.

They turn HTA's parsed collective args into the project's msg_bytes and busbw convention, so a
wrong factor or element size here would make the bench report a disagreement that is not there
(or hide one). No timing, no HTA: plain values computed by hand from the convention in PLAN.md.
"""

from __future__ import annotations

import math

import pytest

from bench.peers import (
    Line,
    busbw_gb_s,
    elem_bytes,
    format_table,
    hta_msg_bytes,
    json_safe,
    median,
    normalize_op,
    rel_diff_pct,
)


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("allreduce", "all_reduce"),
        ("allreduce_coalesced", "all_reduce"),
        ("_allgather_base", "all_gather"),
        ("allgather_into_tensor_coalesced", "all_gather"),
        ("reduce_scatter_tensor_coalesced", "reduce_scatter"),
        ("_reduce_scatter_base", "reduce_scatter"),
        ("alltoall_base", "all_to_all"),
        ("all_to_all", "all_to_all"),
        ("broadcast", "broadcast"),
        ("reduce", "reduce"),
        ("send", "send"),
        ("recv", "recv"),
        ("", None),
        (None, None),
        ("aten::mm", None),
    ],
)
def test_normalize_op(name: object, op: str | None) -> None:
    assert normalize_op(name) == op


def test_elem_bytes_of_kineto_dtype_names() -> None:
    assert [elem_bytes(d) for d in ("Float", "BFloat16", "Half", "Long", "Byte", "Bool")] == [
        4, 2, 2, 8, 1, 1,
    ]  # fmt: skip
    assert elem_bytes("c10::BFloat16") == 2
    assert elem_bytes("Mystery") is None
    assert elem_bytes(None) is None


def test_hta_msg_bytes_follows_the_canonical_buffer_per_op() -> None:
    # reduce_scatter: the per-rank shard (Out msg nelems); the others: In msg nelems
    assert hta_msg_bytes("reduce_scatter", 800, 100, "Float") == 400
    assert hta_msg_bytes("all_gather", 100, 800, "Float") == 400
    assert hta_msg_bytes("all_reduce", 6637568, 6637568, "Float") == 26550272
    # HTA's default value 0 means "not in the trace": no size
    assert hta_msg_bytes("all_reduce", 0, 0, "Float") is None
    assert hta_msg_bytes("all_reduce", 10, 10, "") is None
    assert hta_msg_bytes(None, 10, 10, "Float") is None


def test_busbw_factors_and_sizes() -> None:
    # 1e9 bytes in 1e9 ns = 1 GB/s algbw
    assert busbw_gb_s("all_reduce", 10**9, 8, 10**9) == pytest.approx(2 * 7 / 8)
    # all_gather / reduce_scatter: S = msg x n, factor (n-1)/n
    assert busbw_gb_s("all_gather", 10**9, 8, 10**9) == pytest.approx(8 * 7 / 8)
    assert busbw_gb_s("reduce_scatter", 10**9, 4, 10**9) == pytest.approx(4 * 3 / 4)
    assert busbw_gb_s("all_to_all", 10**9, 4, 10**9) == pytest.approx(3 / 4)
    assert busbw_gb_s("broadcast", 10**9, 8, 10**9) == pytest.approx(1.0)
    assert busbw_gb_s("send", 10**9, 2, 10**9) == pytest.approx(1.0)
    for missing in ((None, 8, 10), (10, None, 10), (10, 8, 0), (10, 8, None)):
        assert busbw_gb_s("all_reduce", *missing) is None


def test_rel_diff_pct_and_median() -> None:
    assert rel_diff_pct(101.0, 100.0) == pytest.approx(1.0)
    assert rel_diff_pct(99.0, 100.0) == pytest.approx(1.0)
    assert rel_diff_pct(0.0, 0.0) == 0.0
    assert math.isinf(rel_diff_pct(1.0, 0.0) or 0.0)
    assert rel_diff_pct(None, 1.0) is None
    assert median([3.0, None, 1.0, 2.0]) == 2.0
    assert median([None]) is None


def test_format_table_aligns_and_shows_deltas() -> None:
    out = format_table(
        [
            Line("r0 it4 hidden comm µs", 1825.259, 1825.2588671875, None, 1769.0),
            Line("n", 5, 5, compare=False),
        ]
    )
    assert out[0].split() == [
        "metric",
        "commscope",
        "HTA",
        "reference",
        "Δ",
        "HTA",
        "%",
        "Δ",
        "ref",
        "%",
        "HTA",
        "defaults",
    ]
    assert len({len(x) for x in out}) == 1  # every line has the same width
    assert "1,825.259" in out[2] and "0.0000" in out[2] and "1,769.000" in out[2]
    assert out[3].split()[1:] == ["5", "5", "-", "-", "-", "-"]


def test_json_safe_replaces_non_finite_floats() -> None:
    doc = {"a": [1.0, float("inf")], "b": {"c": float("nan")}, "d": "x"}
    assert json_safe(doc) == {"a": [1.0, "inf"], "b": {"c": "nan"}, "d": "x"}


def test_compare_unit_lines_up_the_three_readers_per_rank_iteration() -> None:
    from pathlib import Path

    from bench.peers import Unit, compare_unit

    cs = {  # commscope: ns; a rank-less trace is rank 0 for HTA and the bench
        "iterations": [
            {"rank": None, "iteration": 4, "comm_ns": 10_000, "t_comp_ns": 50_000,
             "hidden_comm_ns": 2_000, "comp_source": "kernels"},
        ],
        "calls": [
            {"rank": None, "op": "all_reduce", "dur_ns": 10_000, "msg_bytes": 10**6,
             "group_size": 2, "correlation": 7, "timing_source": "kernel"},
        ],
    }  # fmt: skip
    hta = {  # HTA: µs; iteration -1 = kernels launched in no step
        "exact": {
            "iterations": [
                {"rank": 0, "iteration": 4, "comm_us": 10.0, "compute_us": 50.0, "hidden_us": 2.002},
                {"rank": 0, "iteration": -1, "comm_us": 0.0, "compute_us": 3.0, "hidden_us": 0.0},
            ],
            "collectives": [
                {"rank": 0, "correlation": 7, "dur_us": 10.0, "in_msg_nelems": 250000,
                 "out_msg_nelems": 250000, "msg_dtype": "Float", "group_size": 2},
            ],
        },
        "default": {"iterations": []},
    }  # fmt: skip
    ref = {
        "iterations": {(0, 4): {"comm_ns": 10_000, "compute_ns": 50_000, "hidden_ns": 2_000}},
        "calls": [],
    }
    lines, worst = compare_unit(Unit("u", [], Path()), cs, hta, ref)
    by = {ln.metric: ln for ln in lines}
    hidden = by["r0 it4 hidden comm µs"]
    assert (hidden.commscope, hidden.hta, hidden.reference) == (2.0, 2.002, 2.0)
    assert worst["hidden comm_vs_hta"] == pytest.approx(0.1 / 1.001)
    assert worst["hidden comm_vs_reference"] == 0.0
    assert by["r0 no step: compute µs (HTA iteration -1)"].hta == 3.0
    assert by["all_reduce: kernel-timed calls (HTA: kernels matched)"].hta == 1
    bw = by["all_reduce: median busbw GB/s"]  # 1e6 B / 1e4 ns x 2(n-1)/n = 100 GB/s
    assert bw.commscope == pytest.approx(100.0) and bw.hta == pytest.approx(100.0)
