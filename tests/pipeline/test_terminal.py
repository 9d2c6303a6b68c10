"""Issue 23: text from inputs never reaches the terminal raw.

File names and log text can hold escape sequences: OSC 52 writes the clipboard, CSI clears
the screen or recolours, RIS resets the terminal, ``\\r`` overwrites what was printed, bidi
overrides make a name read differently. ``ingest`` (its table, its error lines, its log
warnings) and ``query`` (table always, CSV on a terminal, JSON always) print such text with
every control character made visible by one sanitiser, ``commscope.pipeline.commands._format.sanitize``.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path

import pytest

from commscope.pipeline.cli import main
from commscope.pipeline.commands._format import SafeFormatter, sanitize, table

SMALL = "nccl_debug/gfbench_2.20.5_2rank_normal_rank0_debugfile.txt"

RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""What must not reach a terminal (newline, which ends lines, excepted)."""

FILE_NAME = "rank0\x1b]52;c;cHduZWQ=\x07\x1b[2J\r\u202e.log"
"""OSC 52 (clipboard write), CSI clear screen, carriage return, right-to-left override."""

HOST = "h\x9d52;c;cHduZWQ=\x07\x9b2J\x1bc\u202ex"
"""A host name NCCL's prefix accepts (no blank, ':' or brackets) holding the C1 forms of OSC
and CSI, BEL, RIS (ESC c) and a bidi override."""


def test_sanitize_makes_every_control_visible_and_keeps_the_rest() -> None:
    """Every C0/C1 control, DEL and bidi control becomes a visible escape; other text stays."""
    controls = [chr(c) for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]]
    controls += [
        "\u200e",
        "\u200f",
        *map(chr, range(0x202A, 0x202F)),
        *map(chr, range(0x2066, 0x206A)),
    ]
    for ch in controls:
        out = sanitize(f"a{ch}b")
        assert not RAW.search(out) and "\n" not in out, repr(ch)
        assert out.startswith("a\\") and out.endswith("b") and len(out) > 3, (repr(ch), out)
    plain = "日本語 café ✓ tab-free text: [0] 1.5 GB/s"
    assert sanitize(plain) == plain
    assert sanitize("one\ntwo\x1b", keep="\n") == "one\ntwo\\x1b"


def test_table_cells_and_headers_are_sanitised() -> None:
    """``table`` (used by ingest, query and the other commands) sanitises every cell."""
    text = table([f"col{FILE_NAME}"], [[FILE_NAME], [HOST], [None], [3]])
    assert not RAW.search(text)
    assert "\\x1b]52;c;cHduZWQ=\\x07" in text and "\\x9b2J" in text


def test_log_records_are_sanitised() -> None:
    """Log warnings quote file names: the CLI's formatter makes their controls visible."""
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "%s: bad", (FILE_NAME,), None)
    out = SafeFormatter("%(levelname)s %(message)s").format(record)
    assert not RAW.search(out) and "\\x1b]52" in out


@pytest.fixture
def hostile_inputs(tmp_path: Path, shared_samples: Path) -> Path:
    """A folder with a real NCCL log under a hostile name whose host name is hostile too."""
    src = shared_samples / SMALL
    host = src.read_text().split(":", 1)[0]
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / FILE_NAME).write_text(src.read_text().replace(host, HOST))
    return folder


def test_ingest_output_is_sanitised(
    hostile_inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ingest's table and error lines show hostile file names escaped (before: raw)."""
    missing = tmp_path / f"gone{FILE_NAME}"
    store = tmp_path / "store"
    rc = main(["ingest", str(hostile_inputs), str(missing), "--run", "t", "--store", str(store)])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert not RAW.search(out.out) and not RAW.search(out.err), (out.out, out.err)
    assert "\\x1b]52;c;cHduZWQ=\\x07" in out.out  # the stored file, shown escaped
    assert "gone" in out.err and "\\x1b[2J" in out.err  # the missing file's error line
    assert "ingested" in out.out


def test_query_output_is_sanitised(
    hostile_inputs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """query: table always, CSV on a terminal and JSON show hostile log text escaped; CSV to
    a file or pipe keeps the data exact; an error quoting hostile text is one clean line."""
    store = tmp_path / "store"
    assert main(["ingest", str(hostile_inputs), "--run", "t", "--store", str(store)]) == 0
    capsys.readouterr()
    sql = "SELECT DISTINCT host, source_file FROM comm_ops"

    def query(fmt: str, text: str = sql) -> tuple[int, str, str]:
        rc = main(["query", text, "--store", str(store), "--format", fmt])
        out = capsys.readouterr()
        return rc, out.out, out.err

    rc, out, err = query("table")
    assert rc == 0, err
    assert not RAW.search(out) and "\\x9b2J" in out and "(1 rows)" in out

    rc, out, _ = query("json")
    assert rc == 0 and not RAW.search(out)
    assert json.loads(out)[0]["host"] == HOST  # escaped for the terminal, exact when parsed

    rc, out, _ = query("csv")  # not a terminal: the data exactly as stored
    assert rc == 0 and HOST in out

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    rc, out, _ = query("csv")
    assert rc == 0 and not RAW.search(out) and "\\x9b2J" in out
    monkeypatch.undo()

    rc, _, err = query("table", 'SELECT * FROM "x\x1b]52;c;cHduZWQ=\x07\x1b[2Jy"')
    assert rc == 1 and not RAW.search(err) and len(err.strip().splitlines()) == 1, err
