"""Fields of NCCL ``COLL`` lines in their plain form: the bulk of every NCCL debug log.

A plain COLL line is ``host:pid:tid [dev] NCCL INFO Op: opCount N sendbuff P recvbuff P count N
datatype N op N root N comm P [nranks=N] stream P``: 24 space-separated tokens, each at a fixed
position. The general path (:mod:`commscope.parsers.nccl_debug`) locates the NCCL prefix of every line
with a regex, cuts the message after it, joins the split prefix back, classifies the message
with several patterns and splits it again; on COLL-heavy logs those passes over every line are
most of the parse. Here one capture-free, anchored pattern (a DFA match in Rust) picks the
lines whose every token has exactly the form the COLL pattern accepts, and their fields are
taken from one split of the whole line. Every other line (timestamped, tagged, spliced, cut,
another record kind, a COLL variant with more fields) stays on the general path, so the fast
path only decides lines that the general path would parse identically.

:func:`coll_field_exprs` is the one definition of the token-to-column mapping; both paths use
it (the general path with the message's tokens, this one with the line's).
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

MSG_OFFSET = 4
"""Index of the message's first token (``Op:``) among the line's tokens."""

_HEX = r"[0-9a-fA-F]+"
_PTR = r"(?:0x[0-9a-fA-F]+|\(nil\))"
PLAIN_COLL = (
    # Prefix: only the plain form (no timestamp, launcher tag or source location), with ids
    # short enough for every integer type the schema gives them.
    r"^[A-Za-z0-9._-]+:[0-9]{1,9}:[0-9]{1,9} \[[0-9]{1,9}\] NCCL INFO "
    # Message: token for token the COLL pattern of nccl_debug, with nothing after the stream.
    rf"[A-Za-z]+: opCount {_HEX} sendbuff {_PTR} recvbuff {_PTR} "
    r"count \d+ datatype \d+ op \d+ root -?\d+ comm 0x[0-9a-fA-F]+ \[nranks=\d+\] "
    rf"stream {_PTR}$"
)


def coll_field_exprs(token: Callable[[int], pl.Expr], *, plain: bool = False) -> dict[str, pl.Expr]:
    """Typed COLL columns from message token ``i`` (0 = ``Op:``, 2 = opCount, ... 19 = stream).

    Non-strict casts: digits that overflow the type (corrupt lines) become null, not a crash.
    ``plain``: the tokens are known to match :data:`PLAIN_COLL` (the stream token is then the
    stream, with no text after it to cut off).
    """
    return {
        "raw_op": token(0).str.strip_suffix(":"),
        "comm_id": token(16).str.to_lowercase(),
        "group_size": token(17).str.slice(8).str.strip_suffix("]").cast(pl.Int32, strict=False),
        "count": token(8).cast(pl.Int64, strict=False),
        "dtype_code": token(10).cast(pl.Int32, strict=False),
        "redop_code": token(12).cast(pl.Int32, strict=False),
        "root": token(14).cast(pl.Int32, strict=False),
        "seq": token(2).str.to_integer(base=16, strict=False),
        "stream": token(19) if plain else token(19).str.extract(r"^(0x[0-9a-fA-F]+|\(nil\))", 1),
    }


def plain_coll_mask(lines: pl.Series) -> pl.Series:
    """True for the plain COLL lines of ``lines`` (a capture-free match per line)."""
    return lines.str.contains(PLAIN_COLL)


def plain_coll_rows(lines: pl.Series, line_no: pl.Series) -> pl.DataFrame:
    """Parse plain COLL lines (``plain_coll_mask`` true) from their tokens.

    Returns:
        One row per line: ``line_no``, ``host``, ``pid``, ``tid``, ``dev`` and the columns of
        :func:`coll_field_exprs`.
    """
    tokens = pl.col("tokens")

    def msg_token(i: int) -> pl.Expr:
        return tokens.list.get(i + MSG_OFFSET)

    df = pl.DataFrame({"line_no": line_no, "raw": lines}).select(
        "line_no", tokens=pl.col("raw").str.split(" ")
    )
    # Process ids repeat (one per thread): split each distinct one once.
    procs = (
        df.select(proc=tokens.list.get(0))
        .unique()
        .with_columns(p=pl.col("proc").str.split_exact(":", 2))
        .select(
            "proc",
            host=pl.col("p").struct.field("field_0"),
            pid=pl.col("p").struct.field("field_1").cast(pl.Int64),
            tid=pl.col("p").struct.field("field_2").cast(pl.Int64),
        )
    )
    return (
        df.select(
            "line_no",
            proc=tokens.list.get(0),
            dev=tokens.list.get(1).str.slice(1).str.strip_suffix("]").cast(pl.Int32),
            **coll_field_exprs(msg_token, plain=True),
        )
        .join(procs, on="proc", how="left", maintain_order="left")
        .select("line_no", "host", "pid", "tid", "dev", *coll_field_exprs(msg_token, plain=True))
    )


__all__ = ["MSG_OFFSET", "PLAIN_COLL", "coll_field_exprs", "plain_coll_mask", "plain_coll_rows"]
