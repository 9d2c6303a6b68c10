"""The canonical tables of commscope, defined once as Arrow schemas.

Every parser's output goes through :func:`conform`, the only road to disk, and every SQL file
reads these tables. Units are part of column names (``_ns``, ``_bytes``, ``_gbps``); each field
carries a ``description`` (and, where it helps, ``unit`` and ``aliases``) in its Arrow metadata;
each table carries ``schema_version`` and ``grain``.

``SCHEMA_VERSION`` is semantic: a minor bump adds columns (old stores stay readable, missing
columns read as null), a major bump breaks.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
import pyarrow as pa

SCHEMA_VERSION = "1.9.0"


@dataclass(frozen=True)
class Column:
    """One documented column of a canonical table."""

    name: str
    type: pa.DataType
    description: str
    required: bool = False
    aliases: str = ""


@dataclass(frozen=True)
class Table:
    """One canonical table: its grain and its documented columns, in order."""

    name: str
    grain: str
    description: str
    columns: tuple[Column, ...]

    @property
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema with field- and table-level metadata."""
        fields = [
            pa.field(
                c.name,
                c.type,
                nullable=not c.required,
                metadata={
                    "description": c.description,
                    "unit": _unit_of(c.name),
                    "aliases": c.aliases,
                },
            )
            for c in self.columns
        ]
        return pa.schema(
            fields,
            metadata={
                "table": self.name,
                "schema_version": SCHEMA_VERSION,
                "grain": self.grain,
                "description": self.description,
            },
        )

    @property
    def column_names(self) -> list[str]:
        """Column names in canonical order."""
        return [c.name for c in self.columns]


def _unit_of(name: str) -> str:
    for suffix, unit in (
        ("_ns", "nanoseconds"),
        ("_bytes", "bytes"),
        ("_gbps", "Gbit/s"),
        ("_ms", "milliseconds"),
    ):
        if name.endswith(suffix):
            return unit
    return ""


STR = pa.string()
I32 = pa.int32()
I64 = pa.int64()
F64 = pa.float64()
TS = pa.timestamp("us", tz="UTC")

_RUN = Column("run_id", STR, "Training run identifier (given at ingest).", required=True)
_SRC_FILE = Column("source_file", STR, "Path of the ingested file the row came from.")
_SRC_LINE = Column(
    "source_line", I64, "1-based line number (text logs) or event index (timelines) in the file."
)
_SRC_FMT = Column("source_format", STR, "Parser that produced the row (registry name).")

