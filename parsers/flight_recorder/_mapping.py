"""Flight Recorder entries → ``comm_ops`` rows: op, group, sequence, size, state, timing.

One row per entry (record). The rules, with their sources (``FORMATS_flight_recorder.md``
§5, ``fr_trace`` ``types.py``/``utils.py``):

* ``op`` from ``profiling_name`` ``<backend>:<name>[ <peers>]`` (backends ``nccl``, ``xccl``
  as ``fr_trace`` accepts, plus ``gloo``/``ucc``); the name table is :data:`OPS` (``fr_trace``'s
  ``COLLECTIVES`` and ``P2P`` sets). ``nccl:coalesced`` and ``nccl:ALLGATHER_coalesced`` /
  ``REDUCE_SCATTER_coalesced`` close a coalesced group whose ops have entries of their own:
  op ``other`` (no traffic of their own). ``raw_op`` = ``profiling_name``.
* ``comm_id`` = the pg name (``process_group[0]``), exactly as Kineto's ``Process Group Name``
  (the same c10d name), so one group keys the same in both; ``group_size`` / ``group_rank``
  from the dump's ``pg_config`` (``group_source`` ``pg_config``); ``peer_rank`` of send/recv:
  the peer's *global* rank, ``sorted(group ranks)[group peer]`` (the name's ``src->dst`` /
  ``dst<-src`` are group ranks; ``fr_trace`` ``Op._init_global_src_dst``).
* ``seq`` = ``p2p_seq_id`` for p2p entries (``is_p2p``, else a send/recv name), else
  ``collective_seq_id`` (``fr_trace`` ``find_coalesced_group``).
* ``msg_bytes`` / ``count`` in NCCL's buffer meaning (``comm_ops.msg_bytes``): the input
  tensors for all_reduce, broadcast, reduce, all_gather (per-rank send buffer), all_to_all
  (whole send buffer), send, gather, barrier; the output tensors for reduce_scatter (the
  shard), recv, scatter. Σ over the entry's tensors of Π(shape) × element size of that
  tensor's dtype (c10 ScalarType names). all_to_all sizes of schema < 2.4 are not logged
  (``fr_trace``), so they stay null.
* ``call_state`` = ``state`` (scheduled | started | completed).
* Timing: ``launch_ts_ns`` = ``time_created_ns`` (CPU enqueue, epoch ns). FR records no GPU
  start time: ``time_discovered_started_ns``/``_completed_ns`` are when a CPU thread *noticed*
  the start/end events ("can be very late"), so they are never a start or a duration, and
  ``ts_ns`` stays null. ``duration_ms`` (present only with ``TORCH_NCCL_ENABLE_TIMING``: the
  CUDA start/end events around the collective on its stream) → ``dur_ns``,
  ``timing_source`` ``logged``; without it ``none``.
"""

from __future__ import annotations

import math
import reprlib
from dataclasses import dataclass, field
from typing import Any

from commscope.parsers._kineto_meta import norm_dtype
from commscope.parsers.flight_recorder._dump import Dump, Group, as_int, clean_text, entry_group

OPS: dict[str, str] = {
    "broadcast": "broadcast",
    "_broadcast_oop": "broadcast",
    "reduce": "reduce",
    "_reduce_oop": "reduce",
    "all_gather": "all_gather",
    "all_gather_single": "all_gather",
    "all_gather_v": "all_gather",
    "_all_gather_base": "all_gather",
    "all_gather_into_tensor_coalesced": "all_gather",
    "allgather": "all_gather",
    "allgather_coalesced": "all_gather",
    "all_reduce": "all_reduce",
    "allreduce": "all_reduce",
    "allreduce_coalesced": "all_reduce",
    "all_reduce_barrier": "barrier",
    "barrier": "barrier",
    "reduce_scatter": "reduce_scatter",
    "reduce_scatter_single": "reduce_scatter",
    "reduce_scatter_v": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "gather": "gather",
    "scatter": "scatter",
    "all_to_all": "all_to_all",
    "all_to_all_single": "all_to_all",
    "all_to_all_v_single": "all_to_all",
    "alltoall": "all_to_all",
    "alltoall_base": "all_to_all",
    "send": "send",
    "recv": "recv",
}
"""FR op name (after the backend prefix, before the peers) → ``comm_ops.op``; anything else
(``coalesced`` end markers, ``split``, ``new_window``, unknown names) is ``other``."""

