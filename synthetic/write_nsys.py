"""Nsight Systems SQLite exports (``nsys export --type sqlite``), one per rank.

Why: nsys is the tool of choice for exposed-communication analyses (NCCL kernels against compute
kernels on one GPU timeline). The export holds the tables and columns a reader of real exports
uses (FORMATS_timeline.md §1; column lists as in nsys 2024.6, export schema 3.16.1):

* ``StringIds`` (every name is an id into it), ``META_DATA_EXPORT`` (product and schema version;
  ``EXPORT_PARAM_INPUT_FILE`` names the synthetic report, plus a ``COMMSCOPE_SYNTHETIC`` row),
  ``TARGET_INFO_SESSION_START_TIME`` (``utcEpochNs``: the node's wall clock at capture start,
  clock skew included), ``TARGET_INFO_SYSTEM_ENV`` (Hostname), ``TARGET_INFO_GPU``,
  ``PROCESSES``, ``ThreadNames``, ``ENUM_NSYS_EVENT_TYPE``;
* ``NVTX_EVENTS``: the ``NCCL`` domain (eventType 75) and NCCL's push/pop ranges (eventType 59,
  registered names in ``textId``: ``ncclAllReduce``, ``ncclSend``, ``ncclGroupStart``, ...) with
  their binary payload in ``binaryData`` (32-byte header + the static NCCL schema: message size
  and reduction op for NCCL 2.16-2.24; communicator id first and the peer for p2p from 2.25),
  the schemas in ``NVTX_PAYLOAD_SCHEMAS``/``NVTX_PAYLOAD_SCHEMA_ENTRIES``; from 2.25 one
  ``ncclCommInitRankConfig`` range per communicator of the rank (pipeline pairs included: NCCL
  gives each p2p pair a 2-rank communicator) with its payload (commHash, No. of ranks, Rank,
  CUDA device), before the profiled iterations; one
  ``iteration <k>`` range per iteration in the default domain (a ``torch.cuda.nvtx`` range);
* ``CUPTI_ACTIVITY_KIND_KERNEL``: compute kernels and ``ncclDevKernel_*`` kernels (short,
  demangled and mangled names), ``CUPTI_ACTIVITY_KIND_RUNTIME``: the ``cudaLaunchKernel`` call of
  each kernel (same ``correlationId``), inside the NCCL range for NCCL kernels.

Times are ns on the session timeline (capture started 2 s before iteration 0); global ids pack
the pid as ``pid << 24 | tid``. Only iterations selected by ``profile_iterations`` are written.
"""

from __future__ import annotations

import sqlite3
import struct
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from commscope.synthetic.common import (
    COMPUTE_KERNELS,
    COMPUTE_STREAM,
    Names,
    comm_stream,
    compute_kernel,
    nccl_kernel,
    short_kernel_name,
)
from commscope.synthetic.program import DTYPES
from commscope.synthetic.simulate import Simulation

CAPTURE_LEAD_NS = 2_000_000_000
"""The capture starts this long before iteration 0 (session time of iteration 0's start)."""

NCCL_DOMAIN_ID = 1
SCHEMA_STATIC_START = 1 << 24
"""``NVTX_PAYLOAD_ENTRY_TYPE_SCHEMA_ID_STATIC_START``."""
_SID = {
    "CommInitRank": 0,
    "AllGather": 4,
    "AllReduce": 5,
    "ReduceScatter": 7,
    "Send": 9,
    "Recv": 10,
}
_REDOP_ENUM_TYPE = SCHEMA_STATIC_START + 64
HEADER = struct.Struct("<IIIIQQ")

_API = {
    "all_reduce": "AllReduce",
    "all_gather": "AllGather",
    "reduce_scatter": "ReduceScatter",
    "send": "Send",
    "recv": "Recv",
}
RUNTIME_LAUNCH = "cudaLaunchKernel_v7000"