COMM_OPS = Table(
    name="comm_ops",
    grain="one row per communication call seen on one rank",
    description="Communication calls (collectives, point-to-point, barriers) as logged.",
    columns=(
        _RUN,
        Column("rank", I32, "Global rank that issued the call; null when the log does not say."),
        Column("host", STR, "Host name as logged."),
        Column("pid", I64, "Operating-system process id."),
        Column("tid", I64, "Operating-system thread id, when logged."),
        _SRC_FMT,
        _SRC_FILE,
        _SRC_LINE,
        Column(
            "op",
            STR,
            "Normalised operation: all_reduce, all_gather, reduce_scatter, broadcast, reduce, "
            "all_to_all, send, recv, barrier, gather, scatter, other.",
            required=True,
        ),
        Column("raw_op", STR, "Operation name exactly as the source wrote it."),
        Column(
            "comm_id",
            STR,
            "Communicator identity as logged (NCCL comm pointer, process-group name; NCCL "
            "Inspector: its header id, the commId cut to 14 hex digits).",
        ),
        Column("group_size", I32, "Number of ranks in the communicator (nranks)."),
        Column("group_rank", I32, "Rank of the caller inside its communicator."),
        Column("peer_rank", I32, "Peer (send/recv) or root (broadcast/reduce) rank, as logged."),
        Column("count", I64, "Element count as logged (NCCL semantics per op)."),
        Column("dtype", STR, "Element type name (float16, float32, bfloat16, int8, ...)."),
        Column(
            "msg_bytes",
            I64,
            "Message size in bytes, NCCL's buffer meaning for every source (issue 16): "
            "all_reduce, broadcast, reduce, send/recv: the buffer; all_gather: the per-rank "
            "send buffer; reduce_scatter: the per-rank receive buffer (the shard); all_to_all: "
            "the whole per-rank send buffer. NCCL count x element size; DeepSpeed size with "
            "its 1024-based units undone (its reduce_scatter logs the whole input: the marts "
            "divide by n). algbw bytes and busbw: sql/macros/comm_bus_factor.sql.",
        ),
        Column(
            "seq",
            I64,
            "Per-communicator sequence number as logged (NCCL opCount, PyTorch Seq).",
        ),
        Column("ts_ns", I64, "Start time, ns on the rank's source timeline (epoch ns if known)."),
        Column("dur_ns", I64, "Duration in ns; null when the source logs no duration (NCCL)."),
        Column("algbw_gbps", F64, "Algorithm bandwidth as logged by the source, Gbit/s."),
        Column("busbw_gbps", F64, "Bus bandwidth as logged by the source, Gbit/s."),
        Column(
            "latency_logged_ms",
            F64,
            "Latency exactly as logged (DeepSpeed 'time (ms)'; a running sum per op name "
            "from DeepSpeed 0.18.3, which dur_ns undoes).",
        ),
        Column("algorithm", STR, "NCCL algorithm (RING, TREE, NVLS, ...) when the source says."),
        Column("protocol", STR, "NCCL protocol (LL, LL128, SIMPLE) when the source says."),
        Column("iteration", I32, "Training iteration (step) when the source says."),
        Column("redop", STR, "Reduction operation (sum, prod, max, min, avg)."),
        Column("stream", STR, "CUDA stream as logged."),
        Column("cuda_dev", I32, "CUDA device index as logged in the line prefix."),
        Column("caller", STR, "Calling function (DeepSpeed comms logger debug mode)."),
        Column(
            "timing_source",
            STR,
            "Clock of ts_ns/dur_ns (issue 16): kernel (the GPU kernel(s) the call launched, "
            "found by correlation / External id; or timed on the GPU by NCCL's profiler: "
            "Inspector kernel_gpu, the longest kernel channel's globaltimer span, ts_ns null), "
            "profiler_cpu (NCCL Inspector kernel_cpu / collective_cpu: the GPU work as the host "
            "saw it, host times of the profiler's kernel-channel start/stop callbacks, polling "
            "delay included: a CPU clock, never a kernel duration), cpu_range (the CPU op or "
            "nccl:/gloo: range: only where no kernel exists, e.g. gloo or CPU-only runs), logged (the log's own "
            "timing, DeepSpeed comms logger: a line's time is the op's end, so ts_ns = that time "
            "minus the logged latency; a Flight Recorder entry's duration_ms, the CUDA events "
            "around the collective, with ts_ns null: FR records no GPU start, only when a CPU "
            "thread noticed it), none (no duration: NCCL debug lines, Flight Recorder entries "
            "without duration_ms, or a call that launched nothing, which has no comm time and "
            "no bandwidth).",
        ),
        Column(
            "launch_ts_ns",
            I64,
            "CPU time the call was issued (its CPU op or range start), ns on the same clock "
            "as ts_ns; iteration attribution uses it (HTA rule), null when not recorded.",
        ),
        Column(
            "group_source",
            STR,
            "Where group_size/comm_id came from: logged (the record names its group), "
            "pg_config (the trace's distributedInfo.pg_config, or a Flight Recorder dump's "
            "pg_config), inferred_default (a call on "
            "the default group of a trace with world size W gets the W-rank world group), "
            "inferred_shapes (an old trace's all_gather/reduce_scatter sized by its c10d op's "
            "whole/shard shapes: group_size known, which sub-group not), inferred_process "
            "(set by SQL, stg_store__comm_ops: the call names no communicator and an NCCL log "
            "of the run shows exactly one communicator size for the same host:pid), null when "
            "unknown.",
        ),
        Column(
            "kernel_count",
            I32,
            "GPU kernels merged into this call (DeepEP notify + data = one call), when "
            "timing_source = kernel.",
        ),
        Column(
            "call_state",
            STR,
            "Progress of the call when the source recorded it (schema 1.5.0): scheduled "
            "(enqueued, no start seen), started (its start event seen), completed (its end "
            "seen). Flight Recorder entries carry it (state); a dump taken during a hang "
            "holds the calls not yet completed. Null for sources that log a call without a "
            "state (NCCL, DeepSpeed, Kineto, nsys) and in stores written before 1.5.0.",
            aliases="flight_recorder: state",
        ),
        Column(
            "rank_source",
            STR,
            "How ``rank`` is known (schema 1.6.0): logged (the source names it: an NCCL world "
            "communicator's Init line, a trace's distributedInfo, a dump's rank key, ...), "
            "option (given at ingest); in an NCCL log without Init lines whose N processes each "
            "show one N-rank communicator, the largest of the file (the world: comm rank = "
            "global rank; parsers/_nccl_rank_infer.py): inferred_peers (that comm's Send/Recv "
            "roots: a process whose peers are every rank but one is that one; the last process "
            "left gets the last rank), inferred_device (one host, N processes on N distinct "
            "devices 0..N-1 of the line prefix, consistent with the ranks the peers gave: "
            "rank = device, the one-process-per-GPU convention), inferred_process (set by SQL, "
            "stg_store__comm_ops: another source of the run, an NCCL log, names the global "
            "rank of the same host:pid; also replaces an inferred_largest_comm guess), "
            "inferred_largest_comm (schema 1.7.0: NCCL Inspector, whose records give only the "
            "communicator rank: the rank on the file's largest communicator, taken as the "
            "world; wrong when the file holds only split communicators; also an nsys export "
            "that gives no rank, from the CommInitRank payloads of NCCL >= 2.25). Null when rank is "
            "null, and in stores written before 1.6.0 (read as logged where rank is set).",
        ),
        Column(
            "split_bytes",
            STR,
            "all_to_all with per-member sizes (schema 1.8.0): the bytes the caller sends to each "
            "member of its group, in group-rank order, comma-separated; they sum to msg_bytes. "
            "Kineto: record_param_comms 'In split size' (rows along dim 0 of the send tensor) x "
            "the row's bytes (In msg nelems / sum of the splits x element size). Null for an "
            "even all_to_all (msg_bytes / n to each member), for sources that log no split, "
            "and in stores written before 1.8.0.",
            aliases="kineto: In split size",
        ),
        Column(
            "recv_split_bytes",
            STR,
            "all_to_all with per-member sizes (schema 1.9.0): the bytes the caller receives from "
            "each member of its group, in group-rank order, comma-separated (the receive side of "
            "split_bytes). Kineto: record_param_comms 'Out split size' (rows along dim 0 of the "
            "receive tensor) x the row's bytes (Out msg nelems / sum of the splits x element "
            "size); nsys: the Recv sizes of a folded group (op_source). Null where split_bytes "
            "is, and in stores written before 1.9.0.",
            aliases="kineto: Out split size",
        ),
        Column(
            "op_source",
            STR,
            "How op is known (schema 1.9.0): null, the record names it (every source); "
            "nvtx_group (nsys: an all_to_all folded from the ncclSend/ncclRecv ranges NCCL "
            "writes between one ncclGroupStart and the ncclGroupEnd closing it on one thread "
            "(globalTid), one Send to and one Recv from every member of one communicator: the "
            "row is the group, source_line its ncclGroupEnd, msg_bytes the Send bytes, "
            "split_bytes/recv_split_bytes per member). Null in stores written before 1.9.0.",
        ),
    ),
)