OUTPUT_SIZED = frozenset({"reduce_scatter", "recv", "scatter"})
"""Ops whose message is the output buffer (the others: the input)."""

STATES = frozenset({"scheduled", "started", "completed"})
"""Entry states the writer produces (``FlightRecorderDetail.hpp``)."""

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxstring = 3, 24, 16, 300
_REPR.maxother = 300


def short_repr(value: Any) -> str:
    """A reject's ``raw``: depth- and length-bounded (a pickle can nest 100,000 deep)."""
    return _REPR.repr(value)[:4096]


TIME_NS_MAX = 2**62
MAX_DIMS = 64
MAX_TENSORS = 4096
_I32_MAX = 2**31 - 1


@dataclass
class EntryRows:
    """Column lists of the entries of one dump, plus rejects and value warnings."""

    cols: dict[str, list[Any]] = field(default_factory=dict)
    rejects: list[tuple[int, str, str]] = field(default_factory=list)
    bad_values: dict[str, int] = field(default_factory=dict)
    parsed: int = 0

    def add(self, row: dict[str, Any]) -> None:
        for k, v in row.items():
            self.cols.setdefault(k, []).append(v)
        self.parsed += 1

    def bad(self, what: str) -> None:
        self.bad_values[what] = self.bad_values.get(what, 0) + 1


def split_profiling_name(name: str) -> tuple[str, str | None, int | None, int | None]:
    """(FR op name, backend, src group rank, dst group rank) of a ``profiling_name``.

    ``nccl:send 0->3``: src 0, dst 3; ``nccl:recv 3<-0``: dst 3, src 0 (``fr_trace`` ``Op``).
    """
    backend, sep, rest = name.partition(":")
    if not sep:
        backend, rest = None, name  # type: ignore[assignment]
    parts = rest.strip().split(" ", 1)
    opname = parts[0]
    src = dst = None
    if len(parts) == 2:
        meta = parts[1].strip()
        if "->" in meta:
            a, _, b = meta.partition("->")
            src, dst = as_int(a), as_int(b)
        elif "<-" in meta:
            a, _, b = meta.partition("<-")
            dst, src = as_int(a), as_int(b)
    return opname, backend, src, dst


def _numel(shape: Any) -> int | None:
    if not isinstance(shape, (list, tuple)) or len(shape) > MAX_DIMS:
        return None
    n = 1
    for d in shape:
        if type(d) is not int or d < 0:
            return None
        n *= d
    return n


def tensor_bytes(sizes: Any, dtypes: Any) -> tuple[int | None, int | None, str | None, bool]:
    """(elements, bytes, dtype, ok) of a list of tensor shapes with their dtypes.

    ``ok`` is False when the value is malformed (not a list of int shapes); bytes is None when
    an element size is unknown or the total passes int64.
    """
    if not isinstance(sizes, (list, tuple)) or len(sizes) > MAX_TENSORS:
        return None, None, None, False
    if not isinstance(dtypes, (list, tuple)):
        dtypes = []
    count = 0
    total: int | None = 0
    first_dtype: str | None = None
    for i, shape in enumerate(sizes):
        n = _numel(shape)
        if n is None:
            return None, None, None, False
        count += n
        name, size = norm_dtype(dtypes[i]) if i < len(dtypes) else (None, None)
        if first_dtype is None and name is not None:
            first_dtype = clean_text(name[:64])
        if total is not None:
            total = total + n * size if size is not None else None
    if count >= 2**63:
        return None, None, first_dtype, True
    if total is not None and total >= 2**63:
        total = None
    return count, total, first_dtype, True


