"""PyTorch profiler (Kineto) Chrome-trace JSON: collectives, GPU activity, iteration markers.

Reads every generation of the format (see ``FORMATS_timeline.md`` §2): the 2020-21 bare array
(cats ``Operator``/``Kernel``/``Memcpy``, string stream tids), 2022-23 object form with epoch-µs
``ts``, and 2024+ traces with ``baseTimeNanoseconds``, ``distributedInfo.pg_config``,
``record_param_comms`` collective args (also copied onto NCCL kernels) and ``Seq``. The events
are decoded from the decompressed stream in pieces of ~128 KiB by msgspec into structs of the
fields read here (ijson where msgspec might read differently, see
:mod:`commscope.parsers._kineto_events`); rows are accumulated in column lists and flushed as a
:class:`ParsedChunk` every :data:`FLUSH_EVENTS` events, so memory stays bounded whatever the
trace size. Only the (small) communication candidates, the launch events of their kernels and
the launch events whose GPU activity is still to come are kept until the end of the file, where
the dedup and timing rules below are applied.

Launches: a runtime or driver call (cats ``cuda_runtime``, ``cuda_driver``, ``Runtime``)
whose name starts GPU work (:data:`_LAUNCH_WORDS`: ``cudaLaunchKernel``,
``cudaLaunchKernelExC``, ``cuLaunchKernel(Ex)``, ``hipLaunchKernel``, ``hipExtLaunchKernel``,
``hipExtModuleLaunchKernel``, ``cudaGraphLaunch``, ``cudaMemcpyAsync``, ``hipMemsetAsync``,
...) launched the GPU activity with the same ``correlation`` arg. Kineto writes them in either
order (the kernel first in most traces, the launch thousands of events earlier in ROCm ones);
each is matched when the second of the pair is read, and a GPU row whose launch has not been
read when its chunk is flushed waits one more chunk (:meth:`KinetoParser._carry`), then is
written with a null launch. A launch read first waits for its GPU row in a dict (about 170
bytes), dropped when matched: memory follows how far apart Kineto writes the two (under 9,000
events in the shared traces), not the trace size; only a trace that wrote every launch before
every GPU row would hold them all. The launches of comm kernels are kept to the end (one per
call, like the call candidates).

Tables written:

* ``kernels``: every GPU kernel, memcpy and memset (``ph == "X"``). ``device`` = ``args.device``
  (else the event pid, which Kineto sets to the device index), ``stream`` = ``args.stream`` (else
  the tid; 2021 ``"stream 7"`` → 7), ``name`` = kernel name without its demangled parameter list
  (memcpy/memset names are kept whole), ``category``/``comm_op`` from
  :func:`commscope.parsers._nccl_kernels.classify_kernel` (a comm kernel's ``comm_op`` is taken from its
  ``Collective name`` arg when Kineto copied one), ``msg_bytes`` = ``args.bytes`` for
  memcpy/memset and element count × dtype size for comm kernels that carry collective args,
  ``launch_ts_ns`` = the start of its launch event (null when the trace has none: kernels
  launched before the profiler started), ``iteration`` = the ``ProfilerStep#N`` whose CPU
  window contains that launch (HTA rule ``step.ts <= launch < step.end``; null outside every
  step, and without a launch), so that a GPU running behind the CPU keeps its work in the
  step that issued it.
* ``markers``: ``ProfilerStep#N`` on the CPU → kind ``iteration`` (iteration N, domain
  ``cpu``); its GPU copy (``gpu_user_annotation``, ROCm traces) → kind ``annotation``, domain
  ``gpu``, iteration N, so that iterations are not counted twice; every other
  ``user_annotation`` → kind ``annotation`` domain ``cpu``, every other ``gpu_user_annotation``
  → kind ``annotation`` domain ``gpu`` (``nccl:*``/``gloo:*`` ranges included).
* ``comm_ops``: one row per collective call on the rank, counted once although it can show up
  as a ``record_param_comms`` CPU op, a ``nccl:*`` range (CPU and GPU copies) and a kernel.
  The source is chosen per file, first that exists:

  1. ``record_param_comms`` events that carry ``Collective name`` (PyTorch ≥ 2.3): one row each,
     except ``wait`` (not a transfer). ``count`` = ``In msg nelems`` (``Out msg nelems`` for
     reduce_scatter), ``msg_bytes`` = count × dtype size, ``comm_id`` = ``Process Group Name``
     (``Process Group ID`` in early-2024 builds), ``peer_rank`` = ``Dst Rank``/``Src Rank`` or
     the ``Rank`` arg for send/recv and the root (``Rank``) for broadcast/reduce/gather/scatter,
     ``group_rank`` = ``Rank`` for the other ops.
  2. Else the process group's ``<backend>:<op>`` CPU ranges (``nccl:all_reduce``,
     ``gloo:send``; PyTorch ≤ 2.2 and gloo): one row each, ``count`` = product of the single
     ``Input Dims`` tensor (the range records the collective's input) and ``dtype`` from
     ``Input type`` when recorded (null otherwise); for reduce_scatter, whose input is the
     full buffer, the shard = input / group size when the group size is known, else null;
     the group size of an all_gather / reduce_scatter comes from the enclosing
     ``c10d::_allgather_base_`` / ``_reduce_scatter_base_`` op's (output, input) shapes (whole
     = n × shard; ``group_source`` ``inferred_shapes``, ``comm_id`` null: which sub-group is
     not recorded) when they differ from the default group's world size;
     ``peer_rank`` from the enclosing ``c10d::send``/``recv_``/``broadcast_`` op's third
     concrete input.
  3. Else the communication kernels (old traces without CPU ops, DeepEP, custom all-reduce):
     one row per kernel, op from its ``Collective name`` arg or its name (``other`` when the
     name does not say: NCCL ``SendRecv``/``Generic``), sizes only if the kernel's args say.
     A DeepEP notify kernel (``notify_dispatch``, ``notify_combine``, ``cached_notify*``) and
     the data kernel (``dispatch``/``combine``) after it on the same stream are one call
     (:func:`commscope.parsers._nccl_kernels.deepep_role`): one row, ``kernel_count`` 2.

  Message size (``msg_bytes``, one meaning per op whatever the source: NCCL's buffer
  arguments): all_reduce, broadcast, reduce, send/recv: the full buffer; all_gather: the
  per-rank send buffer (NCCL sendcount × element size, = ``In msg nelems``, = the range's
  input); reduce_scatter: the per-rank receive buffer, the shard (NCCL recvcount, = ``Out msg
  nelems``); all_to_all: the full per-rank send buffer (= ``In msg nelems``, = the range's
  input); gather: the per-rank send buffer (``In msg nelems``); scatter (parser 1.3.0): the
  per-rank receive buffer (``Out msg nelems``; ProcessGroupNCCL records ``In msg nelems`` = n x
  that), as NCCL's and the Flight Recorder's. ``count`` has the same meaning in elements. Sizes are never guessed: what the trace
  does not record stays null. An uneven all_to_all (``all_to_all_single`` with splits) also
  gets ``split_bytes``: the bytes sent to each member in group-rank order, from ``In split
  size`` (rows along dim 0 per member) x the row's bytes (``In msg nelems`` / Σ splits x
  element size), only when that is exact (:func:`split_bytes`); ``"[]"`` (even) leaves it null.
  The receive side likewise (parser 1.3.0, schema 1.9.0): ``recv_split_bytes`` from ``Out split
  size`` over ``Out msg nelems``.

  Timing (``timing_source``): a call's interval is that of the GPU kernel(s) it launched,
  first kernel start to last kernel end (``kernel``; ``kernel_count`` kernels; ``stream`` and
  ``cuda_dev`` the first kernel's). Its kernels are found (a) for source 1, by ``External id``
  when the kernel carries the collective args, which Kineto copies together with the CPU op's
  id since 2024 (older kernels' External id is their own correlation id, never an op's); (b)
  otherwise by the launch chain: the runtime launch event that runs on the call's thread
  (pid, tid) inside its CPU op or range (``start <= launch <= end``; the innermost such window)
  and the comm kernel of that launch's ``correlation``. Source 3 rows are kernels. A call
  linked to no kernel is ``cpu_range`` (ts/dur of its CPU op or range) only where no kernel can
  exist: gloo (a ``gloo:`` range, or a group whose pg_config backend is gloo only), or a call
  of unknown backend in a trace without GPU activity or in which no call's kernel is recorded
  at all. An NCCL call (an ``nccl:`` range, a group or trace whose backend is nccl) always
  ran a kernel, and its CPU range times only the enqueue, so without its kernel it is ``none``
  even in a trace recorded without GPU activity. A call is ``none``
  (``dur_ns`` null, ``ts_ns`` = its launch: a call without comm time or bandwidth) in a world
  of one rank (group size 1), for a zero-size call, and when its kernel is missing from a trace
  that has the others (launched outside the capture). ``launch_ts_ns`` is the CPU op's or
  range's start, the kernel's launch for source 3 (null without one).

  Groups (``group_source``): ``logged`` when the record gives ``Group size``; ``pg_config``
  when the named group's size comes from ``distributedInfo.pg_config``; ``inferred_default``
  when the call names no group, or the default group ("0", or the pg_config entry described
  ``default_pg``), in a trace whose ``distributedInfo.world_size`` is W: group_size = W and
  comm_id = the default group's name ("0" unless pg_config says otherwise), so that the SQL
  side keys it (``comm_id``, ``group_size``) like the same group named by newer traces, and
  ``group_rank`` = the rank when the record gives none (the world group's ranks are the global
  ranks), unless the trace's pg_config lists smaller groups the unnamed call could be on
  (then its group stays unknown); ``inferred_shapes`` for an old trace's all_gather / reduce_scatter whose enclosing
  c10d op's shapes give a group size other than the world's (source 2 above); null when
  unknown.

  ``iteration`` is the ``ProfilerStep#N`` containing the row's ``launch_ts_ns`` (HTA rule
  ``step.ts <= launch < step.end``), never the GPU start; null without a launch or a step.
* ``trace_meta``: one row per file (rank, world size, rank_source, backend, clock anchor,
  host, pid, ``source_version`` = ``<schemaVersion>;<generation>`` with generation
  ``array_2021`` | ``epoch_us`` | ``base_relative``).
* ``communicators``: one row per ``distributedInfo.pg_config`` process group containing the rank.
* ``rejects``: malformed events (GPU activity or markers without numeric ts/dur, non-object
  items), events whose ts/dur cannot be stored (beyond :data:`TIME_NS_MAX`, negative
  durations), events larger than :data:`commscope.parsers._kineto_events.MAX_EVENT_BYTES` (skipped
  unread) and the unreadable tail of a truncated file.

Bad values (issue 23): one value costs that value or its event, never the rest of the trace.
A number JSON readers refuse (``NaN``, ``Infinity``, ``1e400``, integers beyond int64) is
read as null in its event only (:func:`commscope.parsers._kineto_meta.lenient_loads`; a warning counts
such events, and a reject caused by it says so); integers that do not fit their column are
null (:func:`_int`, :func:`_int32`); a rank outside 0..int32 or a ``baseTimeNanoseconds``
outside 0..:data:`TIME_NS_MAX` is ignored with a warning. Header keys are read one by one: an
oversized or undecodable one is skipped with a warning.

Time: Kineto ``ts``/``dur`` are µs (floats with ns fractions). ``ts_ns`` = ``baseTimeNanoseconds``
+ round(ts × 1000) when the trace has a base (2024+: ``ts`` is relative to it), else
round(ts × 1000) (older traces: ``ts`` is already epoch µs). Either way ``ts_ns`` is epoch ns when
the trace allows it, and ``trace_meta.clock_anchor_ns`` (epoch ns of ``ts_ns = 0``) is then 0
with ``aligned = true``; a trace whose ``ts`` is not epoch-like (< 1e15 µs, no base) gets a null
anchor, ``aligned = false`` and a warning. Floats are converted by splitting whole µs from the
fraction (vectorised), so base-relative ``ts`` keep ns precision; an epoch-µs float (~1.7e15)
only carries float64's ~0.25 µs resolution, which no reader can recover. CPU and GPU events
share that clock (Kineto converts the GPU timestamps), so ``launch_ts_ns`` and ``ts_ns`` of a
kernel-timed call compare directly: their difference is the GPU's queueing lag.

Truncated or malformed JSON (a killed job): every complete event before the cut is kept (gzip
is read to its last decompressible byte, see :class:`commscope.parsers._kineto_meta.TolerantGzip`), the
unreadable tail counts as one rejected record with a warning; :class:`ParseError` only when
nothing at all is parseable, or the input is not JSON.

Rank: ``distributedInfo.rank``; else the ``rank`` argument (``--rank``); else the file name
(``rank-3``, ``rank_3``, ``rank3``, ``worker3``, or the parent folder's name); else null with a
warning: never a silent 0. Disagreements are warned about.

Accounting (events = items of ``traceEvents``, or of the bare array): ``total`` = events (+1
for the unreadable tail of a truncated file); ``parsed`` = events that produced a row in
``kernels``, ``markers`` or ``comm_ops``; ``rejected`` = malformed events (+ the tail);
``ignored`` = everything else (CPU ops, runtime calls, flows, metadata, ``wait`` and unused
``record_param_comms``). A ProfilerStep read after GPU rows were already written (no Kineto
writer does that: CPU events come first) may miss those rows' ``iteration``; a warning says so.
"""

