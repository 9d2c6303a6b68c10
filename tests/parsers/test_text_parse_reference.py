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
from commscope.parsers.nccl_debug import NcclDebugParser, state_v1

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
    if state and isinstance(parser, NcclDebugParser):  # state v2 (columns) in v1's form
        state = state_v1(state)
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


def _state_text(state: dict[str, Any] | None) -> str | None:
    """A resume state as canonical JSON (the lists of ``coll_summary`` are sets: any order)."""
    if state is None:
        return None
    if isinstance(state.get("coll_summary"), dict):
        state = {**state, "coll_summary": _sorted_lists(state["coll_summary"])}
    return json.dumps(state, sort_keys=True, default=str)


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


def _small_blocks(monkeypatch: pytest.MonkeyPatch, block_bytes: int) -> None:
    """Make the NCCL parser read blocks of ``block_bytes`` (many blocks per sample)."""
    import functools

    import commscope.parsers.nccl_debug as nd
    import commscope.parsers.nccl_debug.frames as nd_frames
    from commscope.parsers import _io

    monkeypatch.setattr(
        nd, "iter_byte_blocks", functools.partial(_io.iter_byte_blocks, block_bytes=block_bytes)
    )
    monkeypatch.setattr(
        nd, "iter_line_blocks", functools.partial(_io.iter_line_blocks, block_bytes=block_bytes)
    )
    monkeypatch.setattr(
        nd_frames,
        "iter_line_blocks",
        functools.partial(_io.iter_line_blocks, block_bytes=block_bytes),
    )


@pytest.mark.parametrize("block_bytes", [16384, 65536])
def test_one_pass_equals_two_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_bytes: int
) -> None:
    """The one-pass NCCL parse (blocks held, spilled to Arrow IPC here: HOLD_BYTES 0) yields
    exactly the two-pass parse's chunks, with many blocks per file (host repairs and TUNING
    pairs near block ends, the registry completed by later blocks); where a later lifecycle
    line would change a host repair it falls back to the two passes."""
    import commscope.parsers.nccl_debug as nd
    import commscope.parsers.nccl_debug.frames as nd_frames

    _small_blocks(monkeypatch, block_bytes)
    monkeypatch.setattr(nd_frames, "HOLD_BYTES", 0)
    inputs = {p.name: p for p in _samples("nccl_debug")} | _generated(tmp_path)
    if not inputs:
        pytest.skip(f"no samples under {SAMPLES}")
    fallbacks: list[str] = []
    two = nd.NcclDebugParser._parse_two_passes

    def spy(self: Any, *a: Any, **k: Any) -> Any:
        fallbacks.append(str(a[0].path))
        return two(self, *a, **k)

    for name, path in inputs.items():
        monkeypatch.setattr(nd.NcclDebugParser, "one_pass", False)
        want = _chunks(nd.NcclDebugParser(), Source(path))
        monkeypatch.setattr(nd.NcclDebugParser, "one_pass", True)
        monkeypatch.setattr(nd.NcclDebugParser, "_parse_two_passes", spy)
        got = _chunks(nd.NcclDebugParser(), Source(path))
        monkeypatch.setattr(nd.NcclDebugParser, "_parse_two_passes", two)
        assert got == want, name
    assert len(fallbacks) < len(inputs) // 2, fallbacks


def _chunks(parser: Any, source: Source) -> list[Any]:
    """Each chunk of a parse: tables (digests), counts, warnings, state."""
    out = []
    for chunk in parser.parse(source, run_id="r"):
        c = chunk.counts
        out.append(
            (
                {k: _frame_digest(v) for k, v in sorted(chunk.tables.items())},
                (c.total, c.parsed, c.rejected, c.ignored),
                chunk.warnings,
                _state_text(chunk.state),
            )
        )
    return out


