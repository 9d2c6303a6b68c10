"""discover(): which files of a folder ingest reads (ground truth and sidecars are skipped)."""

from __future__ import annotations

from pathlib import Path

from commscope.pipeline.ingest import discover
from commscope.synthetic import generator


def test_generator_ground_truth_and_manifest_are_skipped(tmp_path: Path) -> None:
    # The names the synthetic generator writes beside the logs (synthetic/generator.py).
    assert {"truth", "truth.json", "manifest.json"} <= set(generator._OUTPUTS)
    run = tmp_path / "run"
    logs = [run / "nccl" / "node0.1234.log", run / "deepspeed" / "rank0.log"]
    skipped = [
        run / "truth.json",
        run / "manifest.json",
        run / "truth" / "iterations.parquet",
        run / "truth" / "parts" / "lane0.parquet",
        run / "nccl" / "node0.truth.parquet",
        run / "nccl" / "node0.log.source.txt",
        run / ".hidden.log",
    ]
    for f in logs + skipped:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x\n")
    found, errors = discover([run])
    assert errors == []
    assert sorted(found) == sorted(logs)


def test_named_files_are_kept_and_missing_paths_reported(tmp_path: Path) -> None:
    truth = tmp_path / "truth.json"
    truth.write_text("{}")
    found, errors = discover([truth, tmp_path / "nope"])
    assert found == [truth]  # named explicitly: the user asked for it
    assert [e.message for e in errors] == ["no such file or directory"]


def test_a_folder_called_truth_named_explicitly_is_walked(tmp_path: Path) -> None:
    # Only a *subfolder* named truth is skipped; an input folder the user names is read.
    d = tmp_path / "truth"
    d.mkdir()
    (d / "a.log").write_text("x\n")
    found, _ = discover([d])
    assert found == [d / "a.log"]
