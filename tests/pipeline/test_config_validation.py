"""Run configs are validated before anything is written (issue 23, item 8).

A manifest of ``[]``, deep nesting, a list where a table belongs, ``pp = "two"``, ``pp = 1e30``,
``pp = 0`` or a negative size used to end in a Python traceback (in ingest after the logs were
committed). Each is now one line naming the file and the key, a non-zero exit, and a store
left exactly as it was. A stored config that no longer validates is ignored with one line, so
derive and report still run.

One file for every command (issue 17, item 8): ``predict``, ``advise``, ``generate``,
``ingest``, ``derive`` and ``collect`` accept ``configs/synthetic_*.toml`` (its ``[generate]``
and ``[scenario]`` included) and refuse, each the same way, an unknown section or key (also in
the generator's sections: one line naming the file, the section and the key); a config from
which derive can compute no prediction is said so, never silently.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import pytest

from commscope.pipeline import run_config as rc
from commscope.pipeline.cli import main
from commscope.pipeline.config_schema import ConfigError, validate
from commscope.pipeline.store import Store

ROOT = Path(__file__).resolve().parents[2]
RUN = "cfg"
LOG = "op AllReduce 1024\nop AllGather 2048\nnoise\n"
GOOD = {"parallel": {"pp": 2, "tp": 1, "dp": 2}}


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` with a hash of its bytes (what "store unchanged" compares)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def deep_json(depth: int) -> str:
    """A JSON manifest whose config is nested ``depth`` lists deep (json recurses)."""
    return '{"config": {"parallel": {"pp": ' + "[" * depth + "]" * depth + "}}}"


BAD_MANIFESTS: dict[str, tuple[str, str]] = {
    # name: (manifest text, what the one-line message must contain)
    "empty_list": ("[]", "expected a JSON object"),
    "deep_nesting": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "deep_in_config": (deep_json(100_000), "nested too deeply"),
    "config_is_list": ('{"config": []}', "config: expected a table"),
    "section_is_list": ('{"config": {"parallel": [1, 2]}}', "parallel: expected a table"),
    "pp_string": ('{"config": {"parallel": {"pp": "two"}}}', "parallel.pp: expected an integer"),
    "pp_huge_float": ('{"config": {"parallel": {"pp": 1e30}}}', "parallel.pp"),
    "pp_zero": ('{"config": {"parallel": {"pp": 0}}}', "parallel.pp: expected an integer >= 1"),
    "tp_bool": ('{"config": {"parallel": {"tp": true}}}', "parallel.tp"),
    "dp_2_70": ('{"config": {"parallel": {"dp": 1180591620717411303424}}}', "parallel.dp"),
    "dp_5000_digits": ('{"config": {"parallel": {"dp": ' + "9" * 5000 + "}}}", "not valid JSON"),
    "negative_size": ('{"config": {"model": {"hidden": -2000}}}', "model.hidden"),
    "mu_nan": ('{"config": {"platform": {"mu": NaN}}}', "platform.mu"),
    "bandwidth_inf": ('{"config": {"platform": {"c_tp": Infinity}}}', "platform.c_tp"),
    "unknown_precision": ('{"config": {"model": {"precision": "fp8x"}}}', "model.precision"),
    "order_not_axes": ('{"config": {"mapping": {"order": ["a", "b"]}}}', "mapping.order"),
    "ep_not_dividing": ('{"config": {"parallel": {"dp": 4, "ep": 3}}}', "parallel.ep"),
    "world_too_big": (
        '{"config": {"parallel": {"pp": 1048576, "tp": 1048576, "dp": 2}}}',
        "ranks, more than",
    ),
    "not_utf8": ('{"config": {"model": {"name": "\xff"}}}', "not UTF-8"),
    "synthetic_not_bool": ('{"synthetic": "yes", "config": {}}', "synthetic"),
}


def _ingest(tmp_path: Path, *extra: str) -> int:
    return main(
        [
            "ingest",
            str(tmp_path / "in"),
            "--run",
            RUN,
            "--store",
            str(tmp_path / "store"),
            "--format",
            "test_lines",
            *extra,
        ]
    )


def _input_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.log").write_text(LOG)
    return folder


@pytest.mark.parametrize("name", sorted(BAD_MANIFESTS))
def test_bad_manifest_is_one_line_and_the_store_is_unchanged(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expected = BAD_MANIFESTS[name]
    folder = _input_folder(tmp_path)
    raw = text.encode("latin-1") if name == "not_utf8" else text.encode()
    (folder / "manifest.json").write_bytes(raw)
    Store.open(tmp_path / "store")
    before = snapshot(tmp_path / "store")
    code = _ingest(tmp_path)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert str(folder / "manifest.json") in lines[0], lines[0]
    assert expected in lines[0], lines[0]
    assert snapshot(tmp_path / "store") == before


BAD_TOML: dict[str, tuple[str, str]] = {
    "pp_string": ('[parallel]\npp = "two"\n', "parallel.pp: expected an integer >= 1"),
    "pp_1e30": ("[parallel]\npp = 1e30\n", "parallel.pp: expected an integer >= 1"),
    "pp_zero": ("[parallel]\npp = 0\n", "parallel.pp: expected an integer >= 1"),
    "pp_float": ("[parallel]\npp = 4.0\n", "parallel.pp: expected an integer"),
    "list_for_table": ("parallel = [1, 2]\n", "parallel: expected a table"),
    "table_for_value": ("[parallel.pp]\nx = 1\n", "parallel.pp: expected an integer"),
    "deep_nesting": ("x = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
    "not_toml": ("[parallel\npp = 4\n", "not valid TOML"),
    "inconsistent": (
        "[model]\nlayers = 2\nhidden = 64\nseq = 8\nvocab = 100\nglobal_batch = 8\n"
        "micro_batch = 1\n[parallel]\npp = 4\ntp = 1\ndp = 1\n",
        "exceeds layers",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_TOML))
def test_bad_config_file_is_refused_before_anything_is_written(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expected = BAD_TOML[name]
    _input_folder(tmp_path)
    cfg = tmp_path / "run.toml"
    cfg.write_text(text)
    Store.open(tmp_path / "store")
    before = snapshot(tmp_path / "store")
    code = _ingest(tmp_path, "--config", str(cfg))
    err = capsys.readouterr().err
    assert code == 2, err
    assert [line for line in err.splitlines() if line.strip()] == [
        line for line in err.splitlines() if str(cfg) in line and expected in line
    ], err
    assert snapshot(tmp_path / "store") == before


def test_the_documented_example_message() -> None:
    with pytest.raises(ConfigError) as exc:
        validate({"parallel": {"pp": "two"}}, "run.toml")
    assert str(exc.value).startswith("run.toml: parallel.pp: expected an integer >= 1")
    assert str(exc.value).endswith('got "two"')


def test_unknown_keys_in_a_manifest_are_errors_and_nothing_is_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _input_folder(tmp_path)
    cfg = {"parallel": {**GOOD["parallel"], "pipeline_magic": 3}}
    (folder / "manifest.json").write_text(json.dumps({"config": cfg}))
    Store.open(tmp_path / "store")
    before = snapshot(tmp_path / "store")
    assert _ingest(tmp_path) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert str(folder / "manifest.json") in err and "parallel.pipeline_magic" in err, err
    assert snapshot(tmp_path / "store") == before


SYNTHETIC = ROOT / "configs" / "synthetic_gpt3b_4x2x4.toml"

UNKNOWN: dict[str, tuple[str, str, str]] = {
    # name: (old text, new text, what the one-line message must contain)
    "section": ("\n[mapping]\n", "\n[mapings]\nx = 1\n\n[mapping]\n", "section [mapings]"),
    "model_key": ("layers = 54", "layers = 54\nlayrs = 54", "model.layrs in [model]"),
    "generate_key": ("seed = 7", "seed = 7\niteratons = 2", "generate.iteratons in [generate]"),
    "scenario_key": (
        "\n[generate]\n",
        "\n[scenario]\nstragler_rank = 3\n\n[generate]\n",
        "scenario.stragler_rank in [scenario]",
    ),
    "generate_type": ("seed = 7", 'seed = "seven"', "generate.seed: expected an integer"),
    "scenario_rank": (
        "\n[generate]\n",
        "\n[scenario]\nstraggler_rank = 32\n\n[generate]\n",
        "scenario.straggler_rank outside 0..31",
    ),
}
"""Mistakes in a copy of configs/synthetic_gpt3b_4x2x4.toml that every command must refuse."""


def _command(name: str, cfg: Path, tmp_path: Path) -> list[str]:
    """The command line of ``name`` run with ``--config cfg`` (inputs under ``tmp_path``)."""
    store = ["--store", str(tmp_path / "store")]
    if name == "ingest":
        return ["ingest", str(tmp_path / "in"), "--run", RUN, "--format", "test_lines", *store]
    if name == "derive":
        return ["derive", RUN, *store]
    if name == "report":  # its config flag is --model (re-derives the run)
        return ["report", RUN, "-o", str(tmp_path / "r.html"), *store, "--model", str(cfg)]
    if name == "generate":
        return ["generate", "--out", str(tmp_path / "gen"), "--formats", "deepspeed", *store]
    if name == "advise":
        return ["advise", "--gpus", "8"]
    if name == "collect":  # the wrapped command comes last
        return ["collect", "--out", str(tmp_path / "collected"), "--config", str(cfg), "--", "true"]
    return [name]


COMMANDS = ("predict", "advise", "generate", "ingest", "derive", "report", "collect")


@pytest.mark.parametrize("mistake", sorted(UNKNOWN))
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_an_unknown_section_or_key_naming_file_and_key(
    command: str, mistake: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new, expected = UNKNOWN[mistake]
    text = SYNTHETIC.read_text()
    assert old in text
    cfg = tmp_path / "run.toml"
    cfg.write_text(text.replace(old, new, 1))
    _input_folder(tmp_path)
    if command in {"derive", "report"}:
        assert _ingest(tmp_path) == 0
        capsys.readouterr()
    before = snapshot(tmp_path)
    args = _command(command, cfg, tmp_path)
    code = main(args if command in {"collect", "report"} else [*args, "--config", str(cfg)])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert str(cfg) in err and expected in err, err
    assert "Traceback" not in err
    assert snapshot(tmp_path) == before  # nothing generated, ingested, stored or collected


def test_the_synthetic_config_serves_predict_advise_ingest_and_derive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One file, its [generate] section included: no error, and what ingest and derive
    record from it is the model's sections, from which the model's predictions are made."""
    import tomllib

    from commscope.model.config import config_from_dict
    from commscope.pipeline.derive import input_frames

    raw = tomllib.loads(SYNTHETIC.read_text())
    assert "generate" in raw
    assert config_from_dict(raw).world == 32  # the model ignores the generator's sections
    for command in ("predict", "advise"):
        assert main([*_command(command, SYNTHETIC, tmp_path), "--config", str(SYNTHETIC)]) == 0
    _input_folder(tmp_path)
    assert _ingest(tmp_path, "--config", str(SYNTHETIC)) == 0
    out = capsys.readouterr()
    assert f"run config: config:{SYNTHETIC}" in out.out and "predictions" in out.out
    assert "warning" not in out.err
    stored = rc.load(Store.open(tmp_path / "store"), RUN)
    assert stored is not None
    assert set(stored.config) == {"model", "parallel", "platform", "mapping"}
    assert input_frames(stored, RUN)["predicted_traffic"].height > 0  # what derive stores


