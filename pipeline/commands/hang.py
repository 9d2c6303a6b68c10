"""``commscope hang``: which ranks never reached, or never completed, which collective of which
group, from the Flight Recorder dumps of a run (or of files given directly)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from commscope.pipeline.hang import HangReport, format_report, triage_files
from commscope.pipeline.store import Store, StoreError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``hang`` subcommand."""
    p = sub.add_parser(
        "hang",
        help="name the stuck ranks and collectives from Flight Recorder dumps",
        description="Hang triage from PyTorch Flight Recorder dumps (one per rank): per "
        "process group, the first collective not completed by every member, the ranks that "
        "never reached it and those that never completed it while a peer did (suspects), and "
        "each rank's last enqueued / completed sequence per group. Reads the dumps ingested "
        "into RUN (re-read from their paths), or the files and folders given with --dumps.",
    )
    p.add_argument("run_id", nargs="?", default=None, metavar="RUN", help="an ingested run")
    p.add_argument(
        "--dumps", nargs="+", type=Path, default=None, help="dump files or folders (no store)"
    )
    p.add_argument(
        "--progress", action="store_true", help="also print last enqueued/completed per rank"
    )
    p.add_argument("--json", action="store_true", help="print the whole triage as JSON")
    p.set_defaults(func=run)


def _dump_paths(paths: list[Path]) -> list[Path]:
    """Files given, and the files of folders given (recursively), sorted."""
    out: list[Path] = []
    for p in paths:
        out += sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    return out


def _run_paths(store: Store, run_id: str) -> list[Path]:
    con = store.connect(read_only=True)
    try:
        rows = con.execute(
            "SELECT DISTINCT path FROM ingested_files WHERE run_id = ? AND format = ? "
            "ORDER BY path",
            [run_id, "flight_recorder"],
        ).fetchall()
    finally:
        con.close()
    return [Path(r[0]) for r in rows]


def run(args: argparse.Namespace) -> int:
    """Triage and print."""
    if args.dumps:
        paths = _dump_paths(args.dumps)
        from commscope.parsers._io import Source
        from commscope.parsers.registry import load_all

        fr = load_all()["flight_recorder"]
        paths = [p for p in paths if fr.sniff(Source(p).head(), p) > 0]
    elif args.run_id:
        try:
            store = Store.open(args.store, create=False)
        except StoreError as exc:
            print(f"commscope: error: {exc}", file=sys.stderr)
            return 2
        paths = _run_paths(store, args.run_id)
    else:
        print("commscope: error: give a RUN or --dumps", file=sys.stderr)
        return 2
    if not paths:
        print("no Flight Recorder dumps found")
        return 1
    report = triage_files(paths)
    if args.json:
        print(json.dumps(_as_json(report), indent=2, default=str))
        return 0
    print(format_report(report))
    if args.progress:
        for p in report.progress:
            print(
                f"  rank {p.rank} group {p.group}:{p.desc}: last enqueued {p.last_enqueued}, "
                f"last completed {p.last_completed}, pending entries {p.pending_entries}"
            )
    return 0


def _as_json(report: HangReport) -> dict[str, object]:
    out = dataclasses.asdict(report)
    out["findings"] = [
        {**dataclasses.asdict(f), "blocking": list(f.blocking)} for f in report.findings
    ]
    return out
