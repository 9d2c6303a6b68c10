"""A short per-run summary of what the store holds (what ``commscope summary`` prints).

Calls are counted two ways, never mixed:

* **logical calls** (:attr:`RunSummary.ops`): each call once, from the one source that counts
  for its rank (``int_comm_ops_classified.counted``: the rank's primary source,
  ``int_rank_primary_source``; a call without a rank counts). A rank logged by NCCL debug,
  Kineto and DeepSpeed gives the same totals as with one of them. These are the traffic
  totals.
* **per source** (:attr:`RunSummary.ops_by_source`): every source's own rows. A rank logged by
  several tools appears once per tool, so these rows must not be added up across sources; they
  say what each log holds (and carry the durations, which only timed sources have).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

from pipeline.store import Store

LOGICAL_CALLS_NOTE = (
    "logical calls: each call counted once, from the one source that counts for its rank "
    "(int_comm_ops_classified.counted; a rank logged by several tools is not counted twice)"
)
"""What :attr:`RunSummary.ops` counts, as the summary prints it."""

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
    """Logical calls per (op, traffic class): each call once, from its rank's counted source."""
    tables: dict[str, int]
    ops_by_source: pl.DataFrame
    """Calls per (source format, op) as each source logged them (overlapping across sources)."""


def summarize(
    store: Store, run_id: str, con: duckdb.DuckDBPyConnection | None = None
) -> RunSummary:
    """Collect files, line accounting, logical and per-source traffic, table sizes of one run."""
    own = con is None
    con = con or store.connect(read_only=True)
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
        ops = con.sql(
            """
            SELECT op, traffic_class, count(*) AS calls, count(DISTINCT rank) AS ranks,
                   sum(msg_bytes)::BIGINT AS bytes, median(msg_bytes) AS median_msg_bytes
            FROM int_comm_ops_classified WHERE run_id = ? AND counted
            GROUP BY op, traffic_class ORDER BY calls DESC, op, traffic_class
            """,
            params=[run_id],
        ).pl()
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
    return RunSummary(run_id, files, ops, tables, by_source)


# ---------------------------------------------------------------------------- headline (issue 17)


def run_headline(store: Store, run_id: str) -> dict[str, Any]:
    """The run's headline rows as JSON (:func:`reports.headline.headline`, the same numbers as
    the report and ``compare``); ``{"available": false, "reason": ...}`` when the run's marts
    cannot be read."""
    from reports import data as rd

    try:
        data = rd.load_run(store, run_id)
    except Exception as exc:  # no marts yet, an unreadable store: say why, keep the summary
        return {"available": False, "reason": f"{type(exc).__name__}: {exc}"}
    try:
        out: dict[str, Any] = {"available": True, **rd.run_headline(data).to_json()}
        if data.missing:
            out["marts_missing"] = sorted(data.missing)
        return out
    finally:
        if data.con is not None:
            data.con.close()