def test_a_config_without_a_model_is_said_to_give_no_predictions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "run.toml"
    cfg.write_text("[parallel]\npp = 2\ntp = 1\ndp = 2\n")
    _input_folder(tmp_path)
    assert _ingest(tmp_path, "--config", str(cfg)) == 0
    err = capsys.readouterr().err
    assert "no [model] section" in err and "no predictions" in err, err
    assert main(["derive", RUN, "--store", str(tmp_path / "store")]) == 0
    err = capsys.readouterr().err
    assert "no [model] section" in err and "no predictions" in err, err


def test_a_manifest_not_recorded_over_an_existing_config_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _input_folder(tmp_path)
    assert _ingest(tmp_path, "--config", str(SYNTHETIC)) == 0
    (folder / "b.log").write_text(LOG + "more\n")
    (folder / "manifest.json").write_text(json.dumps({"config": GOOD}))
    capsys.readouterr()
    assert _ingest(tmp_path) == 0
    err = capsys.readouterr().err
    assert "manifest.json was not recorded" in err and str(SYNTHETIC) in err, err


def test_generator_schema_names_the_generators_own_keys() -> None:
    """config_schema's types for [generate]/[scenario] cover exactly the generator's fields."""
    from dataclasses import fields

    from commscope.model import config as model_config
    from commscope.pipeline.config_schema import GENERATOR_SCHEMA, GENERATOR_SECTIONS
    from commscope.synthetic.scenario import GenerateOptions, Scenario

    gen = {f.name for f in fields(GenerateOptions)} - {"scenario"}
    assert set(GENERATOR_SCHEMA["generate"]) == gen
    assert set(GENERATOR_SCHEMA["scenario"]) == {f.name for f in fields(Scenario)}
    assert model_config.GENERATOR_SECTIONS == GENERATOR_SECTIONS


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_config_serves_generate_and_predict(path: Path) -> None:
    """Every shipped file, the paper's and the synthetic ones, reads for both sides."""
    from commscope.pipeline.run_config import load_generate_config

    run, opts = load_generate_config(path)
    assert run.world >= 1 and opts.iterations >= 1
    checked = rc.check_config_file(path)
    assert set(checked.generator) <= {"generate", "scenario"}


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_config_validates_with_its_model_sections_kept(path: Path) -> None:
    import tomllib

    raw = tomllib.loads(path.read_text())
    got = rc.read_config_file(path)
    assert set(got) == set(raw) & {"model", "parallel", "platform", "mapping"}
    for section, body in got.items():
        assert body == raw[section]


