"""DuckDB session helpers shared by derive, the catalog and ``query``: the memory cap with a
private spill folder, and turning a view into a table of its rows.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb

MEMORY_LIMIT_ENV = "COMMSCOPE_DERIVE_MEMORY_LIMIT"
"""Environment variable: DuckDB ``memory_limit`` for derive (e.g. ``8GB``); default 50% of RAM."""


def limit_memory(con: duckdb.DuckDBPyConnection, spill: Path | None = None) -> None:
    """Cap a DuckDB session's memory (derive, query) and let it spill to a private temp folder.

    Why: a 1024-rank run holds ~17 M calls and their intermediate tables; DuckDB's default cap
    (80% of RAM) starves other processes on a shared machine, and an in-memory connection would
    spill to ``.tmp`` in the working directory.
    """
    import tempfile

    limit = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
    if not limit:
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            limit = f"{max(1, total // 2 // 2**20)}MB"
        except (ValueError, OSError, AttributeError):
            limit = ""
    if limit:
        con.execute(f"SET memory_limit = '{_q(limit)}'")
    # DuckDB creates the folder only when it spills; derive_run removes it
    if spill is None:
        spill = Path(tempfile.gettempdir()) / f"commscope-derive-{os.getpid()}-{id(con):x}"
    con.execute(f"SET temp_directory = '{_q(str(spill))}'")


def close_session(con: duckdb.DuckDBPyConnection) -> None:
    """Close ``con`` and remove the private spill folder :func:`limit_memory` gave it (a
    folder set by anyone else is left alone)."""
    row = con.execute("SELECT current_setting('temp_directory')").fetchone()
    con.close()
    if row and Path(str(row[0])).name.startswith("commscope-derive-"):
        shutil.rmtree(str(row[0]), ignore_errors=True)


def materialise_view(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Replace the view ``name`` by a table of its rows, under the same name (views that read
    it are bound by name at query time, so they read the table)."""
    con.execute(f"CREATE TABLE _mat_{name} AS SELECT * FROM {name}")
    con.execute(f"DROP VIEW {name}")
    con.execute(f"ALTER TABLE _mat_{name} RENAME TO {name}")


def _q(s: str) -> str:
    return s.replace("'", "''")
