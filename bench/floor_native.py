"""Floor: the vectorised native pass issue 21 proposes, reduced to what the regex script does.

The regex script (``bench/baseline_regex.py``) pulls the fields of NCCL ``COLL`` lines and of
DeepSpeed comms-logger lines. This script does the same work the fastest way this stack offers,
plus the least commscope must add (every line counted by class, the fields typed, one Parquet
file), and nothing else: no communicators, ranks, topology, TUNING pairs, warnings, resume
state or store. Polars' CSV reader reads the file's lines (one string column); one Polars
context over both cores classes each line (a literal search, then the whole line grammar as one
capture-free regex, Rust's DFA, on the candidates only; the NCCL prefix on every line); the
COLL and comm-op lines are cut by position (``split_exact``), their numbers cast, and written to
one Parquet file; every line is counted by class (COLL, comm op, other NCCL-prefixed, the
rest). Any commscope parser that extracts the same fields from the same lines does at least this
much work, so this bounds its speed from above. (It does less than the regex script in one
respect: a COLL line glued behind other output, as nccl-tests' result table leaves 22 per copy
of the real log, is counted as a non-COLL line; the ingest repairs and parses those.)

Alternatives measured on the 156 MB nccl-tests log and kept out because they cost more CPU:
capture groups (Polars ``str.extract_groups`` 0.4-0.8 s, pyarrow's RE2 ``extract_regex`` 0.7 s,
DuckDB ``regexp_extract`` with names 1.4 s, against 0.4 s here for grammar and fields), DuckDB's
``read_csv`` for the lines (0.43 s), Polars' streaming engine (1.3-1.5 s in all, against 1.05),
cutting every line into tokens with the CSV reader (separator ``" "``: 0.86 s for the tokens
alone on this log's long topology lines; on the generated COLL-only logs about as cheap as
this script).

Usage: python bench/floor_native.py [--stages] FILE [FILE ...]   (prints one JSON line)

``--stages`` runs the same steps on the first file eagerly, one at a time, and adds each one's
process CPU (``stages``: all threads; the eager steps mostly run on one thread).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

_HEX = r"0x[0-9a-fA-F]+"
_PTR = rf"(?:{_HEX}|\(nil\))"
NCCL_PREFIX = r"^[^\s:\[\]]+:\d+:\d+ (?:\[\d+\] )?NCCL (?:INFO|WARN|TRACE|CALL) "
COLL_FULL = (
    r"^[^\s:\[\]]+:\d+:\d+ \[\d+\] NCCL INFO [A-Za-z]+: opCount [0-9a-fA-F]+ "
    rf"sendbuff {_PTR} recvbuff {_PTR} count \d+ datatype \d+ op \d+ root -?\d+ "
    rf"comm {_HEX} \[nranks=\d+\] stream {_PTR}\s*$"
)
"""The plain COLL line (commscope's fast path), capture-free."""
DS_FULL = (
    r"comm op: \w+ \| time \(ms\): [\d.]+ \| msg size: [\d.]+ \w+ \| "
    r"algbw \(Gbps\): [\d.]+ +\| busbw \(Gbps\): [\d.]+"
)
"""The comms-logger line, as the regex script matches it."""

_COLL_FIELDS = {  # split_exact(" ") token -> column, for a line ``COLL_FULL`` matched
    "field_0": "prefix",  # host:pid:tid
    "field_1": "dev",
    "field_4": "op",
    "field_6": "opcount",
    "field_12": "count",
    "field_14": "datatype",
    "field_16": "redop",
    "field_18": "root",
    "field_20": "comm",
    "field_21": "nranks",
}


def _lines(path: Path) -> pl.LazyFrame:
    """Every line of ``path`` as one string column, numbered from 1: Polars' CSV reader
    (memory-mapped, multi-threaded) with a separator and no quote that never occur. It keeps
    blank lines (as nulls) and cuts at ``\n`` only, as the parsers number lines; a cheaper
    line split than cutting the bytes at ``\n`` in Rust ourselves (0.11-0.18 against
    0.14-0.30 s CPU for 156 MB, blocks of 16 MiB, load 4-7)."""
    return pl.scan_csv(
        path,
        has_header=False,
        separator="\x1f",
        quote_char=None,
        comment_prefix=None,
        new_columns=["line"],
        schema={"line": pl.Utf8},
        truncate_ragged_lines=True,
        encoding="utf8-lossy",
    ).with_row_index("line_no", offset=1)


def _coll(lf: pl.LazyFrame) -> pl.LazyFrame:
    line = pl.col("line")
    cut = lf.select("line_no", line.str.split_exact(" ", 22).alias("t")).unnest("t")
    c = pl.col
    return cut.select(
        "line_no",
        c("field_0").str.split_exact(":", 2).struct.field("field_0").alias("host"),
        c("field_0").str.split_exact(":", 2).struct.field("field_1").cast(pl.Int64).alias("pid"),
        c("field_1").str.strip_chars("[]").cast(pl.Int32).alias("dev"),
        c("field_4").str.strip_chars_end(":").alias("op"),
        c("field_6").str.to_integer(base=16).alias("opcount"),
        c("field_12").cast(pl.Int64).alias("count"),
        c("field_14").cast(pl.Int16).alias("datatype"),
        c("field_16").cast(pl.Int16).alias("redop"),
        c("field_18").cast(pl.Int32).alias("root"),
        c("field_20").alias("comm"),
        c("field_21").str.extract(r"(\d+)").cast(pl.Int32).alias("nranks"),
    )


def _ds(lf: pl.LazyFrame) -> pl.LazyFrame:
    body = pl.col("line").str.split("comm op: ").list.last().str.split(" | ")
    return lf.select(
        "line_no",
        body.list.get(0).alias("op"),
        body.list.get(1).str.strip_prefix("time (ms): ").cast(pl.Float64).alias("time_ms"),
        body.list.get(2).str.strip_prefix("msg size: ").alias("msg_size"),
        body.list.get(3).str.extract(r"([\d.]+)").cast(pl.Float64).alias("algbw"),
        body.list.get(4).str.extract(r"([\d.]+)").cast(pl.Float64).alias("busbw"),
    )


def _classified(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Each line's class, one capture-free match per class (the literal search first, so the
    grammar's DFA runs only on candidates)."""
    line = pl.col("line")
    coll_like = line.str.contains(" opCount ", literal=True)
    ds_like = line.str.contains("comm op: ", literal=True)
    return lf.with_columns(
        is_coll=pl.when(coll_like).then(line.str.contains(COLL_FULL)).otherwise(False),
        is_ds=pl.when(ds_like).then(line.str.contains(DS_FULL)).otherwise(False),
        is_nccl=line.str.contains(NCCL_PREFIX),
    )


def run(path: Path, out: Path) -> dict[str, object]:
    """Read ``path`` once, class every line, fields to ``out`` (Parquet); counts returned.

    Polars' in-memory engine: the reader and the independent expressions of one context run
    on both cores (its streaming engine took 1.3-1.5 s CPU against 1.05 s, same file)."""
    df = _classified(_lines(path)).collect()
    coll = _coll(df.lazy().filter("is_coll"))
    ds = _ds(df.lazy().filter("is_ds"))
    rows = pl.concat(pl.collect_all([coll, ds]), how="diagonal")
    rows.write_parquet(out, compression="lz4")
    got = df.select(
        pl.len().alias("lines"),
        pl.col("is_coll").sum().alias("coll"),
        pl.col("is_ds").sum().alias("comm_op"),
        (pl.col("is_nccl") & ~pl.col("is_coll")).sum().alias("nccl_other"),
    ).row(0, named=True)
    got["rest"] = got["lines"] - got["coll"] - got["comm_op"] - got["nccl_other"]
    got["rows"] = rows.height
    return got


def stages(path: Path) -> dict[str, float]:
    """The same steps eagerly, each one's process CPU in seconds."""
    out: dict[str, float] = {}
    c0 = time.process_time()

    def lap(name: str) -> None:
        nonlocal c0
        c = time.process_time()
        out[name] = round(c - c0, 3)
        c0 = c

    df = _lines(path).collect()
    lap("read lines")
    line = pl.col("line")
    coll_like = df.filter(line.str.contains(" opCount ", literal=True))
    lap("literal COLL search")
    coll_like.filter(line.str.contains(COLL_FULL))
    lap("COLL grammar (DFA)")
    _coll(coll_like.lazy().filter(line.str.contains(COLL_FULL))).collect()
    lap("COLL grammar + fields cut and typed")
    df.select(line.str.contains(NCCL_PREFIX).sum())
    lap("NCCL prefix, every line")
    ds_like = df.lazy().filter(line.str.contains("comm op: ", literal=True))
    _ds(ds_like.filter(line.str.contains(DS_FULL))).collect()
    lap("comm-op lines: literal search, grammar, fields")
    return out


def main(argv: list[str]) -> int:
    """Run on each file in turn; print lines by class and rows (summed), and optionally the
    first file's per-stage CPU, as JSON."""
    startup_cpu = time.process_time()  # interpreter start and the imports, before any work
    want_stages = "--stages" in argv
    paths = [Path(a) for a in argv if a != "--stages"]
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    got: dict[str, object] = {"files": len(paths)}
    with tempfile.TemporaryDirectory() as tmp:
        for k, path in enumerate(paths):
            for key, n in run(path, Path(tmp) / f"floor{k}.parquet").items():
                got[key] = int(got.get(key, 0)) + int(n)  # type: ignore[call-overload]
    if want_stages:
        got["stages"] = {"start-up and imports": round(startup_cpu, 3), **stages(paths[0])}
    print(json.dumps(got))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
