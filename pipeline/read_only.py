"""Which SQL a read-only session may run, and which intermediate views a query names.

Used by ``commscope query`` and the Python API (:mod:`commscope.api`): both refuse writing
statements on a read-only session and compute the deep intermediate views a query names once
(``Store.connect_computed``). Why a library module: the API must not import a command.
"""

from __future__ import annotations

import json
import re

import duckdb

READ_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})
"""Statement types a read-only query may run (DESCRIBE, SHOW, SUMMARIZE parse as SELECT)."""

_SKIP = r"(?:\s|--[^\n]*(?:\n|$)|/\*.*?\*/)*"
_EXPLAIN_PREFIX = re.compile(
    rf"^{_SKIP}EXPLAIN\b{_SKIP}(?:ANALY[SZ]E\b{_SKIP})?(?:\([^()]*\){_SKIP})?",
    re.IGNORECASE | re.DOTALL,
)
"""``EXPLAIN``, ``EXPLAIN ANALYZE`` and their ``(options)``, with comments between the words."""


class ReadOnlyError(Exception):
    """A statement that needs ``--write`` was given without it."""


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise ReadOnlyError if any statement of ``sql`` is not a reading statement.

    Why: DuckDB's read-only mode protects the database file only; ``COPY ... TO`` and
    ``EXPORT DATABASE`` still write files, ``EXPLAIN ANALYZE`` runs what it explains (so
    ``EXPLAIN ANALYZE COPY ... TO`` writes), and ATTACH/SET/LOAD change the session itself.
    """
    for stmt in con.extract_statements(sql):
        if stmt.type not in READ_STATEMENTS:
            _refuse(f"{stmt.type.name} statements are", stmt.query)
        if stmt.type == duckdb.StatementType.EXPLAIN:
            _check_explained(con, stmt.query)


def _check_explained(con: duckdb.DuckDBPyConnection, text: str) -> None:
    """Raise ReadOnlyError unless the statement an EXPLAIN explains is one SELECT.

    Fails closed: an EXPLAIN whose prefix is not recognised, whose rest does not parse as
    exactly one SELECT, or that ``json_serialize_sql`` (SELECTs only) rejects is refused.
    """
    m = _EXPLAIN_PREFIX.match(text)
    inner = text[m.end() :] if m else ""
    try:
        stmts = con.extract_statements(inner) if inner.strip() else []
    except duckdb.Error:
        stmts = []
    if len(stmts) != 1:
        _refuse("EXPLAIN of anything but one SELECT is", text)
    if stmts[0].type != duckdb.StatementType.SELECT:
        _refuse(f"EXPLAIN of {stmts[0].type.name} statements is", text)
    row = con.execute("SELECT json_serialize_sql(?::VARCHAR)", [inner]).fetchone()
    try:
        parsed = json.loads(row[0]) if row else None
    except (TypeError, ValueError):
        parsed = None
    if not isinstance(parsed, dict) or parsed.get("error", True):
        _refuse("EXPLAIN of anything but one SELECT is", text)


def _refuse(what: str, query: str) -> None:
    """Raise the ReadOnlyError saying ``what`` (e.g. "COPY statements are") is not allowed."""
    raise ReadOnlyError(
        f"{what.replace('_', ' ')} not allowed in a read-only query "
        f"({query.strip()[:60]!r}); rerun with --write to change the catalog "
        "or write files"
    )


_STRING_OR_COMMENT = re.compile(r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/", re.DOTALL)


def intermediates_named(sql: str) -> set[str]:
    """The intermediate views (``sql/intermediate``) whose names appear as words in ``sql``
    outside string literals and comments (a name in a quoted identifier counts too)."""
    from commscope.pipeline.sql_modules import discover

    words = set(re.findall(r"\w+", _STRING_OR_COMMENT.sub(" ", sql).lower()))
    return {m.name for m in discover() if m.layer == "intermediate" and m.name.lower() in words}