def test_invalid_stored_config_is_ignored_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A store written by an older commscope may hold a config that no longer validates."""
    from commscope.pipeline.derive import input_frames

    store = Store.open(tmp_path / "store")
    rc.save(store, rc.StoredConfig(RUN, {"parallel": {"pp": "two", "tp": 1}}, "config:old.toml"))
    with caplog.at_level(logging.WARNING):
        stored = rc.load(store, RUN)
    assert stored is None
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 1 and "parallel.pp" in msgs[0] and "config.json" in msgs[0], msgs
    frames = input_frames(stored, RUN)  # what derive and report build from it: no traceback
    assert frames["run_config"].height == 1


def test_derive_and_report_on_a_store_with_an_invalid_stored_config(
    tmp_path: Path, shared_samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = shared_samples / "nccl_debug" / "gfbench_2.20.5_2rank_normal_rank0_debugfile.txt"
    store_dir = tmp_path / "store"
    assert main(["ingest", str(log), "--run", RUN, "--store", str(store_dir)]) == 0
    cfg_path = rc.config_path(Store.open(store_dir), RUN)
    cfg_path.parent.mkdir(parents=True, exist_ok=True)
    cfg_path.write_text(json.dumps({"run_id": RUN, "source": "x", "config": []}))
    capsys.readouterr()
    assert main(["derive", RUN, "--store", str(store_dir)]) == 0
    out = tmp_path / "r.html"
    assert main(["report", RUN, "-o", str(out), "--store", str(store_dir)]) == 0
    assert out.is_file()
    assert "Traceback" not in capsys.readouterr().err


def test_derive_with_a_bad_config_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _input_folder(tmp_path)
    assert _ingest(tmp_path) == 0
    assert folder.is_dir()
    cfg = tmp_path / "run.toml"
    cfg.write_text("[parallel]\npp = -1\n")
    capsys.readouterr()
    code = main(["derive", RUN, "--store", str(tmp_path / "store"), "--config", str(cfg)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().count("\n") == 0 and "run.toml: parallel.pp" in err, err
    assert rc.load(Store.open(tmp_path / "store"), RUN) is None  # nothing stored


def test_a_bad_config_creates_no_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Validation comes before the store is opened: a new store is not even created."""
    _input_folder(tmp_path)
    cfg = tmp_path / "run.toml"
    cfg.write_text('[parallel]\npp = "two"\n')
    assert _ingest(tmp_path, "--config", str(cfg)) == 2
    assert "parallel.pp" in capsys.readouterr().err
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("name", ["pp_string", "deep_nesting", "list_for_table"])
@pytest.mark.parametrize("command", ["predict", "advise"])
def test_predict_and_advise_validate_their_config(
    command: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expected = BAD_TOML[name]
    cfg = tmp_path / "run.toml"
    cfg.write_text(text)
    extra = ["--gpus", "8"] if command == "advise" else []
    code = main([command, "--config", str(cfg), *extra])
    err = capsys.readouterr().err
    assert code != 0
    assert len(err.strip().splitlines()) == 1 and str(cfg) in err and expected in err, err


@pytest.mark.slow
def test_generate_ingest_records_the_config_and_derive_predicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``generate --ingest`` with the synthetic file, then derive: the store has predictions."""
    store = str(tmp_path / "store")
    gen = ["generate", "--config", str(SYNTHETIC), "--out", str(tmp_path / "gen")]
    gen += ["--formats", "deepspeed", "--iterations", "1", "--ingest", "--store", store]
    assert main(gen) == 0
    out = capsys.readouterr().out
    assert "run config: manifest:" in out and "derive computes the model's predictions" in out
    run_id = next(iter(Store.open(tmp_path / "store").runs()))
    assert main(["derive", run_id, "--store", store]) == 0
    capsys.readouterr()
    sql = "select count(*) as n from predicted_traffic"
    assert main(["query", sql, "--store", store, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["n"] > 0
