"""PyTorch profiler (Kineto) Chrome traces, one per rank, in the current (2024+) format.

Why: Kineto traces give per-rank GPU timelines: when each NCCL kernel and compute kernel ran,
plus the collective's metadata (``record_param_comms``), which together allow the on/off and
overlap analyses the paper makes. The shape follows ``libkineto/src/output_json.cpp`` as written
by torch 2.5-2.13 (the bundled real sample ``sample_traces/ds_pipe_pp2_dp2_cpu`` is one) and
FORMATS_timeline.md §2:

* top level: ``schemaVersion``, ``deviceProperties`` (the node's GPUs), CUDA versions,
  ``trace_id``, ``record_shapes``, ``distributedInfo`` (backend nccl, rank, world_size,
  ``pg_count``, ``pg_config`` of the rank's process groups, ``nccl_version``), ``host_name``,
  ``commscope_synthetic: true`` (the label; Kineto's site keys allow extra keys),
  ``displayTimeUnit``, ``baseTimeNanoseconds`` (whole seconds) and ``traceEvents``; ``ts``/``dur``
  are µs relative to the base, with 3 decimals;
* per iteration: ``ProfilerStep#<k>`` (``user_annotation`` on the main thread, k = iteration);
* per communication call: a ``record_param_comms`` CPU op with the c10d collective args
  (``Collective name`` allreduce / _allgather_base / _reduce_scatter_base / send / recv /
  all_to_allv, ``In/Out msg nelems``, ``Group size``, ``dtype``, ``In/Out split size``, process
  group name/description/ranks, ``Rank``), and the NCCL kernel (``cat: kernel``, pid = device,
  tid = the process group's stream) spanning the call on the GPU (waiting included), carrying the
  same ``External id`` and a copy of the collective args (``Src Rank``/``Dst Rank`` for p2p);
* per kernel (communication and compute): the ``cudaLaunchKernel`` runtime event
  (``cat: cuda_runtime``, on the CPU thread) that launched it, carrying the kernel's
  ``correlation``: inside the ``record_param_comms`` op for a communication kernel,
  :data:`LAUNCH_LEAD_NS` before the kernel for a compute one (so a reader can attribute every
  kernel to the step that launched it, as in real traces);
* per compute segment: one kernel on stream 7;
* the profiler span and ``Record Window End`` at the end.

Times are the simulation's plus the node's clock skew (the skew scenario); only iterations
selected by ``profile_iterations`` are written (all by default).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import polars as pl

from commscope.synthetic.common import (
    C10D_NAMES,
    COMPUTE_STREAM,
    Names,
    comm_stream,
    compute_kernel,
    nccl_kernel,
)
from commscope.synthetic.program import DTYPES, ELEM_BYTES
from commscope.synthetic.simulate import Simulation

STEP_LEAD_NS = 30_000
"""``ProfilerStep#k`` starts this long before the rank's iteration (python overhead)."""
CPU_LEAD_NS = 20_000
"""A ``record_param_comms`` op starts this long before its kernel."""
CPU_DUR_NS = 5_000
LAUNCH_IN_OP_NS = 1_000
"""A communication kernel's ``cudaLaunchKernel`` starts this long after its
``record_param_comms`` op (inside it: the op lasts :data:`CPU_DUR_NS`)."""
LAUNCH_LEAD_NS = 20_000
"""A compute kernel's ``cudaLaunchKernel`` starts this long before the kernel (less than
:data:`STEP_LEAD_NS`, so the launch lies in the kernel's own ProfilerStep)."""
LAUNCH_DUR_NS = 3_000


def _launch_json() -> pl.Expr:
    """The ``cudaLaunchKernel`` event at ``_lts`` on thread ``_pid`` of kernel ``_corr``."""
    return pl.format(
        '  {{\n    "ph": "X",\n    "cat": "cuda_runtime",\n    "name": "cudaLaunchKernel",\n'
        '    "pid": {},\n    "tid": {},\n    "ts": {},\n    "dur": {}\n    ,\n'
        '    "args": {{\n      "External id": {}, "cbid": 211, "correlation": {}\n    }}\n  }},',
        pl.col("_pid"),
        pl.col("_pid"),
        _us("_lts"),
        pl.lit(f"{LAUNCH_DUR_NS // 1000}.{LAUNCH_DUR_NS % 1000:03d}"),
        pl.col("_ext"),
        pl.col("_corr"),
    )