from __future__ import annotations

import bisect
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import ijson
import msgspec
import polars as pl

from commscope.parsers._io import Source
from commscope.parsers._kineto_events import (
    MAX_EVENT_BYTES,
    NO_ARGS,
    Args,
    Ev,
    EventReader,
    Oversized,
)
from commscope.parsers._kineto_meta import (
    _READ_ERRORS,
    BACKEND_PREFIXES,
    CANONICAL_OPS,
    P2P_OPS,
    ROOTED_OPS,
    STEP_RE,
    Header,
    TolerantGzip,
    needs_trailer,
    norm_dtype,
    norm_op,
    open_stream,
    parse_ranks,
    rank_from_path,
    read_header,
    read_trailer,
)
from commscope.parsers._nccl_kernels import classify_kernel, deepep_role, strip_params
from commscope.parsers.registry import LineCounts, ParsedChunk, ParseError, register

log = logging.getLogger(__name__)

FLUSH_EVENTS = 50_000
"""Events per yielded chunk (bounds the row buffers). Measured on a 43 MB trace (105 k events):
peak RSS of its ingest 236 MB at 200 k, 206 MB at 50 k, 198 MB at 20 k; time unchanged."""

MAX_RAW = 4096
"""Characters of a rejected event kept in ``rejects.raw``."""

EPOCH_US_MIN = 1e15
"""ts values above this (µs; Sept 2001) are taken as Unix-epoch microseconds."""

TIME_NS_MAX = 2**62
"""Largest ``|ts_ns|``, ``|dur_ns|`` and ``baseTimeNanoseconds`` kept (year 2116): half of
int64, so that a start plus a duration (or an interval spanning two kept times) cannot
overflow. A ``ts``/``dur`` beyond it (1e300, -1e18 µs) is out of range: that event is
rejected with the reason, never wrapped or failing the file."""

MAX_NAME_CHARS = 65_536
"""Longest kernel or marker name stored; a longer one makes its event a reject (names are kept
in row buffers and caches: one bound per string keeps their memory bounded)."""

MAX_ARG_CHARS = 1024
"""Longest collective name, process-group name or dtype read from args; longer is null."""

RANK_MAX = 2**31 - 1
"""Largest rank (``comm_ops.rank`` is int32); a larger or negative one is unknown (null)."""

_I32_MAX = 2**31 - 1

# Event kinds by ``cat`` (2021 traces capitalise them); GPU activity first (``<= _K_MEMSET``).
_K_KERNEL, _K_MEMCPY, _K_MEMSET, _K_CPU_ANN, _K_GPU_ANN, _K_CPU_OP, _K_RUNTIME = range(7)
_CAT_KIND: dict[str, int] = {
    "kernel": _K_KERNEL,
    "Kernel": _K_KERNEL,
    "gpu_memcpy": _K_MEMCPY,
    "Memcpy": _K_MEMCPY,
    "gpu_memset": _K_MEMSET,
    "Memset": _K_MEMSET,
    "user_annotation": _K_CPU_ANN,
    "gpu_user_annotation": _K_GPU_ANN,
    "cpu_op": _K_CPU_OP,
    "Operator": _K_CPU_OP,
    "operator": _K_CPU_OP,
    "cuda_runtime": _K_RUNTIME,
    "cuda_driver": _K_RUNTIME,
    "Runtime": _K_RUNTIME,
    "runtime": _K_RUNTIME,
    "hip_runtime": _K_RUNTIME,
}

_LAUNCH_WORDS = ("LaunchKernel", "LaunchCooperativeKernel", "GraphLaunch", "Memcpy", "Memset")
"""A runtime/driver call whose name holds one of these starts GPU work (``cudaLaunchKernel``,
``cudaLaunchKernelExC``, ``cuLaunchKernel(Ex)``, ``hipLaunchKernel``, ``hipExtLaunchKernel``,
``hipExtModuleLaunchKernel``, ``hipModuleLaunchKernel``, ``cudaGraphLaunch``,
``cudaMemcpyAsync``, ``hipMemsetAsync``, ...): its ``correlation`` is the GPU activity's."""


@lru_cache(maxsize=4096)
def _launch_kind(name: str) -> int:
    """0: runtime call ``name`` launches no GPU work; 1: it does (:data:`_LAUNCH_WORDS`);
    2: a graph launch (all the graph's kernels share its correlation id)."""
    if not any(w in name for w in _LAUNCH_WORDS):
        return 0
    return 2 if "Graph" in name else 1


_KERNEL_SCHEMA: dict[str, pl.DataType] = {
    "source_line": pl.Int64(),
    "device": pl.Int32(),
    "stream": pl.Int64(),
    "name": pl.Utf8(),
    "category": pl.Utf8(),
    "comm_op": pl.Utf8(),
    "ts_us": pl.Float64(),
    "dur_us": pl.Float64(),
    "correlation": pl.Int64(),
    "msg_bytes": pl.Int64(),
}
_MARKER_SCHEMA: dict[str, pl.DataType] = {
    "source_line": pl.Int64(),
    "name": pl.Utf8(),
    "kind": pl.Utf8(),
    "domain": pl.Utf8(),
    "iteration": pl.Int32(),
    "ts_us": pl.Float64(),
    "dur_us": pl.Float64(),
}
_COMM_SCHEMA: dict[str, pl.DataType] = {
    "source_line": pl.Int64(),
    "pid": pl.Int64(),
    "op": pl.Utf8(),
    "raw_op": pl.Utf8(),
    "comm_id": pl.Utf8(),
    "group_size": pl.Int32(),
    "group_rank": pl.Int32(),
    "peer_rank": pl.Int32(),
    "count": pl.Int64(),
    "dtype": pl.Utf8(),
    "msg_bytes": pl.Int64(),
    "seq": pl.Int64(),
    "ts_us": pl.Float64(),
    "dur_us": pl.Float64(),
    "launch_us": pl.Float64(),
    "stream": pl.Utf8(),
    "cuda_dev": pl.Int32(),
    "timing_source": pl.Utf8(),
    "kernel_count": pl.Int32(),
    "group_source": pl.Utf8(),
    "split_bytes": pl.Utf8(),
    "recv_split_bytes": pl.Utf8(),
}


def _num(v: Any) -> float | int | None:
    """v if it is a JSON number (not bool), else None."""
    t = type(v)
    return v if t is float or t is int else None


def _int(v: Any) -> int | None:
    """An int64 from an int, an integral float, or a digit string; else None.

    Out of the int64 range is None too: every integer column is at most int64, and one
    corrupt value must cost that value, not the file.
    """
    t = type(v)
    if t is int:
        return v if -(2**63) <= v < 2**63 else None  # type: ignore[no-any-return]
    if t is float:
        return int(v) if v == v and abs(v) < 9.2e18 else None
    if t is str:
        s = v.strip()
        try:  # isdigit() also admits digits int() refuses, e.g. superscripts ("²")
            if len(s) > 24:
                return None  # beyond int64 (and int() of 4,300+ digits raises)
            if s.lstrip("-").isdigit():
                return _int(int(s))
            digits = "".join(ch for ch in s if ch.isdigit())
            return _int(int(digits)) if digits else None
        except ValueError:
            return None
    return None


