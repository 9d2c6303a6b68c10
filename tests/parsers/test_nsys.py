"""Tests for the ``nsys`` parser (Nsight Systems SQLite exports, stats CSV, recipe Parquet).

Expected counts and values are computed inside each test independently of the parser: plain
``sqlite3`` queries on the exports, the ``csv`` module on the stats report, ``pyarrow`` on the
recipe Parquet. Databases and files built in ``tmp_path`` are SYNTHETIC (labelled so in their
names); everything under ../shared/samples/nsys is real tool output.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import lzma
import sqlite3
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from commscope.parsers import nsys
from commscope.parsers._io import Source
from commscope.parsers._nsys_common import rank_from_file_name
from commscope.parsers._nsys_payload import PayloadDecoder
from commscope.parsers.registry import REGISTRY, LineCounts, ParseError
from commscope.parsers.schema import conform

PARSER = nsys.NsysParser()
SAXPY = "pipit_saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
CLOVER = "pipit_perlmutter-cloverleaf-cuda.sqlite"
NVFUSER = "nvfuser_report1.sqlite"
JAX_CSV = "jax_maxtext_fsdp4_1proc__report_nvtx_pushpop_trace.csv.xz"
JAX_PARQUET = "jax_maxtext_fsdp4_1proc__nvtx_gpu_proj_trace.trace.parquet"
SQLITES = (SAXPY, CLOVER, NVFUSER)
ALL_SAMPLES = (*SQLITES, JAX_CSV, JAX_PARQUET)
NCCL_DATA_OPS = {
    "NCCL:ncclAllGather": "all_gather",
    "NCCL:ncclReduceScatter": "reduce_scatter",
    "NCCL:ncclAllReduce": "all_reduce",
    "NCCL:ncclSend": "send",
    "NCCL:ncclRecv": "recv",
}


@dataclass
class Parsed:
    """Everything one parse produced, frames concatenated per table."""

    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    counts: LineCounts = field(default_factory=LineCounts)
    warnings: list[str] = field(default_factory=list)

    def get(self, table: str) -> pl.DataFrame:
        return self.tables.get(table, pl.DataFrame())


def run(path: Path, rank: int | None = None) -> Parsed:
    """Parse ``path``; conform every frame; check each chunk's accounting balances."""
    out = Parsed()
    frames: dict[str, list[pl.DataFrame]] = {}
    for chunk in PARSER.parse(Source(path), run_id="run-test", rank=rank):
        assert chunk.counts.balanced, chunk.counts
        out.counts += chunk.counts
        out.warnings += chunk.warnings
        for table, df in chunk.tables.items():
            extra = [pl.lit("run-test").alias("run_id")]
            if table == "rejects":
                extra.append(pl.lit(str(path)).alias("path"))
            conform(df.with_columns(extra), table)  # raises if the frame does not fit
            frames.setdefault(table, []).append(df)
    out.tables = {t: pl.concat(fs, how="diagonal_relaxed") for t, fs in frames.items()}
    return out


def ro(path: Path) -> sqlite3.Connection:
    """An independent read-only connection to a sample."""
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def count(con: sqlite3.Connection, table: str, where: str = "1") -> int:
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if table not in tables:
        return 0
    return con.execute(f'SELECT count(*) FROM "{table}" WHERE {where}').fetchone()[0]


@pytest.fixture(scope="module")
def nsys_dir(shared_samples: Path) -> Path:
    return shared_samples / "nsys"


# -- registry and sniffing -------------------------------------------------------------------


def test_registered() -> None:
    assert REGISTRY["nsys"] is not None
    assert REGISTRY["nsys"].name == "nsys"


@pytest.mark.parametrize("name", ALL_SAMPLES)
def test_sniff_claims_every_sample(nsys_dir: Path, name: str) -> None:
    path = nsys_dir / name
    assert PARSER.sniff(Source(path).head(), path) >= 90


def test_sniff_rejects_sidecars_and_other_formats(shared_samples: Path) -> None:
    others = [
        p
        for p in sorted(shared_samples.rglob("*"))
        if p.is_file()
        and (
            p.relative_to(shared_samples).parts[0] != "nsys"  # nsys/ and its run sub-folders
            or p.name.endswith(".source.txt")
            or p.suffix not in {".sqlite", ".parquet", ".xz", ".csv"}  # e.g. a job's stdout
        )
    ]
    assert others, "expected other samples beside the nsys ones"
    claimed = [p.name for p in others if PARSER.sniff(Source(p).head(), p) > 0]
    assert claimed == []


def test_sniff_sqlite_without_nsys_tables(tmp_path: Path) -> None:
    path = tmp_path / "synthetic_plain.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (a INTEGER)")
    con.commit()
    con.close()
    assert PARSER.sniff(Source(path).head(), path) == 0
    with pytest.raises(ParseError, match="without Nsight Systems tables"):
        run(path)


def test_garbage_with_sqlite_magic_raises(tmp_path: Path) -> None:
    path = tmp_path / "synthetic_garbage.sqlite"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    assert PARSER.sniff(Source(path).head(), path) == 0
    with pytest.raises(ParseError):
        run(path)


# -- every real sample -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_SAMPLES)
def test_every_sample_has_a_clear_outcome(nsys_dir: Path, name: str) -> None:
    out = run(nsys_dir / name)
    assert out.counts.balanced
    assert out.counts.total > 0
    assert out.counts.parsed > 0
    meta = out.get("trace_meta")
    assert meta.height == 1
    assert meta["rank_source"][0] in {"mpi_thread_name", "unknown"}
    if meta["rank_source"][0] == "unknown":
        assert meta["rank"][0] is None
        assert any("rank unknown" in w for w in out.warnings)


@pytest.mark.parametrize("name", SQLITES)
def test_sqlite_counts_match_sqlite3(nsys_dir: Path, name: str) -> None:
    path = nsys_dir / name
    con = ro(path)
    n_kernel = count(con, "CUPTI_ACTIVITY_KIND_KERNEL")
    n_memcpy = count(con, "CUPTI_ACTIVITY_KIND_MEMCPY")
    n_memset = count(con, "CUPTI_ACTIVITY_KIND_MEMSET")
    n_nvtx = count(con, "NVTX_EVENTS")
    n_ranges = count(con, "NVTX_EVENTS", 'eventType IN (59, 60) AND "end" >= start')
    bad_gpu = sum(
        count(con, t, '"end" IS NULL OR "end" < start')
        for t in (
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            "CUPTI_ACTIVITY_KIND_MEMSET",
        )
    )
    bad_nvtx = count(
        con, "NVTX_EVENTS", 'eventType IN (59, 60) AND ("end" IS NULL OR "end" < start)'
    )
    con.close()
    out = run(path)
    kernels = out.get("kernels")
    assert out.counts.total == n_kernel + n_memcpy + n_memset + n_nvtx
    assert kernels.height == n_kernel + n_memcpy + n_memset - bad_gpu
    assert kernels.filter(pl.col("category") == "memcpy").height == n_memcpy
    assert kernels.filter(pl.col("category") == "memset").height == n_memset
    assert out.get("markers").height == n_ranges
    assert out.counts.rejected == bad_gpu + bad_nvtx
    if kernels.height:
        assert (kernels["dur_ns"] >= 0).all()


