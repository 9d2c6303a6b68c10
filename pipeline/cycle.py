"""One cycle over watched folders: ingest what is new, then derive and report the runs that changed.

Why: ``serve`` on a schedule runs this cycle as Prefect flows (:mod:`commscope.pipeline.flows`:
scheduling, retries, a UI, Dask past one machine), while ``serve --once`` and ``demo`` run it a
single time, where a Prefect server (started, migrated, polled, stopped: 7-20 s on two cores)
and Prefect's import (~1.5 s of CPU) cost more than the work itself. Both must do exactly the
same work and return the same summary, so the cycle is written once here, as plain functions
that take the way each step is executed (:class:`Steps`): the flows pass steps that submit
Prefect tasks, :class:`InProcessSteps` runs the same step functions in this process (per-file
ingest in threads, as the flows' thread task runner; the same retries on I/O errors; a failed
step recorded with the message Prefect gives its failed task). No Prefect import here.

Run layout (how files map to runs): :mod:`commscope.pipeline.runs`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from commscope.parsers.registry import LineCounts
from commscope.pipeline import run_config as rc
from commscope.pipeline.config_schema import ConfigError
from commscope.pipeline.ingest import (
    STATUS_ERROR,
    STATUS_OK,
    STATUS_SKIPPED,
    FileResult,
    ProgressFn,
    ingest_totals,
)
from commscope.pipeline.ingest import ingest_file as _ingest_file
from commscope.pipeline.runs import discover_runs, run_update_reason
from commscope.pipeline.store import Store

log = logging.getLogger(__name__)

Logger: TypeAlias = "logging.Logger | logging.LoggerAdapter[Any]"
Outcome: TypeAlias = tuple[dict[str, Any] | None, str | None]
"""A step's result, or None and the message of its failure."""

REPORT_SUFFIX = ".html"
THREADS = max(os.cpu_count() or 2, 2)
"""Per-file ingest steps run at once in this process (the flows' thread task runner too)."""
RETRIES = 2
RETRY_DELAY_S = 2.0
"""A step that fails with an I/O error (``OSError``) is tried again this often, this much later
(parse errors are final): the flows' task options, and :class:`InProcessSteps`."""
FAILED_PREFIX = "Task run encountered an exception"
"""What a failed step's message starts with (Prefect's own words for a failed task run)."""


class ReportUnavailableError(RuntimeError):
    """The HTML report builder (``commscope.reports.html.build_report``) cannot be imported."""


# ---------------------------------------------------------------------------- steps


def file_result_dict(res: FileResult) -> dict[str, Any]:
    """One file's ingest outcome as a JSON-able dict (what a flow's task may return)."""
    out = asdict(res)
    out["counts"] = asdict(res.counts)
    out["warnings"] = len(res.warnings)
    out["worker_pid"] = os.getpid()
    return out


def ingest_one(store: str, path: str, run_id: str, logger: Logger = log) -> dict[str, Any]:
    """Parse one file into the store as one committed batch (``ingest.ingest_file``).

    ``follow``: a final line without newline is still being written; it waits for the next
    cycle (as ``ingest --follow``), so it is never read cut and then again whole.
    """
    res = _ingest_file(Store.open(Path(store)), Path(path), run_id=run_id, follow=True)
    if res.status == STATUS_ERROR:
        logger.warning("%s: %s", res.path, res.message)
    else:
        logger.info("%s: %s (%s)", res.path, res.status, res.format or "-")
    return file_result_dict(res)


def derive_one(
    store: str | Path, run_id: str, logger: Logger = log, progress: Any = None
) -> dict[str, Any]:
    """Materialise every mart of one run (``derive.derive_run``); mart row counts."""
    from commscope.pipeline.commands.derive import derive_totals
    from commscope.pipeline.derive import derive_run as _derive_run

    res = _derive_run(Store.open(Path(store)), run_id, progress=progress)
    logger.info("%s: derived %s", run_id, derive_totals(res).removeprefix("total: "))
    return {
        "run_id": run_id,
        "marts": dict(res.marts),
        "config_source": res.config_source,
        "generation": res.generation,
        "snapshot": res.snapshot,
        "batches": res.batches,
    }


