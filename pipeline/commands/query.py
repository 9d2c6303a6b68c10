"""``commscope query``: ad-hoc SQL over the store, read-only unless ``--write``.

Security default: a plain ``query`` cannot change anything, and that does not rest on the
statement type alone. Layers, each enough on its own for the case it covers:

* the catalog is opened with DuckDB's ``read_only`` (no CREATE/INSERT/UPDATE/DROP in it);
* only reading statements run (SELECT, FROM, WITH, VALUES, DESCRIBE, SHOW, SUMMARIZE, and
  EXPLAIN [ANALYZE] of one of those): ``COPY ... TO`` and ``EXPORT`` would write files even on a
  read-only database, ``EXPLAIN ANALYZE`` runs the statement it explains, and ATTACH,
  INSTALL/LOAD, SET and the like would widen what the session can do. An EXPLAIN's inner
  statement is checked twice: by its statement type and by ``json_serialize_sql``, which only
  accepts SELECTs;
* file access is confined to the folders holding the store's Parquet (``tables/``,
  ``marts/``, ``model_inputs/``, ``derived/``: ``Store.confine``) with ``enable_external_access = false``, then the
  configuration is locked: a query cannot read or write files elsewhere, and ``STORE.json``,
  the catalog and the commit log's neighbours are out of its reach. (DuckDB 2.0.0 has no
  setting that allows reading a folder but not writing it, which is why the statement check
  stays.) Nothing executable lives in the store: Prefect's home is outside it;
* the session has derive's memory limit and spills to a private temp folder outside the store,
  removed afterwards.

Speed: a read-only query that names an intermediate view (``int_*``) runs on an in-memory copy of
the catalog where that view and the ones it reads are computed once into tables
(``Store.connect_computed``): the same rows as the live view, in seconds instead of minutes of
planning (DuckDB expands the deep view chain once per reference). ``--write`` sessions and
queries of tables, staging views and marts use the catalog file directly.

``--write`` opens the catalog read-write with none of these limits: for creating your own
views, tables or macros in the catalog, or exporting results with ``COPY ... TO``. A ``--write``
session holds the catalog: a plain ``query`` meanwhile is refused with one line, and commands
that would rebuild the catalog leave it alone (nothing the session created is lost). Objects
created in ``catalog.duckdb`` are dropped when commscope rebuilds the catalog (the store moved,
the schema or SQL changed, a mart was materialised): keep durable data in files of your own.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import duckdb

from commscope.pipeline.commands._format import sanitize, table
from commscope.pipeline.read_only import ReadOnlyError, check_read_only, intermediates_named
from commscope.pipeline.store import Store, StoreError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``query`` subcommand."""
    p = sub.add_parser(
        "query",
        help="run SQL over the store (read-only unless --write)",
        description=(
            "Run SQL against the store's DuckDB catalog, where every canonical table (and "
            "every derived mart) is a view. By default the connection is read-only: only "
            "reading statements run and no file outside the store can be read or written. "
            "Use '-' to read the SQL from standard input."
        ),
    )
    p.add_argument("sql", help="SQL text, or - for stdin")
    p.add_argument("--format", dest="out_format", choices=("table", "csv", "json"), default="table")
    p.add_argument(
        "--write",
        action="store_true",
        help="open the catalog read-write, for creating your own views/tables/macros in it or "
        "COPY ... TO a file (they are dropped when commscope rebuilds the catalog)",
    )
    p.set_defaults(func=run)


def confine(con: duckdb.DuckDBPyConnection, store: Store, *, limited: bool = False) -> Path | None:
    """Cap memory, allow file access only to the store's Parquet folders, lock the settings.

    Returns the session's private spill folder (outside the store; the caller removes it).
    Why the data folders and not the store root: the root also holds ``STORE.json``, the
    catalog and (in stores made by older versions) Prefect's home, none of which a query
    needs to read.
    """
    from commscope.pipeline.duckdb_session import limit_memory

    if not limited:  # a Store.connect_computed session is limited and confined already
        limit_memory(con)
        store.confine(con)
    row = con.execute("SELECT current_setting('temp_directory')").fetchone()
    spill = Path(str(row[0])) if row and row[0] else None
    con.execute("SET lock_configuration = true")
    return spill


def run(args: argparse.Namespace) -> int:
    """Run the query and print the result."""
    sql = sys.stdin.read() if args.sql == "-" else args.sql
    write = bool(getattr(args, "write", False))
    try:
        store = Store.open(args.store, create=False)
    except StoreError as exc:
        return _error(str(exc), 2)
    if write:
        try:
            with store.write_session() as con:
                return _execute(con, sql, args.out_format, write=True)
        except StoreError as exc:
            return _error(str(exc), 2)
    try:
        con = store.connect(read_only=True)
    except StoreError as exc:
        return _error(str(exc), 2)
    spill: Path | None = None
    try:
        try:
            check_read_only(con, sql)
            needed = intermediates_named(sql)
            if needed:
                con.close()
                con = store.connect_computed(needed)
            spill = confine(con, store, limited=bool(needed))
        except ReadOnlyError as exc:
            return _error(str(exc), 1)
        except duckdb.Error as exc:  # SQL that does not parse
            return _error(f"query failed: {exc}", 1)
        return _execute(con, sql, args.out_format, write=False)
    finally:
        con.close()
        if spill is not None:
            shutil.rmtree(spill, ignore_errors=True)


def _execute(con: duckdb.DuckDBPyConnection, sql: str, out_format: str, *, write: bool) -> int:
    """Run ``sql`` on ``con`` and print its result; one line on stderr if it fails."""
    try:
        rel = con.sql(sql)
        if rel is None:
            return 0
        df = rel.pl()
    except duckdb.Error as exc:
        hint = ""
        if not write and isinstance(
            exc, (duckdb.PermissionException, duckdb.InvalidInputException)
        ):
            hint = " (read-only query: files outside the store cannot be read; see --write)"
        return _error(f"query failed: {exc}{hint}", 1)
    if out_format == "csv":
        text = df.write_csv()
        # A terminal interprets escape sequences: a CSV shown on one gets them made visible.
        sys.stdout.write(sanitize(text, keep="\n") if sys.stdout.isatty() else text)
    elif out_format == "json":
        # ensure_ascii escapes the C0 and C1 controls as \\uXXXX; DEL is ASCII, so by hand.
        text = json.dumps(df.to_dicts(), default=str, indent=1).replace("\x7f", "\\u007f")
        sys.stdout.write(text + "\n")
    else:
        print(table(df.columns, df.rows()))
        print(f"({df.height} rows)")
    return 0


def _error(message: str, rc: int) -> int:
    """Print ``message`` as one sanitised error line on stderr and return ``rc``."""
    one_line = " ".join(message.split())  # DuckDB's hints come on lines of their own
    print(f"commscope: error: {sanitize(one_line)}", file=sys.stderr)
    return rc