_DDL = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE TARGET_INFO_SYSTEM_ENV (globalVid INTEGER, devStateName TEXT NOT NULL, name TEXT NOT NULL, nameEnum INTEGER NOT NULL, value TEXT NOT NULL);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER, pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT, cuDevice INTEGER, computeMajor INTEGER, computeMinor INTEGER);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT);
CREATE TABLE NVTX_PAYLOAD_SCHEMAS (domainId INTEGER, schemaId INTEGER NOT NULL, name TEXT, type INTEGER, flags INTEGER, numEntries INTEGER, payloadSize INTEGER, alignTo INTEGER);
CREATE TABLE NVTX_PAYLOAD_SCHEMA_ENTRIES (domainId INTEGER, schemaId INTEGER NOT NULL, idx INTEGER NOT NULL, flags INTEGER, type INTEGER, name TEXT, description TEXT, arrayOrUnionDetail INTEGER, offset INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER);
CREATE TEMP TABLE stage_kernel (start INTEGER, end INTEGER, streamId INTEGER, corr INTEGER, dname INTEGER, sname INTEGER);
CREATE TEMP TABLE stage_nvtx (start INTEGER, end INTEGER, text TEXT, textId INTEGER, domainId INTEGER, binaryData BLOB);
"""

_EVENT_TYPES = [
    (33, "NvtxCategory", "NvtxCategory"),
    (34, "NvtxMark", "NvtxMark"),
    (39, "NvtxThread", "NvtxThread"),
    (59, "NvtxPushPopRange", "NvtxPushPopRange"),
    (60, "NvtxStartEndRange", "NvtxStartEndRange"),
    (75, "NvtxDomainCreate", "NvtxDomainCreate"),
    (76, "NvtxDomainDestroy", "NvtxDomainDestroy"),
]


def _schemas(minor: int) -> dict[str, list[tuple[str, int, int]]]:
    """NCCL's static payload schemas: API -> [(entry name, NVTX entry type, offset)]."""
    size = ("Message size [bytes]", 22, 0)
    if minor >= 25:
        comm = ("NCCL communicator ID", 18, 0)
        size = ("Message size [bytes]", 22, 8)
        return {
            "AllReduce": [comm, size, ("Reduction operation", _REDOP_ENUM_TYPE, 16)],
            "ReduceScatter": [comm, size, ("Reduction operation", _REDOP_ENUM_TYPE, 16)],
            "AllGather": [comm, size],
            "Send": [comm, size, ("Peer rank", 5, 16)],
            "Recv": [comm, size, ("Peer rank", 5, 16)],
            "CommInitRank": [comm, ("No. of ranks", 5, 8), ("Rank", 5, 12), ("CUDA device", 5, 16)],
        }
    return {
        "AllReduce": [size, ("Reduction operation", _REDOP_ENUM_TYPE, 8)],
        "ReduceScatter": [size, ("Reduction operation", _REDOP_ENUM_TYPE, 8)],
        "AllGather": [size],
        "Send": [size],
        "Recv": [size],
    }


