"""Issue 20: the store opens where users open it, and `query` on intermediate views is fast.

* the catalog is written in DuckDB storage CATALOG_STORAGE_VERSION, which the duckdb CLI on the
  registry (duckdb-cli 1.5.6, in the dev group) reads; the CLI opens a real derived store and
  ``SELECT * FROM traffic_matrix LIMIT 1`` works there;
* marts carry their SQL files' column comments in the catalog, like the canonical tables;
* ``commscope schema`` knows every mart, intermediate and staging view and model input;
* ``query`` on an intermediate view returns the rows derive computes for each run (it computes
  the view chain once instead of planning the live views, which took minutes).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from commscope.pipeline import run_config as rc
from commscope.pipeline.cli import main
from commscope.pipeline.derive import connect_for_derive, materialise_intermediates
from commscope.pipeline.sql_modules import discover
from commscope.pipeline.store import CATALOG_STORAGE_VERSION, Store
from tests.conftest import REAL_RUNS

CLI_ENV = "COMMSCOPE_DUCKDB_CLI"


def duckdb_cli() -> str | None:
    """The duckdb CLI: $COMMSCOPE_DUCKDB_CLI, the one beside this Python (the dev group
    installs duckdb-cli there), else one on PATH."""
    if os.environ.get(CLI_ENV):
        return os.environ[CLI_ENV]
    beside = Path(sys.executable).parent / "duckdb"
    return str(beside) if beside.is_file() else shutil.which("duckdb")


def test_catalog_storage_version_is_the_clis(real_runs_store: Path) -> None:
    """The catalog file's storage version number (its header: b"DUCK" at byte 8, then the
    version as a little-endian uint64) is one the CLI 1.5.6 reads ("can only read versions
    between 64 and 68"); duckdb 2.0.0 writes a newer one by default (the CLI refused it)."""
    head = (real_runs_store / "catalog.duckdb").read_bytes()[:64]
    assert head[8:12] == b"DUCK"
    (version,) = struct.unpack_from("<Q", head, 12)
    assert 64 <= version <= 68, version
    assert CATALOG_STORAGE_VERSION == "v1.5.0"


def test_duckdb_cli_opens_the_store(real_runs_store: Path) -> None:
    cli = duckdb_cli()
    if cli is None:
        pytest.skip(f"no duckdb CLI (dev group: duckdb-cli; or set ${CLI_ENV})")
    sql = (
        "SELECT * FROM traffic_matrix ORDER BY ALL LIMIT 1; "
        "SELECT comment FROM duckdb_columns() "
        "WHERE table_name = 'traffic_matrix' AND column_name = 'bytes'"
    )
    proc = subprocess.run(
        [cli, "-readonly", "-csv", str(real_runs_store / "catalog.duckdb"), "-c", sql],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("run_id,iteration,src_rank,dst_rank,traffic_class,bytes")
    assert lines[1].split(",")[0] in REAL_RUNS
    assert lines[2] == "comment" and lines[3].startswith('"Bytes sent from src_rank')


def test_marts_carry_their_column_comments(real_runs_store: Path) -> None:
    """Each materialised mart view has its SQL file's description and a comment on every column
    the file documents (the catalog had none on marts)."""
    con = Store.open(real_runs_store, create=False).connect(read_only=True)
    marts = [m for m in discover() if m.layer == "marts"]
    rows = con.execute(
        "SELECT table_name, column_name, comment FROM duckdb_columns() WHERE comment IS NOT NULL"
    ).fetchall()
    have = {(t, c): text for t, c, text in rows}
    views = dict(con.execute("SELECT view_name, comment FROM duckdb_views()").fetchall())
    for m in marts:
        assert views[m.name].startswith(m.description), m.name
        assert "derive" in views[m.name]  # says its rows are derive's, not live
        for col, doc in m.column_docs.items():
            assert have.get((m.name, col)) == doc, (m.name, col)
    for m in discover():
        if m.layer == "intermediate" and m.kind == "VIEW":
            assert views[m.name].startswith(m.description), m.name
            assert "`commscope query` computes the chain once" in views[m.name], m.name


def test_schema_knows_every_mart_and_view(capsys: pytest.CaptureFixture[str]) -> None:
    for m in discover():
        if m.kind != "VIEW":
            continue
        assert main(["schema", m.name]) == 0, m.name
        out = capsys.readouterr().out
        assert out.startswith(f"{m.name}  ({m.layer} view")
        for col in m.column_docs:
            assert f"  {col} " in out, (m.name, col)
    assert main(["schema", "predicted_times"]) == 0
    assert "value" in capsys.readouterr().out
    assert main(["schema", "no_such_view"]) == 2
    assert "unknown table or view 'no_such_view'" in capsys.readouterr().err


@pytest.mark.parametrize("view", ["int_class_bandwidth", "int_breakdown_rank_iteration"])
def test_query_on_an_intermediate_view_gives_derives_rows(
    view: str, real_runs_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rows `query` returns for a deep intermediate view over the whole store are those
    derive's connection (one run at a time, every intermediate a table) computes."""
    assert main(["query", f"SELECT * FROM {view}", "--store", str(real_runs_store),
                 "--format", "json"]) == 0  # fmt: skip
    got = pl.DataFrame(json.loads(capsys.readouterr().out), infer_schema_length=None)
    store = Store.open(real_runs_store, create=False)
    parts = []
    for run_id in sorted(REAL_RUNS):
        con, _ = connect_for_derive(store, run_id, rc.load(store, run_id))
        materialise_intermediates(con)
        parts.append(con.sql(f"SELECT * FROM {view}").pl())
        con.close()
    want = pl.concat(parts)
    assert want.height > 0
    # JSON carries no types: compare as text, rows in one order
    got = got.select(want.columns).cast(pl.Utf8)
    want = pl.DataFrame(json.loads(json.dumps(want.to_dicts(), default=str))).cast(pl.Utf8)
    assert_frame_equal(got.sort(got.columns), want.sort(want.columns))


def test_readme_commit_filter_reads_committed_rows_only(
    real_runs_store: Path, tmp_path: Path, project_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's SQL for reading raw Parquet gives the catalog's comm_ops rows, and skips a
    data file whose batch never committed (what a killed ingest leaves)."""
    readme = (project_root / "README.md").read_text()
    section = readme[readme.index("### Opening the store elsewhere") :]
    sql = section[section.index("```sql\n") + 7 :]
    sql = sql[: sql.index("```")]
    root = tmp_path / "commscope_store"
    shutil.copytree(real_runs_store, root)
    with Store.open(root, create=False).connect(read_only=True) as con:
        (want,) = con.execute("SELECT count(*) FROM comm_ops").fetchone()
    batch = next((root / "tables" / "comm_ops" / "gpu_tp2_dp2").glob("*.parquet"))
    shutil.copy(batch, batch.with_name("uncommitted0123.parquet"))
    con = duckdb.connect()
    monkeypatch.chdir(tmp_path)  # the README's paths are relative to the store's parent
    (got,) = con.execute(f"SELECT count(*) FROM ({sql})").fetchone()
    (raw,) = con.execute(
        "SELECT count(*) FROM read_parquet('commscope_store/tables/comm_ops/*/*.parquet', "
        "union_by_name = true)"
    ).fetchone()
    assert got == want > 0
    assert raw > want  # the uncommitted file is there, and the filter left it out
