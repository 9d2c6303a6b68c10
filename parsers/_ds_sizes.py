"""DeepSpeed message sizes: undo ``convert_size`` exactly.

DeepSpeed prints message sizes with ``deepspeed.utils.comms_logging.convert_size``: ``0B`` for
zero, otherwise ``round(size / 1024**i, 2)`` followed by one of ``B KB MB GB TB PB EB ZB YB``.
The units are 1024-based despite their SI names, and the value is rounded to two decimals, so
the byte count cannot be recovered exactly; what *is* exact is the printed value times its unit,
``round(value * 1024**i)``, which this module computes with rational arithmetic (a float product
loses whole bytes from the TB range on). Sizes are few and repeat a lot, so frames are converted
through a mapping of their distinct values rather than per row.
"""

from __future__ import annotations

import re
from fractions import Fraction

import polars as pl

UNITS: tuple[str, ...] = ("B", "KB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB")
"""Unit names in ``convert_size`` order; the index is the power of 1024."""

SIZE_PATTERN = r"0B|[0-9]+(?:\.[0-9]+)? [KMGTPEZY]?B"
"""Regex (Python and Rust syntax) for a size as ``convert_size`` prints it."""

_SIZE_RE = re.compile(r"(?:0B|(?P<int>[0-9]+)(?:\.(?P<frac>[0-9]+))? (?P<unit>[KMGTPEZY]?B))")

INT64_MAX = 2**63 - 1


def size_to_bytes(text: str) -> int | None:
    """Convert one printed size to bytes: ``round(value * 1024**unit_index)``, ``0B`` -> 0.

    Args:
        text: the size exactly as printed (``'6.14 MB'``, ``'128.0 B'``, ``'0B'``).

    Returns:
        The byte count (Python's round, i.e. half to even; ties cannot occur for values with
        at most two decimals in KB and above), or None when ``text`` is not a size or the
        result does not fit a signed 64-bit integer.
    """
    m = _SIZE_RE.fullmatch(text.strip())
    if m is None:
        return None
    if m.group("unit") is None:
        return 0
    frac = m.group("frac") or ""
    if len(m.group("int")) + len(frac) > 40:
        return None  # beyond int64 in any unit (and int() of 4,300+ digits raises)
    value = Fraction(int(m.group("int") + frac), 10 ** len(frac))
    n = round(value * 1024 ** UNITS.index(m.group("unit")))
    return n if n <= INT64_MAX else None


def sizes_to_bytes(sizes: pl.Series) -> pl.Series:
    """Convert a Series of printed sizes to an Int64 Series of bytes (null where invalid).

    The distinct values are converted in Python (exactly) and mapped back in one vectorised
    ``replace_strict``; a block of a million lines typically holds a few dozen distinct sizes.
    """
    mapping = {s: size_to_bytes(s) for s in sizes.drop_nulls().unique().to_list()}
    return sizes.replace_strict(mapping, default=None, return_dtype=pl.Int64)
