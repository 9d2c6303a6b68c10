"""Tests for the shared GPU kernel-name classifier (commscope.parsers._nccl_kernels)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commscope.parsers._nccl_kernels import (
    CATEGORIES,
    classify_kernel,
    classify_kernels,
    is_nccl_kernel,
    strip_params,
)

# One name per NCCL generation and collective, as the NCCL sources generate them
# (FORMATS_timeline.md §3), with the parameter lists Kineto shows.
NCCL_NAMES: list[tuple[str, str | None]] = [
    # <= 2.7
    ("ncclAllReduceRingLLKernel_sum_f32(ncclColl)", "all_reduce"),
    ("ncclAllReduceTreeLL128Kernel_sum_f16(ncclColl)", "all_reduce"),
    ("ncclAllReduceCollNetLLKernel_sum_f32", "all_reduce"),
    ("ncclAllGatherRingLLKernel_copy_i8(ncclColl)", "all_gather"),
    ("ncclReduceScatterRingLLKernel_sum_f32", "reduce_scatter"),
    ("ncclBroadcastRingLLKernel_copy_i8", "broadcast"),
    ("ncclReduceRingLLKernel_sum_f32", "reduce"),
    ("ncclSendRecvKernel_copy_i8(ncclColl)", "send_recv"),
    # 2.8 - 2.18
    (
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
        "all_reduce",
    ),
    (
        "ncclKernel_AllReduce_TREE_LL_Sum___nv_bfloat16(ncclDevComm*, unsigned long, ncclWork*)",
        "all_reduce",
    ),
    (
        "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
        "all_gather",
    ),
    ("ncclKernel_ReduceScatter_RING_LL_Sum_half", "reduce_scatter"),
    (
        "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
        "broadcast",
    ),
    ("ncclKernel_Reduce_RING_LL_Sum_double", "reduce"),
    (
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
        "send_recv",
    ),
    # 2.19 - 2.21 and 2.22+ (params changed)
    (
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
        "all_reduce",
    ),
    ("ncclDevKernel_AllReduce_Sum_bf16_TREE_LL(ncclDevKernelArgsStorage<4096ul>)", "all_reduce"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "all_gather"),
    ("ncclDevKernel_ReduceScatter_Sum_u32_RING_LL", "reduce_scatter"),
    ("ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "broadcast"),
    ("ncclDevKernel_Reduce_Sum_f16_RING_LL", "reduce"),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "send_recv"),
    ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", None),
    ("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", None),
    # 2.27 symmetric, 2.28+ renamed
    ("ncclSymDevKernel_AllReduce_RSxLD_AGxST_sum_bf16(ncclSymDevArgs)", "all_reduce"),
    ("ncclSymDevKernel_AllGather_LL", "all_gather"),
    ("ncclSymDevKernel_ReduceScatter_LD_sum_f32", "reduce_scatter"),
    ("ncclSymkDevKernel_AllGather_STMC", "all_gather"),
    ("ncclSymkDevKernel_AllReduce_AGxLLMC_R_avg_f32", "all_reduce"),
    # RCCL / MSCCL
    ("mscclKernel_Sum_float_LL(ncclDevComm*, mscclAlgo*, mscclWork*)", None),
]

OTHER_COMM: list[tuple[str, str | None]] = [
    ("void dpsk::ep::internode::dispatch<false, 8, true, 8>(int*, float*)", "all_to_all"),
    (
        "void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(void*)",
        "all_to_all",
    ),
    ("void dpsk::ep::internode::notify_dispatch<false, 8>(int const*)", "all_to_all"),
    ("void dpsk::ep::internode::cached_notify<false>(int)", "all_to_all"),
    ("void deep_ep::intranode::dispatch<8, 768, 6144>(int4*, float*)", "all_to_all"),
    ("void deep_ep::internode_ll::combine<false, 7168>(void*)", "all_to_all"),
    ("void vllm::cross_device_reduce_1stage<c10::BFloat16, 8>(vllm::RankData*)", "all_reduce"),
    ("void vllm::cross_device_reduce_2stage<float, 4>(vllm::RankData*)", "all_reduce"),
    (
        "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<half>(x)",
        "all_reduce",
    ),
    ("void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 8>(float**)", "all_reduce"),
    ("void c10d::symmetric_memory::multimem_all_gather_kernel<16>(char*)", "all_gather"),
    ("userbuffers_fp16_sum_inplace_gpu_rr_rs(int, int)", "reduce_scatter"),
]

COMPUTE = [
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(at::native::ReduceOp<float>)",
    "void cub::DeviceReduceKernel<cub::DeviceReducePolicy<float>>(float*)",
    "void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*)",
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<float, long>(int)",
    "ampere_sgemm_128x64_nn",
    "triton_poi_fused_add_0",
    "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT",
    "void layer_norm::ln_fwd_kernel<float>(layer_norm::FwdParams)",
]


@pytest.mark.parametrize(("name", "op"), NCCL_NAMES)
def test_every_nccl_generation_is_comm_with_its_collective(name: str, op: str | None) -> None:
    assert classify_kernel(name) == ("comm", op)
    assert is_nccl_kernel(name)


@pytest.mark.parametrize(("name", "op"), OTHER_COMM)
def test_non_nccl_comm_kernels(name: str, op: str | None) -> None:
    assert classify_kernel(name) == ("comm", op)
    assert not is_nccl_kernel(name)


@pytest.mark.parametrize("name", COMPUTE)
def test_compute_kernels_are_not_comm(name: str) -> None:
    assert classify_kernel(name) == ("compute", None)


@pytest.mark.parametrize(
    ("name", "cat"),
    [
        ("Memcpy DtoD (Device -> Device)", "memcpy"),
        ("Memcpy HtoD (Pageable -> Device)", "memcpy"),
        ("[CUDA memcpy Host-to-Device]", "memcpy"),
        ("[CUDA memcpy Peer-to-Peer]", "memcpy"),
        ("Memset (Device)", "memset"),
        ("[CUDA memset]", "memset"),
        ("", "other"),
        ("   ", "other"),
    ],
)
def test_memcpy_memset_and_empty(name: str, cat: str) -> None:
    assert classify_kernel(name) == (cat, None)


@pytest.mark.parametrize(
    ("raw", "short"),
    [
        (
            "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "ncclDevKernel_AllGather_RING_LL",
        ),
        (
            "void at::native::(anonymous namespace)::k<float>(int, float (*)(int))",
            "at::native::(anonymous namespace)::k<float>",
        ),
        ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),
        ("void foo<(bool)1>()", "foo<(bool)1>"),
        ("(unbalanced", "(unbalanced"),
    ],
)
def test_strip_params_keeps_inner_parentheses(raw: str, short: str) -> None:
    assert strip_params(raw) == short


def _sample_kernel_names(root: Path) -> list[str]:
    names: set[str] = set()
    for path in sorted((root / "kineto").iterdir()):
        if path.name.endswith(".txt"):
            continue
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as fh:
            doc = json.load(fh)
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        for e in events:
            if isinstance(e, dict) and str(e.get("cat", "")).lower() == "kernel":
                names.add(e.get("name", ""))
    return sorted(names)


def test_real_kernel_names_vectorised_matches_scalar(shared_samples: Path) -> None:
    names = _sample_kernel_names(shared_samples)
    assert len(names) > 500
    series = pl.Series("name", names * 2 + [None])  # repeats and a null
    out = classify_kernels(series)
    assert out.columns == ["category", "comm_op"]
    assert out.height == series.len()
    expected = [classify_kernel(n) for n in names * 2] + [("other", None)]
    assert list(zip(out["category"], out["comm_op"], strict=True)) == expected
    # independent count: NCCL kernels by prefix, DeepEP kernels by namespace
    nccl = {n for n in names if re.match(r"^(void )?nccl", n)}
    deepep = {n for n in names if re.search(r"ep::inter\w*::(dispatch|combine|notify|cached)", n)}
    comm = {n for n, c in zip(names, out["category"][: len(names)], strict=True) if c == "comm"}
    assert comm == nccl | deepep
    assert nccl and deepep


def test_categories_are_the_documented_ones() -> None:
    assert set(CATEGORIES) == {"compute", "comm", "memcpy", "memset", "other"}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=30))
def test_classify_never_fails_and_vector_equals_scalar(names: list[str]) -> None:
    out = classify_kernels(pl.Series(names, dtype=pl.Utf8))
    assert out.height == len(names)
    for name, cat, op in zip(names, out["category"], out["comm_op"], strict=True):
        assert (cat, op) == classify_kernel(name)
        assert cat in CATEGORIES
        assert op is None or cat == "comm"
