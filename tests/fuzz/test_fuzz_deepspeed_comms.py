"""Fuzz the DeepSpeed comms-logger parser: mutated real lines and random bytes give rows or ParseError.

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
    "deepspeed_comms/mlprof_thetagpu_2node_16gpu_verbose_run1.log",
    "deepspeed_comms/mlprof_polaris_1node_4gpu_summary_ansi.log",
    "deepspeed_comms/ds_pr2012_docs_log_summary_zero3.txt",
    "deepspeed_comms/ds_pr2012_docs_verbose_v0.7_format.log",
)
EXAMPLES = 3000


def _lines(shared: Path) -> list[bytes]:
    out: list[bytes] = []
    for s in SAMPLES:
        out += (shared / s).read_bytes().split(b"\n")[:400]
    return [ln for ln in out if ln]


def _check(scratch: Scratch, data: bytes) -> None:
    path = scratch.write(data)
    counts = run_parser(parser_named("deepspeed_comms"), path)
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
def test_fuzz_deepspeed_comms(shared_samples: Path, scratch: Scratch) -> None:
    _fuzz(shared_samples, scratch, more=False)


@pytest.mark.slow
@MORE
def test_fuzz_deepspeed_comms_more(shared_samples: Path, scratch: Scratch) -> None:
    _fuzz(shared_samples, scratch, more=True)