@pytest.mark.parametrize("name", SQLITES)
def test_sqlite_kernel_names_and_durations(nsys_dir: Path, name: str) -> None:
    path = nsys_dir / name
    con = ro(path)
    names = sorted(
        r[0]
        for r in con.execute(
            "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName"
        )
    )
    total_dur = con.execute('SELECT sum("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchone()[
        0
    ]
    con.close()
    gpu = run(path).get("kernels").filter(~pl.col("category").is_in(["memcpy", "memset"]))
    assert sorted(gpu["name"].to_list()) == names
    assert gpu["dur_ns"].sum() == total_dur
    assert set(gpu["category"]) <= {"compute", "comm", "other"}


def test_documented_sample_sizes(nsys_dir: Path) -> None:
    """The sizes the sidecars document, checked with sqlite3, and the parser agreeing."""
    con = ro(nsys_dir / NVFUSER)
    assert count(con, "CUPTI_ACTIVITY_KIND_KERNEL") == 19
    con.close()
    con = ro(nsys_dir / CLOVER)
    assert count(con, "CUPTI_ACTIVITY_KIND_KERNEL") == 1312
    assert count(con, "CUPTI_ACTIVITY_KIND_MEMCPY") == 279
    con.close()
    k = run(nsys_dir / CLOVER).get("kernels")
    assert k.filter(pl.col("category") == "memcpy").height == 279
    assert k.filter(~pl.col("category").is_in(["memcpy", "memset"])).height == 1312
    k = run(nsys_dir / NVFUSER).get("kernels")
    assert k.filter(~pl.col("category").is_in(["memcpy", "memset"])).height == 19


@pytest.mark.parametrize("name", SQLITES)
def test_sqlite_clock_anchor_and_version(nsys_dir: Path, name: str) -> None:
    path = nsys_dir / name
    con = ro(path)
    anchor = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    meta_table = "META_DATA_EXPORT" if "META_DATA_EXPORT" in tables else "EXPORT_META_DATA"
    version = con.execute(
        f"SELECT value FROM {meta_table} WHERE name = 'EXPORT_SCHEMA_VERSION'"
    ).fetchone()[0]
    host = con.execute(
        "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'"
    ).fetchone()[0]
    con.close()
    meta = run(path).get("trace_meta").row(0, named=True)
    assert meta["clock_anchor_ns"] == anchor
    assert meta["aligned"] is True
    assert meta["source_version"] == version
    assert meta["host"] == host


def test_sqlite_input_is_not_modified(nsys_dir: Path) -> None:
    path = nsys_dir / SAXPY
    before = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
    run(path)
    assert (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns) == before


def test_saxpy_old_schema_extra_column_and_mpi_rank(nsys_dir: Path) -> None:
    path = nsys_dir / SAXPY
    con = ro(path)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "EXPORT_META_DATA" in tables and "META_DATA_EXPORT" not in tables
    memcpy_cols = [r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_MEMCPY)")]
    assert memcpy_cols[-1] == "name"  # the ALTER-TABLE-added user column
    mpi_dom = con.execute(
        "SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'MPI'"
    ).fetchone()[0]
    n_mpi = count(con, "NVTX_EVENTS", f"eventType = 59 AND domainId = {mpi_dom}")
    thread = con.execute("SELECT text FROM NVTX_EVENTS WHERE eventType = 39").fetchone()[0]
    mpi_names = {
        r[0]
        for r in con.execute(
            "SELECT s.value FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId "
            f"WHERE n.eventType = 59 AND n.domainId = {mpi_dom}"
        )
    }
    copy_kinds = {r[0] for r in con.execute("SELECT copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY")}
    con.close()
    assert thread == "MPI Rank 0"
    out = run(path, rank=4)  # the trace's own MPI rank wins over the option
    markers = out.get("markers")
    assert markers.filter(pl.col("domain") == "MPI").height == n_mpi
    assert set(markers.filter(pl.col("domain") == "MPI")["name"]) == mpi_names
    assert set(markers["kind"]) == {"nvtx"}
    meta = out.get("trace_meta").row(0, named=True)
    assert (meta["rank"], meta["rank_source"], meta["backend"]) == (0, "mpi_thread_name", "mpi")
    assert any("differs from rank 4" in w for w in out.warnings)
    assert set(out.get("kernels")["rank"]) == {0}
    memcpy = out.get("kernels").filter(pl.col("category") == "memcpy")
    names = {1: "memcpy HtoD", 2: "memcpy DtoH", 8: "memcpy DtoD"}
    assert set(memcpy["name"]) == {names[k] for k in copy_kinds}


# -- nsys stats CSV (real) -------------------------------------------------------------------


