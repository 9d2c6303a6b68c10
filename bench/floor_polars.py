"""Floor: Polars' fastest way to cut the same log files into fields, and nothing else.

Each file is read whole and tokenised by Polars' multi-threaded CSV reader (separator ``" "``,
no quoting, ragged lines cut at 26 tokens): every line becomes a row of string fields, the
positional split a COLL or comms-logger line needs, done in Rust without a Python string per
line. No matching, no typing, no Parquet. Any parser built on Polars does at least this much
work per byte, so its speed bounds commscope's text-log ingest from above; it is reported beside
the regex script to show what the 2x target asks of the stack.

Usage: python bench/floor_polars.py FILE [FILE ...]   (prints one JSON line: lines)
"""

from __future__ import annotations

import io
import json
import sys

import polars as pl

N_FIELDS = 26
"""Tokens kept per line: a COLL line has 24, a comms-logger verbose line 26."""

_SCHEMA = {f"t{i}": pl.Utf8 for i in range(N_FIELDS)}


def main(paths: list[str]) -> int:
    """Tokenise ``paths``; print the number of rows (lines) as JSON."""
    lines = 0
    for path in paths:
        with open(path, "rb") as fh:  # noqa: PTH123
            data = fh.read()
        df = pl.read_csv(
            io.BytesIO(data),
            has_header=False,
            separator=" ",
            quote_char=None,
            comment_prefix=None,
            schema=_SCHEMA,
            missing_columns="insert",
            truncate_ragged_lines=True,
            encoding="utf8-lossy",
        )
        lines += df.height
    print(json.dumps({"lines": lines}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
