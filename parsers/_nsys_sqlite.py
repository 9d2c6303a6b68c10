"""Read an Nsight Systems SQLite export (``nsys export --type sqlite``) in bounded memory.

Every schema version seen is read the same way: tables are looked up in ``sqlite_master``
(absent tables are normal: exports are lazy) and columns are chosen by name from
``PRAGMA table_info`` (columns were added over time, and users add their own). The database
is opened read-only and immutable; it is never written.

Records (the ``total`` of the accounting) are the rows of ``CUPTI_ACTIVITY_KIND_KERNEL``,
``CUPTI_ACTIVITY_KIND_MEMCPY``, ``CUPTI_ACTIVITY_KIND_MEMSET`` and ``NVTX_EVENTS``:

* kernel/memcpy/memset rows → ``kernels`` (parsed), or ``rejects`` when ``end`` is NULL or
  before ``start``;
* NVTX push/pop (eventType 59) and start/end (60) ranges → ``markers`` (parsed), NCCL-domain
  ranges of data-moving API calls also → ``comm_ops``, timed by the kernels they launched
  (:mod:`commscope.parsers._nsys_launch`); a range with NULL or early ``end`` is rejected, a range
  without any text is ignored;
* every other NVTX event (marks, domain/category/thread names, ...) → ignored.

``source_line`` (and ``rejects.line_no``) is the row's ``rowid`` in its table.

Order of work: before any row is streamed, the step ranges and the NCCL call/group ranges are
read (small: only NVTX ranges named like a step, and NCCL-domain ranges); each kernel batch is
joined to its launching RUNTIME row in SQL (``kernels.launch_ts_ns``), given its step, and
attributed to the call range containing its launch (a running per-call first start, last end
and count); the NVTX batches, streamed last, then time each call from those aggregates.
Memory stays bounded by the number of NCCL calls, not of kernels.
"""

from __future__ import annotations

import lzma
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import zstandard

from commscope.parsers._nccl_kernels import classify_kernels
from commscope.parsers._nsys_common import (
    NCCL_DOMAIN,
    REDOPS,
    RankResolution,
    api_op_expr,
    decode_global_id,
    iteration_expr,
    marker_kind_expr,
    pid_of,
    rejects_frame,
    resolve_rank,
    trace_meta_frame,
)
from commscope.parsers._nsys_groups import fold_groups
from commscope.parsers._nsys_launch import (
    CallLinks,
    _text_filter,
    has_rows,
    launch_join,
    read_call_ranges,
    read_steps,
    step_of,
    time_calls,
)
from commscope.parsers._nsys_payload import (
    COLOR,
    COMM_ID,
    CUDA_DEV,
    KEY,
    MSG_SIZE,
    NRANKS,
    PARENT_COMM_ID,
    PEER,
    RANK,
    REDOP,
    ROOT,
    PayloadDecoder,
)
from commscope.parsers.registry import LineCounts, ParsedChunk, ParseError

if TYPE_CHECKING:
    from commscope.parsers._io import Source

BATCH_ROWS = 50_000
"""Rows fetched from SQLite per chunk (bounds memory on multi-GB exports)."""

NSYS_MARKER_TABLES = ("StringIds", "META_DATA_EXPORT", "EXPORT_META_DATA")
"""Tables whose presence identifies an nsys export (with any CUPTI/NVTX/TARGET_INFO table)."""

_ACTIVITY_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "NVTX_EVENTS",
)

MEMCPY_KINDS: dict[int, str] = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "UVM HtoD",
    12: "UVM DtoH",
    13: "UVM DtoD",
}
"""``ENUM_CUDA_MEMCPY_OPER`` (CUPTI ``CUpti_ActivityMemcpyKind``) ids as short names."""

_MPI_THREAD_RE = re.compile(r"^MPI Rank (\d+)$")
_COMM_INIT_RE = re.compile(r"^ncclComm(?:InitRank\w*|Split|Shrink)$")

_RANGE_TYPES = (59, 60)


def is_nsys_db(tables: set[str]) -> bool:
    """True if the table names of a SQLite database are those of an nsys export."""
    has_marker = any(t in tables for t in NSYS_MARKER_TABLES)
    has_data = any(
        t.startswith(("CUPTI_ACTIVITY_KIND_", "NVTX_", "TARGET_INFO_", "ENUM_NSYS_"))
        for t in tables
    )
    return has_marker and has_data


def connect_ro(path: Path) -> sqlite3.Connection:
    """Open a SQLite file read-only and immutable (no journal, no lock, never written)."""
    uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True)


def table_names(con: sqlite3.Connection) -> set[str]:
    """Names of the tables of a database."""
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}


def _c(cols: set[str], alias: str, name: str) -> str:
    """``alias."name"`` if the column exists, else ``NULL`` (columns are picked by name)."""
    return f'{alias}."{name}"' if name in cols else "NULL"


@dataclass
class _Export:
    """What the parse learned about one export before streaming its records."""

    path: Path
    tables: set[str]
    meta: dict[str, str]
    anchor_ns: int | None
    aligned: bool
    host: str | None
    rank: RankResolution
    domains: pl.DataFrame
    nccl_domain_ids: list[int]
    decoder: PayloadDecoder
    warnings: list[str] = field(default_factory=list)
    gpu_pids: set[int] = field(default_factory=set)
    comm_kernels: bool = False
    payload_undecoded: int = 0
    steps: pl.DataFrame = field(default_factory=pl.DataFrame)
    links: CallLinks | None = None
    kernels_traced: bool = False
    calls_unlaunched: int = 0
    comm_nranks: dict[str, int] = field(default_factory=dict)
    comm_inits: list[_CommInit] = field(default_factory=list)
    grouped_p2p: list[pl.DataFrame] = field(default_factory=list)


