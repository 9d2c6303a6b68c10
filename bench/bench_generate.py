"""Benchmark ``commscope generate`` at scale: 1024 ranks x 50 iterations in every format.

Usage (from the project root)::

    .venv/bin/python bench/bench_generate.py [--out DIR] [--config configs/synthetic_gpt3b_1024.toml]
        [--iterations N] [--jobs J] [--formats nccl,deepspeed,kineto,nsys] [--keep]

Prints wall time, bytes written (per format), files, and peak resident memory of the parent and
of the worker processes (``ru_maxrss``; the workers' value is the largest of them). The output
folder is deleted afterwards unless ``--keep`` is given. This is a script, not a test.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from commscope.pipeline.run_config import load_generate_config  # noqa: E402
from commscope.synthetic import generate, with_overrides  # noqa: E402


def _mib(kib: int) -> float:
    return kib / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "synthetic_gpt3b_1024.toml")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: a temp folder)")
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--formats", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the generated folder")
    args = ap.parse_args()

    run, opts = load_generate_config(args.config)
    changes: dict[str, object] = {"iterations": args.iterations, "jobs": args.jobs}
    if args.formats:
        changes["formats"] = tuple(args.formats.split(","))
    opts = with_overrides(opts, **changes)
    out = args.out or Path(tempfile.mkdtemp(prefix="commscope-bench-")) / "run"
    print(
        f"generating {run.world} ranks x {opts.iterations} iterations "
        f"({run.model.name}, p={run.parallel.pp} t={run.parallel.tp} d={run.parallel.dp}, m={run.micro_batches}), "
        f"formats {','.join(opts.formats)}, jobs {opts.jobs} -> {out}",
        flush=True,
    )
    t0 = time.perf_counter()
    res = generate(run, opts, out)
    wall = time.perf_counter() - t0
    per_format = {}
    for fmt in (*opts.formats, "truth"):
        folder = out / fmt
        if folder.is_dir():
            per_format[fmt] = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    self_rss = _mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    child_rss = _mib(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    print(f"wall time        {wall:10.1f} s")
    print(f"bytes written    {res.bytes_written / 1e9:10.2f} GB ({res.bytes_written:,} B)")
    for fmt, size in per_format.items():
        print(f"  {fmt:<14} {size / 1e9:10.2f} GB")
    print(f"files            {sum(len(v) for v in res.files.values()):10d}")
    print(f"peak RSS parent  {self_rss:10.0f} MiB")
    print(f"peak RSS worker  {child_rss:10.0f} MiB")
    print(
        f"throughput       {res.bytes_written / 1e6 / wall:10.1f} MB/s, "
        f"{run.world * opts.iterations / wall:,.0f} rank-iterations/s"
    )
    if not args.keep:
        shutil.rmtree(out.parent if args.out is None else out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
