"""serve's folder-name -> run-id mapping keeps distinct folders distinct (issue 23).

Before: invalid characters became ``_`` and the rest was dropped, so "run 1" and "run_1" were
one run, and "実験1" and "試験1" both became "1": two experiments silently mixed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from commscope.pipeline.runs import discover_runs, safe_run_id
from commscope.pipeline.store import validate_run_id

LINE = b"host:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 8 datatype 7\n"


def _folders(root: Path, names: list[str]) -> None:
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "rank0.log").write_bytes(LINE)


@pytest.mark.parametrize(
    "names",
    [["run 1", "run_1"], ["実験1", "試験1"], ["a/b".replace("/", "\\"), "a_b"], ["x", "x "]],
    ids=["space", "cjk", "backslash", "trailing_space"],
)
def test_distinct_folder_names_stay_distinct_runs(tmp_path: Path, names: list[str]) -> None:
    _folders(tmp_path, names)
    runs, folders, _ = discover_runs([tmp_path])
    assert len(runs) == len(names), runs
    by_folder = {tuple(p.name for p in v): k for k, v in folders.items()}
    for name in names:
        rid = by_folder[(name,)]
        assert validate_run_id(rid) == rid
        assert [f.parent.name for f in runs[rid]] == [name]


def test_valid_names_keep_their_id_and_others_are_readable_and_stable() -> None:
    for name in ("run1", "job-42", "exp.3_b"):
        assert safe_run_id(name) == name  # existing stores' runs keep their ids
    rid = safe_run_id("run 1")
    assert rid.startswith("run_1-") and rid == safe_run_id("run 1")
    assert safe_run_id("実験1") != safe_run_id("試験1")
    assert validate_run_id(safe_run_id("...")) == safe_run_id("...")
    assert validate_run_id(safe_run_id("x" * 300))


def test_pattern_layout_keeps_distinct_names_distinct(tmp_path: Path) -> None:
    _folders(tmp_path, ["job run 1", "job run_1"])
    runs, _, skipped = discover_runs([tmp_path], "pattern", r"^job (?P<run>[^/]+)/")
    assert len(runs) == 2 and not skipped, (runs, skipped)
    assert "run_1" in runs  # a valid name stays as it is


def test_two_names_with_one_id_are_refused_naming_both(tmp_path: Path) -> None:
    clash = safe_run_id("a b")  # a folder literally named like another's mapped id
    _folders(tmp_path, ["a b", clash])
    runs, _, skipped = discover_runs([tmp_path])
    assert list(runs) == [clash] and len(runs[clash]) == 1  # never mixed
    (msg,) = [s for s in skipped if "already the run id" in s]
    assert "'a b'" in msg and repr(clash) in msg
