"""HTA 0.5.0's figures for one set of Kineto traces: per rank-iteration comm/compute/hidden comm.

Run with the HTA venv's Python (``/tmp/hta-venv/bin/python``; never the project venv), by
``bench/peers.py``. It loads the traces twice with HTA's own loader (``hta.common.trace.Trace``
with the communication args enabled, then ``load_traces``, exactly what ``TraceAnalysis`` does):

* ``default``: HTA as a user gets it: event times rounded to whole µs (``round_down_time_stamps``:
  ``ts`` rounded up, ``end`` rounded down, when the trace's ``ts`` are fractional) and the last
  ProfilerStep dropped (``include_last_profiler_step=False``: only GPU kernels whose correlated
  CPU event starts before the last step's start are kept);
* ``exact``: ``HTA_DISABLE_NS_ROUNDING=1`` and ``include_last_profiler_step=True`` (kernels whose
  CPU launch starts before the last step's END): the same inputs as commscope, for a fair check.

In both, HTA keeps a GPU kernel only when a CPU event with the same ``correlation`` survives the
filter (``_filter_irrelevant_gpu_kernels``), i.e. kernels without a launch event are dropped, but
only when the trace has two or more ProfilerStep names (with none or one, HTA filters nothing).
A kernel's iteration is its correlated CPU event's ProfilerStep (``add_iteration``: step.ts <=
launch.ts < step.end), -1 when none (HTA leaves NaN for some: read as -1 here).

Per (rank, iteration) it runs HTA's own analyzers on that iteration's rows:
``CommunicationAnalysis.get_comm_comp_overlap`` (share of the merged COMMUNICATION-kernel time
during which a COMPUTATION kernel also runs; HTA rounds the percentage to 2 decimals for display,
so this script sets that module's ``round`` to the identity to read the full ratio) and
``BreakdownAnalysis.get_temporal_breakdown`` (``compute_time(us)``: union of COMPUTATION
kernels). comm time = the union of COMMUNICATION kernels by HTA's ``merge_kernel_intervals``
(the denominator HTA divides by); hidden comm = ratio x comm time. Kernel types are HTA's
``get_kernel_type``: COMMUNICATION = name matches ``^nccl.*Kernel``; MEMORY = ``^Memcpy``,
``^Memset``, ``^dma``; COMPUTATION = anything not matching ``^nccl.*Kernel``, ``.*Memcpy``,
``Memset``, ``.*Sync``. All times in µs.

It also lists every COMMUNICATION kernel HTA kept (exact mode): rank, iteration, correlation,
ts, dur and the collective args HTA parses (``Collective name``, ``In/Out msg nelems``,
``dtype``, ``Group size``). HTA 0.5.0 computes no bandwidth.

Usage: /tmp/hta-venv/bin/python bench/hta_peers.py TRACE_DIR  (prints one JSON line)
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
import warnings
from typing import Any


class _OneIteration:
    """The two attributes HTA's analyzers read from a ``Trace``: ``traces`` and ``symbol_table``."""

    def __init__(self, traces: dict[int, Any], symbol_table: Any) -> None:
        self.traces = traces
        self.symbol_table = symbol_table


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def _load(trace_dir: str, *, exact: bool) -> tuple[Any, dict[str, Any]]:
    """HTA's ``Trace`` loaded as ``TraceAnalysis`` would, with kernel counts around the filter."""
    if exact:
        os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    else:
        os.environ.pop("HTA_DISABLE_NS_ROUNDING", None)
    from hta.common.trace import Trace
    from hta.common.trace_filter import GPUKernelFilter
    from hta.configs.parser_config import ParserConfig

    cfg = ParserConfig.enable_communication_args(ParserConfig.get_default_cfg())
    t = Trace(trace_dir=trace_dir, parser_config=cfg)
    # Trace.load_traces, unrolled to count the GPU rows before and after HTA's filter.
    t.parse_traces(use_multiprocessing=True, use_memory_profiling=True)
    before = {r: len(GPUKernelFilter()(df, t.symbol_table)) for r, df in t.traces.items()}
    t.align_and_filter_trace(include_last_profiler_step=exact)
    after = {r: len(GPUKernelFilter()(df, t.symbol_table)) for r, df in t.traces.items()}
    for rank, df in t.traces.items():
        df = t.traces[rank].set_index("index", drop=False)
        df.index.names = [None]
        t.traces[rank] = df
    t.is_parsed = True
    steps = sorted(k for k in t.symbol_table.get_sym_id_map() if "ProfilerStep" in k)
    # add_iteration sets the iteration of stream < 0 (CPU) and stream > 0 rows only: GPU rows on
    # stream 0 (ROCm's default stream) keep NaN, i.e. no iteration.
    no_iter = {
        r: int((df["stream"].eq(0) & df["iteration"].isna()).sum()) for r, df in t.traces.items()
    }
    info = {
        "gpu_rows_stream0_without_iteration": no_iter,
        "gpu_rows_parsed": before,
        "gpu_rows_kept": after,
        "profiler_step_names": len(steps),
        "filter_applied": len(steps) >= 2,
        "min_ts_us": _num(t.min_ts),
    }
    return t, info


