"""Names and literals placed into SQL text: validated and quoted, never interpolated raw.

Why: folder names under the store (marts, model inputs) and other names that come from the file
system or from inputs end up in DDL the catalog rebuild runs. A folder named
``x AS SELECT 1; ATTACH ...`` must not become SQL, and a folder named ``traffic matrix (copy)``
must not break every command: such names are skipped with a warning by the callers, and the
names that pass are still double-quoted.
"""

from __future__ import annotations

import re

SQL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
"""A name commscope itself would create: a letter or underscore, then letters, digits, '_'."""


class UnsafeNameError(ValueError):
    """A name that commscope refuses to place into SQL."""


def is_sql_name(name: str) -> bool:
    """True if ``name`` is a plain identifier commscope may use as a view or table name."""
    return bool(SQL_NAME.match(name))


def quote_ident(name: str) -> str:
    """``name`` as a double-quoted SQL identifier; raises UnsafeNameError unless plain.

    Plain names only (see :data:`SQL_NAME`): quoting alone would make any name safe, but a name
    commscope did not create has no business in the catalog, so callers skip it loudly.
    """
    if not is_sql_name(name):
        raise UnsafeNameError(f"{name!r} is not a plain SQL name (letters, digits, '_')")
    return '"' + name + '"'


def quote_literal(text: str) -> str:
    """``text`` as a single-quoted SQL string literal (quotes doubled, NUL refused)."""
    if "\0" in text:
        raise UnsafeNameError("a NUL character cannot be placed in an SQL string")
    return "'" + text.replace("'", "''") + "'"
