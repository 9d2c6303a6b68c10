"""A short per-run summary of what the store holds (what ``commscope summary`` prints).

Calls are counted two ways, never mixed:

* **logical calls** (:attr:`RunSummary.ops`): each call once however many tools logged it
  (``int_calls``: one row per logical call per rank, the records of the rank's other sources
  paired with it; read from the derived ``call_totals`` mart, else computed for the run alone
  as derive computes it: :func:`commscope.pipeline.derive.run_intermediates`). A rank
  logged by NCCL debug, Kineto and DeepSpeed gives the same totals as with one of them. These
  are the traffic totals, with how many of the calls some source timed.
* **per source** (:attr:`RunSummary.ops_by_source`): every source's own rows. A rank logged by
  several tools appears once per tool, so these rows must not be added up across sources; they
  say what each log holds (and carry the durations, which only timed sources have).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from commscope.pipeline.derive import derive_stale, run_intermediates
from commscope.pipeline.store import Store

LOGICAL_CALLS_NOTE = (
    "logical calls: each call counted once however many tools logged it (int_calls: the "
    "records of a rank's sources paired into one call; a rank logged by several tools is not "
    "counted twice)"
)
"""What :attr:`RunSummary.ops` counts, as the summary prints it."""
OPS_FROM_DERIVE = "from the run's last derive (call_totals)"
OPS_COMPUTED = (
    "computed now from the run's committed rows: it has no derive yet (`commscope derive RUN` "
    "stores them)"
)

PER_SOURCE_NOTE = (
    "per source: each source's own rows (a rank logged by several tools appears once per "
    "tool: do not add these up across sources)"
)
"""What :attr:`RunSummary.ops_by_source` counts, as the summary prints it."""


@dataclass
class RunSummary:
    """Headline facts of one run."""

    run_id: str
    files: pl.DataFrame
    ops: pl.DataFrame
    """Logical calls per (op, traffic class): each call once (``int_calls``), with timed_calls."""
    tables: dict[str, int]
    ops_by_source: pl.DataFrame
    """Calls per (source format, op) as each source logged them (overlapping across sources)."""
    ops_from: str = OPS_FROM_DERIVE
    """Where :attr:`ops` came from: ``OPS_FROM_DERIVE`` or ``OPS_COMPUTED`` (no derive yet)."""


def summarize(
    store: Store | None, run_id: str, con: duckdb.DuckDBPyConnection | None = None
) -> RunSummary:
    """Collect files, line accounting, logical and per-source traffic, table sizes of one run.

    ``con``: the store's catalog (opened here when not given). Without a store, ``con`` must be
    a session that holds the canonical tables as tables (a notebook's or a test's own), and the
    logical calls are read from its ``int_calls``.
    """
    own = con is None
    if con is None:
        if store is None:
            raise ValueError("summarize needs a store or a connection")
        con = store.connect(read_only=True)
    try:
        files = con.sql(
            """
            SELECT format, count(*) AS files, sum(lines_total)::BIGINT AS lines,
                   sum(lines_parsed)::BIGINT AS parsed, sum(lines_ignored)::BIGINT AS ignored,
                   sum(lines_rejected)::BIGINT AS rejected, sum(rows_written)::BIGINT AS rows
            FROM ingested_files WHERE run_id = ? GROUP BY format ORDER BY format
            """,
            params=[run_id],
        ).pl()
        ops, ops_from = _logical_calls(store, con, run_id)
        by_source = con.sql(
            """
            SELECT source_format, op, count(*) AS calls, count(DISTINCT rank) AS ranks,
                   sum(msg_bytes)::BIGINT AS bytes, median(msg_bytes) AS median_msg_bytes,
                   sum(dur_ns) / 1e6 AS total_ms
            FROM comm_ops WHERE run_id = ?
            GROUP BY source_format, op ORDER BY source_format, calls DESC, op
            """,
            params=[run_id],
        ).pl()
        tables = {}
        for name in (
            "comm_ops",
            "comm_summaries",
            "communicators",
            "topology",
            "kernels",
            "markers",
            "rejects",
        ):
            tables[name] = int(
                con.execute(f"SELECT count(*) FROM {name} WHERE run_id = ?", [run_id]).fetchall()[
                    0
                ][0]
            )
    finally:
        if own:
            con.close()
    return RunSummary(run_id, files, ops, tables, by_source, ops_from)


_OPS_COLUMNS = "op, traffic_class, calls, ranks, bytes, median_msg_bytes, timed_calls"


def _logical_calls(
    store: Store | None, con: duckdb.DuckDBPyConnection, run_id: str
) -> tuple[pl.DataFrame, str]:
    """Logical calls per (op, traffic class) of one run: the derived ``call_totals`` mart when
    the run has one (a few rows of Parquet), else the same aggregate of ``int_calls`` computed
    for this run alone (:func:`~commscope.pipeline.derive.run_intermediates`; seconds: it pairs
    every source record of the run). Never the catalog's live view: that re-reads the store's
    files at every reference in the chain."""
    order = "ORDER BY calls DESC, op, traffic_class"
    try:
        got = con.sql(
            f"SELECT {_OPS_COLUMNS} FROM call_totals WHERE run_id = ? {order}", params=[run_id]
        ).pl()
    except duckdb.Error:  # a catalog written before the mart existed
        got = pl.DataFrame()
    if got.height:
        stale = derive_stale(store, run_id) if store is not None else None
        return got, OPS_FROM_DERIVE + (f"; STALE: {stale}" if stale else "")
    live = f"""
        SELECT op, traffic_class, count(*) AS calls, count(DISTINCT rank) AS ranks,
               sum(msg_bytes)::BIGINT AS bytes, median(msg_bytes) AS median_msg_bytes,
               count(dur_ns) AS timed_calls
        FROM int_calls WHERE run_id = ?
        GROUP BY op, traffic_class {order}
        """
    if store is None:  # the caller's own session, its canonical tables held as tables
        return con.sql(live, params=[run_id]).pl(), OPS_COMPUTED
    with run_intermediates(store, run_id, ["int_calls"]) as run_con:
        return run_con.sql(live, params=[run_id]).pl(), OPS_COMPUTED
