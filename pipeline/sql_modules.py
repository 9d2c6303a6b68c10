"""The SQL modules in ``sql/``: discovery, documentation, load order and layering.

One object per file; the file stem is the object name. Layers, in load order:
``macros`` → ``staging`` → ``intermediate`` → ``marts``. A file's header is its first comment
lines: line 1 a one-sentence description, line 2 the grain. A ``-- comment`` line directly
above each name in the view's column list documents that column; both are applied as DuckDB
``COMMENT ON`` so ad-hoc users can read them from ``duckdb_views()``/``duckdb_columns()``.

A mart that publishes an intermediate unchanged (all its columns, or some of them in a chosen
order) is written without a column list: ``CREATE OR REPLACE VIEW m AS SELECT * FROM int_x``
(or ``SELECT a, b FROM int_x``). Its columns and their documentation are the intermediate's,
stated once there (``SqlModule.publishes`` names it); the mart keeps its own description and
grain. Why: a mart that re-listed an intermediate's columns with its own comments was a second
definition of the same relation that drifted from the first.

Direction (checked by tests): staging reads canonical tables only; intermediate reads staging,
intermediate and macros; marts read intermediate, staging and macros (and the ``predicted_*``
tables the analytical model writes). Nothing in ``sql/`` reads marts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

import duckdb

from commscope.parsers.schema import TABLES
from commscope.pipeline.sql_names import is_sql_name, quote_ident, quote_literal
from commscope.resources import sql_dir

SQL_DIR = sql_dir()
"""The SQL modules' folder (package data, :func:`commscope.resources.sql_dir`)."""
LAYERS: tuple[str, ...] = ("macros", "staging", "intermediate", "marts")

MODEL_INPUTS: frozenset[str] = frozenset(
    {
        "run_config",
        "predicted_traffic",
        "predicted_signatures",
        "predicted_matrix",
        "predicted_times",
        "predicted_stage_times",
        "predicted_platform",
    }
)
"""The run's config and the model's outputs (commscope.pipeline.model_inputs.INPUT_COLUMNS gives their columns)."""

EXTERNAL_INPUTS: frozenset[str] = frozenset(TABLES) | MODEL_INPUTS
"""Relations SQL may read that are not defined in sql/: canonical tables and model outputs."""

_CREATE = re.compile(
    r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP\s+)?(?P<kind>VIEW|MACRO|TABLE)\s+(?P<name>\w+)",
    re.IGNORECASE,
)
_REF = re.compile(r"\b(?:FROM|JOIN)\s+(?P<name>[A-Za-z_]\w*)\b(?!\s*\()", re.IGNORECASE)
_MACRO_CALL = re.compile(r"\b(?P<name>[A-Za-z_]\w*)\s*\(", re.IGNORECASE)
_PASS_THROUGH = re.compile(
    r"\s*AS\s+SELECT\s+(?P<cols>\*|\w+(?:\s*,\s*\w+)*)\s+FROM\s+(?P<src>[A-Za-z_]\w*)\s*;?\s*",
    re.IGNORECASE,
)


class SqlModuleError(ValueError):
    """A SQL file breaks the module rules (name, header, layering, references)."""


@dataclass(frozen=True)
class SqlModule:
    """One SQL file and what it declares."""

    path: Path
    layer: str
    name: str
    kind: str
    description: str
    grain: str
    column_docs: dict[str, str] = field(hash=False, compare=False)
    references: frozenset[str] = frozenset()
    publishes: str | None = None
    """The intermediate a pass-through mart publishes (its columns and their documentation come
    from there); None for every other module."""
    published_columns: tuple[str, ...] | None = None
    """The columns a pass-through mart selects, in order; None for ``SELECT *``."""

    @property
    def text(self) -> str:
        """The file's SQL."""
        return self.path.read_text()


def strip_comments(sql: str) -> str:
    """``sql`` without comments, string literals emptied, DISTINCT FROM kept from reading as a
    relation."""
    sql = re.sub(r"--[^\n]*", "", sql)
    sql = re.sub(r"'(?:[^']|'')*'", "''", sql)
    # "IS [NOT] DISTINCT FROM x" compares values; it is not a read of relation x.
    return re.sub(r"\bDISTINCT\s+FROM\b", "DISTINCT_FROM", sql, flags=re.IGNORECASE)