def _text(v: Any) -> str | None:
    """``str(v)`` for a process-group name, None when absent or over :data:`MAX_ARG_CHARS`."""
    if v is None:
        return None
    text = v if type(v) is str else str(v)[: MAX_ARG_CHARS + 1]
    return text if len(text) <= MAX_ARG_CHARS else None


def _thread(v: Any) -> int | float | str | None:
    """A thread id as a dict key: an int, float or string as logged (Kineto writes ints, the
    2021 form strings such as ``"stream 7"``); anything else (a list, an object) is no thread.
    """
    return v if type(v) in (int, float, str) else None


def _int32(v: Any) -> int | None:
    """:func:`_int` within int32 (the column type of ranks, sizes, devices), else None."""
    i = _int(v)
    return i if i is not None and -_I32_MAX - 1 <= i <= _I32_MAX else None


@lru_cache(maxsize=65536)
def _kernel_info(raw_name: str) -> tuple[str, str, str | None]:
    """(short name, category, comm_op) of a kernel name; cached since names repeat."""
    cat, op = classify_kernel(raw_name)
    return strip_params(raw_name), cat, op


def _shape_numel(shape: Any) -> int | None:
    """Element count of one flat tensor shape (``[8192, 384]``), else None."""
    if not isinstance(shape, list) or not shape:
        return None
    n = 1
    for x in shape:
        if type(x) is not int or x < 0:
            return None
        n *= x
    return n


def _group_from_shapes(dims: Any) -> int | None:
    """Group size an all-gather / reduce-scatter op's ``Input Dims`` imply, else None.

    ``c10d::_allgather_base_(output, input)`` and ``c10d::_reduce_scatter_base_(output,
    input)`` record the gathered (whole) tensor and one rank's shard: the whole is n times the
    shard, so n = larger numel / smaller numel when that divides exactly.
    """
    if not isinstance(dims, list) or len(dims) < 2:
        return None
    a, b = _shape_numel(dims[0]), _shape_numel(dims[1])
    if not a or not b:
        return None
    big, small = max(a, b), min(a, b)
    return big // small if big % small == 0 else None


def _dims_count(dims: Any) -> int | None:
    """Element count of the single tensor in ``Input Dims`` (``[[2, 32, 64]]``), else None.

    ``[[]]`` is one 0-dim tensor (1 element); several tensors or non-integer dims give None.
    """
    if not isinstance(dims, list):
        return None
    if len(dims) == 1 and dims[0] == []:
        return 1  # a 0-dim (scalar) tensor
    shapes = [d for d in dims if isinstance(d, list) and d]
    if len(shapes) != 1:
        return None
    shape = shapes[0]
    if len(shape) == 1 and isinstance(shape[0], list):  # TensorList of one tensor
        shape = shape[0]
    n = 1
    for x in shape:
        if type(x) is not int:
            return None
        n *= x
    return n


def _ts_ns(col: pl.Expr, base_ns: int) -> pl.Expr:
    """µs floats → int ns, exact for epoch µs (split whole µs from the fraction)."""
    whole = col.floor()
    ns = whole.cast(pl.Int64) * 1000 + ((col - whole) * 1000).round().cast(pl.Int64)
    return ns + base_ns if base_ns else ns


def _dur_ns(col: pl.Expr) -> pl.Expr:
    """µs floats → int ns; beyond int64 (a comm_ops interval spanning kernels at both ends of
    the time range) → null, never a failed file. Kept event times cannot get there."""
    return (col * 1000).round().cast(pl.Int64, strict=False)


def _range_reason(what: str, ts: float, dur: float) -> str:
    """The reject reason of an event whose ts/dur cannot be stored as int64 ns."""
    if dur < 0:
        return f"{what} with a negative duration (dur {dur!r})"
    return f"{what} with ts/dur out of range (ts {ts!r}, dur {dur!r} µs; limit ±{TIME_NS_MAX} ns)"


MAX_SPLITS = 65_536
"""Longest ``In split size`` list read (a group of more members is not a real split)."""


def split_bytes(raw: Any, count: int | None, msg: int | None, group_size: Any) -> str | None:
    """Per-peer bytes of an uneven all_to_all, comma-separated in group-rank order, or None.

    ``In split size`` (c10d ``inputSplitSizes``, a string ``"[118, 394]"`` or a list) counts
    rows along dim 0 of the send tensor, one entry per member; a row holds ``In msg nelems /
    Σ splits`` elements, so member ``j`` gets ``split[j] x row x element size`` bytes and
    the list sums to ``msg_bytes``. None for an even all_to_all (``"[]"``), or when the
    numbers do not fit (no element size, a row that is not whole, a length other than the
    ``Group size``).
    """
    if isinstance(raw, str):
        text = raw.strip()
        if len(text) > 16 * MAX_SPLITS or not (text.startswith("[") and text.endswith("]")):
            return None
        inner = text[1:-1].strip()
        if not inner:
            return None
        try:
            values = [int(v) for v in inner.split(",")]
        except ValueError:
            return None
    elif isinstance(raw, list) and raw and len(raw) <= MAX_SPLITS:
        if not all(type(v) is int for v in raw):
            return None
        values = raw
    else:
        return None
    total = sum(values)
    if not count or msg is None or total <= 0 or min(values) < 0:
        return None
    if count % total or msg % count:
        return None
    if type(group_size) is int and group_size != len(values):
        return None
    row_bytes = count // total * (msg // count)
    return ",".join(str(v * row_bytes) for v in values)


_CommRow = tuple[Any, ...]
"""A ``comm_ops`` row: its values in :data:`_COMM_SCHEMA` order."""


def _comm_frame(rows: list[_CommRow]) -> pl.DataFrame:
    """The ``comm_ops`` frame of ``rows``, built from columns (cheaper than from rows).

    An integer out of its column's range (a corrupt arg such as a ``Group size`` of 2**40)
    becomes null, like every other value the trace does not give in a usable form: one
    corrupt event must not fail the whole file.
    """
    columns = dict(zip(_COMM_SCHEMA, map(list, zip(*rows, strict=True)), strict=True))
    try:
        return pl.DataFrame(columns, schema=_COMM_SCHEMA, strict=True)
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        return pl.DataFrame(
            [
                _column(name, values, dtype)
                for (name, values), dtype in zip(
                    columns.items(), _COMM_SCHEMA.values(), strict=True
                )
            ]
        )


_INT_RANGE = {pl.Int32(): (-(2**31), 2**31 - 1), pl.Int64(): (-(2**63), 2**63 - 1)}


def _column(name: str, values: list[Any], dtype: pl.DataType) -> pl.Series:
    """One ``comm_ops`` column; integers out of the column's range become null."""
    try:
        return pl.Series(name, values, dtype=dtype, strict=True)
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        lo, hi = _INT_RANGE.get(dtype, (None, None))
        if lo is None:
            return pl.Series(name, values, dtype=dtype, strict=False)
        kept = [v if type(v) is int and lo <= v <= hi else None for v in values]
        return pl.Series(name, kept, dtype=dtype, strict=True)


_NO_SIZES: tuple[None, ...] = (None,) * 6
"""The collective-arg fields of a comm-kernel record (see below) that has none."""

# A comm kernel kept for ``comm_ops``: (source_line, ts, dur, device, stream, short name,
# Collective name (str or None), External id, Seq, count, dtype, msg_bytes, process group,
# Group size, Dst/Src Rank, correlation). Raw arg values: they are converted at the end, as
# in the rows.
_CommKernel = tuple[
    int,
    float,
    float,
    int | None,
    int | None,
    str,
    Any,
    Any,
    Any,
    Any,
    Any,
    Any,
    Any,
    Any,
    Any,
    int | None,
]
# A record_param_comms op with a collective name (not wait): (source_line, pid, ts, dur,
# Collective name, op, count, dtype, msg_bytes, Rank, Dst/Src Rank (p2p), process group,
# Group size, Seq, External id, tid).
_RpcOp = tuple[
    int, Any, float, float, str, str, Any, Any, Any, Any, Any, Any, Any, Any, Any, Any, Any, Any
]

_Launch = tuple[float, int | None, Any]
"""A runtime launch event: (ts µs, pid, tid)."""


@dataclass
class _State:
    """Per-file parse state (everything but the flushed rows).

    Line counts are not kept per event (the hot path): every event makes a ``kernels`` or
    ``markers`` row (parsed), a ``rejects`` row (rejected), is a ``record_param_comms`` op
    settled at the end of the file, or is ignored; :meth:`KinetoParser._flush` derives a
    chunk's counts from its row buffers and the event numbers.

    ``raw``/``raw_base`` give a rejected event as ijson reads it (the current batch of
    :class:`commscope.parsers._kineto_events.EventReader`).

    The communication candidates are kept to the end of the file as tuples of the few arg
    values they need, not as the events' ``args``: less memory and less work for the
    garbage collector, which walks every container that stays alive.
    """

    rank: int | None
    base_ns: int
    kernels: dict[str, list[Any]] = field(default_factory=dict)
    markers: dict[str, list[Any]] = field(default_factory=dict)
    rejects: list[tuple[int, str, str]] = field(default_factory=list)
    flushed_events: int = 0  # events accounted for in the chunks already yielded
    rpc_seen: int = 0  # record_param_comms ops with numeric ts/dur (counted at the end)
    rpc_flushed: int = 0  # rpc_seen when the last chunk was yielded
    rpc_named: int = 0  # ... of which carry a Collective name (wait included)
    rpc_ops: list[_RpcOp] = field(default_factory=list)
    ranges: list[tuple[int, int | None, Any, float, float, str, Args]] = field(default_factory=list)
    # Launch matching (see _launch): launch events read before their GPU activity, by
    # correlation; graph launches (several kernels each) stay; buffered GPU rows waiting for
    # their launch (correlation -> row index, or a list of them); each buffered row's launch.
    launches: dict[int, _Launch] = field(default_factory=dict)
    graph_launches: dict[int, _Launch] = field(default_factory=dict)
    waiting: dict[int, Any] = field(default_factory=dict)
    k_launch: list[float | None] = field(default_factory=list)
    comm_launch: dict[int, _Launch] = field(default_factory=dict)  # comm kernels' launches
    carried: int = 0  # kernel rows at the head of the buffer carried from the last chunk
    gpu_rows: int = 0  # GPU activities (kernels, memcpy, memset) read
    kernel_chunks: int = 0  # flushes that held GPU rows
    launch_seen: bool = False  # a launch event has been read
    linked_kernels: int = 0  # comm kernels linked to a comm_ops row (sources 1 and 2)
    steps_at_first_kernels: int | None = None  # len(steps) when kernels were first flushed
    comm_kernels: list[_CommKernel] = field(default_factory=list)
    c10d_ops: list[tuple[Any, float, float, str, Any]] = field(default_factory=list)
    steps: list[tuple[float, float, int]] = field(default_factory=list)
    cpu_pid: int | None = None
    min_ts: float | None = None
    raw: Callable[[int], Any] = field(default=lambda i: None)  # item i of the current batch
    raw_base: int = 0  # events before the current batch
    nulled: dict[int, int] = field(default_factory=dict)  # batch item → numbers read as null
    ts_max: float = TIME_NS_MAX / 1000  # largest |ts| (µs) whose ts_ns fits (base included)

    def __post_init__(self) -> None:
        self.kernels = {k: [] for k in _KERNEL_SCHEMA}
        self.markers = {k: [] for k in _MARKER_SCHEMA}


