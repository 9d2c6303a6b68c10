"""NCCL-only runs: split communicators' members give TP/DP/EmbTableSyn destinations (issue 6).

NCCL 2.21+ logs ``ncclCommSplit`` children without a ``commId``; their members are found from
the parent's ``commId``, the ``color`` and (when a color is reused by another split call) the
split's position among the process's splits. A 32-rank GPT-3B (4, 2, 4) run written in NCCL
2.21.5 only, 2 iterations, is generated, ingested and derived; ``traffic_matrix`` must have a
destination for every row and equal the generator's truth per (iteration, src, dst, class).
The helpers (generate + ingest + derive, truth traffic) are those of ``test_marts_vs_truth.py``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import polars as pl
import pytest

pytestmark = pytest.mark.slow


def _truth_helpers() -> ModuleType:
    path = Path(__file__).resolve().parent / "test_marts_vs_truth.py"
    spec = importlib.util.spec_from_file_location("_marts_vs_truth_helpers", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass resolves annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


def test_nccl_only_split_run_traffic_matrix_equals_truth(tmp_path: Path) -> None:
    h = _truth_helpers()
    d = h._make(
        tmp_path,
        "synthetic_gpt3b_4x2x4.toml",
        "split",
        iterations=2,
        formats=("nccl",),
        nccl_version="2.21.5",
    )
    logs = sorted(d.gen.rglob("*.nccl.log"))
    assert len(logs) == 32
    # Independent: the generated logs do use split children (no commId on those lines).
    n_split = sum(p.read_text().count("ncclCommSplit comm ") for p in logs)
    assert n_split > 0
    con = d.store.connect()
    try:
        (n_children,) = con.execute(
            "SELECT count(*) FROM communicators WHERE run_id = 'split' AND split_color IS NOT NULL"
        ).fetchone() or (0,)
    finally:
        con.close()
    assert n_children * 2 == n_split  # one START and one COMPLETE line per child
    got = d.mart("traffic_matrix").select(
        "iteration", "src_rank", "dst_rank", "traffic_class", pl.col("bytes").alias("got")
    )
    want = h._truth_traffic(d)
    assert got.height > 0 and got["dst_rank"].null_count() == 0
    assert set(want["traffic_class"]) == {"TP", "PP", "DP", "EmbTableSyn"}
    assert set(got["traffic_class"]) == set(want["traffic_class"])
    j = got.join(want, on=["iteration", "src_rank", "dst_rank", "traffic_class"], how="full")
    assert j.height == want.height == got.height
    diff = j.filter((pl.col("got").fill_null(-1) - pl.col("want").fill_null(-2)).abs() > 0.5)
    assert diff.height == 0, diff.head()