COMM_SUMMARIES = Table(
    name="comm_summaries",
    grain="one row per (summary table, record name, message size) of DeepSpeed log_summary()",
    description="Rows of DeepSpeed's comms-logger summary table, as printed.",
    columns=(
        _RUN,
        _SRC_FILE,
        _SRC_LINE,
        Column("rank", I32, "Rank that printed the table (global rank 0 in DeepSpeed)."),
        Column("summary_index", I32, "0-based index of the summary table within the file."),
        Column("table_kind", STR, "'latency' (main table) or 'straggler' (show_straggler table)."),
        Column("op", STR, "Normalised operation (see comm_ops.op).", required=True),
        Column("raw_op", STR, "Record name as printed (log_name)."),
        Column("caller", STR, "Caller function in debug mode, else null."),
        Column("msg_bytes", I64, "Message size in bytes (1024-based units undone)."),
        Column("msg_size_text", STR, "Message size exactly as printed."),
        Column("count", I64, "Number of calls of this size."),
        Column("total_latency_ms", F64, "Total latency (ms); straggler table: total comm lat."),
        Column("avg_latency_ms", F64, "10% trimmed-mean latency (ms); straggler: avg comm lat."),
        Column("algbw_gbps", F64, "tput_avg (Gbps) as printed; null in the straggler table."),
        Column("busbw_gbps", F64, "busbw_avg (Gbps) as printed; null in the straggler table."),
        Column("total_straggler_ms", F64, "Straggler table: total straggler time (ms)."),
        Column("avg_straggler_ms", F64, "Straggler table: average straggler time (ms)."),
    ),
)

