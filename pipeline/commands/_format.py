"""Small text-table formatting shared by commands, and the terminal sanitiser."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Characters a terminal acts on or that reorder text: C0 controls (ESC, BEL, CR, LF, TAB...),
DEL, C1 controls (CSI and OSC as single bytes) and the bidirectional overrides and isolates."""


def sanitize(text: str, *, keep: str = "") -> str:
    """``text`` safe to print on a terminal: each control character made visible as an escape.

    Why: file names and log text come from inputs; printed raw, ``ESC ] 52`` writes the
    clipboard, CSI sequences move the cursor or recolour, ``\\r`` hides what came before, and
    bidi overrides make a name read differently. Each such character becomes its ``repr``-style
    escape (``\\x1b``, ``\\u202e``), so nothing is lost and nothing acts. ``keep`` names
    characters to leave as they are (a multi-line output keeps ``\\n``).
    """

    def esc(m: re.Match[str]) -> str:
        ch = m.group(0)
        if ch in keep:
            return ch
        code = ord(ch)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _UNSAFE.sub(esc, text)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Render rows as an aligned plain-text table (numbers right-aligned)."""
    cells = [[_cell(v) for v in row] for row in rows]
    headers = [sanitize(str(h)) for h in headers]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    numeric = [
        all(isinstance(r[i], int | float) or r[i] is None for r in rows) if rows else False
        for i in range(len(headers))
    ]

    def fmt(row: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(widths[i]) if numeric[i] else c.ljust(widths[i]) for i, c in enumerate(row)
        ).rstrip()

    lines = [fmt(list(headers)), fmt(["-" * w for w in widths])]
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


def _cell(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:,.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return sanitize(str(v))


class SafeFormatter(logging.Formatter):
    """A log formatter whose output is :func:`sanitize`-d (log messages quote input text)."""

    def format(self, record: logging.LogRecord) -> str:
        """The formatted record with control characters made visible (newlines kept)."""
        return sanitize(super().format(record), keep="\n")