def _ctes(sql: str) -> set[str]:
    return {
        m.group(1).lower()
        for m in re.finditer(r"\b(\w+)\s+AS\s*(?:(?:NOT\s+)?MATERIALIZED\s*)?\(", sql, re.I)
    }


def parse_module(path: Path, layer: str) -> SqlModule:
    """Read one SQL file and check its header and name."""
    text = path.read_text()
    lines = text.splitlines()
    header = []
    for ln in lines:
        if ln.startswith("--"):
            header.append(ln[2:].strip())
        else:
            break
    if len(header) < 2 or not header[0] or not header[1]:
        raise SqlModuleError(f"{path}: first two lines must be '-- description' and '-- grain'")
    m = _CREATE.search(text, pos=sum(len(ln) + 1 for ln in lines[: len(header)]))
    if m is None:
        raise SqlModuleError(f"{path}: no CREATE VIEW/MACRO/TABLE statement")
    name = m.group("name")
    if name != path.stem:
        raise SqlModuleError(f"{path}: creates {name!r} but the file stem is {path.stem!r}")
    docs: dict[str, str] = {}
    body_start = text.find("(", m.end()) if m.group("kind").upper() == "VIEW" else -1
    if body_start >= 0 and text[m.end() : body_start].strip() == "":
        depth = 0
        end = body_start
        for i in range(body_start, len(text)):
            if text[i] == "(":
                depth += 1
            elif text[i] == ")":
                depth -= 1
                if depth == 0:
                    end = i
                    break
        pending: list[str] = []
        for raw in text[body_start + 1 : end].splitlines():
            s = raw.strip()
            if s.startswith("--"):
                pending.append(s[2:].strip())
            elif s:
                col = s.rstrip(",").strip()
                if re.fullmatch(r"\w+", col):
                    docs[col] = " ".join(pending)
                pending = []
    code = strip_comments(text)
    publishes: str | None = None
    published_columns: tuple[str, ...] | None = None
    if m.group("kind").upper() == "VIEW" and not docs:
        plain = _PASS_THROUGH.fullmatch(strip_comments(text[m.end() :]))
        if plain is not None:
            publishes = plain.group("src")
            cols = plain.group("cols")
            if cols != "*":
                published_columns = tuple(c.strip() for c in cols.split(","))
    ctes = _ctes(code)
    refs = {r.group("name").lower() for r in _REF.finditer(code)} - ctes - {name.lower()}
    refs |= {
        c.group("name").lower()
        for c in _MACRO_CALL.finditer(code)
        if c.group("name").lower().startswith("interval_")
    } - {name.lower()}
    return SqlModule(
        path=path,
        layer=layer,
        name=name,
        kind=m.group("kind").upper(),
        description=header[0],
        grain=header[1],
        column_docs=docs,
        references=frozenset(refs),
        publishes=publishes,
        published_columns=published_columns,
    )


def _with_published_docs(modules: list[SqlModule]) -> list[SqlModule]:
    """Give each pass-through mart its intermediate's columns and their documentation.

    Raises:
        SqlModuleError: a pass-through outside the marts layer, of a relation that is not an
            intermediate, or selecting a column the intermediate does not document.
    """
    by_name = {m.name.lower(): m for m in modules}
    out: list[SqlModule] = []
    for m in modules:
        if m.publishes is None:
            out.append(m)
            continue
        src = by_name.get(m.publishes.lower())
        if m.layer != "marts" or src is None or src.layer != "intermediate":
            raise SqlModuleError(
                f"{m.path}: a view without a column list must be a mart publishing an "
                f"intermediate ('AS SELECT * FROM int_x'); {m.publishes!r} is not one"
            )
        if m.published_columns is None:
            docs = dict(src.column_docs)
        else:
            absent = [c for c in m.published_columns if c not in src.column_docs]
            if absent:
                raise SqlModuleError(f"{m.path}: {src.name} documents no column {absent}")
            docs = {c: src.column_docs[c] for c in m.published_columns}
        out.append(replace(m, column_docs=docs))
    return out