COMMUNICATORS = Table(
    name="communicators",
    grain="one row per (communicator, rank) initialised",
    description="NCCL communicators from Init lines (and process groups from traces).",
    columns=(
        _RUN,
        Column("comm_id", STR, "Communicator pointer (per process) as logged.", required=True),
        Column("rank", I32, "Rank inside this communicator."),
        Column("nranks", I32, "Number of ranks in the communicator."),
        Column("global_rank", I32, "Global (world) rank of the process, when known."),
        Column("host", STR, "Host name."),
        Column("pid", I64, "Process id."),
        Column("cuda_dev", I32, "CUDA device of the communicator."),
        Column("nvml_dev", I32, "NVML device index (NCCL 2.19+)."),
        Column("bus_id", STR, "PCI bus id, lowercase hex."),
        Column(
            "comm_hash",
            STR,
            "commId / commHash when logged (same on every member). NCCL Inspector prints it "
            "'0x%lx' into 16 characters: the first 16 characters of the Init lines' commId.",
        ),
        Column(
            "parent_comm_id",
            STR,
            "Parent communicator of a split: its pointer as logged (per process).",
        ),
        Column(
            "parent_comm_hash",
            STR,
            "Identity of the split's parent, the same on every member of the parent: its commId "
            "(resolved from the parent's Init line in the same process), or for a parent that is "
            "itself a split child 'split:<its parent identity>/<its parent nranks>:<its color>'.",
        ),
        Column("parent_nranks", I32, "nranks of the split's parent communicator."),
        Column(
            "split_color",
            I64,
            "color passed to ncclCommSplit: ranks of one parent with the same color form one "
            "child communicator.",
        ),
        Column("split_key", I64, "key passed to ncclCommSplit: orders the ranks inside the child."),
        Column("nccl_version", STR, "NCCL version of the process, when logged."),
        _SRC_FILE,
        _SRC_LINE,
        Column(
            "source_format",
            STR,
            "Parser that produced the row (registry name; schema 1.7.0, null in older stores).",
        ),
        Column(
            "group_desc",
            STR,
            "Process-group description (schema 1.7.0): what the framework called the group, "
            "e.g. default_pg, TP, DP, EXPERT_MODEL_PARALLEL_GROUP (a Flight Recorder dump's "
            "pg_config desc, a Kineto trace's distributedInfo.pg_config pg_desc); null for NCCL "
            "communicators and in stores written before 1.7.0.",
            aliases="flight_recorder: pg_config.desc; kineto: pg_desc",
        ),
        Column(
            "group_ranks",
            STR,
            "Global ranks of the group's members, ascending, comma-separated (schema 1.7.0; "
            "pg_config ranks of a Flight Recorder dump or Kineto trace); null when not listed.",
            aliases="pg_config.ranks",
        ),
        Column(
            "last_enqueued_seq",
            I64,
            "Flight Recorder pg_status (schema 1.7.0): the group's last collective sequence "
            "number (collective_seq_id) this rank enqueued when it dumped; 0 = none yet. Null "
            "when the dump has no pg_status for the group, and for other sources.",
            aliases="flight_recorder: pg_status.last_enqueued_collective",
        ),
        Column(
            "last_started_seq",
            I64,
            "Flight Recorder pg_status: the last collective seen starting on the GPU (recorded "
            "only with timing enabled; -1 otherwise, as dumped).",
            aliases="flight_recorder: pg_status.last_started_collective",
        ),
        Column(
            "last_completed_seq",
            I64,
            "Flight Recorder pg_status: the last collective seen completed on this rank.",
            aliases="flight_recorder: pg_status.last_completed_collective",
        ),
        Column(
            "seq_status_source",
            STR,
            "How the pg_status counters (keyed by the rank-local pg_id) were tied to this "
            "group: entry (an entry of the dump carries both pg_id and the group name) or "
            "order (groups numbered in creation order; parsers/flight_recorder/_dump.py "
            "pg_id_names); null when there are no counters.",
        ),
    ),
)

