"""DeepSpeed comms-logger output: verbose per-op lines and ``log_summary()`` tables.

Input is any text stream that holds DeepSpeed's comms-logger output (usually rank 0's stdout,
mixed with everything else the job printed). Two things are read (formats: FORMATS_text_logs.md
§1, from ``deepspeed/utils/comms_logging.py`` v0.7.0 → HEAD):

* **Verbose lines** (``comms_logger.verbose``), one per timed op, printed by global rank 0 via
  ``log_dist``. Both shapes are accepted: v0.7.0-v0.10.0
  ``[Rank 0] rank=0 | comm op: X | time (ms): … | msg size: … | algbw (Gbps): …  | busbw (Gbps): … ``
  and v0.10.1+ ``[Rank 0] comm op: X | time (ms): … | … | busbw (Gbps): …``, with or without the
  ``[<asctime>] [LEVEL] [file:line:func] `` logging prefix, with ``X`` optionally followed by
  ``| [Caller Func: <name>]`` (``debug: true``). The line is found with a *search* (tqdm
  progress bars and other text get glued in front) after ANSI escapes are removed; it must end
  the line or be followed by ``\\r``. Each becomes one ``comm_ops`` row. This hot path is
  vectorised over whole line blocks in two tiers. Lines of the standard shape (the logging
  prefix, ``[Rank N]``, printable-ASCII tokens without spaces, nothing after ``busbw`` but
  blanks) take a capture-free fast path: the timestamp is checked with an anchored regex,
  and the rest of the line, which repeats a lot (the same op, size and rounded latency), is
  validated and cut at its fixed markers once per distinct value and joined back. Every
  other ``comm op:`` line goes through ``VERBOSE_RE`` with ``str.extract_groups``, and all
  other lines through the hint, ANSI and table-header scans; for the lines the fast path
  takes, both paths give the same row.
* **Summary tables** (``deepspeed.comm.log_summary()``): the latency table and, with
  ``show_straggler=True``, the straggler table. Each data row becomes one ``comm_summaries`` row.
  Cells are 20 characters wide (``f"{x: <20}"``); rows are cut at fixed offsets from the
  20-space indent, and a row whose cells do not all validate (a cell of 20+ characters runs into
  the next one) is re-read with a regex that relies on every float having exactly two decimals.
  A small Python state machine walks the few lines from each header to the table's end.

Line accounting (``total = parsed + ignored + rejected``; total = ``\\n``-delimited lines, a final
line without newline counts):

* parsed: verbose lines that produced a ``comm_ops`` row; summary header lines, record-name lines
  and data rows.
* rejected: lines containing ``comm op:`` that do not match the full verbose regex (cut, spliced,
  or a number out of range), and row-like lines (20 spaces then a digit) inside a summary table
  that do not parse, or come before any record-name line.
* ignored: everything else (other output of the job, the straggler banner lines).

Table boundaries: a table starts at its header line. Inside it, a line with 20 spaces then a digit
is a data row; any other non-empty line is the next record name *if the line after it is a data
row*; anything else (and any ``comm op:`` line or another header) ends the table. Launcher and
logging prefixes (``[..]`` tokens such as ``[Rank 0]``, ``[1,0]<stdout>:``, ``host: ``,
``srun -l`` labels, tqdm bars) are stripped from record-name lines; data rows are located by
search, so a prefix does not matter there.

Columns and choices:

* ``rank``: the printing rank from ``[Rank N]`` (else ``rank=N``, else the ``rank`` argument).
  Summaries: 0, the only rank DeepSpeed prints them on.
* ``op``: the record name normalised (see ``OP_MAP``), 'other' when unknown (user ``log_name``).
  ``raw_op`` is the record name without the caller part; ``caller`` the debug-mode caller.
* ``msg_bytes``: ``round(value * 1024**unit_index)`` from the printed size (``_ds_sizes``);
  the printed size is lossy (two decimals), this is the exact inverse of the printing.
* ``ts_ns``: the call's **start, derived**: the line's logging time (the op's end, see "What a
  verbose line's time means" below) minus the call's own latency ``dur_ns`` (per-op, or the
  difference of cumulative values), so ``ts_ns + dur_ns`` is the logged time. ``asctime`` is
  local time without a zone; it is read as naive and converted as if it were UTC (epoch ns of
  the wall-clock reading). ``timing_source`` stays ``logged``: both ends come from the line.
  Precision: ``asctime`` is cut (not rounded) to the millisecond and ``time (ms)`` has two
  decimals, so the derived start lies up to 1 ms (+ 5 µs) before the timer's start, by
  0.5 ms on average, the same for every call (durations are unaffected).
* ``dur_ns``: the op's latency in ns. ``time (ms)`` has exactly two decimals, converted exactly
  (``9.46`` → 9 460 000). ``algbw_gbps``/``busbw_gbps`` stay as logged.
* ``timing_source`` (issue 16): ``logged`` where the line gave a latency (``dur_ns`` is the
  log's own duration, timed by DeepSpeed around the call: with ``prof_all``/sync it includes
  the wait for the GPU), ``none`` where it did not (``dur_ns`` null). Set once per frame, in
  :meth:`DeepSpeedCommsParser._finish`, not per line. ``group_source`` stays null: the lines
  do not name the process group or its size.

What a verbose line's time means, from DeepSpeed's source (deepspeedai/DeepSpeed, the same in
every tag v0.7.0 … v0.19.5 and HEAD edaa72212, 2026-08; checked per tag with ``git show``):

* ``deepspeed/comm/comm.py`` ``timed_op.log_wrapper``: ``timers(log_name).start()`` before the
  op; then ``return func(*args, **kwargs)`` in a ``try`` whose ``finally`` calls
  ``get_accelerator().synchronize()`` (``torch.cuda.synchronize()`` before v0.8.0; plus
  ``cdb.barrier()`` under MPI), ``timers(log_name).stop()``, ``time_elapsed =
  timers(log_name).elapsed(reset=False)`` and only then ``comms_logger.append(raw_name,
  log_name, time_elapsed, msg_size)``.
* ``deepspeed/utils/comms_logging.py`` ``CommsLogger.append``: computes algbw/busbw
  (``calc_bw_log``), adds to ``comms_dict``, and with ``verbose`` builds the line and calls
  ``log_dist(log_str, [0])`` at once.
* ``deepspeed/utils/logging.py`` ``log_dist`` (through ``get_dist_msg`` since v0.18.0) prefixes
  ``[Rank N] `` and calls ``logger.log(INFO, …)`` on the ``DeepSpeed`` logger, whose handler
  formats ``[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] %(message)s``
  (``LoggerFactory.create_logger``): ``asctime`` is the ``LogRecord``'s creation time, i.e.
  after the op, the synchronize and the timer's stop.
* ``deepspeed/utils/timer.py`` ``SynchronizedWallClockTimer.Timer``: device events
  (``torch.cuda.Event`` before v0.9.0, then ``get_accelerator().Event``), or since v0.10.0
  ``time.time()`` where ``get_accelerator().use_host_timers()`` (e.g. CPU); either way from
  ``start()`` to the ``stop()`` after the synchronize.

So ``asctime`` is the end of the timed interval (plus the microseconds of ``elapsed``,
``calc_bw_log`` and formatting), and the interval's start is ``asctime − latency``. The real
samples agree: read as ends, rank 0's consecutive calls never overlap by more than the
millisecond cut (thetagpu 0.9.2, the bundled 0.19.8 recording); read as starts, 11 and 25 of
them would end after the next call was logged; and the bundled recording's calls enclose the
same calls' Kineto ``gloo:*`` ranges (tests/parsers/test_deepspeed_comms.py).

Cumulative latencies (DeepSpeed ≥ 0.18.3): ``timed_op`` reads ``timers(log_name).elapsed(
reset=False)`` and since v0.18.3 (commit 6eb98aaf0 "Wall clock timers API" dropped
``self.event_timers.clear()`` from ``Timer._get_elapsed_msec``) the timer no longer clears
itself, so ``time (ms)`` is the running sum over all earlier calls with the same record name
(the timer key: ``log_name``, plus the caller in debug mode). The parser decides once per file whether latencies are cumulative:

1. Evidence: for each verbose line, its value is compared with the previous line of the same
   record name (file order). ``pairs`` = such comparisons, ``inc``/``dec`` = strict increases and
   decreases.
2. Data verdict: with ``pairs >= MIN_PAIRS`` (8), *cumulative* iff ``dec <= 1 %`` of pairs and
   ``inc >= 90 %`` of pairs (per-op latencies fluctuate or repeat the same rounded value, so they
   fail one test or the other; a cumulative timer only grows, apart from process restarts); with
   fewer pairs, any decrease means *per-op*, otherwise there is no data verdict.
3. Version hint: the ``DeepSpeed info: version=X.Y.Z`` line that the engine logs at start-up;
   cumulative iff the version is ≥ 0.18.3.
4. The data verdict wins (a warning is added when the hint disagrees), then the hint, then
   per-op (with a warning when repeated records existed but could not decide it).

The decision is taken at the end of the first line block in which ``pairs >= MIN_PAIRS`` (blocks
are 32 MiB, so usually with the whole file's evidence), else at end of file; chunks are held back
until then. In cumulative mode ``dur_ns`` = value minus the previous value of the same record
(the first call: the value itself); a value below its predecessor is read as a timer restart
(new process writing to the same log) and taken as is. A warning on the chunk says so.

Incremental parse (``resume``, see ``commscope.parsers.registry.is_resumable``): the end state carries
the version hint, the evidence counters, the last logged value per record name (so cumulative
differencing continues across the appended lines), the decided mode and the summary table in
progress. The mode is re-decided on resume only when the stored part held no verbose line
(otherwise stored rows already used it). Limit: an increment that ends right after a summary
table's record-name line ends that table (its next data row is not yet there to look ahead to).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import polars as pl

from commscope.parsers._ds_sizes import SIZE_PATTERN, size_to_bytes, sizes_to_bytes
from commscope.parsers._io import BLOCK_BYTES, LineBlock, LongLine, Source, iter_line_blocks
from commscope.parsers.registry import LineCounts, ParsedChunk, ParseError, register

_BLOCK_BYTES = BLOCK_BYTES
"""Block size used by :meth:`DeepSpeedCommsParser.parse` (tests shrink it to cross blocks)."""

MIN_PAIRS = 8
"""Repeated-record comparisons needed before the data alone decides cumulative vs per-op."""

CUMULATIVE_SINCE: tuple[int, int, int] = (0, 18, 3)
"""First DeepSpeed release whose verbose latencies are cumulative per record name."""

OP_MAP: dict[str, str] = {
    "all_reduce": "all_reduce",
    "all_reduce_coalesced": "all_reduce",
    "inference_all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "all_gather_base": "all_gather",
    "all_gather_object": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_base": "reduce_scatter",
    "broadcast": "broadcast",
    "broadcast_object_list": "broadcast",
    "reduce": "reduce",
    "all_to_all": "all_to_all",
    "all_to_all_single": "all_to_all",
    "send": "send",
    "isend": "send",
    "recv": "recv",
    "irecv": "recv",
    "barrier": "barrier",
    "monitored_barrier": "barrier",
    "log_summary_barrier": "barrier",
    "gather": "gather",
    "scatter": "scatter",
}
"""Record name (DeepSpeed ``log_name``) → normalised op; anything else is 'other'."""

_ANSI = r"\x1b\[[0-9;?]*[A-Za-z]"
_ANSI_RE = re.compile(_ANSI)
_F2 = r"[0-9]+\.[0-9]{2}"

VERBOSE_RE = (
    r"(?:\[(?P<ts>[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3})\] "
    r"\[(?P<lvl>[A-Z]+)\] \[(?P<src>[^\]]+)\] )?"
    r"(?:\[Rank (?P<prank>-?[0-9]+)\] )?(?:rank=(?P<orank>-?[0-9]+) \| )?"
    r"comm op: (?P<rec>[^|\r]+?)(?: \| \[Caller Func: (?P<caller>[^\]\r]*)\])?"
    rf" \| time \(ms\): (?P<ms>{_F2}) \| msg size: (?P<size>{SIZE_PATTERN})"
    rf" \| algbw \(Gbps\): (?P<algbw>{_F2}) +\| busbw \(Gbps\): (?P<busbw>{_F2})[ \t]*(?:\r|$)"
)
"""The verbose line (Rust regex, searched, not anchored at the start); both DeepSpeed shapes."""

_TS_FORMAT = "%Y-%m-%d %H:%M:%S,%3f"

_FAST_TS = r"^\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3}\] "
"""Fast path, start of the line: ``[<asctime>] `` exactly as ``VERBOSE_RE``'s ``ts`` group.

