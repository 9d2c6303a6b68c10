"""NCCL Inspector output (profiler plugin, JSON Lines, NCCL 2.28+) -> comm_ops, communicators.

Input: one file written by NCCL's Inspector profiler plugin (``NCCL_PROFILER_PLUGIN=...inspector``,
``NCCL_INSPECTOR_ENABLE=1``): ``<hostname>-pid<pid>.log`` in ``NCCL_INSPECTOR_DUMP_DIR``, one JSON
object per line, one line per completed operation of one communicator seen by one process.
Compressed copies are read through :mod:`commscope.parsers._io`.

Format, pinned from NVIDIA/nccl (``ext-profiler/inspector/inspector.cc`` up to v2.29.3-1, then
``plugins/profiler/inspector/inspector.cc`` v2.29.7-1 and ``inspector_json.cc`` v2.30.3-1 ..
v2.30.7-1 and master 2026-06). Every release writes ``"inspector_output_format_version": "v4.0"``;
what changed inside v4.0 is the set of keys, so both shapes are read:

* **v4.0, NCCL 2.28.1 .. 2.29.7** (``inspectorCommInfoHeader``, ``inspectorCommInfoMetaHeader``,
  ``inspectorCompletedColl``)::

    {"header": {"id", "rank", "n_ranks", "nnodes"},
     "metadata": {"inspector_output_format_version": "v4.0", "git_rev", "rec_mechanism",
                  "dump_timestamp_us", "hostname", "pid"},
     "coll_perf": {"coll", "coll_sn", "coll_msg_size_bytes", "coll_exec_time_us",
                   "coll_timing_source", "coll_algobw_gbs", "coll_busbw_gbs"
                   [, "event_trace_sn", "event_trace_ts" with NCCL_INSPECTOR_DUMP_VERBOSE=1]}}

  The plugin keeps only the *latest* completed collective per communicator and writes it at the
  next dump tick (``commInfo->completedCollInfo`` is one slot, overwritten): calls that complete
  faster than ``NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS`` are never written. A warning
  counts the ``coll_sn`` values missing between the first and last of each (comm, rank, op).
* **v4.0, NCCL 2.30.3+** (``inspector_json.cc``): ``header`` gains ``"comm_name"`` (NCCL's
  ``config.commName``, "unknown" when unset; not stored: no canonical column holds a name) after
  ``"id"``; completed operations are kept in per-communicator rings (``inspector_ring.cc``,
  ``NCCL_INSPECTOR_DUMP_COLL_RING_SIZE`` default 1024; a full ring overwrites its oldest entry);
  ops under ``NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES`` (default 8192) are not tracked; with
  ``NCCL_INSPECTOR_ENABLE_P2P`` (default 1) point-to-point records come as ``"p2p_perf"``:
  ``{"p2p", "p2p_sn", "p2p_peer", "p2p_msg_size_bytes", "p2p_exec_time_us",
  "p2p_timing_source", "p2p_algobw_gbs", "p2p_busbw_gbs" [, verbose event traces]}``; with
  ``NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING=1`` (default) only ``kernel_gpu``-timed ops are written.
  An unreleased PR (42aad2bc, UserTag v7) adds ``"user_tag"`` to ``coll_perf``: ignored.

The plugin's Prometheus mode (``NCCL_INSPECTOR_PROM_DUMP=1``) writes aggregated metrics, not one
record per call; it is not read. A record of another ``inspector_output_format_version`` is read
with the v4.0 keys and a warning names the version.

comm_ops (one row per record)
-----------------------------
``op`` from ``coll``/``p2p`` (the plugin's ``ncclFuncToString``: AllReduce, AllGather,
ReduceScatter, Broadcast, Reduce, Send, Recv, SendRecv; 2.30+ also All2All, AllGatherV): mapped as
``commscope.parsers._nccl_enums.OPS`` (plus All2All -> all_to_all), else ``other``. Collectives the plugin's
name table lacks (NCCL core's ``AlltoAll``, ``Gather``, ``Scatter``) are written as ``"Invalid"``
(and with algbw = busbw = 0): ``op`` other, ``raw_op`` Invalid. ``raw_op`` is the name as written.

``comm_id`` and ``communicators.comm_hash``: ``header.id``, the communicator's ``commHash``
printed ``0x%lx`` into a 17-byte buffer (``NCCL_COMM_HASH_LENGTH``), so at most 14 hex digits:
it equals the first 16 characters of the ``commId 0x...`` that NCCL's Init lines print (the
last byte of a 16-digit hash is cut). The same on every member of the communicator.

``group_size`` = ``n_ranks``; ``group_rank`` = ``header.rank`` (the rank *in the
communicator*: the plugin gets ``comm->rank``); ``group_source`` 'logged'. ``rank`` (global):
the record gives none, so the rule of ``commscope.parsers.nccl_debug`` applies per file: the world size W
is the largest ``n_ranks`` in the file; a process (host, pid) whose records on W-rank
communicators all give rank r gets r on every row; a process with several world ranks (one
process driving several GPUs) gets each world comm's own rank on that comm's rows and null
elsewhere; a process without a W-rank communicator in the file gets null; ``parse(rank=...)``
fills only the nulls. A sub-communicator rank is never used as a global rank. Limitation: a file
in which a process's world communicator never appears (2.30+ skips ops < 8 KiB; <= 2.29 samples)
takes its largest communicator as the world; a warning says when a file holds several sizes.
So the rank is a guess, marked ``rank_source`` = ``inferred_largest_comm`` (``option`` where
``parse(rank=...)`` filled it): the identity of a process is its host:pid (the file name and
every record carry them), and ``stg_store__comm_ops`` replaces the guess by the global rank
another source of the run names for the same host:pid (an NCCL log's Init lines, a trace's
distributedInfo), marked ``inferred_process``; ``stg_store__communicators`` does the same for
the file's communicators rows.

``msg_bytes``: ``coll_msg_size_bytes`` is ``ncclTypeSize(datatype) * coll.count`` with the NCCL
API count (``ct->count = info->count``): the buffer for AllReduce/Broadcast/Reduce/Send/Recv, the
per-rank send buffer for AllGather, the per-rank receive buffer for ReduceScatter, which is the
schema's meaning (the plugin's own algbw multiplies AllGather/ReduceScatter sizes by n_ranks).
AlltoAll's count is per peer, so its ``msg_bytes`` is size x n_ranks (the whole per-rank send
buffer). Quirk: the plugin's datatype table lacks ``ncclUint8`` (fixed in an unreleased commit,
e6019768), so a uint8 call's size is ``(size_t)-1 * count`` = 2**64 - count; such a value
(> 2**63) is undone (``msg_bytes`` = 2**64 - value, one byte per element, ``dtype`` uint8) and
its algbw/busbw (computed from the wrapped size) are null.

``seq``: ``coll_sn`` = NCCL's ``comm->seqNumber[func]``, a counter per (communicator,
**collective function**) from 0 (AllReduce and AllGather on one communicator both count 0, 1,
...), not one sequence across ops like the debug log's opCount: match instances on (comm, op,
seq). ``p2p_sn``: the plugin's own per-communicator counter over Send and Recv together, from 1.
``peer_rank``: ``p2p_peer`` as logged, a communicator rank (a global rank on a world comm).

``dur_ns`` = ``*_exec_time_us`` x 1000 (the plugin truncates to whole microseconds), and
``timing_source`` from ``*_timing_source`` (``calculateMaxKernelExecTimeUsecs``):

* ``kernel_gpu`` -> ``kernel``: the longest of the call's kernel channels, each timed on the GPU
  (``globaltimer`` at the channel's start and stop, ns): the call's kernel time on the GPU clock.
* ``kernel_cpu`` and ``collective_cpu`` -> ``profiler_cpu``: host timestamps (``gettimeofday``)
  of the profiler's kernel-channel start/stop callbacks (longest channel), or from the first
  channel's start to the last channel's stop as the host saw them: GPU work on a CPU clock, with
  the host's polling delay; never a kernel duration.
* missing (pre-release records) or ``unknown``: null (clock unknown, warning).

``ts_ns`` and ``launch_ts_ns`` stay null: no record holds the start of the measured interval.
``dump_timestamp_us`` is when the dump thread wrote the line (after the call, up to a dump
interval later); the verbose ``event_trace_ts`` values are host times of profiler callbacks.
Placing a GPU duration at a host time would give an interval the GPU never ran.

``algbw_gbps``/``busbw_gbps``: ``*_algobw_gbs``/``*_busbw_gbs`` are GB/s (``bytes / 1e9 /
seconds``, nccl-tests factors, ``inspectorComputeCollBw``); stored x 8 as Gbit/s, the schema's
unit (x 8 is exact in binary floating point, so ``busbw_gbps / 8`` is the file's number). Null
where the plugin wrote 0 for want of a formula (``Invalid`` ops, zero exec time), for a wrapped
uint8 size, and for NaN/inf. ``host``/``pid`` from ``metadata.hostname``/``pid``.

communicators: one row per (comm_id, host, pid, group rank) seen: ``comm_id`` = ``comm_hash`` =
``header.id``, ``rank``, ``nranks``, ``global_rank`` (rule above), ``host``, ``pid``,
``source_line`` of its first record.

Line accounting: a line is **parsed** when it is a record (a JSON object with ``header`` and
``coll_perf`` or ``p2p_perf``) that made a row; **rejected** when it looks like a record (starts
with ``{`` or names ``coll_perf``/``p2p_perf``/``inspector_output_format_version``) but is not
valid JSON (cut, spliced), is not an object, lacks its ``header``/perf object or its operation
name, or is over ``commscope.parsers._io.MAX_LINE_BYTES``; a final line without newline that is not a whole
record is rejected as cut. Everything else (blank lines, other text) is **ignored**. A value out
of range or of the wrong type costs that value (null), counted in a warning, never the row.
A file with lines but not one that looks like a record raises ``ParseError``.

Two passes (both streaming): pass 1 reads only the header fields (regexes over each block) to
find the world size and world ranks; pass 2 emits rows per block: lines of the plugin's exact
collective shape through one vectorised path (``FAST_PATH``), every other line through
``json``. Kept across the file (bounded): the communicators seen (``MAX_COMMS``) and per-(comm,
rank, op) sequence ranges for the gap warning.

Incremental parse (``resume``, see ``commscope.parsers.registry.is_resumable``; Inspector files grow for the
whole job): the end state holds the header facts pass 1 saw, the communicators already emitted
and the sequence ranges, so the appended lines get the ranks a single parse gives them and each
communicator is emitted once. Limit, as in ``commscope.parsers.nccl_debug``: a row already stored keeps
its rank when later lines change the world size (a larger communicator appears only later).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import polars as pl

from commscope.parsers import _nccl_enums as enums
from commscope.parsers._io import LongLine, Source, iter_line_blocks
from commscope.parsers.registry import LineCounts, ParsedChunk, ParseError, register

PINNED_VERSIONS = frozenset({"v4.0"})
"""``inspector_output_format_version`` values whose keys are pinned (module docstring)."""

OPS: dict[str, str] = {**enums.OPS, "All2All": "all_to_all"}
"""Operation name as the plugin writes it -> ``comm_ops.op``; anything else is ``other``."""

_BW_FORMULA = frozenset(
    {"AllReduce", "AllGather", "AllGatherV", "ReduceScatter", "Broadcast", "Reduce", "Send"}
    | {"Recv", "SendRecv"}
)
"""Ops for which ``inspectorComputeCollBw`` has a formula (else it writes algbw = busbw = 0)."""

TIMING: dict[str, str] = {
    "kernel_gpu": "kernel",
    "kernel_cpu": "profiler_cpu",
    "collective_cpu": "profiler_cpu",
}
"""``*_timing_source`` -> ``comm_ops.timing_source`` (module docstring)."""

MAX_COMMS = 100_000
"""Distinct (comm, host, pid, rank) kept for ``communicators`` and the world-rank rule."""

MAX_SEQ_KEYS = 100_000
"""Distinct (comm, host, pid, rank, op) whose sequence range is tracked for the gap warning."""

_MAX_RAW = 4096
_I32 = 2**31 - 1
_I64 = 2**63 - 1
_U64 = 2**64
_MAX_DUR_US = _I64 // 1000

_RECORD_HINT = ('"coll_perf"', '"p2p_perf"', '"inspector_output_format_version"')
_HINT_RE = "|".join(re.escape(h) for h in _RECORD_HINT)

# Pass 1: the header and metadata fields of a record line, whitespace-tolerant (the plugin
# writes none; a re-serialised copy may).
_HDR_RANK = r'"header"\s*:\s*\{[^{}]*?"rank"\s*:\s*(-?\d{1,12})'
_HDR_NRANKS = r'"header"\s*:\s*\{[^{}]*?"n_ranks"\s*:\s*(-?\d{1,12})'
_META_HOST = r'"metadata"\s*:\s*\{[^{}]*?"hostname"\s*:\s*"([^"\\]{0,255})"'
_META_PID = r'"metadata"\s*:\s*\{[^{}]*?"pid"\s*:\s*(\d{1,19})'

_CUT = "final line has no newline (file cut mid-line)"

FAST_PATH = True
"""Read lines of the plugin's exact non-verbose collective shape vectorised (``_FAST_RE``
selects them, ``_FAST_FIELDS`` cut their values); any other line (p2p, verbose, other versions, values near a bound, foreign
text) goes through ``json``. Both give the same row (tests/parsers/test_nccl_inspector.py)."""

# The exact line ``inspectorCommInfoDump`` writes for one collective (no verbose traces), with
# digit counts that keep every value inside its column (sizes < 10**18 < 2**63: a uint8-wrapped
# size has 20 digits and takes the json path).
_FAST_RE = (
    r'^\{"header":\{"id":"(?P<comm_id>0x[0-9a-fA-F]{1,62})",'
    r'(?:"comm_name":"[^"\\\x00-\x1f]*",)?'
    r'"rank":(?P<group_rank>\d{1,9}),"n_ranks":(?P<group_size>\d{1,9}),"nnodes":\d{1,19}\},'
    r'"metadata":\{"inspector_output_format_version":"v4\.0","git_rev":"[^"\\\x00-\x1f]*",'
    r'"rec_mechanism":"[^"\\\x00-\x1f]*","dump_timestamp_us":\d{1,19},'
    r'"hostname":"(?P<host>[^"\\\x00-\x1f]{0,255})","pid":(?P<pid>\d{1,18})\},'
    r'"coll_perf":\{"coll":"(?P<raw_op>[A-Za-z0-9]{1,64})","coll_sn":(?P<seq>\d{1,18}),'
    r'"coll_msg_size_bytes":(?P<msg_bytes>\d{1,18}),"coll_exec_time_us":(?P<exec_us>\d{1,15}),'
    r'"coll_timing_source":"(?P<timing>kernel_gpu|kernel_cpu|collective_cpu)",'
    r'"coll_algobw_gbs":(?P<algbw>\d{1,15}\.\d{1,9}),"coll_busbw_gbs":(?P<busbw>\d{1,15}\.\d{1,9})'
    r"\}\}\s*$"
)
_FAST_RE_NC = re.sub(r"\(\?P<\w+>", "(?:", _FAST_RE)  # no captures: DFA-fast in Rust
_FAST_FIELDS = {
    "comm_id": r'"id":"(0x[0-9a-fA-F]{1,62})"',
    "group_rank": r'"rank":(\d{1,9}),',
    "group_size": r'"n_ranks":(\d{1,9}),',
    "host": r'"hostname":"([^"\\\x00-\x1f]{0,255})"',
    "pid": r'"pid":(\d{1,18})\}',
    "raw_op": r'"coll":"([A-Za-z0-9]{1,64})"',
    "seq": r'"coll_sn":(\d{1,18}),',
    "msg_bytes": r'"coll_msg_size_bytes":(\d{1,18}),',
    "exec_us": r'"coll_exec_time_us":(\d{1,15}),',
    "timing": r'"coll_timing_source":"([a-z_]{1,20})"',
    "algbw": r'"coll_algobw_gbs":(\d{1,15}\.\d{1,9}),',
    "busbw": r'"coll_busbw_gbs":(\d{1,15}\.\d{1,9})\}',
}
"""Per field, a one-capture pattern (single captures are ~40x cheaper in Rust
than one regex with many): each key occurs once in a line the full pattern matched."""

_PASS1_FIELDS = {"rank": "group_rank", "n": "group_size", "host": "host", "pid": "pid"}
"""Pass 1's columns and the ``_FAST_FIELDS`` each is read with."""


