"""Parsers: one module per source format, each registered by name in ``commscope.parsers.registry``."""

from __future__ import annotations

from commscope.parsers.registry import (
    REGISTRY,
    LineCounts,
    ParsedChunk,
    ParseError,
    Parser,
    load_all,
    register,
    sniff,
)
from commscope.parsers.schema import SCHEMA_VERSION, TABLES, conform

__all__ = [
    "REGISTRY",
    "SCHEMA_VERSION",
    "TABLES",
    "LineCounts",
    "ParseError",
    "ParsedChunk",
    "Parser",
    "conform",
    "load_all",
    "register",
    "sniff",
]
