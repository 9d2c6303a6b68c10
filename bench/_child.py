"""The commscope side of each measurement, run as a child process by ``bench._common.measure``.

Subcommands (each prints one JSON line with its own timings and what it produced):

* ``ingest STORE RUN [--jobs N] PATH...``: ``ingest_paths`` (all tables, Parquet, line
  accounting checked per file by ingest itself), without the one-off catalog build;
* ``catalog STORE RUN``: that catalog build (``Store.refresh_catalog``), timed on its own;
* ``derive STORE RUN``: ``derive_run`` (every mart) and the overlap figure;
* ``report STORE RUN OUT``: ``commscope.reports.html.build_report`` if it exists;
* ``peers STORE RUN PATH...``: ingest + derive, then the per rank-iteration comm/compute/hidden
  comm of ``iteration_breakdown`` and every timed call of ``comm_ops`` (``bench/peers.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def _ingest(store_dir: Path, run_id: str, paths: list[Path], jobs: int) -> dict[str, object]:
    from commscope.pipeline.ingest import ingest_paths
    from commscope.pipeline.store import Store

    t0 = time.perf_counter()
    results = ingest_paths(
        Store.open(store_dir), paths, run_id=run_id, jobs=jobs, build_catalog=False
    )
    total = parsed = ignored = rejected = rows = size = 0
    errors: list[str] = []
    for r in results:
        total += r.counts.total
        parsed += r.counts.parsed
        ignored += r.counts.ignored
        rejected += r.counts.rejected
        rows += sum(r.rows.values())
        size += r.bytes
        if r.status != "ingested":
            errors.append(f"{r.path}: {r.status}: {r.message}")
    return {
        "ingest_s": time.perf_counter() - t0,
        "files": len(results),
        "bytes": size,
        "lines_total": total,
        "lines_parsed": parsed,
        "lines_ignored": ignored,
        "lines_rejected": rejected,
        "balanced": total == parsed + ignored + rejected,
        "rows": rows,
        "errors": errors[:5],
        "n_errors": len(errors),
    }


def _overlap(store_dir: Path, run_id: str) -> dict[str, object]:
    """Run-level share of communication hidden behind computation, from the marts.

    Uses ``iteration_breakdown`` (exposed/hidden communication) when it exists, else the
    ``on_off`` duty cycle (communication-active share of the iteration).
    """
    from commscope.pipeline.store import Store

    con = Store.open(store_dir).connect()
    try:
        names = {
            r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
        }
        if "iteration_breakdown" in names:
            cols = {r[0] for r in con.execute("DESCRIBE iteration_breakdown").fetchall()}
            hidden = next((c for c in ("hidden_comm_ns", "comm_hidden_ns") if c in cols), None)
            exposed = next((c for c in ("exposed_comm_ns", "comm_exposed_ns") if c in cols), None)
            if hidden and exposed:
                row = con.execute(
                    f"SELECT 100 * sum({hidden}) / nullif(sum({hidden}) + sum({exposed}), 0) "
                    "FROM iteration_breakdown WHERE run_id = $r",
                    {"r": run_id},
                ).fetchone()
                return {
                    "overlap_source": "iteration_breakdown",
                    "overlap_pct": row[0] if row else None,
                }
        if "on_off" in names:
            row = con.execute(
                "SELECT 100 * avg(duty_cycle) FROM on_off WHERE run_id = $r", {"r": run_id}
            ).fetchone()
            return {"overlap_source": "on_off duty cycle", "overlap_pct": row[0] if row else None}
    finally:
        con.close()
    return {"overlap_source": None, "overlap_pct": None}


def _derive(store_dir: Path, run_id: str) -> dict[str, object]:
    from commscope.pipeline.derive import derive_run
    from commscope.pipeline.store import Store

    t0 = time.perf_counter()
    res = derive_run(Store.open(store_dir), run_id)
    out: dict[str, object] = {
        "derive_s": time.perf_counter() - t0,
        "marts": res.marts,
        "mart_seconds": {k: round(v, 3) for k, v in res.seconds.items()},
    }
    out.update(_overlap(store_dir, run_id))
    return out


def _catalog(store_dir: Path) -> dict[str, object]:
    from commscope.pipeline.store import Store

    t0 = time.perf_counter()
    Store.open(store_dir).refresh_catalog()
    return {"catalog_s": time.perf_counter() - t0}


def _report(store_dir: Path, run_id: str, out: Path) -> dict[str, object]:
    try:
        from commscope.reports.html import build_report  # type: ignore[import-not-found]
    except ImportError as exc:
        return {"skipped": f"commscope.reports.html.build_report not importable: {exc}"}
    from commscope.pipeline.store import Store

    t0 = time.perf_counter()
    path = build_report(Store.open(store_dir), run_id, out)
    html = Path(path) if path is not None else out
    return {"report_s": time.perf_counter() - t0, "html_bytes": html.stat().st_size}


_PEERS_ITERATIONS = """
SELECT rank, iteration, comm_ns, t_comp_ns, hidden_comm_ns, calls, comp_source, source
FROM iteration_breakdown WHERE run_id = $r ORDER BY rank, iteration
"""

# A call's correlation id: the comm kernel that starts it (same start; the one that also ends
# it first, since two kernels of a whole-µs trace can start at the same µs).
_PEERS_CALLS = """
SELECT c.rank, c.iteration, c.op, c.ts_ns, c.dur_ns, c.msg_bytes, c.group_size,
       c.timing_source, c.kernel_count,
       (SELECT k.correlation FROM kernels k
        WHERE k.run_id = c.run_id AND k.rank IS NOT DISTINCT FROM c.rank AND k.ts_ns = c.ts_ns
          AND k.category = 'comm'
        ORDER BY (k.ts_ns + k.dur_ns = c.ts_ns + c.dur_ns) DESC, k.correlation
        LIMIT 1) AS correlation
