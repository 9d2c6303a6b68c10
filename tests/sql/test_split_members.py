"""NCCL-only runs: split communicators' members give TP/DP/EmbTableSyn destinations (issue 6).

NCCL 2.21+ logs ``ncclCommSplit`` children without a ``commId``; their members are found from
the parent's ``commId``, the ``color`` and (when a color is reused by another split call) the
split's position among the process's splits. A 32-rank GPT-3B (4, 2, 4) run written in NCCL
2.21.5 only, 2 iterations, is generated, ingested and derived; ``traffic_matrix`` must have a
destination for every row and equal the generator's truth per (iteration, src, dst, class).
Generate + ingest + derive: ``generated_runs.make_run``; truth traffic: ``GeneratedRun.truth_traffic``.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from generated_runs import make_run

pytestmark = pytest.mark.slow


def test_nccl_only_split_run_traffic_matrix_equals_truth(tmp_path: Path) -> None:
    d = make_run(
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
    want = d.truth_traffic()
    assert got.height > 0 and got["dst_rank"].null_count() == 0
    assert set(want["traffic_class"]) == {"TP", "PP", "DP", "EmbTableSyn"}
    assert set(got["traffic_class"]) == set(want["traffic_class"])
    j = got.join(want, on=["iteration", "src_rank", "dst_rank", "traffic_class"], how="full")
    assert j.height == want.height == got.height
    diff = j.filter((pl.col("got").fill_null(-1) - pl.col("want").fill_null(-2)).abs() > 0.5)
    assert diff.height == 0, diff.head()
