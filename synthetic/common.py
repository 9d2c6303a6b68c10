"""Shared pieces of the format writers: file names, identities, pointers, kernel names, clocks.

Why: the four writers describe the same processes; process ids, CUDA streams, communicator
pointers and NCCL kernel names must agree between the NCCL log, the Kineto trace and the nsys
export of one rank, as they would in a real job.

Every generated file name starts with ``synthetic_`` and carries ``rank<NNNN>`` (the rank word
the parsers read from file names), e.g. ``nccl/synthetic_rank0003.nccl.log``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from commscope.synthetic._rng import mix64
from commscope.synthetic.layout import Group

NCCL_OPNAMES: dict[str, str] = {
    "all_reduce": "AllReduce",
    "all_gather": "AllGather",
    "reduce_scatter": "ReduceScatter",
    "send": "Send",
    "recv": "Recv",
    "broadcast": "Broadcast",
}
"""comm_ops.op -> NCCL API name (``ncclAllReduce`` without the prefix; COLL line op name)."""

C10D_NAMES: dict[str, str] = {
    "all_reduce": "allreduce",
    "all_gather": "_allgather_base",
    "reduce_scatter": "_reduce_scatter_base",
    "send": "send",
    "recv": "recv",
    "all_to_all": "all_to_allv",
}
"""comm_ops.op -> ``Collective name`` that c10d's ProcessGroupNCCL records."""

DS_RECORD_NAMES: dict[str, str] = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather_into_tensor",
    "reduce_scatter": "reduce_scatter_tensor",
    "send": "send",
    "recv": "recv",
    "all_to_all": "all_to_all_single",
}
"""comm_ops.op -> DeepSpeed comms-logger record name (the op's ``log_name``)."""

NCCL_DTYPE_SHORT: dict[str, str] = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "int64": "u64",
}
NCCL_DTYPE_OLD: dict[str, str] = {
    "float16": "half",
    "bfloat16": "__nv_bfloat16",
    "float32": "float",
    "int64": "uint64_t",
}

#: Compute label prefix -> kernel name (Ampere-class cuBLAS / PyTorch kernels).
COMPUTE_KERNELS: dict[str, str] = {
    "embedding": "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::Half, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::Half, unsigned int>, at::cuda::detail::TensorInfo<c10::Half, unsigned int>, at::cuda::detail::TensorInfo<long, unsigned int>, int, int, unsigned int, unsigned int, long)",
    "attn": "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn",
    "mlp": "ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_stages_64x3_tn",
    "gate": "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::Half, float, c10::Half, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::Half*, c10::Half const*, int)",
    "experts": "ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_stages_64x3_nn",
    "logits": "ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_stages_32x3_tn",
    "loss": "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)",
    "optimizer": "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, float, float, adamMode_t, float>(long, int volatile*, TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, float, float, adamMode_t, float)",
    "gap": "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::Half>, at::detail::Array<char*, 3>)",
}

COMPUTE_STREAM = 7
"""CUDA stream of the compute kernels (PyTorch's default stream shows as 7)."""


def compute_kernel(label: str) -> str:
    """Kernel name of a compute segment label (``attn_fwd``, ``mlp_bwd``, ...)."""
    head = label.split("_")[0]
    name = COMPUTE_KERNELS.get(head, COMPUTE_KERNELS["gap"])
    if label.endswith("_bwd") and head in ("attn", "mlp", "logits", "experts"):
        name = name[:-3] + ("_nn" if head != "experts" else "_nt")
    return name


def short_kernel_name(name: str) -> str:
    """The base name nsys stores in ``shortName`` (no template arguments or parameters)."""
    base = name.split("(")[0]
    if base.startswith("void "):
        base = base[5:]
    base = base.split("<")[0]
    return base.split("::")[-1]


