"""Golden marts: every mart of two bundled real runs against its reviewed CSV.

``tests/golden/<run>/<mart>.csv`` holds the mart's rows as derive computes them from the run
(``REAL_RUNS`` in ``tests/conftest.py``: a 4-rank NCCL TP x DP run on one GPU and a DeepSpeed
pipeline run on CPU), sorted by every column. A change to the SQL that moves any number, adds or
drops a row or a column fails here. After an intended change, rewrite them and review the diff
like any other change:

    python -m pytest tests/sql/test_golden_marts.py --update-golden
    git diff --stat tests/golden
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from commscope.pipeline.store import Store
from tests.conftest import REAL_RUNS

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
ROOT = str(Path(__file__).resolve().parents[2])
"""The checkout's path: marts name their source files by absolute path; the CSVs say <root>."""

pytestmark = pytest.mark.golden


def _sorted(df: pl.DataFrame) -> pl.DataFrame:
    """Rows in one order: by every column, nulls last (CSV diffs stay stable)."""
    return df.sort(df.columns, nulls_last=True) if df.columns else df


def _portable(df: pl.DataFrame) -> pl.DataFrame:
    """The checkout's path in text columns as ``<root>`` (a clone elsewhere gives the same CSV)."""
    text = [c for c, t in df.schema.items() if t == pl.String]
    return df.with_columns(pl.col(text).str.replace_all(ROOT, "<root>", literal=True))


def _marts(store_root: Path, run_id: str) -> dict[str, pl.DataFrame]:
    files = Store.open(store_root, create=False).mart_files(run_id)
    return {name: _sorted(_portable(pl.read_parquet(path))) for name, path in sorted(files.items())}


@pytest.mark.parametrize("run_id", sorted(REAL_RUNS))
def test_marts_match_golden_csv(
    run_id: str, real_runs_store: Path, request: pytest.FixtureRequest
) -> None:
    marts = _marts(real_runs_store, run_id)
    assert len(marts) > 10, sorted(marts)
    folder = GOLDEN / run_id
    if request.config.getoption("--update-golden"):
        folder.mkdir(parents=True, exist_ok=True)
        for stale in set(folder.glob("*.csv")) - {folder / f"{m}.csv" for m in marts}:
            stale.unlink()
        for name, df in marts.items():
            df.write_csv(folder / f"{name}.csv")
        pytest.skip(f"rewrote {len(marts)} golden CSVs in {folder}: review `git diff {folder}`")
    have = {p.stem for p in folder.glob("*.csv")}
    assert have == set(marts), (
        f"marts without a golden CSV: {sorted(set(marts) - have)}; golden CSVs of no mart: "
        f"{sorted(have - set(marts))} (rerun with --update-golden and review the diff)"
    )
    for name, df in marts.items():
        want = _sorted(pl.read_csv(folder / f"{name}.csv", schema=df.schema))
        try:
            # floats as written (shortest round-trip), compared with a tolerance: DuckDB's
            # parallel sums may differ in the last bits between runs
            assert_frame_equal(df, want, check_exact=False, rel_tol=1e-9, abs_tol=1e-9)
        except AssertionError as exc:
            raise AssertionError(
                f"{run_id}/{name} differs from tests/golden/{run_id}/{name}.csv: {exc} "
                "(an intended change: rerun with --update-golden and review the diff)"
            ) from None