def test_one_pass_falls_back_when_a_later_host_changes_a_repair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host glued to foreign text in the first block, logged cleanly only by a lifecycle
    line of a later block: two passes repair it (pass 1 knew the host), so the one-pass parse
    must hand over to them; the rows name the repaired host."""
    import commscope.parsers.nccl_debug as nd

    _small_blocks(monkeypatch, 1024)
    coll = (
        "AllReduce: opCount 1 sendbuff 0x7f0000001000 recvbuff 0x7f0000002000 count 8 "
        "datatype 7 op 0 root 0 comm 0x7f0000000100 [nranks=1] stream 0x55d0c0a0"
    )
    lines = [f"progress 37% xyznodeA:11:11 [0] NCCL INFO {coll}"]
    lines += [f"application output line {i} " + "x" * 60 for i in range(40)]
    lines.append(
        "nodeA:11:11 [0] NCCL INFO ncclCommInitRankConfig comm 0x7f0000000100 rank 0 nranks 1 "
        "cudaDev 0 busId 1000 commId 0x1 - Init START"
    )
    lines.append(f"nodeA:11:11 [0] NCCL INFO {coll}")
    path = tmp_path / "glued.log"
    path.write_text("\n".join(lines) + "\n")
    fallbacks: list[str] = []
    two = nd.NcclDebugParser._parse_two_passes

    def spy(self: Any, *a: Any, **k: Any) -> Any:
        fallbacks.append(str(a[0].path))
        return two(self, *a, **k)

    monkeypatch.setattr(nd.NcclDebugParser, "one_pass", False)
    want = _chunks(nd.NcclDebugParser(), Source(path))
    monkeypatch.setattr(nd.NcclDebugParser, "one_pass", True)
    monkeypatch.setattr(nd.NcclDebugParser, "_parse_two_passes", spy)
    chunks = list(nd.NcclDebugParser().parse(Source(path), run_id="r"))
    ops = pl.concat([c.tables["comm_ops"] for c in chunks if "comm_ops" in c.tables])
    assert fallbacks == [str(path)]
    assert ops["host"].to_list() == ["nodeA", "nodeA"]
    assert ops["rank"].to_list() == [0, 0]
    monkeypatch.setattr(nd.NcclDebugParser, "_parse_two_passes", two)
    assert _chunks(nd.NcclDebugParser(), Source(path)) == want


def test_lifecycle_verdicts_past_their_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``MAX_LIFECYCLE_EVENTS`` remembered verdicts (here 3), pass 2 matches the
    Init/Destroy lines itself: out-of-range numbers, truncated lines, kept and registry-full
    records get the reasons a full match gives, in one pass as in two."""
    import commscope.parsers.nccl_debug as nd
    import commscope.parsers.nccl_debug.communicators as nd_comms

    monkeypatch.setattr(nd_comms, "MAX_LIFECYCLE_EVENTS", 3)
    pre = "nodeA:11:11 [0] NCCL INFO "
    lines = []
    for i in range(6):
        lines.append(
            f"{pre}comm 0x7f00000{i}00 rank 99999999999 nranks 2 cudaDev 0 busId 1000 - Init START"
        )
    for i in range(5):
        lines.append(
            f"{pre}comm 0x7f00001{i}00 rank 0 nranks 2 cudaDev 0 busId 1000 commId 0x{i} - Init START"
        )
    lines.append(f"{pre}comm 0x7f0000ff00 rank 0 nranks 2 cudaDev 0 busId 1000 - Init STA")
    path = tmp_path / "bounds.log"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(nd.NcclDebugParser, "one_pass", False)
    want = _chunks(nd.NcclDebugParser(), Source(path))
    monkeypatch.setattr(nd.NcclDebugParser, "one_pass", True)
    chunks = list(nd.NcclDebugParser().parse(Source(path), run_id="r"))
    assert _chunks(nd.NcclDebugParser(), Source(path)) == want
    rejects = pl.concat([c.tables["rejects"] for c in chunks if "rejects" in c.tables])
    reasons = rejects["reason"].to_list()
    assert reasons[:6] == [nd_frames_unfit()] * 6
    assert sum("registry full" in r for r in reasons) == 2
    assert "does not fit its pattern" in reasons[-1]
    assert sum(c.counts.parsed for c in chunks) == 3


def nd_frames_unfit() -> str:
    from commscope.parsers.nccl_debug import frames

    return frames._UNFIT
