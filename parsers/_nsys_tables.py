"""Read the tabular outputs of Nsight Systems: ``nsys stats`` CSV reports and ``nsys recipe`` Parquet.

Reports are recognised by their header, not their file name; headers are matched by their base
name with the unit suffix removed (``Start (ns)`` → ``Start``, unit ``ns``), because units and
column sets vary by version and ``--timeunit``. What is read:

* NVTX range traces (``nvtx_pushpop_trace``, ``nvtx_startend_trace``; a ``Start``, ``Name``,
  ``End``/``Duration`` header plus an NVTX column such as ``RangeId``/``Lvl``) → ``markers``,
  and NCCL-domain ranges of data-moving API calls (``NCCL:ncclAllReduce``...) also →
  ``comm_ops`` (op from the function name; the reports carry no message size, so
  ``msg_bytes`` is null);
* NVTX GPU projections (``nvtx_gpu_proj_trace``: ``Projected Start``/``Projected Duration``)
  → the same, timed by the *projected* (GPU) interval;
* ``comm_ops.timing_source`` (issue 16) says which: ``none`` for a range trace (the CPU
  range is the only interval the report has, and it times NCCL's enqueue, not the transfer:
  ``dur_ns`` is null, ``ts_ns`` the CPU start, so the call counts but has no comm time),
  ``kernel`` for a projection of a range that launched GPU ops (``kernel_count`` =
  ``NumGPUOps``, every GPU op of the range), ``none`` for one that launched none (no
  duration). ``launch_ts_ns`` is the CPU start (``Start``, or ``Orig Start`` of a projection);
* GPU traces (``cuda_gpu_trace``: ``Strm``/``GrdX`` columns) → ``kernels``;
* other recognised reports (``*_sum`` summaries, API traces) → every row ignored, with a
  warning.

Records (``total``) are the data rows (a blank CSV line is not a row). A range without a usable
start/duration is rejected; a row without a name (the recipe writes one per-thread total row
with a null Name) is ignored. ``source_line`` is the physical line of the CSV row, or the
1-based row index of a Parquet file. The ``Rank`` column of recipe outputs is the index of
the input report, not a distributed rank, and is not used.
"""

from __future__ import annotations

import csv
import io
import lzma
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow.parquet as pq
import zstandard

from commscope.parsers._nccl_kernels import classify_kernels
from commscope.parsers._nsys_common import (
    NCCL_DOMAIN,
    RankResolution,
    api_op_expr,
    iteration_expr,
    marker_kind_expr,
    rejects_frame,
    resolve_rank,
    split_domain,
    trace_meta_frame,
)
from commscope.parsers.registry import LineCounts, ParsedChunk, ParseError

if TYPE_CHECKING:
    from commscope.parsers._io import Source

BATCH_ROWS = 100_000
"""Data rows per chunk."""

MAX_PREAMBLE_LINES = 40
"""Lines searched for the CSV header (``nsys stats`` to stdout prints a preamble first)."""

_UNIT_RE = re.compile(r"^(.*?)\s*\(([^()]*)\)\s*$")
_TIME_SCALE: dict[str, int] = {
    "": 1,
    "ns": 1,
    "us": 1_000,
    "usec": 1_000,
    "\u03bcs": 1_000,
    "\u00b5s": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
}
_NVTX_COLS = {"RangeId", "Lvl", "NameTree", "DurChild", "DurNonChild", "NumChild", "Style"}
_KNOWN = {
    "Start",
    "End",
    "Duration",
    "Name",
    "PID",
    "TID",
    "Pid",
    "Tid",
    "CorrId",
    "CorrID",
    "Result",
    "T-Pri",
    "Thread Name",
    "Time",
    "Total Time",
    "Instances",
    "Avg",
    "Med",
    "Min",
    "Max",
    "StdDev",
    "Range",
    "Style",
    "Device",
    "Ctx",
    "GreenCtx",
    "Strm",
    "Bytes",
    "Throughput",
    "Count",
    "Operation",
    "Projected Start",
    "Projected Duration",
    "Orig Start",
    "Orig Duration",
    "NumGPUOps",
    "Rank",
    "GrdX",
    "GrdY",
    "GrdZ",
    "BlkX",
    "BlkY",
    "BlkZ",
    "Reg/Trd",
    "StcSMem",
    "DymSMem",
    "SrcMemKd",
    "DstMemKd",
    "GridXYZ",
    "BlockXYZ",
    "ParentId",
    "RangeStack",
} | _NVTX_COLS

