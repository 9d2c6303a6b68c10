"""The Prefect flows (pipeline/flows.py) on real samples: incremental watched-folder ingest,
the Dask task runner on a real LocalCluster against the local run, and library log lines in
the flow-run logs. Flows run against Prefect's test harness (a private temporary server)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from commscope.parsers.schema import TABLES
from commscope.pipeline.store import Store

NCCL_SAMPLE = "nccl_debug/gfbench_2.20.5_2rank_normal_rank0_debugfile.txt"
COLL_LINE = re.compile(r"NCCL INFO [A-Za-z]+: opCount [0-9a-f]+ ")


@pytest.fixture(scope="module")
def flows(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """commscope.pipeline.flows imported with a private PREFECT_HOME, inside prefect_test_harness."""
    home = tmp_path_factory.mktemp("prefect_home")
    saved = {k: os.environ.get(k) for k in ("PREFECT_HOME", "PREFECT_SERVER_ANALYTICS_ENABLED")}
    os.environ["PREFECT_HOME"] = str(home)
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    from prefect.testing.utilities import prefect_test_harness

    import commscope.pipeline.flows as fl

    try:
        with prefect_test_harness(server_startup_timeout=120):
            yield fl
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _table_rows(store: Path, table: str, run_id: str) -> int:
    con = Store.open(store).connect(read_only=True)
    try:
        row = con.execute(f"SELECT count(*) FROM {table} WHERE run_id = ?", [run_id]).fetchall()
    finally:
        con.close()
    return int(row[0][0])


def _watched(tmp: Path, shared_samples: Path, sample_traces: Path) -> Path:
    """Two runs: a real NCCL pair (subfolder nccl_pair) and the bundled DeepSpeed CPU run."""
    root = tmp / "watch"
    (root / "nccl_pair").mkdir(parents=True)
    for name in (NCCL_SAMPLE, NCCL_SAMPLE.replace("rank0", "rank1")):
        shutil.copy(shared_samples / name, root / "nccl_pair")
    shutil.copytree(sample_traces / "ds_pipe_pp2_dp2_cpu", root / "ds_cpu")
    return root


# ------------------------------------------------------------------ run layout (fast)


def test_discover_runs_layouts(tmp_path: Path) -> None:
    """Subfolder layout: one run per folder, stray files skipped; pattern layout: regex group."""
    from commscope.pipeline.runs import discover_runs, safe_run_id

    for rel in ("a/x.log", "a/sub/y.log", "b c/z.log", "stray.log", ".hidden/q.log"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    runs, _, skipped = discover_runs([tmp_path])
    # "b c" is no valid run id: a readable slug plus a hash of the name (issue 23).
    assert safe_run_id("b c").startswith("b_c-")
    assert {k: len(v) for k, v in runs.items()} == {"a": 2, safe_run_id("b c"): 1}
    assert skipped == [str(tmp_path / "stray.log")]
    runs, _, skipped = discover_runs([tmp_path], "pattern", r"^(?P<run>[a-z]+)/")
    assert {k: len(v) for k, v in runs.items()} == {"a": 2}
    assert len(skipped) == 2  # "b c/z.log" (space), stray.log
    with pytest.raises(ValueError, match="no group"):
        discover_runs([tmp_path], "pattern", r"^a/")
    with pytest.raises(ValueError, match="unknown run layout"):
        discover_runs([tmp_path], "bogus")


# ------------------------------------------------------------------ incremental


@pytest.mark.slow
def test_ingest_logs_appended_lines_add_exactly_their_rows(
    flows: Any, tmp_path: Path, shared_samples: Path
) -> None:
    """Run ingest_logs, append COLL lines to the log, run again: exactly their rows are added."""
    src = shared_samples / NCCL_SAMPLE
    run_dir = tmp_path / "watch" / "job1"
    run_dir.mkdir(parents=True)
    log = run_dir / "rank0.txt"
    shutil.copy(src, log)
    store = tmp_path / "store"
    text = src.read_text()
    coll = [ln for ln in text.splitlines() if COLL_LINE.search(ln)]
    assert len(coll) == 11  # independent count of the sample's COLL lines

    first = flows.ingest_logs(tmp_path / "watch", store)
    assert first["runs"]["job1"]["ingested"] == 1
    assert _table_rows(store, "comm_ops", "job1") == len(coll)
    lines_before = len(text.splitlines())
    assert first["runs"]["job1"]["lines"] == lines_before

    # New opCounts continue the sequence (the sample's ops are 0..10, hex).
    added = [re.sub(r"opCount [0-9a-f]+", f"opCount {n:x}", coll[0]) for n in range(11, 16)]
    added.append("2e194b931ff6:18226:18226 [0] NCCL INFO comm 0x11d27a50 rank 0 - unrelated")
    with log.open("a") as fh:
        fh.write("\n".join(added) + "\n")
    second = flows.ingest_logs(tmp_path / "watch", store)
    new_coll = sum(bool(COLL_LINE.search(ln)) for ln in added)
    assert new_coll == 5
    assert _table_rows(store, "comm_ops", "job1") == len(coll) + new_coll
    con = Store.open(store).connect(read_only=True)
    try:
        total = con.execute(
            "SELECT sum(lines_total) FROM ingested_files WHERE run_id = 'job1'"
        ).fetchall()[0][0]
    finally:
        con.close()
    assert total == lines_before + len(added)
    assert second["runs"]["job1"]["files"] == 1
    # A third pass with nothing new adds nothing.
    third = flows.ingest_logs(tmp_path / "watch", store)
    assert third["runs"]["job1"]["ingested"] == 0
    assert _table_rows(store, "comm_ops", "job1") == len(coll) + new_coll


# ------------------------------------------------------------------ local vs Dask, logs


@pytest.fixture(scope="module")
def local_run(
    flows: Any, tmp_path_factory: pytest.TempPathFactory, shared_samples: Path, sample_traces: Path
) -> dict[str, Any]:
    """The watched folder ingested once with the local (thread) task runner."""
    tmp = tmp_path_factory.mktemp("local_run")
    root = _watched(tmp, shared_samples, sample_traces)
    state = flows.ingest_logs(root, tmp / "store_local", return_state=True)
    assert state.is_completed()
    return {"root": root, "tmp": tmp, "store": tmp / "store_local", "state": state}


def _sorted_table(store: Path, table: str) -> pl.DataFrame:
    con = Store.open(store).connect(read_only=True)
    try:
        df = con.sql(f"SELECT * FROM {table}").pl()
    finally:
        con.close()
    df = df.drop([c for c in df.columns if c in {"ingested_at"}])
    return df.sort(df.columns, nulls_last=True)


@pytest.mark.slow
def test_dask_local_cluster_store_matches_local_run(flows: Any, local_run: dict[str, Any]) -> None:
    """process_cluster_logs with the Dask task runner (LocalCluster, 2 worker processes) gives
    the same store, row for row, as the local run."""
    dask_store = local_run["tmp"] / "store_dask"
    summary = flows.process_cluster_logs(
        local_run["root"],
        dask_store,
        local_run["tmp"] / "reports",
        task_runner="dask",
        dask_workers=2,
        derive=False,
        report=False,
    )
    assert summary["errors"] == []
    assert set(summary["runs"]) == {"nccl_pair", "ds_cpu"}
    assert summary["ingest"]["nccl_pair"]["ingested"] == 2
    # The local runner parses in this process; Dask workers are other processes.
    local_summary = local_run["state"].result()
    assert local_summary["runs"]["ds_cpu"]["worker_pids"] == [os.getpid()]
    dask_pids = {p for info in summary["ingest"].values() for p in info["worker_pids"]}
    assert dask_pids and os.getpid() not in dask_pids
    for table in [*TABLES, "ingested_files"]:
        a = _sorted_table(local_run["store"], table)
        b = _sorted_table(dask_store, table)
        assert a.height == b.height, table
        assert a.equals(b), table
    counted = _sorted_table(dask_store, "comm_ops").height
    independent = sum(
        bool(COLL_LINE.search(ln))
        for f in (local_run["root"] / "nccl_pair").iterdir()
        for ln in f.read_text().splitlines()
    )
    assert independent == 22
    assert counted >= independent  # plus the DeepSpeed/Kineto run's ops


@pytest.mark.slow
def test_library_log_lines_reach_flow_run_logs(flows: Any, local_run: dict[str, Any]) -> None:
    """commscope.pipeline.ingest's INFO lines (parser warnings) are stored as logs of the flow run."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)
    flow_run_id = local_run["state"].state_details.flow_run_id
    with get_client(sync_client=True) as client:
        logs = client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
        )
    names = {lg.name for lg in logs}
    assert "commscope.pipeline.ingest" in names, sorted(names)
    ds_warning = [
        lg for lg in logs if lg.name == "commscope.pipeline.ingest" and "rank0.log" in lg.message
    ]
    assert ds_warning and ds_warning[0].task_run_id is not None


