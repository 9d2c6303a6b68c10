"""Link NCCL calls of an nsys SQLite export to the GPU kernels they launched (issue 16).

The timing rule (the same as for Kineto): a communication call's interval is the GPU work it
launched, not its CPU range. NCCL's NVTX range (``ncclAllReduce``, ... in the ``NCCL`` domain)
only times the enqueue on the CPU; the kernel runs later, often much longer. The chain is

    NCCL NVTX range (thread T, CPU [start, end])
      -> CUPTI_ACTIVITY_KIND_RUNTIME launch on thread T with start in [range.start, range.end]
      -> CUPTI_ACTIVITY_KIND_KERNEL row with the same correlationId in the same process.

This is how nsys's own ``nvtx_gpu_proj_trace`` projects a range onto the GPU.

* **Launch of a kernel** (``kernels.launch_ts_ns``): the ``start`` of the RUNTIME row with the
  kernel's ``correlationId`` in the kernel's process (correlation ids are unique per process
  only). Where several RUNTIME rows share one id (the 2022.2 saxpy export writes each launch
  twice, eventClass 0 = CUDA runtime and eventClass 67 around it), the CUDA runtime row
  (eventClass 0) wins, then the earliest.
* **Grouped calls.** Between ``ncclGroupStart`` and ``ncclGroupEnd`` NCCL only enqueues; the
  kernel of the whole group is launched inside the outermost ``ncclGroupEnd`` range. A call
  inside a group that launched nothing itself takes the kernels of the ``ncclGroupEnd`` that
  closes its group: the calls of one group share one interval (NCCL fuses them into one
  kernel), so each call's bandwidth over that interval is a lower bound.
* **Iterations.** A step is an NVTX range whose whole name is a step marker
  (:data:`commscope.parsers._nsys_common.STEP_RE`: ``ProfilerStep#N``, ``step 3``, ``train_step_7``).
  Work belongs to the step whose CPU window contains its launch (HTA rule
  ``step.start <= launch < step.end``): a step range on the launching thread first, else one
  on the launching process. Work launched outside every step has a null iteration.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field

import polars as pl

from commscope.parsers._nsys_common import NCCL_API_OPS, STEP_RE, decode_global_id

GROUP_START = "ncclGroupStart"
GROUP_END = "ncclGroupEnd"
PID_MASK = -(1 << 24)
"""``globalTid & PID_MASK`` is the ``globalPid`` of the thread's process (TID bits cleared;
SQLite holds the u64 ids signed, and two's complement keeps the mask right)."""

_STEP = re.compile(STEP_RE)
_STEP_SCHEMA = {"pid": pl.Int64, "gtid": pl.Int64, "start": pl.Int64, "end": pl.Int64}
_RANGE_SCHEMA = {"rowid": pl.Int64, "gtid": pl.Int64, "start": pl.Int64, "end": pl.Int64}
_LAUNCHED_SCHEMA = {"rowid": pl.Int64, "k_start": pl.Int64, "k_end": pl.Int64, "k_n": pl.Int64}


def _cols(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}


def has_rows(con: sqlite3.Connection, tables: set[str], table: str) -> bool:
    """True if ``table`` exists and holds at least one row."""
    return (
        table in tables and con.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone() is not None
    )


def launch_join(con: sqlite3.Connection, tables: set[str], activity: str) -> tuple[str, str]:
    """SQL pieces giving each row of a CUPTI activity table its launching runtime call.

    Returns:
        ``(columns, join)``: ``columns`` selects the launch start and launching ``globalTid``
        (``NULL, NULL`` when the export has no usable RUNTIME table); ``join`` is the
        ``LEFT JOIN`` clause to append after ``FROM "<activity>" k``.
    """
    rt = "CUPTI_ACTIVITY_KIND_RUNTIME"
    need = {"start", "globalTid", "correlationId"}
    if rt not in tables or not need <= _cols(con, rt):
        return "NULL, NULL", ""
    if not {"correlationId", "globalPid"} <= _cols(con, activity):
        return "NULL, NULL", ""
    cls = "r.eventClass IS NOT 0" if "eventClass" in _cols(con, rt) else "0"
    sub = (
        f"SELECT r.correlationId AS cid, r.globalTid & {PID_MASK} AS gpid, r.start AS lstart, "
        f"r.globalTid AS ltid, ROW_NUMBER() OVER (PARTITION BY r.correlationId, "
        f"r.globalTid & {PID_MASK} ORDER BY {cls}, r.start) AS rn FROM {rt} r "
        f'WHERE r.correlationId IN (SELECT correlationId FROM "{activity}")'
    )
    join = f" LEFT JOIN ({sub}) l ON l.cid = k.correlationId AND l.gpid = k.globalPid AND l.rn = 1"
    return "l.lstart, l.ltid", join


