"""Differential test of the text-log parsers (issue 21): every table, the line accounting, the
warnings and the resume state of each real NCCL / DeepSpeed sample (and of generated inputs
that stress the incarnation and topology paths) must stay exactly what the parsers wrote
before the issue-21 speed work (main at c129bc9).

The reference is ``data/text_parse_reference.json``: per input, one SHA-256 digest and the row
count of each table (rows in emitted order, every column, written as CSV by Polars), and the
digest of the counts/warnings/state. It was written by this file's ``--write`` mode from
c129bc9's parsers. On a failure, ``python tests/parsers/test_text_parse_reference.py --show
NAME`` prints what the current code produces, to diff against a checkout of c129bc9 running
the same command.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from commscope.parsers._io import Source
from commscope.parsers.deepspeed_comms import DeepSpeedCommsParser
from commscope.parsers.nccl_debug import NcclDebugParser

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT.parent / "shared" / "samples"
REFERENCE = Path(__file__).parent / "data" / "text_parse_reference.json"
NCCLTESTS = SAMPLES / "nccl_debug" / "nccltests_2.27.7_1proc_2gpu_allreduce.log"


def _samples(folder: str) -> list[Path]:
    d = SAMPLES / folder
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.is_file() and not p.name.endswith(".source.txt"))


def _generated(tmp: Path) -> dict[str, Path]:
    """Inputs made at test time: copies of the real nccl-tests log and an interleaved
    many-incarnation log (bench/ingest_scale.py's generator, small)."""
    sys.path.insert(0, str(ROOT))
    from bench.ingest_scale import interleaved_log, repeated

    out = {}
    if NCCLTESTS.exists():
        out["gen:nccltests_x3"] = repeated(NCCLTESTS, 3, tmp / "nccltests_x3.log")
    out["gen:incs_40x4"] = interleaved_log(
        tmp / "incs.log", ranks=40, per_process=4, topo_per_inc=3, colls_per_inc=5
    )
    return out


def _frame_digest(df: pl.DataFrame) -> dict[str, Any]:
    buf = io.StringIO()
    df.write_csv(buf, null_value="<null>")
    schema = ",".join(f"{k}:{v}" for k, v in df.schema.items())
    text = schema + "\n" + buf.getvalue()
    return {"rows": df.height, "sha256": hashlib.sha256(text.encode()).hexdigest()}


def _dump(parser: Any, source: Source, resume: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything a parse yields: tables (concatenated in emitted order), counts, warnings,
    the last state."""
    frames: dict[str, list[pl.DataFrame]] = {}
    counts = [0, 0, 0, 0]
    warnings: list[str] = []
    state = None
    for chunk in parser.parse(source, run_id="r", resume=resume):
        for name, df in chunk.tables.items():
            frames.setdefault(name, []).append(df)
        c = chunk.counts
        for i, v in enumerate((c.total, c.parsed, c.rejected, c.ignored)):
            counts[i] += v
        warnings.extend(chunk.warnings)
        if chunk.state is not None:
            state = chunk.state
    tables = {}
    for name, dfs in sorted(frames.items()):
        dfs = [d for d in dfs if d.width]
        tables[name] = _frame_digest(pl.concat(dfs, how="vertical") if dfs else pl.DataFrame())
    if state and isinstance(state.get("coll_summary"), dict):  # its lists are sets (any order)
        state = {**state, "coll_summary": _sorted_lists(state["coll_summary"])}
    meta = json.dumps([counts, warnings, state], sort_keys=True, default=str)
    return {
        "tables": tables,
        "counts": counts,
        "meta_sha256": hashlib.sha256(meta.encode()).hexdigest(),
    }


def _sorted_lists(d: dict[str, Any]) -> dict[str, Any]:
    return {
        k: sorted(v, key=lambda x: json.dumps(x, default=str)) if isinstance(v, list) else v
        for k, v in d.items()
    }


def _split_parse(path: Path) -> dict[str, Any]:
    """Parse the first ~half of ``path`` (cut at a line end), then the rest resumed."""
    data = path.read_bytes()
    cut = data.rfind(b"\n", 0, len(data) // 2) + 1
    parser = NcclDebugParser()
    first = _dump_keep_state(parser, Source(path, end_offset=cut))
    line_no = data.count(b"\n", 0, cut) + 1
    second = _dump(parser, Source(path, start_offset=cut, first_line_no=line_no), first)
    return second


def _dump_keep_state(parser: Any, source: Source) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for chunk in parser.parse(source, run_id="r"):
        if chunk.state is not None:
            state = chunk.state
    return state


def compute(tmp: Path) -> dict[str, Any]:
    """The reference for every input present here."""
    out: dict[str, Any] = {}
    nccl, ds = NcclDebugParser(), DeepSpeedCommsParser()
    for p in _samples("nccl_debug"):
        out[f"nccl_debug/{p.name}"] = _dump(nccl, Source(p))
    for p in _samples("deepspeed_comms"):
        out[f"deepspeed_comms/{p.name}"] = _dump(ds, Source(p))
    for name, p in _generated(tmp).items():
        out[name] = _dump(nccl, Source(p))
        out[name + ":resumed_half"] = _split_parse(p)
    return out


def test_text_parsers_match_reference(tmp_path: Path) -> None:
    if not REFERENCE.exists():
        pytest.skip(f"{REFERENCE} missing")
    want = json.loads(REFERENCE.read_text())
    got = compute(tmp_path)
    if not any(k.startswith("nccl_debug/") for k in got):
        pytest.skip(f"no samples under {SAMPLES}")
    checked = 0
    for name, result in got.items():
        if name not in want:
            continue
        assert result == want[name], name
        checked += 1
    assert checked >= 4


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        res = compute(Path(d))
    if sys.argv[1:2] == ["--write"]:
        REFERENCE.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(res)} inputs to {REFERENCE}")
    else:
        name = sys.argv[2] if len(sys.argv) > 2 else None
        print(json.dumps(res if name is None else res[name], indent=1, sort_keys=True))
