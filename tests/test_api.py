"""The Python API (issue 20 item 5): the README's worked example runs as written, and what it
returns agrees with the store read by another route."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_example() -> str:
    """The python block of the README's "Python API" section."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python API") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> dict:
    import os

    work = tmp_path_factory.mktemp("api")
    before = Path.cwd()
    os.chdir(work)
    try:
        ns: dict = {}
        exec(compile(readme_example(), "README.md (Python API)", "exec"), ns)
    finally:
        os.chdir(before)
    ns["work"] = work
    return ns


def test_readme_example_runs(example: dict) -> None:
    assert example["cs"].runs() == ["tp2"]
    assert (example["work"] / "tp2.html").stat().st_size > 100_000
    assert {"traffic", "onoff", "bandwidth"} <= set(example["charts"])
    import altair as alt

    assert all(isinstance(c, alt.TopLevelMixin) for cs in example["charts"].values() for c in cs)


def test_frames_agree_with_the_parquet_read_with_the_commit_filter(example: dict) -> None:
    """comm_ops through the API == the committed Parquet files read by polars (README's
    commit filter: a batch counts only when ingested_files names it)."""
    store = example["work"] / "commscope_store"
    committed = set(
        pl.read_parquet(store / "tables" / "ingested_files" / "*" / "*.parquet")["batch_id"]
    )
    files = [f for f in (store / "tables" / "comm_ops").glob("*/*.parquet") if f.stem in committed]
    raw = pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")
    cs = commscope_store(store)
    try:
        api = cs.table("comm_ops", run_id="tp2")
        assert api.height == raw.height > 0
        assert api["msg_bytes"].sum() == raw["msg_bytes"].sum()
        rel = cs.relation("comm_ops", run_id="tp2")
        assert rel.aggregate("count(*)").fetchall()[0][0] == raw.height
        by_op = cs.sql("SELECT op, count(*) AS calls FROM int_calls GROUP BY op ORDER BY op")
        assert by_op["calls"].sum() > 0
        tm = cs.table("traffic_matrix", run_id="tp2")
        assert tm.height > 0 and set(tm["run_id"]) == {"tp2"}
    finally:
        cs.close()


def commscope_store(path: Path):
    import commscope

    return commscope.open_store(path, create=False)


def test_names_are_checked(example: dict) -> None:
    cs = commscope_store(example["work"] / "commscope_store")
    try:
        with pytest.raises(ValueError, match="not a table"):
            cs.table("comm_ops; DROP TABLE x")
        with pytest.raises(Exception, match=r"read-only|not allowed"):
            cs.sql("CREATE TABLE x AS SELECT 1")
    finally:
        cs.close()


def test_import_is_light() -> None:
    """``import commscope`` loads no heavy library (the CLI imports it for every command)."""
    import subprocess
    import sys

    code = "import sys, commscope; print(sorted(m for m in ('polars', 'duckdb', 'altair', 'pyarrow') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
