"""``commscope serve``: keep a store and its reports current from a watched log folder.

Why: cluster logs keep arriving; rather than running ingest/derive/report by hand, the
``process_cluster_logs`` Prefect flow runs now and then on a schedule (``--every`` or
``--cron``) through ``flow.serve``. Without ``PREFECT_API_URL``, serve starts Prefect's own
local server as a child process (``prefect server start`` on 127.0.0.1, database in
``~/.local/state/commscope/prefect/<hash>``, outside the store: see ``prefect_home``; it has
the scheduler and the UI, whose address is printed; Prefect's in-process ephemeral server
cannot schedule) and stops it on exit: nothing to install or start by hand. With
``PREFECT_API_URL`` set the runs go to that server.

``--once`` runs the cycle a single time and exits (exit status 1 if any file, derive or report
failed). It needs no scheduler, so it runs the cycle in this process without Prefect
(``cycle.process_folders``: the same steps, store, reports and summary as the flow): a Prefect
server started, migrated, polled and stopped for one cycle, and Prefect's import, cost 10-25 s
on two cores against ~5 s of work for two small files. It goes through the flow when a Prefect
server is configured (``PREFECT_API_URL``: the run shows in its UI), for ``--task-runner dask``
(Prefect's Dask task runner) or with ``--prefect`` (Prefect's temporary local server).

Prefect is imported only after the environment is prepared (``prepare_prefect_env``): its
settings are read at import time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from commscope.pipeline.commands._format import table

DEFAULT_REPORTS = Path("commscope_reports")
_EVERY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)?\s*$")
_UNIT_SECONDS = {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_every(text: str) -> timedelta:
    """An interval such as ``30s``, ``5m``, ``1h``, ``1d`` or plain seconds (``90``).

    Raises:
        ValueError: not an interval, or not positive.
    """
    m = _EVERY.match(text)
    if not m:
        raise ValueError(f"bad interval {text!r} (use e.g. 30s, 5m, 1h)")
    seconds = float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
    if seconds <= 0:
        raise ValueError(f"interval {text!r} must be positive")
    return timedelta(seconds=seconds)


def prefect_home(store: Path) -> Path:
    """The private Prefect home of ``store``: outside the store, one per store path.

    ``$XDG_STATE_HOME/commscope/prefect/<hash of the store path>`` (``~/.local/state`` when
    ``XDG_STATE_HOME`` is unset). Why not inside the store: Prefect reads configuration that
    runs code from its home (``logging.yml`` names handler classes), and nothing executable may
    live where a query or an input could write.
    """
    root = store.expanduser().resolve()
    state = os.environ.get("XDG_STATE_HOME", "").strip()
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local/state"
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:16]
    return base / "commscope" / "prefect" / digest


def prepare_prefect_env(store: Path) -> None:
    """Point Prefect at a private home outside the store unless the user configured one.

    Must run before ``commscope.pipeline.flows`` (and so Prefect) is imported. ``PREFECT_HOME`` or
    ``PREFECT_API_URL`` set by the user are honoured. Also turns Prefect's anonymous usage
    analytics off (nothing leaves the machine) and gives the embedded server time to start on
    a loaded machine.
    """
    if "PREFECT_API_URL" not in os.environ and "PREFECT_HOME" not in os.environ:
        home = prefect_home(store)
        home.mkdir(parents=True, exist_ok=True, mode=0o700)  # the server's SQLite file goes here
        os.environ["PREFECT_HOME"] = str(home)
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


@contextmanager
def local_prefect_server(store: Path, port: int = 0, timeout: float = 180.0) -> Iterator[str]:
    """Run ``prefect server start`` (scheduler + UI) on 127.0.0.1 for the block; yield its URL.

    Used when no ``PREFECT_API_URL`` is configured: schedules need a real server. Its state
    lives in ``$PREFECT_HOME`` (:func:`prefect_home` by default), its output in
    ``server.log`` there. Sets ``PREFECT_API_URL`` for this process (before Prefect is
    imported).
    """
    if port == 0:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
    home = Path(os.environ.get("PREFECT_HOME", prefect_home(store)))
    home.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--analytics-off"]
    with (home / "server.log").open("ab") as log_fh:
        proc = subprocess.Popen(
            cmd,
            stdout=log_fh,
            stderr=subprocess.STDOUT,
        )
    # SIGTERM (service managers, `timeout`) must stop the child server too: exit via finally.
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the Prefect server exited (see {home / 'server.log'})")
            try:
                with urllib.request.urlopen(f"{url}/api/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Prefect server did not start in {timeout:.0f} s")
            time.sleep(0.5)
        os.environ["PREFECT_API_URL"] = f"{url}/api"
        yield url
    finally:
        signal.signal(signal.SIGTERM, previous)
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def add_flow_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``serve`` and ``demo``: reports folder, task runner, run layout."""
    p.add_argument(
        "--reports",
        type=Path,
        default=DEFAULT_REPORTS,
        help="folder of the HTML reports, one <run>.html per run (default: ./commscope_reports)",
    )
    p.add_argument(
        "--task-runner",
        choices=("local", "dask"),
        default="local",
        help="run per-file parsing in local threads or on a Dask cluster (default: local)",
    )
    p.add_argument(
        "--dask-address",
        default=None,
        help="scheduler of a running Dask cluster (tcp://host:8786); without it --task-runner "
        "dask starts a local cluster",
    )
    p.add_argument(
        "--dask-workers", type=int, default=2, help="workers of the local Dask cluster (2)"
    )
    p.add_argument(
        "--run-layout",
        choices=("subfolder", "pattern"),
        default="subfolder",
        help="how files map to runs: one sub-folder per run (default) or --run-pattern",
    )
    p.add_argument(
        "--run-pattern",
        default=None,
        help="regex searched in each file's path relative to the watched folder; the group "
        "(?P<run>...) (else group 1) is the run id, e.g. '^(?P<run>[^/]+)/'",
    )
    p.add_argument(
        "--prefect",
        action="store_true",
        help="one cycle (serve --once, demo) through the Prefect flows on Prefect's temporary "
        "local server, visible in its logs (slower by the server's start, ~10 s); by default "
        "one cycle runs in this process, or on the server PREFECT_API_URL names when set",
    )


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``serve`` subcommand."""
    p = sub.add_parser(
        "serve",
        help="watch a log folder: ingest new/grown files, derive and report changed runs",
        description="Run the process_cluster_logs Prefect flow on the watched folder now, "
        "then on a schedule (--every or --cron), on Prefect's embedded local server unless "
        "PREFECT_API_URL points at a Prefect server. --once runs one cycle in this process "
        "(no Prefect server: the same store, reports and summary) and exits. Each run folder "
        "(or --run-pattern match) is one run; reports go to --reports/<run>.html.",
    )
    p.add_argument("--watch", type=Path, required=True, help="folder where the cluster logs go")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--every", default=None, help="interval, e.g. 30s, 5m (default), 1h")
    when.add_argument("--cron", default=None, help='cron schedule, e.g. "*/10 * * * *"')
    when.add_argument(
        "--once",
        action="store_true",
        help="run one cycle and exit (in this process; through Prefect with --prefect, "
        "--task-runner dask or PREFECT_API_URL)",
    )
    add_flow_options(p)
    p.add_argument("--no-derive", action="store_true", help="ingest only")
    p.add_argument("--no-report", action="store_true", help="ingest and derive, no HTML")
    p.add_argument("--name", default="commscope-serve", help="deployment name in Prefect")
    p.add_argument("--json", action="store_true", help="print each run's summary as JSON")
    p.add_argument(
        "--server-port",
        type=int,
        default=0,
        help="port of the local Prefect server and UI started when PREFECT_API_URL is unset "
        "(default: a free port)",
    )
    p.set_defaults(func=run)


def flow_parameters(args: argparse.Namespace, roots: list[Path]) -> dict[str, Any]:
    """The ``process_cluster_logs`` parameters (JSON-able) from the parsed options."""
    return {
        "root": [str(r.expanduser().resolve()) for r in roots],
        "store": str(args.store.expanduser().resolve()),
        "reports_dir": str(args.reports.expanduser().resolve()),
        "task_runner": args.task_runner,
        "dask_address": args.dask_address,
        "dask_workers": args.dask_workers,
        "run_layout": args.run_layout,
        "run_pattern": args.run_pattern,
        "derive": not getattr(args, "no_derive", False),
        "report": not getattr(args, "no_report", False),
    }


def check_flow_options(args: argparse.Namespace) -> str | None:
    """An error message for inconsistent options, else None."""
    if args.run_layout == "pattern" and not args.run_pattern:
        return "--run-layout pattern needs --run-pattern"
    if args.run_pattern:
        try:
            re.compile(args.run_pattern)
        except re.error as exc:
            return f"bad --run-pattern: {exc}"
    if args.dask_workers < 1:
        return "--dask-workers must be at least 1"
    return None


def render_summary(summary: dict[str, Any]) -> str:
    """A table of what one ``process_cluster_logs`` run did, run by run."""
    rows = []
    for rid, e in summary["runs"].items():
        rows.append(
            (
                rid,
                e["files"],
                e["new_files"],
                e["rows"],
                e["file_errors"],
                "yes" if e["changed"] else "no",
                "-" if e["marts"] is None else e["marts"],
                e["report"] or "-",
            )
        )
    out = table(
        ("run", "files", "new", "rows", "file errors", "changed", "mart rows", "report"), rows
    )
    if summary["errors"]:
        out += "\n" + "\n".join(f"error: {e}" for e in summary["errors"])
    return out


def needs_prefect(args: argparse.Namespace) -> bool:
    """Whether one cycle (``serve --once``, ``demo``) must go through the Prefect flow: a
    Prefect server is configured (``PREFECT_API_URL``), the Dask task runner is asked for, or
    ``--prefect``."""
    return (
        bool(getattr(args, "prefect", False))
        or args.task_runner == "dask"
        or bool(os.environ.get("PREFECT_API_URL"))
    )


def run_once(args: argparse.Namespace, roots: list[Path]) -> dict[str, Any]:
    """One cycle over ``roots``; the ``process_cluster_logs`` summary.

    In this process (``cycle.process_folders``, no Prefect import) unless
    :func:`needs_prefect`; then the flow, on the configured server or on Prefect's temporary
    local one. Both give the same store, reports and summary (``tests/pipeline/test_serve.py``).
    """
    params = flow_parameters(args, roots)
    if needs_prefect(args):
        prepare_prefect_env(args.store)
        from commscope.pipeline.flows import process_cluster_logs

        return dict(process_cluster_logs(**params))
    from commscope.pipeline.commands.derive import stderr_derive_progress
    from commscope.pipeline.cycle import InProcessSteps, process_folders
    from commscope.pipeline.ingest import stderr_progress

    steps = InProcessSteps(ingest_progress=stderr_progress, derive_progress=stderr_derive_progress)
    return process_folders(
        params["root"],
        params["store"],
        params["reports_dir"],
        run_layout=params["run_layout"],
        run_pattern=params["run_pattern"],
        derive=params["derive"],
        report=params["report"],
        steps=steps,
    )


def run(args: argparse.Namespace) -> int:
    """Run the cycle once, or serve the flow on a schedule."""
    if not args.watch.is_dir():
        print(f"commscope: error: {args.watch}: not a folder", file=sys.stderr)
        return 2
    problem = check_flow_options(args)
    every = None
    try:
        if args.every:
            every = parse_every(args.every)
    except ValueError as exc:
        problem = str(exc)
    if problem:
        print(f"commscope: error: {problem}", file=sys.stderr)
        return 2
    params = flow_parameters(args, [args.watch])
    if args.once:
        summary = run_once(args, [args.watch])
        print(json.dumps(summary, indent=2) if args.json else render_summary(summary), flush=True)
        return 1 if summary["errors"] else 0
    prepare_prefect_env(args.store)
    schedule: dict[str, Any] = (
        {"cron": args.cron} if args.cron else {"interval": every or timedelta(minutes=5)}
    )
    if "PREFECT_API_URL" in os.environ:
        return _serve(args, params, schedule)
    try:
        with local_prefect_server(args.store, args.server_port) as url:
            print(f"Prefect server and UI: {url}", flush=True)
            return _serve(args, params, schedule)
    except RuntimeError as exc:
        print(f"commscope: error: {exc}", file=sys.stderr)
        return 1


def _serve(args: argparse.Namespace, params: dict[str, Any], schedule: dict[str, Any]) -> int:
    """Run the flow once now, then serve it on ``schedule`` until interrupted."""
    from commscope.pipeline.flows import process_cluster_logs

    summary = process_cluster_logs(**params)
    print(json.dumps(summary, indent=2) if args.json else render_summary(summary), flush=True)
    print(
        f"serving process-cluster-logs/{args.name} "
        + (f"on cron {args.cron!r}" if args.cron else f"every {schedule['interval']}")
        + " (Ctrl-C stops)",
        flush=True,
    )
    process_cluster_logs.serve(
        name=args.name, parameters=params, limit=1, print_starting_message=False, **schedule
    )
    return 0