@cache
def discover(sql_dir: Path = SQL_DIR) -> tuple[SqlModule, ...]:
    """Every module in ``sql_dir``, in load order (layer order, then dependencies)."""
    modules: list[SqlModule] = []
    for layer in LAYERS:
        for path in sorted((sql_dir / layer).glob("*.sql")):
            modules.append(parse_module(path, layer))
    modules = _with_published_docs(modules)
    names = [m.name for m in modules]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SqlModuleError(f"objects defined twice: {sorted(dup)}")
    return tuple(_order(modules))


def mart_names() -> tuple[str, ...]:
    """Every mart ``sql/marts`` defines, in load order (derive publishes each; the report
    reads each one published)."""
    return tuple(m.name for m in discover() if m.layer == "marts")


def _order(modules: list[SqlModule]) -> list[SqlModule]:
    by_name = {m.name.lower(): m for m in modules}
    done: list[SqlModule] = []
    state: dict[str, int] = {}

    def visit(m: SqlModule, stack: tuple[str, ...]) -> None:
        key = m.name.lower()
        if state.get(key) == 2:
            return
        if state.get(key) == 1:
            raise SqlModuleError(f"dependency cycle: {' -> '.join((*stack, m.name))}")
        state[key] = 1
        for ref in sorted(m.references):
            if ref in by_name:
                visit(by_name[ref], (*stack, m.name))
        state[key] = 2
        done.append(m)

    for layer in LAYERS:
        for m in modules:
            if m.layer == layer:
                visit(m, ())
    return done


ALLOWED_READS: dict[str, frozenset[str]] = {
    "macros": frozenset({"macros"}),
    "staging": frozenset({"macros", "external"}),
    "intermediate": frozenset({"macros", "staging", "intermediate", "external_model"}),
    "marts": frozenset({"macros", "staging", "intermediate", "external_model"}),
}


def check_layering(modules: tuple[SqlModule, ...]) -> list[str]:
    """Return every reference that breaks the layer direction or names nothing known."""
    layer_of = {m.name.lower(): m.layer for m in modules}
    model_inputs = MODEL_INPUTS
    problems: list[str] = []
    for m in modules:
        allowed = ALLOWED_READS[m.layer]
        for ref in sorted(m.references):
            if ref in layer_of:
                kind = layer_of[ref]
            elif ref in model_inputs:
                kind = "external_model"
            elif ref in EXTERNAL_INPUTS:
                kind = "external"
            else:
                problems.append(f"{m.path.name}: reads unknown relation {ref!r}")
                continue
            ok = kind in allowed or (kind == "external_model" and "external" in allowed)
            if not ok:
                problems.append(f"{m.path.name} ({m.layer}) may not read {ref!r} ({kind})")
    return problems


def with_dependencies(names: tuple[str, ...] | list[str]) -> list[SqlModule]:
    """The modules that create ``names`` and everything they read, in load order (macros too).

    Why: a test or a tool that needs a few objects over a custom set of tables can create just
    those, instead of the whole catalog (whose other objects may read tables it lacks).
    """
    modules = discover()
    by_name = {m.name.lower(): m for m in modules}
    keep: set[str] = set()
    todo = [n.lower() for n in names]
    while todo:
        name = todo.pop()
        if name in keep or name not in by_name:
            continue
        keep.add(name)
        todo.extend(ref.lower() for ref in by_name[name].references)
    return [m for m in modules if m.name.lower() in keep or m.layer == "macros"]