@pytest.mark.slow
def test_failed_steps_read_the_same_through_prefect_and_in_process(
    flows: Any, tmp_path: Path
) -> None:
    """A derive or report that fails is recorded with the same message whether it ran as a
    Prefect task (PrefectSteps, the flows) or in this process (InProcessSteps, serve --once and
    demo): the summary's errors do not depend on the route."""
    from prefect import flow

    from commscope.pipeline.cycle import FAILED_PREFIX, InProcessSteps

    store = Store.open(tmp_path / "store").root
    out = tmp_path / "reports" / "x.html"
    calls = (("derive", (store, "bad id")), ("report", (store, "bad id", out)))

    @flow(name="failing-steps")
    def failing() -> list[Any]:  # tasks log to the API only inside a flow run
        return [getattr(flows.PrefectSteps(), step)(*args) for step, args in calls]

    through_prefect = failing()
    plain = InProcessSteps(retry_delay_s=0)
    for (step, args), got_prefect in zip(calls, through_prefect, strict=True):
        got_plain = getattr(plain, step)(*args)
        assert got_prefect[0] is None and got_plain[0] is None, step
        assert got_prefect[1] == got_plain[1], step
        assert got_plain[1].startswith(f"{FAILED_PREFIX} StoreError: invalid run id 'bad id'")
    assert not out.exists()


@pytest.mark.slow
def test_flows_validate_parameters_when_pickled_by_value() -> None:
    """serve's scheduled runs start each flow run in a new process from the flow function
    pickled by value (cloudpickle keeps only the globals its body names), then validate the
    parameters from their annotations there: these must still resolve (a flow body that no
    longer named ``Path`` failed every scheduled run)."""
    import cloudpickle
    from prefect import Flow

    import commscope.pipeline.flows as fl

    params = {"root": ["/w"], "store": "/s", "reports_dir": "/r", "run_layout": "subfolder"}
    for flow_obj, keys in (
        (fl.process_cluster_logs, params),
        (fl.ingest_logs, {k: params[k] for k in ("root", "store", "run_layout")}),
    ):
        # By value: the module's name for the function is bound to the Flow, not to it.
        fn = cloudpickle.loads(cloudpickle.dumps(flow_obj.fn))
        assert fn is not flow_obj.fn and fn.__globals__ is not vars(fl)
        got = Flow(fn=fn, name=flow_obj.name).validate_parameters(keys)
        assert got["store"] == Path("/s") and got["root"] == [Path("/w")]
