"""Profile ``derive`` of one stored run step by step: wall and CPU seconds of the load, of each
intermediate object and of each mart, DuckDB's operator profile of chosen steps, and optionally
every intermediate and mart written to Parquet (to compare two versions of the SQL with
``bench/diff_marts.py``).

Usage (from the project root)::

    .venv/bin/python bench/profile_derive.py STORE RUN_ID [--explain int_a,int_b]
        [--profile-dir DIR] [--dump DIR] [--marts]

It runs what ``commscope.pipeline.derive.derive_run`` runs (``connect_for_derive``, then each intermediate
materialised in load order, then each mart written to Parquet by ``write_mart`` in a temporary
folder), without publishing anything. ``--explain`` names
the steps whose DuckDB profile (``EXPLAIN ANALYZE``-style operator tree with timings) is written
to ``--profile-dir/<name>.txt``. This is a script, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from commscope.pipeline import derive as d  # noqa: E402
from commscope.pipeline import run_config as rc  # noqa: E402
from commscope.pipeline.sql_modules import discover  # noqa: E402
from commscope.pipeline.store import Store  # noqa: E402


def _top_operators(path: Path, n: int = 12) -> None:
    """Print the ``n`` operators of a DuckDB JSON profile with the most time."""
    flat: list[tuple[float, str, int, str]] = []

    def walk(node: dict[str, Any]) -> None:
        extra = node.get("extra_info") or {}
        keys = ("Join Type", "Conditions", "Groups", "Aggregates", "Table", "CTE Name", "Function")
        what = " ".join(f"{k}={v}" for k, v in extra.items() if k in keys)
        timing = node.get("timing", node.get("operator_timing")) or 0.0
        kind = node.get("type", node.get("operator_type"))
        rows = node.get("intermediate_rows", node.get("operator_cardinality")) or 0
        flat.append((float(timing), str(kind), int(rows), what.replace("\n", " ")[:150]))
        for child in node.get("children", []):
            walk(child)

    doc = json.loads(path.read_text())
    for root in doc.get("operator", [doc]):
        walk(root)
    for t, op, card, what in sorted(flat, reverse=True)[:n]:
        print(f"    {t:7.2f} s  {op:<22} {card:>10} rows  {what}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("run_id")
    ap.add_argument("--explain", default="", help="comma list of steps to profile")
    ap.add_argument("--profile-dir", type=Path, default=Path("/tmp/commscope-profile"))
    ap.add_argument(
        "--dump", type=Path, default=None, help="write every step to DUMP/<name>.parquet"
    )
    ap.add_argument("--marts", action="store_true", help="also compute the marts")
    ap.add_argument("--stop-after", default="", help="stop after this intermediate")
    args = ap.parse_args()
    explain = {s for s in args.explain.split(",") if s}
    store = Store.open(args.store)
    stored = rc.load(store, args.run_id)
    times: dict[str, tuple[float, float]] = {}
    load0 = os.getloadavg()[0]
    c0, t0 = time.process_time(), time.perf_counter()
    con, _ = d.connect_for_derive(store, args.run_id, stored, prune=True)
    times["load"] = (time.perf_counter() - t0, time.process_time() - c0)
    print(f"load: {times['load'][0]:.2f} s wall, {times['load'][1]:.2f} s cpu", flush=True)
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
    args.profile_dir.mkdir(parents=True, exist_ok=True)
    mods = discover()

    folder = d._private_folder(con)  # as derive: call-sized intermediates as Parquet there

    mart_dir = Path(tempfile.mkdtemp(prefix="commscope-profile-marts-"))

    def run(name: str, sql: str | Callable[[], object], count: str | None = None) -> None:
        if name in explain:
            out = args.profile_dir / f"{name}.json"
            con.execute("SET enable_profiling = 'json'")
            con.execute(f"SET profiling_output = '{out}'")
        c1, t1 = time.process_time(), time.perf_counter()
        if callable(sql):
            sql()
        else:
            con.execute(sql)
        times[name] = (time.perf_counter() - t1, time.process_time() - c1)
        if name in explain:
            con.execute("SET enable_profiling = 'no_output'")
            con.execute("RESET profiling_output")
            con.execute("PRAGMA disable_profiling")
        if name in explain:
            _top_operators(args.profile_dir / f"{name}.json")
        rows = con.execute(f"SELECT count(*) FROM {count or '_mat_' + name}").fetchone()
        print(
            f"{name}: {times[name][0]:.2f} s wall, {times[name][1]:.2f} s cpu, "
            f"{rows[0] if rows else '?'} rows",
            flush=True,
        )

    inlined = d.inlined_intermediates(mods)
    for i, mod in enumerate(mods):
        if mod.layer != "intermediate" or mod.kind != "VIEW":
            continue
        if mod.name not in inlined and d.stays_view(con, mod.name):  # as derive
            inlined |= {mod.name}
        if mod.name in inlined:  # as derive: computed inside its readers
            if args.dump and (mod.name in d._VIEW_ONLY or mod.name in d._VIEW_IF_EMPTY):
                # dumped, to compare versions
                con.execute(
                    f"COPY (SELECT * FROM {mod.name}) TO '{args.dump / (mod.name + '.parquet')}'"
                )
            continue
        if mod.name in d._AS_PARQUET and folder is not None:  # as derive: a Parquet file
            pq = folder / f"{mod.name}.parquet"
            codec = d.parquet_codec(mod.name, mods)
            run(
                mod.name,
                lambda name=mod.name, codec=codec: d._materialise_parquet(con, name, folder, codec),
                count=f"read_parquet('{pq}')",
            )
            if args.dump:
                shutil.copyfile(pq, args.dump / (mod.name + ".parquet"))
        else:
            run(mod.name, f"CREATE TABLE _mat_{mod.name} AS SELECT * FROM {mod.name}")
            if args.dump:
                con.execute(f"COPY _mat_{mod.name} TO '{args.dump / (mod.name + '.parquet')}'")
            con.execute(f"DROP VIEW {mod.name}")
            con.execute(f"ALTER TABLE _mat_{mod.name} RENAME TO {mod.name}")
        d.free_unread(con, mods, i, inlined)  # as derive: empty what nothing to come reads
        if mod.name == args.stop_after:
            break
    else:
        if args.marts:
            for mod in mods:
                if mod.layer != "marts":
                    continue
                # as derive: written to Parquet (zstd), or a published intermediate's file
                dest = mart_dir / f"{mod.name}.parquet"
                run(
                    mod.name,
                    lambda mod=mod, dest=dest: d.write_mart(con, mod, dest, args.run_id),
                    count=f"read_parquet('{dest}')",
                )
                if args.dump:
                    shutil.copyfile(dest, args.dump / (mod.name + ".parquet"))
    shutil.rmtree(mart_dir, ignore_errors=True)
    spill = con.execute("SELECT current_setting('temp_directory')").fetchone()
    con.close()
    if spill and Path(str(spill[0])).name.startswith("commscope-derive-"):
        shutil.rmtree(str(spill[0]), ignore_errors=True)  # as derive_run: the spill, the db file
    total = (sum(w for w, _ in times.values()), sum(c for _, c in times.values()))
    print(
        json.dumps(
            {
                "loadavg_before": round(load0, 2),
                "loadavg_after": round(os.getloadavg()[0], 2),
                "total_wall_s": round(total[0], 2),
                "total_cpu_s": round(total[1], 2),
                "steps": {k: [round(w, 2), round(c, 2)] for k, (w, c) in times.items()},
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
