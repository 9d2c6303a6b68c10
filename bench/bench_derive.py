"""Benchmark ``derive`` at scale: GPT-3B runs of 64, 256 and 1024 ranks x 50 iterations.

Usage (from the project root)::

    .venv/bin/python bench/bench_derive.py [--ranks 64,256,1024] [--iterations 50]
        [--formats nccl] [--work /tmp/commscope-bench-derive] [--keep DIR]

Each size is generated once (configs/synthetic_gpt3b_1024.toml with dp scaled to the rank
count, pp 8 x tp 4 kept, 8 micro-batches) into ``WORK/gen<N>`` and ingested into
``WORK/store<N>``; both are reused when present. Then ``derive_run`` is timed: load (copy of the
run's rows, SQL modules), each intermediate object (computed once) and each mart. Prints the
figures and writes ``bench/results_derive.json`` (with the load average around each derive: on a
shared machine other processes inflate the wall time). Derive caps DuckDB's memory at half the RAM
(``COMMSCOPE_DERIVE_MEMORY_LIMIT`` overrides; the 1024-rank run spills under 8 GB and slows
down). ``--keep DIR`` copies the derived marts to ``DIR/<ranks>/<mart>.parquet``, so that two
derives (before and after a change) can be compared with ``bench/diff_marts.py``. This is a
script, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from commscope.pipeline.derive import derive_run  # noqa: E402
from commscope.pipeline.ingest import ingest_paths  # noqa: E402
from commscope.pipeline.store import Store  # noqa: E402
from commscope.synthetic import generate, split_config, with_overrides  # noqa: E402

CONFIG = ROOT / "configs" / "synthetic_gpt3b_1024.toml"


def _prepare(work: Path, ranks: int, iterations: int, formats: tuple[str, ...]) -> Store:
    """Generate and ingest the run of ``ranks`` ranks unless already done."""
    data: dict[str, Any] = tomllib.loads(CONFIG.read_text())
    par = data["parallel"]
    dp = ranks // (par["pp"] * par["tp"])
    if dp * par["pp"] * par["tp"] != ranks or dp < 1:
        raise SystemExit(f"{ranks} ranks is not a multiple of pp*tp = {par['pp'] * par['tp']}")
    par["dp"] = dp
    data["model"]["global_batch"] = data["model"]["micro_batch"] * 8 * dp
    gen = work / f"gen{ranks}"
    store_dir = work / f"store{ranks}"
    if not (gen / "truth.json").is_file():
        run, opts = split_config(data)
        opts = with_overrides(opts, iterations=iterations, formats=formats, jobs=1)
        t0 = time.perf_counter()
        generate(run, opts, gen)
        print(f"generated {ranks} ranks in {time.perf_counter() - t0:.1f} s", flush=True)
    store = Store.open(store_dir)
    if f"r{ranks}" not in store.runs():
        t0 = time.perf_counter()
        ingest_paths(store, [gen], run_id=f"r{ranks}")
        print(f"ingested {ranks} ranks in {time.perf_counter() - t0:.1f} s", flush=True)
    return store


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="64,256,1024")
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--formats", default="nccl")
    ap.add_argument("--work", type=Path, default=Path("/tmp/commscope-bench-derive"))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results_derive.json")
    ap.add_argument("--keep", type=Path, default=None, help="copy the marts to KEEP/<ranks>/")
    args = ap.parse_args()
    formats = tuple(f for f in args.formats.split(",") if f)
    results: list[dict[str, Any]] = []
    for ranks in (int(r) for r in args.ranks.split(",")):
        store = _prepare(args.work, ranks, args.iterations, formats)
        rows = (
            store.connect()
            .execute("SELECT count(*) FROM comm_ops WHERE run_id = ?", [f"r{ranks}"])
            .fetchone()
        )
        load_before = os.getloadavg()[0]
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        res = derive_run(store, f"r{ranks}")
        total = time.perf_counter() - t0
        cpu_s = time.process_time() - cpu0  # all threads of this process (DuckDB's included)
        entry = {
            "ranks": ranks,
            "iterations": args.iterations,
            "formats": list(formats),
            "comm_ops_rows": int(rows[0]) if rows else 0,
            "cpus": os.cpu_count(),
            # 1-minute load average before/after: other processes share the cores, so a
            # figure taken under load overstates derive's own time.
            "loadavg_before": round(load_before, 2),
            "loadavg_after": round(os.getloadavg()[0], 2),
            "process_cpu_s": round(cpu_s, 2),
            "total_s": round(total, 2),
            "load_s": round(res.load_seconds, 2),
            "intermediate_s": {k: round(v, 2) for k, v in res.intermediate_seconds.items()},
            "mart_s": {k: round(v, 2) for k, v in res.seconds.items()},
            "mart_rows": res.marts,
        }
        results.append(entry)
        if args.keep is not None and res.generation is not None:
            keep = args.keep / str(ranks)
            keep.mkdir(parents=True, exist_ok=True)
            for mart in res.marts:
                src = store.generation_path(store.marts_dir(), mart, f"r{ranks}", res.generation)
                shutil.copyfile(src, keep / f"{mart}.parquet")
        print(json.dumps(entry, indent=1), flush=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
