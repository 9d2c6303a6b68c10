"""Bounded memory and time in the text readers and the NCCL parser (issue 23, item 7).

Each vector is an adversarial input that used to cost memory or time growing with the input:
one very long line, a decompression bomb, a log with very many communicators or topology
lines, long runs of the characters a line regex backtracks over. Peak memory is measured in a
child process (its own ``VmHWM``: ``ru_maxrss`` survives ``exec`` and would report the parent's peak); time is bounded by counting what is kept or
by comparing a regex's cost on two input sizes, with a generous hang guard, never by a
wall-clock figure. All inputs are synthetic, generated here; the NCCL lines around them come
from a real sample when ``../shared`` is present.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import zstandard

from commscope.parsers import _io
from commscope.parsers import nccl_debug as nd
from commscope.parsers._io import LongLine, Source, iter_byte_blocks, iter_line_blocks
from commscope.parsers.deepspeed_comms import DeepSpeedCommsParser
from commscope.parsers.nccl_debug import NcclDebugParser
from commscope.parsers.nccl_debug import communicators as nd_comms
from commscope.parsers.nccl_debug import lines as nd_lines
from commscope.parsers.nccl_debug import topology as nd_topo
from commscope.parsers.registry import LineCounts, ParsedChunk

ROOT = Path(__file__).resolve().parents[2]
NCCL_SAMPLE = "nccl_debug/gfbench_2.20.5_2rank_normal_rank0_debugfile.txt"
MIB = 1024 * 1024

# A child process that parses one file with one parser and prints counts, reject reasons,
# the error (if any), the size of the resume state and its own peak RSS in MB.
_CHILD = textwrap.dedent(
    """
    import json, resource, sys
    from pathlib import Path
    from commscope.parsers._io import Source
    from commscope.parsers.registry import LineCounts, ParseError, load_all

    def peak_mb():
        # VmHWM is this process's own peak: ru_maxrss survives exec, so a child of a large
        # pytest process would report the parent's size, not its own
        try:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    parser = load_all()[sys.argv[2]]
    counts, rejects, rows, state, err = LineCounts(), [], {}, None, None
    try:
        for chunk in parser.parse(Source(Path(sys.argv[1])), run_id="bounds"):
            counts += chunk.counts
            state = chunk.state or state
            for name, df in chunk.tables.items():
                rows[name] = rows.get(name, 0) + df.height
                if name == "rejects":
                    rejects += df.select("line_no", "reason").rows()
    except ParseError as exc:
        err = str(exc)
    print(json.dumps({
        "counts": [counts.total, counts.parsed, counts.ignored, counts.rejected],
        "rejects": rejects[:20], "rows": rows, "error": err,
        "state_bytes": len(json.dumps(state)) if state else 0,
        "rss_mb": peak_mb(),
    }))
    """
)


def _child(path: Path, parser: str = "nccl_debug", timeout: int = 600) -> dict[str, Any]:
    """Parse ``path`` in a fresh interpreter running this checkout; its result and peak RSS."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), parser],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,  # a hang guard only
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _collect(chunks: list[ParsedChunk]) -> tuple[dict[str, pl.DataFrame], LineCounts, list[str]]:
    counts, tables, warnings = LineCounts(), {}, []
    parts: dict[str, list[pl.DataFrame]] = {}
    for c in chunks:
        counts += c.counts
        warnings += c.warnings
        for name, df in c.tables.items():
            parts.setdefault(name, []).append(df)
    tables = {k: pl.concat(v, how="vertical_relaxed") for k, v in parts.items()}
    return tables, counts, warnings


# --------------------------------------------------------------------------------------------
# 1. maximum line length
# --------------------------------------------------------------------------------------------


def _expected_lines(data: bytes, complete_only: bool) -> list[bytes]:
    """Lines as ``wc -l`` plus a final unterminated one (unless ``complete_only``)."""
    parts = data.split(b"\n")
    if data.endswith(b"\n") or not data or complete_only:
        parts = parts[:-1]
    return parts


