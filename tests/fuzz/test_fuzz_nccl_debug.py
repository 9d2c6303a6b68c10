"""Fuzz the NCCL debug parser: mutated real lines and random bytes give rows or ParseError.

Every input balances (``total = parsed + ignored + rejected``), ``total`` equals an independent
line count, every frame conforms to the canonical schema and every rejected line has a reject
row. Fixed seed (``derandomize``) so CI is reproducible.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzz_common import (
    MORE,
    Scratch,
    count_lines,
    fuzz_settings,
    parser_named,
    run_parser,
    text_inputs,
)
from hypothesis import given

SAMPLES = (
    "nccl_debug/gfbench_2.20.5_2rank_normal_rank0_debugfile.txt",
    "nccl_debug/megatron_4gpu_nccl2.19-2.20_tail_coll_excerpt.log",
    "nccl_debug/p5_efa_2.22.3_2node_16rank_mpirun_tagged.log",
    "nccl_debug/cori_2.5.6_2node_16rank_srun_labelled.out",
)
EXAMPLES = 3000


def _lines(shared: Path) -> list[bytes]:
    out: list[bytes] = []
    for s in SAMPLES:
        out += (shared / s).read_bytes().split(b"\n")[:400]
    return [ln for ln in out if ln]


def _check(scratch: Scratch, data: bytes) -> None:
    path = scratch.write(data)
    counts = run_parser(parser_named("nccl_debug"), path)
    if counts is not None:
        assert counts.total == count_lines(data), (counts, data[:200])


def _fuzz(shared: Path, scratch: Scratch, *, more: bool) -> None:
    strategy = text_inputs(_lines(shared))  # built once: per-example construction is slow

    @fuzz_settings(EXAMPLES, more=more)
    @given(strategy)
    def inner(data: bytes) -> None:
        _check(scratch, data)

    inner()


@pytest.mark.slow
def test_fuzz_nccl_debug(shared_samples: Path, scratch: Scratch) -> None:
    _fuzz(shared_samples, scratch, more=False)


@pytest.mark.slow
@MORE
def test_fuzz_nccl_debug_more(shared_samples: Path, scratch: Scratch) -> None:
    _fuzz(shared_samples, scratch, more=True)
