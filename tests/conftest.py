"""Shared fixtures: the real samples in ../shared, the bundled sample traces, a temp store, one
store of two bundled real runs ingested and derived (golden marts, the duckdb CLI, query), and
one store of a 2-rank NCCL run ingested for the derive tests."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from commscope.pipeline.store import Store

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


REAL_RUNS = {"gpu_tp2_dp2": "gpu_nccl_tp2_dp2_1gpu", "ds_pipe_pp2_dp2": "ds_pipe_pp2_dp2_cpu"}
"""Run id -> the sample_traces/ folder of the real runs in :func:`real_runs_store`."""


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of :data:`tests.heavy.HEAVY` ``slow`` (the quick loop leaves them to CI);
    an entry naming no test of a module collected whole is an error (a renamed test)."""
    from tests.heavy import HEAVY

    used: set[str] = set()
    for item in items:
        node = item.nodeid
        base = node.split("[", 1)[0]
        for key in (node, base):
            if key in HEAVY:
                item.add_marker(pytest.mark.slow)
                used.add(key)
    modules = {item.nodeid.split("::", 1)[0] for item in items}
    stale = [e for e in HEAVY if e.split("::", 1)[0] in modules and e not in used]
    if stale and not any("::" in str(a) for a in config.args):
        raise pytest.UsageError(f"tests/heavy.py names no collected test: {stale}")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/golden/<run>/<mart>.csv from the marts derived now (review the diff)",
    )


@pytest.fixture(scope="session")
def real_runs_store(tmp_path_factory: pytest.TempPathFactory, sample_traces: Path) -> Path:
    """A store (its folder) holding the bundled real runs of :data:`REAL_RUNS`, each ingested
    and derived by the command line as a user would (config from the run's manifest).

    Built once per session and shared: read it, never write to it.
    """
    from commscope.pipeline.cli import main

    root = tmp_path_factory.mktemp("real_runs") / "store"
    for run_id, folder in REAL_RUNS.items():
        with contextlib.redirect_stdout(io.StringIO()):
            assert (
                main(["ingest", str(sample_traces / folder), "--run", run_id, "--store", str(root)])
                == 0
            )
            assert main(["derive", run_id, "--store", str(root)]) == 0
    return root


GFBENCH_2RANK = "gfbench_2.20.5_2rank_normal_rank*_debugfile.txt"
"""The NCCL debug logs (../shared/samples/nccl_debug) of a 2-rank gfbench run, one per rank."""


@pytest.fixture(scope="session")
def gfbench_store(tmp_path_factory: pytest.TempPathFactory, shared_samples: Path) -> Store:
    """A store holding the 2-rank gfbench run (:data:`GFBENCH_2RANK`) as run ``r``, ingested
    without the catalog, once per session for the derive tests (the file-backed derive's
    comm_ops view and call-sized intermediates).

    Shared: a test may derive the run (each derive adds a generation of marts beside the last)
    or read its tables, never change what was ingested.
    """
    from commscope.pipeline.ingest import ingest_paths
    from commscope.pipeline.store import Store

    files = sorted((shared_samples / "nccl_debug").glob(GFBENCH_2RANK))
    assert len(files) == 2, files
    store = Store.open(tmp_path_factory.mktemp("gfbench") / "store")
    ingest_paths(store, files, run_id="r", build_catalog=False)
    return store