def _text_filter(con: sqlite3.Connection, tables: set[str], pred: str) -> str:
    """A WHERE fragment keeping ``NVTX_EVENTS n`` rows whose text or registered string
    satisfies ``pred`` (an SQL predicate written after a column, e.g. ``LIKE '%step%'``).

    The registered strings are matched once in ``StringIds`` and the events filtered by id, so
    the name lookup runs only for the rows kept (exports hold millions of NVTX rows).
    """
    cols = _cols(con, "NVTX_EVENTS")
    parts = []
    if "text" in cols:
        parts.append(f"n.text {pred}")
    if "textId" in cols and "StringIds" in tables:
        ids = [int(r[0]) for r in con.execute(f"SELECT id FROM StringIds WHERE value {pred}")]
        if ids:
            parts.append(f"n.textId IN ({', '.join(map(str, ids))})")
    return "(" + " OR ".join(parts) + ")" if parts else "0"


def read_steps(con: sqlite3.Connection, tables: set[str], name_sql: str) -> pl.DataFrame:
    """The step ranges of an export: (pid, gtid, start, end, iteration), sorted by start.

    Args:
        name_sql: SQL expression of an ``NVTX_EVENTS n`` row's text (``text`` or ``textId``).
    """
    empty = pl.DataFrame(schema={**_STEP_SCHEMA, "iteration": pl.Int32})
    if "NVTX_EVENTS" not in tables or not {"eventType", "start", "end"} <= _cols(
        con, "NVTX_EVENTS"
    ):
        return empty
    gt = "n.globalTid" if "globalTid" in _cols(con, "NVTX_EVENTS") else "NULL"
    like = _text_filter(con, tables, "LIKE '%step%'")
    like += " OR " + _text_filter(con, tables, "LIKE '%iter%'")
    rows = con.execute(
        f"SELECT {gt}, n.start, n.end, {name_sql} FROM NVTX_EVENTS n "
        f"WHERE n.eventType IN (59, 60) AND n.end IS NOT NULL AND n.end >= n.start AND ({like})"
    ).fetchall()
    keep = [(g, s, e, int(m.group(1))) for g, s, e, nm in rows if (m := _STEP.match(str(nm)))]
    if not keep:
        return empty
    df = pl.DataFrame(
        keep,
        schema={"gtid": pl.Int64, "start": pl.Int64, "end": pl.Int64, "iteration": pl.Int32},
        orient="row",
    )
    pid, _ = decode_global_id("gtid")
    return df.with_columns(pid.alias("pid")).select(*_STEP_SCHEMA, "iteration").sort("start")


def step_of(df: pl.DataFrame, steps: pl.DataFrame, t: str, gtid: str, pid: str) -> pl.Series:
    """Iteration of each row of ``df``: the step whose window contains time ``t`` (see module).

    Args:
        df: frame with the time, thread (serialized globalTid) and process id columns.
        steps: :func:`read_steps` output.
        t: column of the CPU launch time; ``gtid``: its thread; ``pid``: its process.
    """
    out = pl.Series("iteration", [None] * df.height, dtype=pl.Int32)
    if steps.is_empty() or df.is_empty():
        return out
    left = (
        df.select(pl.col(t).alias("_t"), pl.col(gtid).alias("gtid"), pl.col(pid).alias("pid"))
        .with_row_index("_i")
        .filter(pl.col("_t").is_not_null())
        .sort("_t")
    )
    found = []
    for key in ("gtid", "pid"):
        hit = left.join_asof(
            steps.select(key, "start", "end", "iteration").filter(pl.col(key).is_not_null()),
            left_on="_t",
            right_on="start",
            by=key,
            strategy="backward",
            check_sortedness=False,  # sorted on the key above; by-groups hide it
        )
        in_step = pl.when(pl.col("_t") < pl.col("end")).then(pl.col("iteration"))
        found.append(hit.select("_i", in_step.alias(f"_it_{key}")))
    merged = found[0].join(found[1], on="_i", how="left")
    its = merged.select("_i", pl.coalesce("_it_gtid", "_it_pid").alias("iteration"))
    full = pl.DataFrame({"_i": pl.int_range(0, df.height, dtype=pl.UInt32, eager=True)})
    return full.join(its, on="_i", how="left", maintain_order="left")["iteration"].cast(pl.Int32)


