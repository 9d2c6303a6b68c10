"""The objects that count the calls per call shape first equal their per-call definitions.

Why: ``int_calls_tallied``, ``int_rank_primary_source``, ``call_signatures`` and the NCCL counters
of ``int_hang_group_progress`` count the calls per ``shape_id`` of ``int_comm_ops_shaped`` and join
the few shapes (``int_comm_op_shapes``) afterwards, instead of reading every call's strings (issue
21: 18 M calls at 1024 ranks). ``int_calls_tallied`` also restates which calls ``int_calls`` takes
as logged (no paired record, no NCCL all-to-all group). ``int_run_world``, ``int_groups_comm_keys``,
``int_groups_members``, ``int_rank_primary_source`` and ``int_rank_nodes`` read the calls' distinct
shapes (``int_comm_op_shape_keys``, with their numbers of calls) instead of the calls, and
``int_p2p_groups`` checks its rule on integers per shape and opCount. The oracles here are the
per-call definitions, written as they were before: each object must give exactly their rows on
every real sample, on a generated run logged by three tools (records paired into the NCCL log's
calls) and on hand-made calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from generated_runs import ingest_and_derive

from commscope.model.config import config_from_dict
from commscope.pipeline.sql_modules import SQL_DIR, with_dependencies
from commscope.pipeline.store import Store
from commscope.synthetic import GenerateOptions, generate
from commscope.synthetic.presets import tiny_config
from tests.sql.conftest import calls_tables, create_materialised, objects_over_store


def per_call(name: str) -> str:
    """``name``'s query as it read the calls before: the body of its file with each read of the
    calls' distinct shapes (int_comm_op_shape_keys) a read of the calls (stg_store__comm_ops,
    which has every column these views take from a shape)."""
    sql = (SQL_DIR / "intermediate" / f"{name}.sql").read_text()
    body = sql[sql.index("\n) AS\n") + len("\n) AS\n") :]
    assert "int_comm_op_shape_keys" in body
    return body.replace("int_comm_op_shape_keys", "stg_store__comm_ops")


ORACLES = {
    # every logical call of int_calls, one by one
    "int_calls_tallied": """
        SELECT
          run_id, rank, source_format, op, traffic_class, is_traffic, msg_bytes, group_size,
          group_source, global_group, timing_source, bytes_source, duration_source,
          dur_ns IS NOT NULL AS timed,
          coalesce(timing_source, '') <> 'none' AND coalesce(dur_ns > 0, false)
            OR busbw_gbps IS NOT NULL AS bw_per_call,
          n_sources > 1 AS multi_source, size_conflict, count(*)::BIGINT AS calls
        FROM int_calls
        GROUP BY ALL
    """,
    # the rule on every call of stg_store__comm_ops, each joined to the groups
    "int_rank_primary_source": """
        WITH
          keys AS (SELECT * FROM int_groups_comm_keys WHERE members_complete),
          per_format AS (
            SELECT
              o.run_id, o.rank, o.source_format,
              count(*) FILTER (WHERE o.is_traffic) AS traffic_calls,
              count(*) FILTER (
                WHERE o.is_traffic AND (
                  ck.comm_id IS NOT NULL OR pk.comm_id IS NOT NULL OR o.group_size = w.world_size
                )
              ) AS placed_calls,
              count(*) FILTER (WHERE o.is_traffic AND o.dur_ns IS NOT NULL) AS timed_calls,
              count(*) AS calls
            FROM stg_store__comm_ops AS o
            LEFT JOIN int_run_world AS w ON w.run_id = o.run_id
            LEFT JOIN keys AS ck
              ON ck.key_kind = 'communicator' AND ck.run_id = o.run_id
              AND ck.comm_id = o.comm_id AND coalesce(ck.host, '') = coalesce(o.host, '')
              AND coalesce(ck.pid, -1) = coalesce(o.pid, -1) AND ck.global_rank = o.rank
            LEFT JOIN keys AS pk
              ON pk.key_kind = 'process_group' AND pk.run_id = o.run_id
              AND pk.comm_id = o.comm_id AND pk.group_size = o.group_size
            WHERE o.rank IS NOT NULL
            GROUP BY o.run_id, o.rank, o.source_format
          )
        SELECT run_id, rank, source_format, traffic_calls, placed_calls,
          count(*) OVER (PARTITION BY run_id, rank) AS formats_logged
        FROM per_format
        QUALIFY row_number() OVER (
          PARTITION BY run_id, rank
          ORDER BY primary_source_order(source_format, traffic_calls, placed_calls, timed_calls, calls)
        ) = 1
    """,
    # the largest group size and rank of every call, every run of any call
    "int_run_world": per_call("int_run_world"),
    # the process groups of every call
    "int_groups_comm_keys": per_call("int_groups_comm_keys"),
    # a process group's members and their group ranks from every call
    "int_groups_members": per_call("int_groups_members"),
    # the Send/Recv lines of every NCCL call grouped on their names (nulls equal), with the
    # rule in one pass: a Send to and a Recv from each member, each once
    "int_p2p_groups": """
        WITH
          lines AS (
            SELECT * FROM int_comm_ops_classified
            WHERE source_format = 'nccl_debug' AND op IN ('send', 'recv') AND seq IS NOT NULL
              AND comm_id IS NOT NULL AND group_size >= 2
          ),
          groups AS (
            SELECT
              run_id, rank, source_file, host, pid, comm_id, seq,
              sum(msg_bytes) FILTER (WHERE op = 'send')::BIGINT AS group_bytes,
              sum(msg_bytes) FILTER (WHERE op = 'recv')::BIGINT AS group_recv_bytes,
              count(*) AS group_lines,
              min(source_line) AS head_line,
              arg_min(call_key, source_line) AS head_key
            FROM lines
            GROUP BY run_id, rank, source_file, host, pid, comm_id, seq
            HAVING min(group_size) = max(group_size)
              AND count(*) FILTER (WHERE op = 'send') = max(group_size)
              AND count(*) FILTER (WHERE op = 'recv') = max(group_size)
              AND count(DISTINCT peer_rank) FILTER (WHERE op = 'send') = max(group_size)
              AND count(DISTINCT peer_rank) FILTER (WHERE op = 'recv') = max(group_size)
          )
        SELECT
          l.run_id, l.rank, l.source_file, l.source_line, l.call_key, l.op, l.peer_rank,
          l.msg_bytes, l.comm_id, l.seq, l.group_size, 'all_to_all', g.group_bytes,
          g.group_recv_bytes, g.group_lines, g.head_line, g.head_key
        FROM lines AS l
        JOIN groups AS g
          ON g.run_id = l.run_id AND g.rank IS NOT DISTINCT FROM l.rank
          AND g.source_file = l.source_file AND g.host IS NOT DISTINCT FROM l.host
          AND g.pid IS NOT DISTINCT FROM l.pid AND g.comm_id = l.comm_id AND g.seq = l.seq
    """,
    # every counted call of the classified calls
    "call_signatures": """
        SELECT run_id, rank, traffic_class, op, msg_bytes, max(group_size)::INTEGER AS group_size,
          count(*) AS calls, sum(msg_bytes)::BIGINT AS total_bytes,
          max(logged_size_tolerance(source_format, msg_bytes)) AS tol_bytes
        FROM int_comm_ops_classified
        WHERE counted AND is_traffic AND msg_bytes IS NOT NULL
        GROUP BY run_id, rank, traffic_class, op, msg_bytes
    """,
}
"""Object -> its per-call definition."""

NCCL_PROGRESS = """
    -- int_hang_group_progress's NCCL counters from every NCCL call: the largest opCount a member
    -- logged on the group's communicators, and whether any of them carried a Send/Recv line
    WITH
      per_call AS (
        SELECT c.run_id, c.group_name, c.global_rank AS rank, max(o.seq) AS last_seq,
          bool_or(o.op IN ('send', 'recv')) AS has_p2p
        FROM stg_store__comm_ops AS o
        JOIN int_hang_nccl_comms AS c
          ON c.run_id = o.run_id AND c.comm_id = o.comm_id AND c.pid = o.pid AND c.host = o.host
          AND c.global_rank = o.rank
        WHERE o.source_format = 'nccl_debug'
        GROUP BY ALL
      )
    SELECT p.run_id, p.group_name, p.rank, p.last_enqueued_seq, c.last_seq
    FROM int_hang_group_progress AS p
    JOIN per_call AS c USING (run_id, group_name, rank)
    WHERE p.source = 'nccl_debug' AND p.last_enqueued_seq IS DISTINCT FROM coalesce(c.last_seq, -1)
    UNION ALL
    SELECT p.run_id, p.group_name, p.rank, NULL, NULL
    FROM int_hang_group_progress AS p
    WHERE p.source = 'nccl_debug' AND p.is_p2p_group IS DISTINCT FROM (
      SELECT coalesce(bool_or(c.has_p2p), false) FROM per_call AS c
      WHERE c.run_id = p.run_id AND c.group_name = p.group_name
    )