Why anchored and that strict: ``VERBOSE_RE`` is searched, so a line that starts otherwise may
match at a later position (or with ``ts`` missing); such lines stay on the regex path."""
_FAST_MIN_LINES = 2
"""Fewest ``comm op:`` lines for which a segment tries the fast path: its fixed cost (some
twenty Polars calls, ~3 ms) exceeds the regex's cost for a single line, and every block ends
in a one-line segment (the held-back last line)."""
_FAST_KEY_AT = 26
"""Offset of the fast-path key (``[LEVEL] …`` up to the line's end) after the timestamp."""
_TIME_MARK = " | time (ms): "
_FAST_HEAD = re.compile(
    r"\[[A-Z]+\] \[[!-\\^-~]+\] \[Rank (?P<prank>[0-9]{1,9})\] (?:rank=(?P<orank>[0-9]{1,9}) \| )?"
    r"comm op: (?P<rec>[!-{}~]+)(?: \| \[Caller Func: (?P<caller>[!-\\^-~]*)\])?"
)
"""Fast path, the key up to ``_TIME_MARK`` (Python ``fullmatch``, once per distinct head).

The same groups as ``VERBOSE_RE`` but every token is printable ASCII without spaces (the
file:line:func field also without ``]``, the record name without ``|``, the caller without
``]``): then the key holds no ANSI escape, no ``\\r``, no second ``comm op:``, and the lazy
record name of ``VERBOSE_RE`` ends exactly where this one does. ``[Rank N]`` (which
``log_dist`` always prints) is required, with an N (and a ``rank=N``) of at most nine digits,
no sign: a valid rank (any other line takes the regex path, which rejects a negative or
out-of-range rank). A segment with a fast
row then has a multi-chunk ``rank`` on the regex path too, which makes Polars rechunk the
whole ops frame before ``_finish`` (see :func:`_plain`)."""
_FAST_TAIL = (
    rf"^ \| time \(ms\): {_F2} \| msg size: (?:{SIZE_PATTERN})"
    rf" \| algbw \(Gbps\): {_F2} +\| busbw \(Gbps\): {_F2}[ \t]*$"
)
"""Fast path, the key from ``_TIME_MARK`` on: ``VERBOSE_RE``'s tail without the ``\\r`` exit."""

_VERSION_RE = r"DeepSpeed info: version=([0-9]{1,9})\.([0-9]{1,9})\.([0-9]{1,9})(?:[^0-9]|$)"

_HDR_LAT = re.compile(
    r"Comm\. Op +Message Size +Count +Total Latency\(ms\) +Avg Latency\(ms\) "
    r"+tput_avg \(Gbps\) +busbw_avg \(Gbps\)\s*$"
)
_HDR_STRAG = re.compile(
    r"Comm\. Op +Message Size +Count +Total comm lat\(ms\) +Total straggler\(ms\) "
    r"+Avg comm lat\(ms\) +Avg straggler\(ms\)\s*$"
)
_HDR_HINT = r"Comm\. Op +Message Size +Count "
_ROWLIKE = re.compile(r" {20}[0-9]")
_ROW_START = re.compile(r" {20}(?=[0-9])")
"""Where a data row's 20-space first cell starts: exactly 20 spaces before the size."""
_FLOAT = r"-?[0-9]+\.[0-9]{2}"
_SIZE_FULL = re.compile(rf"(?:{SIZE_PATTERN})")
_COUNT_FULL = re.compile(r"[0-9]+")
_FLOAT_FULL = re.compile(_FLOAT)
_ROW_RE = re.compile(
    rf" {{20}}(?P<size>{SIZE_PATTERN}) +(?P<count>[0-9]+) +(?P<c3>{_FLOAT}) *(?P<c4>{_FLOAT})"
    rf" *(?P<c5>{_FLOAT}) *(?P<c6>{_FLOAT})\s*$"
)
"""Fallback for rows whose cells overflowed: floats have exactly two decimals, so they split."""
_CALLER_MARK = " | [Caller Func: "
_PREFIX_RE = re.compile(
    r"^(?:\[[^\]]*\](?:<std(?:out|err)>)?:?[ \t]*"  # [ts] [INFO] [Rank 0] [1,0]<stdout>:
    r"| *[0-9]+: "  # srun -l label
    r"|[A-Za-z0-9_.-]+: "  # pdsh host:
    r"|\([^)]*\) "  # (RayTrainWorker pid=.., ip=..)
    r"|(?:[^|\r%]|%(?!\|))*+(?<=[0-9])%\|[^|]*+\|[^\[\r]*+\[[^\]]*+\]"  # tqdm bar in front
    r")++"
)
"""Launcher, logging and progress-bar prefixes of a record-name line (matched at its start).

Linear in the line's length: every repetition is possessive and the tqdm bar's text before
``N%|`` is one possessive run checked by a lookbehind (``[^|\r]*[0-9]+%`` backtracked
quadratically: a 200 KB line of digits took tens of seconds)."""

_COMM_OPS_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.Utf8(),
    "rank": pl.Int32(),
    "source_line": pl.Int64(),
    "op": pl.Utf8(),
    "raw_op": pl.Utf8(),
    "caller": pl.Utf8(),
    "msg_bytes": pl.Int64(),
    "ts_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
    "algbw_gbps": pl.Float64(),
    "busbw_gbps": pl.Float64(),
    "latency_logged_ms": pl.Float64(),
    "timing_source": pl.Utf8(),
}
_SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.Utf8(),
    "source_line": pl.Int64(),
    "rank": pl.Int32(),
    "summary_index": pl.Int32(),
    "table_kind": pl.Utf8(),
    "op": pl.Utf8(),
    "raw_op": pl.Utf8(),
    "caller": pl.Utf8(),
    "msg_bytes": pl.Int64(),
    "msg_size_text": pl.Utf8(),
    "count": pl.Int64(),
    "total_latency_ms": pl.Float64(),
    "avg_latency_ms": pl.Float64(),
    "algbw_gbps": pl.Float64(),
    "busbw_gbps": pl.Float64(),
    "total_straggler_ms": pl.Float64(),
    "avg_straggler_ms": pl.Float64(),
}
_REJECTS_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.Utf8(),
    "path": pl.Utf8(),
    "line_no": pl.Int64(),
    "raw": pl.Utf8(),
    "reason": pl.Utf8(),
}
_RAW_MAX = 4096

