"""``commscope query``: ad-hoc SQL over the store, read-only unless ``--write``.

Security default: a plain ``query`` cannot change anything. Three layers, each enough on its
own for the case it covers:

* the catalog is opened with DuckDB's ``read_only`` (no CREATE/INSERT/UPDATE/DROP in it);
* only reading statements run (SELECT, FROM, WITH, VALUES, DESCRIBE, SHOW, SUMMARIZE,
  EXPLAIN): ``COPY ... TO`` and ``EXPORT`` would write files even on a read-only database,
  and ATTACH, INSTALL/LOAD, SET and the like would widen what the session can do;
* file access is confined to the store folder (``allowed_directories`` with
  ``enable_external_access = false``, then the configuration is locked), so a query cannot
  read or write files elsewhere.

``--write`` opens the catalog read-write with none of these limits: for creating your own
views, tables or macros in the catalog, or exporting results with ``COPY ... TO``. Objects
created in ``catalog.duckdb`` are dropped when commscope rebuilds the catalog (the store moved,
the schema or SQL changed, a mart was materialised): keep durable data in files of your own.
"""

from __future__ import annotations

import argparse
import json
import sys

import duckdb

from pipeline.commands._format import table
from pipeline.store import Store, StoreError

READ_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})
"""Statement types a read-only query may run (DESCRIBE, SHOW, SUMMARIZE parse as SELECT)."""


class ReadOnlyError(Exception):
    """A statement that needs ``--write`` was given without it."""


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


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise ReadOnlyError if any statement of ``sql`` is not a reading statement.

    Why: DuckDB's read-only mode protects the database file only; ``COPY ... TO`` and
    ``EXPORT DATABASE`` still write files, and ATTACH/SET/LOAD change the session itself.
    """
    for stmt in con.extract_statements(sql):
        if stmt.type not in READ_STATEMENTS:
            kind = stmt.type.name.replace("_", " ")
            raise ReadOnlyError(
                f"{kind} statements are not allowed in a read-only query "
                f"({stmt.query.strip()[:60]!r}); rerun with --write to change the catalog "
                "or write files"
            )


def confine(con: duckdb.DuckDBPyConnection, store: Store) -> None:
    """Allow file access only inside the store folder, and lock the session's settings."""
    root = str(store.root).replace("'", "''")
    con.execute(f"SET allowed_directories = ['{root}']")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def run(args: argparse.Namespace) -> int:
    """Run the query and print the result."""
    sql = sys.stdin.read() if args.sql == "-" else args.sql
    write = bool(getattr(args, "write", False))
    try:
        store = Store.open(args.store, create=False)
        con = store.connect(read_only=not write)
    except StoreError as exc:
        print(f"commscope: error: {exc}", file=sys.stderr)
        return 2
    try:
        if not write:
            check_read_only(con, sql)
            confine(con, store)
        rel = con.sql(sql)
        if rel is None:
            return 0
        df = rel.pl()
    except ReadOnlyError as exc:
        print(f"commscope: error: {exc}", file=sys.stderr)
        return 1
    except duckdb.Error as exc:
        hint = ""
        if not write and isinstance(
            exc, (duckdb.PermissionException, duckdb.InvalidInputException)
        ):
            hint = " (read-only query: files outside the store cannot be read; see --write)"
        print(f"commscope: error: query failed: {exc}{hint}", file=sys.stderr)
        return 1
    finally:
        con.close()
    if args.out_format == "csv":
        sys.stdout.write(df.write_csv())
    elif args.out_format == "json":
        sys.stdout.write(json.dumps(df.to_dicts(), default=str, indent=1) + "\n")
    else:
        print(table(df.columns, df.rows()))
        print(f"({df.height} rows)")
    return 0
