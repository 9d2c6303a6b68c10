"""NCCL enums as printed in debug output: data types, reduction ops, op names, tuning names.

The numbers are the values of NCCL's public enums (``src/nccl.h.in``) and of its internal
algorithm/protocol indices (``src/include/device.h``), which COLL and TUNING lines print as
plain integers. They have been stable since NCCL 2.4; new values were only appended.
"""

from __future__ import annotations

DTYPES: dict[int, tuple[str, int]] = {
    0: ("int8", 1),
    1: ("uint8", 1),
    2: ("int32", 4),
    3: ("uint32", 4),
    4: ("int64", 8),
    5: ("uint64", 8),
    6: ("float16", 2),
    7: ("float32", 4),
    8: ("float64", 8),
    9: ("bfloat16", 2),  # 2.10+, builds with CUDA bf16
    10: ("float8e4m3", 1),  # 2.24+
    11: ("float8e5m2", 1),  # 2.24+
}
"""``ncclDataType_t`` value -> (canonical name, element size in bytes)."""

REDOPS: dict[int, str] = {0: "sum", 1: "prod", 2: "max", 3: "min", 4: "avg"}
"""``ncclRedOp_t`` value -> name; values >= 5 are user-created (``ncclRedOpCreatePreMulSum``)."""

OPS: dict[str, str] = {
    "AllReduce": "all_reduce",
    "AllGather": "all_gather",
    "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast",
    "Reduce": "reduce",
    "Send": "send",
    "Recv": "recv",
    "AlltoAll": "all_to_all",
    "Gather": "gather",
    "Scatter": "scatter",
}
"""COLL-line op name -> canonical ``comm_ops.op``; anything else is ``other``."""

REDUCING_OPS: frozenset[str] = frozenset({"AllReduce", "ReduceScatter", "Reduce"})
"""Ops whose ``op <n>`` field is meaningful (the others print ``op 0``)."""

ROOTED_OPS: frozenset[str] = frozenset({"Broadcast", "Reduce", "Send", "Recv", "Gather", "Scatter"})
"""Ops whose ``root <n>`` field is a rank (the root, or the peer for Send/Recv)."""

ALGOS: dict[int, str] = {
    0: "TREE",
    1: "RING",
    2: "COLLNET_DIRECT",
    3: "COLLNET_CHAIN",
    4: "NVLS",
    5: "NVLS_TREE",
    6: "PAT",  # 2.23+
}
"""Algorithm index printed by 2.20-2.23 TUNING lines -> the name 2.24+ prints."""

PROTOS: dict[int, str] = {0: "LL", 1: "LL128", 2: "SIMPLE"}
"""Protocol index printed by 2.20-2.23 TUNING lines -> the name 2.24+ prints."""


def dtype_name(code: int) -> str:
    """Name of a datatype enum value; ``dtype_<n>`` for values this table does not know."""
    known = DTYPES.get(code)
    return known[0] if known else f"dtype_{code}"


def redop_name(code: int) -> str:
    """Name of a reduction enum value; ``user_<n>`` for user-created (>= 5) ops."""
    return REDOPS.get(code, f"user_{code}")


def algo_name(text: str) -> str:
    """Normalise a TUNING algorithm field (index or name) to the 2.24+ upper-case name."""
    return ALGOS.get(int(text), f"algo_{text}") if text.isdigit() else text.upper()


def proto_name(text: str) -> str:
    """Normalise a TUNING protocol field (index or name) to the 2.24+ upper-case name."""
    return PROTOS.get(int(text), f"proto_{text}") if text.isdigit() else text.upper()
