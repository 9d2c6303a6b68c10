"""Baseline: Holistic Trace Analysis (HTA) loads a folder of Kineto traces and computes overlap.

Run with the bench venv's Python (``/tmp/hta-venv/bin/python``, which has
``holistictraceanalysis==0.5.0``, pandas and numpy; never the project venv). It does what an HTA
user does: ``TraceAnalysis(trace_dir=...)`` (parses every rank's JSON into pandas frames) and
``get_comm_comp_overlap()`` (the per-rank share of communication time overlapped with
computation), then prints one JSON line with the timings and the mean overlap.

Usage: /tmp/hta-venv/bin/python bench/hta_load.py TRACE_DIR
"""

from __future__ import annotations

import json
import logging
import sys
import time


def main(trace_dir: str) -> int:
    """Load ``trace_dir`` with HTA, compute comm/comp overlap, print timings as JSON."""
    logging.disable(logging.WARNING)
    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis

    t1 = time.perf_counter()
    analyzer = TraceAnalysis(trace_dir=trace_dir)
    t2 = time.perf_counter()
    overlap = analyzer.get_comm_comp_overlap(visualize=False)
    t3 = time.perf_counter()
    col = [c for c in overlap.columns if "overlap" in c.lower()]
    mean = float(overlap[col[0]].mean()) if col else None
    print(
        json.dumps(
            {
                "import_s": t1 - t0,
                "load_s": t2 - t1,
                "overlap_s": t3 - t2,
                "ranks": len(overlap),
                "mean_overlap_pct": mean,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