"""
"""Rows of int_hang_group_progress's NCCL counters that disagree with the per-call oracle."""

RANK_HOSTS = """
    -- int_rank_nodes' hosts against every row one by one: the host most of the rank's calls and
    -- communicator rows name (ties: the first by name), and DuckDB's mode where one host has the
    -- most rows (its tie-break is the scan order)
    WITH
      logged AS (
        SELECT run_id, rank, host FROM stg_store__comm_ops WHERE rank IS NOT NULL
        UNION ALL
        SELECT run_id, global_rank, host FROM stg_store__communicators WHERE global_rank IS NOT NULL
      ),
      counts AS (
        SELECT run_id, rank, host, count(*) AS n FROM logged WHERE host IS NOT NULL GROUP BY ALL
      ),
      best AS (
        SELECT run_id, rank, host, count(*) OVER (PARTITION BY run_id, rank, n) AS n_tied
        FROM counts
        QUALIFY row_number() OVER (PARTITION BY run_id, rank ORDER BY n DESC, host) = 1
      ),
      modes AS (SELECT run_id, rank, mode(host) AS host FROM logged GROUP BY ALL)
    SELECT r.run_id, r.rank, r.host, b.host AS oracle, m.host AS mode_host, b.n_tied
    FROM int_rank_nodes AS r
    LEFT JOIN best AS b ON b.run_id = r.run_id AND b.rank = r.rank
    LEFT JOIN modes AS m ON m.run_id = r.run_id AND m.rank = r.rank
"""
"""Each rank of int_rank_nodes with the host of the per-call rule and DuckDB's mode."""

