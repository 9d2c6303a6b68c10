"""``python -m bench``: every performance figure of issue 9 with its baseline, one table + JSON.

Benchmarks (one module each, run in this order): text_logs, ingest_scale (issue 21: real logs,
no superlinear path), kineto_vs_hta, memory_bound,
marts_scale, report_scale, serve_once (issue 21: ``serve --once`` and ``demo`` against the same
work by plain commands), peers (issue 16: commscope, HTA and the test oracle side by side on the
real Kineto traces; its tables are printed and stored under ``peers`` in the JSON). Inputs are SYNTHETIC (``commscope generate``, replicated) and cached
in the work dir; each measurement runs in its own child process (wall time and peak RSS of that
process). The machine's load averages are recorded before and after, because it is shared.

Usage::

    .venv/bin/python -m bench [--quick] [--only text_logs,kineto_vs_hta] [--workdir DIR]
        [--text-gb 1] [--sizes 1,4,16] [--ranks 64,256,1024] [--iterations 50]
        [--kineto-iterations 16] [--hta-python /tmp/hta-venv/bin/python] [--json PATH] [--keep]
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

from bench._common import ROOT, Context, Row, load_average

BENCHMARKS = (
    "text_logs",
    "ingest_scale",
    "kineto_vs_hta",
    "memory_bound",
    "marts_scale",
    "report_scale",
    "serve_once",
    "peers",
)


def _fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


def print_table(rows: list[Row]) -> None:
    """Print the results as one aligned table."""
    head = (
        "benchmark",
        "case",
        "metric",
        "commscope",
        "baseline",
        "baseline value",
        "ratio",
        "target",
        "met",
    )
    body = [
        (
            r.bench,
            r.case[:58],
            r.metric,
            _fmt(r.value),
            r.baseline or "-",
            _fmt(r.baseline_value),
            _fmt(r.ratio),
            r.target or "-",
            {True: "yes", False: "NO", None: "-"}[r.met],
        )
        for r in rows
    ]
    widths = [
        max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)
    ]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for b in body:
        print("  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)))
    for r in rows:
        if r.note:
            print(f"* {r.bench} / {r.metric}: {r.note}")


def _merge_peers(
    path: Path, result: dict[str, object], peers: dict[str, object], *, only_peers: bool
) -> dict[str, object]:
    """The JSON to write: ``--only peers`` replaces only the ``peers`` section of the file.

    The peers figures are correctness checks, not timings, so a peers-only run keeps the
    performance figures the file already holds; any other run writes its own figures as before.
    """
    base: dict[str, object] = {}
    if only_peers and path.exists():
        try:
            base = json.loads(path.read_text())
        except json.JSONDecodeError:
            base = {}
    out = base if only_peers and base else result
    out["peers"] = peers
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the selected benchmarks, print the table, write the JSON."""
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small smoke-run sizes (a minute or two)")
    ap.add_argument("--only", default="", help=f"comma-separated subset of {','.join(BENCHMARKS)}")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/commscope-bench"))
    ap.add_argument("--text-gb", type=float, default=1.0, help="text-log input size, GB")
    ap.add_argument("--sizes", default="1,4,16", help="memory-bound file sizes, GB")
    ap.add_argument("--ranks", default="64,256,1024", help="world sizes of the marts/report runs")
    ap.add_argument("--iterations", type=int, default=50, help="iterations of the marts runs")
    ap.add_argument("--kineto-iterations", type=int, default=16)
    ap.add_argument("--hta-python", type=Path, default=Path("/tmp/hta-venv/bin/python"))
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "results.json")
    ap.add_argument("--keep", action="store_true", help="keep the large generated files")
    a = ap.parse_args(argv)
    only = [x for x in a.only.split(",") if x] or list(BENCHMARKS)
    unknown = set(only) - set(BENCHMARKS)
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    ctx = Context(
        workdir=a.workdir,
        quick=a.quick,
        text_gb=a.text_gb,
        memory_gb=tuple(float(x) for x in a.sizes.split(",")),
        kineto_iterations=a.kineto_iterations,
        mart_ranks=tuple(int(x) for x in a.ranks.split(",")),
        mart_iterations=a.iterations,
        hta_python=a.hta_python,
        keep=a.keep,
    )
    ctx.workdir.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = load_average()
    rows: list[Row] = []
    seconds: dict[str, float] = {}
    peers: dict[str, object] | None = None
    for name in (b for b in BENCHMARKS if b in only):
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            mod = importlib.import_module(f"bench.{name}")
            if name == "peers":
                peer_rows, peers = mod.run_peers(ctx)
                rows.extend(peer_rows)
            else:
                rows.extend(mod.run(ctx))
        except Exception as exc:  # one failing benchmark must not lose the others' figures
            traceback.print_exc()
            rows.append(Row(name, "failed", "", None, note=f"{type(exc).__name__}: {exc}"[:500]))
        seconds[name] = round(time.perf_counter() - t0, 1)
        print(f"[bench] {name} done in {seconds[name]} s", file=sys.stderr, flush=True)
    print_table(rows)
    result: dict[str, object] = {
        "started": started,
        "command": "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version()},
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "quick": a.quick,
        "bench_seconds": seconds,
        "rows": [r.as_dict() for r in rows],
    }
    if peers is not None:
        peers.update(
            started=started,
            command=result["command"],
            rows=[r.as_dict() for r in rows if r.bench == "peers"],
        )
        result = _merge_peers(a.json, result, peers, only_peers=set(only) == {"peers"})
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(
        f"load average before {load_before}, after {result['load_average_after']}; wrote {a.json}"
    )
    return 0 if all(r.met is not False for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
