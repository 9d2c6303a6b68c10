"""The README's first command, ``commscope demo``, end to end as a user runs it: a synthetic
run is generated beside the store, the real CPU run and it go through the Prefect flows on the
embedded server, and the output ends with one HTML report per run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from commscope.pipeline.store import Store


@pytest.mark.slow
def test_demo_end_to_end(tmp_path: Path, project_root: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    store = tmp_path / "commscope_store"
    proc = subprocess.run(
        [sys.executable, "-m", "commscope", "demo", "--store", str(store)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,  # reports go to ./commscope_reports, as for a user
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout

    bundled = sorted(p.name for p in (project_root / "sample_traces").iterdir() if p.is_dir())
    generated = sorted(p.name for p in (tmp_path / "generated").iterdir() if p.is_dir())
    assert generated and all(name.startswith("synthetic") for name in generated)
    runs = set(Store.open(store, create=False).runs())
    assert runs == set(bundled) | set(generated)

    # The generated run is labelled synthetic in its stored config, the real one is not.
    for run in runs:
        cfg = json.loads((store / "runs" / run / "config.json").read_text())
        assert bool(cfg.get("synthetic")) == (run in generated), (run, cfg)

    # The output ends with the report of every run, each a file that exists.
    tail = out.strip().splitlines()[-(len(runs) + 2) :]
    for run in runs:
        report = tmp_path / "commscope_reports" / f"{run}.html"
        assert report.is_file() and report.stat().st_size > 100_000
        assert any(str(report) in line for line in tail), tail
    syn = (tmp_path / "commscope_reports" / f"{generated[0]}.html").read_text()
    assert "SYNTHETIC DATA" in syn
