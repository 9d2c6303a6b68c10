"""``commscope generate``: flags, errors, determinism by seed, synthetic labels, bundled configs."""

from __future__ import annotations

import gzip
import hashlib
import json
import sqlite3
import tomllib
from pathlib import Path

import pytest

from commscope.model.config import config_from_dict
from commscope.pipeline.cli import main
from commscope.pipeline.run_config import load_generate_config
from commscope.synthetic import GenerateOptions, generate

ROOT = Path(__file__).resolve().parents[2]

TINY_TOML = """
[model]
name = "tiny"
layers = 8
hidden = 256
seq = 128
vocab = 1000
global_batch = 32
micro_batch = 2
micro_batches = 4

[parallel]
pp = 4
tp = 2
dp = 4

[platform]
gpus_per_node = 8
peak_flops = 2e12

[generate]
iterations = 2
seed = 3
"""


@pytest.fixture
def tiny_toml(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_TOML)
    return path


def digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_help_lists_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["generate", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for flag in (
        "--config",
        "--out",
        "--formats",
        "--iterations",
        "--seed",
        "--straggler-rank",
        "--network",
        "--store",
    ):
        assert flag in out


def test_generate_writes_labelled_files_and_manifest(
    tmp_path: Path, tiny_toml: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    rc = main(
        [
            "generate",
            "--config",
            str(tiny_toml),
            "--out",
            str(out),
            "--iterations",
            "1",
            "--seed",
            "4",
            "--mapping",
            "customized",
            "--network",
            "tcp",
            "--store",
            str(tmp_path / "store"),
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "T_bubble" in text and "ingest with: commscope ingest" in text
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["synthetic"] is True and manifest["seed"] == 4 and manifest["iterations"] == 1
    assert manifest["config"]["mapping"]["order"] == ["data", "pipe", "model"]
    assert manifest["scenario_active"] == {"network": "tcp"}
    assert config_from_dict(manifest["config"]).world == 32
    assert len(manifest["mapping"]["ranks"]) == 32
    logs = [p for fmt in ("nccl", "deepspeed", "kineto", "nsys") for p in (out / fmt).iterdir()]
    assert len(logs) == 32 * 3 + 1
    assert all(p.name.startswith("synthetic_") for p in logs)
    assert sorted(str(p.relative_to(out)) for p in logs) == sorted(
        f for v in manifest["files"].values() for f in v
    )
    with gzip.open(out / "kineto" / "synthetic_rank0000.pt.trace.json.gz") as fh:
        assert json.load(fh)["commscope_synthetic"] is True
    con = sqlite3.connect(out / "nsys" / "synthetic_rank0000.sqlite")
    assert con.execute(
        "SELECT value FROM META_DATA_EXPORT WHERE name = 'COMMSCOPE_SYNTHETIC'"
    ).fetchone() == ("true",)
    con.close()
    assert (
        "synthetic run (commscope generate)"
        in (out / "deepspeed" / "synthetic_rank0000.deepspeed.log").read_text()
    )
    assert "synthetic-node000:" in (out / "nccl" / "synthetic_rank0000.nccl.log").read_text()
    # Regenerating into the same (synthetic) folder replaces it.
    assert (
        main(
            [
                "generate",
                "--config",
                str(tiny_toml),
                "--out",
                str(out),
                "--formats",
                "nccl",
                "--iterations",
                "1",
            ]
        )
        == 0
    )
    assert not (out / "kineto").exists() and (out / "nccl").is_dir()


def test_errors_are_one_line_and_exit_2(
    tmp_path: Path, tiny_toml: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    cases = [
        ["--out", str(other)],
        ["--out", str(tmp_path / "a"), "--formats", "nccl,pdf"],
        ["--out", str(tmp_path / "b"), "--straggler-rank", "99"],
        ["--out", str(tmp_path / "c"), "--nccl-version", "2.12.10"],
    ]
    for extra in cases:
        rc = main(["generate", "--config", str(tiny_toml), *extra])
        err = capsys.readouterr().err
        assert rc == 2, extra
        assert err.startswith("commscope: error: ") and err.count("\n") == 1, err
    assert (other / "notes.txt").read_text() == "mine"


def test_same_seed_gives_identical_bytes(tmp_path: Path) -> None:
    cfg = tomllib.loads(TINY_TOML)
    run = config_from_dict({k: v for k, v in cfg.items() if k != "generate"})
    opts = GenerateOptions(iterations=1, seed=21)
    generate(run, opts, tmp_path / "a")
    generate(run, opts, tmp_path / "b")
    generate(run, GenerateOptions(iterations=1, seed=22), tmp_path / "c")
    generate(run, GenerateOptions(iterations=1, seed=21, jobs=2), tmp_path / "d")
    a, b, c = digests(tmp_path / "a"), digests(tmp_path / "b"), digests(tmp_path / "c")
    assert a == b
    d = digests(tmp_path / "d")  # worker processes write the same bytes
    assert {k for k in a if a[k] != d[k]} == {"manifest.json"}
    md = json.loads((tmp_path / "d" / "manifest.json").read_text())
    ma = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert md["generate"].pop("jobs") == 2 and ma["generate"].pop("jobs") == 1
    assert md == ma
    assert len(a) > 100
    differing = {k for k in a if a[k] != c.get(k)}
    assert "truth.json" in differing and any(k.startswith("kineto/") for k in differing)


@pytest.mark.parametrize(
    "path", sorted((ROOT / "configs").glob("synthetic_*.toml")), ids=lambda p: p.name
)
def test_bundled_synthetic_configs_are_valid(path: Path) -> None:
    run, opts = load_generate_config(path)
    opts.scenario.check(run)
    assert run.world >= 8 and opts.iterations >= 1
