"""Issue 23: ``commscope query`` is read-only by construction, and the catalog is safe to build.

Each test reproduces one attack of the issue against a real store (a real NCCL sample,
ingested) and checks the store afterwards byte for byte, not only the exit status:

* ``EXPLAIN ANALYZE COPY ... TO '<store>/...'`` (and its variants) wrote a forged commit-log row,
  forged ``comm_ops`` Parquet, over ``STORE.json`` and a ``logging.yml`` into Prefect's home;
* the session's file access allowed the whole store folder (so any statement slipping past the
  statement check could write there);
* Prefect's home (whose ``logging.yml`` runs code) lived in the store;
* mart and model-input folder names were placed unquoted into the catalog's SQL;
* a plain query while a ``query --write`` session was open rebuilt the catalog under it;
* a store written by a newer schema was silently rewritten down to this code's version;
* ``query`` had no memory limit and spilled into the working directory.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from commscope.parsers.schema import SCHEMA_VERSION
from commscope.pipeline.catalog import Catalog
from commscope.pipeline.cli import main
from commscope.pipeline.commands.query import confine
from commscope.pipeline.ingest import STATUS_OK, ingest_file
from commscope.pipeline.store import Store, StoreError

SMALL = "nccl_debug/gfbench_2.20.5_2rank_normal_rank0_debugfile.txt"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def qstore(tmp_path: Path, shared_samples: Path) -> Path:
    """A store holding one real NCCL log (run ``q``), catalog built."""
    root = tmp_path / "store"
    res = ingest_file(Store.open(root), shared_samples / SMALL, run_id="q")
    assert res.status == STATUS_OK, res
    Store.open(root).ensure_catalog()
    return root


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes): the store's whole state."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _query(capsys: pytest.CaptureFixture[str], store: Path, sql: str, *flags: str):
    rc = main(["query", sql, "--store", str(store), "--format", "csv", *flags])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _count(capsys: pytest.CaptureFixture[str], store: Path, sql: str) -> int:
    rc, out, err = _query(capsys, store, sql)
    assert rc == 0, err
    return int(out.splitlines()[1])


# --------------------------------------------------------------------------- writes via EXPLAIN


def _attacks(store: Path) -> dict[str, str]:
    """The issue's writes, as statements a read-only query used to accept (name -> SQL)."""
    forged_log = store / "tables" / "ingested_files" / "q" / "forged.parquet"
    forged_ops = store / "tables" / "comm_ops" / "q" / "forged.parquet"
    prefect = store / ".prefect"
    ops = "SELECT * FROM comm_ops"
    return {
        "forged commit-log row": f"EXPLAIN ANALYZE COPY (SELECT * FROM ingested_files LIMIT 1) "
        f"TO '{forged_log}' (FORMAT parquet)",
        "forged comm_ops": f"EXPLAIN ANALYZE COPY ({ops}) TO '{forged_ops}' (FORMAT parquet)",
        "STORE.json overwritten": f"EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{store / 'STORE.json'}' "
        "(FORMAT json)",
        "logging.yml in Prefect's home": f"EXPLAIN ANALYZE COPY (SELECT 'version: 1' AS a) "
        f"TO '{prefect / 'logging.yml'}' (FORMAT csv, HEADER false)",
        "plain EXPLAIN COPY": f"EXPLAIN COPY ({ops}) TO '{forged_ops}'",
        "comments between the words": f"/* a */ EXPLAIN -- b\n /* c */ ANALYZE /* d */ COPY "
        f"({ops}) TO '{forged_ops}'",
        "options in parentheses": f"EXPLAIN (ANALYZE, FORMAT json) COPY ({ops}) TO '{forged_ops}'",
        "options after ANALYZE": f"EXPLAIN ANALYZE (FORMAT json) COPY ({ops}) TO '{forged_ops}'",
        "lower case": f"explain analyze copy ({ops}) to '{forged_ops}'",
        "second statement": f"SELECT 1; EXPLAIN ANALYZE COPY ({ops}) TO '{forged_ops}'",
        "INSERT": "EXPLAIN ANALYZE INSERT INTO comm_ops SELECT * FROM comm_ops",
        "CTE INSERT": "EXPLAIN ANALYZE WITH x AS (SELECT 1 AS a) INSERT INTO mine SELECT * FROM x",
        "CREATE": "EXPLAIN ANALYZE CREATE TABLE mine AS SELECT 1 AS a",
        "CREATE VIEW": "EXPLAIN ANALYZE CREATE VIEW mine AS SELECT 1 AS a",
        "ATTACH": f"EXPLAIN ANALYZE ATTACH '{store / 'tables' / 'x.duckdb'}' AS x",
        "EXPORT": f"EXPLAIN ANALYZE EXPORT DATABASE '{store / 'tables' / 'exported'}'",
        "UPDATE": "EXPLAIN ANALYZE UPDATE comm_ops SET rank = 0",
        "nested EXPLAIN": f"EXPLAIN ANALYZE EXPLAIN ANALYZE COPY ({ops}) TO '{forged_ops}'",
        "query() table function": f"SELECT * FROM query('COPY ({ops}) TO ''{forged_ops}''')",
        "query() of an EXPLAIN": "SELECT * FROM query('EXPLAIN ANALYZE COPY (SELECT 1 AS a) "
        f"TO ''{forged_ops}''')",
    }