TOPOLOGY = Table(
    name="topology",
    grain="one row per (communicator, rank, kind, channel, peer, direction)",
    description="Logical topology: ring and tree neighbours and the transport of each connection.",
    columns=(
        _RUN,
        Column("comm_id", STR, "Communicator pointer as logged (null if not attributable)."),
        Column("rank", I32, "Rank inside the communicator whose edge this is."),
        Column("kind", STR, "ring, ring_order, tree, nvls, collnet, p2p.", required=True),
        Column("channel", I32, "Channel index."),
        Column("peer_rank", I32, "Neighbour rank (ring next/prev, tree up/down, p2p peer)."),
        Column("direction", STR, "next, prev, up, down, send, recv, position."),
        Column("transport", STR, "P2P/IPC, P2P/CUMEM, SHM, NET/IB, NET/Socket, NET/OFI, ..."),
        Column("transport_detail", STR, "The connection description as logged after 'via'."),
        Column("host", STR, "Host name."),
        Column("pid", I64, "Process id."),
        _SRC_FILE,
        _SRC_LINE,
    ),
)

KERNELS = Table(
    name="kernels",
    grain="one row per GPU kernel, memcpy or memset interval on one rank",
    description="GPU activity from timelines (Kineto, Nsight Systems).",
    columns=(
        _RUN,
        Column("rank", I32, "Global rank."),
        Column("pid", I64, "Process id (one report may hold several processes)."),
        Column("device", I32, "GPU device index."),
        Column("stream", I64, "CUDA stream id."),
        Column("name", STR, "Kernel name (short form)."),
        Column(
            "category",
            STR,
            "compute | comm | memcpy | memset | other.",
            required=True,
        ),
        Column("comm_op", STR, "For comm kernels, the normalised op the name tells, else null."),
        Column("ts_ns", I64, "Start, ns on the rank's timeline.", required=True),
        Column("dur_ns", I64, "Duration in ns.", required=True),
        Column("correlation", I64, "Launch correlation id."),
        Column("msg_bytes", I64, "Bytes moved (memcpy/memset; comm kernels when args say)."),
        Column(
            "launch_ts_ns",
            I64,
            "CPU start of the runtime call that launched it (cudaLaunchKernel, "
            "hipExtModuleLaunchKernel, cudaMemcpyAsync, ...), matched by correlation id; null "
            "when the trace has no launch event for it.",
        ),
        Column(
            "iteration",
            I32,
            "Step (ProfilerStep#N / NVTX step) whose CPU window contains the launch (HTA "
            "rule step.ts <= launch.ts < step.end), so a GPU running behind the CPU keeps its "
            "work in the step that issued it; null when not launched inside any step.",
        ),
        _SRC_FMT,
        _SRC_FILE,
        _SRC_LINE,
    ),
)

MARKERS = Table(
    name="markers",
    grain="one row per iteration marker or user/NVTX range on one rank",
    description="Iteration markers (ProfilerStep#N) and user annotations / NVTX ranges.",
    columns=(
        _RUN,
        Column("rank", I32, "Global rank."),
        Column("name", STR, "Marker or range name.", required=True),
        Column("kind", STR, "iteration | annotation | nvtx | nccl_nvtx.", required=True),
        Column("ts_ns", I64, "Start, ns on the rank's timeline."),
        Column("dur_ns", I64, "Duration in ns."),
        Column("iteration", I32, "Iteration number when the marker names one."),
        Column("domain", STR, "NVTX domain or annotation category."),
        Column("pid", I64, "Process id, when known."),
        Column("tid", I64, "Thread id, when known (one process may drive several GPUs)."),
        _SRC_FMT,
        _SRC_FILE,
        _SRC_LINE,
    ),
)