def _int(value: Any, lo: int, hi: int) -> int | None:
    """``value`` as an int in [lo, hi]; None for other types (bool included) or out of range."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    if isinstance(value, int) and lo <= value <= hi:
        return value
    return None


def _float(value: Any) -> float | None:
    """``value`` as a finite float >= 0; None otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        out = float(value)
    except OverflowError:
        return None
    return out if math.isfinite(out) and out >= 0 else None


def _str(value: Any, max_len: int = 255) -> str | None:
    """``value`` if it is a string of at most ``max_len`` characters that UTF-8 can hold (JSON's
    ``\\ud800`` escapes decode to lone surrogates, which no Parquet string holds)."""
    if not isinstance(value, str) or len(value) > max_len:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


@dataclass
class _Proc:
    """What pass 1 learnt about one process (host, pid) of the file."""

    world_ranks: set[int] = field(default_factory=set)


@dataclass
class _World:
    """Pass 1's result: world size and each process's world ranks."""

    size: int | None = None
    sizes: set[int] = field(default_factory=set)
    procs: dict[tuple[str | None, int | None], _Proc] = field(default_factory=dict)
    lines: int = 0
    record_like: int = 0
    seen: list[tuple[str | None, int | None, int, int]] = field(default_factory=list)

    def global_rank(
        self, host: str | None, pid: int | None, comm_rank: int | None, n_ranks: int | None
    ) -> int | None:
        """Global rank of a row (module docstring, ``rank``)."""
        if self.size is None:
            return None
        if n_ranks == self.size and comm_rank is not None:
            return comm_rank
        proc = self.procs.get((host, pid))
        if proc is not None and len(proc.world_ranks) == 1:
            return next(iter(proc.world_ranks))
        return None


