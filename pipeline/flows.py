"""Prefect flows: watched-folder ingest, derive and report, locally or on a Dask cluster.

Why: users point commscope at the folder where their cluster writes logs and want the store
and the reports kept current without running commands by hand. These flows are thin wrappers
over the plain library functions (``commscope.pipeline.ingest.ingest_file``, ``commscope.pipeline.derive.
derive_run``, ``commscope.reports.html.build_report``); they add scheduling, retries on I/O errors,
per-file parallelism (threads, or a Dask cluster through ``prefect_dask``) and visibility in
Prefect's logs and UI. This is the only module that imports Prefect.

Run layout (how files map to runs): :mod:`commscope.pipeline.runs`.

Results are JSON-able summaries (counts, paths), never frames. Library log lines (logger
``commscope``) are forwarded to the task/flow run's logs while a run executes.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.context import FlowRunContext, TaskRunContext
from prefect.futures import wait
from prefect.logging.handlers import APILogHandler
from prefect.task_runners import ThreadPoolTaskRunner

from commscope.pipeline import run_config as rc
from commscope.pipeline.config_schema import ConfigError
from commscope.pipeline.ingest import STATUS_ERROR, STATUS_OK, STATUS_SKIPPED, FileResult
from commscope.pipeline.ingest import ingest_file as _ingest_file
from commscope.pipeline.runs import discover_runs, run_update_reason
from commscope.pipeline.store import Store

log = logging.getLogger(__name__)

LIBRARY_LOGGERS = ("commscope",)
"""Loggers whose records reach the Prefect run logs."""

TASK_RUNNERS = ("local", "dask")
REPORT_SUFFIX = ".html"
_THREADS = max(os.cpu_count() or 2, 2)
"""Per-file ingest tasks run at once by the local (thread) task runner."""


class ReportUnavailableError(RuntimeError):
    """The HTML report builder (``commscope.reports.html.build_report``) cannot be imported."""


# ---------------------------------------------------------------------------- library logs


class _RunLogHandler(APILogHandler):
    """Prefect's API log handler that drops records emitted outside any run (no warning)."""

    def emit(self, record: logging.LogRecord) -> None:
        if TaskRunContext.get() is None and FlowRunContext.get() is None:
            return
        super().emit(record)


_log_lock = threading.Lock()
_log_users = 0
_log_handler: _RunLogHandler | None = None
_saved_levels: dict[str, int] = {}


@contextmanager
def library_logs() -> Iterator[None]:
    """Forward ``pipeline``/``parsers`` log records (INFO and up) to the current run's logs.

    Reference-counted so concurrent tasks in one process share a single handler (no duplicate
    records); the handler resolves the run from each record's thread context.
    """
    global _log_users, _log_handler
    with _log_lock:
        if _log_users == 0:
            _log_handler = _RunLogHandler()
            _log_handler.setLevel(logging.INFO)
            for name in LIBRARY_LOGGERS:
                lg = logging.getLogger(name)
                if not any(isinstance(h, APILogHandler) for h in lg.handlers):
                    lg.addHandler(_log_handler)
                if lg.getEffectiveLevel() > logging.INFO:
                    _saved_levels[name] = lg.level
                    lg.setLevel(logging.INFO)
        _log_users += 1
    try:
        yield
    finally:
        with _log_lock:
            _log_users -= 1
            if _log_users == 0 and _log_handler is not None:
                for name in LIBRARY_LOGGERS:
                    lg = logging.getLogger(name)
                    if _log_handler in lg.handlers:
                        lg.removeHandler(_log_handler)
                    if name in _saved_levels:
                        lg.setLevel(_saved_levels.pop(name))
                _log_handler = None


# ---------------------------------------------------------------------------- tasks


def _retry_on_oserror(task: Any, task_run: Any, state: Any) -> bool:
    """Retry a task only when it failed with an I/O error (parse errors are final)."""
    return isinstance(state.data, OSError)