FROM comm_ops c WHERE c.run_id = $r ORDER BY c.rank, c.ts_ns
"""


def _peers(store_dir: Path, run_id: str, paths: list[Path]) -> dict[str, object]:
    """Ingest and derive ``paths``; return what ``bench/peers.py`` compares with HTA (ns)."""
    from commscope.pipeline.store import Store

    out: dict[str, object] = {"ingest": _ingest(store_dir, run_id, paths, 1)}
    out["derive"] = {k: v for k, v in _derive(store_dir, run_id).items() if k != "mart_seconds"}
    con = Store.open(store_dir).connect()
    try:
        for key, sql in (("iterations", _PEERS_ITERATIONS), ("calls", _PEERS_CALLS)):
            cur = con.execute(sql, {"r": run_id})
            cols = [d[0] for d in cur.description]
            out[key] = [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
        row = con.execute(
            "SELECT max(busbw_gb_s) FROM effective_bandwidth WHERE run_id = $r", {"r": run_id}
        ).fetchone()
        out["max_effective_busbw_gb_s"] = row[0] if row else None
        row = con.execute(
            "SELECT count(*) FILTER (WHERE iteration IS NULL), count(*) FROM kernels "
            "WHERE run_id = $r",
            {"r": run_id},
        ).fetchone()
        out["kernels_outside_steps"], out["kernels"] = (row or (None, None))[:2]
    finally:
        con.close()
    return out


def main(argv: list[str]) -> int:
    """Dispatch one subcommand; print its JSON answer."""
    ap = argparse.ArgumentParser(prog="python -m bench._child")
    ap.add_argument("cmd", choices=["ingest", "catalog", "derive", "report", "peers"])
    ap.add_argument("store", type=Path)
    ap.add_argument("run")
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--jobs", type=int, default=1)
    a = ap.parse_args(argv)
    out: dict[str, object] = {}
    if a.cmd == "ingest":
        out.update(_ingest(a.store, a.run, a.paths, a.jobs))
    if a.cmd == "derive":
        out.update(_derive(a.store, a.run))
    if a.cmd == "catalog":
        out.update(_catalog(a.store))
    if a.cmd == "report":
        out.update(_report(a.store, a.run, a.paths[0]))
    if a.cmd == "peers":
        out.update(_peers(a.store, a.run, a.paths))
    print(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