def _scan_world(source: Source, prior: list[Any] | None = None) -> _World:
    """Pass 1: world size (largest n_ranks), the ranks each process has on it, and how many
    lines look like records; ``prior``: the (host, pid, rank, n_ranks) seen before the range."""
    seen: set[tuple[str | None, int | None, int, int]] = set()
    for item in prior or []:
        host, pid, r, n = item
        seen.add((host, pid, int(r), int(n)))
    world = _World()
    for block in iter_line_blocks(source):
        s = block.series
        world.lines += len(s)
        exact = s.str.contains(_FAST_RE_NC)  # the plugin's own shape: cheap fields
        rest = s.filter(~exact)
        s = s.filter(exact)
        world.record_like += len(block.overlong) + len(s)
        world.record_like += int(
            (
                rest.str.strip_chars_start(" \t\ufeff").str.starts_with("{")
                | rest.str.contains(_HINT_RE)
            ).sum()
        )
        frames = [
            pl.DataFrame({k: s.str.extract(_FAST_FIELDS[f], 1) for k, f in _PASS1_FIELDS.items()}),
            pl.DataFrame(
                {
                    "rank": rest.str.extract(_HDR_RANK, 1),
                    "n": rest.str.extract(_HDR_NRANKS, 1),
                    "host": rest.str.extract(_META_HOST, 1),
                    "pid": rest.str.extract(_META_PID, 1),
                }
            ),
        ]
        df = pl.concat(frames).filter(pl.col("rank").is_not_null() & pl.col("n").is_not_null())
        if not df.height:
            continue
        df = df.unique()
        for r, n, host, pid in df.iter_rows():
            ri, ni = int(r), int(n)
            pi = int(pid) if pid is not None and int(pid) <= _I64 else None
            if 0 <= ri < ni <= _I32 and len(seen) < MAX_COMMS:
                seen.add((host, pi, ri, ni))
    world.seen = sorted(seen, key=repr)
    if not seen:
        return world
    world.sizes = {n for _, _, _, n in seen}
    world.size = max(world.sizes)
    for host, pid, r, n in seen:
        proc = world.procs.setdefault((host, pid), _Proc())
        if n == world.size:
            proc.world_ranks.add(r)
    return world