def _per_iteration(t: Any) -> list[dict[str, Any]]:
    """HTA's comm/compute/hidden comm per (rank, iteration), by HTA's own analyzers."""
    import hta.analyzers.communication_analysis as ca
    from hta.analyzers.breakdown_analysis import BreakdownAnalysis
    from hta.analyzers.communication_analysis import CommunicationAnalysis
    from hta.utils.utils import KernelType, get_kernel_type, merge_kernel_intervals

    ca.round = lambda x, *_a: x  # type: ignore[attr-defined]  # full-precision ratio
    sym = t.symbol_table.get_sym_table()
    out: list[dict[str, Any]] = []
    for rank, df in sorted(t.traces.items()):
        df = df.assign(iteration=df["iteration"].fillna(-1))  # NaN: HTA found no step either
        gpu = df[df["stream"].ne(-1)]
        for it in sorted(int(i) for i in gpu["iteration"].unique()):
            sub = df[df["iteration"].eq(it)]
            g = sub[sub["stream"].ne(-1)].copy()
            types = g["name"].map(lambda n: get_kernel_type(sym[n]))
            comm = g[types.eq(KernelType.COMMUNICATION.name)].copy()
            comp = g[types.eq(KernelType.COMPUTATION.name)].copy()
            comm_us = 0.0
            if len(comm):
                m = merge_kernel_intervals(comm)
                comm_us = float((m["end"] - m["ts"]).sum())
            row: dict[str, Any] = {
                "rank": int(rank),
                "iteration": it,
                "comm_kernels": len(comm),
                "compute_kernels": len(comp),
                "comm_us": comm_us,
                "compute_us": None,
                "hidden_us": None,
                "overlap_pct": None,
            }
            one = _OneIteration({rank: sub}, t.symbol_table)
            try:
                tb = BreakdownAnalysis.get_temporal_breakdown(one, visualize=False)
                row["compute_us"] = _num(tb["compute_time(us)"].iloc[0])
            except Exception as exc:  # an analyzer that fails on one iteration must not hide others
                row["compute_error"] = f"{type(exc).__name__}: {exc}"[:200]
            if len(comm) and len(comp):  # else nothing to overlap: HTA's ratio is 0/0 or 0
                try:
                    ov = CommunicationAnalysis.get_comm_comp_overlap(one, visualize=False)
                    pct = _num(ov["comp_comm_overlap_pctg"].iloc[0])
                    row["overlap_pct"] = pct
                    row["hidden_us"] = pct * comm_us / 100 if pct is not None else None
                except Exception as exc:
                    row["overlap_error"] = f"{type(exc).__name__}: {exc}"[:200]
            else:
                row["hidden_us"] = 0.0
            out.append(row)
    return out


def _collectives(t: Any) -> list[dict[str, Any]]:
    """Every COMMUNICATION kernel HTA kept, with the collective args it parsed."""
    from hta.utils.utils import KernelType, get_kernel_type

    sym = t.symbol_table.get_sym_table()
    cols = ("collective_name", "in_msg_nelems", "out_msg_nelems", "msg_dtype", "group_size")
    out: list[dict[str, Any]] = []
    for rank, df in sorted(t.traces.items()):
        g = df[df["stream"].ne(-1)]
        for rec in g.to_dict("records"):
            name = sym[rec["name"]]
            if get_kernel_type(name) != KernelType.COMMUNICATION.name:
                continue
            row = {
                "rank": int(rank),
                "iteration": -1 if rec["iteration"] != rec["iteration"] else int(rec["iteration"]),
                "correlation": int(rec["correlation"]),
                "ts_us": float(rec["ts"]) + float(t.min_ts),
                "dur_us": float(rec["dur"]),
                "name": name[:80],
            }
            for c in cols:
                if c in rec:
                    v = rec[c]
                    row[c] = v if isinstance(v, str) else _num(v)
            out.append(row)
    return out


def _overall(t: Any) -> list[dict[str, Any]]:
    """HTA's whole-trace ``get_comm_comp_overlap`` per rank, as HTA prints it (2 decimals)."""
    import hta.analyzers.communication_analysis as ca
    from hta.analyzers.communication_analysis import CommunicationAnalysis

    ca.round = round  # type: ignore[attr-defined]
    try:
        df = CommunicationAnalysis.get_comm_comp_overlap(t, visualize=False)
    except Exception as exc:
        return [{"error": f"{type(exc).__name__}: {exc}"[:200]}]
    return [
        {"rank": int(r), "overlap_pct": _num(p)}
        for r, p in zip(df["rank"], df["comp_comm_overlap_pctg"], strict=True)
    ]


def main(trace_dir: str) -> int:
    """Load ``trace_dir`` with HTA in both modes; print the figures as one JSON line."""
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    import hta
    import pandas

    answer: dict[str, Any] = {
        "hta_version": getattr(hta, "__version__", None),
        "pandas_version": pandas.__version__,
    }
    for mode in ("default", "exact"):
        t0 = time.perf_counter()
        try:
            t, info = _load(trace_dir, exact=mode == "exact")
            res: dict[str, Any] = {"load": info, "overall": _overall(t)}
            res["iterations"] = _per_iteration(t)
            if mode == "exact":
                res["collectives"] = _collectives(t)
        except Exception as exc:  # HTA cannot read some real traces: record why
            res = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        res["seconds"] = round(time.perf_counter() - t0, 2)
        answer[mode] = res
    print(json.dumps(answer, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
