"""An independent reference reader for one Kineto trace (issue 16, item 5: the oracle).

Written from the format (``../shared/FORMATS_timeline.md``, the raw sample traces, HTA's
documented rules), apart from ``parsers/kineto*.py`` and ``sql/``, so that a test can hold the
marts against a second reading of the same raw events. Plain ``json`` and ``gzip`` only.

Rules, each chosen to be simple and checkable by hand:

- **Times.** ``ts``/``dur`` are microseconds written as decimals; they are parsed as
  :class:`~decimal.Decimal` (exact) and turned into integer ns by ``round(x * 1000)`` (half to
  even), ``end = round((ts + dur) * 1000)``. ``baseTimeNanoseconds`` is added when present, so
  ns are on the epoch clock like commscope's ``ts_ns``.
- **Rank.** ``distributedInfo.rank``, else ``rank<N>`` / ``rank-<N>`` / ``rank_<N>`` /
  ``worker<N>`` in the file name (FORMATS_timeline.md §4.4), else None.
- **Steps.** ``ProfilerStep#N`` events on the CPU (any category but ``gpu_user_annotation``);
  the first CPU copy of each N wins.
- **Kernels.** Events of category ``kernel`` (``Kernel`` in 2020 files). memcpy and memset
  (``gpu_memcpy``/``gpu_memset``/``Memcpy``/``Memset``) are neither comm nor compute: they are
  left out of every union, as HTA's ``MEMORY`` kernel type is left out of its overlap.
- **Classification** (:func:`is_comm_kernel`): comm = NCCL/RCCL kernels (names starting
  ``nccl`` / ``rccl``: ``ncclKernel_*``, ``ncclDevKernel_*``, ``ncclSymDevKernel_*``, NCCL <= 2.7
  ``nccl<Coll>...Kernel_*``) and DeepEP kernels that move data between ranks (namespaces
  ``ep::internode`` / ``ep::intranode`` / ``deep_ep::``: dispatch, combine, notify). DeepEP's
  ``get_dispatch_layout`` only computes a layout locally, so it is compute. compute = every
  other kernel. (HTA's own rule, ``hta/common/types.py``: comm = ``^nccl|^hip|^hccl|ncclKernel``,
  so HTA counts DeepEP kernels as compute.) One DeepEP operation is one data kernel
  (dispatch/combine) with the notify kernel before it: ``deepep_kernels`` counts both kinds.
- **Launch attribution.** Runtime/driver events (``cuda_runtime``, ``cuda_driver``, 2020
  ``Runtime``; ROCm's ``hip*`` calls sit in ``cuda_runtime`` too) with ``args.correlation``
  are launches; a kernel's launch is the one with its correlation id. Its iteration is the step
  N with ``step.ts <= launch.ts < step.ts + step.dur`` (HTA's rule); no launch or no such step:
  no iteration. GPU intervals are never clipped to the step.
- **Per iteration.** comm_ns = |union of comm kernels|, compute_ns = |union of compute
  kernels|, hidden_ns = |comm union ∩ compute union|. A trace with no kernel events at all
  (CPU-only, gloo, or trimmed to CPU events) has comm time from its communication ranges
  (``nccl:*``/``gloo:*`` CPU ranges), attributed by the range start, and no compute.
- **Calls.** A call is a CPU ``nccl:*``/``gloo:*`` range (``user_annotation``), or a
  ``record_param_comms`` naming a sized collective that encloses no such range. Its window is
  the enclosing ``record_param_comms`` on the same thread when there is one (the launch may
  follow the range), else the range. Its kernels: comm kernels whose launch lies on the same
  pid/tid inside that window (the "GPU projection" rule). Duration: first kernel start to last
  kernel end.
- **Sizes and bandwidth** (PLAN.md convention): msg_bytes = full buffer (all_reduce,
  broadcast, reduce, all_to_all, send/recv), per-rank send buffer (all_gather), per-rank shard
  (reduce_scatter); from ``In``/``Out msg nelems`` x dtype size, else the range's ``Input
  Dims`` x ``Input type`` size (old traces, where the reduce_scatter input is the full buffer,
  so the shard is input / n). Group size n: the record's ``Group size``, else ``pg_config``'s
  ``pg_size`` of its process group, else (default group or none named) ``world_size``.
  algbw = S / t with S = msg_bytes x n for all_gather/reduce_scatter else msg_bytes; busbw =
  algbw x (2(n-1)/n all_reduce; (n-1)/n all_gather, reduce_scatter, all_to_all; 1 otherwise),
  in GB/s = 1e9 bytes/s.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

STEP_RE = re.compile(r"^ProfilerStep\s*#\s*(\d+)")
RANK_RE = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)
COMM_RANGE_RE = re.compile(r"^(nccl|gloo):(.+)$")
COMM_KERNEL_RE = re.compile(r"^(?:void\s+)?(?:nccl|rccl)|ep::(?:internode|intranode)::|deep_ep::")
DEEPEP_RE = re.compile(r"ep::(?:internode|intranode)::(\w*notify\w*|dispatch|combine)\b")
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime", "driver"}
OP_NAMES = {  # raw collective / range names -> normalised op
    "all_reduce": "all_reduce", "allreduce": "all_reduce", "allreduce_coalesced": "all_reduce",
    "broadcast": "broadcast", "reduce": "reduce",
    "all_gather": "all_gather", "allgather": "all_gather", "_all_gather_base": "all_gather",
    "_allgather_base": "all_gather", "all_gather_into_tensor": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather",
    "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "all_to_all": "all_to_all", "alltoall": "all_to_all", "alltoall_base": "all_to_all",
    "all_to_all_single": "all_to_all", "send": "send", "recv": "recv",
}  # fmt: skip
ELEM_BYTES = {  # Kineto 'dtype' (c10 ScalarType) and 'Input type' (C type) names
    "float": 4, "double": 8, "half": 2, "bfloat16": 2, "c10::half": 2, "c10::bfloat16": 2,
    "long": 8, "long int": 8, "int64": 8, "int": 4, "int32": 4, "short": 2,
    "char": 1, "signed char": 1, "unsigned char": 1, "byte": 1, "bool": 1, "uint8": 1, "int8": 1,
}  # fmt: skip
BUSBW_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n}
for _op in ("all_gather", "reduce_scatter", "all_to_all"):
    BUSBW_FACTOR[_op] = lambda n: (n - 1) / n


def ns(us: Any) -> int:
    """Microseconds as written (Decimal, int) -> integer ns, rounded half to even."""
    return int((Decimal(us) * 1000).to_integral_value(rounding=ROUND_HALF_EVEN))


def is_comm_kernel(name: str) -> bool:
    """NCCL/RCCL and DeepEP communication kernels (see the module docstring)."""
    return bool(COMM_KERNEL_RE.search(name))


def union(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merge [start, end) intervals."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        elif e > s:
            out.append((s, e))
    return out


def length(iv: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in iv)


def intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """|a ∩ b| for two merged interval lists."""
    i = j = tot = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        tot += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tot


@dataclass
class Call:
    """One communication call and what the reference derives for it."""

    op: str
    raw: str
    launch_ns: int
    iteration: int | None
    msg_bytes: int | None = None
    group_size: int | None = None
    kernels: list[tuple[int, int]] = field(default_factory=list)

    @property
    def kernel_ts_ns(self) -> int | None:
        return min(s for s, _ in self.kernels) if self.kernels else None

    @property
    def dur_ns(self) -> int | None:
        return max(e for _, e in self.kernels) - self.kernel_ts_ns if self.kernels else None

    @property
    def busbw_gb_s(self) -> float | None:
        """nccl-tests busbw, GB/s (1e9 B/s), from the kernel time; None when unsized/untimed."""
        n, t = self.group_size, self.dur_ns
        if not self.msg_bytes or not n or not t:
            return None
        s = self.msg_bytes * (n if self.op in ("all_gather", "reduce_scatter") else 1)
        return s / t * BUSBW_FACTOR.get(self.op, lambda n: 1.0)(n)  # bytes/ns = GB/s


@dataclass
class Reference:
    """Everything the oracle derives from one trace."""

    rank: int | None
    world_size: int | None
    steps: dict[int, tuple[int, int]]  # N -> (start_ns, end_ns)
    has_kernels: bool
    per_iteration: dict[int, dict[str, int]]  # N -> comm_ns, compute_ns, hidden_ns
    calls: list[Call]
    unattributed_kernels: int  # kernels with no launch or launched outside every step
    deepep_kernels: dict[str, int]  # DeepEP comm kernels: "data" (dispatch/combine), "notify"


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(top-level object, events); gzip by magic bytes; a bare array is the 2020 form."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw, parse_float=Decimal)
    return ({}, doc) if isinstance(doc, list) else (doc, doc.get("traceEvents", []))


def _elem(type_name: Any) -> int | None:
    return ELEM_BYTES.get(str(type_name).lower()) if type_name is not None else None


def _size(op: str, rec: dict[str, Any], rng: dict[str, Any], n: int | None) -> int | None:
    """msg_bytes by the PLAN.md convention, from record args or the range's Input Dims."""
    elem = _elem(rec.get("dtype"))
    if elem and rec.get("In msg nelems") is not None:
        key = "Out msg nelems" if op == "reduce_scatter" else "In msg nelems"
        return int(rec[key]) * elem
    dims, types = rng.get("Input Dims"), rng.get("Input type")
    if not dims or not types or not dims[0] or _elem(types[0]) is None:
        return None
    total = _elem(types[0])
    for d in dims[0]:
        total *= int(d)
    if op == "reduce_scatter":  # old traces: the range's input is the full buffer
        return total // n if n else None
    return total