TRACE_META = Table(
    name="trace_meta",
    grain="one row per (ingested timeline file, rank)",
    description="Per-file rank identity and clock anchors, for cross-rank alignment.",
    columns=(
        _RUN,
        Column("rank", I32, "Global rank of the trace."),
        Column("world_size", I32, "World size, when known."),
        Column(
            "rank_source",
            STR,
            "Where rank came from: distributedInfo, mpi_ranks, mpi_thread_name, file_name, "
            "dump_key (a Flight Recorder dump's own rank key), option, inferred_largest_comm "
            "(nsys: the Rank of the process's largest communicator in its NCCL >= 2.25 "
            "CommInitRank payload, taken as the world), unknown.",
        ),
        Column("backend", STR, "Communication backend (nccl, gloo, rccl)."),
        Column("clock_anchor_ns", I64, "Wall-clock epoch ns of ts_ns = 0, when known."),
        Column("aligned", pa.bool_(), "True if the rank's timeline is anchored to wall clock."),
        Column("host", STR, "Host name, when known."),
        Column("pid", I64, "Process id, when known."),
        Column("source_version", STR, "Format/schema version of the source file."),
        _SRC_FMT,
        _SRC_FILE,
    ),
)

INGESTED_FILES = Table(
    name="ingested_files",
    grain="one row per committed ingest of a byte range of a file into a run",
    description="The commit log: a batch is visible only once its row here is written.",
    columns=(
        _RUN,
        Column("batch_id", STR, "Deterministic id of this ingest batch.", required=True),
        Column("path", STR, "Absolute path of the file.", required=True),
        Column(
            "sha256",
            STR,
            "SHA-256 of the file's content [0, byte_end): the content stored so far (the whole "
            "file for full ingests). Since schema 1.3 the decompressed content for compressed "
            "files (before: their compressed bytes). An ingest continues from a batch only if "
            "the new file's prefix has this hash.",
        ),
        Column("bytes", I64, "Size of the file (on disk) when ingested."),
        Column(
            "byte_start",
            I64,
            "First byte offset ingested (0 unless incremental); decompressed offsets since 1.3.",
        ),
        Column("byte_end", I64, "Offset after the last byte ingested."),
        Column(
            "first_line_no",
            I64,
            "1-based number of the first line (or event) of the range (1 unless incremental; "
            "null in stores written before schema 1.1).",
        ),
        Column("format", STR, "Parser used."),
        Column("lines_total", I64, "Lines (or events) read."),
        Column("lines_parsed", I64, "Lines that produced rows."),
        Column("lines_ignored", I64, "Known-irrelevant lines (other output, other subsystems)."),
        Column("lines_rejected", I64, "Recognised communication output that was malformed."),
        Column("rows_written", I64, "Rows written into all tables by this batch."),
        Column("parser_version", STR, "Version of the parser."),
        Column("schema_version", STR, "Canonical schema version written."),
        Column("warnings", STR, "Parser warnings, newline-separated."),
        Column("ingested_at", TS, "When the batch was committed (UTC)."),
        Column(
            "parser_state",
            STR,
            "JSON state the parser left at byte_end (context an incremental ingest of the "
            "rest of the file resumes from); null for parsers that keep none.",
        ),
        Column(
            "head_bytes",
            I64,
            "Length of the content head fingerprinted in head_sha256: min(4096, byte_end) "
            "(null before schema 1.3).",
        ),
        Column(
            "head_sha256",
            STR,
            "SHA-256 of the first head_bytes bytes of the (decompressed) content: finds the "
            "batches a renamed, rotated or compressed copy of a log continues (null before 1.3).",
        ),
        Column(
            "resume_end",
            I64,
            "Offset the next ingest of this content continues from: byte_end, or the end of "
            "the last complete line when the range ended in a cut line (that line is read "
            "again once complete; its reject here is its only other trace). Null before 1.3.",
        ),
        Column(
            "prev_batch_id",
            STR,
            "The batch this one continues (null for a batch read from byte 0).",
        ),
    ),
)