def _file_result_dict(res: FileResult) -> dict[str, Any]:
    out = asdict(res)
    out["counts"] = asdict(res.counts)
    out["warnings"] = len(res.warnings)
    out["worker_pid"] = os.getpid()
    return out


def _ingest_task_name() -> str:
    from prefect.runtime import task_run

    params = task_run.parameters
    return f"ingest {params.get('run_id')}/{Path(str(params.get('path'))).name}"


@task(
    name="ingest-file",
    task_run_name=_ingest_task_name,
    retries=2,
    retry_delay_seconds=2,
    retry_condition_fn=_retry_on_oserror,
    cache_policy=NO_CACHE,
)
def ingest_file_task(store: str, path: str, run_id: str) -> dict[str, Any]:
    """Parse one file into the store as one committed batch (``commscope.pipeline.ingest.ingest_file``).

    Arguments are plain strings so the task ships cheaply to Dask workers; the store folder
    must be reachable at the same path from every worker (shared file system).
    """
    logger = get_run_logger()
    with library_logs():
        # follow: a final line without newline is still being written; it waits for the next
        # cycle (as `ingest --follow`), so it is never read cut and then again whole.
        res = _ingest_file(Store.open(Path(store)), Path(path), run_id=run_id, follow=True)
    if res.status == STATUS_ERROR:
        logger.warning("%s: %s", res.path, res.message)
    else:
        logger.info("%s: %s (%s)", res.path, res.status, res.format or "-")
    return _file_result_dict(res)


@task(
    name="derive-run",
    retries=2,
    retry_delay_seconds=2,
    retry_condition_fn=_retry_on_oserror,
    cache_policy=NO_CACHE,
)
def derive_run(store: Path, run_id: str) -> dict[str, Any]:
    """Materialise every mart of one run (``commscope.pipeline.derive.derive_run``); mart row counts."""
    from commscope.pipeline.derive import derive_run as _derive_run

    with library_logs():
        res = _derive_run(Store.open(Path(store)), run_id)
    get_run_logger().info("%s: derived %d marts", run_id, len(res.marts))
    return {
        "run_id": run_id,
        "marts": dict(res.marts),
        "config_source": res.config_source,
        "generation": res.generation,
        "snapshot": res.snapshot,
        "batches": res.batches,
    }


@task(
    name="report-run",
    retries=2,
    retry_delay_seconds=2,
    retry_condition_fn=_retry_on_oserror,
    cache_policy=NO_CACHE,
)
def report_run(store: Path, run_id: str, out: Path) -> dict[str, Any]:
    """Write one run's HTML report (``commscope.reports.html.build_report``) to ``out``.

    Raises:
        ReportUnavailableError: the report builder cannot be imported.
    """
    try:
        from commscope.reports.html import build_report
    except ImportError as exc:
        raise ReportUnavailableError(
            f"cannot build the report of {run_id}: commscope.reports.html.build_report is not "
            f"available ({exc})"
        ) from exc
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with library_logs():
        path = build_report(Store.open(Path(store)), run_id, out)
    get_run_logger().info("%s: report %s", run_id, path)
    return {"run_id": run_id, "report": str(path)}


# ---------------------------------------------------------------------------- flows


def make_task_runner(
    kind: str = "local", dask_address: str | None = None, dask_workers: int | None = None
) -> Any:
    """The task runner for per-file tasks.

    Args:
        kind: ``"local"`` (threads in this process) or ``"dask"``.
        dask_address: scheduler of an existing Dask cluster (``tcp://host:8786``); None starts
            a ``distributed.LocalCluster`` for the flow run.
        dask_workers: worker processes of that local cluster (default: CPU count).
    """
    if kind == "local":
        return ThreadPoolTaskRunner(max_workers=_THREADS)
    if kind != "dask":
        raise ValueError(f"unknown task runner {kind!r} (use {' or '.join(TASK_RUNNERS)})")
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError as exc:  # the optional extra is not installed
        raise ValueError(
            "the dask task runner needs the 'dask' extra: pip install 'commscope[dask]'"
        ) from exc
    if dask_address:
        return DaskTaskRunner(address=dask_address)
    return DaskTaskRunner(
        cluster_class="distributed.LocalCluster",
        cluster_kwargs={
            "n_workers": dask_workers or os.cpu_count() or 2,
            "threads_per_worker": 1,
            "processes": True,
            "dashboard_address": None,
        },
    )