@dataclass
class CallLinks:
    """NCCL call ranges of an export and the kernels each launched (filled batch by batch).

    Attributes:
        ranges: data-moving calls and ``ncclGroupEnd`` ranges (rowid, gtid, start, end),
            sorted by start: the ranges a kernel launch is attributed to.
        group_end: call rowid -> rowid of the outermost ``ncclGroupEnd`` closing its group.
        partial: per kernel batch, (rowid, first kernel start, last kernel end, count).
    """

    ranges: pl.DataFrame
    group_end: pl.DataFrame
    partial: list[pl.DataFrame] = field(default_factory=list)
    _launched: pl.DataFrame | None = None

    @classmethod
    def empty(cls) -> CallLinks:
        """No call ranges (an export without NCCL ranges, or without thread ids)."""
        return cls(
            pl.DataFrame(schema=_RANGE_SCHEMA),
            pl.DataFrame(schema={"rowid": pl.Int64, "group_end": pl.Int64}),
        )

    def add_batch(self, k: pl.DataFrame) -> None:
        """Attribute one batch of kernels (``lstart``, ``ltid``, ``start``, ``end``)."""
        if self.ranges.is_empty():
            return
        k = k.filter(pl.col("lstart").is_not_null() & pl.col("ltid").is_not_null())
        if k.is_empty():
            return
        hit = (
            k.select(pl.col("lstart"), pl.col("ltid").alias("gtid"), "start", "end")
            .sort("lstart")
            .join_asof(
                self.ranges.rename({"start": "r_start", "end": "r_end"}),
                left_on="lstart",
                right_on="r_start",
                by="gtid",
                strategy="backward",
                check_sortedness=False,  # sorted on the key above; by-groups hide it
            )
            .filter(pl.col("rowid").is_not_null() & (pl.col("lstart") <= pl.col("r_end")))
        )
        if hit.height:
            self.partial.append(
                hit.group_by("rowid").agg(
                    pl.col("start").min().alias("k_start"),
                    pl.col("end").max().alias("k_end"),
                    pl.len().cast(pl.Int64).alias("k_n"),
                )
            )

    def launched(self) -> pl.DataFrame:
        """rowid -> (k_start, k_end, k_n) over all batches."""
        if self._launched is None:
            if self.partial:
                self._launched = (
                    pl.concat(self.partial)
                    .group_by("rowid")
                    .agg(pl.col("k_start").min(), pl.col("k_end").max(), pl.col("k_n").sum())
                )
            else:
                self._launched = pl.DataFrame(schema=_LAUNCHED_SCHEMA)
            self.partial = []
        return self._launched


