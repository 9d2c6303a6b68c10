"""How derive writes a mart (pipeline.derive.write_mart): a mart that publishes a whole
call-sized intermediate takes the intermediate's Parquet file (a hard link or a copy) when the
file's statistics prove it holds the run alone; otherwise its rows are computed and written."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from commscope.pipeline.derive import _only_run, _run_rows, published_as_is, write_mart
from commscope.pipeline.sql_modules import SqlModule, discover


def _mart(name: str) -> SqlModule:
    return next(m for m in discover() if m.name == name)


def _session(folder: Path, runs: list[str | None]) -> duckdb.DuckDBPyConnection:
    """A derive-like session: a database file in ``folder`` (its private folder), the
    intermediate int_instances a view of ``folder/int_instances.parquet`` with one instance per
    run of ``runs``, and the mart collective_instances over it as the catalog defines it."""
    con = duckdb.connect(str(folder / "derive.duckdb"))
    con.execute("CREATE TABLE rows (run_id VARCHAR, instance_key VARCHAR, instance_seq BIGINT)")
    for i, r in enumerate(runs):
        con.execute("INSERT INTO rows VALUES (?, ?, ?)", [r, f"g|{i}", i])
    pq = folder / "int_instances.parquet"
    con.execute(f"COPY rows TO '{pq}' (FORMAT parquet, COMPRESSION zstd)")
    con.execute(f"CREATE VIEW int_instances AS SELECT * FROM read_parquet('{pq}')")
    con.execute("CREATE VIEW collective_instances AS SELECT * FROM int_instances")
    return con


def test_collective_instances_is_published_from_its_intermediate() -> None:
    assert published_as_is(discover()) == {"int_instances"}
    assert _mart("collective_instances").publishes == "int_instances"


def test_a_file_of_the_run_alone_becomes_the_mart(tmp_path: Path) -> None:
    con = _session(tmp_path, ["r", "r", "r"])
    dest = tmp_path / "marts" / "collective_instances" / "r" / "g1.parquet"
    assert write_mart(con, _mart("collective_instances"), dest, "r") == 3
    src = tmp_path / "int_instances.parquet"
    assert dest.read_bytes() == src.read_bytes()
    assert dest.stat().st_ino == src.stat().st_ino  # a hard link on one file system
    assert [p.name for p in dest.parent.iterdir()] == ["g1.parquet"]  # no temp file left


def test_a_copy_when_links_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    con = _session(tmp_path, ["r", "r"])

    def no_link(src: object, dst: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr("os.link", no_link)
    dest = tmp_path / "m.parquet"
    assert write_mart(con, _mart("collective_instances"), dest, "r") == 2
    src = tmp_path / "int_instances.parquet"
    assert dest.read_bytes() == src.read_bytes()
    assert dest.stat().st_ino != src.stat().st_ino


@pytest.mark.parametrize(
    ("runs", "only_r"),
    [
        (["r", "r"], True),
        ([], True),  # no rows: nothing of another run
        (["r", "s"], False),
        (["r", None], False),
    ],
)
def test_other_runs_rows_are_never_published(
    tmp_path: Path, runs: list[str | None], only_r: bool
) -> None:
    con = _session(tmp_path, runs)
    pq = str(tmp_path / "int_instances.parquet")
    assert _run_rows(con, [pq], "r") == (len(runs), only_r)
    assert _only_run(con, [pq], "r") is only_r
    dest = tmp_path / "m.parquet"
    assert write_mart(con, _mart("collective_instances"), dest, "r") == runs.count("r")
    got = con.execute(f"SELECT DISTINCT run_id FROM read_parquet('{dest}')").fetchall()
    assert got == ([("r",)] if "r" in runs else [])


def test_in_memory_every_mart_is_computed(tmp_path: Path) -> None:
    # no private folder (a small run derived in memory): the rows are computed and written
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE int_instances AS SELECT * FROM (VALUES ('r', 'g|0'), ('s', 'g|1')) "
        "AS t(run_id, instance_key)"
    )
    con.execute("CREATE VIEW collective_instances AS SELECT * FROM int_instances")
    dest = tmp_path / "m.parquet"
    assert write_mart(con, _mart("collective_instances"), dest, "s") == 1