@pytest.mark.parametrize("seed", range(6))
def test_line_blocks_stream_past_long_lines_synthetic(tmp_path: Path, seed: int) -> None:
    """Every line over the bound becomes an empty line listed in ``overlong`` (head, length,
    line number); all other lines, the numbering and ``end_offset`` are exactly as read."""
    rng = random.Random(seed)
    path = tmp_path / "lines.log"
    for _ in range(300):
        lengths = [
            rng.choice([0, 1, 3, 7, 8, 9, 15, 16, 17, 40]) for _ in range(rng.randint(0, 12))
        ]
        data = b"\n".join(bytes([97 + i % 26]) * n for i, n in enumerate(lengths))
        data += b"\n" if rng.random() < 0.5 else b""
        path.write_bytes(data)
        max_line, block = rng.choice([4, 8, 16]), rng.choice([1, 2, 5, 7, 16, 64])
        for complete_only in (False, True):
            want = _expected_lines(data, complete_only)
            got: list[str] = []
            long: dict[int, LongLine] = {}
            end = 0
            for b in iter_line_blocks(
                Source(path),
                block_bytes=block,
                max_line=max_line,
                complete_lines_only=complete_only,
            ):
                assert b.first_line_no == len(got) + 1
                got += b.series.to_list()
                long.update((ln.line_no, ln) for ln in b.overlong)
                end = b.end_offset
            assert len(got) == len(want), (data, max_line, block)
            for no, (g, w) in enumerate(zip(got, want, strict=True), 1):
                if len(w) > max_line:
                    assert g == "" and long[no].length == len(w)
                    assert w.startswith(long[no].head) and long[no].head
                else:
                    assert g == w.decode() and no not in long
            assert len(long) == sum(len(w) > max_line for w in want)
            if got:
                assert end == (data.rfind(b"\n") + 1 if complete_only else len(data))


def test_long_line_is_never_held_synthetic(tmp_path: Path) -> None:
    """No block holds more than one read plus one bounded line, whatever the line's length."""
    path = tmp_path / "one_line.log"
    path.write_bytes(b"a\n" + b"x" * (3 * MIB) + b"\nb\n" + b"y" * (2 * MIB))
    blocks = list(iter_byte_blocks(Source(path), block_bytes=64 * 1024, max_line=100_000))
    assert max(len(b.data) for b in blocks) <= 64 * 1024 + 100_000
    assert [ln.line_no for b in blocks for ln in b.overlong] == [2, 4]
    assert [ln.length for b in blocks for ln in b.overlong] == [3 * MIB, 2 * MIB]
    assert not blocks[-1].complete and blocks[-1].end_offset == path.stat().st_size


def test_long_line_in_a_growing_file_read_once_synthetic(tmp_path: Path) -> None:
    """A live log cut inside an over-long line: a follow-mode read stops before it, and the
    read resumed from that offset after the log grew rejects it once, with its own number."""
    path = tmp_path / "live.log"
    path.write_bytes(b"a\nb\n" + b"x" * 5000)
    first = list(iter_line_blocks(Source(path), max_line=1000, complete_lines_only=True))
    assert [ln for b in first for ln in b.series.to_list()] == ["a", "b"]
    assert not any(b.overlong for b in first) and first[-1].end_offset == 4
    with path.open("ab") as fh:
        fh.write(b"y" * 5000 + b"\nc\n")
    resumed = Source(path, start_offset=4, first_line_no=3)
    second = list(iter_line_blocks(resumed, max_line=1000, complete_lines_only=True))
    assert [ln for b in second for ln in b.series.to_list()] == ["", "c"]
    assert [(ln.line_no, ln.length) for b in second for ln in b.overlong] == [(3, 10_000)]
    assert second[-1].end_offset == path.stat().st_size