def read_call_ranges(
    con: sqlite3.Connection, tables: set[str], nccl_domain_ids: list[int], name_sql: str
) -> CallLinks:
    """The NCCL-domain call and group ranges of an export, with each call's closing group end.

    Group depth is followed per thread in start order: ``ncclGroupStart`` opens (+1),
    ``ncclGroupEnd`` closes (-1, never below 0); a call made at depth > 0 belongs to the
    ``ncclGroupEnd`` that brings the depth back to 0.
    """
    if not nccl_domain_ids:
        return CallLinks.empty()
    ids = ", ".join(str(int(i)) for i in nccl_domain_ids)
    calls = set(NCCL_API_OPS)
    wanted = ", ".join(f"'{c}'" for c in sorted(calls | {GROUP_START, GROUP_END}))
    named = _text_filter(con, tables, f"IN ({wanted})")
    rows = con.execute(
        f"SELECT n.rowid, n.globalTid, n.start, n.end, {name_sql} FROM NVTX_EVENTS n "
        f"WHERE n.eventType IN (59, 60) AND n.domainId IN ({ids}) AND n.end IS NOT NULL "
        f"AND n.end >= n.start AND {named} ORDER BY n.globalTid, n.start, n.rowid"
    ).fetchall()
    ranges: list[tuple[int, int, int, int]] = []
    links: list[tuple[int, int]] = []
    thread = None
    depth = 0
    waiting: list[int] = []
    for rowid, g, s, e, name in rows:
        if g != thread:
            thread, depth, waiting = g, 0, []
        if name == GROUP_START:
            depth += 1
        elif name == GROUP_END:
            ranges.append((rowid, g, s, e))
            depth = max(depth - 1, 0)
            if depth == 0:
                links += [(c, rowid) for c in waiting]
                waiting = []
        elif name in calls:
            ranges.append((rowid, g, s, e))
            if depth > 0:
                waiting.append(rowid)
    return CallLinks(
        pl.DataFrame(ranges, schema=_RANGE_SCHEMA, orient="row").sort("start"),
        pl.DataFrame(links, schema={"rowid": pl.Int64, "group_end": pl.Int64}, orient="row"),
    )


def time_calls(
    ops: pl.DataFrame, links: CallLinks, steps: pl.DataFrame, *, kernels_traced: bool
) -> pl.DataFrame:
    """Add the issue-16 timing columns to NCCL call rows.

    ``ops`` holds the range's ``rowid``, ``start``, ``end``, ``gtid``, ``pid``,
    ``msg_bytes`` and ``group_size``. A call gets, in order: its own kernels (``kernel``); else the kernels of the
    ``ncclGroupEnd`` closing its group (``kernel``); else ``none``, with ``dur_ns`` null: it
    launched nothing (a one-rank or zero-size call, a launch from another thread), or the
    export traced no kernel at all (no CUDA trace). An NCCL range only times NCCL's CPU
    enqueue, never the transfer (issue 16: no number from the wrong clock), so it is never a
    call's duration; ``kernel_count`` is 0 when kernels were traced, null when they were not.
    ``launch_ts_ns`` is the range start.
    """
    launched = links.launched()
    ops = (
        ops.join(launched, on="rowid", how="left", maintain_order="left")
        .join(links.group_end, on="rowid", how="left", maintain_order="left")
        .join(
            launched.rename(
                {"rowid": "group_end", "k_start": "g_start", "k_end": "g_end", "k_n": "g_n"}
            ),
            on="group_end",
            how="left",
            maintain_order="left",
        )
    )
    own = pl.col("k_n").fill_null(0) > 0
    grp = pl.col("g_n").fill_null(0) > 0
    source = pl.when(own | grp).then(pl.lit("kernel")).otherwise(pl.lit("none"))
    ts = (
        pl.when(own)
        .then(pl.col("k_start"))
        .when(grp)
        .then(pl.col("g_start"))
        .otherwise(pl.col("start"))
    )
    dur = (
        pl.when(own)
        .then(pl.col("k_end") - pl.col("k_start"))
        .when(grp)
        .then(pl.col("g_end") - pl.col("g_start"))
        .otherwise(pl.lit(None, dtype=pl.Int64))
    )
    count = (
        pl.when(own)
        .then(pl.col("k_n"))
        .when(grp)
        .then(pl.col("g_n"))
        .when(pl.lit(kernels_traced))
        .then(pl.lit(0))
        .otherwise(pl.lit(None))
    )
    ops = ops.with_columns(
        source.alias("timing_source"),
        ts.alias("ts_ns"),
        dur.alias("dur_ns"),
        pl.col("start").alias("launch_ts_ns"),
        count.cast(pl.Int32).alias("kernel_count"),
    )
    return ops.with_columns(step_of(ops, steps, "launch_ts_ns", "gtid", "pid"))