def _as_roots(root: Path | list[Path]) -> list[Path]:
    return [Path(r) for r in root] if isinstance(root, list) else [Path(root)]


@flow(name="ingest-logs", task_runner=ThreadPoolTaskRunner(max_workers=_THREADS))
def ingest_logs(
    root: Path | list[Path],
    store: Path,
    run_layout: str = "subfolder",
    run_pattern: str | None = None,
) -> dict[str, Any]:
    """Ingest every new or changed file under the watched folder(s), one task per file.

    Files already committed are skipped by ``ingest_file`` (content hash / batch id), so a
    re-run only adds what is new. A run's manifest (``manifest.json``) is recorded as its
    config the first time data lands.

    Returns:
        ``{"store", "runs": {run_id: {"files", "ingested", "skipped", "unknown", "errors",
        "rows", "lines", "results": [...]}}, "skipped_paths"}``.
    """
    logger = get_run_logger()
    roots = _as_roots(root)
    st = Store.open(Path(store))
    st.clean_staging()
    runs, folders, skipped = discover_runs(roots, run_layout, run_pattern)
    for s in skipped:
        logger.warning(
            "%s: skipped (not in any run under layout %s, or not readable)", s, run_layout
        )
    futures = {
        rid: [ingest_file_task.submit(str(st.root), str(f), rid) for f in files]
        for rid, files in runs.items()
    }
    wait([f for fs in futures.values() for f in fs])
    summary: dict[str, Any] = {"store": str(st.root), "runs": {}, "skipped_paths": skipped}
    for rid, futs in futures.items():
        results: list[dict[str, Any]] = []
        for fut, path in zip(futs, runs[rid], strict=True):
            state = fut.state
            if state.is_completed():
                results.append(fut.result())
            else:
                results.append(
                    {"path": str(path), "status": STATUS_ERROR, "message": str(state.message)}
                )
        statuses = [r["status"] for r in results]
        info = {
            "files": len(results),
            "ingested": statuses.count(STATUS_OK),
            "skipped": statuses.count(STATUS_SKIPPED),
            "errors": statuses.count(STATUS_ERROR),
            "unknown": len(statuses)
            - statuses.count(STATUS_OK)
            - statuses.count(STATUS_SKIPPED)
            - statuses.count(STATUS_ERROR),
            "rows": sum(sum(r.get("rows", {}).values()) for r in results),
            "lines": sum(r.get("counts", {}).get("total", 0) for r in results),
            "worker_pids": sorted({r["worker_pid"] for r in results if "worker_pid" in r}),
            "results": results,
        }
        if (info["ingested"] or info["skipped"]) and rc.load(st, rid) is None:
            try:
                rc.record_from_inputs(st, rid, folders[rid])
            except ConfigError as exc:  # one bad manifest must not stop serve: say so
                logger.warning("run %s: manifest not recorded: %s", rid, exc)
        summary["runs"][rid] = info
        logger.info(
            "run %s: %d files, %d ingested (%d rows), %d already stored, %d errors",
            rid,
            info["files"],
            info["ingested"],
            info["rows"],
            info["skipped"],
            info["errors"],
        )
    st.ensure_catalog()
    return summary