TRACE_KINDS = ("nvtx_trace", "nvtx_proj", "gpu_trace")
"""Report kinds whose rows are ingested (the others are recognised and ignored)."""


def split_header(header: list[str]) -> list[tuple[str, str]]:
    """``(base, unit)`` of each header cell: ``Start (ns)`` → ``("Start", "ns")``."""
    out = []
    for h in header:
        h = h.strip().strip('"').strip()
        m = _UNIT_RE.match(h)
        out.append((m.group(1).strip(), m.group(2).strip()) if m else (h, ""))
    return out


_CLEAN_BASE = re.compile(r"^[A-Za-z][A-Za-z0-9 /%.\-]{0,39}$")
_CLEAN_UNIT = re.compile(r"^[A-Za-z%/\u03bc\u00b5]{0,8}$")


def is_clean_header(cells: list[str]) -> bool:
    """True if every cell reads like an nsys column title (``Start (ns)``, ``Reg/Trd``, ...)."""
    return bool(cells) and all(
        _CLEAN_BASE.match(b) and _CLEAN_UNIT.match(u) for b, u in split_header(cells)
    )


def report_kind(bases: list[str]) -> str | None:
    """Name the kind of an nsys stats/recipe table from its header bases; None if not nsys.

    Summaries and other reports are claimed only when most titles are known nsys titles and
    the first one is.
    """
    b = set(bases)
    if "Name" in b and {"Projected Start", "Projected Duration"} <= b:
        return "nvtx_proj"
    if {"Start", "Name"} <= b and ("Strm" in b or "GrdX" in b):
        return "gpu_trace"
    if {"Start", "Name"} <= b and b & {"End", "Duration"} and b & _NVTX_COLS:
        return "nvtx_trace"
    known = [x for x in bases if x in _KNOWN]
    if {"Time", "Instances"} <= b or ("Total Time" in b and "Instances" in b):
        return "summary"
    if len(known) >= 3 and len(known) >= 0.7 * len(bases) and bases[0] in _KNOWN:
        return "other"
    return None


def sniff_csv_head(text: str) -> tuple[str, int] | None:
    """Find the nsys stats header in the first lines of ``text``: (kind, 0-based line index)."""
    lines = text.split("\n")
    if len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut by the sniff window
    for i, line in enumerate(lines[:MAX_PREAMBLE_LINES]):
        line = line.rstrip("\r")
        if "," not in line:
            continue
        try:
            cells = next(csv.reader([line]))
        except (csv.Error, StopIteration):
            continue
        if not is_clean_header(cells):
            continue
        kind = report_kind([b for b, _ in split_header(cells)])
        if kind is not None:
            return kind, i
    return None


def parquet_kind(path: Path) -> str | None:
    """Kind of a recipe Parquet file from its schema (None if not an nsys table)."""
    try:
        schema = pq.read_schema(path)
    except (OSError, ValueError):
        return None
    kind = report_kind([b for b, _ in split_header(list(schema.names))])
    return kind if kind in TRACE_KINDS else None


# -- frame building --------------------------------------------------------------------------


@dataclass
class _State:
    kind: str
    path: Path
    rank: RankResolution
    pids: set[int] = field(default_factory=set)
    nccl: bool = False


@dataclass(frozen=True)
class _Cols:
    """Column roles of one report: raw column name and unit scale (ns per unit)."""

    by_base: dict[str, tuple[str, int | None]]

    def get(self, *bases: str) -> tuple[str, int | None] | None:
        for b in bases:
            if b in self.by_base:
                return self.by_base[b]
        return None