def _long_line_log(tmp_path: Path, shared_samples: Path, size: int) -> tuple[Path, bytes, int]:
    """The sample with one line of ``size`` bytes (same NCCL prefix) inserted in the middle."""
    data = (shared_samples / NCCL_SAMPLE).read_bytes()
    lines = data.split(b"\n")
    at = len(lines) // 2
    big = lines[at][:60] + b"x" * size
    path = tmp_path / "long.log"
    path.write_bytes(b"\n".join([*lines[:at], big, *lines[at:]]))
    return path, data, at + 1


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gz"])
def test_nccl_64mib_line_rejected_in_bounded_memory(
    tmp_path: Path, shared_samples: Path, compressed: bool
) -> None:
    """A 64 MiB line is rejected with its reason, every other line is read as without it, and
    the peak RSS stays far below the line's cost before the bound (653 MB measured)."""
    path, data, long_no = _long_line_log(tmp_path, shared_samples, 64 * MIB)
    plain = tmp_path / "plain.log"
    plain.write_bytes(data)
    if compressed:
        gz = tmp_path / "long.log.gz"
        gz.write_bytes(gzip.compress(path.read_bytes(), compresslevel=1))
        path = gz
    ref, got = _child(plain), _child(path)
    total, parsed, ignored, rejected = got["counts"]
    assert total == ref["counts"][0] + 1 == parsed + ignored + rejected
    assert parsed == ref["counts"][1] and rejected == ref["counts"][3] + 1
    reason = _io.long_line_reason(64 * MIB + 60)
    assert [long_no, reason] in got["rejects"]
    assert got["rows"]["comm_ops"] == ref["rows"]["comm_ops"]
    assert got["rss_mb"] < 400, got


def test_nccl_lines_after_long_line_keep_their_numbers(
    tmp_path: Path, shared_samples: Path
) -> None:
    """Rows after the dropped line carry the line numbers of the file, not of a shorter one."""
    path, data, long_no = _long_line_log(tmp_path, shared_samples, 2 * MIB)
    ref_path = tmp_path / "ref.log"
    ref_path.write_bytes(data)
    p = NcclDebugParser()
    got, counts, _ = _collect(list(p.parse(Source(path), run_id="r")))
    ref, ref_counts, _ = _collect(list(p.parse(Source(ref_path), run_id="r")))
    assert counts.balanced and counts.rejected == ref_counts.rejected + 1
    shifted = ref["comm_ops"].with_columns(
        source_line=pl.when(pl.col("source_line") >= long_no)
        .then(pl.col("source_line") + 1)
        .otherwise(pl.col("source_line"))
    )
    assert got["comm_ops"].equals(shifted)
    row = got["rejects"].filter(pl.col("line_no") == long_no)
    assert row["reason"].to_list() == [_io.long_line_reason(2 * MIB + 60)]
    assert row["raw"][0] == data.split(b"\n")[long_no - 1][:60].decode() + "x" * 4036


def test_deepspeed_long_line_rejected_synthetic(tmp_path: Path) -> None:
    """The DeepSpeed parser rejects an over-long line with the reason; accounting stays exact
    and the verbose lines around it are parsed as without it."""
    line = (
        "[2023-05-15 13:21:{s:02d},475] [INFO] [logging.py:96:log_dist] [Rank 0] rank=0 | "
        "comm op: all_reduce | time (ms): 1.00 | msg size: 1.0 MB | algbw (Gbps): 8.00  | "
        "busbw (Gbps): 8.00 "
    )
    good = [line.format(s=s) for s in range(6)]
    ref_path, path = tmp_path / "ref.log", tmp_path / "long.log"
    ref_path.write_text("\n".join(good) + "\n")
    path.write_text(
        "\n".join([*good[:3], "[Rank 0] comm op: " + "z" * (2 * MIB), *good[3:]]) + "\n"
    )
    p = DeepSpeedCommsParser()
    got, counts, _ = _collect(list(p.parse(Source(path), run_id="r")))
    ref, ref_counts, _ = _collect(list(p.parse(Source(ref_path), run_id="r")))
    assert counts.balanced and counts.total == ref_counts.total + 1
    assert counts.parsed == ref_counts.parsed == 6 and counts.rejected == ref_counts.rejected + 1
    assert got["rejects"]["line_no"].to_list() == [4]
    assert got["rejects"]["reason"][0].startswith(f"line longer than {_io.MAX_LINE_BYTES} bytes")
    assert got["comm_ops"]["source_line"].to_list() == [1, 2, 3, 5, 6, 7]
    assert got["comm_ops"].drop("source_line").equals(ref["comm_ops"].drop("source_line"))


