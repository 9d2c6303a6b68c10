"""commscope from Python (notebooks, scripts): open a store, list its runs, read any table,
mart or view as a Polars or pandas frame or a DuckDB relation, build a run's charts, and run
ingest, derive and report.

Why: HTA and TraceLens users work in notebooks. The command line and the raw Parquet were the
only ways in, and raw Parquet skips the commit filter the catalog's views apply (rows of a batch
that never committed are in the files but not in the store). Everything here reads through the
catalog, as ``commscope query`` does, so a frame is what the reports and the SQL see.

Example (the README's worked example; tests/test_api.py runs it)::

    import commscope

    cs = commscope.open_store("commscope_store")
    cs.ingest([commscope.sample_traces_dir() / "gpu_nccl_tp2_dp2_1gpu"], run_id="tp2")
    cs.derive("tp2")
    cs.runs()                                   # ['tp2']
    tm = cs.table("traffic_matrix", run_id="tp2")   # a polars DataFrame
    df = cs.pandas("effective_bandwidth", run_id="tp2")
    rel = cs.relation("comm_ops")               # a DuckDB relation, lazy
    cs.sql("SELECT op, count(*) AS n FROM int_calls GROUP BY op")  # intermediates too
    charts = cs.charts("tp2")                   # {section: [Altair charts]}; render in Jupyter
    cs.report("tp2", "tp2.html")
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import altair as alt
    import duckdb
    import pandas as pd
    import polars as pl

    from commscope.pipeline.derive import DeriveResult
    from commscope.pipeline.ingest import FileResult
    from commscope.pipeline.store import Store

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class OpenStore:
    """A commscope store opened for reading (and for ingest/derive when asked).

    One read-only catalog connection is opened on first use and reopened after an ingest or a
    derive (the catalog then names new files). Queries that name intermediate views
    (``int_*``) run on a session where those views are computed once into tables, with
    derive's memory limit, as ``commscope query`` does. Use as a context manager or call
    :meth:`close`.
    """

    def __init__(self, root: str | Path, *, create: bool = True) -> None:
        from commscope.pipeline.store import Store

        self.store: Store = Store.open(Path(root), create=create)
        self._con: duckdb.DuckDBPyConnection | None = None
        self._extra: list[duckdb.DuckDBPyConnection] = []

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close every connection this object opened and remove their spill folders."""
        from commscope.pipeline.duckdb_session import close_session

        for con in [self._con, *self._extra]:
            if con is not None:
                close_session(con)
        self._con, self._extra = None, []

    def __enter__(self) -> OpenStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"OpenStore({str(self.store.root)!r})"

    # ------------------------------------------------------------------ what is there

    def runs(self) -> list[str]:
        """Run ids with committed data, sorted."""
        return self.store.runs()

    def relations(self) -> list[str]:
        """Every name :meth:`table` accepts: canonical tables, marts, model inputs and views."""
        rows = (
            self._connection()
            .execute("SELECT table_name FROM information_schema.tables ORDER BY table_name")
            .fetchall()
        )
        return [str(r[0]) for r in rows]

    # ------------------------------------------------------------------ reading

    def sql(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> pl.DataFrame:
        """Run one read-only query on the catalog; the result as a Polars frame."""
        return self._relation_for(query, params).pl()

    def relation(self, name: str, *, run_id: str | None = None) -> duckdb.DuckDBPyRelation:
        """A table, mart or view (optionally one run's rows) as a lazy DuckDB relation.

        The relation belongs to this object's connection: use it before :meth:`close`.
        """
        query, params = self._select(name, run_id)
        return self._relation_for(query, params)

    def table(self, name: str, *, run_id: str | None = None) -> pl.DataFrame:
        """A table, mart or view (optionally one run's rows) as a Polars frame."""
        return self.relation(name, run_id=run_id).pl()

    def pandas(self, name: str, *, run_id: str | None = None) -> pd.DataFrame:
        """A table, mart or view (optionally one run's rows) as a pandas frame.

        Raises:
            ModuleNotFoundError: pandas is not installed (it is not a commscope dependency).
        """
        import importlib.util

        if importlib.util.find_spec("pandas") is None or importlib.util.find_spec("numpy") is None:
            raise ModuleNotFoundError("OpenStore.pandas needs pandas: pip install pandas")
        return self.relation(name, run_id=run_id).df()

    # ------------------------------------------------------------------ work

    def ingest(
        self,
        paths: Iterable[str | Path],
        *,
        run_id: str,
        config: str | Path | None = None,
        fmt: str | None = None,
        rank: int | None = None,
    ) -> list[FileResult]:
        """Ingest files and folders into run ``run_id`` (``commscope ingest``); per-file results."""
        from commscope.pipeline.ingest import ingest_paths

        self.close()
        return ingest_paths(
            self.store,
            [Path(p) for p in paths],
            run_id=run_id,
            fmt=fmt,
            rank=rank,
            config=Path(config) if config is not None else None,
        )

    def derive(self, run_id: str, *, config: str | Path | None = None) -> DeriveResult:
        """Compute and publish every mart of the run (``commscope derive``)."""
        from commscope.pipeline.derive import derive_run

        self.close()
        return derive_run(self.store, run_id, config=Path(config) if config is not None else None)

    def charts(self, run_id: str) -> dict[str, list[alt.TopLevelMixin]]:
        """The run's report charts by section key (Altair objects; they render in Jupyter).

        The run is derived first when a mart is missing; sections without a chart are left out.
        """
        from commscope.pipeline.derive import ensure_derived
        from commscope.reports import data as rd
        from commscope.reports.html import run_sections

        ensure_derived(self.store, run_id)
        data = rd.load_run(self.store, run_id)
        try:
            sections = run_sections(data)
        finally:
            if data.con is not None:
                data.con.close()
        out: dict[str, list[alt.TopLevelMixin]] = {}
        for s in sections:
            found = [b.chart for b in s.blocks if b.chart is not None]
            if found:
                out[s.key] = found
        return out

    def report(self, run_id: str, out: str | Path | None = None) -> Path:
        """Write the run's HTML report (derived first when a mart is missing); its path."""
        from commscope.pipeline.derive import ensure_derived
        from commscope.reports.html import build_report

        ensure_derived(self.store, run_id)
        return build_report(self.store, run_id, Path(out or f"{run_id}.html"))

    # ------------------------------------------------------------------ internals

    def _connection(self) -> duckdb.DuckDBPyConnection:
        """The catalog, read-only, under derive's memory limit (a private spill folder that
        :meth:`close` removes)."""
        if self._con is None:
            from commscope.pipeline.duckdb_session import limit_memory

            self._con = self.store.connect(read_only=True)
            limit_memory(self._con)
        return self._con

    def _select(self, name: str, run_id: str | None) -> tuple[str, list[Any]]:
        from commscope.pipeline.sql_names import quote_ident

        if not _NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a table, mart or view name")
        if run_id is None:
            return f"SELECT * FROM {quote_ident(name)}", []
        return f"SELECT * FROM {quote_ident(name)} WHERE run_id = ?", [run_id]

    def _relation_for(
        self, query: str, params: Sequence[Any] | dict[str, Any] | None
    ) -> duckdb.DuckDBPyRelation:
        from commscope.pipeline.read_only import check_read_only, intermediates_named

        con = self._connection()
        check_read_only(con, query)
        needed = intermediates_named(query)
        if needed:  # deep live views: computed once into tables (Store.connect_computed)
            con = self.store.connect_computed(needed)
            self._extra.append(con)
        return con.sql(query, params=params)


def open_store(root: str | Path = "commscope_store", *, create: bool = True) -> OpenStore:
    """Open (or create) the store at ``root`` for use from Python; see :class:`OpenStore`."""
    return OpenStore(root, create=create)