def _roles(header: list[str]) -> _Cols:
    out: dict[str, tuple[str, int | None]] = {}
    for raw, (base, unit) in zip(header, split_header(header), strict=True):
        out.setdefault(base, (raw, _TIME_SCALE.get(unit.lower())))
    return _Cols(out)


def _time(df: pl.DataFrame, role: tuple[str, int | None] | None, what: str, path: Path) -> pl.Expr:
    """An Int64 ns expression for a time column (strings or numbers, any unit)."""
    if role is None:
        return pl.lit(None, dtype=pl.Int64)
    col, scale = role
    if scale is None:
        raise ParseError(path, f"column {col!r} ({what}) has a unit that is not a time unit")
    dtype = df.schema[col]
    c = pl.col(col)
    if dtype == pl.Utf8:
        s = c.str.strip_chars()
        as_float = (s.cast(pl.Float64, strict=False) * scale).round(0)
        as_float = as_float.cast(pl.Int64, strict=False)
        if scale == 1:
            return pl.coalesce(s.cast(pl.Int64, strict=False), as_float)
        return as_float
    if dtype.is_integer():
        return c.cast(pl.Int64) * scale
    return (c.cast(pl.Float64) * scale).round(0).cast(pl.Int64, strict=False)


def _int(df: pl.DataFrame, role: tuple[str, int | None] | None) -> pl.Expr:
    if role is None:
        return pl.lit(None, dtype=pl.Int64)
    col = role[0]
    if df.schema[col] == pl.Utf8:
        s = pl.col(col).str.strip_chars()
        return pl.coalesce(
            s.cast(pl.Int64, strict=False),
            s.cast(pl.Float64, strict=False).cast(pl.Int64, strict=False),
        )
    return pl.col(col).cast(pl.Int64, strict=False)


def _raw_rows(df: pl.DataFrame, header: list[str]) -> list[str]:
    return [",".join("" if v is None else str(v) for v in row) for row in df.select(header).rows()]


def _nvtx_frame(df: pl.DataFrame, header: list[str], st: _State) -> ParsedChunk:
    roles = _roles(header)
    name_role = roles.get("Name")
    if name_role is None:  # report_kind() guarantees a Name column for these kinds
        raise ParseError(st.path, "report without a Name column")
    if st.kind == "nvtx_proj":
        start = _time(df, roles.get("Projected Start"), "start", st.path)
        dur = _time(df, roles.get("Projected Duration"), "duration", st.path)
        cpu_start = _time(df, roles.get("Orig Start"), "start", st.path)
        gpu_ops = _int(df, roles.get("NumGPUOps"))
    else:
        start = _time(df, roles.get("Start"), "start", st.path)
        end = _time(df, roles.get("End"), "end", st.path)
        dur_col = _time(df, roles.get("Duration"), "duration", st.path)
        dur = pl.when(end.is_not_null()).then(end - start).otherwise(dur_col)
        cpu_start = start
        gpu_ops = pl.lit(None, dtype=pl.Int64)
    work = df.with_columns(
        cpu_start.alias("_cpu_start"),
        gpu_ops.alias("_gpu_ops"),
        pl.col(name_role[0]).cast(pl.Utf8).alias("_name"),
        start.alias("_start"),
        dur.alias("_dur"),
        _int(df, roles.get("PID", "Pid")).alias("_pid"),
    )
    named = pl.col("_name").is_not_null() & (pl.col("_name").str.strip_chars() != "")
    ok = pl.col("_start").is_not_null() & pl.col("_dur").is_not_null() & (pl.col("_dur") >= 0)
    ignored = work.filter(~named)
    bad = work.filter(named & ~ok.fill_null(False))
    good = work.filter(named & ok.fill_null(False))
    rejects = None
    if bad.height:
        reasons = bad.select(
            pl.when(pl.col("_start").is_null())
            .then(pl.lit("range without a start"))
            .when(pl.col("_dur").is_null())
            .then(pl.lit("range without an end or duration"))
            .otherwise(pl.lit("range ends before it starts"))
        ).to_series()
        rejects = rejects_frame(
            list(
                zip(
                    bad["_line"].to_list(),
                    _raw_rows(bad, header),
                    reasons.to_list(),
                    strict=True,
                )
            )
        )
    domain, name = split_domain("_name")
    good = good.with_columns(domain.alias("domain"), name.alias("name"), st.rank.expr("_pid"))
    st.pids.update(p for p in good["_pid"].unique().to_list() if p is not None)
    markers = good.select(
        "rank",
        "name",
        marker_kind_expr("domain"),
        pl.col("_start").alias("ts_ns"),
        pl.col("_dur").alias("dur_ns"),
        iteration_expr("name"),
        "domain",
        pl.col("_line").alias("source_line"),
    )
    nccl = good.filter(pl.col("domain") == NCCL_DOMAIN)
    if nccl.height:
        st.nccl = True
    comm_ops = nccl.with_columns(api_op_expr("name").alias("op")).filter(pl.col("op").is_not_null())
    comm_ops = comm_ops.select(
        "rank",
        pl.col("_pid").alias("pid"),
        pl.col("_line").alias("source_line"),
        "op",
        pl.col("name").alias("raw_op"),
        pl.lit(None, dtype=pl.Int64).alias("msg_bytes"),
        *_timing(st.kind),
    )
    return ParsedChunk(
        tables={
            k: v
            for k, v in {"markers": markers, "comm_ops": comm_ops, "rejects": rejects}.items()
            if v is not None and v.height
        },
        counts=LineCounts(
            total=df.height,
            parsed=markers.height,
            ignored=ignored.height,
            rejected=0 if rejects is None else rejects.height,
        ),
        warnings=[f"{ignored.height} rows without a name ignored"] if ignored.height else [],
    )