REJECTS = Table(
    name="rejects",
    grain="one row per rejected input line",
    description="Lines recognised as communication output but malformed, kept with the reason.",
    columns=(
        _RUN,
        Column("path", STR, "File the line came from.", required=True),
        Column("line_no", I64, "1-based line number."),
        Column("raw", STR, "The line as read (truncated to 4096 characters)."),
        Column("reason", STR, "Why it was rejected.", required=True),
    ),
)

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        COMM_OPS,
        COMM_SUMMARIES,
        COMMUNICATORS,
        TOPOLOGY,
        KERNELS,
        MARKERS,
        TRACE_META,
        INGESTED_FILES,
        REJECTS,
    )
}
"""Every canonical table by name."""

DATA_TABLES: tuple[str, ...] = tuple(n for n in TABLES if n != "ingested_files")
"""Tables a parser may produce (everything but the commit log)."""


class SchemaError(ValueError):
    """A frame does not fit its canonical table."""


_PL_TYPES: dict[pa.DataType, pl.DataType] = {
    STR: pl.Utf8(),
    I32: pl.Int32(),
    I64: pl.Int64(),
    F64: pl.Float64(),
    pa.bool_(): pl.Boolean(),
    TS: pl.Datetime("us", "UTC"),
}


def polars_schema(table: str) -> dict[str, pl.DataType]:
    """The polars dtypes of a canonical table, in column order."""
    return {c.name: _PL_TYPES[c.type] for c in TABLES[table].columns}


def empty_frame(table: str) -> pl.DataFrame:
    """A zero-row frame with the canonical columns and dtypes."""
    return pl.DataFrame(schema=polars_schema(table))


def conform(df: pl.DataFrame, table: str) -> pa.Table:
    """Fit a parser's frame to a canonical table and return it as Arrow.

    Selects and orders the canonical columns, casts them, fills absent optional columns with
    null, and fails loudly on unknown columns or missing/null required ones. This is the only
    road to disk.

    Args:
        df: frame produced by a parser.
        table: canonical table name.

    Returns:
        An Arrow table with the canonical schema and its metadata.

    Raises:
        SchemaError: unknown table, unknown columns, or missing required values.
    """
    if table not in TABLES:
        raise SchemaError(f"unknown table {table!r}")
    spec = TABLES[table]
    unknown = sorted(set(df.columns) - set(spec.column_names))
    if unknown:
        raise SchemaError(f"{table}: unknown columns {unknown}")
    types = polars_schema(table)
    exprs = []
    for col in spec.columns:
        if col.name in df.columns:
            exprs.append(pl.col(col.name).cast(types[col.name], strict=True))
        elif col.required:
            raise SchemaError(f"{table}: required column {col.name!r} missing")
        else:
            exprs.append(pl.lit(None, dtype=types[col.name]).alias(col.name))
    out = df.select(exprs)
    for col in spec.columns:
        if col.required and out.height and out[col.name].null_count():
            raise SchemaError(f"{table}: required column {col.name!r} has nulls")
    return out.to_arrow().cast(spec.arrow_schema)


def describe(table: str | None = None) -> str:
    """Render the documented columns of one table (or all) as plain text."""
    names = [table] if table else list(TABLES)
    parts: list[str] = []
    for name in names:
        if name not in TABLES:
            raise SchemaError(f"unknown table {name!r}; known: {', '.join(TABLES)}")
        spec = TABLES[name]
        parts.append(f"{spec.name}  (schema {SCHEMA_VERSION}; grain: {spec.grain})")
        parts.append(f"  {spec.description}")
        for c in spec.columns:
            req = " NOT NULL" if c.required else ""
            parts.append(f"  {c.name:<20} {c.type!s:<24}{req:<9} {c.description}")
        parts.append("")
    return "\n".join(parts)
