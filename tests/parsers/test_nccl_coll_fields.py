"""The plain-COLL fast path of nccl_debug agrees with its general path, line for line.

Each plain COLL line of a real sample is written twice into one SYNTHETIC file: as logged
(plain, so the fast path reads it) and with a ``[1,0]<stdout>:`` launcher tag in front (not
plain, so the general path reads it). The tag changes nothing the parser stores, so the two rows
of every pair must be equal in every column but ``source_line``.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from commscope.parsers._io import Source
from commscope.parsers._nccl_coll_fields import plain_coll_mask
from commscope.parsers.nccl_debug import NcclDebugParser

SAMPLES = (
    "nccl_debug/gfbench_2.20.5_2rank_normal_rank0_debugfile.txt",
    "nccl_debug/nccltests_2.27.7_1proc_2gpu_allreduce.log",
    "nccl_debug/megatron_4gpu_nccl2.19-2.20_tail_coll_excerpt.log",
)
TAG = "[1,0]<stdout>:"


def _comm_ops(path: Path) -> pl.DataFrame:
    frames = [
        ch.tables["comm_ops"]
        for ch in NcclDebugParser().parse(Source(path), run_id="t")
        if "comm_ops" in ch.tables
    ]
    return pl.concat(frames).sort("source_line")


@pytest.mark.parametrize("sample", SAMPLES)
def test_tagged_copy_of_each_plain_line_gives_the_same_row(
    shared_samples: Path, tmp_path: Path, sample: str
) -> None:
    lines = (shared_samples / sample).read_text().splitlines()
    mask = plain_coll_mask(pl.Series(lines, dtype=pl.Utf8))
    plain = [ln for ln, m in zip(lines, mask, strict=True) if m]
    assert len(plain) > 10, "the sample should hold plain COLL lines"
    other = [ln for ln, m in zip(lines, mask, strict=True) if not m]
    doubled = [*other]
    for ln in plain:
        doubled += [ln, TAG + ln]
    src = tmp_path / "synthetic_doubled.log"
    src.write_text("\n".join(doubled) + "\n")
    tagged = pl.Series([TAG + ln for ln in plain], dtype=pl.Utf8)
    assert not plain_coll_mask(tagged).any(), "a tagged line must take the general path"

    first = len(other) + 1  # line number of the first plain line in the doubled file
    ops = _comm_ops(src).filter(pl.col("source_line") >= first)
    assert ops.height == 2 * len(plain)
    fast = ops.filter((pl.col("source_line") - first) % 2 == 0).drop("source_line")
    general = ops.filter((pl.col("source_line") - first) % 2 == 1).drop("source_line")
    assert fast.height == general.height == len(plain)
    assert fast.equals(general)


@pytest.mark.parametrize(
    "line",
    [
        # not plain: each differs from the plain form in one place the fast path must not take
        "[2025-01-01 10:00:00.5] h:1:2 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 "
        "recvbuff 0x1 count 8 datatype 7 op 0 root 0 comm 0xab [nranks=2] stream 0x5",
        "h:1:2 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 8 "
        "datatype 7 op 0 root 0 comm 0xab [nranks=2] stream 0x5 task 3",
        "h:1:2 NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 8 "
        "datatype 7 op 0 root 0 comm 0xab [nranks=2] stream 0x5",
        "h:1:2 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 8 "
        "datatype 7 op 0 root 0 comm 0xab [nranks=2] stream 0x5h:1:3 [1] NCCL INFO x",
        "h:1234567890:2 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 8 "
        "datatype 7 op 0 root 0 comm 0xab [nranks=2] stream 0x5",
    ],
)
def test_variants_take_the_general_path(line: str) -> None:
    assert not plain_coll_mask(pl.Series([line])).any()


def test_plain_form_is_taken() -> None:
    line = (
        "gpu-7.cluster:812:812 [3] NCCL INFO ReduceScatter: opCount 1f sendbuff (nil) "
        "recvbuff 0x7f00 count 1024 datatype 9 op 0 root -1 comm 0xAB12 [nranks=8] stream (nil)"
    )
    assert plain_coll_mask(pl.Series([line])).all()