@dataclass
class _Comm:
    line: int
    n_ranks: int | None


@dataclass
class _Seq:
    lo: int
    hi: int
    n: int


class _Pass2:
    """Row emission, block by block."""

    def __init__(
        self, world: _World, rank: int | None, resume: dict[str, Any] | None = None
    ) -> None:
        self.world = world
        self.rank = rank
        self.comms: dict[tuple[str | None, str | None, int | None, int | None], _Comm] = {}
        self.comms_full = 0
        self.seqs: dict[tuple[Any, ...], _Seq] = {}
        prior = resume or {}
        self.emitted: set[tuple[Any, ...]] = {tuple(k) for k in prior.get("comms", [])}
        for *key, lo, hi, n in prior.get("seqs", []):
            self.seqs[tuple(key)] = _Seq(int(lo), int(hi), int(n))
        self.bad_values: dict[str, int] = {}
        self.versions: dict[str, int] = {}
        self.uint8_sizes = 0
        self.unknown_timing: dict[str, int] = {}
        self.no_timing = 0
        self.records = 0
        self.rejected = 0

    def _bad(self, name: str) -> None:
        self.bad_values[name] = self.bad_values.get(name, 0) + 1

    def _take(self, obj: dict[str, Any], key: str, conv: Any, *args: Any) -> Any:
        """``conv(obj[key], *args)``; a present value that does not convert is counted."""
        if key not in obj or obj[key] is None:
            return None
        out = conv(obj[key], *args)
        if out is None:
            self._bad(key)
        return out

    # -- one line -----------------------------------------------------------------------------

    def record(self, doc: Any, line_no: int) -> dict[str, Any] | str:
        """One row from a decoded line, or the reason it is rejected."""
        if not isinstance(doc, dict):
            return "JSON value is not an object"
        header = doc.get("header")
        meta = doc.get("metadata")
        if "coll_perf" in doc:
            perf, kind = doc["coll_perf"], "coll"
        elif "p2p_perf" in doc:
            perf, kind = doc["p2p_perf"], "p2p"
        else:
            return "record without 'coll_perf' or 'p2p_perf'"
        if not isinstance(header, dict):
            return "record without its 'header' object"
        if not isinstance(perf, dict):
            return f"'{kind}_perf' is not an object"
        raw_op = _str(perf.get(kind), 64)
        if not raw_op:
            return f"record without its operation name ('{kind}')"
        if not isinstance(meta, dict):
            if meta is not None:
                self._bad("metadata")
            meta = {}
        version = meta.get("inspector_output_format_version")
        if isinstance(version, str) and version not in PINNED_VERSIONS:
            key = version[:40]
            if key in self.versions or len(self.versions) < 100:
                self.versions[key] = self.versions.get(key, 0) + 1

        comm_id = self._take(header, "id", _str, 64)
        comm_id = comm_id.lower() if comm_id is not None else None
        n_ranks = self._take(header, "n_ranks", _int, 1, _I32)
        comm_rank = self._take(header, "rank", _int, 0, _I32)
        if comm_rank is not None and n_ranks is not None and comm_rank >= n_ranks:
            self._bad("rank")
            comm_rank = None
        host = self._take(meta, "hostname", _str, 255)
        pid = self._take(meta, "pid", _int, 0, _I64)

        op = OPS.get(raw_op, "other")
        size = self._take(perf, f"{kind}_msg_size_bytes", _int, 0, _U64 - 1)
        dtype = None
        bw_ok = raw_op in _BW_FORMULA
        if size is not None and size > _I64 + 1:
            # ncclUint8 missing from the plugin's datatype table: (size_t)-1 * count
            size, dtype, bw_ok = _U64 - size, "uint8", False
            self.uint8_sizes += 1
        elif size is not None and size > _I64:  # 2**63: no count gives it
            size = None
            self._bad(f"{kind}_msg_size_bytes")
        if size is not None and op == "all_to_all":
            size = size * n_ranks if n_ranks is not None and size * n_ranks <= _I64 else None
        exec_us = self._take(perf, f"{kind}_exec_time_us", _int, 0, _MAX_DUR_US)
        dur_ns = exec_us * 1000 if exec_us is not None else None
        timing_raw = perf.get(f"{kind}_timing_source")
        timing: str | None
        if dur_ns is None:
            timing = "none"
        elif isinstance(timing_raw, str) and timing_raw in TIMING:
            timing = TIMING[timing_raw]
        else:
            timing = None
            if timing_raw is None:
                self.no_timing += 1
            else:
                key = str(timing_raw)[:40]
                if key in self.unknown_timing or len(self.unknown_timing) < 100:
                    self.unknown_timing[key] = self.unknown_timing.get(key, 0) + 1
        algbw = self._take(perf, f"{kind}_algobw_gbs", _float)
        busbw = self._take(perf, f"{kind}_busbw_gbs", _float)
        if not bw_ok or not exec_us:
            algbw = busbw = None
        seq = self._take(perf, f"{kind}_sn", _int, 0, _I64)
        peer = self._take(perf, "p2p_peer", _int, 0, _I32) if kind == "p2p" else None

        rank = self.world.global_rank(host, pid, comm_rank, n_ranks)
        rank_source = "inferred_largest_comm" if rank is not None else None
        if rank is None:
            rank = self.rank
            rank_source = "option" if rank is not None else None

        self._track(comm_id, host, pid, comm_rank, n_ranks, raw_op, seq, line_no)
        return {
            "rank": rank,
            "host": host,
            "pid": pid,
            "source_line": line_no,
            "op": op,
            "raw_op": raw_op,
            "comm_id": comm_id,
            "group_size": n_ranks,
            "group_rank": comm_rank,
            "peer_rank": peer,
            "dtype": dtype,
            "msg_bytes": size,
            "seq": seq,
            "dur_ns": dur_ns,
            "algbw_gbps": algbw * 8 if algbw is not None else None,
            "busbw_gbps": busbw * 8 if busbw is not None else None,
            "timing_source": timing,
            "group_source": "logged" if n_ranks is not None else None,
            "rank_source": rank_source,
        }

    def _track(
        self,
        comm_id: str | None,
        host: str | None,
        pid: int | None,
        comm_rank: int | None,
        n_ranks: int | None,
        raw_op: str,
        seq: int | None,
        line_no: int,
    ) -> None:
        key = (comm_id, host, pid, comm_rank)
        self._note_comm(key, n_ranks, line_no)
        if seq is not None:
            self._note_seq((*key, raw_op), seq, seq, 1)

    def _note_comm(self, key: tuple[Any, ...], n_ranks: int | None, line_no: int) -> None:
        cur = self.comms.get(key)
        if cur is not None:
            cur.line = min(cur.line, line_no)
        elif len(self.comms) < MAX_COMMS:
            self.comms[key] = _Comm(line_no, n_ranks)
        else:
            self.comms_full += 1

    def _note_seq(self, key: tuple[Any, ...], lo: int, hi: int, n: int) -> None:
        cur = self.seqs.get(key)
        if cur is not None:
            cur.lo, cur.hi, cur.n = min(cur.lo, lo), max(cur.hi, hi), cur.n + n
        elif len(self.seqs) < MAX_SEQ_KEYS:
            self.seqs[key] = _Seq(lo, hi, n)

    # -- one block ----------------------------------------------------------------------------

    def block(
        self, series: pl.Series, first_line_no: int, complete: bool, overlong: tuple[LongLine, ...]
    ) -> ParsedChunk:
        """Rows, rejects and line accounting of one block of lines."""
        n_lines = len(series)
        numbers = pl.int_range(first_line_no, first_line_no + n_lines, dtype=pl.Int64, eager=True)
        fast: pl.DataFrame | None = None
        if FAST_PATH and n_lines:
            fast = self._fast(series, numbers, None if complete else first_line_no + n_lines - 1)
            if fast.height:
                rest = ~numbers.is_in(fast["source_line"].implode())
                series, numbers = series.filter(rest), numbers.filter(rest)
        rows: list[dict[str, Any]] = []
        rejects: list[tuple[int, str, str]] = [(ln.line_no, ln.raw, ln.reason) for ln in overlong]
        long_lines = {ln.line_no for ln in overlong}
        last = first_line_no + n_lines - 1
        for line_no, raw in zip(numbers.to_list(), series.to_list(), strict=True):
            text = raw.lstrip(" \t\ufeff")
            if not text.strip() or line_no in long_lines:
                continue
            looks = text.startswith("{") or any(h in text for h in _RECORD_HINT)
            if not looks:
                continue
            cut = not complete and line_no == last
            try:
                doc = json.loads(text)
            except (ValueError, RecursionError):
                rejects.append((line_no, raw, _CUT if cut else "not valid JSON (cut or spliced)"))
                continue
            out = self.record(doc, line_no)
            if isinstance(out, str):
                rejects.append((line_no, raw, _CUT if cut else out))
            else:
                rows.append(out)
        n_fast = fast.height if fast is not None else 0
        self.records += len(rows) + n_fast
        self.rejected += len(rejects)
        tables: dict[str, pl.DataFrame] = {}
        ops = [pl.DataFrame(rows, schema=_ROW_SCHEMA, orient="row")] if rows else []
        if n_fast and fast is not None:
            ops.append(fast)
        if ops:
            tables["comm_ops"] = pl.concat(ops).sort("source_line") if len(ops) > 1 else ops[0]
        if rejects:
            rejects.sort()
            tables["rejects"] = pl.DataFrame(
                [(ln, raw[:_MAX_RAW], why) for ln, raw, why in rejects],
                schema={"line_no": pl.Int64, "raw": pl.Utf8, "reason": pl.Utf8},
                orient="row",
            )
        parsed = len(rows) + n_fast
        counts = LineCounts(
            total=n_lines,
            parsed=parsed,
            rejected=len(rejects),
            ignored=n_lines - parsed - len(rejects),
        )
        return ParsedChunk(tables=tables, counts=counts)

    def _fast(self, series: pl.Series, numbers: pl.Series, cut_line: int | None) -> pl.DataFrame:
        """Rows of the lines of the plugin's exact collective shape (``_FAST_RE``).

        The same values as :meth:`record` gives them; lines that would need a warning (an
        unknown op name is fine, a rank >= n_ranks is not) are left to the json path.
        """
        mask = series.str.contains(_FAST_RE_NC)
        sub = series.filter(mask)
        g = pl.DataFrame(
            {name: sub.str.extract(pattern, 1) for name, pattern in _FAST_FIELDS.items()}
        ).with_columns(source_line=numbers.filter(mask))
        if cut_line is not None:
            g = g.filter(pl.col("source_line") != cut_line)
        if not g.height:
            return pl.DataFrame(schema=_ROW_SCHEMA)
        ints = ("group_rank", "group_size", "pid", "seq", "msg_bytes", "exec_us")
        g = g.with_columns(
            [pl.col(c).cast(pl.Int64) for c in ints]
            + [pl.col("algbw").cast(pl.Float64), pl.col("busbw").cast(pl.Float64)]
        ).filter(
            (pl.col("group_size") >= 1)
            & (pl.col("group_rank") < pl.col("group_size"))
            & ~pl.col("raw_op").is_in(["All2All", "AlltoAll"])  # size x n: json path
        )
        if not g.height:
            return pl.DataFrame(schema=_ROW_SCHEMA)
        bw_ok = pl.col("raw_op").is_in(list(_BW_FORMULA)) & (pl.col("exec_us") > 0)
        g = g.with_columns(
            comm_id=pl.col("comm_id").str.to_lowercase(),
            op=pl.col("raw_op").replace_strict(OPS, default="other", return_dtype=pl.Utf8),
            dur_ns=pl.col("exec_us") * 1000,
            timing_source=pl.col("timing").replace_strict(TIMING, return_dtype=pl.Utf8),
            algbw_gbps=pl.when(bw_ok).then(pl.col("algbw") * 8),
            busbw_gbps=pl.when(bw_ok).then(pl.col("busbw") * 8),
            group_source=pl.lit("logged"),
            dtype=pl.lit(None, dtype=pl.Utf8),
            peer_rank=pl.lit(None, dtype=pl.Int32),
        )
        keys = ["comm_id", "host", "pid", "group_rank"]
        procs = g.group_by([*keys, "group_size"]).agg(first=pl.col("source_line").min())
        procs = procs.sort("first")
        ranks = []
        how = []
        for cid, host, pid, grank, n, first in procs.iter_rows():
            self._note_comm((cid, host, pid, grank), n, first)
            r = self.world.global_rank(host, pid, grank, n)
            ranks.append(r if r is not None else self.rank)
            how.append(
                "inferred_largest_comm"
                if r is not None
                else ("option" if self.rank is not None else None)
            )
        procs = procs.with_columns(
            rank=pl.Series(ranks, dtype=pl.Int32), rank_source=pl.Series(how, dtype=pl.Utf8)
        ).drop("first")
        g = g.join(procs, on=[*keys, "group_size"], how="left", nulls_equal=True)
        for cid, host, pid, grank, op, lo, hi, n in (
            g.group_by([*keys, "raw_op"])
            .agg(lo=pl.col("seq").min(), hi=pl.col("seq").max(), n=pl.len())
            .iter_rows()
        ):
            self._note_seq((cid, host, pid, grank, op), lo, hi, n)
        return g.select([pl.col(c).cast(t) for c, t in _ROW_SCHEMA.items()]).sort("source_line")

    # -- the end --------------------------------------------------------------------------------

    def finish(self) -> ParsedChunk:
        """The communicators chunk and the file's warnings."""
        rows = []
        for (comm_id, host, pid, comm_rank), c in self.comms.items():
            if comm_id is None or (comm_id, host, pid, comm_rank) in self.emitted:
                continue
            g = self.world.global_rank(host, pid, comm_rank, c.n_ranks)
            rows.append(
                {
                    "comm_id": comm_id,
                    "rank": comm_rank,
                    "nranks": c.n_ranks,
                    "global_rank": g if g is not None else self.rank,
                    "host": host,
                    "pid": pid,
                    "comm_hash": comm_id,
                    "source_line": c.line,
                }
            )
        tables: dict[str, pl.DataFrame] = {}
        if rows:
            tables["communicators"] = pl.DataFrame(rows, schema=_COMM_SCHEMA, orient="row")
        return ParsedChunk(tables=tables, warnings=self.warnings())

    def end_state(self) -> dict[str, Any]:
        """What a parse of the bytes after this range resumes from (JSON-serialisable)."""
        comms = self.emitted | {k for k in self.comms if k[0] is not None}
        return {
            "v": 1,
            "seen": [list(t) for t in self.world.seen],
            "comms": sorted((list(k) for k in comms), key=repr),
            "seqs": [[*k, v.lo, v.hi, v.n] for k, v in self.seqs.items()],
        }

    def warnings(self) -> list[str]:
        """What the parse had to leave out or assume, one line each."""
        out: list[str] = []
        if self.bad_values:
            names = ", ".join(f"{k} ({n})" for k, n in sorted(self.bad_values.items()))
            out.append(f"values out of range or of the wrong type, set null: {names}")
        if self.versions:
            vs = ", ".join(f"{v!r} ({n})" for v, n in sorted(self.versions.items()))
            out.append(f"inspector_output_format_version not pinned (read with v4.0 keys): {vs}")
        if self.uint8_sizes:
            out.append(
                f"{self.uint8_sizes} record(s) with a wrapped size (2**64 - count: the plugin "
                "lacks ncclUint8): read as uint8 counts; their algbw/busbw set null"
            )
        if self.no_timing:
            out.append(f"{self.no_timing} record(s) without a timing source: clock unknown (null)")
        if self.unknown_timing:
            ts = ", ".join(f"{v!r} ({n})" for v, n in sorted(self.unknown_timing.items()))
            out.append(f"unknown timing source(s), clock unknown (null): {ts}")
        missing = sum(max(0, s.hi - s.lo + 1 - s.n) for s in self.seqs.values())
        if missing:
            out.append(
                f"{missing} call(s) missing between logged sequence numbers (NCCL <= 2.29 "
                "writes only the latest completed collective per dump interval; 2.30+ skips "
                "ops under NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES)"
            )
        if len(self.world.sizes) > 1 and self.world.size is not None:
            out.append(
                f"communicators of {len(self.world.sizes)} sizes: world size taken as the "
                f"largest in the file ({self.world.size} ranks)"
            )
        if self.comms_full:
            out.append(f"more than {MAX_COMMS} communicators: {self.comms_full} not listed")
        return out


