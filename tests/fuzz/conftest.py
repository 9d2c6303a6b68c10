"""The fuzz tests' scratch folder fixture."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from fuzz_common import Scratch


@pytest.fixture(scope="module")
def scratch() -> Iterator[Scratch]:
    """A temporary folder for the inputs of one fuzz module (one file rewritten per example)."""
    s = Scratch()
    yield s
    shutil.rmtree(s.dir, ignore_errors=True)
