"""Prefect flows: watched-folder ingest, derive and report, locally or on a Dask cluster.

Why: users point commscope at the folder where their cluster writes logs and want the store
and the reports kept current without running commands by hand. The cycle itself (which files,
which runs changed, what a failure leaves) is plain code in :mod:`commscope.pipeline.cycle`;
these flows only run its steps as Prefect tasks (:class:`PrefectSteps`), adding scheduling,
retries on I/O errors, per-file parallelism (threads, or a Dask cluster through
``prefect_dask``) and visibility in Prefect's logs and UI. ``serve --once`` and ``demo`` run the
same cycle in one process without Prefect (``cycle.process_folders``), with the same store,
reports and summary. This is the only module that imports Prefect.

Run layout (how files map to runs): :mod:`commscope.pipeline.runs`.

A scheduled run starts in a new process from the flow function pickled by value (cloudpickle
keeps only the globals its body names), where the parameters are validated from their
annotations: each flow's body must name what its annotations use (``Path``), or every
scheduled run fails its validation (``tests/pipeline/test_flows.py``).

Results are JSON-able summaries (counts, paths), never frames. Library log lines (logger
``commscope``) are forwarded to the task/flow run's logs while a run executes.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.context import FlowRunContext, TaskRunContext
from prefect.futures import wait
from prefect.logging.handlers import APILogHandler
from prefect.task_runners import ThreadPoolTaskRunner

from commscope.pipeline import cycle
from commscope.pipeline.cycle import REPORT_SUFFIX, ReportUnavailableError, failed_file

log = logging.getLogger(__name__)

LIBRARY_LOGGERS = ("commscope",)
"""Loggers whose records reach the Prefect run logs."""

TASK_RUNNERS = ("local", "dask")
_THREADS = cycle.THREADS
"""Per-file ingest tasks run at once by the local (thread) task runner."""


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


def _ingest_task_name() -> str:
    from prefect.runtime import task_run

    params = task_run.parameters
    return f"ingest {params.get('run_id')}/{Path(str(params.get('path'))).name}"


@task(
    name="ingest-file",
    task_run_name=_ingest_task_name,
    retries=cycle.RETRIES,
    retry_delay_seconds=cycle.RETRY_DELAY_S,
    retry_condition_fn=_retry_on_oserror,
    cache_policy=NO_CACHE,
)
def ingest_file_task(store: str, path: str, run_id: str) -> dict[str, Any]:
    """Parse one file into the store as one committed batch (``cycle.ingest_one``).

    Arguments are plain strings so the task ships cheaply to Dask workers; the store folder
    must be reachable at the same path from every worker (shared file system).
    """
    logger = get_run_logger()
    with library_logs():
        return cycle.ingest_one(store, path, run_id, logger)


@task(
    name="derive-run",
    retries=cycle.RETRIES,
    retry_delay_seconds=cycle.RETRY_DELAY_S,
    retry_condition_fn=_retry_on_oserror,
    cache_policy=NO_CACHE,
)
def derive_run(store: Path, run_id: str) -> dict[str, Any]:
    """Materialise every mart of one run (``cycle.derive_one``); mart row counts."""
    with library_logs():
        return cycle.derive_one(store, run_id, get_run_logger())


@task(
    name="report-run",
    retries=cycle.RETRIES,
    retry_delay_seconds=cycle.RETRY_DELAY_S,
    retry_condition_fn=_retry_on_oserror,
    cache_policy=NO_CACHE,
)
def report_run(store: Path, run_id: str, out: Path) -> dict[str, Any]:
    """Write one run's HTML report (``cycle.report_one``) to ``out``.

    Raises:
        ReportUnavailableError: the report builder cannot be imported.
    """
    with library_logs():
        return cycle.report_one(store, run_id, out, get_run_logger())


class PrefectSteps:
    """The cycle's steps (:class:`commscope.pipeline.cycle.Steps`) as Prefect tasks: per-file
    ingest submitted to the flow's task runner, derive and report as task runs whose failure
    is recorded with the failed state's message."""

    def ingest_files(
        self, store: str, runs: dict[str, list[Path]]
    ) -> dict[str, list[dict[str, Any]]]:
        futures = {
            rid: [ingest_file_task.submit(store, str(f), rid) for f in files]
            for rid, files in runs.items()
        }
        wait([f for fs in futures.values() for f in fs])
        out: dict[str, list[dict[str, Any]]] = {}
        for rid, futs in futures.items():
            out[rid] = [
                fut.result() if fut.state.is_completed() else failed_file(path, fut.state.message)
                for fut, path in zip(futs, runs[rid], strict=True)
            ]
        return out

    def derive(self, store: Path, run_id: str) -> cycle.Outcome:
        state = derive_run(store, run_id, return_state=True)
        return (state.result(), None) if state.is_completed() else (None, state.message)

    def report(self, store: Path, run_id: str, out: Path) -> cycle.Outcome:
        state = report_run(store, run_id, out, return_state=True)
        return (state.result(), None) if state.is_completed() else (None, state.message)


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


@flow(name="ingest-logs", task_runner=ThreadPoolTaskRunner(max_workers=_THREADS))
def ingest_logs(
    root: Path | list[Path],
    store: Path,
    run_layout: str = "subfolder",
    run_pattern: str | None = None,
) -> dict[str, Any]:
    """Ingest every new or changed file under the watched folder(s), one task per file
    (``cycle.ingest_folders``).

    Returns:
        ``{"store", "runs": {run_id: {"files", "ingested", "skipped", "unknown", "errors",
        "rows", "lines", "results": [...]}}, "skipped_paths"}``.
    """
    return cycle.ingest_folders(
        cycle.as_roots(root),
        Path(store),
        PrefectSteps(),
        run_layout=run_layout,
        run_pattern=run_pattern,
        logger=get_run_logger(),
    )


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
    """Ingest the watched folder(s) (the ``ingest_logs`` subflow), then derive and report every
    run that changed (``cycle.derive_and_report``: which runs changed, and what a failing
    derive or report leaves). A failing derive or report is shown as a failed task in Prefect
    without stopping the other runs; the next cycle redoes it.

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
        "errors": [...]}`` (the same as ``cycle.process_folders`` in one process).
    """
    runner = make_task_runner(task_runner, dask_address, dask_workers)
    ingested = ingest_logs.with_options(task_runner=runner)(
        root, store, run_layout=run_layout, run_pattern=run_pattern
    )
    return cycle.derive_and_report(
        ingested,
        Path(store),
        Path(reports_dir),
        PrefectSteps(),
        derive=derive,
        report=report,
        logger=get_run_logger(),
    )


__all__ = [
    "LIBRARY_LOGGERS",
    "REPORT_SUFFIX",
    "TASK_RUNNERS",
    "PrefectSteps",
    "ReportUnavailableError",
    "derive_run",
    "ingest_file_task",
    "ingest_logs",
    "library_logs",
    "make_task_runner",
    "process_cluster_logs",
    "report_run",
]
