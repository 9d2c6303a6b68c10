"""A file-backed derive reads the run's calls through a view over the store's files (issue 21).

The view replaces the copy of ``comm_ops`` into the derive's database only where the files'
statistics show that every row is the run's; the SQL then sees the same rows and columns (the
unread ones null) as it saw in the copy, and every mart is the same (the whole-derive comparison
is ``tests/pipeline/test_derive_views.py``, whose file-backed derive takes this path).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb
import pytest

from commscope.pipeline import derive
from commscope.pipeline import run_config as rc

if TYPE_CHECKING:
    from pathlib import Path

    from commscope.pipeline.store import Store


def _write(con: duckdb.DuckDBPyConnection, path: Path, rows: str) -> str:
    con.execute(
        f"COPY (SELECT * FROM (VALUES {rows}) AS t(run_id, x)) TO '{path}' (FORMAT parquet)"
    )
    return str(path)


def test_only_run_reads_the_files_statistics(tmp_path: Path) -> None:
    con = duckdb.connect()
    empty = str(tmp_path / "empty.parquet")
    con.execute(
        f"COPY (SELECT 'r'::VARCHAR AS run_id, 1 AS x LIMIT 0) TO '{empty}' (FORMAT parquet)"
    )
    a = _write(con, tmp_path / "a.parquet", "('r', 1), ('r', 2)")
    b = _write(con, tmp_path / "b.parquet", "('r', 3), ('s', 4)")
    assert derive._only_run(con, [empty, a], "r")
    assert not derive._only_run(con, [empty, a], "s")
    assert not derive._only_run(con, [empty, a, b], "r")
    assert derive._run_rows(con, [empty, a, b], "r") == (4, False)
    assert derive._run_rows(con, [], "r") == (0, True)


def test_file_view_keeps_the_columns_and_nulls_the_unread(tmp_path: Path) -> None:
    con = duckdb.connect()
    path = tmp_path / "c.parquet"
    con.execute(
        f"COPY (SELECT 'r' AS run_id, 3 AS rank, 'f.log' AS source_file) TO '{path}' "
        "(FORMAT parquet)"
    )
    cols = [("run_id", "VARCHAR"), ("rank", "INTEGER"), ("source_file", "VARCHAR")]
    derive._create_file_view(con, "comm_ops", [str(path)], cols, frozenset({"run_id", "rank"}))
    assert [r[0] for r in con.execute("DESCRIBE comm_ops").fetchall()] == [c for c, _ in cols]
    assert con.execute("SELECT * FROM comm_ops").fetchall() == [("r", 3, None)]


@pytest.mark.slow
def test_file_backed_derive_reads_comm_ops_through_a_view(
    gfbench_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = gfbench_store
    stored = rc.load(store, "r")

    def calls(con: duckdb.DuckDBPyConnection) -> list[tuple[object, ...]]:
        return con.execute("SELECT * FROM stg_store__comm_ops ORDER BY ALL").fetchall()

    in_memory, _ = derive.connect_for_derive(store, "r", stored, prune=True)
    table = "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'comm_ops'"
    assert in_memory.execute(table).fetchone() == (1,)  # a small run: copied into memory
    copied = calls(in_memory)
    derive.close_session(in_memory)
    monkeypatch.setattr(derive, "ON_DISK_ROWS", 1)
    on_disk, _ = derive.connect_for_derive(store, "r", stored, prune=True)
    try:
        kinds = on_disk.execute(
            "SELECT count(*) FROM duckdb_views() WHERE view_name = 'comm_ops'"
        ).fetchone()
        assert kinds == (1,)
        assert len(copied) > 0
        assert calls(on_disk) == copied
    finally:
        derive.close_session(on_disk)