def report_one(
    store: str | Path, run_id: str, out: str | Path, logger: Logger = log
) -> dict[str, Any]:
    """Write one run's HTML report (``reports.html.build_report``) to ``out``.

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
    t0 = time.perf_counter()
    path = build_report(Store.open(Path(store)), run_id, out)
    logger.info("%s: report %s in %.1f s", run_id, path, time.perf_counter() - t0)
    return {"run_id": run_id, "report": str(path)}


class Steps(Protocol):
    """How a cycle executes its steps (Prefect tasks, or calls in this process)."""

    def ingest_files(
        self, store: str, runs: dict[str, list[Path]]
    ) -> dict[str, list[dict[str, Any]]]:
        """Ingest every file of every run (:func:`ingest_one`); per run, one result per file in
        the order given; a file whose step failed as ``{"path", "status": "error", "message"}``."""
        ...

    def derive(self, store: Path, run_id: str) -> Outcome:
        """:func:`derive_one`, or the message of its failure."""
        ...

    def report(self, store: Path, run_id: str, out: Path) -> Outcome:
        """:func:`report_one`, or the message of its failure."""
        ...


def as_file_result(res: dict[str, Any]) -> FileResult:
    """A :func:`file_result_dict` (or :func:`failed_file`) as a ``FileResult`` again, for the
    totals line (``ingest.ingest_totals``); warnings are counted there, not kept."""
    return FileResult(
        str(res["path"]),
        str(res["status"]),
        format=res.get("format"),
        counts=LineCounts(**res.get("counts", {})),
        rows=dict(res.get("rows", {})),
        bytes=int(res.get("bytes", 0)),
        message=res.get("message"),
        reject_reasons=dict(res.get("reject_reasons", {})),
    )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def failed_file(path: Path | str, message: str | None) -> dict[str, Any]:
    """The result recorded for a file whose ingest step failed (raised, not an error status)."""
    return {"path": str(path), "status": STATUS_ERROR, "message": str(message)}


class InProcessSteps:
    """The steps run in this process, without Prefect: what ``serve --once`` and ``demo`` use.

    Per-file ingest in a pool of :data:`THREADS` threads (the flows' local task runner), each
    step retried on ``OSError`` as the flows' tasks are, and a step that still fails recorded
    with Prefect's message for a failed task (so the summary is the flow's).

    Args:
        threads: per-file ingest steps at once.
        retries: tries again after an ``OSError``.
        retry_delay_s: seconds before each retry.
        ingest_progress: given the bytes of all files to ingest, returns the callback to call
            after each file with (its result, files done, files in all), as
            ``ingest.stderr_progress`` (a rate and ETA line on a terminal for large inputs).
        derive_progress: a ``derive_run`` progress callback per run id (see
            ``commands.derive.stderr_derive_progress``).
    """

    def __init__(
        self,
        *,
        threads: int = THREADS,
        retries: int = RETRIES,
        retry_delay_s: float = RETRY_DELAY_S,
        ingest_progress: Callable[[int], ProgressFn] | None = None,
        derive_progress: Callable[[str], Any] | None = None,
    ) -> None:
        self.threads = threads
        self.retries = retries
        self.retry_delay_s = retry_delay_s
        self.ingest_progress = ingest_progress
        self.derive_progress = derive_progress
        self.seconds: dict[str, float] = dict.fromkeys(
            ("ingest files", "catalog", "derive", "report"), 0.0
        )
        """Wall seconds of each kind of step, and of the catalog update after the ingest (the
        cycle's closing log line: they and "other" add up to its wall time)."""

    def _call(self, name: str, fn: Callable[..., dict[str, Any]], *args: Any) -> Outcome:
        for attempt in range(self.retries + 1):
            try:
                return fn(*args), None
            except Exception as exc:  # a failed step is recorded, as a failed task is
                if isinstance(exc, OSError) and attempt < self.retries:
                    log.warning(
                        "%s failed with %s: %s - retry %d/%d in %g s",
                        name,
                        type(exc).__name__,
                        exc,
                        attempt + 1,
                        self.retries,
                        self.retry_delay_s,
                    )
                    time.sleep(self.retry_delay_s)
                    continue
                log.error("%s failed with %s: %s", name, type(exc).__name__, exc)
                return None, f"{FAILED_PREFIX} {type(exc).__name__}: {exc}"
        raise AssertionError("unreachable")  # pragma: no cover

    def ingest_files(
        self, store: str, runs: dict[str, list[Path]]
    ) -> dict[str, list[dict[str, Any]]]:
        jobs = [(rid, f) for rid, files in runs.items() for f in files]
        progress = (
            self.ingest_progress(sum(_size(f) for _, f in jobs)) if self.ingest_progress else None
        )
        out: dict[str, list[dict[str, Any]]] = {rid: [] for rid in runs}
        t0 = time.perf_counter()
        pool = ThreadPoolExecutor(max_workers=self.threads)
        try:
            futs = [
                pool.submit(self._call, f"ingest {rid}/{f.name}", ingest_one, store, str(f), rid)
                for rid, f in jobs
            ]
            for n, ((rid, f), fut) in enumerate(zip(jobs, futs, strict=True), 1):
                result, message = fut.result()
                res = result if result is not None else failed_file(f, message)
                out[rid].append(res)
                if progress is not None:
                    progress(as_file_result(res), n, len(jobs))
        finally:
            # Interrupted (Ctrl-C): files not started are dropped, not ingested first; a file
            # being parsed ends with its batch committed whole or not at all.
            pool.shutdown(wait=True, cancel_futures=True)
            self.seconds["ingest files"] += time.perf_counter() - t0
        return out

    def derive(self, store: Path, run_id: str) -> Outcome:
        progress = self.derive_progress(run_id) if self.derive_progress else None
        t0 = time.perf_counter()
        try:
            return self._call(f"derive {run_id}", derive_one, store, run_id, log, progress)
        finally:
            self.seconds["derive"] += time.perf_counter() - t0

    def report(self, store: Path, run_id: str, out: Path) -> Outcome:
        t0 = time.perf_counter()
        try:
            return self._call(f"report {run_id}", report_one, store, run_id, out)
        finally:
            self.seconds["report"] += time.perf_counter() - t0


# ---------------------------------------------------------------------------- the cycle


def as_roots(root: Path | str | Sequence[Path | str]) -> list[Path]:
    """The watched folder(s) as a list of paths."""
    if isinstance(root, (str, Path)):
        return [Path(root)]
    return [Path(r) for r in root]


def ingest_folders(
    roots: list[Path],
    store: Path | str,
    steps: Steps,
    *,
    run_layout: str = "subfolder",
    run_pattern: str | None = None,
    logger: Logger = log,
) -> dict[str, Any]:
    """Ingest every new or changed file under the watched folder(s), one step per file.

    Files already committed are skipped by ``ingest_file`` (content hash / batch id), so a
    re-run only adds what is new. A run's manifest (``manifest.json``) is recorded as its
    config the first time data lands.

    Returns:
        ``{"store", "runs": {run_id: {"files", "ingested", "skipped", "unknown", "errors",
        "rows", "lines", "worker_pids", "results": [...]}}, "skipped_paths"}``.
    """
    st = Store.open(Path(store))
    st.clean_staging()
    runs, folders, skipped = discover_runs(roots, run_layout, run_pattern)
    for s in skipped:
        logger.warning(
            "%s: skipped (not in any run under layout %s, or not readable)", s, run_layout
        )
    t0 = time.perf_counter()
    by_run = steps.ingest_files(str(st.root), runs)
    done = [as_file_result(r) for results in by_run.values() for r in results]
    logger.info("ingest %s", ingest_totals(done, time.perf_counter() - t0))
    summary: dict[str, Any] = {"store": str(st.root), "runs": {}, "skipped_paths": skipped}
    for rid in runs:
        results = by_run[rid]
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
    t0 = time.perf_counter()
    st.ensure_catalog()
    took = time.perf_counter() - t0
    logger.info("catalog ready in %.1f s", took)
    timings = getattr(steps, "seconds", None)
    if isinstance(timings, dict):
        timings["catalog"] = timings.get("catalog", 0.0) + took
    return summary


def derive_and_report(
    ingested: dict[str, Any],
    store: Path | str,
    reports_dir: Path | str,
    steps: Steps,
    *,
    derive: bool = True,
    report: bool = True,
    logger: Logger = log,
) -> dict[str, Any]:
    """After :func:`ingest_folders`: derive and report every run that changed.

    A run changed if this ingest committed anything new for it, or its published marts were
    derived from another set of commits than the store holds now (an earlier cycle was
    interrupted after its ingest), or it has no marts, or its report is missing or older than
    its marts (see :func:`run_update_reason`). A failing derive or report is recorded without
    stopping the other runs; the next cycle redoes it.

    Returns:
        ``{"store", "reports_dir", "ingest": <ingest summary without per-file results>,
        "runs": {run_id: {"files", "new_files", "rows", "file_errors", "changed", "reason",
        "marts", "report", "errors"}}, "errors": [...]}``.
    """
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
        derived, message = steps.derive(st.root, rid)
        if derived is None:
            entry["errors"].append(f"derive: {message}")
            continue
        entry["marts"] = sum(derived["marts"].values())
        if report:
            made, message = steps.report(st.root, rid, out)
            if made is not None:
                entry["report"] = made["report"]
            else:
                entry["errors"].append(f"report: {message}")
    for rid, entry in summary["runs"].items():
        summary["errors"].extend(f"{rid}: {e}" for e in entry["errors"])
    summary["ingest"] = {
        rid: {k: v for k, v in info.items() if k != "results"}
        for rid, info in ingested["runs"].items()
    }
    for e in summary["errors"]:
        logger.error("%s", e)
    return summary


def process_folders(
    root: Path | str | Sequence[Path | str],
    store: Path | str,
    reports_dir: Path | str,
    *,
    run_layout: str = "subfolder",
    run_pattern: str | None = None,
    derive: bool = True,
    report: bool = True,
    steps: Steps | None = None,
    logger: Logger = log,
) -> dict[str, Any]:
    """The whole cycle in this process: :func:`ingest_folders`, then :func:`derive_and_report`.

    What ``process_cluster_logs`` (the flow) does and returns, without Prefect; ``steps``
    defaults to :class:`InProcessSteps`.
    """
    steps = steps if steps is not None else InProcessSteps()
    t0 = time.perf_counter()
    ingested = ingest_folders(
        as_roots(root), store, steps, run_layout=run_layout, run_pattern=run_pattern, logger=logger
    )
    summary = derive_and_report(
        ingested, store, reports_dir, steps, derive=derive, report=report, logger=logger
    )
    wall = time.perf_counter() - t0
    seconds = getattr(steps, "seconds", None)
    if isinstance(seconds, dict):  # where the cycle's wall time went, adding up
        parts = [f"{k} {v:.1f} s" for k, v in seconds.items()]
        parts.append(f"other {max(wall - sum(seconds.values()), 0.0):.1f} s")
        logger.info("cycle in %.1f s: %s", wall, ", ".join(parts))
    return summary


__all__ = [
    "FAILED_PREFIX",
    "REPORT_SUFFIX",
    "RETRIES",
    "RETRY_DELAY_S",
    "THREADS",
    "InProcessSteps",
    "ReportUnavailableError",
    "Steps",
    "as_file_result",
    "as_roots",
    "derive_and_report",
    "derive_one",
    "failed_file",
    "file_result_dict",
    "ingest_folders",
    "ingest_one",
    "process_folders",
    "report_one",
]
