"""The wheel works anywhere (issue 20): one top-level name, the data folders inside it, and a
fresh install that runs ``demo``, ``derive`` and ``report`` from an empty folder."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_and_data_folder_is_listed() -> None:
    """setuptools ships only listed packages (and warns of data sub-folders it was not told
    of): every folder with files under a mapped folder is in ``packages``."""
    cfg = _setuptools()
    expected = set()
    for name, folder in cfg["package-dir"].items():
        expected.add(name)
        for sub in (ROOT / folder).rglob("*"):
            if (
                sub.is_dir()
                and "__pycache__" not in sub.parts
                and any(f.is_file() for f in sub.iterdir())
            ):
                expected.add(".".join((name, *sub.relative_to(ROOT / folder).parts)))
    assert set(cfg["packages"]) == expected


def test_data_is_found_through_the_package() -> None:
    import commscope

    assert (commscope.sql_dir() / "marts" / "traffic_matrix.sql").is_file()
    assert (commscope.configs_dir() / "synthetic_gpt3b_4x2x4.toml").is_file()
    assert (commscope.sample_traces_dir() / "gpu_nccl_tp2_dp2_1gpu" / "manifest.json").is_file()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    (whl,) = out.glob("commscope-*.whl")
    return whl


@pytest.mark.slow
def test_wheel_holds_commscope_alone_with_its_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"commscope"}
    for needed in (
        "commscope/__init__.py",
        "commscope/pipeline/cli.py",
        "commscope/model/equations.py",
        "commscope/sql/marts/traffic_matrix.sql",
        "commscope/sql/macros/comm_bus_factor.sql",
        "commscope/configs/synthetic_gpt3b_4x2x4.toml",
        "commscope/sample_traces/gpu_nccl_tp2_dp2_1gpu/manifest.json",
    ):
        assert needed in names, needed
    sql_files = {p.relative_to(ROOT).as_posix() for p in (ROOT / "sql").rglob("*.sql")}
    assert {f"commscope/{s}" for s in sql_files} <= set(names)


@pytest.mark.slow
def test_wheel_installed_in_a_fresh_venv_runs_demo_derive_report(
    wheel: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    r = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    work = tmp_path / "empty"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    cli = str(venv / "bin" / "commscope")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [cli, *args], cwd=work, env=env, capture_output=True, text=True, timeout=900
        )

    where = subprocess.run(
        [str(py), "-c", "import commscope.pipeline, sys; print(commscope.pipeline.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(venv) in where and str(ROOT) not in where  # the installed copy, not the source
    demo = run("demo")  # the README's main job: Prefect flows, synthetic run, bundled samples
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-3000:]
    reports = sorted((work / "commscope_reports").glob("*.html"))
    assert {p.stem for p in reports} >= {
        "gpu_nccl_tp2_dp2_1gpu",
        "ds_pipe_pp2_dp2_cpu",
        "synthetic_gpt3b_4x2x4",
    }
    derived = run("derive", "gpu_nccl_tp2_dp2_1gpu")
    assert derived.returncode == 0, derived.stderr[-3000:]
    assert "traffic_matrix" in derived.stdout
    out = work / "tp2.html"
    rep = run("report", "gpu_nccl_tp2_dp2_1gpu", "-o", str(out))
    assert rep.returncode == 0, rep.stderr[-3000:]
    page = out.read_text()
    assert "is not defined by this version of commscope" not in page
    assert 'id="traffic"' in page
