"""``commscope predict`` and ``commscope advise`` through their own argument parser."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pytest

from commscope.pipeline.commands import advise as advise_cmd
from commscope.pipeline.commands import predict as predict_cmd

ROOT = Path(__file__).resolve().parents[2]
GPT3B = str(ROOT / "configs" / "gpt3b_paper.toml")
FLAGS_3B = [
    "--layers", "54", "--hidden", "2000", "--seq", "1024", "--vocab", "50257",
    "--global-batch", "1024", "--micro-batch", "32", "--pp", "4", "--tp", "2", "--dp", "4",
]  # fmt: skip


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="commscope")
    sub = p.add_subparsers(dest="command", required=True)
    predict_cmd.register(sub)
    advise_cmd.register(sub)
    return p


def call(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    args = parser().parse_args(argv)
    rc = args.func(args)
    out, err = capsys.readouterr()
    return rc, out, err


def test_predict_prints_table3(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = call(["predict", "--config", GPT3B], capsys)
    assert rc == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    # type, count, msg bytes, msg MiB, volume MiB, sent MiB
    assert rows["TP"][1:] == ["680", "131,072,000", "125.00", "85,000.00", "85,000.00"]
    assert rows["PP"][1:4] == ["16", "131,072,000", "125.00"]
    assert rows["PP"][5] == "1,000.00"
    assert rows["DP"][1] == "1" and rows["DP"][3] == "741.47"
    assert rows["EmbTableSyn"][1] == "1" and rows["EmbTableSyn"][3] == "96.19"
    assert "R_bubble (eq. 7) 0.2727" in out


def test_predict_json_from_flags_matches_config(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = call(["predict", *FLAGS_3B, "--partitioner", "old", "--json"], capsys)
    assert rc == 0
    flags = json.loads(out)
    rc, out, _ = call(["predict", "--config", GPT3B, "--json"], capsys)
    from_file = json.loads(out)
    assert flags["traffic"] == from_file["traffic"]
    tp = flags["traffic"]["TP"]
    assert (tp["count"], tp["msg_bytes"], tp["volume_bytes"], tp["sent_bytes"]) == (
        680,
        131_072_000,
        680 * 131_072_000,
        680 * 131_072_000,
    )
    for key in ("t_comp", "t_tp", "t_pp", "t_dp", "t_bubble", "t_iter", "r_bubble", "r_comm"):
        assert isinstance(flags[key], float)
    assert flags["t_iter"] == pytest.approx(
        flags["t_comp"] + flags["t_comm"] + flags["t_bubble"], rel=1e-12
    )


def test_predict_paper_uniform_and_other_rank(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = call(["predict", "--config", GPT3B, "--mode", "paper_uniform", "--json"], capsys)
    assert rc == 0 and json.loads(out)["traffic"]["TP"]["count"] == 648
    rc, out, _ = call(["predict", "--config", GPT3B, "--rank", "24", "--json"], capsys)
    last = json.loads(out)
    assert rc == 0 and last["stage"] == 3 and last["node"] == 3
    assert last["traffic"]["TP"]["count"] == 8 * (6 * 12 + 1 + 3)  # head + 3 CE all-reduces


def test_predict_overrides_file_values(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["predict", "--config", GPT3B, "--dp", "2", "--global-batch", "512", "--json"]
    rc, out, _ = call(argv, capsys)
    result = json.loads(out)
    assert rc == 0 and result["micro_batches"] == 8 and result["world"] == 16
    rc, out, _ = call(["predict", "--config", GPT3B, "--mapping", "customized", "--json"], capsys)
    assert json.loads(out)["config"]["mapping"]["order"] == ["data", "pipe", "model"]


def test_predict_reports_config_errors(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = call(["predict", "--layers", "54"], capsys)
    assert rc == 2 and "--hidden" in err
    rc, _, err = call(["predict", *FLAGS_3B, "--tp", "3"], capsys)
    assert rc == 2 and "divide hidden" in err
    rc, _, err = call(["predict", "--config", str(ROOT / "no_such.toml")], capsys)
    assert rc == 2 and "error" in err


def test_advise_ranks_gpt3b_on_32_gpus_in_under_2s(capsys: pytest.CaptureFixture[str]) -> None:
    started = time.perf_counter()
    rc, out, _ = call(["advise", "--config", GPT3B, "--gpus", "32", "--top", "5"], capsys)
    elapsed = time.perf_counter() - started
    assert rc == 0 and elapsed < 2.0
    assert out.startswith("search space: 294 ")
    ranked = [line.split() for line in out.splitlines() if line[:4].strip().isdigit()]
    assert [int(r[0]) for r in ranked] == [1, 2, 3, 4, 5]
    times = [float(r[7]) for r in ranked]
    assert times == sorted(times)


def test_advise_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["advise", "--config", GPT3B, "--gpus", "32", "--top", "0", "--mappings", "all"]
    rc, out, _ = call([*argv, "--micro-batch-options", "8,32", "--json"], capsys)
    data = json.loads(out)
    assert rc == 0
    assert data["search_space_size"] == 21 * 2 * 6
    # ties collapsed: one row per (p, t, d, b) and class of mappings that give one prediction
    assert len(data["candidates"]) == data["evaluated"] <= data["valid"]
    layouts = [(c["pp"], c["tp"], c["dp"], c["micro_batch"]) for c in data["candidates"]]
    assert len(layouts) == len(set(layouts))
    assert all(c["source"] for c in data["constants"])
    assert {tuple(c["mapping"]) for c in data["candidates"]} <= {
        ("pipe", "data", "model"),
        ("pipe", "model", "data"),
        ("data", "pipe", "model"),
        ("data", "model", "pipe"),
        ("model", "pipe", "data"),
        ("model", "data", "pipe"),
    }