MAY_BE_EMPTY = {"int_p2p_groups", "int_groups_comm_keys"}
"""Objects without rows on the generated run (no all-to-all) or the hand-made calls (no
communicator, no process group); on the samples every object has rows."""

OBJECTS = (*ORACLES, "int_hang_group_progress", "int_rank_nodes")


def differences(con: duckdb.DuckDBPyConnection, name: str) -> tuple[int, int, int]:
    """Rows of ``name``, and rows only in it and only in its oracle (multisets)."""
    oracle = ORACLES[name]
    n = con.execute(f"SELECT count(*) FROM {name}").fetchone()
    extra = con.execute(f"SELECT count(*) FROM (FROM {name} EXCEPT ALL FROM ({oracle}))").fetchone()
    missing = con.execute(
        f"SELECT count(*) FROM (FROM ({oracle}) EXCEPT ALL FROM {name})"
    ).fetchone()
    assert n is not None and extra is not None and missing is not None
    return n[0], extra[0], missing[0]


def store_connection(store: Store) -> duckdb.DuckDBPyConnection:
    """Every run of ``store`` in memory with OBJECTS and what they read as tables (as derive)."""
    return objects_over_store(store, OBJECTS)


@pytest.fixture(scope="module")
def samples(all_samples: tuple[Store, dict[str, Path]]) -> Iterator[duckdb.DuckDBPyConnection]:
    """Every real sample (one run each)."""
    con = store_connection(all_samples[0])
    yield con
    con.close()