def _jax_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    with lzma.open(path, "rt", encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def test_jax_csv_markers_and_comm_ops(nsys_dir: Path) -> None:
    path = nsys_dir / JAX_CSV
    header, rows = _jax_rows(path)
    i_name, i_start, i_end = (
        header.index("Name"),
        header.index("Start (ns)"),
        header.index("End (ns)"),
    )
    expected_ops: dict[str, int] = {}
    for r in rows:
        if r[i_name] in NCCL_DATA_OPS:
            op = NCCL_DATA_OPS[r[i_name]]
            expected_ops[op] = expected_ops.get(op, 0) + 1
    n_nccl = sum(r[i_name].startswith("NCCL:") for r in rows)
    total_dur = sum(int(r[i_end]) - int(r[i_start]) for r in rows)

    out = run(path)
    assert out.counts == LineCounts(total=len(rows), parsed=len(rows), ignored=0, rejected=0)
    markers = out.get("markers")
    assert markers.height == len(rows)
    assert markers["dur_ns"].sum() == total_dur
    nccl = markers.filter(pl.col("kind") == "nccl_nvtx")
    assert nccl.height == n_nccl
    assert set(nccl["domain"]) == {"NCCL"}

    ops = out.get("comm_ops")
    assert dict(ops["op"].value_counts().iter_rows()) == expected_ops
    assert set(ops["op"]) == {"all_gather", "reduce_scatter", "all_reduce", "send", "recv"}
    assert ops["msg_bytes"].null_count() == ops.height  # the CSV has no sizes
    assert not ops["raw_op"].is_in(["ncclGroupStart", "ncclGroupEnd"]).any()
    assert set(ops["pid"]) == {int(r[header.index("PID")]) for r in rows}
    # source_line points at the physical CSV line (header is line 1).
    first = ops.sort("source_line").row(0, named=True)
    line = rows[first["source_line"] - 2]
    assert NCCL_DATA_OPS[line[i_name]] == first["op"]
    assert int(line[i_start]) == first["ts_ns"]

    meta = out.get("trace_meta").row(0, named=True)
    assert meta["aligned"] is False and meta["clock_anchor_ns"] is None
    assert meta["backend"] == "nccl"


def test_jax_csv_rank_from_option_and_file_name(nsys_dir: Path, tmp_path: Path) -> None:
    out = run(nsys_dir / JAX_CSV, rank=3)
    assert set(out.get("markers")["rank"]) == {3}
    assert out.get("trace_meta")["rank_source"][0] == "option"
    link = tmp_path / "maxtext_rank_2_nvtx_pushpop_trace.csv.xz"  # a link, not a copy
    link.symlink_to(nsys_dir / JAX_CSV)
    out = run(link, rank=3)
    assert set(out.get("comm_ops")["rank"]) == {2}
    meta = out.get("trace_meta").row(0, named=True)
    assert (meta["rank"], meta["rank_source"]) == (2, "file_name")
    assert any("differs from the rank option 3" in w for w in out.warnings)


# -- nsys recipe Parquet (real) --------------------------------------------------------------


def test_jax_parquet_gpu_projection(nsys_dir: Path) -> None:
    path = nsys_dir / JAX_PARQUET
    table = pq.read_table(path)
    names = table.column("Name")
    n_null = names.null_count
    n_nccl = pc.sum(pc.starts_with(names, "NCCL:")).as_py()
    proj_sum = pc.sum(pc.filter(table.column("Projected Duration"), pc.is_valid(names))).as_py()

    out = run(path)
    assert out.counts == LineCounts(
        total=table.num_rows, parsed=table.num_rows - n_null, ignored=n_null, rejected=0
    )
    markers = out.get("markers")
    assert markers["dur_ns"].sum() == proj_sum
    assert markers.filter(pl.col("kind") == "nccl_nvtx").height == n_nccl
    # Only ncclGroupEnd is projected here: a group marker, never a comm_op.
    assert set(markers.filter(pl.col("kind") == "nccl_nvtx")["name"]) == {"ncclGroupEnd"}
    assert out.get("comm_ops").height == 0
    assert markers["rank"].null_count() == markers.height  # Rank column is a report index


# -- SYNTHETIC SQLite exports ----------------------------------------------------------------

NCCL_DOM = 7
SID_ALLREDUCE, SID_INIT, SID_SENDRECV = 0x1000005, 0x1000000, 0x1000009
COMM_HASH = 0x4A2CDAA3B5BD0F4C
PID_A, PID_B = 4242, 4343


def gtid(pid: int, tid: int) -> int:
    return (pid << 24) | tid


def payload(sid: int, body: bytes) -> bytes:
    """The 32-byte header nsys puts in front of a binary NVTX payload, then the body."""
    return struct.pack("<IIIIQQ", NCCL_DOM, 0, sid, 0, len(body), 32 + len(body)) + body


def build_db(path: Path, *, mpi_ranks: dict[int, int] | None = None) -> dict[str, int]:
    """Write a SYNTHETIC nsys-like export; return how many rows each kind has."""
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
        CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT,
            localTime TEXT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,
            globalPid INTEGER, demangledName INTEGER, shortName INTEGER, userNote TEXT);
        CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
            rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
            endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, jsonText TEXT,
            binaryData BLOB, eventId INTEGER PRIMARY KEY);
        CREATE TABLE NVTX_PAYLOAD_SCHEMAS (domainId INTEGER, schemaId INTEGER, name TEXT,
            type INTEGER, flags INTEGER, numEntries INTEGER, payloadSize INTEGER, alignTo INTEGER);
        CREATE TABLE NVTX_PAYLOAD_SCHEMA_ENTRIES (domainId INTEGER NOT NULL,
            schemaId INTEGER NOT NULL, idx INTEGER NOT NULL, flags INTEGER, type INTEGER,
            name TEXT, description TEXT, arrayOrUnionDetail INTEGER, offset INTEGER);
        """
    )
    strings = {
        1: "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        2: "ncclKernel_AllGather_RING_LL_Sum_int8_t",
        3: "ncclDevKernel_SendRecv",
        4: "ncclDevKernel_Generic",
        5: "ncclAllReduceRingLLKernel_sum_f32",
        6: "sm90_xmma_gemm_bf16",
        10: "ncclAllReduce",
        11: "ncclGroupStart",
        12: "ncclCommInitRank",
        13: "ncclSend",
        14: "ncclBroadcast",
    }
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", strings.items())
    con.executemany(
        "INSERT INTO META_DATA_EXPORT VALUES (?, ?)",
        [("EXPORT_SCHEMA_VERSION", "3.99.0"), ("EXPORT_PRODUCT_VERSION", "2099.1.1")],
    )
    con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000123456789, '', '')")
    kernels = [
        (100, 200, 0, 1, 13, 1, gtid(PID_A, 0), 1, 1, "x"),
        (300, 450, 0, 1, 13, 2, gtid(PID_A, 0), 2, 2, None),
        (500, 520, 0, 1, 13, 3, gtid(PID_A, 0), 3, 3, None),
        (600, 610, 0, 1, 13, 4, gtid(PID_A, 0), 4, 4, None),
        (700, 790, 1, 1, 14, 5, gtid(PID_B, 0), 5, 5, None),
        (800, 900, 1, 1, 7, 6, gtid(PID_B, 0), 6, 6, None),
        (1000, 990, 1, 1, 7, 7, gtid(PID_B, 0), 6, 6, None),  # end before start: rejected
    ]
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", kernels
    )
    # AllReduce: u64 comm, size_t bytes, ncclRedOp_t op (custom enum type); offsets NULL
    # except the first, as the NVTX self-alignment rule lays them out.
    entries = [
        (NCCL_DOM, SID_ALLREDUCE, 0, 0, 18, "NCCL communicator ID", None, None, None),
        (NCCL_DOM, SID_ALLREDUCE, 1, 0, 22, "Message size [bytes]", None, None, None),
        (NCCL_DOM, SID_ALLREDUCE, 2, 0, 0x1000100, "Reduction operation", None, None, None),
        (NCCL_DOM, SID_INIT, 0, 0, 18, "NCCL communicator ID", None, None, 0),
        (NCCL_DOM, SID_INIT, 1, 0, 5, "No. of ranks", None, None, 8),
        (NCCL_DOM, SID_INIT, 2, 0, 5, "Rank", None, None, 12),
        (NCCL_DOM, SID_INIT, 3, 0, 5, "CUDA device", None, None, 16),
        (NCCL_DOM, SID_SENDRECV, 0, 0, 18, "NCCL communicator ID", None, None, 0),
        (NCCL_DOM, SID_SENDRECV, 1, 0, 22, "Message size [bytes]", None, None, 8),
        (NCCL_DOM, SID_SENDRECV, 2, 0, 5, "Peer rank", None, None, 16),
    ]
    con.executemany(
        "INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", entries
    )
    con.executemany(
        "INSERT INTO NVTX_PAYLOAD_SCHEMAS VALUES (?, ?, NULL, 1, 0, ?, 24, NULL)",
        [(NCCL_DOM, SID_ALLREDUCE, 3), (NCCL_DOM, SID_INIT, 4), (NCCL_DOM, SID_SENDRECV, 3)],
    )
    t = gtid(PID_A, PID_A + 1)
    allreduce = payload(SID_ALLREDUCE, struct.pack("<QQi4x", COMM_HASH, 1 << 20, 0))
    init = payload(SID_INIT, struct.pack("<Qiii4x", COMM_HASH, 8, 2, 0))
    send = payload(SID_SENDRECV, struct.pack("<QQi4x", COMM_HASH, 4096, 1))
    unknown_schema = payload(0x1000063, b"\x00" * 24)
    nvtx = [
        (10, None, 75, None, "NCCL", t, None, NCCL_DOM, None, None),  # domain create
        (11, None, 75, None, "user", t, None, 3, None, None),
        (20, 30, 59, None, None, t, 11, NCCL_DOM, None, None),  # ncclGroupStart
        (40, 90, 59, None, None, t, 12, NCCL_DOM, None, init),  # ncclCommInitRank
        (95, 150, 59, None, None, t, 10, NCCL_DOM, None, allreduce),
        (160, 170, 59, None, None, t, 13, NCCL_DOM, None, send),
        (180, 190, 59, None, None, t, 10, NCCL_DOM, None, unknown_schema),
        (200, 210, 59, None, None, t, 14, NCCL_DOM, '{"Message size [bytes]": 512}', None),
        (220, None, 59, None, None, t, 10, NCCL_DOM, None, None),  # never ended: rejected
        (5, 1000, 59, None, "step 12", t, None, 3, None, None),
        (6, 7, 34, None, "a mark", t, None, 0, None, None),  # ignored
        (8, 9, 60, None, "", t, None, 0, None, None),  # no text at all: ignored
        (300, 400, 60, None, "user range", t, None, 0, None, None),
    ]
    con.executemany(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, rangeId, text, globalTid, textId, "
        "domainId, jsonText, binaryData) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        nvtx,
    )
    if mpi_ranks is not None:
        con.execute("CREATE TABLE MPI_RANKS (globalTid INTEGER, rank INTEGER)")
        con.executemany(
            "INSERT INTO MPI_RANKS VALUES (?, ?)",
            [(gtid(p, p), r) for p, r in mpi_ranks.items()],
        )
    con.commit()
    con.close()
    return {"kernels": len(kernels), "nvtx": len(nvtx)}


@pytest.fixture
def synthetic_db(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    path = tmp_path / "synthetic_job_rank_7.sqlite"
    return path, build_db(path)


def test_synthetic_nccl_kernel_classification(synthetic_db: tuple[Path, dict[str, int]]) -> None:
    path, _ = synthetic_db
    k = run(path).get("kernels").sort("ts_ns")
    got = {r["name"]: (r["category"], r["comm_op"]) for r in k.iter_rows(named=True)}
    assert got == {
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL": ("comm", "all_reduce"),
        "ncclKernel_AllGather_RING_LL_Sum_int8_t": ("comm", "all_gather"),
        "ncclDevKernel_SendRecv": ("comm", "send_recv"),
        "ncclDevKernel_Generic": ("comm", None),
        "ncclAllReduceRingLLKernel_sum_f32": ("comm", "all_reduce"),
        "sm90_xmma_gemm_bf16": ("compute", None),
    }
    assert k["dur_ns"].to_list() == [100, 150, 20, 10, 90, 100]
    assert set(k["rank"]) == {7}  # rank_7 in the file name


def test_synthetic_accounting_and_rejects(synthetic_db: tuple[Path, dict[str, int]]) -> None:
    path, n = synthetic_db
    out = run(path)
    assert out.counts.total == n["kernels"] + n["nvtx"]
    # rejected: the kernel ending early and the NVTX range never ended.
    assert out.counts.rejected == 2
    # ignored: 2 domain creates, 1 mark, 1 range without text.
    assert out.counts.ignored == 4
    rej = out.get("rejects")
    assert sorted(rej["reason"].to_list()) == [
        "CUPTI_ACTIVITY_KIND_KERNEL: end before start",
        "NVTX_EVENTS: end is NULL",
    ]
    assert rej.filter(pl.col("reason").str.starts_with("NVTX"))["line_no"][0] == 9  # eventId
    markers = out.get("markers")
    assert markers.height == 8
    assert markers.filter(pl.col("name") == "step 12")["iteration"].to_list() == [12]
    assert markers.filter(pl.col("name") == "step 12")["domain"].to_list() == ["user"]
    assert set(markers.filter(pl.col("domain") == "NCCL")["kind"]) == {"nccl_nvtx"}
    assert markers.filter(pl.col("domain").is_null())["kind"].to_list() == ["nvtx"]


def test_synthetic_comm_ops_from_nccl_payloads(
    synthetic_db: tuple[Path, dict[str, int]],
) -> None:
    path, _ = synthetic_db
    out = run(path)
    ops = out.get("comm_ops").sort("ts_ns")
    assert ops["raw_op"].to_list() == [
        "ncclAllReduce",
        "ncclSend",
        "ncclAllReduce",
        "ncclBroadcast",
    ]
    assert ops["op"].to_list() == ["all_reduce", "send", "all_reduce", "broadcast"]
    assert ops["msg_bytes"].to_list() == [1 << 20, 4096, None, 512]
    assert ops["comm_id"].to_list() == [f"0x{COMM_HASH:x}", f"0x{COMM_HASH:x}", None, None]
    assert ops["redop"].to_list() == ["sum", None, None, None]
    assert ops["peer_rank"].to_list() == [None, 1, None, None]
    # group size from the CommInit payload of the same communicator (nranks 8)
    assert ops["group_size"].to_list() == [8, 8, None, None]
    assert ops["group_source"].to_list() == ["logged", "logged", None, None]
    # Kernels were traced but the export has no RUNTIME table: no call can be linked to a
    # kernel, so none is timed (its CPU range only times the enqueue).
    assert ops["ts_ns"].to_list() == [95, 160, 180, 200]
    assert ops["launch_ts_ns"].to_list() == [95, 160, 180, 200]
    assert ops["dur_ns"].to_list() == [None] * 4
    assert set(ops["timing_source"]) == {"none"}
    assert any("no CUPTI_ACTIVITY_KIND_RUNTIME" in w for w in out.warnings)
    assert set(ops["pid"]) == {PID_A}
    assert any("could not be decoded" in w for w in out.warnings)
    comms = out.get("communicators")
    assert comms.select("comm_id", "rank", "nranks", "cuda_dev").rows() == [
        (f"0x{COMM_HASH:x}", 2, 8, 0)
    ]
    meta = out.get("trace_meta").row(0, named=True)
    assert meta["backend"] == "nccl"
    assert (meta["rank"], meta["rank_source"]) == (7, "file_name")
    assert meta["clock_anchor_ns"] == 1700000000123456789 and meta["aligned"] is True
    assert meta["source_version"] == "3.99.0"
    assert meta["pid"] is None  # two processes with GPU activity
    assert any("2 processes have GPU activity" in w for w in out.warnings)


def test_synthetic_mpi_ranks_per_process(tmp_path: Path) -> None:
    path = tmp_path / "synthetic_two_ranks.sqlite"
    build_db(path, mpi_ranks={PID_A: 4, PID_B: 5})
    out = run(path, rank=1)
    meta = out.get("trace_meta").sort("rank")
    assert meta.select("rank", "pid", "rank_source").rows() == [
        (4, PID_A, "mpi_ranks"),
        (5, PID_B, "mpi_ranks"),
    ]
    k = out.get("kernels")
    assert k.filter(pl.col("device") == 0)["rank"].unique().to_list() == [4]
    assert k.filter(pl.col("device") == 1)["rank"].unique().to_list() == [5]
    assert set(out.get("comm_ops")["rank"]) == {4}


def test_synthetic_comm_group_rank_and_rank_from_comm_init(tmp_path: Path) -> None:
    """NCCL >= 2.25 payloads: a call's communicator (commHash) gives its size and the caller's
    rank in it (the CommInitRank payload's ``Rank``); an export with no other rank takes the
    global rank from the process's largest communicator, marked inferred_largest_comm, and
    writes no global_rank into ``communicators`` (a guess is never evidence)."""
    path = tmp_path / "synthetic_job_host_4242.sqlite"  # no rank in the name
    build_db(path)
    out = run(path)
    ops = out.get("comm_ops").sort("ts_ns")
    # the two calls naming COMM_HASH are comm rank 2 of 8 (the CommInit payload)
    assert ops["group_rank"].to_list() == [2, 2, None, None]
    assert ops["rank"].to_list() == [2] * 4  # process PID_A: its largest comm is 8 ranks, rank 2
    assert set(ops["rank_source"]) == {"inferred_largest_comm"}
    k = out.get("kernels")
    assert set(k.filter(pl.col("device") == 0)["rank"]) == {2}  # PID_A's kernels
    assert set(k.filter(pl.col("device") == 1)["rank"]) == {None}  # PID_B: no CommInit
    meta = out.get("trace_meta").row(0, named=True)
    assert (meta["rank"], meta["pid"], meta["rank_source"]) == (2, PID_A, "inferred_largest_comm")
    comms = out.get("communicators")
    assert comms["global_rank"].to_list() == [None]
    assert any("rank inferred from the CommInitRank payload" in w for w in out.warnings)
    assert not any(w.startswith("rank unknown") for w in out.warnings)
    # a rank given by the file name (or option) is kept: nothing is inferred
    named = tmp_path / "synthetic_job_rank_7.sqlite"
    build_db(named)
    out = run(named)
    assert set(out.get("comm_ops")["rank"]) == {7}
    assert out.get("comm_ops")["rank_source"].to_list() == [None] * 4  # as given: logged
    assert out.get("communicators")["global_rank"].to_list() == [7]
    assert set(run(path, rank=5).get("comm_ops")["rank_source"]) == {"option"}


def test_synthetic_gzip_compressed_export(synthetic_db: tuple[Path, dict[str, int]]) -> None:
    path, n = synthetic_db
    gz = path.with_name("synthetic_job_rank_7.sqlite.gz")
    gz.write_bytes(gzip.compress(path.read_bytes()))
    tmp = Path(tempfile.gettempdir())
    before = set(tmp.glob("commscope-nsys-*"))
    assert PARSER.sniff(Source(gz).head(), gz) > 0
    out = run(gz)
    assert out.counts.total == n["kernels"] + n["nvtx"]
    assert out.get("comm_ops").height == 4
    assert set(tmp.glob("commscope-nsys-*")) == before  # temporary copy removed


def test_synthetic_missing_tables(tmp_path: Path) -> None:
    """A lazy export with no activity tables at all is a normal, empty outcome."""
    path = tmp_path / "synthetic_empty_export.sqlite"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE EXPORT_META_DATA (name TEXT, value TEXT);
        INSERT INTO EXPORT_META_DATA VALUES ('EXPORT_SCHEMA_VERSION', '2.9.1');
        CREATE TABLE TARGET_INFO_GPU (id INTEGER);
        """
    )
    con.commit()
    con.close()
    out = run(path)
    assert out.counts == LineCounts()
    assert set(out.tables) == {"trace_meta"}
    meta = out.get("trace_meta").row(0, named=True)
    assert meta["aligned"] is False and meta["clock_anchor_ns"] is None
    assert meta["source_version"] == "2.9.1"
    assert any("no kernel, memcpy, memset or NVTX table" in w for w in out.warnings)
    assert any("TARGET_INFO_SESSION_START_TIME" in w for w in out.warnings)