def apply(
    con: duckdb.DuckDBPyConnection,
    modules: tuple[SqlModule, ...] | None = None,
    *,
    on_error: Callable[[SqlModuleError], None] | None = None,
    comments: bool = True,
    layer_notes: Mapping[str, str] | None = None,
) -> None:
    """Create every SQL object on ``con`` in load order, with its comments.

    Why the detour: DuckDB binds a view when it is created, expanding every view it reads,
    and every view those read, once per reference. The intermediate chain is deep (a mart
    expands thousands of views), so creating the modules one after another as views cost
    ~15 s of CPU per connection. Here each view that a later module reads is first bound
    against empty tables standing in for its inputs, then stood in for by an empty table of
    its own columns; once all exist, the stand-ins are replaced by the real views, last
    first. The views end exactly as plain creation leaves them (DuckDB binds a view's inputs
    by name when it is queried), in under a second.

    Args:
        con: the connection.
        modules: the modules to create (default: all, in load order).
        on_error: if given, a module that fails is reported to it and skipped (its readers
            then fail too and are reported); else the first failure raises SqlModuleError.
        comments: False leaves the views uncommented: a connection nobody browses (derive's,
            whose rows go to Parquet) saves the ~1,000 COMMENT statements, about half of the
            cost of creating the modules.
        layer_notes: a sentence appended to the comment of every view of a layer (the
            catalog's note on its live intermediate views).
    """
    mods = modules if modules is not None else discover()
    notes = layer_notes or {}
    standins: list[SqlModule] = []
    for i, m in enumerate(mods):
        try:
            _execute(con, m)
        except SqlModuleError as exc:
            if on_error is None:
                raise
            on_error(exc)
            continue
        if m.kind == "VIEW" and any(m.name.lower() in n.references for n in mods[i + 1 :]):
            view, standin = quote_ident(m.name), quote_ident(f"_standin_{m.name}")
            con.execute(f"CREATE TABLE {standin} AS FROM {view} LIMIT 0")
            con.execute(f"DROP VIEW {view}")
            con.execute(f"ALTER TABLE {standin} RENAME TO {view}")
            standins.append(m)
        elif comments:
            _comment(con, m, note=notes.get(m.layer, ""))
    for m in reversed(standins):
        con.execute(f"DROP TABLE {quote_ident(m.name)}")
        _execute(con, m)
        if comments:
            _comment(con, m, note=notes.get(m.layer, ""))


def _execute(con: duckdb.DuckDBPyConnection, m: SqlModule) -> None:
    try:
        con.execute(m.text)
    except duckdb.Error as exc:
        raise SqlModuleError(f"{m.path}: {exc}") from exc


def _comment(
    con: duckdb.DuckDBPyConnection,
    m: SqlModule,
    *,
    note: str = "",
    columns: set[str] | None = None,
) -> None:
    """Apply a view's header and column documentation as DuckDB comments.

    Args:
        con: the connection holding the view.
        m: the module whose documentation applies.
        note: a sentence appended to the view's comment (e.g. where its rows come from).
        columns: comment only these columns (a materialised mart's Parquet may lack a column
            the SQL documents, e.g. one added since it was derived).
    """
    if m.kind != "VIEW" or not is_sql_name(m.name):
        return
    view = quote_ident(m.name)
    text = quote_literal(" ".join(filter(None, (m.description, "Grain: " + m.grain, note))))
    con.execute(f"COMMENT ON VIEW {view} IS {text}")
    for col, doc in m.column_docs.items():
        if columns is not None and col not in columns:
            continue
        # Names are quoted, never interpolated raw; a column the comment syntax
        # cannot name plainly keeps no comment rather than failing the module.
        if doc and is_sql_name(col):
            con.execute(f"COMMENT ON COLUMN {view}.{quote_ident(col)} IS {quote_literal(doc)}")


def comment_view(
    con: duckdb.DuckDBPyConnection, name: str, *, note: str = "", columns: set[str] | None = None
) -> bool:
    """Comment the view ``name`` on ``con`` with the documentation of the SQL module of that
    name (see :func:`_comment`); False if no module has that name."""
    m = next((m for m in discover() if m.name == name), None)
    if m is None:
        return False
    _comment(con, m, note=note, columns=columns)
    return True


def describe_modules(name: str | None = None) -> str:
    """Render one SQL object's documented columns, or (``name`` None) a one-line index of all.

    Raises:
        KeyError: no SQL module has that name.
    """
    mods = {m.name: m for m in discover() if m.kind == "VIEW"}
    if name is None:
        return "\n".join(
            f"  {m.name:<30} {m.layer:<13} {m.description}" for m in sorted_views(mods)
        )
    m = mods[name]
    lines = [f"{m.name}  ({m.layer} view, sql/{m.layer}/{m.name}.sql; grain: {m.grain})"]
    lines.append(f"  {m.description}")
    if m.publishes is not None:
        lines.append(f"  Published from {m.publishes} (its columns, documented there).")
    lines += [f"  {col:<28} {doc}" for col, doc in m.column_docs.items()]
    return "\n".join(lines) + "\n"


def sorted_views(mods: dict[str, SqlModule]) -> list[SqlModule]:
    """Views in layer order (marts first: what users read), then by name."""
    rank = {"marts": 0, "intermediate": 1, "staging": 2}
    return sorted(mods.values(), key=lambda m: (rank.get(m.layer, 3), m.name))
