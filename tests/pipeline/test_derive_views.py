"""Which intermediates derive leaves as views (pipeline.derive.stays_view): a policy of speed
only; the marts' values are checked by the golden marts and the truth tests either way."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest

from commscope.pipeline import derive
from commscope.pipeline.derive import (
    _VIEW_IF_EMPTY,
    DeriveResult,
    derive_run,
    inlined_intermediates,
    stays_view,
)
from commscope.pipeline.sql_modules import discover
from commscope.pipeline.store import Store


def test_int_calls_stays_a_view_only_while_int_call_sources_is_empty() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE int_call_sources (run_id VARCHAR, role VARCHAR)")
    assert _VIEW_IF_EMPTY["int_calls"] == "int_call_sources"
    assert stays_view(con, "int_calls")  # one tool per rank: nothing paired
    con.execute("INSERT INTO int_call_sources VALUES ('r', 'paired')")
    assert not stays_view(con, "int_calls")  # paired records: computed once, stored


def test_other_intermediates_are_materialised() -> None:
    con = duckdb.connect()
    assert not stays_view(con, "int_comm_ops_classified")
    assert not stays_view(con, "int_instance_matched")


def test_instance_members_is_a_view_over_the_stored_matching() -> None:
    # int_instance_members only adds instance_key to int_instance_matched (a table in derive)
    inlined = inlined_intermediates(discover())
    assert {"int_instance_members", "int_instance_calls"} <= inlined
    assert "int_instance_matched" not in inlined
    assert "int_instance_groups" not in inlined


@pytest.mark.slow
def test_file_backed_derive_holds_call_sized_intermediates_as_parquet(
    gfbench_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run of ON_DISK_ROWS calls or more is derived in a database file, where the call-sized
    # intermediates are Parquet files read through views (the file's table writes cost about
    # twice as much CPU at 1024 ranks). Derived that way, every mart is what the in-memory
    # derive gives.
    store = gfbench_store

    def marts(res: DeriveResult) -> dict[str, pl.DataFrame]:
        assert res.generation is not None
        out = {}
        for name in res.marts:
            df = pl.read_parquet(
                store.generation_path(store.marts_dir(), name, "r", res.generation)
            )
            out[name] = df.sort(df.columns, nulls_last=True)
        return out

    copied: list[str] = []
    real_copy = derive._copy_atomic

    def copy_spy(con: duckdb.DuckDBPyConnection, sql: str, dest: Path, run_id: str) -> None:
        copied.append(dest.parent.parent.name)  # marts/<mart>/<run>/<generation>.parquet
        real_copy(con, sql, dest, run_id)

    monkeypatch.setattr(derive, "_copy_atomic", copy_spy)
    in_memory = marts(derive_run(store, "r"))
    assert "collective_instances" in copied  # in memory: every mart is computed and written
    written: dict[str, str] = {}
    real = derive._materialise_parquet

    def spy(con: duckdb.DuckDBPyConnection, name: str, folder: Path, compression: str) -> None:
        written[name] = compression
        real(con, name, folder, compression)
        assert (folder / f"{name}.parquet").is_file()

    monkeypatch.setattr(derive, "ON_DISK_ROWS", 1)
    monkeypatch.setattr(derive, "_materialise_parquet", spy)
    copied.clear()
    on_disk = marts(derive_run(store, "r"))
    assert sorted(written) == sorted(derive._AS_PARQUET)
    # the intermediate a mart publishes whole is written in the marts' codec, and its file is
    # the mart's: the mart is not computed again
    assert written.pop("int_instances") == "zstd"
    assert set(written.values()) == {"lz4_raw"}
    assert "collective_instances" not in copied
    assert len(copied) == len(on_disk) - 1
    assert in_memory.keys() == on_disk.keys()
    assert sum(len(df) for df in in_memory.values()) > 0
    for name, df in in_memory.items():
        assert df.equals(on_disk[name]), name