RANK_INFERRED = "inferred_largest_comm"
"""``rank_source`` of a rank read from the CommInit payload of the process's largest
communicator (taken as the world: there the comm rank is the global rank)."""


@dataclass(frozen=True)
class _CommInit:
    """One decoded ``ncclCommInitRank*``/``ncclCommSplit``/``ncclCommShrink`` payload."""

    rowid: int
    pid: int | None
    gtid: int | None
    comm_id: str
    rank: int
    nranks: int
    cuda_dev: int | None
    parent: str | None
    color: int | None
    key: int | None


def _meta(con: sqlite3.Connection, tables: set[str]) -> dict[str, str]:
    for t in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if t in tables and {"name", "value"} <= _columns(con, t):
            return {str(k): str(v) for k, v in con.execute(f'SELECT name, value FROM "{t}"')}
    return {}


def _anchor(
    con: sqlite3.Connection, tables: set[str], meta: dict[str, str], warnings: list[str]
) -> tuple[int | None, bool]:
    t = "TARGET_INFO_SESSION_START_TIME"
    if t not in tables or "utcEpochNs" not in _columns(con, t):
        warnings.append(f"no {t}.utcEpochNs: the timeline cannot be aligned to wall clock")
        return None, False
    vals = {r[0] for r in con.execute(f'SELECT utcEpochNs FROM "{t}"') if r[0] is not None}
    if not vals:
        warnings.append(f"{t} is empty: the timeline cannot be aligned to wall clock")
        return None, False
    if len(vals) > 1:
        warnings.append(f"{t} holds {len(vals)} different start times; kept the earliest")
    anchor = int(min(vals))
    shift = {meta.get(k, "0") for k in ("EXPORT_PARAM_TIME_SHIFT", "EXPORT_CONFIG_TIME_SHIFT")} - {
        "",
        "0",
    }
    normalized = meta.get("EXPORT_PARAM_TIME_NORMALIZE", "false").lower() == "true"
    if normalized and shift == {str(anchor)}:
        # Normalised to the session start, then shifted by that start's epoch time (the
        # ZhiyiHu CSCS exports): the timestamps are already epoch ns, so ts_ns = 0 is the epoch.
        return 0, True
    if shift or normalized:
        warnings.append(
            "export was time-shifted or normalised; the session start time is kept but the "
            "timeline is not marked aligned"
        )
        return anchor, False
    return anchor, True


def _host(con: sqlite3.Connection, tables: set[str]) -> str | None:
    t = "TARGET_INFO_SYSTEM_ENV"
    if t not in tables or not {"name", "value"} <= _columns(con, t):
        return None
    row = con.execute(f"SELECT value FROM \"{t}\" WHERE name = 'Hostname' LIMIT 1").fetchone()
    return str(row[0]) if row and row[0] else None


def _mpi_ranks(
    con: sqlite3.Connection, tables: set[str], warnings: list[str]
) -> tuple[dict[int, int], str]:
    """Process id → MPI rank from ``MPI_RANKS``, else from ``MPI Rank N`` thread names."""
    pairs: list[tuple[int, int]] = []
    source = "mpi_ranks"
    if "MPI_RANKS" in tables and {"globalTid", "rank"} <= _columns(con, "MPI_RANKS"):
        pairs = [  # a non-integer rank (corrupt row) is left out; ranges: resolve_rank
            (pid_of(g), r)
            for g, r in con.execute("SELECT globalTid, rank FROM MPI_RANKS")
            if type(g) is int and type(r) is int
        ]
    if not pairs:
        source = "mpi_thread_name"
        names: list[tuple[Any, Any]] = []
        if "NVTX_EVENTS" in tables:
            cols = _columns(con, "NVTX_EVENTS")
            if {"eventType", "globalTid"} <= cols:
                text = _c(cols, "n", "text")
                sid = (
                    "(SELECT value FROM StringIds s WHERE s.id = n.textId)"
                    if "textId" in cols and "StringIds" in tables
                    else "NULL"
                )
                names += con.execute(
                    f"SELECT n.globalTid, COALESCE(NULLIF({text}, ''), {sid}) "
                    "FROM NVTX_EVENTS n WHERE n.eventType = 39"
                ).fetchall()
        if (
            "ThreadNames" in tables
            and "StringIds" in tables
            and {"nameId", "globalTid"} <= _columns(con, "ThreadNames")
        ):
            names += con.execute(
                "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId"
            ).fetchall()
        for g, name in names:
            m = _MPI_THREAD_RE.match(str(name or ""))
            if m and g is not None:
                pairs.append((pid_of(g), int(m.group(1))))
    out: dict[int, int] = {}
    bad: set[int] = set()
    for pid, r in pairs:
        if out.setdefault(pid, r) != r:
            bad.add(pid)
    for pid in bad:
        warnings.append(f"process {pid} is named with several MPI ranks; its rank is left null")
        del out[pid]
    return out, source