def _with_step(
    frame: pl.DataFrame, col: str, steps: list[tuple[float, float, int]]
) -> pl.DataFrame:
    """``frame`` with ``iteration``: the ProfilerStep whose CPU [ts, end) contains ``col``.

    HTA's rule (``step.ts <= launch.ts < step.end``) on the launch time, so that GPU work
    running behind the CPU stays in the step that issued it; null outside every step or when
    ``col`` is null.
    """
    if not steps:
        return frame.with_columns(pl.lit(None, dtype=pl.Int32).alias("iteration"))
    st_df = pl.DataFrame(
        steps,
        schema={"__step_ts": pl.Float64, "__step_end": pl.Float64, "__step": pl.Int32},
        orient="row",
    ).sort("__step_ts")
    return (
        frame.with_row_index("__order")
        .sort(col, nulls_last=True)
        .join_asof(st_df, left_on=col, right_on="__step_ts", strategy="backward")
        .with_columns(
            pl.when(pl.col(col) < pl.col("__step_end"))
            .then(pl.col("__step"))
            .otherwise(None)
            .alias("iteration")
        )
        .sort("__order")
        .drop("__order", "__step_ts", "__step_end", "__step")
    )


DEFAULT_PG_NAMES = frozenset({"0", "default_pg"})
"""Names PyTorch gives its default (world) process group: ``pg_name`` "0" (the first group
created), ``pg_desc`` "default_pg"."""


@dataclass
class _Ctx:
    """What the header says about groups and the run, for the ``comm_ops`` rows."""

    world: int | None  # distributedInfo.world_size
    backend: str | None  # distributedInfo.backend
    pg_sizes: dict[str, int]  # pg_config: pg_name -> pg_size
    pg_backends: dict[str, str]  # pg_config: pg_name -> backend_config
    default_names: frozenset[str]  # names of the default group
    default_name: str  # comm_id given to calls on the default group that name none
    any_gpu: bool  # the trace has GPU activity
    sub_groups: bool = False  # pg_config lists a non-default group smaller than the world

    @classmethod
    def of(cls, keys: dict[str, Any], st: _State) -> _Ctx:
        dist = keys.get("distributedInfo")
        dist = dist if isinstance(dist, dict) else {}
        world = _int32(dist.get("world_size"))
        if world is not None and world < 1:
            world = None
        backend = dist.get("backend") if isinstance(dist.get("backend"), str) else None
        sizes: dict[str, int] = {}
        backends: dict[str, str] = {}
        names = set(DEFAULT_PG_NAMES)
        default = "0"
        cfg = dist.get("pg_config")
        for pg in cfg if isinstance(cfg, list) else []:
            if not isinstance(pg, dict) or pg.get("pg_name") is None:
                continue
            name = _text(pg["pg_name"])
            if name is None:
                continue
            ranks = parse_ranks(pg.get("ranks"))
            size = _int32(pg.get("pg_size")) or (len(ranks) if ranks else None)
            if size is not None and size > 0:
                sizes[name] = size
            if isinstance(pg.get("backend_config"), str):
                backends[name] = pg["backend_config"]
            if pg.get("pg_desc") == "default_pg":
                names.add(name)
                default = name
        return cls(
            world=world,
            backend=backend,
            pg_sizes=sizes,
            pg_backends=backends,
            default_names=frozenset(names),
            default_name=default,
            any_gpu=st.gpu_rows > 0,
            sub_groups=world is not None
            and any(size < world for name, size in sizes.items() if name not in names),
        )

    def group(self, pg: Any, size_arg: Any) -> tuple[str | None, int | None, str | None]:
        """(comm_id, group_size, group_source) of a call naming group ``pg`` and size arg.

        logged: the record gives the size; pg_config: the named group's ``pg_size``;
        inferred_default: no group named (or the default's name) in a trace of world size W,
        so the W-rank world group, whose comm_id is the default group's name ("0" unless
        pg_config names it otherwise), the key the SQL side joins process groups on. A call
        that names no group in a trace whose pg_config lists smaller groups is not assumed to
        be on the default group (it may be on any of them): its group stays unknown.
        """
        comm_id = _text(pg)
        size = _int32(size_arg)
        if size is not None and size > 0:
            return comm_id, size, "logged"
        if comm_id is not None and comm_id in self.pg_sizes:
            return comm_id, self.pg_sizes[comm_id], "pg_config"
        if comm_id is None and self.sub_groups:
            return None, None, None
        if (comm_id is None or comm_id in self.default_names) and self.world is not None:
            return (
                (comm_id if comm_id is not None else self.default_name),
                self.world,
                ("inferred_default"),
            )
        return comm_id, None, None

    def backend_of(self, comm_id: str | None, range_name: str = "") -> str | None:
        """'gloo', 'nccl' or None (unknown): the call's ``gloo:``/``nccl:`` range prefix, else
        its group's pg_config backend (gloo only when no NCCL backend is listed), else the
        trace's ``distributedInfo.backend``."""
        if range_name.startswith("gloo:"):
            return "gloo"
        if range_name.startswith("nccl:"):
            return "nccl"
        config = self.pg_backends.get(comm_id) if comm_id is not None else None
        if config is not None:
            return "nccl" if "nccl" in config else "gloo" if "gloo" in config else None
        return self.backend if self.backend in ("gloo", "nccl") else None

    def untimed(
        self,
        backend: str | None,
        size: int | None,
        count: int | None,
        msg: int | None,
        any_linked: bool,
    ) -> str:
        """timing_source of a call linked to no kernel: cpu_range or none (module doc)."""
        if backend == "gloo":
            return "cpu_range"  # gloo runs on the CPU: its range is the transfer
        if size == 1 or (size is None and self.world == 1) or msg == 0 or count == 0:
            return "none"  # a world of one rank, or nothing to send: no transfer at all
        if backend == "nccl":
            # NCCL always moves data in a GPU kernel; its CPU range times only the enqueue,
            # so a trace recorded without GPU activity has no duration for the call.
            return "none"
        if not self.any_gpu or not any_linked:
            return "cpu_range"  # backend unknown: no GPU activity, or no kernel recorded at all
        return "none"  # its kernel is not in the trace (launched outside the capture)