def _time_ns(v: Any) -> int | None:
    i = as_int(v)
    return i if i is not None and 0 < i <= TIME_NS_MAX else None


def map_entry(
    entry: Any,
    index: int,
    dump: Dump,
    rank: int | None,
    out: EntryRows,
) -> None:
    """Append the ``comm_ops`` row of entry ``index`` (1-based) to ``out``, or its reject."""
    if not isinstance(entry, dict):
        out.rejects.append((index, short_repr(entry), "entry is not a dict"))
        return
    pname = entry.get("profiling_name")
    if not isinstance(pname, str) or not pname.strip() or len(pname) > 1024:
        out.rejects.append(
            (index, short_repr(entry), "entry has no profiling_name string: its op is unknown")
        )
        return
    pname = clean_text(pname)
    opname, _backend, src, dst = split_profiling_name(pname.strip())
    if not opname:
        out.rejects.append((index, short_repr(pname), "profiling_name names no op"))
        return
    op = OPS.get(opname, "other")
    pg_name, _desc = entry_group(entry)
    if pg_name is None and "process_group" in entry:
        out.bad("process_group")
    group: Group | None = dump.groups.get(pg_name) if pg_name is not None else None
    members = group.sorted_ranks if group is not None else None
    group_size = len(members) if members is not None else None
    group_rank = members.index(rank) if members is not None and rank in members else None
    peer_rank = None
    if op in ("send", "recv") and members is not None:
        peer_local = dst if op == "send" else src
        if peer_local is not None and 0 <= peer_local < len(members):
            peer_rank = members[peer_local]
        elif peer_local is not None:
            out.bad("p2p peer outside its group")
    is_p2p = entry.get("is_p2p")
    p2p = is_p2p if isinstance(is_p2p, bool) else op in ("send", "recv")
    seq_key = "p2p_seq_id" if p2p else "collective_seq_id"
    seq = as_int(entry.get(seq_key))
    if seq is None and seq_key in entry:
        out.bad(seq_key)
    elif seq is not None and seq < 0:
        seq = None
        out.bad(seq_key)
    use_output = op in OUTPUT_SIZED
    sizes_key = "output_sizes" if use_output else "input_sizes"
    dtypes_key = "output_dtypes" if use_output else "input_dtypes"
    count, msg, dtype, ok = tensor_bytes(entry.get(sizes_key), entry.get(dtypes_key))
    if not ok:
        if sizes_key in entry:
            out.bad(sizes_key)
        count = msg = None
    if op == "all_to_all" and not dump.version.all_to_all_sizes_logged:
        count = msg = None
    state = entry.get("state")
    if not (isinstance(state, str) and state in STATES):
        if state is not None:
            out.bad("state")
        state = None
    created = _time_ns(entry.get("time_created_ns"))
    if created is None and entry.get("time_created_ns") is not None:
        out.bad("time_created_ns")
    dur_ns = None
    dur = entry.get("duration_ms")
    if dur is not None:
        if type(dur) in (int, float) and math.isfinite(dur) and 0 <= dur < 9.2e12:
            dur_ns = round(dur * 1e6)
        else:
            out.bad("duration_ms")
    out.add(
        {
            "rank": rank,
            "source_line": index,
            "op": op,
            "raw_op": pname[:256],
            "comm_id": pg_name,
            "group_size": group_size,
            "group_rank": group_rank,
            "peer_rank": peer_rank,
            "count": count,
            "dtype": dtype,
            "msg_bytes": msg,
            "seq": seq,
            "ts_ns": None,
            "dur_ns": dur_ns,
            "timing_source": "logged" if dur_ns is not None else "none",
            "launch_ts_ns": created,
            "group_source": "pg_config" if group_size is not None else None,
            "call_state": state,
        }
    )
