"""Schema evolution: stores written by earlier schema versions open, read, grow and derive.

Each ``tests/fixtures/store_v<version>/`` was written by the code of that version (see
``tests/fixtures/make_store_fixture.py``). The current code must open a copy (migrating it if
the minor version is older), show every table through the catalog with every current column,
ingest one more file into it, skip content it already holds, and derive the run's marts.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType

import pyarrow.parquet as pq
import pytest

from commscope.parsers.schema import SCHEMA_VERSION, TABLES
from commscope.pipeline.derive import derive_run
from commscope.pipeline.ingest import STATUS_OK, STATUS_SKIPPED, ingest_file
from commscope.pipeline.store import Store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STORES = sorted(FIXTURES.glob("store_v*"))
RUN_ID = "fixture_run"

# Synthetic: one more NCCL debug log for the old store (not among the fixture's inputs).
EXTRA_NCCL = """\
# synthetic, hand-written for test_schema_evolution
node1:7:7 [1] NCCL INFO NCCL version 2.18.5+cuda12.2
node1:7:7 [1] NCCL INFO comm 0x6666 rank 1 nranks 2 cudaDev 1 busId 2000 - Init COMPLETE
node1:7:7 [1] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f00 recvbuff 0x7f00 count 1024 \
datatype 7 op 0 root 0 comm 0x6666 [nranks=2] stream 0x9999
node1:7:7 [1] NCCL INFO AllReduce: opCount 1 sendbuff 0x7f00 recvbuff 0x7f00 count 2048 \
datatype 7 op 0 root 0 comm 0x6666 [nranks=2] stream 0x9999
node1:7:7 [1] NCCL INFO Broadcast: opCount 2 sendbuff 0x7f00 recvbuff 0x7f00 count 64 \
datatype 0 op 0 root 0 comm 0x6666 [nranks=2] stream 0x9999
"""


def _maker() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_store_fixture", FIXTURES / "make_store_fixture.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _committed_rows(root: Path) -> dict[str, int]:
    """Rows per table in committed batches, read straight from the Parquet footers."""
    log_dir = root / "tables" / "ingested_files" / RUN_ID
    batches = {f.stem for f in log_dir.glob("*.parquet")}
    out: dict[str, int] = {}
    for table_dir in sorted((root / "tables").iterdir()):
        n = 0
        for f in table_dir.glob(f"{RUN_ID}/*.parquet"):
            if f.stem in batches:
                n += pq.read_metadata(f).num_rows
        out[table_dir.name] = n
    return out


def test_fixtures_exist_and_are_small() -> None:
    assert STORES, f"no store_v* fixture in {FIXTURES}"
    for d in STORES:
        size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
        assert size < 320 * 1024, (d, size)  # 1.7.0: 267 KiB, column docs in every footer
        meta = json.loads((d / "STORE.json").read_text())
        assert d.name == f"store_v{meta['schema_version']}"


@pytest.fixture(params=STORES, ids=[d.name for d in STORES])
def old_store(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    dest = tmp_path / "store"
    shutil.copytree(request.param, dest)
    return dest


def test_old_store_opens_reads_grows_and_derives(old_store: Path, tmp_path: Path) -> None:
    expected = _committed_rows(old_store)
    assert expected["ingested_files"] >= 3 and expected["comm_ops"] > 0

    store = Store.open(old_store, create=False)
    meta = json.loads((old_store / "STORE.json").read_text())
    assert meta["schema_version"] == SCHEMA_VERSION

    con = store.connect(read_only=True)
    try:
        for name, spec in TABLES.items():
            cols = [r[0] for r in con.execute(f"DESCRIBE {name}").fetchall()]
            missing = [c.name for c in spec.columns if c.name not in cols]
            assert not missing, (name, missing)
            (n,) = con.execute(f"SELECT count(*) FROM {name}").fetchone()  # type: ignore[misc]
            assert n == expected.get(name, 0), name
            con.execute(f"SELECT * FROM {name} LIMIT 5").fetchall()
        runs = con.execute("SELECT DISTINCT run_id FROM ingested_files").fetchall()
        assert runs == [(RUN_ID,)]
        bad = con.execute(
            "SELECT count(*) FROM ingested_files "
            "WHERE lines_total <> lines_parsed + lines_ignored + lines_rejected"
        ).fetchone()
        assert bad == (0,)
    finally:
        con.close()

    # The same content as before is recognised as already ingested (exactly once across versions).
    again = tmp_path / "again" / "nccl_rank0.log"
    again.parent.mkdir()
    again.write_text(_maker().HAND_WRITTEN_NCCL)
    assert ingest_file(store, again, run_id=RUN_ID).status == STATUS_SKIPPED

    extra = tmp_path / "extra" / "nccl_rank1.log"
    extra.parent.mkdir()
    extra.write_text(EXTRA_NCCL)
    res = ingest_file(store, extra, run_id=RUN_ID)
    assert res.status == STATUS_OK, res.message
    assert res.counts.total == EXTRA_NCCL.count("\n")
    store.ensure_catalog()
    con = store.connect(read_only=True)
    try:
        (files,) = con.execute("SELECT count(*) FROM ingested_files").fetchone()  # type: ignore[misc]
        assert files == expected["ingested_files"] + 1
        (ops,) = con.execute("SELECT count(*) FROM comm_ops").fetchone()  # type: ignore[misc]
        assert ops == expected["comm_ops"] + res.rows["comm_ops"]
        new = con.execute(
            "SELECT schema_version FROM ingested_files WHERE path LIKE '%nccl_rank1.log'"
        ).fetchall()
        assert new == [(SCHEMA_VERSION,)]
    finally:
        con.close()

    result = derive_run(store, RUN_ID)
    assert result.marts, "no mart derived"
    con = store.connect(read_only=True)
    try:
        for mart in result.marts:
            con.execute(f"SELECT * FROM {mart} LIMIT 1").fetchall()
    finally:
        con.close()