# --------------------------------------------------------------------------------------------
# 2. decompression bounded per read
# --------------------------------------------------------------------------------------------


def _bomb(kind: str, tmp_path: Path) -> Path:
    """Concatenated frames/streams/members of zeros: about 1 GiB from well under 1 MB."""
    if kind == "zstd":
        frame = zstandard.ZstdCompressor(level=3).compress(b"\0" * (128 * MIB))
        body, n = frame, 8
    elif kind == "xz":
        body, n = lzma.compress(b"\0" * (16 * MIB), preset=0), 64
    elif kind == "bz2":
        body, n = bz2.compress(b"\0" * (16 * MIB), 1), 64
    else:
        body, n = gzip.compress(b"\0" * (16 * MIB), 1), 16
    path = tmp_path / f"bomb.log.{kind}"
    path.write_bytes(body * n)
    return path


@pytest.mark.parametrize("kind", ["zstd", "xz", "bz2"])
def test_decompression_bomb_bounded_per_read(tmp_path: Path, kind: str) -> None:
    """A bomb is the typed error for its file, and no single read inflates it in memory (a
    zstd bomb reached 2.6 GB when a 256 KiB read was decompressed at once)."""
    path = _bomb(kind, tmp_path)
    got = _child(path)
    assert got["error"] is not None and "possible decompression bomb" in got["error"], got
    assert got["rss_mb"] < 400, got


def test_gzip_high_ratio_read_in_bounded_memory(tmp_path: Path) -> None:
    """gzip cannot exceed the ratio bound (at most about 1,030x), so a 256 MiB line of zeros
    from 250 KB is read to its end: streamed past as one over-long line, in bounded memory."""
    got = _child(_bomb("gzip", tmp_path))
    assert got["error"] is None or "no NCCL debug output" in got["error"], got
    assert got["rss_mb"] < 400, got


def test_zstd_reader_output_per_read_is_bounded() -> None:
    """Each decompress call gets ``ZSTD_PIECE`` compressed bytes: at most about 32 MiB out."""
    frame = zstandard.ZstdCompressor(level=3).compress(b"\0" * (64 * MIB))
    dobj = zstandard.ZstdDecompressor().decompressobj()
    biggest = 0
    for at in range(0, len(frame), _io.ZSTD_PIECE):
        biggest = max(biggest, len(dobj.decompress(frame[at : at + _io.ZSTD_PIECE])))
    assert 0 < biggest <= 40 * MIB


# --------------------------------------------------------------------------------------------
# 3. bounded registries in the NCCL parser
# --------------------------------------------------------------------------------------------


