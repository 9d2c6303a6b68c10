"""Nsight Systems parser (``nsys``): SQLite exports, ``nsys stats`` CSV reports, recipe Parquet.

Inputs, recognised by content (magic bytes and table/column names), never by extension:

* **SQLite export** (``nsys export --type sqlite``), every schema version seen: 2022.2
  (schema 2.9.1, ``EXPORT_META_DATA``) to today's ``META_DATA_EXPORT``. Tables and columns
  are picked by name; absent tables are normal. Read by :mod:`commscope.parsers._nsys_sqlite`:
  CUPTI kernel/memcpy/memset activity → ``kernels`` (kernel names from ``StringIds`` via
  ``shortName``; category and op from :func:`commscope.parsers._nccl_kernels.classify_kernels`); NVTX
  push/pop and start/end ranges → ``markers`` (``kind`` ``nccl_nvtx`` for the ``NCCL`` domain,
  ``nvtx`` otherwise; ``iteration`` when the whole name is a step marker); NCCL-domain ranges
  of data-moving API calls → ``comm_ops`` (op from the function name; message size, comm hash,
  peer/root and reduction op only when the payload decodes with the export's payload schema
  tables; NCCL >= 2.25 puts the communicator's commHash first in every payload: ``comm_id``
  is that hash, the id the communicator's ``ncclCommInitRank*``/``ncclCommSplit`` payload
  carries too; ``group_size`` = that payload's ``No. of ranks`` and ``group_rank`` its
  ``Rank`` (the caller's rank in the communicator; per thread, else per process, only where it
  is one rank), ``group_source`` ``logged``; without a comm id (NCCL <= 2.24) all three stay
  null); the CommInit/CommSplit payloads (read before any row, whatever their place in the
  export) → ``communicators`` (``comm_hash`` = ``comm_id``; a split's parent hash, color and
  key).
  **Grouped all-to-all (parser 1.3.0)**: the ``ncclSend``/``ncclRecv`` ranges NCCL writes
  between one ``ncclGroupStart`` and the ``ncclGroupEnd`` closing it on one thread, one Send to
  and one Recv from every member of one communicator (PyTorch's all_to_all), are ONE
  ``comm_ops`` row: op ``all_to_all``, ``op_source`` ``nvtx_group``, ``source_line`` the
  ``ncclGroupEnd`` range, ``msg_bytes`` the Send bytes, ``split_bytes``/``recv_split_bytes`` per
  member (:mod:`commscope.parsers._nsys_groups`); other grouped p2p stays one row per range.
  **Records** = rows of the KERNEL, MEMCPY, MEMSET and NVTX_EVENTS tables.
* **SQLite timing (issue 16)**, by :mod:`commscope.parsers._nsys_launch`: a call's ``ts_ns``/``dur_ns``
  are those of the GPU kernel(s) it launched (NCCL range → ``CUPTI_ACTIVITY_KIND_RUNTIME``
  launch on the range's thread inside the range → kernel with that ``correlationId``; a grouped
  call takes the kernels of the ``ncclGroupEnd`` closing its group), ``timing_source``
  ``kernel``, ``kernel_count`` the kernels, ``launch_ts_ns`` the range start (CPU issue
  time). A call that launched nothing (one-rank or zero-size calls, a launch from another
  thread, or no RUNTIME table to link by) is ``none``: ``dur_ns`` null, ``kernel_count`` 0;
  so is every call of an export with no kernel activity at all (no CUDA trace;
  ``kernel_count`` null): an NCCL range times NCCL's CPU enqueue, never the transfer, so it
  is never used as a duration. ``kernels.launch_ts_ns`` is the start of the launching runtime call;
  ``kernels.iteration`` and ``comm_ops.iteration`` are the step range (an NVTX range named as
  a step marker) whose CPU window contains the launch, null outside every step or when the
  export has no step ranges.
* **``nsys stats`` CSV** (plain or compressed, preamble lines before the header skipped):
  NVTX range traces → ``markers`` (+ ``comm_ops`` for ``NCCL:nccl*`` ranges, ``msg_bytes``
  null: the reports carry no size; ``timing_source`` ``none``, ``dur_ns`` null: the report
  holds only the CPU range, which times the enqueue, not the transfer), ``cuda_gpu_trace`` → ``kernels``
  (``launch_ts_ns`` null: no runtime calls in that report); other reports are recognised and
  ignored. **Records** = data rows.
* **``nsys recipe`` Parquet** (e.g. ``nvtx_gpu_proj_trace``): as the CSV, timed by the projected
  GPU interval (``timing_source`` ``kernel``, ``kernel_count`` = ``NumGPUOps``, ``launch_ts_ns``
  = ``Orig Start``; ``none`` when the range projected no GPU op); read record batch by record
  batch. **Records** = rows. The recipe keeps only ranges that launched GPU work, so grouped
  calls (which launch nothing themselves) are absent and their ``ncclGroupEnd`` projection
  stays a marker (its op is unknown).

Accounting per file: ``total = parsed + ignored + rejected`` over those records. Parsed rows
produce a ``kernels`` or ``markers`` row (an NCCL range's ``comm_ops`` row comes from the same
record); ignored are NVTX marks, domain/category/thread-name events, unnamed ranges, and rows of
reports that are not ingested; rejected are intervals with no end or an end before the start.

Timestamps stay on the file's own timeline (SQLite: ns since the session start). The clock
anchor is ``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` (epoch ns of ``ts_ns = 0``), written to
``trace_meta.clock_anchor_ns`` with ``aligned = true``; files without it (all CSV/Parquet, and
exports lacking the table or time-shifted ones) get ``aligned = false``. An export normalised
to the session start and then shifted by exactly ``utcEpochNs`` (``EXPORT_PARAM_TIME_NORMALIZE``
true, ``EXPORT_CONFIG_TIME_SHIFT`` = ``utcEpochNs``, as in the ZhiyiHu CSCS sample) already holds
epoch ns: its anchor is 0 and it is aligned.

Rank: nsys knows no torch rank. In order: ``MPI_RANKS`` (per process; ``rank_source``
``mpi_ranks``), the ``MPI Rank N`` thread names nsys MPI tracing writes (``mpi_thread_name``),
an explicit ``rank_N``/``rank-N``/``rankN`` in the *file name* (``file_name``; bare trailing
digits such as ``report1`` or ``..._perlmutter0`` are not taken), the ``rank`` argument
(``option``), else, for a process whose NCCL >= 2.25 CommInitRank payloads say it, its
``Rank`` in its largest communicator, taken as the world (``inferred_largest_comm``, also
``comm_ops.rank_source``; a guess: an NCCL log of the run naming the same host:pid replaces it
in ``stg_store__comm_ops``, and ``communicators.global_rank`` stays null), else null with a
warning (``unknown``), never a silent 0. ``comm_ops.rank_source`` is ``option`` for a rank
given at ingest, null (read as logged) for the others. The ``Rank`` column of
recipe outputs is the index of the input report, not a rank, and is ignored.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from commscope.parsers._io import compression_of
from commscope.parsers._nsys_sqlite import connect_ro, is_nsys_db, read_sqlite, table_names
from commscope.parsers._nsys_tables import (
    TRACE_KINDS,
    parquet_kind,
    read_csv,
    read_parquet,
    sniff_csv_head,
)
from commscope.parsers.registry import ParsedChunk, ParseError, register

if TYPE_CHECKING:
    from commscope.parsers._io import Source

SQLITE_MAGIC = b"SQLite format 3\x00"
PARQUET_MAGIC = b"PAR1"
_HEAD_TABLE_HINTS = (
    b"CUPTI_ACTIVITY_KIND_",
    b"NVTX_EVENTS",
    b"META_DATA_EXPORT",
    b"EXPORT_META_DATA",
    b"TARGET_INFO_SESSION_START_TIME",
)


def _sniff_sqlite(head: bytes, path: Path) -> int:
    if b"StringIds" in head and any(h in head for h in _HEAD_TABLE_HINTS):
        return 95
    if compression_of(path) is not None:
        # Cannot open a compressed database to look; StringIds is nsys's own table name.
        return 70 if b"StringIds" in head else 0
    try:
        con = connect_ro(path)
        try:
            return 95 if is_nsys_db(table_names(con)) else 0
        finally:
            con.close()
    except sqlite3.Error:
        return 0


@register
class NsysParser:
    """Nsight Systems SQLite exports, ``nsys stats`` CSV reports and ``nsys recipe`` Parquet."""

    name: ClassVar[str] = "nsys"
    version: ClassVar[str] = "1.3.0"

    def sniff(self, head: bytes, path: Path) -> int:
        """Confidence that ``head``/``path`` is an nsys output (0 = not mine).

        SQLite: magic plus nsys tables (looked up in the file when the head does not show them);
        Parquet: magic plus an nsys recipe trace schema; CSV: an ``nsys stats`` header within
        the first lines (trace reports 90, other recognised reports 60).
        """
        try:
            if head.startswith(SQLITE_MAGIC):
                return _sniff_sqlite(head, path)
            if head.startswith(PARQUET_MAGIC):
                if compression_of(path) is None and parquet_kind(path) is not None:
                    return 90
                return 0
            found = sniff_csv_head(head.decode("utf-8", errors="replace"))
        except (OSError, ValueError):
            return 0
        if found is None:
            return 0
        return 90 if found[0] in TRACE_KINDS else 60

    def parse(
        self, source: Source, *, run_id: str, rank: int | None = None
    ) -> Iterator[ParsedChunk]:
        """Yield canonical rows of one nsys output (see the module docstring).

        Args:
            source: the input file.
            run_id: training run id (filled into rows by ingest).
            rank: global rank, used only when MPI data and the file name do not give one.

        Raises:
            ParseError: not an nsys output at all, or unreadable.
        """
        if source.start_offset:
            raise ParseError(source.path, "nsys outputs are ingested whole, not from an offset")
        head = source.head(16)
        if head.startswith(SQLITE_MAGIC):
            yield from read_sqlite(source, rank=rank)
        elif head.startswith(PARQUET_MAGIC):
            yield from read_parquet(source, rank=rank)
        else:
            yield from read_csv(source, rank=rank)
