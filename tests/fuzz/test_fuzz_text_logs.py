"""Fuzz the text-log parsers (NCCL debug, NCCL Inspector, DeepSpeed comms logger): mutated
real lines and random bytes give rows or ParseError.

Every input balances (``total = parsed + ignored + rejected``), ``total`` equals an independent
line count, every frame conforms to the canonical schema and every rejected line has a reject
row. Fixed seed (``derandomize``) so CI is reproducible; 3,000 inputs per parser.
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

SAMPLES = {
    "nccl_debug": (
        "nccl_debug/gfbench_2.20.5_2rank_normal_rank0_debugfile.txt",
        "nccl_debug/megatron_4gpu_nccl2.19-2.20_tail_coll_excerpt.log",
        "nccl_debug/p5_efa_2.22.3_2node_16rank_mpirun_tagged.log",
        "nccl_debug/cori_2.5.6_2node_16rank_srun_labelled.out",
    ),
    "nccl_inspector": (
        "nccl_inspector/sugarlxn_inspector_v4.0_4rank_allreduce_tuner/stone-pid2029565.log",
        "nccl_inspector/sugarlxn_inspector_v4.0_4rank_allreduce_tuner/stone-pid2029568.log",
    ),
    "deepspeed_comms": (
        "deepspeed_comms/mlprof_thetagpu_2node_16gpu_verbose_run1.log",
        "deepspeed_comms/mlprof_polaris_1node_4gpu_summary_ansi.log",
        "deepspeed_comms/ds_pr2012_docs_log_summary_zero3.txt",
        "deepspeed_comms/ds_pr2012_docs_verbose_v0.7_format.log",
    ),
}
EXAMPLES = 3000


def _lines(shared: Path, parser: str) -> list[bytes]:
    out: list[bytes] = []
    for s in SAMPLES[parser]:
        out += (shared / s).read_bytes().split(b"\n")[:400]
    return [ln for ln in out if ln]


def _fuzz(shared: Path, scratch: Scratch, parser: str, *, more: bool) -> None:
    strategy = text_inputs(_lines(shared, parser))  # built once: per-example construction is slow

    @fuzz_settings(EXAMPLES, more=more)
    @given(strategy)
    def inner(data: bytes) -> None:
        counts = run_parser(parser_named(parser), scratch.write(data))
        if counts is not None:
            assert counts.total == count_lines(data), (counts, data[:200])

    inner()


@pytest.mark.slow
@pytest.mark.parametrize("parser", sorted(SAMPLES))
def test_fuzz_text_parser(parser: str, shared_samples: Path, scratch: Scratch) -> None:
    _fuzz(shared_samples, scratch, parser, more=False)


@pytest.mark.slow
@MORE
@pytest.mark.parametrize("parser", sorted(SAMPLES))
def test_fuzz_text_parser_more(parser: str, shared_samples: Path, scratch: Scratch) -> None:
    _fuzz(shared_samples, scratch, parser, more=True)