def _payload_size(entries: list[tuple[str, int, int]]) -> int:
    end = max(off + (8 if typ in (18, 22) else 4) for _, typ, off in entries)
    return -(-end // 8) * 8


def pack_payload(minor: int, api: str, comm_hash: int, size: int, extra: int) -> bytes:
    """The ``binaryData`` bytes of one NCCL range: header + the schema's fields."""
    entries = _schemas(minor)[api]
    psize = _payload_size(entries)
    body = bytearray(psize)
    values = {
        "NCCL communicator ID": comm_hash,
        "Message size [bytes]": size,
        "Reduction operation": 0,
        "Peer rank": extra,
    }
    for name, typ, off in entries:
        fmt = "<Q" if typ in (18, 22) else "<i"
        struct.pack_into(fmt, body, off, values.get(name, extra))
    header = HEADER.pack(
        NCCL_DOMAIN_ID, 0, SCHEMA_STATIC_START + _SID[api], 0, psize, HEADER.size + psize
    )
    return header + bytes(body)


@dataclass
class _Db:
    rank: int
    con: sqlite3.Connection
    path: Path
    corr: int = 1
    grid: int = 1


class NsysWriter:
    """Writes the nsys SQLite export of every rank of a lane."""

    name = "nsys"

    def __init__(self, sim: Simulation, names: Names) -> None:
        """Build the string table shared by every file of the run."""
        self.sim = sim
        self.names = names
        self.opts = sim.opts
        self.cluster = sim.cluster
        self.minor = sim.opts.nccl[1]
        strings: list[str] = [
            "[Unknown]",
            "NCCL",
            RUNTIME_LAUNCH,
            "python3",
            "ncclGroupStart",
            "ncclGroupEnd",
            "ncclCommInitRankConfig",
        ]
        strings += [f"nccl{api}" for api in _API.values()]
        for label in COMPUTE_KERNELS.values():
            for name in (label, label[:-3] + "_nn", label[:-3] + "_nt"):
                strings += [name, short_kernel_name(name)]
        for op in ("all_reduce", "all_gather", "reduce_scatter", "send"):
            for dt in DTYPES:
                short, dem = nccl_kernel(op, dt, sim.opts.nccl)
                strings += [short, dem]
        self.ids: dict[str, int] = {}
        for s in strings:
            self.ids.setdefault(s, len(self.ids))
        self._dbs: dict[int, _Db] = {}

    def open_lane(self, ranks: list[int]) -> None:
        """Create the exports of ``ranks`` (schema, metadata, NCCL domain, payload schemas)."""
        self._dbs = {}
        for r in ranks:
            path = self.names.nsys(r)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.unlink(missing_ok=True)
            con = sqlite3.connect(path)
            con.execute("PRAGMA journal_mode=OFF")
            con.execute("PRAGMA synchronous=OFF")
            con.execute("PRAGMA temp_store=MEMORY")
            con.executescript(_DDL)
            self._static_rows(con, r, path)
            self._dbs[r] = _Db(r, con, path)

    def _gtid(self, rank: int, tid: int | None = None) -> int:
        pid = self.cluster.ranks[rank].pid
        return (pid << 24) | (tid if tid is not None else pid)

    def _static_rows(self, con: sqlite3.Connection, r: int, path: Path) -> None:
        info = self.cluster.ranks[r]
        session = self.opts.start_epoch_ns + self.cluster.skew_ns(r) - CAPTURE_LEAD_NS
        con.executemany(
            "INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in self.ids.items()]
        )
        report = path.with_suffix(".nsys-rep").name
        meta = [
            ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
            ("EXPORT_PRODUCT_VERSION", self.opts.nsys_version),
            ("EXPORT_PRODUCT_DATE", ".".join(self.opts.nsys_version.split(".")[:2])),
            ("EXPORT_SCHEMA_VERSION", "3.16.1"),
            ("EXPORT_SCHEMA_VERSION_MAJOR", "3"),
            ("EXPORT_SCHEMA_VERSION_MINOR", "16"),
            ("EXPORT_SCHEMA_VERSION_MICRO", "1"),
            ("EXPORT_PLATFORM", "linux-desktop"),
            ("EXPORT_ARCH", "x64"),
            ("EXPORT_HOST", info.host),
            ("EXPORT_PARAM_INPUT_FILE", report),
            ("EXPORT_PARAM_OUTPUT_FILE", path.name),
            ("EXPORT_PARAM_LAZY", "true"),
            ("EXPORT_PARAM_TIME_NORMALIZE", "false"),
            ("EXPORT_PARAM_TIME_SHIFT", "0"),
            ("EXPORT_CONFIG_TIME_SHIFT", "0"),
            ("COMMSCOPE_SYNTHETIC", "true"),
        ]
        con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", meta)
        from datetime import UTC, datetime

        utc = datetime.fromtimestamp(session // 1_000_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        con.execute(
            "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, ?, ?)", (session, utc, utc)
        )
        vm = 1 << 48
        con.executemany(
            "INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (?, ?, ?, ?, ?)",
            [
                (vm, "Local (CLI)", "CpuCores", 1, "64"),
                (vm, "Local (CLI)", "Hostname", 10, info.host),
            ],
        )
        con.execute(
            "INSERT INTO TARGET_INFO_GPU VALUES (?, ?, ?, ?, 1, 6291456, 25438126080, 936000000000, 1695000000, 82, 0, ?, 0, 'GA102', ?, 8, 6)",
            (
                1 << 48,
                info.cuda_dev,
                "NVIDIA GPU (synthetic)",
                f"0000:{info.bus_id >> 12:02x}:00.0",
                f"00000000-0000-0000-0000-{r:012x}",
                info.cuda_dev,
            ),
        )
        gpid = info.pid << 24
        con.execute("INSERT INTO PROCESSES VALUES (?, ?, ?)", (gpid, info.pid, "python3"))
        con.execute(
            "INSERT INTO ThreadNames VALUES (?, ?, ?)", (self.ids["python3"], 20, self._gtid(r))
        )
        con.executemany("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?, ?, ?)", _EVENT_TYPES)
        con.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (?, NULL, 75, 'NCCL', ?, ?)",
            (1_000_000, self._gtid(r), NCCL_DOMAIN_ID),
        )
        if self.minor >= 16:
            for api, entries in _schemas(self.minor).items():
                sid = SCHEMA_STATIC_START + _SID[api]
                con.execute(
                    "INSERT INTO NVTX_PAYLOAD_SCHEMAS VALUES (?, ?, ?, 1, 0, ?, ?, 8)",
                    (NCCL_DOMAIN_ID, sid, f"NCCL {api}", len(entries), _payload_size(entries)),
                )
                con.executemany(
                    "INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES (?, ?, ?, 0, ?, ?, NULL, NULL, ?)",
                    [
                        (NCCL_DOMAIN_ID, sid, i, typ, name, off)
                        for i, (name, typ, off) in enumerate(entries)
                    ],
                )
        if self.minor >= 25:
            rows = []
            for i, g in enumerate(self.cluster.rank_groups(r)):
                t = CAPTURE_LEAD_NS - 500_000_000 + i * 1_000_000
                blob = HEADER.pack(
                    NCCL_DOMAIN_ID,
                    0,
                    SCHEMA_STATIC_START + _SID["CommInitRank"],
                    0,
                    24,
                    HEADER.size + 24,
                )
                body = struct.pack("<Qiii4x", g.comm_hash, g.nranks, g.comm_rank(r), info.cuda_dev)
                rows.append(
                    (
                        t,
                        t + 300_000,
                        None,
                        self.ids["ncclCommInitRankConfig"],
                        NCCL_DOMAIN_ID,
                        blob + body,
                    )
                )
            con.executemany("INSERT INTO stage_nvtx VALUES (?, ?, ?, ?, ?, ?)", rows)

    def close_lane(self) -> list[Path]:
        """Move the staged rows into the export tables and close every file."""
        paths = []
        for r, db in self._dbs.items():
            con = db.con
            gpid = self.cluster.ranks[r].pid << 24
            gtid = self._gtid(r)
            dev = self.cluster.ranks[r].cuda_dev
            compute = f"streamId = {COMPUTE_STREAM}"
            con.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT start, end, ?, 1, NULL, streamId, corr, ?, "
                "dname, sname, dname, 0, 0, "
                f"CASE WHEN {compute} THEN 128 ELSE 96 END, CASE WHEN {compute} THEN 160 ELSE 4 END, 1, 1, "
                f"CASE WHEN {compute} THEN 256 ELSE 640 END, 1, 1, CASE WHEN {compute} THEN 98304 ELSE 0 END, "
                f"0, 0, 0, corr, CASE WHEN {compute} THEN 98304 ELSE 0 END, NULL, 0 FROM stage_kernel ORDER BY start",
                (dev, gpid),
            )
            con.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT "
                f"CASE WHEN {compute} THEN start - 30000 ELSE start - 12000 END, "
                f"CASE WHEN {compute} THEN start - 26000 ELSE start - 8000 END, 0, ?, corr, ?, 0, NULL "
                "FROM stage_kernel ORDER BY start",
                (gtid, self.ids[RUNTIME_LAUNCH]),
            )
            con.execute(
                "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, endGlobalTid, textId, domainId, binaryData) "
                "SELECT start, end, 59, text, ?, ?, textId, domainId, binaryData FROM stage_nvtx ORDER BY start",
                (gtid, gtid),
            )
            con.commit()
            con.close()
            paths.append(db.path)
        self._dbs = {}
        return paths

    # -- events ------------------------------------------------------------------------------

    def write_lane(self, iteration: int, events: pl.DataFrame) -> None:
        """Stage one iteration's kernels, launches and NVTX ranges of every open export."""
        if not self.opts.profiled(iteration) or not self._dbs:
            return
        ev = events.filter(pl.col("rank").is_in(list(self._dbs)))
        off = pl.DataFrame(
            {
                "rank": list(self._dbs),
                "_c0": [db.corr for db in self._dbs.values()],
            },
            schema={"rank": pl.Int32, "_c0": pl.Int64},
        )
        ev = ev.join(off, on="rank").with_columns(
            (pl.int_range(pl.len()).over("rank", order_by="seq") + pl.col("_c0")).alias("_corr"),
            (pl.col("t_post") + CAPTURE_LEAD_NS).alias("_p"),
            (pl.col("t_start") + CAPTURE_LEAD_NS).alias("_s"),
            (pl.col("t_end") + CAPTURE_LEAD_NS).alias("_e"),
        )
        kern, nvtx = self._frames(ev, iteration)
        for key, part in kern.partition_by("rank", as_dict=True).items():
            self._dbs[int(key[0])].con.executemany(
                "INSERT INTO stage_kernel VALUES (?, ?, ?, ?, ?, ?)", part.drop("rank").iter_rows()
            )
        for key, part in nvtx.partition_by("rank", as_dict=True).items():
            self._dbs[int(key[0])].con.executemany(
                "INSERT INTO stage_nvtx VALUES (?, ?, ?, ?, ?, ?)", part.drop("rank").iter_rows()
            )
        for r, n in ev.group_by("rank").len().iter_rows():
            self._dbs[r].corr += int(n) + 1

    def _frames(self, ev: pl.DataFrame, iteration: int) -> tuple[pl.DataFrame, pl.DataFrame]:
        ids = self.ids
        comp = ev.filter(pl.col("kind") == "compute")
        labels = comp["name"].unique().to_list()
        dname = {lbl: ids[compute_kernel(lbl)] for lbl in labels}
        sname = {lbl: ids[short_kernel_name(compute_kernel(lbl))] for lbl in labels}
        k_comp = comp.select(
            "rank",
            pl.col("_s").alias("start"),
            pl.col("_e").alias("end"),
            pl.lit(COMPUTE_STREAM, dtype=pl.Int64).alias("streamId"),
            pl.col("_corr").alias("corr"),
            pl.col("name").replace_strict(dname, return_dtype=pl.Int64).alias("dname"),
            pl.col("name").replace_strict(sname, return_dtype=pl.Int64).alias("sname"),
        )
        comm = ev.filter(pl.col("kind") == "comm")
        streams = {}
        hashes = {}
        for r in self._dbs:
            for key, g in self.cluster.by_rank[r].items():
                streams[(r, key)] = comm_stream(g)
                hashes[(r, key)] = g.comm_hash
        sizes = {(r, k): g.nranks for r in self._dbs for k, g in self.cluster.by_rank[r].items()}
        gframe = pl.DataFrame(
            [(r, k, s, hashes[(r, k)], sizes[(r, k)]) for (r, k), s in streams.items()],
            schema={
                "rank": pl.Int32,
                "group": pl.Utf8,
                "_stream": pl.Int64,
                "_hash": pl.UInt64,
                "_n": pl.Int64,
            },
            orient="row",
        )
        comm = comm.join(gframe, on=["rank", "group"], how="left")
        kn = {}
        for op in ("all_reduce", "all_gather", "reduce_scatter", "send", "recv", "all_to_all"):
            for dt in DTYPES:
                short, dem = nccl_kernel(op, dt, self.opts.nccl)
                kn[f"{op}|{dt}"] = (ids[short], ids[dem])
        key = pl.concat_str([pl.col("op"), pl.lit("|"), pl.col("dtype")])
        k_comm = comm.select(
            "rank",
            pl.col("_p").alias("start"),
            pl.col("_e").alias("end"),
            pl.col("_stream").alias("streamId"),
            pl.col("_corr").alias("corr"),
            key.replace_strict({k: v[1] for k, v in kn.items()}, return_dtype=pl.Int64).alias(
                "dname"
            ),
            key.replace_strict({k: v[0] for k, v in kn.items()}, return_dtype=pl.Int64).alias(
                "sname"
            ),
        )
        nvtx = self._nccl_ranges(comm)
        steps = []
        for r in self._dbs:
            start, end = self.sim.iteration_bounds(iteration, r)
            steps.append(
                (
                    r,
                    start + CAPTURE_LEAD_NS - 40_000,
                    end + CAPTURE_LEAD_NS - 40_000,
                    f"iteration {iteration}",
                    None,
                    0,
                    None,
                )
            )
        step_df = pl.DataFrame(
            steps,
            schema={
                "rank": pl.Int32,
                "start": pl.Int64,
                "end": pl.Int64,
                "text": pl.Utf8,
                "textId": pl.Int64,
                "domainId": pl.Int64,
                "binaryData": pl.Binary,
            },
            orient="row",
        )
        return (
            pl.concat([k_comp, k_comm]),
            pl.concat([step_df, nvtx], how="vertical_relaxed"),
        )

    def _nccl_ranges(self, comm: pl.DataFrame) -> pl.DataFrame:
        """NCCL API ranges (with payloads); an all-to-all is a group of Send/Recv ranges."""
        ids = self.ids
        schema = {
            "rank": pl.Int32,
            "start": pl.Int64,
            "end": pl.Int64,
            "text": pl.Utf8,
            "textId": pl.Int64,
            "domainId": pl.Int64,
            "binaryData": pl.Binary,
        }
        if comm.is_empty():
            return pl.DataFrame(schema=schema)
        minor = self.minor
        rows_key = []
        plain = comm.filter(pl.col("op") != "all_to_all")
        peer_cr = pl.when(pl.col("peer") < pl.col("rank")).then(0).otherwise(1)
        plain = plain.with_columns(
            pl.col("op").replace_strict(_API, return_dtype=pl.Utf8).alias("_api"),
            pl.when(pl.col("op").is_in(["send", "recv"]))
            .then(peer_cr)
            .otherwise(0)
            .alias("_extra"),
            pl.when(pl.col("op") == "reduce_scatter")
            .then(pl.col("msg_bytes") // pl.col("_n"))
            .otherwise(pl.col("msg_bytes"))
            .alias("_bytes"),
        )
        uniq = plain.select("_api", "_hash", "_bytes", "_extra").unique()
        blobs = [
            pack_payload(minor, api, int(h), int(b), int(x)) if minor >= 16 else None
            for api, h, b, x in uniq.iter_rows()
        ]
        uniq = uniq.with_columns(pl.Series("binaryData", blobs, dtype=pl.Binary))
        plain = plain.join(uniq, on=["_api", "_hash", "_bytes", "_extra"], how="left")
        api_ids = {api: ids[f"nccl{api}"] for api in _API.values()}
        out = plain.select(
            "rank",
            (pl.col("_p") - 20_000).alias("start"),
            (pl.col("_p") - 5_000).alias("end"),
            pl.lit(None, dtype=pl.Utf8).alias("text"),
            pl.col("_api").replace_strict(api_ids, return_dtype=pl.Int64).alias("textId"),
            pl.lit(NCCL_DOMAIN_ID, dtype=pl.Int64).alias("domainId"),
            "binaryData",
        )
        parts = [out]
        a2a = comm.filter(pl.col("op") == "all_to_all")
        if a2a.height:
            for r, p, h, splits, rsplits in a2a.select(
                "rank", "_p", "_hash", "splits", "rsplits"
            ).iter_rows():
                t = p - 20_000 - 2_000 * (2 * len(splits) + 2)
                rows_key.append(
                    (r, t, t + 1_000, None, ids["ncclGroupStart"], NCCL_DOMAIN_ID, None)
                )
                for j, (sb, rb) in enumerate(zip(splits, rsplits, strict=True)):
                    for api, nbytes in (("Send", sb), ("Recv", rb)):
                        t += 2_000
                        blob = (
                            pack_payload(minor, api, int(h), int(nbytes), j)
                            if minor >= 16
                            else None
                        )
                        rows_key.append(
                            (r, t, t + 1_000, None, ids[f"nccl{api}"], NCCL_DOMAIN_ID, blob)
                        )
                rows_key.append(
                    (r, p - 20_000, p - 5_000, None, ids["ncclGroupEnd"], NCCL_DOMAIN_ID, None)
                )
            parts.append(pl.DataFrame(rows_key, schema=schema, orient="row"))
        return pl.concat(parts, how="vertical_relaxed")