def test_synthetic_kernel_table_without_optional_columns(tmp_path: Path) -> None:
    """Columns are picked by name: a KERNEL table lacking most of them still parses."""
    path = tmp_path / "synthetic_minimal_columns.sqlite"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (end INTEGER, start INTEGER, shortName INTEGER);
        INSERT INTO StringIds VALUES (1, 'ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL');
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (50, 10, 1), (NULL, 60, 1);
        """
    )
    con.commit()
    con.close()
    out = run(path)
    assert out.counts == LineCounts(total=2, parsed=1, ignored=0, rejected=1)
    row = out.get("kernels").row(0, named=True)
    assert (row["ts_ns"], row["dur_ns"], row["device"], row["stream"]) == (10, 40, None, None)
    assert (row["category"], row["comm_op"]) == ("comm", "reduce_scatter")
    assert out.get("rejects")["reason"].to_list() == ["CUPTI_ACTIVITY_KIND_KERNEL: end is NULL"]


# -- SYNTHETIC stats CSV -----------------------------------------------------------------------


def test_synthetic_csv_preamble_units_and_rejects(tmp_path: Path) -> None:
    path = tmp_path / "synthetic_nvtx_pushpop_trace.csv"
    text = (
        "Generating SQLite file report1.sqlite from report1.nsys-rep\n"
        "Processing [report1.sqlite] with [nvtx_pushpop_trace.py]...\n"
        "\n"
        "Start (us),End (us),Duration (us),Name,PID,TID,Lvl,RangeId\n"
        "1.5,3.5,2.0,NCCL:ncclBroadcast,11,12,0,1\n"
        '4,5,1,"step 12, warmup",11,12,0,2\n'
        "6,7,1,step 13,11,12,0,3\n"
        "8,,,NCCL:ncclAllReduce,11,12,0,4\n"
        "9,10,1,too,many,fields,here,5,6\n"
        "\n"
    )
    path.write_text(text)
    rows = list(csv.reader(io.StringIO(text.split("\n", 3)[3])))
    data_rows = [r for r in rows[1:] if r]
    assert PARSER.sniff(Source(path).head(), path) >= 90
    out = run(path)
    assert out.counts == LineCounts(total=len(data_rows), parsed=3, ignored=0, rejected=2)
    m = out.get("markers").sort("ts_ns")
    assert m["ts_ns"].to_list() == [1500, 4000, 6000]
    assert m["dur_ns"].to_list() == [2000, 1000, 1000]
    assert m["iteration"].to_list() == [None, None, 13]
    assert m["source_line"].to_list() == [5, 6, 7]
    ops = out.get("comm_ops")
    assert ops.select("op", "raw_op", "pid", "ts_ns").rows() == [
        ("broadcast", "ncclBroadcast", 11, 1500)
    ]
    rej = out.get("rejects").sort("line_no")
    assert rej["line_no"].to_list() == [8, 9]
    assert rej["reason"][0] == "range without an end or duration"
    assert rej["reason"][1] == "9 fields, header has 8"


def test_synthetic_csv_gpu_trace_and_summary(tmp_path: Path) -> None:
    gpu = tmp_path / "synthetic_cuda_gpu_trace.csv"
    gpu.write_text(
        "Start (ns),Duration (ns),CorrId,GrdX,Bytes (B),Device,Ctx,Strm,Name\n"
        "100,50,7,1,,NVIDIA H100 (3),1,13,ncclDevKernel_AllGather_RING_LL\n"
        "200,10,8,,4096,NVIDIA H100 (3),1,7,[CUDA memcpy Host-to-Device]\n"
        "300,20,9,64,,NVIDIA H100 (3),1,7,ampere_sgemm_128x64_nn\n"
    )
    out = run(gpu)
    k = out.get("kernels").sort("ts_ns")
    assert k.select("category", "comm_op").rows() == [
        ("comm", "all_gather"),
        ("memcpy", None),
        ("compute", None),
    ]
    assert k["device"].to_list() == [3, 3, 3]
    assert k["stream"].to_list() == [13, 7, 7]
    assert k["msg_bytes"].to_list() == [None, 4096, None]
    assert k["correlation"].to_list() == [7, 8, 9]

    summary = tmp_path / "synthetic_cuda_gpu_kern_sum.csv"
    summary.write_text(
        "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
        "90.0,900,9,100.0,100.0,90,110,5.0,ncclDevKernel_AllReduce_Sum_f32_RING_LL\n"
        "10.0,100,1,100.0,100.0,100,100,0.0,gemm\n"
    )
    assert 0 < PARSER.sniff(Source(summary).head(), summary) < 90
    out = run(summary)
    assert out.counts == LineCounts(total=2, parsed=0, ignored=2, rejected=0)
    assert any("not ingested" in w for w in out.warnings)


def test_csv_without_header_raises(tmp_path: Path) -> None:
    path = tmp_path / "synthetic_not_a_report.csv"
    path.write_text("a,b,c\n1,2,3\n")
    assert PARSER.sniff(Source(path).head(), path) == 0
    with pytest.raises(ParseError, match="no nsys stats CSV header"):
        run(path)


def test_truncated_compressed_csv_raises(tmp_path: Path) -> None:
    path = tmp_path / "synthetic_truncated_nvtx_pushpop_trace.csv.xz"
    body = "Start (ns),End (ns),Name,PID,TID,RangeId\n" + "".join(
        f"{i},{i + 5},range {i},1,2,{i}\n" for i in range(20000)
    )
    data = lzma.compress(body.encode())
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ParseError, match="cannot read"):
        run(path)


def test_offset_ingest_is_refused(nsys_dir: Path) -> None:
    src = Source(nsys_dir / NVFUSER, start_offset=100)
    with pytest.raises(ParseError, match="whole"):
        list(PARSER.parse(src, run_id="run-test"))


# -- helpers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("rank_3.sqlite", 3),
        ("job-rank-12.nsys.sqlite", 12),
        ("profile.rank3.sqlite", 3),
        ("RANK5_report.csv.xz", 5),
        ("local_rank3.sqlite", None),
        ("node_rank1_report.sqlite", None),
        ("report1.sqlite", None),
        ("saxpy_nsys_perlmutter0.sqlite", None),
        ("rank1_vs_rank2.sqlite", None),
        ("frank3.sqlite", None),
    ],
)
def test_rank_from_file_name(name: str, rank: int | None) -> None:
    assert rank_from_file_name(Path("/x") / name) == rank


def test_payload_decoder_needs_schema_and_size() -> None:
    """Decoding is refused unless the header, schema and sizes agree (SYNTHETIC bytes)."""
    con = sqlite3.connect(":memory:")
    con.executescript(
        """
        CREATE TABLE NVTX_PAYLOAD_SCHEMA_ENTRIES (domainId INTEGER, schemaId INTEGER,
            idx INTEGER, flags INTEGER, type INTEGER, name TEXT, offset INTEGER);
        INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES
            (7, 5, 0, 0, 5, 'Peer rank', NULL),
            (7, 5, 1, 0, 22, 'Message size [bytes]', NULL);
        """
    )
    dec = PayloadDecoder.from_db(con, {"NVTX_PAYLOAD_SCHEMA_ENTRIES"})
    body = struct.pack("<i4xQ", 3, 777)  # int at 0, size_t self-aligned at 8
    ok = struct.pack("<IIIIQQ", 7, 0, 5, 0, len(body), 32 + len(body)) + body
    assert dec.decode_binary(ok, 7) == {"Peer rank": 3, "Message size [bytes]": 777}
    assert dec.decode_binary(ok.hex(), 7) == {"Peer rank": 3, "Message size [bytes]": 777}
    assert dec.decode_binary(ok[:-1], 7) is None  # truncated
    short = struct.pack("<IIIIQQ", 7, 0, 5, 0, 8, 40) + body
    assert dec.decode_binary(short, 7) is None  # header size does not cover the fields
    other = struct.pack("<IIIIQQ", 7, 0, 6, 0, len(body), 32 + len(body)) + body
    assert dec.decode_binary(other, 7) is None  # unknown schema
    assert dec.decode_binary(body, 7) is None  # no header
    assert PayloadDecoder.decode_json('{"Message size [bytes]": "0x10"}') == {
        "Message size [bytes]": 16
    }
    assert PayloadDecoder.decode_json("not json") is None
    con.close()


# -- issue 16: calls timed by the kernels they launched ---------------------------------------

ZHIYIHU = "zhiyihu_ault_3node_9rank_allreduce_tree_nccl2.17_3of9"


def zhiyihu_files(nsys_dir: Path) -> list[Path]:
    files = sorted((nsys_dir / ZHIYIHU).glob("*.sqlite"))
    if not files:
        pytest.skip(f"{ZHIYIHU} missing")
    return files


def raw_launch_chain(con: sqlite3.Connection) -> list[tuple[int, int, int, int, int]]:
    """Per NCCL data call: (range start, range end, kernel start, kernel end, kernels), read
    with plain SQL: range -> runtime launch on its thread inside it -> kernel by correlationId
    in the same process (globalTid with the 24 TID bits cleared = globalPid)."""
    return con.execute(
        """
        SELECT n.start, n.end, min(k.start), max(k.end), count(k.start)
        FROM NVTX_EVENTS n
        JOIN StringIds s ON s.id = n.textId
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
          ON r.globalTid = n.globalTid AND r.start BETWEEN n.start AND n.end
        JOIN CUPTI_ACTIVITY_KIND_KERNEL k
          ON k.correlationId = r.correlationId AND k.globalPid = r.globalTid / 16777216 * 16777216
        WHERE n.eventType = 59 AND s.value IN ('ncclAllReduce', 'ncclAllGather',
              'ncclReduceScatter', 'ncclBroadcast', 'ncclReduce', 'ncclSend', 'ncclRecv')
        GROUP BY n.rowid ORDER BY n.start
        """
    ).fetchall()


def test_real_nccl_call_timed_by_its_kernel(nsys_dir: Path) -> None:
    """ZhiyiHu 3-node job: each rank's ncclAllReduce is its kernel's interval, not the range."""
    for path in zhiyihu_files(nsys_dir):
        with ro(path) as con:
            chain = raw_launch_chain(con)
        assert len(chain) == 1, path.name  # one AllReduce per rank in this job
        r_start, r_end, k_start, k_end, n_k = chain[0]
        ops = run(path).get("comm_ops")
        assert ops.height == 1
        row = ops.row(0, named=True)
        assert (row["ts_ns"], row["dur_ns"]) == (k_start, k_end - k_start), path.name
        assert row["dur_ns"] > 3 * (r_end - r_start)  # the range only timed the enqueue
        assert row["timing_source"] == "kernel"
        assert row["launch_ts_ns"] == r_start
        assert row["kernel_count"] == n_k == 1


def raw_launches(con: sqlite3.Connection) -> dict[tuple[str, int], int]:
    """(table, rowid) -> start of the runtime call with its correlationId in its process,
    the CUDA runtime row (eventClass 0) preferred over others, then the earliest (Python)."""
    runtime: dict[tuple[int, int], tuple[int, int]] = {}
    for cid, g, start, cls in con.execute(
        "SELECT correlationId, globalTid, start, eventClass FROM CUPTI_ACTIVITY_KIND_RUNTIME"
    ):
        key = (cid, (g >> 24) & 0xFFFFFF)
        rank_ = (0 if cls == 0 else 1, start)
        if key not in runtime or rank_ < runtime[key]:
            runtime[key] = rank_
    out: dict[tuple[str, int], int] = {}
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    for cat, table in (
        ("kernel", "CUPTI_ACTIVITY_KIND_KERNEL"),
        ("memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY"),
        ("memset", "CUPTI_ACTIVITY_KIND_MEMSET"),
    ):
        if table not in tables:
            continue
        for rowid, cid, gp in con.execute(f"SELECT rowid, correlationId, globalPid FROM {table}"):
            hit = runtime.get((cid, (gp >> 24) & 0xFFFFFF))
            if hit is not None:
                out[(cat, rowid)] = hit[1]
    return out


def test_real_kernel_launch_ts_from_runtime(nsys_dir: Path) -> None:
    """kernels.launch_ts_ns = the launching runtime call's start, on every real export."""
    paths = [nsys_dir / n for n in SQLITES] + zhiyihu_files(nsys_dir)
    for path in paths:
        with ro(path) as con:
            expected = raw_launches(con)
        k = run(path).get("kernels")
        cat = pl.when(pl.col("category").is_in(["memcpy", "memset"])).then(pl.col("category"))
        got = {
            (c, line): ts
            for c, line, ts in k.select(
                cat.fill_null("kernel"), "source_line", "launch_ts_ns"
            ).iter_rows()
        }
        assert got == expected, path.name
        assert len(got) == k.height  # every activity row of these exports has its launch
        # No step markers in these exports: no iteration.
        assert k["iteration"].null_count() == k.height
    # The 2022.2 saxpy export writes each launch twice (eventClass 67 around eventClass 0).
    with ro(nsys_dir / SAXPY) as con:
        twice = con.execute(
            "SELECT count(*) FROM (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME "
            "GROUP BY correlationId, globalTid HAVING count(DISTINCT eventClass) > 1)"
        ).fetchone()[0]
    assert twice > 0