def _domains(con: sqlite3.Connection, tables: set[str]) -> pl.DataFrame:
    """NVTX domain names from the DomainCreate (eventType 75) rows, keyed by (pid, domainId)."""
    schema = {"pid": pl.Int64, "domainId": pl.Int64, "domain": pl.Utf8}
    if "NVTX_EVENTS" not in tables:
        return pl.DataFrame(schema=schema)
    cols = _columns(con, "NVTX_EVENTS")
    if not {"eventType", "domainId"} <= cols:
        return pl.DataFrame(schema=schema)
    sid = (
        "(SELECT value FROM StringIds s WHERE s.id = n.textId)"
        if "textId" in cols and "StringIds" in tables
        else "NULL"
    )
    rows = con.execute(
        f"SELECT {_c(cols, 'n', 'globalTid')}, n.domainId, "
        f"COALESCE(NULLIF({_c(cols, 'n', 'text')}, ''), {sid}) "
        "FROM NVTX_EVENTS n WHERE n.eventType = 75"
    ).fetchall()
    pid, _ = decode_global_id("g")
    return (
        pl.DataFrame(
            rows, schema={"g": pl.Int64, "domainId": pl.Int64, "domain": pl.Utf8}, orient="row"
        )
        .filter(pl.col("domain").is_not_null())
        .select(pid.alias("pid"), "domainId", "domain")
        .unique(["pid", "domainId"], keep="first", maintain_order=True)
    )


def _fetch(con: sqlite3.Connection, sql: str) -> Iterator[list[tuple[Any, ...]]]:
    cur = con.execute(sql)
    try:
        while rows := cur.fetchmany(BATCH_ROWS):
            yield rows
    finally:
        cur.close()