def _timing(kind: str) -> list[pl.Expr]:
    """``ts_ns``/``dur_ns`` and the issue-16 timing columns of NCCL range rows.

    A range trace has no GPU interval (the report holds no kernels to link) and an NCCL range
    only times the CPU enqueue: ``none``, ``dur_ns`` null, ``ts_ns`` the CPU start.
    A GPU projection times the GPU work launched inside the range (``kernel``, with
    ``kernel_count`` = the recipe's ``NumGPUOps``, every GPU op not only kernels); a projected
    range that launched no GPU op has no duration (``none``). ``launch_ts_ns`` is the CPU
    range start (``Orig Start`` of a projection).
    """
    if kind != "nvtx_proj":
        return [
            pl.col("_start").alias("ts_ns"),
            pl.lit(None, dtype=pl.Int64).alias("dur_ns"),
            pl.lit("none").alias("timing_source"),
            pl.col("_start").alias("launch_ts_ns"),
            pl.lit(None, dtype=pl.Int32).alias("kernel_count"),
        ]
    launched = pl.col("_gpu_ops").is_null() | (pl.col("_gpu_ops") > 0)
    return [
        pl.col("_start").alias("ts_ns"),
        pl.when(launched).then(pl.col("_dur")).alias("dur_ns"),
        pl.when(launched).then(pl.lit("kernel")).otherwise(pl.lit("none")).alias("timing_source"),
        pl.col("_cpu_start").alias("launch_ts_ns"),
        pl.col("_gpu_ops").cast(pl.Int32).alias("kernel_count"),
    ]