@pytest.fixture(scope="module")
def multisource(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    """8 ranks (PP2 x TP2 x DP2), 2 iterations, logged by NCCL, Kineto and the Inspector: every
    NCCL call an anchor of paired records."""
    tmp = tmp_path_factory.mktemp("tallied")
    cfg = config_from_dict(tiny_config(pp=2, tp=2, dp=2))
    opts = GenerateOptions(iterations=2, seed=4, formats=("nccl", "kineto", "inspector"))
    generate(cfg, opts, tmp / "gen")
    run = ingest_and_derive(tmp / "gen", tmp / "store", "ms")
    con = store_connection(run.store)
    yield con
    con.close()


def _line(
    rank: int, line: int, op: str, peer: int | None, nbytes: int, seq: int
) -> dict[str, object]:
    return {
        "run_id": "r",
        "rank": rank,
        "host": "h",
        "pid": 10 + rank,
        "source_format": "nccl_debug",
        "source_file": f"nccl_{rank}",
        "source_line": line,
        "op": op,
        "comm_id": f"0x{rank}",
        "group_size": 2,
        "group_rank": rank,
        "peer_rank": peer,
        "msg_bytes": nbytes,
        "seq": seq,
    }


@pytest.fixture(scope="module")
def hand_made() -> Iterator[duckdb.DuckDBPyConnection]:
    """Two ranks' NCCL logs: an all-to-all written as grouped Send/Recv lines (one logical
    call per rank, int_p2p_groups), all_reduce calls of two sizes, a timed Kineto trace of rank
    1's calls (its records paired with the log's) and a rankless timed call."""
    rows: list[dict[str, object]] = []
    for rank in (0, 1):
        rows += [_line(rank, 1 + i, "all_reduce", None, 64 if i % 3 else 128, i) for i in range(6)]
        rows += [
            _line(rank, 10, "send", 0, 100 + rank, 6),
            _line(rank, 11, "send", 1, 200 + rank, 6),
            _line(rank, 12, "recv", 0, 100, 6),
            _line(rank, 13, "recv", 1, 200, 6),
        ]
    rows += [
        {
            "run_id": "r",
            "rank": 1,
            "host": "h",
            "pid": 11,
            "source_format": "kineto",
            "source_file": "trace_1",
            "source_line": i + 1,
            "op": "all_reduce",
            "group_size": 2,
            "msg_bytes": 64 if i % 3 else 128,
            "ts_ns": 1000 * i,
            "dur_ns": 50 + i,
            "timing_source": "kernel",
        }
        for i in range(6)
    ]
    rows.append(
        {
            "run_id": "r",
            "source_format": "kineto",
            "source_file": "trace_x",
            "source_line": 1,
            "op": "all_gather",
            "msg_bytes": 32,
            "ts_ns": 5,
            "dur_ns": 9,
            "busbw_gbps": 1.5,
            "timing_source": "kernel",
        }
    )
    con = calls_tables(rows)
    create_materialised(con, with_dependencies(OBJECTS))
    yield con
    con.close()


@pytest.mark.parametrize("name", list(ORACLES))
def test_equal_to_the_per_call_definition_on_samples(
    samples: duckdb.DuckDBPyConnection, name: str
) -> None:
    rows, extra, missing = differences(samples, name)
    assert rows > 0 and (extra, missing) == (0, 0)


@pytest.mark.parametrize("name", list(ORACLES))
def test_equal_to_the_per_call_definition_with_paired_records(
    multisource: duckdb.DuckDBPyConnection, name: str
) -> None:
    rows, extra, missing = differences(multisource, name)
    assert (rows > 0 or name in MAY_BE_EMPTY) and (extra, missing) == (0, 0)
    if name == "int_calls_tallied":  # calls with records of other tools, timed by them
        paired = multisource.execute(
            "SELECT sum(calls) FILTER (WHERE multi_source), sum(calls) FILTER (WHERE timed) "
            "FROM int_calls_tallied"
        ).fetchone()
        assert paired is not None and paired[0] > 0 and paired[1] > 0


@pytest.mark.parametrize("name", list(ORACLES))
def test_equal_to_the_per_call_definition_on_hand_made_calls(
    hand_made: duckdb.DuckDBPyConnection, name: str
) -> None:
    rows, extra, missing = differences(hand_made, name)
    assert (rows > 0 or name in MAY_BE_EMPTY) and (extra, missing) == (0, 0)


def test_hand_made_calls_exercise_both_parts(hand_made: duckdb.DuckDBPyConnection) -> None:
    """The all-to-all groups are one call each, rank 1's calls carry Kineto's durations, the
    rankless call its busbw: the tally's calls taken from int_calls and those counted per
    shape both occur."""
    got = hand_made.execute(
        "SELECT op, rank, sum(calls), bool_or(multi_source), bool_or(timed), bool_or(bw_per_call) "
        "FROM int_calls_tallied GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert got == [
        ("all_gather", None, 1, False, True, True),
        ("all_reduce", 0, 6, False, False, False),
        ("all_reduce", 1, 6, True, True, True),
        ("all_to_all", 0, 1, False, False, False),
        ("all_to_all", 1, 1, False, False, False),
    ]


@pytest.mark.parametrize("fixture", ["samples", "multisource"])
def test_nccl_counters_equal_the_per_call_maxima(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    con: duckdb.DuckDBPyConnection = request.getfixturevalue(fixture)
    assert con.execute(NCCL_PROGRESS).fetchall() == []
    n = con.execute(
        "SELECT count(*) FROM int_hang_group_progress WHERE counter_source = 'nccl_log'"
    ).fetchone()
    assert n is not None and n[0] > 0


@pytest.mark.parametrize("fixture", ["samples", "multisource", "hand_made"])
def test_rank_hosts_equal_the_per_call_rule(fixture: str, request: pytest.FixtureRequest) -> None:
    con: duckdb.DuckDBPyConnection = request.getfixturevalue(fixture)
    rows = con.execute(RANK_HOSTS).fetchall()
    assert rows
    assert [r for r in rows if r[2] != r[3]] == []
    assert [r for r in rows if r[5] == 1 and r[2] != r[4]] == []


def test_samples_have_all_to_all_groups(samples: duckdb.DuckDBPyConnection) -> None:
    """The samples exercise int_p2p_groups (an NCCL log's uneven all_to_all_single)."""
    n = samples.execute("SELECT count(*) FROM int_p2p_groups").fetchone()
    assert n is not None and n[0] > 0