def _bad_interval(df: pl.DataFrame, table: str) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Split rows with a usable [start, end] from the others (→ rejects)."""
    ok = pl.col("start").is_not_null() & pl.col("end").is_not_null()
    ok = ok & (pl.col("end") >= pl.col("start"))
    bad = df.filter(~ok.fill_null(False))
    if bad.is_empty():
        return df, None
    rows: list[tuple[int, str, str]] = []
    for rec in bad.drop([c for c in ("binaryData",) if c in bad.columns]).iter_rows(named=True):
        reason = "end is NULL" if rec["end"] is None else "end before start"
        if rec["start"] is None:
            reason = "start is NULL"
        rows.append((int(rec["rowid"]), f"{table}{rec}", f"{table}: {reason}"))
    return df.filter(ok.fill_null(False)), rejects_frame(rows)


def _chunk(
    tables: dict[str, pl.DataFrame | None], counts: LineCounts, warnings: list[str] | None = None
) -> ParsedChunk:
    return ParsedChunk(
        tables={k: v for k, v in tables.items() if v is not None and not v.is_empty()},
        counts=counts,
        warnings=warnings or [],
    )


# -- GPU activity ----------------------------------------------------------------------------


def _kernel_sql(con: sqlite3.Connection, ex: _Export) -> str:
    cols = _columns(con, "CUPTI_ACTIVITY_KIND_KERNEL")
    launch_cols, join = launch_join(con, ex.tables, "CUPTI_ACTIVITY_KIND_KERNEL")
    name_col = next((c for c in ("shortName", "demangledName") if c in cols), None)
    if name_col and "StringIds" in ex.tables:
        name = f'(SELECT value FROM StringIds s WHERE s.id = k."{name_col}")'
    else:
        name = "NULL"
    return (
        f"SELECT k.rowid, {_c(cols, 'k', 'start')}, {_c(cols, 'k', 'end')}, "
        f"{_c(cols, 'k', 'deviceId')}, {_c(cols, 'k', 'streamId')}, "
        f"{_c(cols, 'k', 'correlationId')}, {_c(cols, 'k', 'globalPid')}, {name}, NULL, NULL, "
        f"{launch_cols} FROM CUPTI_ACTIVITY_KIND_KERNEL k{join}"
    )


def _copy_sql(con: sqlite3.Connection, table: str, ex: _Export) -> str:
    cols = _columns(con, table)
    launch_cols, join = launch_join(con, ex.tables, table)
    return (
        f"SELECT k.rowid, {_c(cols, 'k', 'start')}, {_c(cols, 'k', 'end')}, "
        f"{_c(cols, 'k', 'deviceId')}, {_c(cols, 'k', 'streamId')}, "
        f"{_c(cols, 'k', 'correlationId')}, {_c(cols, 'k', 'globalPid')}, NULL, "
        f"{_c(cols, 'k', 'bytes')}, {_c(cols, 'k', 'copyKind')}, {launch_cols} "
        f'FROM "{table}" k{join}'
    )


_GPU_SCHEMA = {
    "rowid": pl.Int64,
    "start": pl.Int64,
    "end": pl.Int64,
    "device": pl.Int64,
    "stream": pl.Int64,
    "correlation": pl.Int64,
    "globalPid": pl.Int64,
    "name": pl.Utf8,
    "msg_bytes": pl.Int64,
    "copyKind": pl.Int64,
    "lstart": pl.Int64,
    "ltid": pl.Int64,
}


def _gpu_batch(rows: list[tuple[Any, ...]], table: str, ex: _Export) -> ParsedChunk:
    df = pl.DataFrame(rows, schema=_GPU_SCHEMA, orient="row")
    good, rejects = _bad_interval(df, table)
    pid, _ = decode_global_id("globalPid")
    good = good.with_columns(pid.alias("pid"))
    good = good.with_columns(step_of(good, ex.steps, "lstart", "ltid", "pid"))
    if table == "CUPTI_ACTIVITY_KIND_KERNEL" and ex.links is not None:
        ex.links.add_batch(good)
    if table == "CUPTI_ACTIVITY_KIND_KERNEL":
        cls = classify_kernels(good["name"])
        good = good.with_columns(cls["category"], cls["comm_op"]).with_columns(
            pl.col("msg_bytes").cast(pl.Int64)
        )
        if (cls["category"] == "comm").any():
            ex.comm_kernels = True
    elif table == "CUPTI_ACTIVITY_KIND_MEMCPY":
        kind = pl.col("copyKind").replace_strict(MEMCPY_KINDS, default=None, return_dtype=pl.Utf8)
        kind = kind.fill_null(pl.lit("kind ") + pl.col("copyKind").cast(pl.Utf8))
        good = good.with_columns(
            (pl.lit("memcpy ") + kind.fill_null("Unknown")).alias("name"),
            pl.lit("memcpy").alias("category"),
            pl.lit(None, dtype=pl.Utf8).alias("comm_op"),
        )
    else:
        good = good.with_columns(
            pl.lit("memset").alias("name"),
            pl.lit("memset").alias("category"),
            pl.lit(None, dtype=pl.Utf8).alias("comm_op"),
        )
    ex.gpu_pids.update(p for p in good["pid"].unique().to_list() if p is not None)
    kernels = good.select(
        ex.rank.expr("pid"),
        pl.col("device").cast(pl.Int32),
        "stream",
        "name",
        "category",
        "comm_op",
        pl.col("start").alias("ts_ns"),
        (pl.col("end") - pl.col("start")).alias("dur_ns"),
        "correlation",
        "msg_bytes",
        pl.col("lstart").alias("launch_ts_ns"),
        "iteration",
        pl.col("rowid").alias("source_line"),
    )
    n_bad = 0 if rejects is None else rejects.height
    return _chunk(
        {"kernels": kernels, "rejects": rejects},
        LineCounts(total=len(rows), parsed=kernels.height, rejected=n_bad),
    )


# -- NVTX ------------------------------------------------------------------------------------

_NVTX_SCHEMA = {
    "rowid": pl.Int64,
    "start": pl.Int64,
    "end": pl.Int64,
    "eventType": pl.Int64,
    "name": pl.Utf8,
    "domainId": pl.Int64,
    "globalTid": pl.Int64,
    "jsonText": pl.Utf8,
    "binaryData": pl.Binary,
}


def _nvtx_name_sql(con: sqlite3.Connection, tables: set[str]) -> str:
    """SQL text of an ``NVTX_EVENTS n`` row: ``text``, else the registered string (``textId``)."""
    cols = _columns(con, "NVTX_EVENTS")
    sid = (
        "(SELECT value FROM StringIds s WHERE s.id = n.textId)"
        if "textId" in cols and "StringIds" in tables
        else "NULL"
    )
    return f"COALESCE(NULLIF({_c(cols, 'n', 'text')}, ''), {sid})"


def _nvtx_sql(con: sqlite3.Connection, ex: _Export) -> tuple[str, str]:
    cols = _columns(con, "NVTX_EVENTS")
    name = _nvtx_name_sql(con, ex.tables)
    if ex.nccl_domain_ids and "domainId" in cols:
        ids = ", ".join(str(int(i)) for i in ex.nccl_domain_ids)
        in_nccl = f"n.domainId IN ({ids})"
        json_id = (
            "(SELECT value FROM StringIds s WHERE s.id = n.jsonTextId)"
            if "jsonTextId" in cols and "StringIds" in ex.tables
            else "NULL"
        )
        json_sql = f"CASE WHEN {in_nccl} THEN COALESCE({_c(cols, 'n', 'jsonText')}, {json_id}) END"
        bin_sql = f"CASE WHEN {in_nccl} THEN CAST({_c(cols, 'n', 'binaryData')} AS BLOB) END"
    else:
        json_sql = bin_sql = "NULL"
    ranges = (
        f"SELECT n.rowid, {_c(cols, 'n', 'start')}, {_c(cols, 'n', 'end')}, n.eventType, "
        f"{name}, {_c(cols, 'n', 'domainId')}, {_c(cols, 'n', 'globalTid')}, "
        f"{json_sql}, {bin_sql} FROM NVTX_EVENTS n WHERE n.eventType IN (59, 60)"
    )
    others = "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IS NULL OR eventType NOT IN (59, 60)"
    return ranges, others


def _with_domain(df: pl.DataFrame, ex: _Export) -> pl.DataFrame:
    """Attach the domain name by (pid, domainId), else by domainId when that is unambiguous."""
    df = df.join(ex.domains, on=["pid", "domainId"], how="left", maintain_order="left")
    by_id = ex.domains.group_by("domainId").agg(pl.col("domain").unique())
    by_id = by_id.filter(pl.col("domain").list.len() == 1).select(
        "domainId", pl.col("domain").list.first().alias("_dom_any")
    )
    df = df.join(by_id, on="domainId", how="left", maintain_order="left")
    dom = pl.coalesce("domain", "_dom_any")
    return df.with_columns(
        pl.when(pl.col("domainId") == 0).then(None).otherwise(dom).alias("domain")
    ).drop("_dom_any")


_PAY_SCHEMA = {
    "rowid": pl.Int64,
    "comm_id": pl.Utf8,
    "peer_rank": pl.Int32,
    "msg_bytes": pl.Int64,
    "redop": pl.Utf8,
}


def _hex(v: object) -> str | None:
    return f"0x{v:x}" if isinstance(v, int) else None


def read_comm_inits(con: sqlite3.Connection, ex: _Export, name_sql: str) -> None:
    """Decode the payload of every NCCL communicator creation range, before any row is read.

    ``ncclCommInitRank*``, ``ncclCommSplit`` and ``ncclCommShrink`` ranges (one per
    communicator and process: few) carry, from NCCL 2.25, the new communicator's hash, its
    ``No. of ranks``, the caller's ``Rank`` in it and the ``CUDA device``
    (``src/include/nvtx_payload_schemas.h``); a split also its parent's hash, ``Color`` and
    ``Key``. Read first so that every call of the export, wherever it sits, gets its
    communicator's size and the caller's rank in it, and so that an export without any other
    rank can take the rank from its largest communicator (:func:`infer_rank`).
    """
    if not ex.nccl_domain_ids or "NVTX_EVENTS" not in ex.tables:
        return
    cols = _columns(con, "NVTX_EVENTS")
    if not {"eventType", "domainId"} <= cols:
        return
    ids = ", ".join(str(int(i)) for i in ex.nccl_domain_ids)
    json_id = (
        "(SELECT value FROM StringIds s WHERE s.id = n.jsonTextId)"
        if "jsonTextId" in cols and "StringIds" in ex.tables
        else "NULL"
    )
    named = _text_filter(con, ex.tables, "LIKE 'ncclComm%'")
    rows = con.execute(
        f"SELECT n.rowid, {_c(cols, 'n', 'globalTid')}, {name_sql}, "
        f"COALESCE({_c(cols, 'n', 'jsonText')}, {json_id}), "
        f"CAST({_c(cols, 'n', 'binaryData')} AS BLOB) FROM NVTX_EVENTS n "
        f"WHERE n.eventType IN (59, 60) AND n.domainId IN ({ids}) AND {named} ORDER BY n.rowid"
    ).fetchall()
    for rowid, gtid, name, js, blob in rows:
        if not _COMM_INIT_RE.match(str(name or "")):
            continue
        pay = None
        if blob is not None:
            pay = ex.decoder.decode_binary(blob, None)
            if pay is None:
                ex.payload_undecoded += 1
        if pay is None and js is not None:
            pay = PayloadDecoder.decode_json(js)
        if not pay:
            continue
        comm_id = _hex(pay.get(COMM_ID))
        rank, nranks = pay.get(RANK), pay.get(NRANKS)
        if comm_id is None or type(rank) is not int or type(nranks) is not int:
            continue
        if not 0 <= rank < nranks:
            continue  # not a member's payload (corrupt, or a schema read wrongly)
        ex.comm_nranks.setdefault(comm_id, nranks)
        ex.comm_inits.append(
            _CommInit(
                rowid=int(rowid),
                pid=pid_of(gtid) if type(gtid) is int else None,
                gtid=gtid if type(gtid) is int else None,
                comm_id=comm_id,
                rank=rank,
                nranks=nranks,
                cuda_dev=pay.get(CUDA_DEV),
                parent=_hex(pay.get(PARENT_COMM_ID)),
                color=pay.get(COLOR),
                key=pay.get(KEY),
            )
        )


def infer_rank(ex: _Export) -> RankResolution | None:
    """The rank of each process from its largest communicator's CommInit payload, or None.

    Only for an export whose rank nothing else gives (no MPI data, no ``rank_N`` in the file
    name, no rank option). A process's largest communicator is taken as the world, where the
    comm rank is the global rank: PyTorch's default group spans the world. That is a guess
    (wrong if the process only ever made sub-communicators), so it is marked
    ``rank_source = inferred_largest_comm`` (as NCCL Inspector's), and an NCCL log of the run
    that names the same host:pid replaces it (``stg_store__comm_ops``). A process whose largest
    communicators disagree on its rank gets none.
    """
    by_pid: dict[int, list[_CommInit]] = {}
    for c in ex.comm_inits:
        if c.pid is not None:
            by_pid.setdefault(c.pid, []).append(c)
    inferred: dict[int, int] = {}
    sizes: dict[int, int] = {}
    for pid, inits in by_pid.items():
        top = max(c.nranks for c in inits)
        ranks = {c.rank for c in inits if c.nranks == top}
        if len(ranks) == 1:
            inferred[pid] = ranks.pop()
            sizes[pid] = top
    if not inferred:
        return None
    detail = ", ".join(
        f"process {p}: rank {r} of {sizes[p]}" for p, r in sorted(inferred.items())[:4]
    )
    warnings = [w for w in ex.rank.warnings if not w.startswith("rank unknown")] + [
        "rank inferred from the CommInitRank payload of each process's largest communicator "
        f"(taken as the world; rank_source {RANK_INFERRED}): {detail}"
    ]
    return RankResolution(None, RANK_INFERRED, inferred, warnings)


_COMM_SCHEMA = {
    "comm_id": pl.Utf8,
    "rank": pl.Int32,
    "nranks": pl.Int32,
    "global_rank": pl.Int32,
    "host": pl.Utf8,
    "pid": pl.Int64,
    "cuda_dev": pl.Int32,
    "comm_hash": pl.Utf8,
    "parent_comm_id": pl.Utf8,
    "parent_comm_hash": pl.Utf8,
    "parent_nranks": pl.Int32,
    "split_color": pl.Int64,
    "split_key": pl.Int64,
    "source_line": pl.Int64,
}


def communicators_frame(ex: _Export) -> pl.DataFrame | None:
    """``communicators`` rows of the decoded CommInit payloads.

    ``global_rank`` is the process's rank only where the export gives it (MPI, file name,
    option); a rank this parser inferred (:func:`infer_rank`) is left out, so it is never taken
    for evidence of the process's rank by another source.
    """
    if not ex.comm_inits:
        return None
    known = ex.rank.source != RANK_INFERRED
    rows = [
        {
            "comm_id": c.comm_id,
            "rank": c.rank,
            "nranks": c.nranks,
            "global_rank": (ex.rank.pid_ranks.get(c.pid, ex.rank.rank) if known else None)
            if c.pid is not None
            else (ex.rank.rank if known else None),
            "host": ex.host,
            "pid": c.pid,
            "cuda_dev": c.cuda_dev,
            "comm_hash": c.comm_id,
            "parent_comm_id": c.parent,
            "parent_comm_hash": c.parent,
            "parent_nranks": ex.comm_nranks.get(c.parent) if c.parent else None,
            "split_color": c.color if c.parent else None,
            "split_key": c.key if c.parent else None,
            "source_line": c.rowid,
        }
        for c in ex.comm_inits
    ]
    return pl.DataFrame(rows, schema=_COMM_SCHEMA)


def _group_ranks(ex: _Export) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The caller's rank in each communicator: by (thread, comm) and by (process, comm), each
    kept only where it is one rank (a process driving several GPUs has one member per GPU)."""
    by_tid: dict[tuple[int, str], set[int]] = {}
    by_pid: dict[tuple[int, str], set[int]] = {}
    for c in ex.comm_inits:
        if c.gtid is not None:
            by_tid.setdefault((c.gtid, c.comm_id), set()).add(c.rank)
        if c.pid is not None:
            by_pid.setdefault((c.pid, c.comm_id), set()).add(c.rank)
    tid = pl.DataFrame(
        [(g, cid, next(iter(r))) for (g, cid), r in by_tid.items() if len(r) == 1],
        schema={"globalTid": pl.Int64, "comm_id": pl.Utf8, "_gr_tid": pl.Int32},
        orient="row",
    )
    pid = pl.DataFrame(
        [(p, cid, next(iter(r))) for (p, cid), r in by_pid.items() if len(r) == 1],
        schema={"pid": pl.Int64, "comm_id": pl.Utf8, "_gr_pid": pl.Int32},
        orient="row",
    )
    return tid, pid


