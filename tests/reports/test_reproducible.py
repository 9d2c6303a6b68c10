"""A report is a function of its store: two builds of one run give the same bytes, whatever order
the rows of its marts and model inputs were written in (a derive writes a mart without ORDER BY
in the order its threads finish). The build time is the one field that may differ; the
reproducible-builds variable ``SOURCE_DATE_EPOCH`` fixes it."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import polars as pl
import pytest

from commscope.pipeline.store import Store
from commscope.reports import charts
from commscope.reports.html import build_report

if TYPE_CHECKING:
    from pathlib import Path

    from tests.reports.conftest import ReportStore

EPOCH = "1700000000"  # 2023-11-14 22:13:20 UTC


def _shuffle_rows(store: Store, run_id: str) -> int:
    """Rewrite every mart and model input of ``run_id`` with its rows in another order; the
    number of files whose order changed."""
    files = {**store.mart_files(run_id), **store.model_input_files(run_id)}
    moved = 0
    for seed, path in enumerate(sorted(files.values())):
        df = pl.read_parquet(path)
        if df.height < 2:
            continue
        out = df.sample(fraction=1.0, shuffle=True, seed=seed)
        if out.equals(df):
            out = df.reverse()
        moved += not out.equals(df)
        out.write_parquet(path)
    return moved


def _first_difference(a: bytes, b: bytes) -> str:
    i = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return f"first difference at byte {i}:\n{a[i - 300 : i + 200]!r}\n{b[i - 300 : i + 200]!r}"


@pytest.mark.parametrize("run", ["sample", pytest.param("synth", marks=pytest.mark.slow)])
def test_report_bytes_do_not_depend_on_the_order_of_mart_rows(
    run: str, report_store: ReportStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    first = build_report(report_store.store, run, tmp_path / "a.html").read_bytes()
    assert b"generated 2023-11-14 22:13 UTC" in first
    copy = Store.open(shutil.copytree(report_store.store.root, tmp_path / "store"), create=False)
    assert _shuffle_rows(copy, run) > 5
    second = build_report(copy, run, tmp_path / "b.html").read_bytes()
    assert first == second, _first_difference(first, second)


def test_a_chart_spec_does_not_depend_on_the_order_of_its_rows() -> None:
    # the records are sorted by every column; the order a person sees (bars top to bottom) is
    # the prepared frame's, stated in the encoding
    df = pl.DataFrame(
        {
            "bar": ["stage 1 measured", "stage 1 measured", "stage 0 measured", "stage 0 measured"],
            "source": ["measured"] * 4,
            "component": ["compute", "TP", "compute", "TP"],
            "seconds": [1.0, 0.5, 1.0, 0.5],
            "order": [0, 1, 0, 1],
        }
    )
    swapped = df[[1, 0, 3, 2]]  # the same bars in the same order, their rows swapped
    assert charts.breakdown(swapped).to_json() == charts.breakdown(df).to_json()
    spec = charts.breakdown(df).to_dict()
    assert spec["encoding"]["y"]["sort"] == ["stage 1 measured", "stage 0 measured"]
    (records,) = spec["datasets"].values()
    assert records == df.sort(df.columns).to_dicts()