def read(path: Path) -> Reference:
    """Read one trace and derive the reference figures."""
    top, events = load(path)
    base = int(top.get("baseTimeNanoseconds", 0) or 0)
    dist = top.get("distributedInfo") or {}
    rank = dist.get("rank")
    if rank is None and (m := RANK_RE.search(path.name)):
        rank = int(m.group(1))
    world = dist.get("world_size")
    pg_size = {str(p.get("pg_name")): p.get("pg_size") for p in dist.get("pg_config") or []}

    def span(e: dict[str, Any]) -> tuple[int, int]:
        return base + ns(e["ts"]), base + ns(e["ts"] + e.get("dur", 0))

    xs = [e for e in events if e.get("ph") == "X" and "ts" in e]
    steps: dict[int, tuple[int, int]] = {}
    for e in xs:
        m = STEP_RE.match(str(e.get("name", "")))
        if m and e.get("cat") != "gpu_user_annotation" and int(m.group(1)) not in steps:
            steps[int(m.group(1))] = span(e)
    order = sorted((s, e, n) for n, (s, e) in steps.items())
    starts = [s for s, _, _ in order]

    def step_of(t: int) -> int | None:
        i = bisect.bisect_right(starts, t) - 1
        return order[i][2] if i >= 0 and t < order[i][1] else None

    launches = {}
    for e in xs:
        if str(e.get("cat", "")).lower() in LAUNCH_CATS and "correlation" in e.get("args", {}):
            launches[e["args"]["correlation"]] = e
    kernels = [e for e in xs if str(e.get("cat", "")).lower() == "kernel"]
    comm: dict[int, list[tuple[int, int]]] = {n: [] for n in steps}
    comp: dict[int, list[tuple[int, int]]] = {n: [] for n in steps}
    unattributed = 0
    by_launch: dict[int, list[tuple[int, int]]] = {}  # id(launch) -> its comm kernels
    for k in kernels:
        launch = launches.get(k.get("args", {}).get("correlation"))
        it = step_of(base + ns(launch["ts"])) if launch else None
        if is_comm_kernel(k["name"]) and launch:
            by_launch.setdefault(id(launch), []).append(span(k))
        if it is None:
            unattributed += 1
        else:
            (comm if is_comm_kernel(k["name"]) else comp)[it].append(span(k))

    # calls: CPU comm ranges, inside their record_param_comms when there is one
    recs = sorted((e for e in xs if e.get("name") == "record_param_comms"), key=lambda e: e["ts"])
    ranges = [
        e
        for e in xs
        if COMM_RANGE_RE.match(str(e.get("name", ""))) and e.get("cat") != "gpu_user_annotation"
    ]
    calls: list[Call] = []
    used: set[int] = set()
    windows: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]] = []
    for r in ranges:
        rec = next(
            (c for c in recs if (c["pid"], c["tid"]) == (r["pid"], r["tid"])
             and c["ts"] <= r["ts"] and r["ts"] + r["dur"] <= c["ts"] + c["dur"]),
            None,
        )  # fmt: skip
        if rec is not None:
            used.add(id(rec))
        windows.append((r, rec or r, rec))
    for c in recs:  # a sized record_param_comms without a range
        if id(c) not in used and OP_NAMES.get(str(c["args"].get("Collective name"))):
            windows.append(({"name": "record_param_comms", "args": {}}, c, c))
    thread_launches: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for lz in launches.values():
        thread_launches.setdefault((lz["pid"], lz["tid"]), []).append(lz)
    for r, win, rec in windows:
        args = (rec or {}).get("args", {})
        raw = str(args.get("Collective name") or COMM_RANGE_RE.sub(r"\2", r["name"]))
        op = OP_NAMES.get(raw, OP_NAMES.get(COMM_RANGE_RE.sub(r"\2", r["name"]), "other"))
        n = args.get("Group size")
        if n is None:
            pg = args.get("Process Group Name", args.get("Process Group ID"))
            n = pg_size.get(str(pg)) if pg is not None else None
            if n is None and (pg is None or str(pg) in ("0", "default_pg")):
                n = world
        w0, w1 = span(win)
        ks = [
            k
            for lz in thread_launches.get((win["pid"], win["tid"]), [])
            if id(lz) in by_launch and w0 <= base + ns(lz["ts"]) <= w1
            for k in by_launch[id(lz)]
        ]
        start = span(r if r["name"] != "record_param_comms" else win)[0]
        calls.append(
            Call(op, raw, start, step_of(start), _size(op, args, r.get("args", {}), n), n, ks)
        )

    if not kernels:  # CPU-only trace: the comm ranges are the comm time
        for r in ranges:
            it = step_of(span(r)[0])
            if it is not None:
                comm[it].append(span(r))
    per_iteration = {}
    for n in steps:
        cu, pu = union(comm[n]), union(comp[n])
        per_iteration[n] = {
            "comm_ns": length(cu),
            "compute_ns": length(pu),
            "hidden_ns": intersect(cu, pu),
        }
    deepep = {"data": 0, "notify": 0}
    for k in kernels:
        if (m := DEEPEP_RE.search(k["name"])) is not None:
            deepep["notify" if "notify" in m.group(1) else "data"] += 1
    return Reference(rank, world, steps, bool(kernels), per_iteration, calls, unattributed, deepep)


if __name__ == "__main__":  # python tests/oracle/kineto_reference.py TRACE...
    import sys

    for arg in sys.argv[1:]:
        ref = read(Path(arg))
        print(
            f"== {arg}: rank {ref.rank}/{ref.world_size}, unattributed {ref.unattributed_kernels}"
        )
        for n, v in sorted(ref.per_iteration.items()):
            print(f"  iteration {n}: {v}")
        for c in ref.calls:
            print(f"  {c.op:15} it={c.iteration} bytes={c.msg_bytes} n={c.group_size} "
                  f"dur={c.dur_ns} k={len(c.kernels)} busbw={c.busbw_gb_s}")  # fmt: skip
