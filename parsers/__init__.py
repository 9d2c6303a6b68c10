"""Parsers: one module per source format, each registered by name in ``parsers.registry``."""

from __future__ import annotations

from parsers.registry import (
    REGISTRY,
    LineCounts,
    ParsedChunk,
    ParseError,
    Parser,
    load_all,
    register,
    sniff,
)
from parsers.schema import SCHEMA_VERSION, TABLES, conform

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