def _nccl_rows(good: pl.DataFrame, ex: _Export) -> pl.DataFrame | None:
    """comm_ops of the data-moving NCCL API ranges.

    The rows are built vectorised; only ranges that carry a payload are decoded in Python
    (one ``struct.unpack`` per field), and their values joined back by ``rowid``. The
    communicator's size (``group_size``) and the caller's rank in it (``group_rank``) come
    from its CommInit payload (:func:`read_comm_inits`), ``group_source`` ``logged``.
    """
    nccl = good.filter(pl.col("domain") == NCCL_DOMAIN)
    if nccl.is_empty():
        return None
    nccl = nccl.with_columns(api_op_expr("name").alias("op"))
    ops = nccl.filter(pl.col("op").is_not_null())
    if ops.is_empty():
        return None
    has_payload = pl.col("binaryData").is_not_null() | pl.col("jsonText").is_not_null()
    decoded: list[tuple[Any, ...]] = []
    for rec in ops.filter(has_payload).iter_rows(named=True):
        pay = None
        if rec["binaryData"] is not None:
            pay = ex.decoder.decode_binary(rec["binaryData"], rec["domainId"])
            if pay is None:
                ex.payload_undecoded += 1
        if pay is None and rec["jsonText"] is not None:
            pay = PayloadDecoder.decode_json(rec["jsonText"])
        if not pay:
            continue
        redop = pay.get(REDOP)
        decoded.append(
            (
                rec["rowid"],
                _hex(pay.get(COMM_ID)),
                pay.get(PEER, pay.get(ROOT)),
                pay.get(MSG_SIZE),
                REDOPS.get(redop) if isinstance(redop, int) else None,
            )
        )
    pay_df = pl.DataFrame(decoded, schema=_PAY_SCHEMA, orient="row")
    ops = ops.join(pay_df, on="rowid", how="left", maintain_order="left")
    size = pl.col("comm_id").replace_strict(ex.comm_nranks, default=None, return_dtype=pl.Int32)
    ops = ops.with_columns(size.alias("group_size")).with_columns(
        pl.when(pl.col("group_size").is_not_null()).then(pl.lit("logged")).alias("group_source")
    )
    by_tid, by_pid = _group_ranks(ex)
    ops = (
        ops.join(by_tid, on=["globalTid", "comm_id"], how="left", maintain_order="left")
        .join(by_pid, on=["pid", "comm_id"], how="left", maintain_order="left")
        .with_columns(pl.coalesce("_gr_tid", "_gr_pid").alias("group_rank"))
    )
    how = ex.rank.source if ex.rank.source in (RANK_INFERRED, "option") else None
    ops = ops.with_columns(
        pl.when(pl.col("rank").is_not_null())
        .then(pl.lit(how, dtype=pl.Utf8))
        .otherwise(None)
        .alias("rank_source")
    )
    ops = time_calls(
        ops.with_columns(pl.col("globalTid").alias("gtid")),
        ex.links or CallLinks.empty(),
        ex.steps,
        kernels_traced=ex.kernels_traced,
    )
    ex.calls_unlaunched += ops.filter(pl.col("timing_source") == "none").height
    ops = ops.select(
        "rank",
        pl.lit(ex.host, dtype=pl.Utf8).alias("host"),
        "pid",
        pl.col("rowid").alias("source_line"),
        "op",
        pl.col("name").alias("raw_op"),
        "comm_id",
        "group_size",
        "group_rank",
        "group_source",
        "peer_rank",
        "msg_bytes",
        "redop",
        "ts_ns",
        "dur_ns",
        "timing_source",
        "launch_ts_ns",
        "kernel_count",
        "iteration",
        "rank_source",
        "group_end",
    )
    # the Send/Recv ranges of a group wait for the whole export (a group may straddle NVTX
    # batches): fold_groups makes an all-to-all of each that is one (op_source nvtx_group)
    grouped = pl.col("group_end").is_not_null() & pl.col("op").is_in(["send", "recv"])
    held = ops.filter(grouped)
    if held.height:
        ex.grouped_p2p.append(held)
    ops = ops.filter(~grouped).drop("group_end")
    return ops if ops.height else None