@register
class KinetoParser:
    """PyTorch profiler / Kineto Chrome-trace JSON (``.json``, ``.json.gz``, bare arrays)."""

    name: ClassVar[str] = "kineto"
    version: ClassVar[str] = "1.3.0"

    def sniff(self, head: bytes, path: Path) -> int:
        """Recognise a Kineto trace by its top-level keys or its event shape."""
        text = head.lstrip(b" \t\r\n\xef\xbb\xbf")
        if text[:1] not in (b"{", b"["):
            return 0
        if text[:1] == b"{":
            if b'"traceEvents"' in head or b'"schemaVersion"' in head:
                strong = (b'"deviceProperties"', b'"distributedInfo"', b'"schemaVersion"')
                return 95 if any(k in head for k in strong) else 70
            return 0
        if b'"ph"' in head and any(
            c in head for c in (b'"Operator"', b'"Kernel"', b'"cpu_op"', b'"Runtime"', b'"kernel"')
        ):
            return 80
        return 0

    def parse(
        self, source: Source, *, run_id: str, rank: int | None = None
    ) -> Iterator[ParsedChunk]:
        """Stream ``source`` and yield chunks of kernels/markers, then comm ops and metadata."""
        del run_id  # filled by ingest
        if source.start_offset:
            raise ParseError(source.path, "incremental offsets are not supported for JSON traces")
        header = read_header(source)
        if needs_trailer(header):
            read_trailer(source, header)
        keys = header.keys
        warnings: list[str] = []
        warnings.extend(header.notes)
        rank_value, rank_source = self._resolve_rank(source.path, keys, rank, warnings)
        base = _int(keys.get("baseTimeNanoseconds")) or 0
        if not 0 <= base <= TIME_NS_MAX:
            warnings.append(
                f"baseTimeNanoseconds {keys.get('baseTimeNanoseconds')!r} is out of range "
                f"(0 to {TIME_NS_MAX}); ignored, so ts is taken as it is"
            )
            base = 0
        st = _State(rank=rank_value, base_ns=base)
        st.ts_max = (TIME_NS_MAX - base) / 1000
        if header.form == "object" and not header.has_events:
            if not keys:
                raise ParseError(source.path, "no traceEvents and no readable top-level keys")
            warnings.append("trace has no traceEvents array (cut short, or not a trace)")
        truncated: str | None = None
        n = 0
        gz: TolerantGzip | None = None
        reader: EventReader | None = None
        if header.has_events:
            try:
                fh, gz = open_stream(source)
                with fh:
                    event = self._event
                    every = FLUSH_EVENTS  # read per parse: tests lower it
                    reader = EventReader(
                        fh, header.form, header.events_offset, trailer_ok=header.trailer_read
                    )
                    st.nulled = reader.nulled
                    for items, raw in reader:
                        st.raw, st.raw_base = raw, n
                        for ev in items:
                            n += 1
                            event(st, n, ev)
                            if n % every == 0:
                                yield self._flush(st, n, [])
            except (ijson.JSONError, *_READ_ERRORS) as exc:
                truncated = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        if reader is not None and reader.nulled_items:
            warnings.append(
                f"{reader.nulled_items} event(s) hold a number out of range (NaN, Infinity, "
                "beyond int64 or float64), read as null in that event only"
            )
        if reader is not None and reader.trailer_error is not None:
            warnings.append(
                f"keys after traceEvents hold a value out of range ({reader.trailer_error}); "
                "read leniently"
            )
        if gz is not None and gz.truncated:
            note = "gzip stream ends without its end marker (file cut short)"
            if truncated is None:
                warnings.append(f"{note}; the JSON inside is complete")
            else:
                truncated = f"{note}; {truncated}"
        if truncated is not None:
            if n == 0 and not keys:
                raise ParseError(source.path, f"no parseable JSON: {truncated}")
            warnings.append(
                f"trace is truncated or malformed after event {n}: {truncated}; "
                f"kept the {n} complete events before it"
            )
            n += 1  # the unreadable tail counts as one more (rejected) event
            st.rejects.append((n, "", f"unreadable tail: {truncated}"[:MAX_RAW]))
        yield self._finish(st, n, header, rank_source, warnings)

    # ----------------------------------------------------------------------------------------
    # Rank

    @staticmethod
    def _resolve_rank(
        path: Path, keys: dict[str, Any], option: int | None, warnings: list[str]
    ) -> tuple[int | None, str]:
        dist = keys.get("distributedInfo")
        dist_rank = _int(dist.get("rank")) if isinstance(dist, dict) else None
        if dist_rank is not None and not 0 <= dist_rank <= RANK_MAX:
            warnings.append(
                f"distributedInfo.rank {dist_rank} is out of range (0 to {RANK_MAX}); ignored"
            )
            dist_rank = None
        name_rank = rank_from_path(path)
        if name_rank is not None and name_rank > RANK_MAX:
            name_rank = None
        if option is not None and not 0 <= option <= RANK_MAX:
            warnings.append(f"--rank {option} is out of range (0 to {RANK_MAX}); ignored")
            option = None
        if dist_rank is not None:
            if option is not None and option != dist_rank:
                warnings.append(
                    f"--rank {option} disagrees with distributedInfo.rank {dist_rank}; "
                    "using distributedInfo"
                )
            return dist_rank, "distributedInfo"
        why = "no distributedInfo" if not isinstance(dist, dict) else "distributedInfo has no rank"
        if option is not None:
            if name_rank is not None and name_rank != option:
                warnings.append(
                    f"{why}; --rank {option} disagrees with the file name's rank {name_rank}; "
                    "using --rank"
                )
            return option, "option"
        if name_rank is not None:
            warnings.append(f"{why}; rank {name_rank} taken from the file name")
            return name_rank, "file_name"
        warnings.append(f"{why} and no rank in the file name or --rank: rank unknown (null)")
        return None, "unknown"

    # ----------------------------------------------------------------------------------------
    # Per event (the hot path: keep it lean; counts are derived in _flush)

    def _reject(self, st: _State, idx: int, reason: str) -> None:
        """Reject event ``idx``; ``rejects.raw`` is its JSON as ijson reads it."""
        i = idx - st.raw_base - 1
        ev = st.raw(i)
        try:
            raw = json.dumps(ev, default=str)
        except (TypeError, ValueError, RecursionError):
            raw = repr(ev)
        nulled = st.nulled.get(i)
        if nulled:
            reason += (
                f" ({nulled} number(s) out of range: NaN, Infinity or beyond int64/float64, "
                "read as null)"
            )
        st.rejects.append((idx, raw[:MAX_RAW], reason))

    def _event(self, st: _State, idx: int, ev: Any) -> None:
        """Route one event (an :class:`Ev`, or a non-object item) by kind.

        One that makes no row and no reject is ignored.
        """
        if type(ev) is not Ev:
            if type(ev) is Oversized:
                self._reject(
                    st,
                    idx,
                    f"event of {ev.size} bytes exceeds the limit of {MAX_EVENT_BYTES} bytes; "
                    "skipped unread",
                )
                return
            self._reject(st, idx, "event is not a JSON object")
            return
        cat = ev.cat
        # A non-string cat (corrupt event) is no known category; lists are unhashable.
        kind = _CAT_KIND.get(cat) if type(cat) is str else None
        if kind is None or ev.ph != "X":
            return
        name = ev.name
        if kind <= _K_MEMSET:  # kernel, memcpy, memset
            self._gpu(st, idx, ev, kind, name)
        elif kind == _K_RUNTIME:
            args = ev.args
            if type(args) is not Args or type(name) is not str or len(name) > 1024:
                return
            corr = args.correlation
            ts = ev.ts
            if (
                type(corr) is int
                and (type(ts) is float or type(ts) is int)
                and -st.ts_max <= ts <= st.ts_max  # else its ts_ns would not fit
            ):
                launch = _launch_kind(name)
                if not launch:
                    return
                row = st.waiting.get(corr)
                if type(row) is int and launch == 1:  # the common case: one kernel waits
                    del st.waiting[corr]
                    st.k_launch[row] = ts
                    if st.kernels["category"][row] == "comm":
                        st.comm_launch[corr] = (ts, _int(ev.pid), _thread(ev.tid))
                    st.launch_seen = True
                else:
                    self._launch(st, corr, (ts, _int(ev.pid), _thread(ev.tid)), launch == 2)
        elif kind == _K_CPU_OP:
            if type(name) is not str:
                return
            if st.cpu_pid is None:
                st.cpu_pid = _int(ev.pid)
            if name == "record_param_comms":
                self._rpc(st, idx, ev)
            elif name[:6] == "c10d::":
                ts, dur = _num(ev.ts), _num(ev.dur)
                if ts is not None and dur is not None and self._in_range(st, ts, dur):
                    st.c10d_ops.append((_thread(ev.tid), ts, ts + dur, name, ev.args))
            elif name[:12] == "ProfilerStep" or name.startswith(BACKEND_PREFIXES):
                self._marker(st, idx, ev, name, gpu=False)
        elif type(name) is str:
            self._marker(st, idx, ev, name, gpu=kind == _K_GPU_ANN)
        else:
            self._reject(st, idx, "annotation without a name")

    def _gpu(self, st: _State, idx: int, ev: Ev, kind: int, name: Any) -> None:
        ts = ev.ts
        dur = ev.dur
        t_ts = type(ts)
        t_dur = type(dur)
        if (
            (t_ts is not float and t_ts is not int)
            or (t_dur is not float and t_dur is not int)
            or type(name) is not str
        ):
            self._reject(st, idx, "GPU activity without numeric ts/dur or name")
            return
        if len(name) > MAX_NAME_CHARS:
            self._reject(st, idx, f"name longer than {MAX_NAME_CHARS} characters")
            return
        if not (-st.ts_max <= ts <= st.ts_max and 0 <= dur <= TIME_NS_MAX / 1000):
            self._reject(st, idx, _range_reason("GPU activity", ts, dur))
            return
        args = ev.args
        if type(args) is not Args:
            args = NO_ARGS
        dev = args.device
        if type(dev) is not int:
            dev = _int(ev.pid)
        stream = args.stream
        if type(stream) is not int:
            stream = _int(ev.tid)
        corr = args.correlation
        if type(corr) is not int:
            corr = None
        launch = None
        if corr is not None:
            launch = st.launches.pop(corr, None)
            if launch is None and st.graph_launches:
                launch = st.graph_launches.get(corr)
            if launch is None:
                row = len(st.k_launch)
                have = st.waiting.get(corr)
                if have is None:
                    st.waiting[corr] = row
                elif type(have) is list:
                    have.append(row)
                else:
                    st.waiting[corr] = [have, row]
        st.k_launch.append(None if launch is None else launch[0])
        msg: int | None = None
        if kind == _K_KERNEL:
            # Long names skip the cache (it would hold up to 65,536 of them).
            short, cat, op = (
                _kernel_info(name) if len(name) <= 1024 else _kernel_info.__wrapped__(name)
            )
            if cat == "comm":
                op, msg = self._comm_kernel(st, idx, ts, dur, dev, stream, short, op, args, corr)
                if launch is not None and corr is not None:
                    st.comm_launch[corr] = launch
        else:
            short = name
            cat = "memcpy" if kind == _K_MEMCPY else "memset"
            op = None
            b = args.nbytes
            if type(b) is int:
                msg = b
        k = st.kernels
        k["source_line"].append(idx)
        k["device"].append(dev)
        k["stream"].append(stream)
        k["name"].append(short)
        k["category"].append(cat)
        k["comm_op"].append(op)
        k["ts_us"].append(ts)
        k["dur_us"].append(dur)
        k["correlation"].append(corr)
        k["msg_bytes"].append(msg)

    def _comm_kernel(
        self,
        st: _State,
        idx: int,
        ts: float,
        dur: float,
        dev: int | None,
        stream: int | None,
        short: str,
        name_op: str | None,
        args: Args,
        corr: int | None,
    ) -> tuple[str | None, int | None]:
        """Keep a comm kernel for ``comm_ops``; return its ``(comm_op, msg_bytes)``.

        The op is the ``Collective name`` arg's when Kineto copied one (``name_op``, from the
        kernel name, for ``wait``), the size is the collective args' (null without them).
        """
        coll = args.collective
        if type(coll) is not str or len(coll) > MAX_ARG_CHARS:
            st.comm_kernels.append(
                (idx, ts, dur, dev, stream, short, None, None, None, *_NO_SIZES, corr)
            )
            return name_op, None
        if not coll:
            st.comm_kernels.append(
                (
                    idx,
                    ts,
                    dur,
                    dev,
                    stream,
                    short,
                    coll,
                    args.external_id,
                    args.seq,
                    *_NO_SIZES,
                    corr,
                )
            )
            return name_op, None
        norm = norm_op(coll)
        op = norm or name_op
        count, dtype, msg = self._coll_bytes(args, op)
        pg = args.pg_name  # present but null stays null; only a missing one falls back
        if pg is msgspec.UNSET:
            pg = args.pg_id
        st.comm_kernels.append(
            (
                idx,
                ts,
                dur,
                dev,
                stream,
                short,
                coll,
                args.external_id,
                args.seq,
                count,
                dtype,
                msg,
                pg,
                args.group_size,
                args.dst_rank if norm == "send" else args.src_rank,
                corr,
            )
        )
        return op, msg

    @staticmethod
    def _launch(st: _State, corr: int, launch: _Launch, graph: bool) -> None:
        """Match a runtime launch event to the buffered GPU rows of its correlation id.

        Rows read before it (most Kineto traces write a kernel just before its launch) get
        its ts now; otherwise it waits in ``st.launches`` for its row (a graph launch in
        ``st.graph_launches``, since all its kernels share its correlation id).
        """
        st.launch_seen = True
        rows = st.waiting.pop(corr, None)
        if rows is not None:
            cats = st.kernels["category"]
            for row in rows if type(rows) is list else (rows,):
                st.k_launch[row] = launch[0]
                if cats[row] == "comm":
                    st.comm_launch[corr] = launch
            if not graph:
                return
        if graph:
            st.graph_launches[corr] = launch
        else:
            st.launches[corr] = launch

    def _marker(self, st: _State, idx: int, ev: Ev, name: str, *, gpu: bool) -> None:
        if len(name) > MAX_NAME_CHARS:
            self._reject(st, idx, f"name longer than {MAX_NAME_CHARS} characters")
            return
        ts, dur = _num(ev.ts), _num(ev.dur)
        if ts is None or dur is None:
            self._reject(st, idx, "annotation without numeric ts/dur")
            return
        if not self._in_range(st, ts, dur):
            self._reject(st, idx, _range_reason("annotation", ts, dur))
            return
        iteration: int | None = None
        kind = "annotation"
        if name[:12] == "ProfilerStep":
            m = STEP_RE.match(name)
            if m and len(m.group(1)) <= 9:  # int32 (and int() of 4,300+ digits raises)
                iteration = int(m.group(1))
                if not gpu:
                    kind = "iteration"
                    st.steps.append((ts, ts + dur, iteration))
        elif not gpu and name.startswith(BACKEND_PREFIXES):
            args = ev.args
            st.ranges.append(
                (
                    idx,
                    _int(ev.pid),
                    _thread(ev.tid),
                    ts,
                    dur,
                    name,
                    args if type(args) is Args else NO_ARGS,
                )
            )
        if not gpu and st.cpu_pid is None:
            st.cpu_pid = _int(ev.pid)
        mk = st.markers
        mk["source_line"].append(idx)
        mk["name"].append(name)
        mk["kind"].append(kind)
        mk["domain"].append("gpu" if gpu else "cpu")
        mk["iteration"].append(iteration)
        mk["ts_us"].append(ts)
        mk["dur_us"].append(dur)

    def _rpc(self, st: _State, idx: int, ev: Ev) -> None:
        """Keep what a ``record_param_comms`` op's ``comm_ops`` row needs (see _from_rpc)."""
        ts, dur = _num(ev.ts), _num(ev.dur)
        if ts is None or dur is None:
            self._reject(st, idx, "record_param_comms without numeric ts/dur")
            return
        if not self._in_range(st, ts, dur):
            self._reject(st, idx, _range_reason("record_param_comms", ts, dur))
            return
        st.rpc_seen += 1  # parsed or ignored: settled at the end of the file
        args = ev.args
        if type(args) is not Args:
            return
        coll = args.collective
        if type(coll) is not str or not coll or len(coll) > MAX_ARG_CHARS:
            return
        st.rpc_named += 1
        op = norm_op(coll)
        if op is None:  # wait
            return
        pg = args.pg_name
        if pg is None or pg is msgspec.UNSET:
            pg = args.pg_id
        count, dtype, msg = self._coll_bytes(args, op)
        st.rpc_ops.append(
            (
                idx,
                _int(ev.pid),
                ts,
                dur,
                coll,
                op,
                count,
                dtype,
                msg,
                args.rank,
                (args.dst_rank if op == "send" else args.src_rank) if op in P2P_OPS else None,
                pg,
                args.group_size,
                args.seq,
                args.external_id,
                _thread(ev.tid),
                *(self._splits(args, count, msg) if op == "all_to_all" else (None, None)),
            )
        )

    @staticmethod
    def _splits(args: Args, count: int | None, msg: int | None) -> tuple[str | None, str | None]:
        """(split_bytes, recv_split_bytes) of an all_to_all: ``In split size`` over the send
        buffer (``In msg nelems``), ``Out split size`` over the receive buffer (``Out msg
        nelems``), each exact or None (:func:`split_bytes`)."""
        send = split_bytes(args.in_split, count, msg, args.group_size)
        out = args.out_nelems if type(args.out_nelems) is int else None
        elem = msg // count if count and msg is not None and msg % count == 0 else None
        recv = split_bytes(
            args.out_split,
            out,
            None if out is None or elem is None else out * elem,
            args.group_size,
        )
        return send, recv

    @staticmethod
    def _in_range(st: _State, ts: float, dur: float) -> bool:
        """Whether ts/dur give an int64 ``ts_ns``/``dur_ns`` (see :data:`TIME_NS_MAX`)."""
        return -st.ts_max <= ts <= st.ts_max and 0 <= dur <= TIME_NS_MAX / 1000

    @staticmethod
    def _coll_bytes(args: Args, op: str | None) -> tuple[int | None, str | None, int | None]:
        """(count, dtype, msg_bytes) from collective args; count has NCCL per-op meaning."""
        count = args.out_nelems if op in ("reduce_scatter", "scatter") else args.in_nelems
        if type(count) is not int:
            count = None
        dtype, size = norm_dtype(args.dtype)
        msg = count * size if count is not None and size is not None else None
        return count, dtype, msg

    # ----------------------------------------------------------------------------------------
    # Frames

    def _flush(
        self, st: _State, n: int, warnings: list[str], *, final: bool = False
    ) -> ParsedChunk:
        """Turn the buffered rows and rejects of the events up to ``n`` into one chunk.

        The counts follow from the buffers (see :class:`_State`): the events since the last
        chunk, less the ``record_param_comms`` ops settled at the end, are ``total``; the
        ``kernels``/``markers`` rows are ``parsed``, the rejects ``rejected``, the rest
        ``ignored``. A kernel whose launch event has not been read yet is carried to the next
        chunk once (:meth:`_launches`); it counts as parsed in the chunk of its event.
        """
        tables: dict[str, pl.DataFrame] = {}
        k = st.kernels
        mk = st.markers
        parsed = len(k["source_line"]) - st.carried + len(mk["source_line"])
        for ts_col in (k["ts_us"], mk["ts_us"]):
            if ts_col:
                low = min(ts_col)
                if st.min_ts is None or low < st.min_ts:
                    st.min_ts = low
        if k["source_line"]:
            st.gpu_rows += len(k["source_line"]) - st.carried
            carry = self._carry(st, final=final)
            st.kernel_chunks += 1
            df = pl.DataFrame(k, schema=_KERNEL_SCHEMA, strict=False).with_columns(
                pl.Series("launch_us", st.k_launch, dtype=pl.Float64)
            )
            kept: dict[str, list[Any]] = {c: [] for c in _KERNEL_SCHEMA}
            if carry:
                kept = {c: [values[i] for i in carry] for c, values in k.items()}
                mask = [True] * df.height
                for i in carry:
                    mask[i] = False
                df = df.filter(pl.Series(mask, dtype=pl.Boolean))
            st.kernels, st.carried = kept, len(carry)
            st.k_launch = [None] * len(carry)
            if df.height:
                if not final and st.steps_at_first_kernels is None:
                    st.steps_at_first_kernels = len(st.steps)
                df = _with_step(df, "launch_us", st.steps)
                tables["kernels"] = df.select(
                    pl.lit(st.rank, dtype=pl.Int32).alias("rank"),
                    "device",
                    "stream",
                    "name",
                    "category",
                    "comm_op",
                    _ts_ns(pl.col("ts_us"), st.base_ns).alias("ts_ns"),
                    _dur_ns(pl.col("dur_us")).alias("dur_ns"),
                    "correlation",
                    "msg_bytes",
                    _ts_ns(pl.col("launch_us"), st.base_ns).alias("launch_ts_ns"),
                    "iteration",
                    "source_line",
                )
        if mk["source_line"]:
            df = pl.DataFrame(mk, schema=_MARKER_SCHEMA, strict=False)
            tables["markers"] = df.select(
                pl.lit(st.rank, dtype=pl.Int32).alias("rank"),
                "name",
                "kind",
                _ts_ns(pl.col("ts_us"), st.base_ns).alias("ts_ns"),
                _dur_ns(pl.col("dur_us")).alias("dur_ns"),
                "iteration",
                "domain",
                "source_line",
            )
            st.markers = {c: [] for c in _MARKER_SCHEMA}
        rejected = len(st.rejects)
        if st.rejects:
            tables["rejects"] = pl.DataFrame(
                st.rejects,
                schema={"line_no": pl.Int64, "raw": pl.Utf8, "reason": pl.Utf8},
                orient="row",
            )
            st.rejects = []
        total = n - st.flushed_events - (st.rpc_seen - st.rpc_flushed)
        st.flushed_events, st.rpc_flushed = n, st.rpc_seen
        counts = LineCounts(
            total=total, parsed=parsed, ignored=total - parsed - rejected, rejected=rejected
        )
        return ParsedChunk(tables=tables, counts=counts, warnings=list(warnings))

    @staticmethod
    def _carry(st: _State, *, final: bool) -> list[int]:
        """Buffered GPU rows to carry to the next chunk: those still waiting for a launch.

        Kineto writes a kernel next to its launch event (one CUPTI buffer holds both; a few
        thousand events apart at most in the shared traces, the kernel first in most), so a row
        whose launch is not read yet waits one more chunk (:data:`FLUSH_EVENTS` events) and is
        written then, with a null launch if it still has none. Carried rows move to the head
        of the buffer; ``st.waiting`` is renumbered to match. Rows are carried only once a
        launch event has been read (or from the first chunk of GPU rows).
        """
        head = st.carried  # rows already carried once are written now, launch or not
        carry: list[int] = []
        # A trace with no launch event by its second chunk of GPU rows has none (GPU-only or
        # trimmed traces): its rows are not carried, which would only copy them twice.
        if not final and (st.launch_seen or st.kernel_chunks == 0):
            for rows in st.waiting.values():
                for row in rows if type(rows) is list else (rows,):
                    if row >= head:
                        carry.append(row)
        if not carry:
            st.waiting.clear()
            return []
        carry.sort()
        new_pos = {row: i for i, row in enumerate(carry)}
        corr_rows = st.kernels["correlation"]
        waiting: dict[int, Any] = {}
        for row in carry:
            corr = corr_rows[row]
            have = waiting.get(corr)
            if have is None:
                waiting[corr] = new_pos[row]
            elif type(have) is list:
                have.append(new_pos[row])
            else:
                waiting[corr] = [have, new_pos[row]]
        st.waiting = waiting
        return carry

    def _finish(
        self, st: _State, n: int, header: Header, rank_source: str, warnings: list[str]
    ) -> ParsedChunk:
        keys = header.keys
        late = (
            len(st.steps) - st.steps_at_first_kernels
            if st.steps_at_first_kernels is not None
            else 0
        )
        chunk = self._flush(st, n, warnings, final=True)  # sets st.min_ts, comm_launch
        if late:
            chunk.warnings.append(
                f"{late} ProfilerStep marker(s) come after GPU activity already written: "
                "kernels.iteration of the kernels before them may miss those steps"
            )
        ctx = _Ctx.of(keys, st)
        comm, source_note, used_rpc = self._comm_ops(st, ctx, chunk.warnings)
        if source_note:
            chunk.warnings.append(source_note)
        if comm is not None and comm.height:
            comm = _with_step(comm, "launch_us", st.steps)
            host = keys.get("host_name") if isinstance(keys.get("host_name"), str) else None
            comm = comm.select(
                pl.lit(st.rank, dtype=pl.Int32).alias("rank"),
                pl.lit(host, dtype=pl.Utf8).alias("host"),
                "pid",
                "source_line",
                "op",
                "raw_op",
                "comm_id",
                "group_size",
                "group_rank",
                "peer_rank",
                "count",
                "dtype",
                "msg_bytes",
                "seq",
                _ts_ns(pl.col("ts_us"), st.base_ns).alias("ts_ns"),
                _dur_ns(pl.col("dur_us")).alias("dur_ns"),
                "iteration",
                "stream",
                "cuda_dev",
                "timing_source",
                _ts_ns(pl.col("launch_us"), st.base_ns).alias("launch_ts_ns"),
                "group_source",
                "kernel_count",
                "split_bytes",
                "recv_split_bytes",
            )
        # record_param_comms events were left out of the running counts; settle them now.
        chunk.counts.total += st.rpc_seen
        chunk.counts.parsed += used_rpc
        chunk.counts.ignored += st.rpc_seen - used_rpc
        meta, meta_warn = self._trace_meta(st, header, rank_source)
        chunk.warnings.extend(meta_warn)
        if comm is not None and comm.height:
            chunk.tables["comm_ops"] = comm
        chunk.tables["trace_meta"] = meta
        comms = self._communicators(st, keys)
        if comms is not None:
            chunk.tables["communicators"] = comms
        for w in chunk.warnings:
            log.debug("%s", w)
        return chunk

    # ----------------------------------------------------------------------------------------
    # comm_ops: the dedup rule, the kernel link, groups

    def _comm_ops(
        self, st: _State, ctx: _Ctx, warnings: list[str]
    ) -> tuple[pl.DataFrame | None, str | None, int]:
        """The ``comm_ops`` rows, a note on their source, and the record_param_comms used.

        Data-quality warnings go to ``warnings``: calls whose kernel is missing although
        others' are there, and comm kernels that no call launched (both usually at the edges
        of the capture window).
        """
        rows: list[_CommRow] = []
        note: str | None = None
        if st.rpc_named or st.ranges:
            if st.rpc_named:
                rows = self._from_rpc(st, ctx)
            else:
                rows = self._from_ranges(st, ctx)
                note = (
                    "comm_ops from the process group's <backend>:<op> ranges (no "
                    "record_param_comms with collective args): group and dtype may be unknown"
                )
            # row fields: 5 group_size, 8 count, 10 msg_bytes, 17 timing_source
            missing = sum(
                1 for r in rows if r[17] == "none" and r[5] != 1 and r[8] != 0 and r[10] != 0
            )
            if missing and ctx.world != 1:
                warnings.append(
                    f"{missing} call(s) have no kernel in the trace although other calls do "
                    "(launched at the edge of the capture?): timing_source none, no duration"
                )
            unlinked = len(st.comm_kernels) - st.linked_kernels
            if unlinked and st.linked_kernels:
                warnings.append(
                    f"{unlinked} communication kernel(s) match no call of the trace (launched "
                    "before the capture started, or by a CPU op the trace lacks): they are in "
                    "kernels only"
                )
        elif st.comm_kernels:
            rows = self._from_kernels(st, ctx)
            note = (
                "comm_ops from communication kernels (no record_param_comms and no "
                "<backend>:<op> ranges): sizes only where the kernel args say"
            )
        if st.rank is not None:  # in the world group, the group rank is the global rank
            rows = [
                (*r[:6], st.rank, *r[7:]) if r[19] == "inferred_default" and r[6] is None else r
                for r in rows
            ]
        used_rpc = len(rows) if st.rpc_named else 0
        if not rows:
            return None, note, used_rpc
        return _comm_frame(rows), note, used_rpc

    @staticmethod
    def _link(
        st: _State, windows: list[tuple[int | None, Any, float, float]], skip: set[int]
    ) -> dict[int, list[_CommKernel]]:
        """Comm kernels by the CPU window (index in ``windows``) that launched them.

        A window is a call's CPU op or range, ``(pid, tid, start, end)``. A kernel belongs to
        the innermost window of its launch event's thread that contains the launch's start
        (``start <= launch <= end``). Kernels whose position in ``st.comm_kernels`` is in
        ``skip`` (already linked by External id) and kernels without a launch event are left
        out.
        """
        by_thread: dict[tuple[int | None, Any], list[tuple[float, float, int]]] = {}
        for wi, (pid, tid, ts, end) in enumerate(windows):
            by_thread.setdefault((pid, tid), []).append((ts, end, wi))
        starts: dict[tuple[int | None, Any], list[float]] = {}
        for key, wins in by_thread.items():
            wins.sort()
            starts[key] = [w[0] for w in wins]
        out: dict[int, list[_CommKernel]] = {}
        for ki, kernel in enumerate(st.comm_kernels):
            corr = kernel[15]
            if ki in skip or corr is None:
                continue
            launch = st.comm_launch.get(corr)
            if launch is None:
                continue
            lts, lpid, ltid = launch
            wins = by_thread.get((lpid, ltid))
            if not wins:
                continue
            j = bisect.bisect_right(starts[(lpid, ltid)], lts) - 1
            # Windows of one thread nest or follow each other: the first one back that still
            # contains the launch is the innermost.
            while j >= 0 and wins[j][1] < lts:
                j -= 1
            if j >= 0:
                out.setdefault(wins[j][2], []).append(kernel)
        return out

    @staticmethod
    def _span(kernels: list[_CommKernel]) -> tuple[float, float, _CommKernel]:
        """(first start, last end - first start, first kernel) of linked kernels."""
        first = min(kernels, key=lambda k: k[1])
        end = max(k[1] + k[2] for k in kernels)
        return first[1], end - first[1], first

    def _from_rpc(self, st: _State, ctx: _Ctx) -> list[_CommRow]:
        # 1. Kernels that carry the collective args also carry the CPU op's External id
        #    (Kineto copies both since 2024): linked to the record_param_comms of that id.
        #    Older kernels' External id is their own correlation id, so it is not used.
        by_ext: dict[int, int] = {}
        for i, op in enumerate(st.rpc_ops):
            ext = op[14]
            if type(ext) is int:
                by_ext.setdefault(ext, i)
        linked: dict[int, list[_CommKernel]] = {}
        done: set[int] = set()
        for ki, kernel in enumerate(st.comm_kernels):
            ext = kernel[7]
            if kernel[6] and type(ext) is int and ext in by_ext:
                linked.setdefault(by_ext[ext], []).append(kernel)
                done.add(ki)
        # 2. The rest by the launch chain: the runtime launch inside the op, same thread.
        windows = [(_int(op[1]), op[15], op[2], op[2] + op[3]) for op in st.rpc_ops]
        for wi, kernels in self._link(st, windows, done).items():
            linked.setdefault(wi, []).extend(kernels)
        any_linked = bool(linked)
        st.linked_kernels = sum(len(v) for v in linked.values())
        rows: list[_CommRow] = []
        for i, (
            idx,
            pid,
            ts,
            dur,
            coll,
            op,
            count,
            dtype,
            msg,
            rank,
            p2p_peer,
            pg,
            group_size,
            seq_arg,
            _ext,
            _tid,
            split,
            recv_split,
        ) in enumerate(st.rpc_ops):
            rank_arg = _int(rank)
            peer = None
            group_rank = None
            if op in P2P_OPS:
                peer = _int(p2p_peer)
                if peer is None:
                    peer = rank_arg
            elif op in ROOTED_OPS:
                peer = rank_arg
            else:
                group_rank = rank_arg
            seq = _int(seq_arg)
            comm_id, size, group_source = ctx.group(pg, group_size)
            kernels = linked.get(i)
            stream, cuda_dev, n_kernels = None, None, None
            if kernels:  # the linked GPU kernels' interval, device and stream
                row_ts, row_dur, kernel = self._span(kernels)
                timing = "kernel"
                n_kernels = len(kernels)
                cuda_dev = kernel[3]
                stream = None if kernel[4] is None else str(kernel[4])
                if seq is None:
                    seq = _int(kernel[8])
            else:
                timing = ctx.untimed(ctx.backend_of(comm_id), size, count, msg, any_linked)
                row_ts, row_dur = ts, (dur if timing == "cpu_range" else None)
            rows.append(
                (
                    idx,
                    pid,
                    op,
                    coll,  # raw_op
                    comm_id,
                    size,
                    group_rank,
                    peer,
                    count,
                    dtype,
                    msg,
                    seq,
                    row_ts,
                    row_dur,
                    ts,  # launch_us
                    stream,
                    cuda_dev,
                    timing,
                    n_kernels,
                    group_source,
                    split,
                    recv_split,
                )
            )
        return rows

    @staticmethod
    def _enclosing_op(
        by_tid: dict[Any, list[tuple[float, float, str, Any]]],
        starts: dict[Any, list[float]],
        tid: Any,
        ts: float,
    ) -> tuple[str, Any] | None:
        """(name, args) of the latest c10d op on ``tid`` that starts before ``ts`` and has not
        ended (the range starts inside the op; async work may outlive it), else None."""
        ops = by_tid.get(tid)
        if not ops:
            return None
        j = bisect.bisect_right(starts[tid], ts) - 1
        while j >= 0:
            _o_ts, o_end, o_name, o_args = ops[j]
            if o_end >= ts:
                return o_name, o_args
            j -= 1
        return None

    def _from_ranges(self, st: _State, ctx: _Ctx) -> list[_CommRow]:
        # Enclosing c10d::* op per thread, for the peer/root rank of p2p and broadcast.
        by_tid: dict[Any, list[tuple[float, float, str, Any]]] = {}
        for tid, ts, end, name, args in st.c10d_ops:
            by_tid.setdefault(tid, []).append((ts, end, name, args))
        starts: dict[Any, list[float]] = {}
        for tid, ops in by_tid.items():
            ops.sort(key=lambda o: o[0])
            starts[tid] = [o[0] for o in ops]
        windows = [(pid, tid, ts, ts + dur) for _idx, pid, tid, ts, dur, _n, _a in st.ranges]
        linked = self._link(st, windows, set())
        any_linked = bool(linked)
        st.linked_kernels = sum(len(v) for v in linked.values())
        rows: list[_CommRow] = []
        for i, (idx, pid, tid, ts, dur, name, args) in enumerate(st.ranges):
            op = norm_op(name.split(":", 1)[1])
            if op is None:
                continue
            count = _dims_count(args.input_dims)
            comm_id, group_size, group_source = ctx.group(None, None)
            enclosing = self._enclosing_op(by_tid, starts, tid, ts)
            if op in ("all_gather", "reduce_scatter") and enclosing is not None:
                # The c10d op's (output, input) shapes give the group size: a sub-group's
                # all-gather must not take the world size of the default group.
                o_name, o_args = enclosing
                shapes_n = (
                    _group_from_shapes(o_args.input_dims)
                    if type(o_args) is Args and ("gather" in o_name or "scatter" in o_name)
                    else None
                )
                if shapes_n is not None and shapes_n != group_size:
                    comm_id, group_size, group_source = None, shapes_n, "inferred_shapes"
            if op == "reduce_scatter" and count is not None:
                # The range records the full input; NCCL's recvcount is the shard = input / n,
                # known once the group size is (group_source says whether it was inferred).
                whole = group_size is not None and group_size > 0 and count % group_size == 0
                count = count // group_size if whole and group_size else None
            types = args.input_type
            dtype, size = norm_dtype(types[0] if isinstance(types, list) and types else None)
            if count is None:
                dtype, size = None, None
            peer = None
            if (op in P2P_OPS or op == "broadcast") and enclosing is not None:
                o_args = enclosing[1]
                ci = o_args.concrete_inputs if type(o_args) is Args else None
                if isinstance(ci, list) and len(ci) > 2:
                    peer = _int(ci[2])
            msg = count * size if count is not None and size is not None else None
            kernels = linked.get(i)
            stream, cuda_dev, n_kernels = None, None, None
            if kernels:
                row_ts, row_dur, kernel = self._span(kernels)
                timing = "kernel"
                n_kernels = len(kernels)
                cuda_dev = kernel[3]
                stream = None if kernel[4] is None else str(kernel[4])
            else:
                backend = ctx.backend_of(comm_id, name)
                timing = ctx.untimed(backend, group_size, count, msg, any_linked)
                row_ts, row_dur = ts, (dur if timing == "cpu_range" else None)
            rows.append(
                (
                    idx,
                    pid,
                    op,
                    name,  # raw_op
                    comm_id,
                    group_size,
                    None,  # group_rank
                    peer,
                    count,
                    dtype,
                    msg,
                    None,  # seq
                    row_ts,
                    row_dur,
                    ts,  # launch_us
                    stream,
                    cuda_dev,
                    timing,
                    n_kernels,
                    group_source,
                    None,  # split_bytes
                    None,  # recv_split_bytes
                )
            )
        return rows

    def _from_kernels(self, st: _State, ctx: _Ctx) -> list[_CommRow]:
        # A DeepEP notify kernel and the data kernel after it on the same stream are one
        # dispatch/combine: one row, kernel_count 2.
        order = sorted(
            range(len(st.comm_kernels)),
            key=lambda i: (str(st.comm_kernels[i][4]), st.comm_kernels[i][1]),
        )
        calls: list[list[_CommKernel]] = []
        pending: _CommKernel | None = None
        for i in order:
            kernel = st.comm_kernels[i]
            role = deepep_role(kernel[5])
            if pending is not None:
                if role == "data" and kernel[4] == pending[4]:
                    calls.append([pending, kernel])
                    pending = None
                    continue
                calls.append([pending])
                pending = None
            if role == "notify":
                pending = kernel
            else:
                calls.append([kernel])
        if pending is not None:
            calls.append([pending])
        calls.sort(key=lambda ks: ks[0][0])  # file order of the first kernel
        rows: list[_CommRow] = []
        for kernels in calls:
            data = kernels[-1]
            (
                _idx,
                _ts,
                _dur,
                _dev,
                _stream,
                short,
                coll,
                _ext,
                seq,
                count,
                dtype,
                msg,
                pg,
                group_size_arg,
                peer_arg,
                _corr,
            ) = data
            if coll:
                op = norm_op(coll)
                if op is None:
                    continue
                raw = coll
                peer = _int(peer_arg)
            else:
                name_op = _kernel_info(short)[2]
                op = name_op if name_op in CANONICAL_OPS else "other"
                raw = short
                group_size_arg, peer = None, None
            comm_id, group_size, group_source = ctx.group(pg, group_size_arg)
            row_ts, row_dur, first = self._span(kernels)
            launch = st.comm_launch.get(first[15]) if first[15] is not None else None
            rows.append(
                (
                    kernels[0][0],
                    None if launch is None else launch[1],  # pid
                    op,
                    raw,
                    comm_id,
                    group_size,
                    None,  # group_rank
                    peer,
                    count,
                    dtype,
                    msg,
                    _int(seq),
                    row_ts,
                    row_dur,
                    None if launch is None else launch[0],  # launch_us
                    None if first[4] is None else str(first[4]),
                    first[3],  # cuda_dev
                    "kernel",
                    len(kernels),
                    group_source,
                    None,  # split_bytes
                    None,  # recv_split_bytes
                )
            )
        return rows

    # ----------------------------------------------------------------------------------------
    # trace_meta and communicators

    def _trace_meta(
        self, st: _State, header: Header, rank_source: str
    ) -> tuple[pl.DataFrame, list[str]]:
        keys = header.keys
        warn: list[str] = []
        dist = keys.get("distributedInfo") if isinstance(keys.get("distributedInfo"), dict) else {}
        backend = dist.get("backend") if isinstance(dist.get("backend"), str) else None
        rocm = any(k in keys for k in ("roctracer_version", "hip_runtime_version"))
        if backend == "nccl" and rocm:
            backend = "rccl"
        world = _int32(dist.get("world_size"))
        if header.form == "array":
            generation = "array_2021"
        elif st.base_ns:
            generation = "base_relative"
        else:
            generation = "epoch_us"
        schema_v = keys.get("schemaVersion")
        version = f"{schema_v if schema_v is not None else 'none'};{generation}"
        if st.base_ns:
            anchor: int | None = 0
            aligned = True
        elif st.min_ts is not None and st.min_ts > EPOCH_US_MIN:
            anchor, aligned = 0, True
        elif st.min_ts is None:
            anchor, aligned = None, False
        else:
            anchor, aligned = None, False
            warn.append(
                f"rank {st.rank}: no baseTimeNanoseconds and ts is not epoch time; "
                "this rank cannot be aligned to wall clock"
            )
        host = keys.get("host_name") if isinstance(keys.get("host_name"), str) else None
        meta = pl.DataFrame(
            {
                "rank": [st.rank],
                "world_size": [world],
                "rank_source": [rank_source],
                "backend": [backend],
                "clock_anchor_ns": [anchor],
                "aligned": [aligned],
                "host": [host],
                "pid": [st.cpu_pid],
                "source_version": [version],
            },
            schema={
                "rank": pl.Int32,
                "world_size": pl.Int32,
                "rank_source": pl.Utf8,
                "backend": pl.Utf8,
                "clock_anchor_ns": pl.Int64,
                "aligned": pl.Boolean,
                "host": pl.Utf8,
                "pid": pl.Int64,
                "source_version": pl.Utf8,
            },
        )
        return meta, warn

    @staticmethod
    def _communicators(st: _State, keys: dict[str, Any]) -> pl.DataFrame | None:
        dist = keys.get("distributedInfo")
        if not isinstance(dist, dict) or not isinstance(dist.get("pg_config"), list):
            return None
        host = keys.get("host_name") if isinstance(keys.get("host_name"), str) else None
        rows: list[dict[str, Any]] = []
        for pg in dist["pg_config"]:
            if not isinstance(pg, dict) or pg.get("pg_name") is None:
                continue
            ranks = parse_ranks(pg.get("ranks"))
            if st.rank is not None and ranks is not None and st.rank not in ranks:
                continue
            group_rank = ranks.index(st.rank) if ranks and st.rank in ranks else None
            rows.append(
                {
                    "comm_id": str(pg["pg_name"]),
                    "rank": group_rank,
                    "nranks": _int32(pg.get("pg_size")) or (len(ranks) if ranks else None),
                    "global_rank": st.rank,
                    "host": host,
                    "pid": st.cpu_pid,
                    "group_desc": _text(pg.get("pg_desc")),
                    "group_ranks": ",".join(map(str, sorted(ranks))) if ranks else None,
                }
            )
        if not rows:
            return None
        return pl.DataFrame(
            rows,
            schema={
                "comm_id": pl.Utf8,
                "rank": pl.Int32,
                "nranks": pl.Int32,
                "global_rank": pl.Int32,
                "host": pl.Utf8,
                "pid": pl.Int64,
                "group_desc": pl.Utf8,
                "group_ranks": pl.Utf8,
            },
            strict=False,
        )