@dataclass
class _Trace:
    rank: int
    fh: IO[bytes]
    raw: IO[bytes]
    path: Path
    base_ns: int
    ext: int = 1
    corr: int = 1
    first_ts: int | None = None
    last_ts: int = 0


def _us(col: str) -> pl.Expr:
    """Integer ns column -> Kineto µs text with 3 decimals."""
    c = pl.col(col)
    return pl.concat_str(
        [(c // 1000).cast(pl.Utf8), pl.lit("."), (c % 1000).cast(pl.Utf8).str.zfill(3)]
    )


class KinetoWriter:
    """Writes the Kineto trace of every rank of a lane, iteration by iteration."""

    name = "kineto"

    def __init__(self, sim: Simulation, names: Names) -> None:
        """Remember the simulation and the output naming."""
        self.sim = sim
        self.names = names
        self.opts = sim.opts
        self.cluster = sim.cluster
        self._traces: dict[int, _Trace] = {}
        self._group_info = self._group_frame([])

    # -- static per-run info -----------------------------------------------------------------

    def _group_frame(self, ranks: list[int]) -> pl.DataFrame:
        """Per (rank, group key) of ``ranks``: PG name, ranks text, size, own PG rank, stream."""
        rows = []
        for r in ranks:
            for key, g in self.cluster.by_rank[r].items():
                if key == "world":
                    continue
                start, stride = g.rank_start_stride
                rows.append(
                    (
                        r,
                        key,
                        g.pg_name,
                        g.ranks_text,
                        g.nranks,
                        g.comm_rank(r),
                        comm_stream(g),
                        start,
                        stride,
                    )
                )
        return pl.DataFrame(
            rows,
            schema={
                "rank": pl.Int32,
                "group": pl.Utf8,
                "pg": pl.Utf8,
                "pg_ranks": pl.Utf8,
                "gsize": pl.Int32,
                "grank": pl.Int32,
                "stream": pl.Int64,
                "gstart": pl.Int64,
                "gstride": pl.Int64,
            },
            orient="row",
        )

    def _header(self, rank: int, base_ns: int) -> str:
        info = self.cluster.ranks[rank]
        run = self.sim.run
        gpus_here = [ri for ri in self.cluster.ranks if ri.node == info.node]
        props = []
        for ri in gpus_here:
            props.append(
                "    {\n"
                f'      "id": {ri.cuda_dev}, "name": "NVIDIA GPU (synthetic)", "totalGlobalMem": 25438126080,\n'
                '      "computeMajor": 8, "computeMinor": 6,\n'
                '      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 1536,\n'
                '      "regsPerBlock": 65536, "warpSize": 32,\n'
                '      "sharedMemPerBlock": 49152, "numSms": 82\n'
                '    , "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 101376, "sharedMemPerMultiprocessor": 102400\n'
                "    }"
            )
        groups = [g for g in self.cluster.rank_groups(rank)]
        pg_config = []
        for g in groups:
            pg_config.append(
                {
                    "pg_name": g.pg_name,
                    "pg_desc": "default_pg" if g.kind == "world" else "undefined",
                    "backend_config": "cuda:nccl",
                    "pg_size": g.nranks,
                    "ranks": list(g.members),
                }
            )
        dist = {
            "backend": "nccl",
            "rank": rank,
            "world_size": run.world,
            "pg_count": len(self.cluster.groups),
            "pg_config": pg_config,
            "nccl_version": self.opts.nccl_version,
        }
        trace_id = f"{(self.opts.seed * 1_000_003 + rank) & 0xFFFFFFFFFFFFFFFF:016X}{rank:016X}"
        return (
            "{\n"
            '  "schemaVersion": 1,\n'
            '  "deviceProperties": [\n' + ",\n".join(props) + "\n  ],\n"
            '  "cupti_version": 20,\n'
            '  "cuda_runtime_version": 12040,\n'
            '  "cuda_driver_version": 12040,\n'
            f'  "trace_id": "{trace_id}",\n'
            '  "record_shapes": 1,\n'
            f'  "distributedInfo": {json.dumps(dist)},\n'
            f'  "host_name": "{info.host}",\n'
            '  "commscope_synthetic": true,\n'
            '  "displayTimeUnit": "ms",\n'
            f'  "baseTimeNanoseconds": {base_ns},\n'
            '  "traceEvents": [\n'
        )

    def _metadata(self, tr: _Trace) -> list[str]:
        info = self.cluster.ranks[tr.rank]
        ts = "0.000"
        out = []

        def meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> str:
            return (
                "  {\n"
                f'    "ph": "M", "name": "{name}", "ts": {ts}, "pid": {pid}, "tid": {tid},\n'
                f'    "args": {json.dumps(args)}\n'
                "  }"
            )

        out.append(meta("process_name", info.pid, 0, {"name": "python"}))
        out.append(meta("process_labels", info.pid, 0, {"labels": "CPU"}))
        out.append(meta("thread_name", info.pid, info.pid, {"name": f"thread {info.pid} (python)"}))
        out.append(meta("process_name", info.cuda_dev, 0, {"name": "python"}))
        out.append(meta("process_labels", info.cuda_dev, 0, {"labels": f"GPU {info.cuda_dev}"}))
        streams = {COMPUTE_STREAM} | {
            comm_stream(g) for k, g in self.cluster.by_rank[tr.rank].items() if k != "world"
        }
        for s in sorted(streams):
            out.append(meta("thread_name", info.cuda_dev, s, {"name": f"stream {s} "}))
        return out

    # -- lifecycle ---------------------------------------------------------------------------

    def open_lane(self, ranks: list[int]) -> None:
        """Create the trace files of ``ranks`` and write their headers."""
        self._traces = {}
        self._group_info = self._group_frame(ranks)
        for r in ranks:
            path = self.names.kineto(r, self.opts.kineto_compress)
            path.parent.mkdir(parents=True, exist_ok=True)
            raw = path.open("wb")
            fh: IO[bytes] = raw
            if self.opts.kineto_compress == "gz":
                fh = gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=1, mtime=0)
            first = self._first_profiled()
            epoch = (
                self.opts.start_epoch_ns + self.cluster.skew_ns(r) + self.sim.iter_start[first][r]
            )
            base = (epoch - STEP_LEAD_NS - 1_000_000_000) // 1_000_000_000 * 1_000_000_000
            tr = _Trace(r, fh, raw, path, base)
            fh.write(self._header(r, base).encode())
            fh.write((",\n".join(self._metadata(tr)) + ",\n").encode())
            self._traces[r] = tr

    def _first_profiled(self) -> int:
        its = self.opts.profile_iterations
        return its[0] if its else 0

    def close_lane(self) -> list[Path]:
        """Write the profiler span events and close every trace."""
        paths = []
        for tr in self._traces.values():
            first = tr.first_ts or 0
            span = (
                "  {\n"
                '    "ph": "X",\n    "cat": "Trace",\n    "name": "PyTorch Profiler (0)",\n'
                '    "pid": "Spans",\n    "tid": "PyTorch Profiler",\n'
                f'    "ts": {first / 1000:.3f},\n    "dur": {(tr.last_ts - first) / 1000:.3f}\n'
                '    ,\n    "args": {\n      "Op count": 0\n    }\n  },\n'
                "  {\n"
                '    "ph": "i",\n    "s": "g",\n    "name": "Record Window End",\n'
                f'    "pid": "",\n    "tid": "",\n    "ts": {tr.last_ts / 1000:.3f}\n'
                "  }\n"
            )
            name = tr.path.name.removesuffix(".gz")
            tr.fh.write((span + f'  ],"traceName": "{name}" }}\n').encode())
            tr.fh.close()
            if tr.fh is not tr.raw:
                tr.raw.close()
            paths.append(tr.path)
        self._traces = {}
        return paths

    # -- events ------------------------------------------------------------------------------

    def write_lane(self, iteration: int, events: pl.DataFrame) -> None:
        """Append one iteration's events of every open trace (skipped if not profiled)."""
        if not self.opts.profiled(iteration) or not self._traces:
            return
        ev = events.filter(pl.col("rank").is_in(list(self._traces)))
        offsets = pl.DataFrame(
            {
                "rank": list(self._traces),
                "_off": [
                    self.opts.start_epoch_ns + self.cluster.skew_ns(r) - tr.base_ns
                    for r, tr in self._traces.items()
                ],
                "_ext0": [tr.ext for tr in self._traces.values()],
                "_corr0": [tr.corr for tr in self._traces.values()],
                "_pid": [self.cluster.ranks[r].pid for r in self._traces],
                "_dev": [self.cluster.ranks[r].cuda_dev for r in self._traces],
            },
            schema={
                "rank": pl.Int32,
                "_off": pl.Int64,
                "_ext0": pl.Int64,
                "_corr0": pl.Int64,
                "_pid": pl.Int64,
                "_dev": pl.Int64,
            },
        )
        ev = ev.join(offsets, on="rank", how="left").with_columns(
            (pl.int_range(pl.len()).over("rank", order_by="seq") + 1).alias("_n")
        )
        ev = ev.with_columns(
            (pl.col("_ext0") + pl.col("_n")).alias("_ext"),
            (pl.col("_corr0") + pl.col("_n")).alias("_corr"),
        )
        steps = self._steps(iteration, offsets)
        comms = self._comm_events(ev)
        comps = self._compute_events(ev)
        allev = pl.concat([steps, comms, comps], how="vertical_relaxed").sort(["rank", "_ts", "_o"])
        counts = ev.group_by("rank").agg(
            pl.len().alias("n"), (pl.col("t_end") + pl.col("_off")).max().alias("last")
        )
        joined = allev.group_by("rank", maintain_order=True).agg(
            pl.col("json").str.join("\n").alias("text"), pl.col("_ts").min().alias("first")
        )
        for r, text, first in joined.iter_rows():
            tr = self._traces[r]
            tr.fh.write(text.encode())
            tr.fh.write(b"\n")
            tr.first_ts = int(first) if tr.first_ts is None else tr.first_ts
        for r, n, last in counts.iter_rows():
            tr = self._traces[r]
            tr.ext += int(n) + 1
            tr.corr += int(n) + 1
            tr.last_ts = max(tr.last_ts, int(last))

    def _steps(self, iteration: int, offsets: pl.DataFrame) -> pl.DataFrame:
        rows = []
        for r, off, ext0, pid in offsets.select("rank", "_off", "_ext0", "_pid").iter_rows():
            start, end = self.sim.iteration_bounds(iteration, r)
            ts = start - STEP_LEAD_NS + off
            dur = end - start
            rows.append((r, ts, dur, ext0, pid))
        df = pl.DataFrame(
            rows,
            schema={
                "rank": pl.Int32,
                "_ts": pl.Int64,
                "_dur": pl.Int64,
                "_ext": pl.Int64,
                "_pid": pl.Int64,
            },
            orient="row",
        )
        js = pl.format(
            '  {{\n    "ph": "X",\n    "cat": "user_annotation",\n    "name": "ProfilerStep#{}",\n'
            '    "pid": {},\n    "tid": {},\n    "ts": {},\n    "dur": {}\n    ,\n'
            '    "args": {{\n      "External id": {},"Record function id": 0, "Ev Idx": {}\n    }}\n  }},',
            pl.lit(iteration),
            pl.col("_pid"),
            pl.col("_pid"),
            _us("_ts"),
            _us("_dur"),
            pl.col("_ext"),
            pl.col("_ext"),
        )
        return df.select("rank", "_ts", pl.lit(0).alias("_o"), js.alias("json"))

    def _comm_events(self, ev: pl.DataFrame) -> pl.DataFrame:
        comm = ev.filter(pl.col("kind") == "comm")
        if comm.is_empty():
            return pl.DataFrame(
                schema={"rank": pl.Int32, "_ts": pl.Int64, "_o": pl.Int32, "json": pl.Utf8}
            )
        comm = comm.join(self._group_info, on=["rank", "group"], how="left")
        dt_name = {k: v[1] for k, v in DTYPES.items()}
        eb = pl.col("dtype").replace_strict(ELEM_BYTES, return_dtype=pl.Int64)
        tok = self.sim.tok_bytes
        ver = self.opts.nccl
        kernel_names = {(op, dt): nccl_kernel(op, dt, ver)[1] for op in C10D_NAMES for dt in DTYPES}
        comm = comm.with_columns(
            pl.col("op").replace_strict(C10D_NAMES, return_dtype=pl.Utf8).alias("_coll"),
            pl.col("dtype").replace_strict(dt_name, return_dtype=pl.Utf8).alias("_dt"),
            pl.concat_str([pl.col("op"), pl.lit("|"), pl.col("dtype")])
            .replace_strict(
                {f"{k[0]}|{k[1]}": v for k, v in kernel_names.items()}, return_dtype=pl.Utf8
            )
            .alias("_kname"),
            (pl.col("msg_bytes") // eb).alias("_in"),
        )
        out_n = (
            pl.when(pl.col("op") == "all_gather")
            .then(pl.col("_in") * pl.col("gsize"))
            .when(pl.col("op") == "reduce_scatter")
            .then(pl.col("_in") // pl.col("gsize"))
            .when(pl.col("op") == "all_to_all")
            .then(pl.col("rsplits").list.sum() // eb)
            .otherwise(pl.col("_in"))
        )

        def split_text(col: str) -> pl.Expr:
            return (
                pl.when(pl.col("op") == "all_to_all")
                .then(
                    pl.concat_str(
                        [
                            pl.lit("["),
                            (
                                pl.col(col)
                                .list.eval(pl.element() // tok)
                                .cast(pl.List(pl.Utf8))
                                .list.join(", ")
                            ),
                            pl.lit("]"),
                        ]
                    )
                )
                .otherwise(pl.lit("[]"))
            )

        p2p = pl.col("op").is_in(["send", "recv"])
        peer_grank = pl.when(pl.col("peer") < pl.col("rank")).then(0).otherwise(1)
        rank_arg = pl.when(p2p).then(peer_grank).otherwise(pl.col("grank"))
        comm = comm.with_columns(
            out_n.alias("_out"),
            split_text("splits").alias("_isplit"),
            split_text("rsplits").alias("_osplit"),
            rank_arg.alias("_rarg"),
            pl.when(pl.col("op") == "send")
            .then(pl.col("grank"))
            .otherwise(peer_grank)
            .alias("_src"),
            pl.when(pl.col("op") == "send")
            .then(peer_grank)
            .otherwise(pl.col("grank"))
            .alias("_dst"),
            (pl.col("t_post") + pl.col("_off")).alias("_kts"),
            (pl.col("t_end") - pl.col("t_post")).alias("_kdur"),
        )
        coll_args = pl.format(
            '"Collective name": "{}", "In msg nelems": {}, "Out msg nelems": {}, "Group size": {}, "dtype": "{}", '
            '"In split size": "{}", "Out split size": "{}", "Process Group Name": "{}", '
            '"Process Group Description": "undefined", "Process Group Ranks": "{}"',
            pl.col("_coll"),
            pl.col("_in"),
            pl.col("_out"),
            pl.col("gsize"),
            pl.col("_dt"),
            pl.col("_isplit"),
            pl.col("_osplit"),
            pl.col("pg"),
            pl.col("pg_ranks"),
        )
        p2p_args = (
            pl.when(p2p)
            .then(pl.format(', "Src Rank": {}, "Dst Rank": {}', pl.col("_src"), pl.col("_dst")))
            .otherwise(pl.lit(""))
        )
        cpu = pl.format(
            '  {{\n    "ph": "X",\n    "cat": "cpu_op",\n    "name": "record_param_comms",\n'
            '    "pid": {},\n    "tid": {},\n    "ts": {},\n    "dur": {}\n    ,\n'
            '    "args": {{\n      "External id": {},"Record function id": 0, {}, "Global rank start": {}, '
            '"Global rank stride": {}, "Rank": {}, "Ev Idx": {}\n    }}\n  }},',
            pl.col("_pid"),
            pl.col("_pid"),
            _us("_cts"),
            pl.lit(f"{CPU_DUR_NS // 1000}.{CPU_DUR_NS % 1000:03d}"),
            pl.col("_ext"),
            coll_args,
            pl.col("gstart"),
            pl.col("gstride"),
            pl.col("_rarg"),
            pl.col("_ext"),
        )
        kernel = pl.format(
            '  {{\n    "ph": "X",\n    "cat": "kernel",\n    "name": "{}",\n'
            '    "pid": {},\n    "tid": {},\n    "ts": {},\n    "dur": {}\n    ,\n'
            '    "args": {{\n      "External id": {}, "queued": 0, "device": {}, "context": 1, "stream": {}, '
            '"correlation": {}, "registers per thread": 96, "shared memory": 0, "blocks per SM": 0.04878, '
            '"warps per SM": 0.97561, "grid": [4, 1, 1], "block": [640, 1, 1], "est. achieved occupancy %": 0, {}{}\n    }}\n  }},',
            pl.col("_kname"),
            pl.col("_dev"),
            pl.col("stream"),
            _us("_kts"),
            _us("_kdur"),
            pl.col("_ext"),
            pl.col("_dev"),
            pl.col("stream"),
            pl.col("_corr"),
            coll_args,
            p2p_args,
        )
        comm = comm.with_columns((pl.col("_kts") - CPU_LEAD_NS).alias("_cts"))
        cpu_df = comm.select(
            "rank", pl.col("_cts").alias("_ts"), pl.lit(1).alias("_o"), cpu.alias("json")
        )
        k_df = comm.select(
            "rank", pl.col("_kts").alias("_ts"), pl.lit(2).alias("_o"), kernel.alias("json")
        )
        launch_df = comm.with_columns((pl.col("_cts") + LAUNCH_IN_OP_NS).alias("_lts")).select(
            "rank", pl.col("_lts").alias("_ts"), pl.lit(1).alias("_o"), _launch_json().alias("json")
        )
        return pl.concat([cpu_df, launch_df, k_df])

    def _compute_events(self, ev: pl.DataFrame) -> pl.DataFrame:
        comp = ev.filter(pl.col("kind") == "compute")
        if comp.is_empty():
            return pl.DataFrame(
                schema={"rank": pl.Int32, "_ts": pl.Int64, "_o": pl.Int32, "json": pl.Utf8}
            )
        labels = comp["name"].unique().to_list()
        mapping = {label: compute_kernel(label) for label in labels}
        comp = comp.with_columns(
            pl.col("name").replace_strict(mapping, return_dtype=pl.Utf8).alias("_kname"),
            (pl.col("t_start") + pl.col("_off")).alias("_kts"),
            (pl.col("t_end") - pl.col("t_start")).alias("_kdur"),
        )
        kernel = pl.format(
            '  {{\n    "ph": "X",\n    "cat": "kernel",\n    "name": "{}",\n'
            '    "pid": {},\n    "tid": {},\n    "ts": {},\n    "dur": {}\n    ,\n'
            '    "args": {{\n      "External id": {}, "queued": 0, "device": {}, "context": 1, "stream": {}, '
            '"correlation": {}, "registers per thread": 128, "shared memory": 98304, "blocks per SM": 1.95, '
            '"warps per SM": 15.6, "grid": [160, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %": 16\n    }}\n  }},',
            pl.col("_kname"),
            pl.col("_dev"),
            pl.lit(COMPUTE_STREAM),
            _us("_kts"),
            _us("_kdur"),
            pl.col("_ext"),
            pl.col("_dev"),
            pl.lit(COMPUTE_STREAM),
            pl.col("_corr"),
        )
        comp = comp.with_columns((pl.col("_kts") - LAUNCH_LEAD_NS).alias("_lts"))
        return pl.concat(
            [
                comp.select(
                    "rank",
                    pl.col("_lts").alias("_ts"),
                    pl.lit(3).alias("_o"),
                    _launch_json().alias("json"),
                ),
                comp.select(
                    "rank",
                    pl.col("_kts").alias("_ts"),
                    pl.lit(3).alias("_o"),
                    kernel.alias("json"),
                ),
            ]
        )
