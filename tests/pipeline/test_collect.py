"""``commscope collect``: environment, tee, manifest, exit code; ingest reads what it writes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from commscope.pipeline import run_config as rc
from commscope.pipeline.collect import NCCL_SUBSYS, collect
from commscope.pipeline.ingest import discover

CHILD = r"""
import json, os, sys
keys = ["NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "COMMSCOPE_DS_COMMS_CONFIG",
        "COMMSCOPE_PROFILE_DIR"]
print(json.dumps({k: os.environ.get(k) for k in keys}))
sys.stdout.write("partial-out")
sys.stdout.flush()
print("to-stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def test_collect_runs_tees_and_writes_a_manifest(tmp_path: Path) -> None:
    out, err, say = io.BytesIO(), io.BytesIO(), io.StringIO()
    env = {"PATH": "/usr/bin:/bin", "NCCL_DEBUG_SUBSYS": "INIT,COLL", "API_TOKEN": "x"}
    res = collect(
        [sys.executable, "-c", CHILD, "5"],
        tmp_path / "run 1",
        config={"parallel": {"pp": 2, "tp": 1, "dp": 2}},
        profiler=True,
        env=env,
        stdout=out,
        stderr=err,
        say=say,
    )
    assert res.exit_code == 5
    seen = json.loads(out.getvalue().decode().splitlines()[0])
    run = tmp_path / "run 1"
    assert seen["NCCL_DEBUG"] == "INFO"
    assert seen["NCCL_DEBUG_SUBSYS"] == "INIT,COLL"  # the user's value is kept
    assert any("NCCL_DEBUG_SUBSYS=INIT,COLL kept" in n for n in res.notes)
    assert seen["NCCL_DEBUG_FILE"] == str(run / "nccl" / "%h.%p.log")
    assert seen["COMMSCOPE_PROFILE_DIR"] == str(run / "profiler")
    ds = json.loads(Path(seen["COMMSCOPE_DS_COMMS_CONFIG"]).read_text())
    assert ds["comms_logger"] == {
        "enabled": True,
        "verbose": True,
        "prof_all": True,
        "debug": False,
    }
    assert "comms_logger" in say.getvalue()  # told what to merge into the ds_config
    # Console got both streams; the log got both, bytes intact (a partial line too).
    log = (run / "stdout.log").read_text()
    assert "partial-out" in log and "to-stderr" in log and seen["NCCL_DEBUG"] in log
    assert b"to-stderr" in err.getvalue() and b"partial-out" in out.getvalue()
    m = json.loads((run / "manifest.json").read_text())
    assert m["exit_code"] == 5 and m["command"][-1] == "5" and m["run_id"] == "run-1"
    assert m["env"]["NCCL_DEBUG"] == "INFO" and "API_TOKEN" not in m["env"]
    assert m["start_time_utc"] <= m["end_time_utc"]
    # The manifest is what ingest reads as the run's config.
    assert rc.read_manifest(run) == ({"parallel": {"pp": 2, "tp": 1, "dp": 2}}, False)
    found, _ = discover([run])
    assert [f.name for f in found] == ["stdout.log"]


def test_command_not_found_is_127(tmp_path: Path) -> None:
    say = io.StringIO()
    res = collect(["/nonexistent/cmd"], tmp_path / "r", say=say, env={})
    assert res.exit_code == 127
    assert json.loads(res.manifest.read_text())["error"].startswith("cannot start")


def test_cli_collect_returns_the_command_exit_code(tmp_path: Path) -> None:
    out = tmp_path / "c"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "commscope",
            "collect",
            "--out",
            str(out),
            "--run-id",
            "job7",
            "--pp",
            "2",
            "--dp",
            "4",
            "--",
            sys.executable,
            "-c",
            CHILD,
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "NCCL_DEBUG_SUBSYS" in proc.stdout and NCCL_SUBSYS in proc.stdout
    m = json.loads((out / "manifest.json").read_text())
    assert m["run_id"] == "job7" and m["config"] == {"parallel": {"pp": 2, "dp": 4}}
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "commscope",
            "collect",
            "--out",
            str(out),
            "--",
            sys.executable,
            "-c",
            "raise SystemExit(9)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 9