def test_explain_of_a_writing_statement_writes_nothing(
    qstore: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every EXPLAIN form of a writing statement is refused and the store stays byte-identical
    (the issue: EXPLAIN ANALYZE COPY passed as an EXPLAIN and wrote into the store)."""
    (qstore / ".prefect").mkdir()  # a store made by an older commscope has Prefect's home here
    rows = _count(capsys, qstore, "SELECT count(*) AS n FROM comm_ops")
    before = _snapshot(qstore)
    for name, sql in _attacks(qstore).items():
        rc, _, err = _query(capsys, qstore, sql)
        assert rc != 0, name
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, (name, err)
        assert _snapshot(qstore) == before, f"{name}: the store changed"
    assert not (qstore / ".prefect" / "logging.yml").exists()
    assert _count(capsys, qstore, "SELECT count(*) AS n FROM comm_ops") == rows


def test_legitimate_reads_still_run(qstore: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN [ANALYZE] SELECT keep working."""
    before = _snapshot(qstore)
    rows = _count(capsys, qstore, "SELECT count(*) AS n FROM comm_ops")
    assert rows > 0
    assert _count(capsys, qstore, "WITH x AS (SELECT * FROM comm_ops) SELECT count(*) FROM x") == (
        rows
    )
    for sql in (
        "DESCRIBE comm_ops",
        "SHOW TABLES",
        "SUMMARIZE comm_ops",
        "FROM comm_ops LIMIT 1",
        "EXPLAIN SELECT count(*) FROM comm_ops",
        "EXPLAIN ANALYZE SELECT count(*) FROM comm_ops",
        "/* why */ EXPLAIN (FORMAT json) SELECT 1",
    ):
        rc, out, err = _query(capsys, qstore, sql)
        assert rc == 0 and out.strip(), (sql, err)
    assert _snapshot(qstore) == before


def test_session_cannot_write_to_the_store_even_past_the_statement_check(qstore: Path) -> None:
    """Second layer, tested on its own: a confined session (as a read-only query runs) cannot
    write STORE.json, the catalog's folder or Prefect's old home, nor read outside the data
    folders, even for a statement that the statement check would have refused."""
    store = Store.open(qstore, create=False)
    before = _snapshot(qstore)
    con = duckdb.connect()
    try:
        confine(con, store)
        glob = store.table_glob("comm_ops")
        rows = con.execute(f"SELECT count(*) FROM read_parquet('{glob}')").fetchone()
        assert rows is not None and rows[0] > 0  # the data folders stay readable
        for target in (
            qstore / "STORE.json",
            qstore / ".prefect" / "logging.yml",
            qstore / "forged.parquet",
            qstore.parent / "outside.parquet",
        ):
            with pytest.raises(duckdb.PermissionException):
                con.execute(f"COPY (SELECT 1 AS a) TO '{target}'")
        with pytest.raises(duckdb.PermissionException):
            con.execute(f"SELECT * FROM read_text('{qstore / 'STORE.json'}')").fetchall()
        with pytest.raises(duckdb.Error):
            con.execute("SET allowed_directories = ['/']")  # the configuration is locked
    finally:
        con.close()
    assert _snapshot(qstore) == before


@pytest.mark.parametrize("source", ["", " FROM (SELECT count(*) FROM int_run_world)"])
def test_query_has_derives_memory_limit_and_a_private_spill_folder(
    source: str,
    qstore: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``query`` is capped like derive (COMMSCOPE_DERIVE_MEMORY_LIMIT) and spills outside the
    store and the working directory (before: DuckDB's default, 80% of RAM, and ``./.tmp``);
    also a query naming an intermediate view (computed in memory: Store.connect_computed)."""
    monkeypatch.setenv("COMMSCOPE_DERIVE_MEMORY_LIMIT", "123MB")
    ref = duckdb.connect()
    ref.execute("SET memory_limit = '123MB'")
    want = ref.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    ref.close()
    rc, out, err = _query(
        capsys,
        qstore,
        "SELECT current_setting('memory_limit') AS m, current_setting('temp_directory') AS t"
        + source,
    )
    assert rc == 0, err
    limit, temp = out.splitlines()[1].split(",")
    assert limit == want
    assert not Path(temp).resolve().is_relative_to(qstore)
    assert Path(temp).is_absolute() and not Path(temp).exists()  # removed after the query


def test_query_on_an_intermediate_view_is_confined_too(
    qstore: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The in-memory session that computes intermediate views reads only the store's data
    folders and keeps its configuration locked, like the catalog session."""
    before = _snapshot(qstore)
    outside = qstore.parent / "outside.csv"
    outside.write_text("a\n1\n")
    for sql in (
        f"SELECT * FROM int_run_world, read_csv('{outside}')",
        f"SELECT * FROM read_parquet('{qstore}/STORE.json') JOIN int_run_world ON true",
    ):
        rc, out, err = _query(capsys, qstore, sql)
        assert rc == 1 and out == "", sql
        assert "query failed: Permission Error" in err, err
    rc, _, err = _query(capsys, qstore, "SELECT count(*) FROM int_run_world; SET threads = 1")
    assert rc == 1 and "not allowed" in err, err
    assert _snapshot(qstore) == before


# --------------------------------------------------------------------------- Prefect's home


def test_prefect_home_is_outside_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing executable where a query can write: Prefect's home (its logging.yml names
    classes to run) is per store but outside it; a user's PREFECT_HOME is honoured."""
    from commscope.pipeline.commands.serve import prepare_prefect_env

    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    homes = []
    for name in ("a", "b", "a"):
        monkeypatch.setenv("PREFECT_HOME", "unset-below")
        monkeypatch.delenv("PREFECT_HOME")
        monkeypatch.delenv("PREFECT_API_URL", raising=False)
        store = tmp_path / name
        prepare_prefect_env(store)
        home = Path(os.environ["PREFECT_HOME"])
        assert home.is_dir() and home.is_relative_to(state)
        assert not home.resolve().is_relative_to(store.resolve())
        assert not (store / ".prefect").exists()
        homes.append(home)
    assert homes[0] == homes[2] and homes[0] != homes[1]  # one home per store path
    mine = tmp_path / "mine"
    monkeypatch.setenv("PREFECT_HOME", str(mine))
    prepare_prefect_env(tmp_path / "a")
    assert os.environ["PREFECT_HOME"] == str(mine)


# --------------------------------------------------------------------------- folder names


def test_hostile_folder_names_are_skipped_not_run(
    qstore: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A mart or model-input folder whose name is SQL (or just not a plain name) is skipped
    with a warning: nothing in the name runs and query, derive and report keep working
    (before: the name was interpolated into CREATE VIEW, a parser error broke every command
    and a crafted name ran as SQL in the unconfined catalog rebuild)."""
    payload = "x AS SELECT 1; CREATE TABLE pwned AS SELECT 42 AS a; --"
    bad = {
        qstore / "marts" / payload,
        qstore / "marts" / "traffic matrix (copy)",
        qstore / "model_inputs" / payload,
        qstore / "model_inputs" / "run_config (copy)",
    }
    for folder in bad:
        folder.mkdir(parents=True)
        duckdb.sql(f"COPY (SELECT 1 AS a) TO '{folder / 'q.parquet'}'")
    with caplog.at_level(logging.WARNING):
        rows = _count(capsys, qstore, "SELECT count(*) FROM comm_ops")
    assert rows > 0
    warned = caplog.text
    for folder in bad:
        assert repr(folder.name) in warned, folder
    names = _query(capsys, qstore, "SELECT table_name FROM information_schema.tables")[1]
    assert "pwned" not in names and "traffic matrix" not in names
    assert main(["derive", "q", "--store", str(qstore)]) == 0, capsys.readouterr().err
    out = qstore.parent / "q.html"
    assert main(["report", "q", "--store", str(qstore), "-o", str(out)]) == 0, (
        capsys.readouterr().err
    )
    assert out.stat().st_size > 0
    capsys.readouterr()
    assert (
        _count(capsys, qstore, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'pwned'")
        == 0
    )
    # The good marts derive wrote are in the catalog beside the skipped folders.
    marts = [m for m in Store.open(qstore).materialised_marts() if m.isidentifier()]
    assert marts
    assert _count(capsys, qstore, f"SELECT count(*) FROM {marts[0]}") >= 0


# --------------------------------------------------------------------------- --write sessions


_WRITER = """
import sys
from pathlib import Path

import duckdb

from commscope.pipeline.store import Store

store = Store.open(Path(sys.argv[1]), create=False)
if sys.argv[2] == "session":  # what `commscope query --write` opens
    session = store.write_session()
else:  # the duckdb CLI, or any other program, on the catalog file
    session = duckdb.connect(str(store.catalog_path))
with session as con:
    con.execute("CREATE TABLE mine AS SELECT 41 AS a")
    print("open", flush=True)
    sys.stdin.readline()  # held open until the test says so
    con.execute("INSERT INTO mine VALUES (1)")
print("closed", flush=True)
"""


def _cli(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "commscope", *args, "--store", str(store)]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.mark.parametrize("writer_kind", ["session", "duckdb"])
def test_plain_query_during_a_write_session_is_refused_and_nothing_is_lost(
    qstore: Path, writer_kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``query --write`` session and a plain query at once: the plain one (and a second
    writer) is refused with one line, the catalog is not rebuilt under the writer even when it
    is stale, and the writer's table survives (before: the plain query replaced the catalog,
    the writer's log no longer matched it, and its table was lost)."""
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(qstore), writer_kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert writer.stdout is not None and writer.stdin is not None
        assert writer.stdout.readline().strip() == "open", writer.stderr.read()  # type: ignore[union-attr]
        # A new mart makes the catalog stale: a command now wants to rebuild it.
        mart = qstore / "marts" / "extra_mart"
        mart.mkdir(parents=True)
        duckdb.sql(f"COPY (SELECT 1 AS a) TO '{mart / 'q.parquet'}'")
        catalog = qstore / "catalog.duckdb"
        inode = catalog.stat().st_ino
        for args in (("query", "SELECT 1 AS a"), ("query", "SELECT 1 AS a", "--write")):
            proc = _cli(qstore, *args)
            assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
            err = proc.stderr.strip()
            assert "Traceback" not in err and len(err.splitlines()) == 1, err
            assert "catalog" in err and "try again" in err, err
        assert catalog.stat().st_ino == inode  # not replaced under the writer
        writer.stdin.write("\n")
        writer.stdin.flush()
        assert writer.stdout.readline().strip() == "closed"
    finally:
        if writer.stdin is not None:
            writer.stdin.close()  # a writer still waiting reads EOF and ends
        try:
            writer.wait(timeout=120)
        except subprocess.TimeoutExpired:
            writer.kill()
            writer.wait()
    assert writer.returncode == 0, writer.stderr.read()  # type: ignore[union-attr]
    # The session's work is all there (the catalog is current again without the new mart;
    # a rebuild drops what --write created, as documented, so it must not have happened).
    shutil.rmtree(mart)
    assert _count(capsys, qstore, "SELECT sum(a) FROM mine") == 42
    # Once the session ended, the next command rebuilds a stale catalog as usual.
    mart.mkdir()
    duckdb.sql(f"COPY (SELECT 1 AS a) TO '{mart / 'q.parquet'}'")
    assert _count(capsys, qstore, "SELECT count(*) FROM extra_mart") == 1


# --------------------------------------------------------------------------- schema versions


def _newer_versions() -> list[str]:
    major, minor, patch = (int(p) for p in SCHEMA_VERSION.split("."))
    return [f"{major}.{minor + 7}.0", f"{major}.{minor}.{patch + 1}", f"{major + 1}.0.0"]


@pytest.mark.parametrize("version", _newer_versions())
def test_store_of_a_newer_schema_is_refused_never_rewritten(
    qstore: Path, version: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store written by a newer commscope is refused with one line by query (and by opening
    it for ingest), and STORE.json is left as it is (before: rewritten down to this version)."""
    meta = qstore / "STORE.json"
    meta.write_text(meta.read_text().replace(f'"{SCHEMA_VERSION}"', f'"{version}"'))
    assert version in meta.read_text()
    before = _snapshot(qstore)
    rc, _, err = _query(capsys, qstore, "SELECT 1 AS a")
    assert rc == 2 and version in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(StoreError, match=version.replace(".", r"\.")):
        Store.open(qstore)
    assert _snapshot(qstore) == before


def test_unreadable_store_metadata_is_one_line(
    qstore: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A STORE.json that is not JSON (or not an object) is a clear error, not a traceback."""
    meta = qstore / "STORE.json"
    for text in ("{not json", "[]", '{"schema_version": "one"}'):
        meta.write_text(text)
        rc, _, err = _query(capsys, qstore, "SELECT 1 AS a")
        assert rc == 2 and "STORE.json" in err and "Traceback" not in err, (text, err)
        assert meta.read_text() == text


def test_catalog_rebuild_reads_only_the_store_data(
    qstore: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rebuild runs SQL built from the store's folders: it is confined like a query (in the
    issue a name that slipped through ran unconfined and copied /etc/passwd into a table)."""
    outside = tmp_path / "secret.txt"
    outside.write_text("secret\n")
    seen: list[str] = []
    original = Catalog.create_all_views

    def spy(self: Catalog, con: duckdb.DuckDBPyConnection, **kw: Any) -> None:
        try:
            con.execute(f"SELECT * FROM read_text('{outside}')").fetchall()
            seen.append("read")
        except duckdb.PermissionException:
            seen.append("refused")
        original(self, con, **kw)

    monkeypatch.setattr(Catalog, "create_all_views", spy)
    Store.open(qstore, create=False).refresh_catalog()
    assert seen and set(seen) == {"refused"}  # (a second time when the one-transaction build
    # is aborted by the refused read and the catalog is built statement by statement)
    con = duckdb.connect(str(qstore / "catalog.duckdb"), read_only=True)
    try:  # the rebuilt catalog is complete
        assert con.execute("SELECT count(*) FROM comm_ops").fetchone()[0] > 0  # type: ignore[index]
    finally:
        con.close()


def test_query_on_a_store_it_cannot_write_uses_the_catalog_there_is(
    qstore: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stale catalog in a store this process cannot write (a read-only mount): the query
    runs on the existing catalog with a warning; with no catalog at all it is one error line,
    never an OSError traceback. (Simulated: the tests may run as root, where chmod binds not.)"""

    def read_only_fs(self: Catalog) -> None:
        raise PermissionError(13, "Permission denied", str(self.store.root / ".lock"))

    monkeypatch.setattr(Catalog, "refresh_catalog", read_only_fs)
    monkeypatch.setattr(Catalog, "catalog_current", lambda self: False)
    assert _count(capsys, qstore, "SELECT count(*) FROM comm_ops") > 0
    (qstore / "catalog.duckdb").unlink()
    rc, _, err = _query(capsys, qstore, "SELECT 1 AS a")
    assert rc == 2 and "Permission denied" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1