def _many_comms_log(path: Path, n_comms: int, n_topo: int = 0, hosts: int = 1) -> None:
    """``n_comms`` communicators (START + COMPLETE each) then ``n_topo`` connection lines."""
    with path.open("w") as fh:
        fh.write("h0:1:1 [0] NCCL INFO NCCL version 2.20.5+cuda12.2\n")
        for i in range(n_comms):
            h = f"h{i % hosts}"
            for phase in ("START", "COMPLETE"):
                fh.write(
                    f"{h}:1:1 [0] NCCL INFO comm 0x{i + 4096:x} rank 0 nranks 2 cudaDev 0 "
                    f"nvmlDev 0 busId 1000 commId 0x{i:x} - Init {phase}\n"
                )
        for i in range(n_topo):
            fh.write(f"h0:1:{i} [0] NCCL INFO Channel {i % 64:02d}/0 : 0[0] -> 1[1] via P2P/{i}\n")
        fh.write(
            "h0:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 8 "
            "datatype 7 op 0 root 0 comm 0x1000 [nranks=2] stream 0x3\n"
        )


def test_communicator_registry_bounded_synthetic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``MAX_LIFECYCLE_EVENTS`` lifecycle lines are rejected with the reason (counted,
    one warning); the registry, the communicators and the resume state stay at the bound."""
    monkeypatch.setattr(nd_comms, "MAX_LIFECYCLE_EVENTS", 100)
    path = tmp_path / "comms.log"
    _many_comms_log(path, 400)
    chunks = list(NcclDebugParser().parse(Source(path), run_id="r"))
    tables, counts, warnings = _collect(chunks)
    state = chunks[-1].state or {}
    assert counts.balanced and counts.total == 802
    assert counts.parsed == 101 and counts.rejected == 700  # 100 kept lines + the COLL line
    assert tables["communicators"].height == 50
    assert len(nd.state_v1(state)["events"]) == 100 and state["full_from"] == 102
    assert set(tables["rejects"]["reason"]) == {nd.REGISTRY_FULL}
    assert tables["rejects"]["line_no"].min() == 102
    assert any("700 Init/Destroy lines from line 102 on rejected" in w for w in warnings)


def test_resume_state_does_not_grow_with_the_file_synthetic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state stored in the commit log is the same size for 4x the communicators and
    topology lines once the bounds are reached."""
    monkeypatch.setattr(nd_comms, "MAX_LIFECYCLE_EVENTS", 200)
    monkeypatch.setattr(nd_topo, "MAX_TOPOLOGY_ROWS", 300)
    sizes = []
    for n in (1000, 4000):
        path = tmp_path / f"c{n}.log"
        _many_comms_log(path, n, n_topo=n)
        chunks = list(NcclDebugParser().parse(Source(path), run_id="r"))
        tables, counts, warnings = _collect(chunks)
        assert counts.balanced
        assert tables["topology"].height == 300
        assert (tables["rejects"]["reason"] == nd.TOPOLOGY_FULL).sum() == n - 300
        assert any(f"{n - 300} topology lines rejected" in w for w in warnings)
        sizes.append(len(json.dumps(chunks[-1].state)))
    assert sizes[1] <= sizes[0] * 1.05