_ROW_SCHEMA: dict[str, Any] = {
    "rank": pl.Int32,
    "host": pl.Utf8,
    "pid": pl.Int64,
    "source_line": pl.Int64,
    "op": pl.Utf8,
    "raw_op": pl.Utf8,
    "comm_id": pl.Utf8,
    "group_size": pl.Int32,
    "group_rank": pl.Int32,
    "peer_rank": pl.Int32,
    "dtype": pl.Utf8,
    "msg_bytes": pl.Int64,
    "seq": pl.Int64,
    "dur_ns": pl.Int64,
    "algbw_gbps": pl.Float64,
    "busbw_gbps": pl.Float64,
    "timing_source": pl.Utf8,
    "group_source": pl.Utf8,
    "rank_source": pl.Utf8,
}

_COMM_SCHEMA: dict[str, Any] = {
    "comm_id": pl.Utf8,
    "rank": pl.Int32,
    "nranks": pl.Int32,
    "global_rank": pl.Int32,
    "host": pl.Utf8,
    "pid": pl.Int64,
    "comm_hash": pl.Utf8,
    "source_line": pl.Int64,
}


@register
class NcclInspectorParser:
    """Parser for NCCL Inspector JSON Lines (see the module docstring)."""

    name: ClassVar[str] = "nccl_inspector"
    version: ClassVar[str] = "1.0.0"
    resumable: ClassVar[bool] = True

    def sniff(self, head: bytes, path: Path) -> int:
        """Confidence that ``head`` is Inspector output: 95 with its format-version key, 80 for
        a line that starts with its header object, else 0."""
        text = head.lstrip(b" \t\r\n\xef\xbb\xbf")
        if not text.startswith(b"{"):
            return 0
        if b'"inspector_output_format_version"' in head and (
            b'"coll_perf"' in head or b'"p2p_perf"' in head
        ):
            return 95
        if re.match(rb'\{\s*"header"\s*:\s*\{', text) and b'"n_ranks"' in head:
            return 80
        return 0

    def parse(
        self,
        source: Source,
        *,
        run_id: str,
        rank: int | None = None,
        resume: dict[str, Any] | None = None,
    ) -> Iterator[ParsedChunk]:
        """Yield one chunk of comm_ops (and rejects) per block, then communicators.

        Args:
            source: the file to parse.
            run_id: training run identifier (rows leave it to ingest).
            rank: global rank of the file's process when the caller knows it; fills only the
                global ranks the file itself does not establish.
            resume: the ``state`` of the last chunk of the parse of the bytes before
                ``source.start_offset`` (incremental ingest, module docstring).

        Raises:
            ParseError: the file is unreadable, or has lines but no Inspector record at all.
        """
        del run_id
        prior = resume if resume and resume.get("v") == 1 else {}
        world = _scan_world(source, prior.get("seen"))
        if world.lines and not world.record_like and not source.start_offset:
            raise ParseError(source.path, "no NCCL Inspector record (no line holds a JSON object)")
        state = _Pass2(world, rank, prior)
        for block in iter_line_blocks(source):
            yield state.block(block.series, block.first_line_no, block.complete, block.overlong)
        last = state.finish()
        last.state = state.end_state()
        yield last
