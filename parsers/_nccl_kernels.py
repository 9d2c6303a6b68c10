"""Classify GPU kernel names: compute, communication (with the collective), memcpy, memset.

Shared by the timeline parsers (Kineto, Nsight Systems). The rules follow the NCCL kernel
naming of every release (see ``FORMATS_timeline.md`` §3, from ``src/device/generate.py`` and
``src/collectives/device/*`` of NVIDIA/nccl):

* NCCL ≤2.7: ``nccl<Coll><Ring|Tree|CollNet>[LL|LL128]Kernel_<op>_<ty>`` and
  ``ncclSendRecvKernel_copy_i8``.
* NCCL 2.8-2.18: ``ncclKernel_<Coll>_<ALGO>_<PROTO>_<Op>_<ctype>``.
* NCCL 2.19+: ``ncclDevKernel_<Coll>[_<Op>_<ty>]_<RING|TREE>_LL``, ``ncclDevKernel_SendRecv``,
  ``ncclDevKernel_Generic`` (also RCCL); 2.27 symmetric ``ncclSymDevKernel_*``, 2.28+
  ``ncclSymkDevKernel_*``.
* RCCL/MSCCL: ``mscclKernel_*`` (collective not in the name).
* Non-NCCL communication kernels: DeepEP (``deep_ep::``/``dpsk::ep::`` ``dispatch``, ``combine``,
  ``notify_dispatch``, ``cached_notify``, ``notify_combine``), vLLM/sglang custom all-reduce
  (``cross_device_reduce_*``), flashinfer/TensorRT-LLM ``allreduce_fusion_*`` and
  ``*AllReduce*`` kernels, PyTorch symmetric memory (``c10d::symmetric_memory::*``),
  Transformer Engine ``userbuffers_*``.

``comm_op`` values are the canonical op names of ``comm_ops.op`` (``all_reduce``, ``all_gather``,
``reduce_scatter``, ``broadcast``, ``reduce``, ``all_to_all``, ``barrier``, ...) plus
``send_recv`` for NCCL's SendRecv kernel, which runs send, recv, all-to-all (and, in old NCCL,
one-rank reductions) alike, so the name cannot tell which. ``None`` means a communication kernel
whose collective the name does not say (``ncclDevKernel_Generic``, MSCCL): take it from the
CPU op or the NVTX range instead.

Algorithm, protocol and reduction op are deliberately not returned: the kernel name does not
carry them reliably (one ``_LL_Sum_`` kernel runs every protocol and reduction).
"""

from __future__ import annotations

import re
from functools import lru_cache

import polars as pl

__all__ = [
    "CATEGORIES",
    "classify_kernel",
    "classify_kernels",
    "is_nccl_kernel",
    "strip_params",
]

CATEGORIES: tuple[str, ...] = ("compute", "comm", "memcpy", "memset", "other")
"""Every value ``classify_kernel`` may return as the category."""

_COLL_OPS: dict[str, str | None] = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "allgatherv": "all_gather",
    "reducescatter": "reduce_scatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "sendrecv": "send_recv",
    "send": "send",
    "recv": "recv",
    "alltoall": "all_to_all",
    "alltoallv": "all_to_all",
    "gather": "gather",
    "scatter": "scatter",
    "generic": None,
}

# NCCL 2.8+ (ncclKernel_) and 2.19+ (ncclDevKernel_), RCCL Generic; anything after the
# collective (algo, proto, op, type, RCCL suffixes) is ignored.
_NCCL_NEW = re.compile(
    r"^nccl(?:Dev)?Kernel_(AllReduce|AllGatherV?|ReduceScatter|Broadcast|Reduce|SendRecv|"
    r"Send|Recv|AllToAllV?|AlltoAllv?|Gather|Scatter|Generic)(?:_|$)"
)
# NCCL 2.27 symmetric kernels (ncclSymDevKernel_) and 2.28+ (ncclSymkDevKernel_), GIN/Rail
# variants included.
_NCCL_SYM = re.compile(r"^ncclSymk?(?:Dev)?Kernel_(AllReduce|AllGatherV?|ReduceScatter)(?:_|$)")
# NCCL <= 2.7: ncclAllReduceRingLLKernel_sum_f32, ncclSendRecvKernel_copy_i8,
# ncclBroadcastTreeLL128Kernel_copy_i8.
_NCCL_OLD = re.compile(
    r"^nccl(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv)"
    r"(?:Ring|Tree|CollNet\w*?)?(?:LL128|LL)?Kernel(?:_|$)"
)
# Any other NCCL/RCCL/MSCCL device kernel: communication, collective unknown.
_NCCL_ANY = re.compile(r"^(?:nccl|rccl|mscclpp|msccl)\w*?Kernel", re.IGNORECASE)

# DeepEP (open source ``deep_ep::``, DeepSeek internal ``dpsk::ep::``): the all-to-all of
# expert parallelism. ``get_dispatch_layout`` is local (a compute kernel) and does not match.
_DEEPEP = re.compile(
    r"(?:^|[^\w])(?:deep_ep|\w*ep)::(?:\w+::)*?"
    r"(dispatch|combine|notify_dispatch|notify_combine|cached_notify\w*)\s*(?:<|\(|$)"
)
# Custom all-reduce kernels (vLLM/sglang ``cross_device_reduce_1stage``, flashinfer /
# TensorRT-LLM ``allreduce_fusion_kernel_*``, ``oneShotAllReduceKernel``, quick reduce).
_CUSTOM_AR = re.compile(
    r"cross_device_reduce|allreduce_fusion|all_reduce_fusion|one_?shot_?all_?reduce|"
    r"two_?shot_?all_?reduce|quick_?all_?reduce|custom_?all_?reduce|lamport_?all_?reduce",
    re.IGNORECASE,
)
# PyTorch symmetric memory kernels: c10d::symmetric_memory::one_shot_all_reduce_kernel etc.
_SYMM_MEM = re.compile(
    r"symmetric_memory::\w*?(all_reduce|all_gather|reduce_scatter|all_to_all|"
    r"alltoall|barrier|put_signal|wait_signal)",
    re.IGNORECASE,
)
# Transformer Engine userbuffers (comm/GEMM overlap): _rs / _ag / _ar suffixes.
_USERBUFFERS = re.compile(r"^(?:void\s+)?(?:\w+::)*userbuffers_\w*", re.IGNORECASE)
_UB_OPS = (("_rs", "reduce_scatter"), ("_ag", "all_gather"), ("_ar", "all_reduce"))