def build_timing_db(path: Path, *, cuda: bool = True) -> dict[str, object]:
    """A SYNTHETIC export exercising the launch chain; returns the facts the tests check.

    Process PID_A, main thread M (steps, NCCL calls) and autograd thread B. Steps
    ProfilerStep#1 [0, 1000) and ProfilerStep#2 [1000, 2000) on M. ``cuda=False`` leaves out
    the KERNEL and RUNTIME tables (an export without CUDA trace).
    """
    m, b = gtid(PID_A, 11), gtid(PID_A, 12)
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
        CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
            text TEXT, globalTid INTEGER, textId INTEGER, domainId INTEGER, jsonText TEXT,
            eventId INTEGER PRIMARY KEY);
        """
    )
    names = {20: "ncclAllReduce", 21: "ncclGroupStart", 22: "ncclSend", 23: "ncclRecv",
             24: "ncclGroupEnd", 30: "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
             31: "ncclDevKernel_SendRecv", 32: "sm90_xmma_gemm_bf16"}  # fmt: skip
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", names.items())
    nvtx = [
        (1, None, 75, "NCCL", m, None, NCCL_DOM),
        (0, 1000, 59, "ProfilerStep#1", m, None, 0),
        (1000, 2000, 59, "ProfilerStep#2", m, None, 0),
        (100, 150, 59, None, m, 20, NCCL_DOM),  # allreduce: launches kernel 1 at 120
        (200, 205, 59, None, m, 21, NCCL_DOM),  # group start
        (210, 220, 59, None, m, 22, NCCL_DOM),  # send, inside the group
        (230, 240, 59, None, m, 23, NCCL_DOM),  # recv, inside the group
        (250, 300, 59, None, m, 24, NCCL_DOM),  # group end: launches kernel 2 at 260
        (1100, 1110, 59, None, m, 20, NCCL_DOM),  # allreduce that launches nothing
    ]
    con.executemany(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId, domainId) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        nvtx,
    )
    # the last AllReduce is zero-size (decoded payload in jsonText)
    con.execute(
        "UPDATE NVTX_EVENTS SET jsonText = '{\"Message size [bytes]\": 0}' WHERE start = 1100"
    )
    # kernel: (corr, start, end, name id); runtime: (corr, thread, start, eventClass)
    kernels = [(1, 1200, 1500, 30), (2, 1600, 1700, 31), (3, 1900, 1990, 32), (4, 2600, 2700, 32)]
    runtime = [(1, m, 120, 0), (2, m, 260, 0), (3, b, 1040, 67), (3, b, 1050, 0), (4, m, 2500, 0)]
    if cuda:
        con.executescript(
            """
            CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER,
                deviceId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER,
                shortName INTEGER);
            CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER,
                eventClass INTEGER, globalTid INTEGER, correlationId INTEGER, nameId INTEGER);
            """
        )
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, ?, ?, ?)",
            [(s, e, c, gtid(PID_A, 0), n) for c, s, e, n in kernels],
        )
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?, 0)",
            [(s, s + 5, cls, g, c) for c, g, s, cls in runtime],
        )
    con.commit()
    con.close()
    return {"kernels": kernels, "runtime": runtime, "nvtx": nvtx}


def test_synthetic_calls_kernel_group_and_unlaunched(tmp_path: Path) -> None:
    path = tmp_path / "synthetic_timing_rank_0.sqlite"
    facts = build_timing_db(path)
    kern = {c: (s, e) for c, s, e, _ in facts["kernels"]}  # type: ignore[attr-defined]
    ops = run(path).get("comm_ops").sort("launch_ts_ns")
    assert ops["raw_op"].to_list() == ["ncclAllReduce", "ncclSend", "ncclRecv", "ncclAllReduce"]
    # own kernel; the group's kernel for both grouped calls; nothing launched.
    assert ops["ts_ns"].to_list() == [kern[1][0], kern[2][0], kern[2][0], 1100]
    assert ops["dur_ns"].to_list() == [
        kern[1][1] - kern[1][0],
        kern[2][1] - kern[2][0],
        kern[2][1] - kern[2][0],
        None,
    ]
    assert ops["timing_source"].to_list() == ["kernel", "kernel", "kernel", "none"]
    assert ops["kernel_count"].to_list() == [1, 1, 1, 0]
    assert ops["launch_ts_ns"].to_list() == [100, 210, 230, 1100]
    # Iteration by the CPU launch: the first AllReduce's kernel runs in step 2's window but
    # was issued in step 1.
    assert ops["iteration"].to_list() == [1, 1, 1, 2]


def test_synthetic_kernel_launch_and_iteration(tmp_path: Path) -> None:
    path = tmp_path / "synthetic_timing_rank_0.sqlite"
    facts = build_timing_db(path)
    launch: dict[int, int] = {}
    for c, _, s, cls in facts["runtime"]:  # type: ignore[attr-defined]
        if cls == 0:
            launch[c] = s
    k = run(path).get("kernels").sort("correlation")
    assert k["launch_ts_ns"].to_list() == [launch[c] for c in k["correlation"].to_list()]
    # kernel 1 launched at 120 (step 1) though it runs at 1200; kernel 3 launched by the
    # autograd thread at 1050 (step 2 of its process); kernel 4 launched after every step.
    assert k["iteration"].to_list() == [1, 1, 2, None]


def test_synthetic_no_cuda_trace_gives_no_duration(tmp_path: Path) -> None:
    """Without a CUDA trace an NCCL call has only its CPU range, which times the enqueue:
    the call is kept (launch time, size) but has no duration (timing_source none)."""
    path = tmp_path / "synthetic_nocuda_rank_0.sqlite"
    facts = build_timing_db(path, cuda=False)
    calls = sorted(
        (s, e)
        for s, e, _, _, _, tid, _ in facts["nvtx"]  # type: ignore[attr-defined]
        if tid in (20, 22, 23)
    )
    ops = run(path).get("comm_ops").sort("ts_ns")
    assert ops["launch_ts_ns"].to_list() == [s for s, _ in calls]
    assert ops["ts_ns"].to_list() == [s for s, _ in calls]
    assert set(ops["timing_source"]) == {"none"}
    assert ops["dur_ns"].null_count() == ops.height
    assert ops["kernel_count"].null_count() == ops.height  # no kernels traced: unknown


def test_jax_csv_comm_ops_have_no_duration(nsys_dir: Path) -> None:
    """A range report has no kernels to link and an NCCL range times only the CPU enqueue:
    its NCCL rows keep their start, with no duration (timing_source none), said so."""
    header, rows = _jax_rows(nsys_dir / JAX_CSV)
    i_name, i_start = (header.index(c) for c in ("Name", "Start (ns)"))
    expected = sorted(int(r[i_start]) for r in rows if r[i_name] in NCCL_DATA_OPS)
    ops = run(nsys_dir / JAX_CSV).get("comm_ops").sort("ts_ns")
    assert ops["ts_ns"].to_list() == expected
    assert ops["dur_ns"].null_count() == ops.height
    assert set(ops["timing_source"]) == {"none"}
    assert (ops["launch_ts_ns"] == ops["ts_ns"]).all()


def test_synthetic_recipe_projection_is_kernel_time(tmp_path: Path) -> None:
    """nvtx_gpu_proj_trace: a projected NCCL call is GPU time; NumGPUOps 0 has none."""
    import pyarrow as pa

    rows = {
        "Name": ["NCCL:ncclAllReduce", "NCCL:ncclAllGather", "step 3"],
        "Projected Start": [5000, 7000, 4000],
        "Projected Duration": [900, 0, 9000],
        "Orig Start": [1000.0, 1200.0, 900.0],
        "Orig Duration": [30.0, 20.0, 9500.0],
        "Style": ["PushPop"] * 3,
        "PID": [1, 1, 1],
        "TID": [2, 2, 2],
        "NumGPUOps": [2, 0, 40],
        "Lvl": [1.0, 1.0, 0.0],
        "NumChild": [0, 0, 2],
        "RangeId": [2.0, 3.0, 1.0],
        "ParentId": [1.0, 1.0, None],
        "RangeStack": [":1:2", ":1:3", ":1"],
        "Rank": [0, 0, 0],
    }
    path = tmp_path / "synthetic_nvtx_gpu_proj_trace.parquet"
    pq.write_table(pa.table(rows), path)
    ops = run(path).get("comm_ops").sort("launch_ts_ns")
    assert ops.select(
        "op", "ts_ns", "dur_ns", "timing_source", "launch_ts_ns", "kernel_count"
    ).rows() == [
        ("all_reduce", 5000, 900, "kernel", 1000, 2),
        ("all_gather", 7000, None, "none", 1200, 0),
    ]


def test_real_epoch_shifted_export_is_aligned(nsys_dir: Path) -> None:
    """ZhiyiHu exports are normalised then shifted by the session start: ts_ns are epoch ns."""
    for path in zhiyihu_files(nsys_dir):
        with ro(path) as con:
            start = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
            meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall())
            first = con.execute(
                "SELECT min(start) FROM NVTX_EVENTS WHERE eventType = 59 AND end >= start"
            ).fetchone()[0]
        assert meta["EXPORT_PARAM_TIME_NORMALIZE"] == "true"
        assert int(meta["EXPORT_CONFIG_TIME_SHIFT"]) == start[0] <= first
        out = run(path)
        row = out.get("trace_meta").row(0, named=True)
        assert (row["clock_anchor_ns"], row["aligned"]) == (0, True), path.name
        assert out.get("markers")["ts_ns"].min() == first  # already on the epoch clock