@flow(name="process-cluster-logs")
def process_cluster_logs(
    root: Path | list[Path],
    store: Path,
    reports_dir: Path,
    task_runner: str = "local",
    dask_address: str | None = None,
    dask_workers: int = 2,
    run_layout: str = "subfolder",
    run_pattern: str | None = None,
    derive: bool = True,
    report: bool = True,
) -> dict[str, Any]:
    """Ingest the watched folder(s), then derive and report every run that changed.

    A run changed if this ingest committed anything new for it, or its published marts were
    derived from another set of commits than the store holds now (an earlier cycle was
    interrupted after its ingest), or it has no marts, or its report is missing or older than
    its marts (see :func:`run_update_reason`). A failing derive or report is recorded (and
    shown as a failed task in Prefect) without stopping the other runs; the next cycle redoes
    it.

    Args:
        root: watched folder(s).
        store: the store folder.
        reports_dir: where ``<run_id>.html`` reports go.
        task_runner: ``"local"`` or ``"dask"`` for the per-file ingest tasks.
        dask_address: an existing Dask scheduler; None starts a local cluster.
        dask_workers: workers of that local cluster.
        run_layout: ``"subfolder"`` or ``"pattern"``.
        run_pattern: the regex for ``"pattern"``.
        derive: materialise marts of changed runs.
        report: write reports of changed runs (needs ``derive``).

    Returns:
        ``{"store", "reports_dir", "ingest": <ingest_logs summary without per-file results>,
        "runs": {run_id: {"changed", "reason", "new_files", "rows", "marts", "report",
        "errors"}},
        "errors": [...]}``.
    """
    logger = get_run_logger()
    runner = make_task_runner(task_runner, dask_address, dask_workers)
    ingested = ingest_logs.with_options(task_runner=runner)(
        root, store, run_layout=run_layout, run_pattern=run_pattern
    )
    st = Store.open(Path(store))
    reports = Path(reports_dir)
    summary: dict[str, Any] = {
        "store": str(st.root),
        "reports_dir": str(reports.resolve()),
        "runs": {},
        "errors": [],
    }
    stored_runs = set(st.runs())
    for rid, info in ingested["runs"].items():
        out = reports / f"{rid}{REPORT_SUFFIX}"
        entry: dict[str, Any] = {
            "files": info["files"],
            "new_files": info["ingested"],
            "rows": info["rows"],
            "file_errors": info["errors"],
            "changed": False,
            "reason": None,
            "marts": None,
            "report": str(out) if out.exists() else None,
            "errors": [
                f"{r['path']}: {r.get('message')}"
                for r in info["results"]
                if r["status"] == STATUS_ERROR
            ],
        }
        summary["runs"][rid] = entry
        if rid not in stored_runs:
            logger.warning("run %s: nothing ingested, nothing to derive", rid)
            continue
        reason = run_update_reason(st, rid, new_files=info["ingested"], out=out, report=report)
        entry["changed"] = reason is not None
        entry["reason"] = reason
        if not entry["changed"] or not derive:
            continue
        d_state = derive_run(st.root, rid, return_state=True)
        if not d_state.is_completed():
            entry["errors"].append(f"derive: {d_state.message}")
            continue
        entry["marts"] = sum(d_state.result()["marts"].values())
        if report:
            r_state = report_run(st.root, rid, out, return_state=True)
            if r_state.is_completed():
                entry["report"] = r_state.result()["report"]
            else:
                entry["errors"].append(f"report: {r_state.message}")
    for rid, entry in summary["runs"].items():
        summary["errors"].extend(f"{rid}: {e}" for e in entry["errors"])
    summary["ingest"] = {
        rid: {k: v for k, v in info.items() if k != "results"}
        for rid, info in ingested["runs"].items()
    }
    for e in summary["errors"]:
        logger.error("%s", e)
    return summary


__all__ = [
    "LIBRARY_LOGGERS",
    "TASK_RUNNERS",
    "ReportUnavailableError",
    "derive_run",
    "ingest_file_task",
    "ingest_logs",
    "library_logs",
    "make_task_runner",
    "process_cluster_logs",
    "report_run",
]