def nccl_kernel(op: str, dtype: str, version: tuple[int, ...]) -> tuple[str, str]:
    """(short name, demangled name) of the NCCL kernel that runs ``op`` (FORMATS_timeline §3)."""
    minor = version[1] if len(version) > 1 else 0
    if minor >= 19:
        ty = NCCL_DTYPE_SHORT.get(dtype, "u8")
        if op in ("send", "recv", "all_to_all"):
            short = "ncclDevKernel_SendRecv"
        elif op == "all_gather":
            short = "ncclDevKernel_AllGather_RING_LL"
        elif op == "reduce_scatter":
            short = f"ncclDevKernel_ReduceScatter_Sum_{ty}_RING_LL"
        else:
            short = f"ncclDevKernel_AllReduce_Sum_{ty}_RING_LL"
        params = (
            "(ncclDevKernelArgsStorage<4096ul>)"
            if minor >= 22
            else "(ncclDevComm*, unsigned long, ncclWork*)"
        )
        return short, short + params
    ty = NCCL_DTYPE_OLD.get(dtype, "int8_t")
    if op in ("send", "recv", "all_to_all"):
        short = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"
    elif op == "all_gather":
        short = "ncclKernel_AllGather_RING_LL_Sum_int8_t"
    elif op == "reduce_scatter":
        short = f"ncclKernel_ReduceScatter_RING_LL_Sum_{ty}"
    else:
        short = f"ncclKernel_AllReduce_RING_LL_Sum_{ty}"
    return short, short + "(ncclDevComm*, unsigned long, ncclWork*)"


def comm_stream(group: Group) -> int:
    """CUDA stream id of a process group's NCCL stream (ProcessGroupNCCL: one per PG)."""
    return 20 + 4 * int(group.pg_name)


@dataclass(frozen=True)
class Names:
    """Where each format's files go."""

    out: Path

    def nccl(self, rank: int) -> Path:
        """NCCL debug log of ``rank`` (``NCCL_DEBUG_FILE`` per process)."""
        return self.out / "nccl" / f"synthetic_rank{rank:04d}.nccl.log"

    def deepspeed(self) -> Path:
        """DeepSpeed log of global rank 0 (stdout of the launcher for rank 0)."""
        return self.out / "deepspeed" / "synthetic_rank0000.deepspeed.log"

    def kineto(self, rank: int, compress: str) -> Path:
        """Kineto trace of ``rank``."""
        suffix = ".pt.trace.json.gz" if compress == "gz" else ".pt.trace.json"
        return self.out / "kineto" / f"synthetic_rank{rank:04d}{suffix}"

    def nsys(self, rank: int) -> Path:
        """nsys SQLite export of ``rank``."""
        return self.out / "nsys" / f"synthetic_rank{rank:04d}.sqlite"

    def inspector(self, host: str, pid: int) -> Path:
        """NCCL Inspector file of a process (the plugin names it ``<hostname>-pid<pid>.log``)."""
        return self.out / "inspector" / f"{host}-pid{pid}.log"

    def flight_recorder(self, rank: int) -> Path:
        """Flight Recorder dump of ``rank`` (torch's default ``nccl_trace_rank_<R>``)."""
        return self.out / "flight_recorder" / f"nccl_trace_rank_{rank}"


def comm_pointer(seed: int, rank: int, index: int) -> int:
    """A plausible heap address of the ``index``-th communicator of ``rank``'s process."""
    base = 0x550000000000 + (mix64(seed * 1_000_003 + rank) % 0x0FFFFFFF) * 0x1000
    return base + index * 0x2B2A0 + 0xA60


def stream_pointer(seed: int, rank: int, index: int) -> int:
    """A plausible address of a ``cudaStream_t``."""
    base = 0x560000000000 + (mix64(seed * 7_000_003 + rank) % 0x0FFFFFFF) * 0x1000
    return base + index * 0x1F0 + 0x8F0


def buffer_pool(seed: int, rank: int, size: int = 16) -> list[str]:
    """Device buffer addresses a rank's collectives cycle through (the caching allocator reuses
    a few large blocks)."""
    base = 0x7F0000000000 + (mix64(seed * 31 + rank) % 0xFFFF) * 0x100000000
    return [f"0x{base + i * 0x20000000:x}" for i in range(size)]


def host_ip(node: int) -> str:
    """The bootstrap interface address of a node."""
    return f"10.{10 + node // 65536}.{(node // 256) % 256}.{node % 256 + 1}"