_MEMCPY = re.compile(r"^\[?(?:CUDA\s+)?memcpy|^Memcpy\b|^\[?HIP\s+memcpy", re.IGNORECASE)
_MEMSET = re.compile(r"^\[?(?:CUDA\s+)?memset|^Memset\b|^\[?HIP\s+memset", re.IGNORECASE)

_SYMM_OPS = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "all_to_all": "all_to_all",
    "alltoall": "all_to_all",
    "barrier": "barrier",
    "put_signal": "send",
    "wait_signal": "recv",
}


def strip_params(name: str) -> str:
    """Drop the demangled parameter list and a leading ``void `` from a kernel name.

    ``ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)`` becomes
    ``ncclDevKernel_AllGather_RING_LL``; ``void at::native::(anonymous namespace)::k<float>(int)``
    becomes ``at::native::(anonymous namespace)::k<float>``: only the final balanced ``(...)``
    is removed, so parentheses inside the name survive.

    Args:
        name: kernel name as the profiler wrote it.

    Returns:
        The shortened name (the input unchanged if it has no parameter list).
    """
    s = name.strip()
    if s.endswith(")"):
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            ch = s[i]
            if ch == ")":
                depth += 1
            elif ch == "(":
                depth -= 1
                if depth == 0:
                    if i > 0:
                        s = s[:i].rstrip()
                    break
    if s.startswith("void "):
        s = s[5:].lstrip()
    return s


def is_nccl_kernel(name: str) -> bool:
    """True if ``name`` is an NCCL/RCCL device kernel of any release (by prefix)."""
    s = strip_params(name)
    return bool(
        _NCCL_NEW.match(s) or _NCCL_SYM.match(s) or _NCCL_OLD.match(s) or _NCCL_ANY.match(s)
    )


@lru_cache(maxsize=65536)
def classify_kernel(name: str) -> tuple[str, str | None]:
    """Classify one GPU activity name.

    Args:
        name: kernel (or memcpy/memset activity) name, with or without its parameter list.

    Returns:
        ``(category, comm_op)``: category is one of :data:`CATEGORIES`; comm_op is the
        normalised collective for communication kernels when the name tells it (``send_recv``
        for NCCL SendRecv kernels), else None.
    """
    if not name or not name.strip():
        return "other", None
    s = strip_params(name)
    if _MEMCPY.match(s):
        return "memcpy", None
    if _MEMSET.match(s):
        return "memset", None
    m = _NCCL_NEW.match(s) or _NCCL_SYM.match(s) or _NCCL_OLD.match(s)
    if m:
        return "comm", _COLL_OPS.get(m.group(1).lower())
    if _NCCL_ANY.match(s):
        return "comm", None
    m = _DEEPEP.search(s)
    if m:
        return "comm", "all_to_all"
    if _CUSTOM_AR.search(s):
        return "comm", "all_reduce"
    m = _SYMM_MEM.search(s)
    if m:
        return "comm", _SYMM_OPS.get(m.group(1).lower())
    if _USERBUFFERS.match(s):
        low = s.lower()
        for suffix, op in _UB_OPS:
            if suffix in low:
                return "comm", op
        return "comm", None
    return "compute", None


def deepep_role(name: str) -> str | None:
    """``notify`` or ``data`` for a DeepEP kernel, None for any other kernel.

    One DeepEP dispatch or combine runs as two kernels on the communication stream: a notify
    kernel (``notify_dispatch``, ``notify_combine``, ``cached_notify*``: exchanges the token
    counts) and then the data kernel (``dispatch``/``combine``: moves the tokens). The pair is
    one logical all-to-all; :mod:`commscope.parsers.kineto` merges it into one ``comm_ops`` row.
    """
    m = _DEEPEP.search(strip_params(name))
    if m is None:
        return None
    return "notify" if "notify" in m.group(1) else "data"


def classify_kernels(names: pl.Series) -> pl.DataFrame:
    """Classify a Series of kernel names (vectorised over the distinct names).

    Kernel names repeat heavily (a trace has thousands of kernels but few distinct names), so
    each distinct name is classified once with :func:`classify_kernel` and the result is
    joined back; the output is therefore identical to the scalar function, row by row.

    Args:
        names: kernel names (nulls allowed: they classify as ``other``).

    Returns:
        A frame with one row per input row, in order, and columns ``category`` (Utf8, never
        null) and ``comm_op`` (Utf8, nullable).
    """
    s = names.cast(pl.Utf8).fill_null("")
    uniq = s.unique().to_list()
    cats: list[str] = []
    ops: list[str | None] = []
    for n in uniq:
        c, o = classify_kernel(n)
        cats.append(c)
        ops.append(o)
    lookup = pl.DataFrame(
        {"__name": uniq, "category": cats, "comm_op": ops},
        schema={"__name": pl.Utf8, "category": pl.Utf8, "comm_op": pl.Utf8},
    )
    return (
        pl.DataFrame({"__name": s})
        .join(lookup, on="__name", how="left", maintain_order="left")
        .select("category", "comm_op")
    )
