"""A short per-run summary of what the store holds (what ``commscope summary`` prints)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

from pipeline.store import Store


@dataclass
class RunSummary:
    """Headline facts of one run."""

    run_id: str
    files: pl.DataFrame
    ops: pl.DataFrame
    tables: dict[str, int]


def summarize(
    store: Store, run_id: str, con: duckdb.DuckDBPyConnection | None = None
) -> RunSummary:
    """Collect files, line accounting, per-op traffic and table sizes of one run."""
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
            SELECT op, count(*) AS calls, count(DISTINCT rank) AS ranks,
                   sum(msg_bytes)::BIGINT AS bytes, median(msg_bytes) AS median_msg_bytes,
                   sum(dur_ns) / 1e6 AS total_ms
            FROM comm_ops WHERE run_id = ? GROUP BY op ORDER BY calls DESC, op
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
    return RunSummary(run_id, files, ops, tables)


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
