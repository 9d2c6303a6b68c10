"""Synthetic cluster runs: simulate a PTD-P training job and write its logs in every format.

``commscope generate`` (``pipeline/commands/generate.py``) is the command line over
:func:`generate`. One deterministic simulation (:mod:`.simulate`) produces one event list per
lane and iteration; the writers turn it into NCCL debug logs (:mod:`.write_nccl`), DeepSpeed
comms-logger output (:mod:`.write_deepspeed`), Kineto traces (:mod:`.write_kineto`) and nsys
SQLite exports (:mod:`.write_nsys`); :mod:`.truth` states the answers a correct analysis must
find and :mod:`.manifest` records the configuration that ingest stores. Everything generated is
labelled synthetic (file names, manifest, trace metadata).
"""

from __future__ import annotations

from commscope.synthetic.generator import GenerateResult, generate
from commscope.synthetic.scenario import (
    FORMATS,
    GenerateOptions,
    Scenario,
    split_config,
    with_overrides,
)

__all__ = [
    "FORMATS",
    "GenerateOptions",
    "GenerateResult",
    "Scenario",
    "generate",
    "split_config",
    "with_overrides",
]