def _gpu_frame(df: pl.DataFrame, header: list[str], st: _State) -> ParsedChunk:
    roles = _roles(header)
    name_role = roles.get("Name")
    if name_role is None:  # report_kind() guarantees a Name column for these kinds
        raise ParseError(st.path, "report without a Name column")
    dev = roles.get("Device")
    if dev is not None and df.schema[dev[0]] == pl.Utf8:
        # "NVIDIA H100 80GB HBM3 (0)" or "0"
        s = pl.col(dev[0]).str.strip_chars()
        device = pl.coalesce(
            s.cast(pl.Int64, strict=False), s.str.extract(r"\((\d+)\)\s*$", 1).cast(pl.Int64)
        )
    else:
        device = _int(df, dev)
    byt = roles.get("Bytes")
    exact_bytes = byt is not None and byt[0].strip().endswith("(B)")
    work = df.with_columns(
        pl.col(name_role[0]).cast(pl.Utf8).alias("name"),
        _time(df, roles.get("Start"), "start", st.path).alias("ts_ns"),
        _time(df, roles.get("Duration"), "duration", st.path).alias("dur_ns"),
        device.cast(pl.Int32).alias("device"),
        _int(df, roles.get("Strm")).alias("stream"),
        _int(df, roles.get("CorrId", "CorrID")).alias("correlation"),
        (_int(df, byt) if exact_bytes else pl.lit(None, dtype=pl.Int64)).alias("msg_bytes"),
    )
    ok = pl.col("ts_ns").is_not_null() & pl.col("dur_ns").is_not_null() & (pl.col("dur_ns") >= 0)
    bad = work.filter(~ok.fill_null(False))
    good = work.filter(ok.fill_null(False))
    cls = classify_kernels(good["name"])
    kernels = good.with_columns(cls["category"], cls["comm_op"], st.rank.expr()).select(
        "rank",
        "device",
        "stream",
        "name",
        "category",
        "comm_op",
        "ts_ns",
        "dur_ns",
        "correlation",
        "msg_bytes",
        pl.col("_line").alias("source_line"),
    )
    if (cls["category"] == "comm").any():
        st.nccl = True
    rejects = None
    if bad.height:
        rejects = rejects_frame(
            [
                (ln, raw, "GPU activity without a start or duration")
                for ln, raw in zip(bad["_line"].to_list(), _raw_rows(bad, header), strict=True)
            ]
        )
    return ParsedChunk(
        tables={
            k: v
            for k, v in {"kernels": kernels, "rejects": rejects}.items()
            if v is not None and v.height
        },
        counts=LineCounts(
            total=df.height,
            parsed=kernels.height,
            rejected=0 if rejects is None else rejects.height,
        ),
    )


def _frame(df: pl.DataFrame, header: list[str], st: _State) -> ParsedChunk:
    if st.kind in ("nvtx_trace", "nvtx_proj"):
        return _nvtx_frame(df, header, st)
    if st.kind == "gpu_trace":
        return _gpu_frame(df, header, st)
    return ParsedChunk(counts=LineCounts(total=df.height, ignored=df.height))


def _final(st: _State, source_version: str) -> ParsedChunk:
    pid = next(iter(st.pids)) if len(st.pids) == 1 else None
    meta = trace_meta_frame(
        st.rank,
        anchor_ns=None,
        aligned=False,
        backend="nccl" if st.nccl else None,
        host=None,
        pid=pid,
        source_version=source_version,
    )
    warnings = [
        f"{st.kind} report has no session start time: the timeline cannot be aligned to "
        "wall clock (trace_meta.aligned = false)"
    ]
    if st.kind not in TRACE_KINDS:
        warnings.append(f"nsys report of kind {st.kind!r}: rows are recognised but not ingested")
    return ParsedChunk(tables={"trace_meta": meta}, warnings=warnings)


# -- CSV -------------------------------------------------------------------------------------


def read_csv(source: Source, *, rank: int | None) -> Iterator[ParsedChunk]:
    """Yield the rows of one ``nsys stats`` CSV report (plain or compressed).

    Raises:
        ParseError: no nsys stats header in the first lines, or an unreadable stream.
    """
    try:
        yield from _read_csv(source, rank)
    except (OSError, EOFError, lzma.LZMAError, zstandard.ZstdError, csv.Error) as exc:
        raise ParseError(source.path, f"cannot read: {exc}") from exc