def _nvtx_batch(rows: list[tuple[Any, ...]], ex: _Export) -> ParsedChunk:
    df = pl.DataFrame(rows, schema=_NVTX_SCHEMA, orient="row")
    good, rejects = _bad_interval(df, "NVTX_EVENTS")
    unnamed = good.filter(pl.col("name").is_null()).height
    pid, _ = decode_global_id("globalTid")
    good = good.filter(pl.col("name").is_not_null()).with_columns(pid.alias("pid"))
    good = _with_domain(good, ex).with_columns(ex.rank.expr("pid"))
    markers = good.select(
        "rank",
        "name",
        marker_kind_expr("domain"),
        pl.col("start").alias("ts_ns"),
        (pl.col("end") - pl.col("start")).alias("dur_ns"),
        iteration_expr("name"),
        "domain",
        pl.col("rowid").alias("source_line"),
    )
    comm_ops = _nccl_rows(good, ex)
    n_bad = 0 if rejects is None else rejects.height
    warnings = [f"{unnamed} NVTX ranges without text ignored"] if unnamed else []
    return _chunk(
        {
            "markers": markers,
            "comm_ops": comm_ops,
            "rejects": rejects,
        },
        LineCounts(total=len(rows), parsed=markers.height, ignored=unnamed, rejected=n_bad),
        warnings,
    )


