"""The parser registry: one parser per source format, registered by name.

A parser turns one input file into frames of the canonical tables (see ``commscope.parsers.schema``).
Parsers never write files, never talk to Prefect and never read settings: they yield
:class:`ParsedChunk` objects, so a large file is processed in bounded memory, and they account
for every line (``total = parsed + ignored + rejected``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import polars as pl

if TYPE_CHECKING:
    from commscope.parsers._io import Source


class ParseError(Exception):
    """Input that cannot be parsed at all; names the file and, where known, the line."""

    def __init__(self, path: str | Path, message: str, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


@dataclass
class LineCounts:
    """How the lines (or events) of one input were accounted for."""

    total: int = 0
    parsed: int = 0
    ignored: int = 0
    rejected: int = 0

    def __iadd__(self, other: LineCounts) -> LineCounts:
        self.total += other.total
        self.parsed += other.parsed
        self.ignored += other.ignored
        self.rejected += other.rejected
        return self

    @property
    def balanced(self) -> bool:
        """True when every line is parsed, ignored or rejected exactly once."""
        return self.total == self.parsed + self.ignored + self.rejected


@dataclass
class ParsedChunk:
    """A piece of a parse: frames per canonical table plus the line accounting of the piece.

    Frames may omit ``run_id``, ``source_file`` and ``source_format``: ingest fills them.
    Rejected lines go in ``tables["rejects"]`` with columns ``line_no, raw, reason``.

    ``state`` (resumable parsers only, see :func:`is_resumable`): a JSON-serialisable dict of
    the context reached at the end of the source; the last non-None ``state`` of a parse is
    stored in the commit log and handed back as ``resume=`` when the file has grown.
    """

    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    counts: LineCounts = field(default_factory=LineCounts)
    warnings: list[str] = field(default_factory=list)
    state: dict[str, Any] | None = None


@runtime_checkable
class Parser(Protocol):
    """What every registered parser provides."""

    name: ClassVar[str]
    version: ClassVar[str]

    def sniff(self, head: bytes, path: Path) -> int:
        """Return a confidence 0-100 that ``head`` (first decompressed bytes) is this format."""
        ...

    def parse(
        self, source: Source, *, run_id: str, rank: int | None = None
    ) -> Iterator[ParsedChunk]:
        """Yield chunks of canonical rows for ``source``."""
        ...


def is_resumable(parser: Parser) -> bool:
    """True if ``parser`` supports incremental ingest of a growing file.

    Optional extension of the :class:`Parser` protocol (older parsers need not know it): a
    resumable parser sets ``resumable: ClassVar[bool] = True``, accepts a keyword argument
    ``resume: dict | None`` in ``parse`` (the ``state`` its previous parse of the same file
    ended with, or None for a parse from the start) and puts its end state in the last
    chunk's ``state``. Ingest then parses only the new bytes, from a ``Source`` whose
    ``start_offset``/``first_line_no`` continue after the stored ones; rows must equal those
    a single parse of the whole file gives to the new lines.
    """
    return bool(getattr(parser, "resumable", False))


_REGISTRY: dict[str, Parser] = {}
REGISTRY: MappingProxyType[str, Parser] = MappingProxyType(_REGISTRY)
"""Read-only view of the registered parsers, by name."""


def register(cls: type) -> type:
    """Class decorator: instantiate the parser and register it under ``cls.name``."""
    inst = cls()
    if not isinstance(inst, Parser):
        raise TypeError(f"{cls.__name__} does not implement the Parser protocol")
    if inst.name in _REGISTRY:
        raise ValueError(f"parser {inst.name!r} registered twice")
    _REGISTRY[inst.name] = inst
    return cls


def load_all() -> MappingProxyType[str, Parser]:
    """Import every parser module of this package so that each registers itself; return the
    registry. (Found by folder, not by importing the package: the package's ``__init__``
    imports this module, and the layering test allows no import cycle.)"""
    import importlib
    import pkgutil

    package = __name__.rpartition(".")[0]
    for mod in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if not mod.name.startswith("_") and mod.name not in {"registry", "schema"}:
            importlib.import_module(f"{package}.{mod.name}")
    return REGISTRY


def sniff(head: bytes, path: Path) -> Parser | None:
    """Pick the registered parser most confident about ``head``; None if none is."""
    load_all()
    best: tuple[int, Parser] | None = None
    for parser in _REGISTRY.values():
        score = parser.sniff(head, path)
        if score > 0 and (best is None or score > best[0]):
            best = (score, parser)
    return best[1] if best else None


ChunkFactory = Callable[[], ParsedChunk]
