"""Kineto traces: commscope ingest (1 and 2 jobs) and derive against HTA load + overlap.

Input (SYNTHETIC, cached): ``commscope generate --formats kineto --kineto-compress none`` of an
8-rank GPT-3B run (bench/configs/gpt3b_8rank.toml; about 2.5 MB per rank and iteration). The
generator writes no CUDA runtime events, and HTA keeps only GPU kernels whose ``correlation``
matches a CPU-side launch (``_filter_irrelevant_gpu_kernels``), so without them HTA drops every
kernel and its overlap is NaN. The bench therefore adds one ``cudaLaunchKernel`` event
(``cat: cuda_runtime``, same correlation, 5 µs before the kernel) per kernel, as real traces
have, and BOTH tools read these augmented files.

HTA runs in its own venv (``--hta-python``; ``holistictraceanalysis==0.5.0``); wall time and
peak memory (summed over the process tree: HTA parses ranks in a process pool) of each side.
The target compares ingest with HTA's load (its wall minus the overlap step); commscope's derive
(every mart, the overlap among them) is measured in its own process and reported beside.
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
    one = measure([*CHILD, "ingest", str(ctx.scratch("kineto1")), "bench_kineto", str(folder)])
    store2 = ctx.scratch("kineto2")
    two = measure([*CHILD, "ingest", "--jobs", "2", str(store2), "bench_kineto", str(folder)])
    der = measure([*CHILD, "derive", str(store2), "bench_kineto"])
    if not ctx.keep:
        shutil.rmtree(ctx.workdir / "scratch", ignore_errors=True)
    overlap_s = hta.out.get("overlap_s")
    hta_load = hta.wall_s - overlap_s if isinstance(overlap_s, (int, float)) else None
    both_wall = two.wall_s + der.wall_s
    hta_note = (
        f"HTA load = its wall minus get_comm_comp_overlap ({hta_load or 0:.2f} s: interpreter, "
        f"imports and TraceAnalysis, which parses ranks in a process pool)"
    )
    detail = {
        "hta": hta.out,
        "hta_wall_s": round(hta.wall_s, 2),
        "hta_load_wall_s": round(hta_load, 2) if hta_load is not None else None,
        "ingest_1job": {"wall_s": round(one.wall_s, 2), **one.out},
        "ingest_2jobs": {"wall_s": round(two.wall_s, 2), **two.out},
        "derive": {"wall_s": round(der.wall_s, 2), **der.out},
    }
    rows: list[Row] = []
    for label, m in (("1 job", one), ("--jobs 2", two)):
        speed = ratio(hta_load, m.wall_s)
        rows.append(
            Row(
                NAME,
                case,
                f"ingest wall s ({label})",
                round(m.wall_s, 2),
                "HTA 0.5.0 load",
                round(hta_load, 2) if hta_load is not None else None,
                speed,
                ">= 5x faster",
                bool(speed is not None and speed >= 5),
                "ratio = HTA load wall / commscope ingest wall (every table, Parquet, every event "
                f"accounted); {hta_note}",
                detail if label == "1 job" else {},
            )
        )
        mem = ratio(m.peak_mb, hta.peak_mb)
        rows.append(
            Row(
                NAME,
                case,
                f"peak RSS MB (ingest, {label})",
                round(m.peak_mb, 0),
                "HTA 0.5.0 load + overlap",
                round(hta.peak_mb, 0),
                mem,
                "<= 0.25 of HTA",
                bool(mem is not None and mem <= 0.25),
                "ratio = commscope / HTA; summed over each process tree; "
                f"ru_maxrss commscope {m.maxrss_mb:.0f}, HTA {hta.maxrss_mb:.0f}",
            )
        )
    rows += [
        Row(
            NAME,
            case,
            "wall s (load + overlap)",
            round(both_wall, 2),
            "HTA 0.5.0",
            round(hta.wall_s, 2),
            ratio(hta.wall_s, both_wall),
            "",
            None,
            "ratio = HTA wall / commscope (ingest --jobs 2 + derive of every mart); overlap: "
            f"commscope {der.out.get('overlap_pct')} % ({der.out.get('overlap_source')}), "
            f"HTA {hta.out.get('mean_overlap_pct')} % (comm kernels overlapped by compute)",
        ),
        Row(
            NAME,
            case,
            "peak RSS MB (derive)",
            round(der.peak_mb, 0),
            "HTA 0.5.0 load + overlap",
            round(hta.peak_mb, 0),
            ratio(der.peak_mb, hta.peak_mb),
            "",
            None,
            "DuckDB computing every mart (capped at half the RAM; not part of the ingest target)",
        ),
    ]
    return rows


__all__ = ["NAME", "run", "trace_set"]
