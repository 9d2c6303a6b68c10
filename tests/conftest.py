"""Shared fixtures: the real samples in ../shared, the bundled sample traces, a temp store."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

# Property tests: no per-example deadline (the machines here are shared and noisy) and a fixed
# example sequence, so a CI run is reproducible; more examples where a test asks for them.
settings.register_profile("commscope", deadline=None, derandomize=True)
settings.load_profile("commscope")

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def project_root() -> Path:
    """The project's root directory."""
    return ROOT


@pytest.fixture(scope="session")
def shared_samples() -> Path:
    """../shared/samples: real logs and traces from public repositories (read-only)."""
    path = SHARED / "samples"
    if not path.is_dir():
        pytest.skip(f"shared samples not found at {path}")
    return path


@pytest.fixture(scope="session")
def sample_traces() -> Path:
    """The project's bundled sample traces."""
    return ROOT / "sample_traces"


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """A fresh, empty store folder."""
    return tmp_path / "store"
