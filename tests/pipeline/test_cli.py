"""The command line: help everywhere, clear one-line errors, exit codes, no tracebacks."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from commscope.pipeline.cli import build_parser, main


def _commands() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sorted(sub.choices)  # type: ignore[arg-type]


def test_every_command_has_help_and_store_option(capsys: pytest.CaptureFixture[str]) -> None:
    commands = _commands()
    assert {"ingest", "query", "schema", "summary", "demo"} <= set(commands)
    for name in commands:
        with pytest.raises(SystemExit) as exc:
            main([name, "--help"])
        assert exc.value.code == 0
        out = capsys.readouterr().out
        assert "--store" in out, name
        assert len(out.splitlines()) > 3, name


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "commscope", *args], capture_output=True, text=True, timeout=300
    )


def test_bad_inputs_give_one_line_each_and_no_traceback(
    tmp_path: Path, shared_samples: Path
) -> None:
    real = shared_samples / "nccl_debug" / "gfbench_2.20.5_2rank_normal_rank0_debugfile.txt"
    data = real.read_bytes()
    good = tmp_path / "good.log"
    good.write_bytes(data)
    # A real log cut mid-line (a killed job): still ingests, the cut line is a reject.
    cut = tmp_path / "cut.log"
    cut_at = data.index(b"AllReduce: opCount 3") + 40
    cut.write_bytes(data[:cut_at])
    # A truncated .gz of a real log, long enough that the cut lies past the sniffed head.
    trunc = tmp_path / "trunc.log.gz"
    trunc.write_bytes(gzip.compress(data * 200)[:-5000])
    rnd = tmp_path / "random.bin"
    rnd.write_bytes(bytes(range(256)) * 40)
    missing = tmp_path / "nope.log"
    store = tmp_path / "store"
    args = [str(good), str(cut), str(trunc), str(rnd), str(missing)]
    proc = run_cli("ingest", *args, "--run", "r", "--store", str(store))
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out
    assert proc.returncode == 0  # something was ingested
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("commscope: error:")]
    assert any(f"{trunc}:" in ln and "line" in ln for ln in errors), errors
    assert any(f"{missing}: no such file or directory" in ln for ln in errors), errors
    assert len(errors) == 2, errors
    rows = {ln.split()[0]: ln for ln in proc.stdout.splitlines() if ln.startswith(str(tmp_path))}
    assert "ingested" in rows[str(good)] and "ingested" in rows[str(cut)]
    assert "not recognised" in rows[str(rnd)]
    q = run_cli(
        "query",
        "SELECT count(*) AS n FROM rejects WHERE path LIKE '%cut.log'",
        "--store",
        str(store),
        "--format",
        "csv",
    )
    assert q.stdout.splitlines()[1] == "1"
    again = run_cli("ingest", str(good), str(cut), "--run", "r", "--store", str(store))
    assert again.stdout.count("already ingested") == 2


def test_missing_path_and_unrecognised_file_exit_nonzero(tmp_path: Path) -> None:
    rnd = tmp_path / "random.bin"
    rnd.write_bytes(bytes(range(256)) * 40)
    proc = run_cli(
        "ingest", str(rnd), str(tmp_path / "nope"), "--run", "r", "--store", str(tmp_path / "s")
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert f"{tmp_path / 'nope'}: no such file or directory" in proc.stderr
    assert "not recognised" in proc.stdout


def test_query_on_missing_store_is_a_clear_error(tmp_path: Path) -> None:
    proc = run_cli("query", "SELECT 1", "--store", str(tmp_path / "none"))
    assert proc.returncode == 2
    assert "no commscope store here" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_invalid_run_id_is_rejected(tmp_path: Path, lines_file: Path) -> None:
    proc = run_cli("ingest", str(lines_file), "--run", "../evil", "--store", str(tmp_path / "s"))
    assert proc.returncode == 2
    assert "invalid run id" in proc.stderr


def test_schema_command_lists_documented_columns(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "comm_ops"]) == 0
    out = capsys.readouterr().out
    assert "msg_bytes" in out and "grain" in out
    assert main(["schema", "nope"]) == 2


def test_top_level_help_imports_no_command_module(project_root: Path) -> None:
    """`commscope --help` lists every command without importing polars, duckdb or the store
    (issue 20: the parser was built by importing every command: 1-2 s before any output)."""
    heavy = (
        "polars",
        "duckdb",
        "pyarrow",
        "commscope.pipeline.store",
        "commscope.pipeline.commands.query",
    )
    code = (
        "import sys\nfrom commscope.pipeline.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print('LOADED', sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=project_root, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "LOADED []"
    for name in _commands():
        # a name longer than argparse's column ends its line (calibrate)
        assert f"    {name} " in proc.stdout or f"    {name}\n" in proc.stdout, name


def test_command_list_matches_each_modules_help() -> None:
    """COMMANDS (what the fast top-level --help shows) names every command module with the help
    line that module registers."""
    from commscope.pipeline.cli import COMMANDS, command_modules

    assert sorted(COMMANDS) == command_modules() == _commands()
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    registered = {a.dest: a.help for a in sub._choices_actions}
    assert registered == COMMANDS


def test_lazy_parser_runs_the_named_command(capsys: pytest.CaptureFixture[str]) -> None:
    """main() registers only the named command, and its options work as with the full parser."""
    assert main(["schema", "comm_ops"]) == 0
    assert "msg_bytes" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from commscope.pipeline.cli import version

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out == f"commscope {version()}"
    assert out.split()[1] != ""
