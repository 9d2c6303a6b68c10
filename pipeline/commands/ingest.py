"""``commscope ingest``: parse logs and traces into the store."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import duckdb

from commscope.pipeline import run_config as rc
from commscope.pipeline.commands._format import sanitize, table
from commscope.pipeline.ingest import (
    FileResult,
    discover,
    ingest_paths,
    ingest_totals,
    stderr_progress,
)
from commscope.pipeline.store import Store, StoreError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``ingest`` subcommand."""
    p = sub.add_parser(
        "ingest",
        help="parse log/trace files or folders into the store",
        description=(
            "Parse files or folders (recursively; .gz/.xz/.zst/.bz2 read transparently) into "
            "the store under one run id. Each file's format is sniffed unless --format is "
            "given. Re-ingesting the same content adds nothing; a plain-text log that grew is read from where its last ingest stopped. Prints one row per file (with the "
            "main reject reason when lines were rejected); exits non-zero when nothing could "
            "be ingested or when a file yielded nothing usable (every line rejected)."
        ),
    )
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="files or folders")
    p.add_argument("--run", dest="run_id", required=True, help="run id to file the data under")
    p.add_argument("--format", dest="fmt", default=None, help="force a parser (default: sniff)")
    p.add_argument("--rank", type=int, default=None, help="rank for traces that do not say")
    p.add_argument("--jobs", type=int, default=1, help="files parsed in parallel (processes)")
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        help="the run's model/parallel/platform config (TOML, see configs/); default: a "
        "manifest.json found in an input folder",
    )
    p.add_argument(
        "--follow",
        action="store_true",
        help="the inputs are live logs: a final line without newline waits for the next "
        "ingest instead of being rejected as cut (files that grew are always read from "
        "where the last ingest stopped)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Ingest and print a per-file table."""
    try:
        # The config (--config or a manifest beside the logs) is validated before anything,
        # the store included, is created or written.
        checked = (
            rc.from_file(args.run_id, args.config)
            if args.config is not None
            else rc.from_inputs(args.run_id, list(args.paths))
        )
        store = Store.open(args.store)
        t0 = time.monotonic()
        files, _ = discover(args.paths)
        total = sum(f.stat().st_size for f in files)
        results = ingest_paths(
            store,
            args.paths,
            run_id=args.run_id,
            fmt=args.fmt,
            rank=args.rank,
            jobs=max(1, args.jobs),
            progress=stderr_progress(total),
            config=args.config,
            follow=args.follow,
            checked_config=checked,
        )
    except (StoreError, OSError, ValueError, duckdb.Error) as exc:
        # Store-level failures (disk full, read-only, catalog) stop the ingest: one clear line.
        print(f"commscope: error: {sanitize(str(exc))}", file=sys.stderr)
        return 2
    print(render_results(results))
    print(ingest_totals(results, time.monotonic() - t0))
    if any(r.ok for r in results):
        print_config_note(store, args.run_id, checked)
    for r in results:
        if r.status == "error":
            print(f"commscope: error: {sanitize(f'{r.path}: {r.message}')}", file=sys.stderr)
    unusable = [r for r in results if nothing_usable(r)]
    for r in unusable:
        print(
            f"commscope: error: {sanitize(f'{r.path}: nothing usable: {_rejected_note(r)}')}",
            file=sys.stderr,
        )
    return 0 if any(r.ok for r in results) and not unusable else 1


def print_config_note(store: Store, run_id: str, read: rc.StoredConfig | None) -> None:
    """Say which config the run now has and whether derive can predict from it.

    Why: a config that reaches no prediction must not pass silently (issue 17): one without
    ``[model]``, or a manifest not recorded because the run already has a config. Nothing is
    printed for a run without any config (derive says "config: none, inferred").
    """
    stored = rc.load(store, run_id)
    if stored is None:
        return
    cfg = stored.config
    par = cfg.get("parallel", {})
    layout = " ".join(f"{k}={par[k]}" for k in ("pp", "tp", "dp") if k in par)
    if "model" in cfg and "parallel" in cfg:
        name = cfg["model"].get("name", "model")
        what = f"{name}, {layout}; derive computes the model's predictions"
    else:
        what = f"{layout or 'no [parallel]'}; no [model]"
    print(sanitize(f"run config: {stored.source} ({what})"))
    if "model" not in cfg or "parallel" not in cfg:
        missing = " and ".join(f"[{s}]" for s in ("model", "parallel") if s not in cfg)
        print(
            sanitize(
                f"commscope: warning: run {run_id}: the config has no {missing} section: "
                "derive computes no predictions (predicted_* stay empty)"
            ),
            file=sys.stderr,
        )
    if read is not None and read.source != stored.source:
        print(
            sanitize(
                f"commscope: note: {read.source} was not recorded: run {run_id} already has "
                f"{stored.source} (ingest --config or derive --config replaces it)"
            ),
            file=sys.stderr,
        )


def nothing_usable(r: FileResult) -> bool:
    """Whether ``r`` was read but kept nothing: lines or events, all rejected or ignored,
    and at least one rejected (a file of only known-irrelevant output is not an error)."""
    c = r.counts
    return r.status == "ingested" and c.total > 0 and c.parsed == 0 and c.rejected > 0


def _unit(r: FileResult) -> str:
    return "events" if r.format == "kineto" else "lines"


def _clean(text: str, limit: int = 120) -> str:
    """``text`` (it comes from the input) terminal-safe, at most ``limit`` characters."""
    out = sanitize(text)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def _rejected_note(r: FileResult) -> str:
    """``"N of M <unit> rejected: <main reason> (+K other reasons)"``."""
    c = r.counts
    return f"{c.rejected:,} of {c.total:,} {_unit(r)} rejected{_reasons(r)}"


def _reasons(r: FileResult) -> str:
    """``": <main reason> (+K other reasons)"``, or nothing when no reason was recorded."""
    if not r.reject_reasons:
        return ""
    top = max(r.reject_reasons.items(), key=lambda kv: kv[1])[0]
    more = len(r.reject_reasons) - 1
    return f": {_clean(top)}" + (f" (+{more} other reasons)" if more else "")


def render_results(results: list[FileResult]) -> str:
    """The per-file table printed after an ingest.

    File names and messages come from inputs: :func:`table` sanitises every cell, so escape
    sequences in them are shown, never acted on by the terminal.
    """
    rows = [
        (
            r.path,
            r.format or "-",
            r.counts.total,
            r.counts.parsed,
            r.counts.ignored,
            r.counts.rejected,
            sum(r.rows.values()),
            _status(r),
        )
        for r in results
    ]
    return table(
        ("file", "format", "lines", "parsed", "ignored", "rejected", "rows", "status"), rows
    )


def _status(r: FileResult) -> str:
    """The status cell: the status, with the message when there is one (sanitised)."""
    if r.status == "error":
        return sanitize(f"error: {r.message}")
    notes = [r.message] if r.message else []
    if r.status == "ingested" and r.counts.rejected:
        c = r.counts
        if nothing_usable(r):
            notes.append(f"nothing usable: {_rejected_note(r)}")
        else:
            notes.append(
                f"kept {c.parsed:,} of {c.total:,} {_unit(r)}; {c.rejected:,} rejected{_reasons(r)}"
            )
    return sanitize(f"{r.status} ({'; '.join(notes)})" if notes else r.status)