PER_OP = "per_op"
CUMULATIVE = "cumulative"


@dataclass
class _Segment:
    """Lines to process together, with the line after them for one line of lookahead."""

    lines: pl.Series
    first_line_no: int
    peek: str | None


@dataclass
class _Table:
    """The summary table being read."""

    kind: str
    index: int
    raw_op: str | None = None
    caller: str | None = None


@dataclass
class _State:
    """What one parse carries from segment to segment."""

    version: tuple[int, int, int] | None = None
    last_logged: dict[str, int] = field(default_factory=dict)
    pairs: int = 0
    inc: int = 0
    dec: int = 0
    mode: str | None = None
    table: _Table | None = None
    n_tables: int = 0
    n_ops: int = 0

    def to_json(self) -> dict[str, Any]:
        """JSON-serialisable form (the parser's resume state)."""
        t = self.table
        return {
            "v": 1,
            "version": list(self.version) if self.version else None,
            "last_logged": self.last_logged,
            "pairs": self.pairs,
            "inc": self.inc,
            "dec": self.dec,
            "mode": self.mode,
            "table": [t.kind, t.index, t.raw_op, t.caller] if t else None,
            "n_tables": self.n_tables,
            "n_ops": self.n_ops,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> _State:
        """Inverse of :meth:`to_json`; a fresh state for None or an unknown version."""
        if not d or d.get("v") != 1:
            return cls()
        v, t = d.get("version"), d.get("table")
        n_ops = int(d.get("n_ops", 0))
        return cls(
            version=(int(v[0]), int(v[1]), int(v[2])) if v else None,
            last_logged={str(k): int(x) for k, x in d.get("last_logged", {}).items()},
            pairs=int(d.get("pairs", 0)),
            inc=int(d.get("inc", 0)),
            dec=int(d.get("dec", 0)),
            mode=d.get("mode") if n_ops else None,
            table=_Table(t[0], int(t[1]), t[2], t[3]) if t else None,
            n_tables=int(d.get("n_tables", 0)),
            n_ops=n_ops,
        )


def _segments(blocks: Iterator[LineBlock]) -> Iterator[_Segment]:
    """Re-cut line blocks so that every segment but the last has its next line as ``peek``.

    The last line of each block is held back and processed with the next block; the summary
    state machine needs one line of lookahead to tell a record-name line from a table's end.
    """
    carry: pl.Series | None = None
    carry_no = 1
    for block in blocks:
        series = block.series
        n = series.len()
        if not n:
            continue
        lines = series.head(n - 1)
        if carry is not None:
            lines = pl.concat([carry, lines], rechunk=False)
        first = carry_no if carry is not None else block.first_line_no
        carry = series.tail(1)
        carry_no = block.first_line_no + n - 1
        if lines.len():
            yield _Segment(lines, first, carry[0])
    if carry is not None:
        yield _Segment(carry, carry_no, None)


def _note_long(blocks: Iterator[LineBlock], sink: dict[int, LongLine]) -> Iterator[LineBlock]:
    """Pass ``blocks`` on, noting their over-long lines (``commscope.parsers._io.MAX_LINE_BYTES``)."""
    for block in blocks:
        sink.update((ln.line_no, ln) for ln in block.overlong)
        yield block


def _reject_long(
    chunk: ParsedChunk, seg: _Segment, long_lines: dict[int, LongLine], run_id: str, path: str
) -> None:
    """Reject the over-long lines of ``seg``: they came as empty lines, counted as ignored."""
    end = seg.first_line_no + seg.lines.len()
    mine = [long_lines.pop(n) for n in sorted(long_lines) if seg.first_line_no <= n < end]
    if not mine:
        return
    rows = pl.DataFrame(
        [
            {
                "run_id": run_id,
                "path": path,
                "line_no": ln.line_no,
                "raw": ln.raw,
                "reason": ln.reason,
            }
            for ln in mine
        ],
        schema=_REJECTS_SCHEMA,
        orient="row",
    )
    old = chunk.tables.get("rejects")
    chunk.tables["rejects"] = rows if old is None else pl.concat([old, rows]).sort("line_no")
    chunk.counts.rejected += len(mine)
    chunk.counts.ignored -= len(mine)


def _normalise_op(expr: pl.Expr) -> pl.Expr:
    return expr.replace_strict(OP_MAP, default="other", return_dtype=pl.Utf8)


def _head_columns(rank: int | None) -> list[pl.Expr]:
    """``rank``, ``op``, ``raw_op``, ``caller`` and the record key ``_key`` from the
    ``prank``/``orank``/``rec``/``caller`` groups (shared by both verbose paths)."""
    return [
        pl.coalesce(
            pl.col("prank").cast(pl.Int32, strict=False),
            pl.col("orank").cast(pl.Int32, strict=False),
            pl.lit(rank, pl.Int32),
        ).alias("rank"),
        _normalise_op(pl.col("rec")).alias("op"),
        pl.col("rec").alias("raw_op"),
        pl.col("caller"),
        pl.concat_str([pl.col("rec"), pl.col("caller").fill_null("")], separator="\x1f").alias(
            "_key"
        ),
    ]


def _value_columns(frame: pl.DataFrame) -> list[pl.Expr | pl.Series]:
    """``msg_bytes``, ``_logged`` (ns), ``algbw_gbps``, ``busbw_gbps`` from the printed
    ``size``/``ms``/``algbw``/``busbw`` of ``frame`` (null where out of range)."""
    return [
        sizes_to_bytes(frame.get_column("size")).alias("msg_bytes"),
        _logged_ns(pl.col("ms").str.replace(".", "", literal=True).cast(pl.Int64, strict=False)),
        pl.col("algbw").cast(pl.Float64, strict=False).alias("algbw_gbps"),
        pl.col("busbw").cast(pl.Float64, strict=False).alias("busbw_gbps"),
    ]


def _logged_ns(hundredths: pl.Expr) -> pl.Expr:
    """``time (ms)`` in hundredths of a ms → ns (``_logged``); null beyond int64 (it wrapped)."""
    return (
        pl.when(hundredths <= (2**63 - 1) // 10_000)
        .then(hundredths * 10_000)
        .otherwise(None)
        .alias("_logged")
    )


_RANK_OK = (
    pl.col("prank").is_null() | pl.col("prank").cast(pl.Int32, strict=False).ge(0).fill_null(False)
) & (
    pl.col("orank").is_null() | pl.col("orank").cast(pl.Int32, strict=False).ge(0).fill_null(False)
)
"""The printed ranks of a matched verbose line are valid: none, or 0 to int32 max (a
``[Rank -7]`` or ``rank=99999999999`` line is a reject, never a row of a made-up rank)."""

_IN_RANGE = (
    pl.col("msg_bytes").is_not_null()
    & pl.col("_logged").is_not_null()
    & pl.col("_logged").ge(0)
    & pl.col("algbw_gbps").is_finite()
    & pl.col("busbw_gbps").is_finite()
)
"""Numbers of a matched verbose line that fit their columns (else the line is rejected)."""


def _ts_ns(text: pl.Expr, *, cache: bool = True) -> pl.Expr:
    """Epoch ns of an ``asctime`` (naive, read as UTC); null when not a valid date.

    The fast path passes ``cache=False`` (same values): its timestamps are almost all
    distinct, so Polars' cache of distinct values would only cost a hash per line."""
    return text.str.to_datetime(_TS_FORMAT, strict=False, cache=cache).dt.epoch("ns")


def _start_ns(logged_ns: pl.Expr, dur_ns: pl.Expr) -> pl.Expr:
    """The call's start: the line's logging time (the op's end) minus its own latency.

    ``dur_ns`` is the call's own latency (cumulative values already differenced). Without a
    latency the logged time is kept; null where the difference leaves int64 (a date far
    before 1970 with a huge latency: out of range, like an unreadable date)."""
    return (
        pl.when(dur_ns.is_null())
        .then(logged_ns)
        .when(logged_ns >= dur_ns + pl.lit(-(2**63), pl.Int64))
        .then(logged_ns - dur_ns)
        .otherwise(None)
    )


def _plain(ops: pl.DataFrame) -> pl.DataFrame:
    """``ops`` as plain single-chunk columns, the layout the original path ends up with.

    Why: Polars evaluates ``_logged / 1e6`` (in :meth:`DeepSpeedCommsParser._finish`) exactly
    on a one-row chunk or a constant ("scalar") column, e.g. from a join against a one-row
    table, and by reciprocal elsewhere, so the last bit of ``latency_logged_ms`` depends on
    the layout. On the regex path a segment of several chunks (a block's held-back last line
    in front) gives ops columns chunked like the lines; when ``rank`` is one of them (some
    row has a valid ``[Rank N]``, as every fast row has) Polars rechunks the whole frame
    before ``_finish``, and one-chunk segments give one-chunk frames. Frames with fast rows
    must reach ``_finish`` the same way: one chunk of plain columns.
    """
    return pl.DataFrame([ops.get_column(c) for c in _OPS_COLUMNS]).rechunk()


_OPS_COLUMNS = (
    "rank",
    "source_line",
    "op",
    "raw_op",
    "caller",
    "msg_bytes",
    "ts_ns",
    "algbw_gbps",
    "busbw_gbps",
    "_logged",
    "_key",
)
"""Columns of the ops frame the verbose paths return (helper columns ``_logged``/``_key``)."""


def _fast_table(keys: pl.Series, rank: int | None) -> pl.DataFrame:
    """Op columns for each distinct fast-path key (the line after its timestamp).

    Only keys of the standard shape (``_FAST_HEAD`` up to ``_TIME_MARK``, ``_FAST_TAIL`` from
    there) whose numbers are in range are returned; their fields sit between fixed markers,
    so they are cut with literal ``find`` and ``slice`` (no capture groups). Keys are ASCII
    here, so ``find``'s byte offsets are ``slice``'s character offsets. Lazy chains keep the
    per-call overhead low (a block's last line is a segment of its own).
    """
    key, tail = pl.col("_k"), pl.col("_tail")
    pm, pa, pb = pl.col("_pm"), pl.col("_pa"), pl.col("_pb")
    k = (
        keys.to_frame("_k")
        .lazy()
        .with_columns(key.str.find(_TIME_MARK, literal=True).alias("_p"))
        .with_columns(
            key.str.slice(0, pl.col("_p")).alias("_head"),
            key.str.slice(pl.col("_p")).alias("_tail"),
        )
        .filter(tail.str.contains(_FAST_TAIL))
        .with_columns(
            tail.str.find(" | msg size: ", literal=True).alias("_pm"),
            tail.str.find(" | algbw (Gbps): ", literal=True).alias("_pa"),
            tail.str.find("| busbw (Gbps): ", literal=True).alias("_pb"),
        )
        .select(
            "_k",
            "_head",
            tail.str.slice(len(_TIME_MARK), pm - len(_TIME_MARK)).alias("ms"),
            tail.str.slice(pm + 13, pa - pm - 13).alias("size"),
            tail.str.slice(pa + 17, pb - pa - 17).str.strip_chars_end(" ").alias("algbw"),
            tail.str.slice(pb + 16).str.strip_chars_end(" \t").alias("busbw"),
        )
        .collect()
    )
    heads: list[tuple[str | None, ...]] = []
    for h in k.get_column("_head").unique().to_list():
        m = _FAST_HEAD.fullmatch(h)
        if m is not None:
            heads.append((h, *m.group("prank", "orank", "rec", "caller")))
    head = pl.LazyFrame(
        heads,
        schema={c: pl.Utf8 for c in ("_head", "prank", "orank", "rec", "caller")},
        orient="row",
    ).select("_head", *_head_columns(rank))
    return (
        k.lazy()
        .with_columns(*_value_columns(k))
        .filter(_IN_RANGE)
        .join(head, on="_head", how="inner")
        .select("_k", *(c for c in _OPS_COLUMNS if c not in ("source_line", "ts_ns")))
        .collect()
    )


def _clean(line: str) -> str:
    return _ANSI_RE.sub("", line) if "\x1b" in line else line


def _record_name(line: str) -> str | None:
    """The record name on a (cleaned) table line, prefixes removed; None if not a name."""
    text = line.rsplit("\r", 1)[-1]
    m = _PREFIX_RE.match(text)
    if m is not None:
        text = text[m.end() :]
    text = text.rstrip()
    if not text or text[0].isspace():
        return None
    return text


def _split_caller(name: str) -> tuple[str, str | None]:
    """(record name, caller) of ``<name> | [Caller Func: <caller>]`` (debug mode), else
    (name, None).

    The caller holds no ``]`` and ends the line, so it follows the first marker after the
    line's last-but-one ``]``: found with ``rfind``/``find`` in linear time (a lazy regex
    tried the marker at every occurrence: quadratic in a line full of markers).
    """
    body = name.rstrip()
    if not body.endswith("]"):
        return name, None
    body = body[:-1]
    k = body.find(_CALLER_MARK, body.rfind("]") + 1)
    if k < 0:
        return name, None
    return name[:k], body[k + len(_CALLER_MARK) :]


def _parse_row(line: str) -> tuple[str, int, list[float]] | None:
    """Read a summary data row: (size text, count, four floats); None when malformed."""
    m = _ROW_START.search(line)
    if m is None:
        return None
    base = m.start()
    cells = [line[base + 20 * k : base + 20 * (k + 1)].strip() for k in range(1, 6)]
    cells.append(line[base + 120 :].strip())
    if (
        _SIZE_FULL.fullmatch(cells[0])
        and _COUNT_FULL.fullmatch(cells[1])
        and all(_FLOAT_FULL.fullmatch(c) for c in cells[2:])
    ):
        return cells[0], _count(cells[1]), [float(c) for c in cells[2:]]
    r = _ROW_RE.match(line, base)
    if r is None:
        return None
    return (
        r.group("size"),
        _count(r.group("count")),
        [float(r.group(g)) for g in ("c3", "c4", "c5", "c6")],
    )


def _count(text: str) -> int:
    """A summary row's count; -1 (out of range, rejected) beyond int64 (and before int() of
    4,300+ digits raises)."""
    return int(text) if len(text) <= 18 else -1


@register
class DeepSpeedCommsParser:
    """Parser for DeepSpeed comms-logger verbose lines and summary tables."""

    name: ClassVar[str] = "deepspeed_comms"
    version: ClassVar[str] = "1.1.0"
    resumable: ClassVar[bool] = True

    def sniff(self, head: bytes, path: Path) -> int:
        """Confidence that ``head`` is DeepSpeed comms-logger output.

        95 for a verbose line, 90 for a summary header, 40 for other DeepSpeed logger output
        (rank logs whose comm lines come later or on rank 0 only), 20 for a text file whose path
        names DeepSpeed, else 0.
        """
        if b"\x00" in head:
            return 0
        text = head.decode("utf-8", errors="replace")
        if re.search(r"comm op: [^|\n]+ \| time \(ms\): [0-9]", text):
            return 95
        if re.search(_HDR_HINT, text):
            return 90
        if "DeepSpeed" in text and re.search(
            r"\] \[(?:DEBUG|INFO|WARNING|ERROR)\] \[\w+\.py:\d+:", text
        ):
            return 40
        lowered = str(path).lower()
        if "deepspeed" in lowered and not text.lstrip().startswith(("{", "[{")):
            return 20
        return 0

    def parse(
        self,
        source: Source,
        *,
        run_id: str,
        rank: int | None = None,
        resume: dict[str, Any] | None = None,
    ) -> Iterator[ParsedChunk]:
        """Yield one chunk per line block: ``comm_ops``, ``comm_summaries`` and ``rejects``.

        Chunks are held back until the cumulative-latency mode is decided (module docstring).
        The last chunk carries the resume ``state``; ``resume`` continues from such a state.

        Raises:
            ParseError: the input is binary, not a text log.
        """
        if b"\x00" in source.head(4096):
            raise ParseError(source.path, "binary data (NUL bytes): not a DeepSpeed text log")
        st = _State.from_json(resume)
        last: ParsedChunk | None = None
        for chunk in self._parse_all(source, st, run_id, rank):
            if last is not None:
                yield last
            last = chunk
        if last is None:
            last = ParsedChunk()
        last.state = st.to_json()
        yield last

    def _parse_all(
        self, source: Source, st: _State, run_id: str, rank: int | None
    ) -> Iterator[ParsedChunk]:
        pending: list[tuple[ParsedChunk, pl.DataFrame | None]] = []
        long_lines: dict[int, LongLine] = {}
        blocks = _note_long(iter_line_blocks(source, block_bytes=_BLOCK_BYTES), long_lines)
        for seg in _segments(blocks):
            chunk, ops = self._parse_segment(seg, st, run_id, rank, str(source.path))
            _reject_long(chunk, seg, long_lines, run_id, str(source.path))
            st.n_ops += ops.height if ops is not None else 0
            pending.append((chunk, ops))
            if st.mode is None and st.pairs >= MIN_PAIRS:
                pending[0][0].warnings.extend(self._decide(st, final=False))
            if st.mode is not None:
                yield from (self._finish(c, o, st) for c, o in pending)
                pending.clear()
        if pending:
            if st.mode is None:
                pending[0][0].warnings.extend(self._decide(st, final=True))
            yield from (self._finish(c, o, st) for c, o in pending)

    # -- decision ---------------------------------------------------------------------------

    @staticmethod
    def _decide(st: _State, *, final: bool) -> list[str]:
        """Set ``st.mode`` from the evidence and the version hint; return warnings."""
        warnings: list[str] = []
        data: str | None = None
        if st.pairs >= MIN_PAIRS:
            cumulative = st.dec <= 0.01 * st.pairs and st.inc >= 0.9 * st.pairs
            data = CUMULATIVE if cumulative else PER_OP
        elif st.dec > 0:
            data = PER_OP
        hint: str | None = None
        if st.version is not None:
            hint = CUMULATIVE if st.version >= CUMULATIVE_SINCE else PER_OP
        evidence = f"{st.pairs} repeated-record pairs: {st.inc} increases, {st.dec} decreases"
        version = ".".join(map(str, st.version)) if st.version else None
        if data is not None and hint is not None and data != hint:
            warnings.append(
                f"DeepSpeed {version} suggests {hint} latencies but the data says {data} "
                f"({evidence}); using {data}"
            )
        mode = data or hint
        if mode is None:
            mode = PER_OP
            if final and st.pairs > 0:
                warnings.append(
                    f"could not tell per-op from cumulative latencies ({evidence}, no "
                    "DeepSpeed version line); latencies kept as logged"
                )
        st.mode = mode
        if mode == CUMULATIVE:
            why = f"DeepSpeed {version}" if hint == CUMULATIVE else "latencies only grow"
            warnings.append(
                f"cumulative per-op latencies detected ({why}; {evidence}): DeepSpeed >= 0.18.3 "
                "logs each record name's running total, so dur_ns is the difference from the "
                "previous line of the same record; algbw/busbw and the summary table are as "
                "logged (computed from the running totals)"
            )
        return warnings

    @staticmethod
    def _finish(chunk: ParsedChunk, ops: pl.DataFrame | None, st: _State) -> ParsedChunk:
        """Fill ``dur_ns`` according to the decided mode and attach ``comm_ops``."""
        if ops is None:
            return chunk
        logged, prev = pl.col("_logged"), pl.col("_prev")
        if st.mode == CUMULATIVE:
            restart = prev.is_not_null() & (logged < prev)
            n_restart = ops.select(restart.sum()).item()
            if n_restart:
                chunk.warnings.append(
                    f"{n_restart} cumulative latencies fell below their predecessor (timer "
                    "restart, e.g. a new process in the same log); taken as is"
                )
            dur = pl.when(prev.is_null() | restart).then(logged).otherwise(logged - prev)
        else:
            dur = logged
        chunk.tables["comm_ops"] = (
            ops.with_columns(dur.alias("dur_ns"), (logged / 1e6).alias("latency_logged_ms"))
            .with_columns(
                _start_ns(pl.col("ts_ns"), pl.col("dur_ns")).alias("ts_ns"),
                pl.when(pl.col("dur_ns").is_not_null())
                .then(pl.lit("logged"))
                .otherwise(pl.lit("none"))
                .alias("timing_source"),
            )
            .select(list(_COMM_OPS_SCHEMA))
        )
        return chunk

    # -- one segment ------------------------------------------------------------------------

    def _parse_segment(
        self, seg: _Segment, st: _State, run_id: str, rank: int | None, path: str
    ) -> tuple[ParsedChunk, pl.DataFrame | None]:
        lines = seg.lines.alias("line")
        n = lines.len()
        chunk = ParsedChunk(counts=LineCounts(total=n))
        rejects: list[pl.DataFrame] = []

        # Standard verbose lines first; every other line (the rest) takes the general path.
        is_c = lines.str.contains("comm op:", literal=True)
        fast = (
            self._fast(lines, is_c, seg.first_line_no, rank)
            if is_c.sum() >= _FAST_MIN_LINES
            else None
        )
        if fast is None:
            rest, rest_pos = lines, pl.int_range(n, dtype=pl.UInt32, eager=True)
        else:
            keep = pl.repeat(True, n, dtype=pl.Boolean, eager=True)
            keep.scatter(fast.get_column("source_line") - seg.first_line_no, False)
            rest, rest_pos = lines.filter(keep), keep.arg_true()
        has_ansi = rest.str.contains("\x1b", literal=True)
        clean = (
            rest.str.replace_all(_ANSI, "") if has_ansi.any() else rest
        )  # same length, same order

        self._scan_hints(clean, st, chunk)
        slow, v_rejects, n_slow = self._verbose(
            rest,
            clean,
            rest_pos.cast(pl.Int64) + seg.first_line_no,
            run_id,
            rank,
            path,
            chunk.warnings,
        )
        if v_rejects is not None:
            rejects.append(v_rejects)
        chunk.counts.parsed += n_slow + (fast.height if fast is not None else 0)
        chunk.counts.rejected += v_rejects.height if v_rejects is not None else 0
        if fast is not None and slow is not None:
            ops = _plain(pl.concat([fast, slow]).sort("source_line"))
        else:
            ops = fast if fast is not None else slow
        if ops is not None:
            self._evidence(ops, st)
            ops = ops.with_columns(pl.lit(run_id, pl.Utf8).alias("run_id"))

        headers = rest_pos.filter(clean.str.contains(_HDR_HINT)).to_list()
        s_rows, s_rejects, s_parsed = self._tables(headers, seg, st)
        chunk.counts.parsed += s_parsed
        chunk.counts.rejected += len(s_rejects)
        if s_rows:
            chunk.tables["comm_summaries"] = pl.DataFrame(
                [{**r, "run_id": run_id} for r in s_rows], schema=_SUMMARY_SCHEMA, orient="row"
            )
        if s_rejects:
            rejects.append(
                pl.DataFrame(
                    [
                        {"run_id": run_id, "path": path, "line_no": no, "raw": raw, "reason": why}
                        for no, raw, why in s_rejects
                    ],
                    schema=_REJECTS_SCHEMA,
                    orient="row",
                )
            )
        if rejects:
            chunk.tables["rejects"] = pl.concat(rejects).sort("line_no")
        chunk.counts.ignored = chunk.counts.total - chunk.counts.parsed - chunk.counts.rejected
        return chunk, ops

    @staticmethod
    def _scan_hints(clean: pl.Series, st: _State, chunk: ParsedChunk) -> None:
        """Pick up the DeepSpeed version line and note DeepSpeed's silent-exit message."""
        if st.version is None:
            hits = clean.filter(clean.str.contains("DeepSpeed info: version=", literal=True))
            if hits.len():
                g = hits.str.extract_groups(_VERSION_RE).struct.unnest().drop_nulls()
                if g.height:
                    st.version = (int(g[0, 0]), int(g[0, 1]), int(g[0, 2]))
        n_wrong = clean.str.contains("wrong comm_op specified", literal=True).sum()
        if n_wrong:
            chunk.warnings.append(
                "DeepSpeed printed 'wrong comm_op specified' and exits right after it "
                "(calc_bw_log on an unhandled op): the run's log is truncated there"
            )

    @staticmethod
    def _fast(
        lines: pl.Series, is_c: pl.Series, first_line_no: int, rank: int | None
    ) -> pl.DataFrame | None:
        """The ops of the segment's standard verbose lines (``_FAST_*``), in line order.

        A line is taken when it starts with ``_FAST_TS`` and the rest of it is a key of
        :func:`_fast_table`; the rest repeats a lot, so it is validated and cut once per
        distinct value. Returns None when no line is taken; taken lines are never rejects.
        """
        rows = (
            pl.DataFrame(
                {
                    "source_line": is_c.arg_true().cast(pl.Int64) + first_line_no,
                    "line": lines.filter(is_c),
                }
            )
            .lazy()
            .filter(pl.col("line").str.contains(_FAST_TS))
            .select(
                "source_line",
                pl.col("line").str.slice(_FAST_KEY_AT).alias("_k"),
                _ts_ns(pl.col("line").str.slice(1, 23), cache=False).alias("ts_ns"),
            )
            .collect()
        )
        table = _fast_table(rows.get_column("_k").unique(), rank)
        if not table.height:
            return None
        ops = (
            rows.lazy()
            .join(table.lazy(), on="_k", how="inner", maintain_order="left")
            .select(_OPS_COLUMNS)
            .collect()
        )
        return _plain(ops)

    @staticmethod
    def _verbose(
        lines: pl.Series,
        clean: pl.Series,
        line_no: pl.Series,
        run_id: str,
        rank: int | None,
        path: str,
        warnings: list[str],
    ) -> tuple[pl.DataFrame | None, pl.DataFrame | None, int]:
        """Extract the verbose lines among ``lines`` with ``VERBOSE_RE`` (vectorised).

        ``clean`` is ``lines`` without ANSI escapes and ``line_no`` their line numbers.

        Returns:
            (ops frame with helper columns ``_key``/``_logged`` or None, rejects or None,
            number of parsed lines).
        """
        is_v = clean.str.contains("comm op:", literal=True)
        if not is_v.any():
            return None, None, 0
        sub = clean.filter(is_v)
        df = pl.DataFrame(
            {
                "source_line": line_no.gather(is_v.arg_true()),
                "raw": lines.filter(is_v),
                "n_rec": sub.str.count_matches("comm op:", literal=True),
            }
        ).with_columns(sub.str.extract_groups(VERBOSE_RE).struct.unnest())
        df = df.with_columns(*_value_columns(df))
        matched = pl.col("ms").is_not_null()
        bad = df.filter(~(matched & _IN_RANGE & _RANK_OK))
        rejects = None
        if bad.height:
            rejects = bad.select(
                pl.lit(run_id, pl.Utf8).alias("run_id"),
                pl.lit(path, pl.Utf8).alias("path"),
                pl.col("source_line").alias("line_no"),
                pl.col("raw").str.slice(0, _RAW_MAX),
                pl.when(matched & ~_RANK_OK)
                .then(pl.lit("verbose comm op line: rank is negative or out of range"))
                .when(matched)
                .then(pl.lit("verbose comm op line: a number is out of range"))
                .otherwise(
                    pl.lit(
                        "line mentions 'comm op:' but does not match the DeepSpeed verbose "
                        "format (cut, spliced or foreign)"
                    )
                )
                .alias("reason"),
            )
        good = df.filter(matched & _IN_RANGE & _RANK_OK)
        n_multi = int((df["n_rec"] > 1).sum())
        if n_multi:
            warnings.append(
                f"{n_multi} lines hold more than one 'comm op:' record (spliced output); at most one "
                "record per line is kept"
            )
        if good.height == 0:
            return None, rejects, 0
        derived = {
            e.meta.output_name(): e
            for e in (*_head_columns(rank), _ts_ns(pl.col("ts")).alias("ts_ns"))
        }
        ops = good.select([derived.get(c, pl.col(c)) for c in _OPS_COLUMNS])
        return ops, rejects, good.height

    @staticmethod
    def _evidence(ops: pl.DataFrame, st: _State) -> None:
        """Compare each value with the previous one of its record; add ``_prev`` in place."""
        prior = pl.col("_key").replace_strict(st.last_logged, default=None, return_dtype=pl.Int64)
        prev = pl.col("_logged").shift(1).over("_key").fill_null(prior)
        ops.insert_column(ops.width, ops.select(prev.alias("_prev")).to_series())
        diff = ops.select((pl.col("_logged") - pl.col("_prev")).alias("d"))["d"]
        st.pairs += diff.len() - diff.null_count()
        st.inc += int((diff > 0).sum())
        st.dec += int((diff < 0).sum())
        last = ops.group_by("_key", maintain_order=True).agg(pl.col("_logged").last())
        st.last_logged.update(zip(last["_key"].to_list(), last["_logged"].to_list(), strict=True))

    # -- summary tables ---------------------------------------------------------------------

    def _tables(
        self, headers: list[int], seg: _Segment, st: _State
    ) -> tuple[list[dict[str, Any]], list[tuple[int, str, str]], int]:
        """Walk the summary tables of a segment (Python; tables are a few dozen lines).

        ``headers``: segment positions of the (cleaned) lines with ``_HDR_HINT``, in order.
        """
        rows: list[dict[str, Any]] = []
        rejects: list[tuple[int, str, str]] = []
        parsed = 0
        if not headers and st.table is None:
            return rows, rejects, 0
        lines = seg.lines
        n = len(lines)

        def walk(j: int) -> int:
            nonlocal parsed
            while j < n and st.table is not None:
                line = _clean(lines[j])
                if "comm op:" in line or _HDR_LAT.search(line) or _HDR_STRAG.search(line):
                    st.table = None
                    break
                if _ROWLIKE.search(line):
                    why = self._row(line, seg.first_line_no + j, st.table, rows)
                    if why is None:
                        parsed += 1
                    else:
                        rejects.append((seg.first_line_no + j, lines[j][:_RAW_MAX], why))
                    j += 1
                    continue
                name = _record_name(line)
                nxt = lines[j + 1] if j + 1 < n else seg.peek
                if name is not None and nxt is not None:
                    nxt = _clean(nxt)
                    if _ROWLIKE.search(nxt) and "comm op:" not in nxt:
                        st.table.raw_op, st.table.caller = _split_caller(name)
                        parsed += 1
                        j += 1
                        continue
                st.table = None
            return j

        pos = walk(0) if st.table is not None else 0
        for h in headers:
            if h < pos:
                continue
            line = _clean(lines[h])
            kind = "latency" if _HDR_LAT.search(line) else "straggler"
            if kind == "straggler" and not _HDR_STRAG.search(line):
                continue  # a "Comm. Op  Message Size  Count" line of some other shape
            st.table = _Table(kind=kind, index=st.n_tables)
            st.n_tables += 1
            parsed += 1
            pos = walk(h + 1)
        return rows, rejects, parsed

    @staticmethod
    def _row(line: str, line_no: int, table: _Table, rows: list[dict[str, Any]]) -> str | None:
        """Append the summary row on ``line``; return a reject reason instead when it fails."""
        if table.raw_op is None:
            return "summary row before any record-name line"
        got = _parse_row(line)
        if got is None:
            return f"malformed {table.kind} summary row"
        size, count, (c3, c4, c5, c6) = got
        nbytes = size_to_bytes(size)
        if nbytes is None:
            return "summary row: message size out of range"
        if count < 0 or not all(math.isfinite(x) for x in (c3, c4, c5, c6)):
            return "summary row: a number is out of range"
        row: dict[str, Any] = {
            "source_line": line_no,
            "rank": 0,
            "summary_index": table.index,
            "table_kind": table.kind,
            "op": OP_MAP.get(table.raw_op, "other"),
            "raw_op": table.raw_op,
            "caller": table.caller,
            "msg_bytes": nbytes,
            "msg_size_text": size,
            "count": count,
        }
        if table.kind == "latency":
            row.update(total_latency_ms=c3, avg_latency_ms=c4, algbw_gbps=c5, busbw_gbps=c6)
        else:
            row.update(
                total_latency_ms=c3, total_straggler_ms=c4, avg_latency_ms=c5, avg_straggler_ms=c6
            )
        rows.append(row)
        return None
