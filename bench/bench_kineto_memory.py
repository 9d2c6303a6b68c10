"""Benchmark: peak RSS and time to ingest a large synthetic Kineto trace (issue 3).

Writes a SYNTHETIC PyTorch-profiler trace of about ``--gb`` GB (current format: distributedInfo,
baseTimeNanoseconds, ProfilerStep markers, aten ops, record_param_comms, compute and NCCL
kernels with collective args), then ingests it into a temporary store in a child process and
reports wall time, MB/s and the child's peak RSS (``ru_maxrss``). A second child that only
reads the file (gzip-free, byte copy) gives the read baseline in the same run.

Usage: python bench/bench_kineto_memory.py --gb 1.0 [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADER = (
    '{"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},'
    ' "baseTimeNanoseconds": 1767189312000000000, "displayTimeUnit": "ms",'
    ' "traceName": "synthetic_bench_trace", "traceEvents": [\n'
)


def write_trace(path: Path, target_bytes: int) -> int:
    """Stream a synthetic trace of about ``target_bytes``; return the events written."""
    n = 0
    ts = 1000.0
    step = 0
    with path.open("w") as fh:
        fh.write(HEADER)
        written = len(HEADER)
        while written < target_bytes:
            parts = [
                f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", '
                f'"pid": 100, "tid": 100, "ts": {ts:.3f}, "dur": 5000.000, "args": {{}}}}'
            ]
            t = ts
            for i in range(200):
                parts.append(
                    f'{{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100, "tid": 100,'
                    f' "ts": {t:.3f}, "dur": 3.500, "args": {{"External id": {n + i}, '
                    f'"Record function id": 0, "Ev Idx": {n + i}}}}}'
                )
                parts.append(
                    f'{{"ph": "X", "cat": "kernel", "name": "ampere_fp16_s16816gemm_fp16_128x128", '
                    f'"pid": 0, "tid": 7, "ts": {t + 5:.3f}, "dur": 12.250, "args": '
                    f'{{"device": 0, "stream": 7, "correlation": {n + i}, "External id": {n + i},'
                    f' "grid": [80, 1, 1], "block": [256, 1, 1]}}}}'
                )
                if i % 20 == 0:
                    args = (
                        f'"Collective name": "allreduce", "In msg nelems": 1048576, '
                        f'"Out msg nelems": 1048576, "Group size": 8, "dtype": "BFloat16", '
                        f'"Process Group Name": "0", "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]",'
                        f' "External id": {n + i + 100000000}'
                    )
                    parts.append(
                        f'{{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 100,'
                        f' "tid": 100, "ts": {t + 1:.3f}, "dur": 2.000, "args": {{{args}}}}}'
                    )
                    parts.append(
                        f'{{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",'
                        f' "pid": 0, "tid": 20, "ts": {t + 6:.3f}, "dur": 40.000, "args": {{"device": 0,'
                        f' "stream": 20, "correlation": {n + i + 100000000}, {args}}}}}'
                    )
                t += 20.0
            chunk = ",\n".join(parts) + ",\n"
            fh.write(chunk)
            written += len(chunk)
            n += len(parts)
            ts += 5000.0
            step += 1
        fh.write(
            '{"ph": "i", "name": "Record Window End", "pid": 100, "tid": 100, "ts": 0.0, "s": "g"}\n]}\n'
        )
    return n + 1


CHILD_INGEST = """
import sys, time, resource, json
from pathlib import Path
from commscope.pipeline.store import Store
from commscope.pipeline.ingest import ingest_file
t0 = time.perf_counter()
res = ingest_file(Store.open(Path(sys.argv[2])), Path(sys.argv[1]), run_id="bench", fmt="kineto")
dt = time.perf_counter() - t0
print(json.dumps({"status": res.status, "seconds": dt, "events": res.counts.total,
                  "rows": sum(res.rows.values()), "message": res.message,
                  "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""

CHILD_READ = """
import sys, time, resource, json
t0 = time.perf_counter()
with open(sys.argv[1], "rb") as fh:
    while fh.read(8 << 20):
        pass
print(json.dumps({"seconds": time.perf_counter() - t0,
                  "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def child(code: str, *args: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.0, help="trace size in GB (1e9 bytes)")
    ap.add_argument("--keep", type=Path, default=None, help="write the trace here and keep it")
    ap.add_argument("--json", type=Path, default=None, help="write the figures as JSON")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        trace = folder / "synthetic_bench_rank0.pt.trace.json"
        t0 = time.perf_counter()
        events = write_trace(trace, int(args.gb * 1e9))
        gen_s = time.perf_counter() - t0
        size = trace.stat().st_size
        read = child(CHILD_READ, str(trace))
        ing = child(CHILD_INGEST, str(trace), str(Path(tmp) / "store"))
    mb = size / 1e6
    result = {
        "trace_bytes": size,
        "events": events,
        "generate_s": round(gen_s, 2),
        "read_s": round(float(read["seconds"]), 2),
        "ingest_s": round(float(ing["seconds"]), 2),
        "ingest_mb_per_s": round(mb / float(ing["seconds"]), 1),
        "ingest_peak_rss_mb": round(int(ing["maxrss_kb"]) / 1024, 1),
        "read_peak_rss_mb": round(int(read["maxrss_kb"]) / 1024, 1),
        "peak_rss_over_trace_size": round(int(ing["maxrss_kb"]) * 1024 / size, 3),
        "status": ing["status"],
        "rows": ing["rows"],
    }
    for k, v in result.items():
        print(f"{k:>28}: {v}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if ing["status"] == "ingested" else 1


if __name__ == "__main__":
    raise SystemExit(main())
