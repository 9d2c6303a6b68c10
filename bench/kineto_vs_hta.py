"""Kineto traces: commscope ingest + derive (overlap figure) against HTA load + overlap.

Input (SYNTHETIC, cached): ``commscope generate --formats kineto --kineto-compress none`` of an
8-rank GPT-3B run (bench/configs/gpt3b_8rank.toml; about 2.5 MB per rank and iteration). The
generator writes no CUDA runtime events, and HTA keeps only GPU kernels whose ``correlation``
matches a CPU-side launch (``_filter_irrelevant_gpu_kernels``), so without them HTA drops every
kernel and its overlap is NaN. The bench therefore adds one ``cudaLaunchKernel`` event
(``cat: cuda_runtime``, same correlation, 5 µs before the kernel) per kernel, as real traces
have, and BOTH tools read these augmented files.

HTA runs in its own venv (``--hta-python``; ``holistictraceanalysis==0.5.0``); wall time and
peak memory (summed over the process tree: HTA parses ranks in a process pool) of each side.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench._common import (
    CHILD,
    ROOT,
    Context,
    Row,
    commscope_generate,
    files_under,
    measure,
    ratio,
    total_bytes,
)

NAME = "kineto_vs_hta"


def _augment(src: Path, dest: Path) -> None:
    """Copy one trace, adding a ``cudaLaunchKernel`` runtime event per GPU kernel."""
    doc = json.loads(src.read_text())
    events = doc["traceEvents"]
    cpu = next(
        (e for e in events if str(e.get("name", "")).startswith("ProfilerStep")),
        {"pid": 0, "tid": 0},
    )
    launches = []
    for e in events:
        if e.get("cat") == "kernel" and "correlation" in e.get("args", {}):
            corr = e["args"]["correlation"]
            launches.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": cpu["pid"],
                    "tid": cpu["tid"],
                    "ts": round(float(e["ts"]) - 5.0, 3),
                    "dur": 3.0,
                    "args": {
                        "correlation": corr,
                        "External id": e["args"].get("External id", corr),
                    },
                }
            )
    events.extend(launches)
    dest.write_text(json.dumps(doc))


def trace_set(ctx: Context, iterations: int) -> Path:
    """The cached folder of augmented traces (only traces: HTA parses every file it finds)."""
    gen = commscope_generate(
        Path(__file__).resolve().parent / "configs" / "gpt3b_8rank.toml",
        ctx.workdir / "gen" / f"kineto8_i{iterations}",
        iterations=iterations,
        formats="kineto",
        extra=["--kineto-compress", "none"],
    )
    out = ctx.workdir / f"kineto8_i{iterations}_launches"
    marker = out / ".bench-done"
    if marker.exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for f in sorted((gen / "kineto").iterdir()):
        _augment(f, out / f.name)
    marker.write_text(str(gen))
    return out


def run(ctx: Context) -> list[Row]:
    """Measure and return the rows of this benchmark."""
    if not ctx.hta_python.exists():
        return [
            Row(NAME, "skipped", "", None, note=f"no HTA venv at {ctx.hta_python} (see README)")
        ]
    iters = 2 if ctx.quick else ctx.kineto_iterations
    folder = trace_set(ctx, iters)
    traces = [f for f in files_under(folder) if f.name.endswith(".json")]
    mb = total_bytes(traces) / 1e6
    case = f"8 ranks x {iters} iterations, {len(traces)} traces, {mb:.0f} MB"
    measure(["sh", "-c", 'cat "$@" > /dev/null', "sh", *map(str, traces)])  # page cache
    hta = measure([str(ctx.hta_python), str(ROOT / "bench" / "hta_load.py"), str(folder)])
    cs = measure([*CHILD, "ingest-derive", str(ctx.scratch("kineto")), "bench_kineto", str(folder)])
    if not ctx.keep:
        shutil.rmtree(ctx.workdir / "scratch", ignore_errors=True)
    speed = ratio(hta.wall_s, cs.wall_s)
    mem = ratio(cs.peak_mb, hta.peak_mb)
    detail = {
        "commscope": {
            k: cs.out.get(k)
            for k in (
                "ingest_s",
                "derive_s",
                "lines_total",
                "rows",
                "overlap_source",
                "overlap_pct",
            )
        },
        "hta": hta.out,
        "commscope_wall_s": round(cs.wall_s, 2),
        "hta_wall_s": round(hta.wall_s, 2),
    }
    return [
        Row(
            NAME,
            case,
            "wall s (load + overlap)",
            round(cs.wall_s, 2),
            "HTA 0.5.0",
            round(hta.wall_s, 2),
            speed,
            ">= 5x faster",
            bool(speed is not None and speed >= 5),
            "ratio = HTA wall / commscope wall; commscope = ingest + every mart; "
            f"overlap: commscope {cs.out.get('overlap_pct')} % ({cs.out.get('overlap_source')}), "
            f"HTA {hta.out.get('mean_overlap_pct')} % (comm kernels overlapped by compute)",
            detail,
        ),
        Row(
            NAME,
            case,
            "peak RSS MB",
            round(cs.peak_mb, 0),
            "HTA 0.5.0",
            round(hta.peak_mb, 0),
            mem,
            "<= 0.25 of HTA",
            bool(mem is not None and mem <= 0.25),
            "ratio = commscope / HTA; summed over each process tree; "
            f"ru_maxrss commscope {cs.maxrss_mb:.0f}, HTA {hta.maxrss_mb:.0f}",
        ),
    ]


__all__ = ["NAME", "run", "trace_set"]