# -- driver ----------------------------------------------------------------------------------


def _materialise(source: Source) -> tuple[Path, Path | None]:
    """The path SQLite can open: the file itself, or a decompressed temporary copy."""
    if source.compression is None:
        return source.path, None
    fd, name = tempfile.mkstemp(suffix=".sqlite", prefix="commscope-nsys-")
    tmp = Path(name)
    try:
        with source.open() as src, open(fd, "wb") as dst:  # noqa: PTH123 - fd from mkstemp
            shutil.copyfileobj(src, dst, 1024 * 1024)
    except (OSError, EOFError, lzma.LZMAError, zstandard.ZstdError) as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, ParseError):
            raise
        raise ParseError(source.path, f"cannot decompress: {exc}") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp, tmp


def read_sqlite(source: Source, *, rank: int | None) -> Iterator[ParsedChunk]:
    """Yield the canonical rows of one nsys SQLite export, chunk by chunk.

    Args:
        source: the export (plain, or compressed: then decompressed to a temporary file).
        rank: the rank option (used only when MPI data and the file name say nothing).

    Raises:
        ParseError: not a readable SQLite database, or not an nsys export.
    """
    db_path, tmp = _materialise(source)
    con: sqlite3.Connection | None = None
    try:
        try:
            con = connect_ro(db_path)
            tables = table_names(con)
        except sqlite3.DatabaseError as exc:
            raise ParseError(source.path, f"not a readable SQLite database: {exc}") from exc
        if not is_nsys_db(tables):
            raise ParseError(source.path, "SQLite database without Nsight Systems tables")
        try:
            yield from _read(con, tables, source.path, rank)
        except sqlite3.DatabaseError as exc:
            raise ParseError(source.path, f"SQLite error: {exc}") from exc
    finally:
        if con is not None:
            con.close()
        if tmp is not None:
            with suppress(OSError):
                tmp.unlink()