def _unique(names: list[str]) -> list[str]:
    """Header names made unique (a repeated title gets ``#2``, ``#3``...)."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}#{seen[n]}")
    return out


def _read_csv(source: Source, rank: int | None) -> Iterator[ParsedChunk]:
    res = resolve_rank(source.path, rank)
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with source.open() as fh:
        text = io.TextIOWrapper(fh, encoding="utf-8", errors="replace", newline="")
        header: list[str] | None = None
        kind = None
        line_no = 0
        for line in text:
            line_no += 1
            if "," in line:
                try:
                    cells = next(csv.reader([line.rstrip("\r\n")]))
                except csv.Error:
                    cells = []
                clean = is_clean_header(cells)
                kind = report_kind([b for b, _ in split_header(cells)]) if clean else None
                if kind is not None:
                    header = _unique([c.strip() for c in cells])
                    break
            if line_no >= MAX_PREAMBLE_LINES:
                break
        if header is None or kind is None:
            raise ParseError(source.path, "no nsys stats CSV header in the first lines")
        st = _State(kind, source.path, res)
        yield ParsedChunk(
            counts=LineCounts(),
            warnings=list(res.warnings)
            + (
                [f"{line_no - 1} preamble lines before the CSV header skipped"]
                if line_no > 1
                else []
            ),
        )
        reader = csv.reader(text)
        ncol = len(header)
        cols: list[list[str | None]] = [[] for _ in range(ncol)]
        lines: list[int] = []
        bad: list[tuple[int, str, str]] = []
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            ln = line_no + reader.line_num
            if len(row) != ncol:
                bad.append((ln, ",".join(row), f"{len(row)} fields, header has {ncol}"))
            else:
                for i, v in enumerate(row):
                    cols[i].append(v)
                lines.append(ln)
            if len(lines) + len(bad) >= BATCH_ROWS:
                yield _csv_batch(header, cols, lines, bad, st)
                cols = [[] for _ in range(ncol)]
                lines, bad = [], []
        if lines or bad:
            yield _csv_batch(header, cols, lines, bad, st)
    yield _final(st, f"nsys stats csv ({kind})")


def _csv_batch(
    header: list[str],
    cols: list[list[str | None]],
    lines: list[int],
    bad: list[tuple[int, str, str]],
    st: _State,
) -> ParsedChunk:
    data: dict[str, Any] = {
        h: pl.Series(h, c, dtype=pl.Utf8) for h, c in zip(header, cols, strict=True)
    }
    data["_line"] = pl.Series("_line", lines, dtype=pl.Int64)
    df = pl.DataFrame(data)
    chunk = _frame(df, header, st)
    if bad:
        extra = rejects_frame(bad)
        prev = chunk.tables.get("rejects")
        chunk.tables["rejects"] = extra if prev is None else pl.concat([prev, extra])
        chunk.counts += LineCounts(total=len(bad), rejected=len(bad))
    return chunk


# -- Parquet ---------------------------------------------------------------------------------


def read_parquet(source: Source, *, rank: int | None) -> Iterator[ParsedChunk]:
    """Yield the rows of one ``nsys recipe`` Parquet output, record batch by record batch.

    Raises:
        ParseError: unreadable Parquet, or not an nsys recipe table.
    """
    if source.compression is not None:
        raise ParseError(source.path, "compressed Parquet files are not supported")
    try:
        pf = pq.ParquetFile(source.path)
    except (OSError, ValueError) as exc:
        raise ParseError(source.path, f"unreadable Parquet: {exc}") from exc
    header = list(pf.schema_arrow.names)
    kind = report_kind([b for b, _ in split_header(header)])
    if kind not in TRACE_KINDS:
        raise ParseError(source.path, "Parquet file is not an nsys recipe trace table")
    res = resolve_rank(source.path, rank)
    st = _State(kind, source.path, res)
    yield ParsedChunk(counts=LineCounts(), warnings=list(res.warnings))
    first = 1
    try:
        for batch in pf.iter_batches(batch_size=BATCH_ROWS):
            df = pl.DataFrame(batch)
            df = df.with_columns(
                pl.int_range(first, first + df.height, dtype=pl.Int64).alias("_line")
            )
            first += df.height
            yield _frame(df, header, st)
    except OSError as exc:
        raise ParseError(source.path, f"unreadable Parquet: {exc}", first) from exc
    yield _final(st, f"nsys recipe parquet ({kind})")