def test_host_process_and_version_tables_bounded_synthetic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Distinct hosts, launcher tags and bare version lines are remembered up to a bound."""
    monkeypatch.setattr(nd_lines, "MAX_KNOWN_HOSTS", 50)
    monkeypatch.setattr(nd_comms, "MAX_PROCESSES", 20)
    monkeypatch.setattr(nd_comms, "MAX_BARE_VERSIONS", 5)
    path = tmp_path / "hosts.log"
    with path.open("w") as fh:
        for i in range(500):
            fh.write(
                f"[{i}] h{i}:{i}:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 - Init START\n"
            )
            fh.write(f"h{i}:{i}:1 [0] NCCL INFO NCCL version 2.20.{i}+cuda12.2\n")
            fh.write(f"[{i}] NCCL version 2.20.{i % 9}+cuda12.2\n")
    chunks = list(NcclDebugParser().parse(Source(path), run_id="r"))
    _, counts, _ = _collect(chunks)
    state = chunks[-1].state or {}
    assert counts.balanced and counts.parsed == 500
    assert len(state["known_hosts"]) == 50 and len(state["pass2_hosts"]) <= 50
    assert len(state["proc_versions"]) == 20
    assert len(state["tag_procs"]) == 20 and all(len(p) <= 2 for p in state["tag_procs"].values())
    assert len(state["bare_versions"]) == 5


def test_topology_attribution_cost_bounded_synthetic(tmp_path: Path) -> None:
    """A topology line is attributed through the incarnation index (O(log n) tree steps per
    line, tests/parsers/test_nccl_incarnations.py), however many incarnations its process
    has, and still to the comm its thread just initialised."""
    path = tmp_path / "attr.log"
    n = 300
    with path.open("w") as fh:
        for i in range(n):
            fh.write(
                f"h:1:{i} [0] NCCL INFO comm 0x{i + 4096:x} rank 0 nranks 2 cudaDev 0 "
                f"busId 1000 - Init START\n"
                f"h:1:{i} [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
            )
    tables, counts, _ = _collect(list(NcclDebugParser().parse(Source(path), run_id="r")))
    assert counts.balanced and counts.parsed == 2 * n
    topo = tables["topology"].sort("source_line")
    assert topo["comm_id"].to_list() == [f"0x{i + 4096:x}" for i in range(n)]


def test_fix_host_is_linear_in_the_host_not_the_table() -> None:
    """Host repair looks up suffixes, so its cost does not grow with the known hosts."""
    known = {f"node{i}" for i in range(10_000)} | {"ljm"}
    assert nd._fix_host("80356ljm", known) == "ljm"
    assert nd._fix_host("xnode42", known) == "node42"
    assert nd._fix_host("node42", known) == "node42"
    assert nd._fix_host("unknown", known) == "unknown"


# --------------------------------------------------------------------------------------------
# 4. line regexes: no quadratic backtracking
# --------------------------------------------------------------------------------------------

# Each case: a module and one of its regexes, how it is applied to a line (or kernel name), and
# an adversarial text made of a recognisable prefix and a long run of what the regex backtracks
# over (``{}`` is the run).
_REGEX_CASES: dict[str, tuple[str, ...]] = {
    "prefix_no_colon": ("nccl_debug", "_PREFIX_RE", "search", "{}", "x"),
    "prefix_spliced": (
        "nccl_debug",
        "_PREFIX_RE",
        "finditer",
        "h:1:1 NCCL INFO {} h:1:1 NCCL INFO x",
        "a",
    ),
    "prefix_digits": ("nccl_debug", "_PREFIX_RE", "search", "h:{}", "1:"),
    "prefix_srcinfo": ("nccl_debug", "_PREFIX_RE", "search", "h:1:1 [0] {}", "a:1"),
    "conn_spaces": ("nccl_debug", "_CONN_RE", "match", "Channel 00 : 0[0] -> 1[1] via x{}y", " "),
    "collnet_spaces": ("nccl_debug", "_COLLNET_RE", "match", "CollNet 00 : 0 [send] via x{}y", " "),
    "ring_order": ("nccl_debug", "_RING_ORDER_RE", "match", "Channel 00/01 :{}x", " 1"),
    "trees": ("nccl_debug", "_TREES_ITEM_RE", "finditer", "Trees{}", " [0] 1/1/1->1->"),
    "nvls_trees": ("nccl_debug", "_NVLS_TREES_RE", "match", "NVLS Trees : {}x", "1/"),
    "nvls_head": ("nccl_debug", "_NVLS_HEAD_RE", "match", "NVLS Head 0:{}x", " -1"),
    "init": (
        "nccl_debug",
        "_INIT_RE",
        "match",
        "comm 0x1 rank 0 nranks 2 cudaDev 0 parent {}",
        "x",
    ),
    "init_spaces": (
        "nccl_debug",
        "_INIT_RE",
        "match",
        "comm 0x1 rank 0 nranks 2 cudaDev 0 - Init START{}x",
        " ",
    ),
    "version": ("nccl_debug", "_VERSION_RE", "match", "NCCL version 1.2.3{}", "a"),
    "bare_version": (
        "nccl_debug",
        "_BARE_VERSION_RE",
        "match",
        "{}NCCL version 1.2.3x",
        "NCCL version 1.2.3 ",
    ),
    "kernel_any": ("_nccl_kernels", "_NCCL_ANY", "match", "nccl{}", "a"),
    "kernel_deepep": ("_nccl_kernels", "_DEEPEP", "search", " deep_ep::{}x", "a::"),
    "kernel_deepep_word": ("_nccl_kernels", "_DEEPEP", "search", " {}", "aep:"),
    "kernel_symm": ("_nccl_kernels", "_SYMM_MEM", "search", "{}", "symmetric_memory::a"),
    "kernel_userbuffers": ("_nccl_kernels", "_USERBUFFERS", "match", "{}x", "aa::"),
    "tag": ("nccl_debug", "_TAG_RE", "match", "({}", "a"),
}

_REGEX_CHILD = textwrap.dedent(
    """
    import importlib, json, sys, time
    module, name, how, template, run = sys.argv[1:6]
    rx = getattr(importlib.import_module("commscope.parsers." + module), name)
    costs = []
    for n in map(int, sys.argv[6:]):
        text = template.format(run * (n // len(run)))
        best = None
        for _ in range(2):
            t0 = time.process_time()
            r = getattr(rx, how)(text)
            if how == "finditer":
                list(r)
            t = time.process_time() - t0
            best = t if best is None else min(best, t)
        costs.append(best)
    print(json.dumps(costs))
    """
)


def _regex_costs(case: tuple[str, ...], *sizes: int) -> list[float]:
    """CPU seconds of the regex on the adversarial line at each size (best of two runs)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", _REGEX_CHILD, *case, *map(str, sizes)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # hang guard: quadratic cases took 20 s for only 40,000 characters
        check=True,
    )
    return [float(x) for x in json.loads(out.stdout)]


@pytest.mark.parametrize("case", sorted(_REGEX_CASES))
def test_line_regex_cost_grows_linearly(case: str) -> None:
    """4x the adversarial run costs about 4x (linear), never about 16x (quadratic)."""
    small, large = _regex_costs(_REGEX_CASES[case], 25_000, 100_000)
    assert large <= 8 * max(small, 0.002), (case, small, large)


def test_sniff_of_adversarial_head_is_linear(tmp_path: Path) -> None:
    """``sniff`` reads a 64 KiB head: one long host-like line used to cost about a minute."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = (
        "from pathlib import Path; from commscope.parsers.nccl_debug import NcclDebugParser; "
        "print(NcclDebugParser().sniff(b'NCCL ' + b'x' * 65531, Path('a.log')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,  # hang guard
    )
    assert out.stdout.strip() == "0"


# --------------------------------------------------------------------------------------------
# 5. the README's memory figure, measured
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_pathological_nccl_log_peak_rss_under_readme_bound(tmp_path: Path) -> None:
    """A log with one 256 MiB line, 55,000 communicators (past the lifecycle bound) and
    260,000 topology lines (past the topology bound) peaks under 800 MB (README: "about
    800 MB" for any NCCL log), with every line accounted for."""
    path = tmp_path / "patho.log"
    _many_comms_log(path, 55_000, n_topo=260_000, hosts=64)
    with path.open("ab") as fh:
        fh.write(b"h0:1:1 [0] NCCL INFO " + b"x" * (256 * MIB) + b"\n")
    got = _child(path)
    total, parsed, ignored, rejected = got["counts"]
    assert got["error"] is None and total == 2 * 55_000 + 260_000 + 3
    assert total == parsed + ignored + rejected
    assert rejected == 2 * 55_000 - nd.MAX_LIFECYCLE_EVENTS + 260_000 - nd.MAX_TOPOLOGY_ROWS + 1
    assert got["rss_mb"] < 800, got
