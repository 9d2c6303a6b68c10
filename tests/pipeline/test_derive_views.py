"""Which intermediates derive leaves as views (pipeline.derive.stays_view): a policy of speed
only; the marts' values are checked by the golden marts and the truth tests either way."""

from __future__ import annotations

import duckdb

from commscope.pipeline.derive import _VIEW_IF_EMPTY, inlined_intermediates, stays_view
from commscope.pipeline.sql_modules import discover


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