def _read(
    con: sqlite3.Connection, tables: set[str], path: Path, rank_opt: int | None
) -> Iterator[ParsedChunk]:
    warnings: list[str] = []
    meta = _meta(con, tables)
    if not meta:
        warnings.append("no META_DATA_EXPORT/EXPORT_META_DATA table: export schema unknown")
    anchor, aligned = _anchor(con, tables, meta, warnings)
    pid_ranks, pid_source = _mpi_ranks(con, tables, warnings)
    res = resolve_rank(path, rank_opt, pid_ranks, pid_source)
    domains = _domains(con, tables)
    nccl_ids = sorted(
        {int(i) for i in domains.filter(pl.col("domain") == NCCL_DOMAIN)["domainId"].to_list()}
    )
    ex = _Export(
        path=path,
        tables=tables,
        meta=meta,
        anchor_ns=anchor,
        aligned=aligned,
        host=_host(con, tables),
        rank=res,
        domains=domains,
        nccl_domain_ids=nccl_ids,
        decoder=PayloadDecoder.from_db(con, tables),
        warnings=warnings + res.warnings,
    )
    present = [t for t in _ACTIVITY_TABLES if t in tables]
    if not present:
        ex.warnings.append(
            "export holds no kernel, memcpy, memset or NVTX table (nothing traced, or a lazy "
            "export of a run without CUDA/NVTX tracing)"
        )
    ex.kernels_traced = has_rows(con, tables, "CUPTI_ACTIVITY_KIND_KERNEL")
    if "NVTX_EVENTS" in tables and "eventType" in _columns(con, "NVTX_EVENTS"):
        name_sql = _nvtx_name_sql(con, tables)
        ex.steps = read_steps(con, tables, name_sql)
        if nccl_ids and {"globalTid", "domainId"} <= _columns(con, "NVTX_EVENTS"):
            ex.links = read_call_ranges(con, tables, nccl_ids, name_sql)
        read_comm_inits(con, ex, name_sql)
        if res.rank is None and not res.pid_ranks:
            inferred = infer_rank(ex)
            if inferred is not None:
                res = ex.rank = inferred
                ex.warnings = [w for w in ex.warnings if not w.startswith("rank unknown")]
                ex.warnings += inferred.warnings[-1:]
    if (
        ex.links is not None
        and ex.kernels_traced
        and not has_rows(con, tables, "CUPTI_ACTIVITY_KIND_RUNTIME")
    ):
        ex.warnings.append(
            "kernels but no CUPTI_ACTIVITY_KIND_RUNTIME launches: NCCL calls cannot be linked "
            "to their kernels and get timing_source 'none'"
        )
    yield _chunk({"communicators": communicators_frame(ex)}, LineCounts(), ex.warnings)

    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        for rows in _fetch(con, _kernel_sql(con, ex)):
            yield _gpu_batch(rows, "CUPTI_ACTIVITY_KIND_KERNEL", ex)
    for table in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if table in tables:
            for rows in _fetch(con, _copy_sql(con, table, ex)):
                yield _gpu_batch(rows, table, ex)
    if "NVTX_EVENTS" in tables:
        cols = _columns(con, "NVTX_EVENTS")
        if "eventType" not in cols:
            n = con.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone()[0]
            yield _chunk(
                {},
                LineCounts(total=n, ignored=n),
                ["NVTX_EVENTS has no eventType column; its rows are ignored"],
            )
        else:
            ranges_sql, others_sql = _nvtx_sql(con, ex)
            for rows in _fetch(con, ranges_sql):
                yield _nvtx_batch(rows, ex)
            n_other = con.execute(others_sql).fetchone()[0]
            yield _chunk({}, LineCounts(total=n_other, ignored=n_other))
            yield _chunk({"comm_ops": fold_groups(ex.grouped_p2p)}, LineCounts())
            ex.grouped_p2p = []

    final_warnings: list[str] = []
    if ex.calls_unlaunched and ex.kernels_traced:
        final_warnings.append(
            f"{ex.calls_unlaunched} NCCL calls launched no kernel on their own thread (nor "
            "through their group's ncclGroupEnd): timing_source 'none', no duration"
        )
    if ex.payload_undecoded:
        final_warnings.append(
            f"{ex.payload_undecoded} NCCL NVTX payloads could not be decoded with the export's "
            "payload schema tables; their msg_bytes/comm_id are null"
        )
    pid = None
    if not res.pid_ranks:
        if len(ex.gpu_pids) == 1:
            pid = next(iter(ex.gpu_pids))
        elif len(ex.gpu_pids) > 1 and res.rank is not None:
            final_warnings.append(
                f"{len(ex.gpu_pids)} processes have GPU activity in one report but the rank "
                f"({res.source}) applies to the whole file"
            )
    backend = None
    if ex.nccl_domain_ids or ex.comm_kernels:
        backend = "nccl"
    elif not domains.filter(pl.col("domain") == "MPI").is_empty() or res.pid_ranks:
        backend = "mpi"
    meta_df = trace_meta_frame(
        res,
        anchor_ns=anchor,
        aligned=aligned,
        backend=backend,
        host=ex.host,
        pid=pid,
        source_version=meta.get("EXPORT_SCHEMA_VERSION"),
    )
    yield _chunk({"trace_meta": meta_df}, LineCounts(), final_warnings)


__all__ = [
    "MEMCPY_KINDS",
    "connect_ro",
    "is_nsys_db",
    "read_sqlite",
    "table_names",
]
