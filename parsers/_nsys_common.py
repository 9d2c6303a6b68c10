"""Helpers shared by the Nsight Systems readers (SQLite export, ``nsys stats`` CSV, recipe Parquet).

Everything here is format-independent: rank resolution (nsys knows no torch rank), the NCCL API
name → canonical op map, the iteration-name pattern, the ``Domain:name`` split of the stats
reports, and the builders of ``trace_meta`` and ``rejects`` frames.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

NCCL_DOMAIN = "NCCL"
"""Name of the NVTX domain NCCL registers (``struct nccl_domain{name="NCCL"}``, NCCL ≥2.9)."""

NCCL_API_OPS: dict[str, str] = {
    "ncclAllReduce": "all_reduce",
    "ncclAllGather": "all_gather",
    "ncclReduceScatter": "reduce_scatter",
    "ncclBroadcast": "broadcast",
    "ncclBcast": "broadcast",
    "ncclReduce": "reduce",
    "ncclSend": "send",
    "ncclRecv": "recv",
    "ncclAlltoAll": "all_to_all",
    "ncclAllToAll": "all_to_all",
    "ncclGather": "gather",
    "ncclScatter": "scatter",
}
"""NCCL API functions (the ``__func__`` NCCL names its NVTX ranges with) that move data, mapped
to ``comm_ops.op``. Everything else in the NCCL domain (``ncclGroupStart``/``ncclGroupEnd``,
which only wrap the real calls, ``ncclCommInitRank*``, ``ncclCommCount``, ...) stays a marker."""

REDOPS: dict[int, str] = {0: "sum", 1: "prod", 2: "max", 3: "min", 4: "avg"}
"""NCCL ``ncclRedOp_t`` values (``nccl.h``) as ``comm_ops.redop`` names."""

STEP_RE = r"(?i)^\s*(?:ProfilerStep\s*#\s*|(?:train(?:ing)?[ _]?)?(?:step|iteration|iter)[\s#:_=-]*)(\d+)\s*$"
"""A range name that *is* an iteration marker (``ProfilerStep#12``, ``step 3``,
``train_step_7``, ``iteration=4``): the whole name must match, so ``XlaModule:...train_step``
(no number) or ``step_size`` are not taken for iterations."""

_DOMAIN_PREFIX_RE = r"^([A-Za-z][A-Za-z0-9_.\-]*):([^:].*)$"

_FILE_RANK_RE = re.compile(
    r"(?<![A-Za-z0-9])(?<!local_)(?<!local-)(?<!node_)(?<!node-)rank[_\-.]?(\d{1,6})(?![0-9])",
    re.IGNORECASE,
)


def decode_global_id(col: str) -> tuple[pl.Expr, pl.Expr]:
    """Split a serialized nsys ``globalTid``/``globalPid`` into (pid, tid) expressions.

    nsys packs ``<HW:8><VM:8><PID:24><TID:24>`` ("Serialized Process and Thread Identifiers"),
    so ``pid = (g >> 24) & 0xFFFFFF`` and ``tid = g & 0xFFFFFF``.

    Args:
        col: name of the Int64 column holding the global id.
    """
    g = pl.col(col).cast(pl.Int64).reinterpret(signed=False)  # SQLite stores the u64 signed
    return ((g // (1 << 24)) % (1 << 24)).cast(pl.Int64), (g % (1 << 24)).cast(pl.Int64)


def pid_of(global_id: int) -> int:
    """The process id packed in one serialized nsys global id."""
    return (int(global_id) >> 24) & 0xFFFFFF


def rank_from_file_name(path: Path) -> int | None:
    """Read a rank from a file name, conservatively.

    Only an explicit ``rank`` word followed by digits counts (``rank_3``, ``rank-3``, ``rank3``,
    ``profile.rank12.sqlite``); ``local_rank3`` and ``node_rank1`` do not (neither is the global
    rank).
    Bare trailing digits are *not* a rank: nsys names its outputs ``report1``, ``report2``, ...
    by default, and ``..._perlmutter0`` may be a node index. Directory names are not read.

    Args:
        path: the input file.

    Returns:
        The rank, or None when the name does not say it unambiguously (no match, or two
        matches that disagree).
    """
    found = {int(m.group(1)) for m in _FILE_RANK_RE.finditer(path.name)}
    return found.pop() if len(found) == 1 else None


@dataclass
class RankResolution:
    """The rank of a trace file and where it came from.

    Attributes:
        rank: the rank of every row whose process has no rank of its own (None if unknown).
        source: ``mpi_ranks``, ``mpi_thread_name``, ``file_name``, ``option`` or ``unknown``.
        pid_ranks: per-process ranks when the trace names them (MPI), else empty.
        warnings: what the caller should report.
    """

    rank: int | None
    source: str
    pid_ranks: dict[int, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def expr(self, pid_col: str = "pid") -> pl.Expr:
        """The ``rank`` column for a frame with a ``pid`` column (Int32)."""
        if not self.pid_ranks:
            return pl.lit(self.rank, dtype=pl.Int32).alias("rank")
        return (
            pl.col(pid_col)
            .replace_strict(self.pid_ranks, default=self.rank, return_dtype=pl.Int32)
            .alias("rank")
        )


RANK_MAX = 2**31 - 1
"""Largest rank (``rank`` columns are Int32); a larger or negative one is no rank."""


def _rank_ok(rank: object) -> bool:
    return type(rank) is int and 0 <= rank <= RANK_MAX


def resolve_rank(
    path: Path,
    option: int | None,
    pid_ranks: dict[int, int] | None = None,
    pid_source: str = "mpi_ranks",
) -> RankResolution:
    """Decide the rank of a trace: MPI (per process) > file name > ``rank`` option > unknown.

    Args:
        path: the input file (its name may carry ``rank_N``).
        option: the ``rank`` argument given to the parser.
        pid_ranks: process id → rank from the trace itself (``MPI_RANKS`` or the
            ``MPI Rank N`` thread names nsys MPI tracing writes).
        pid_source: where ``pid_ranks`` came from.

    Returns:
        The resolution, with a warning when the rank is unknown or sources disagree
        (never a silent 0).
    """
    warnings: list[str] = []
    pid_ranks = dict(pid_ranks or {})
    bad = sorted(r for r in set(pid_ranks.values()) if not _rank_ok(r))
    if bad:  # a corrupt rank costs that process's rank (null), never the file
        warnings.append(
            f"{len(bad)} rank(s) from {pid_source} out of range (0 to {RANK_MAX}), e.g. "
            f"{bad[0]}; those processes' rows carry the fallback rank"
        )
        pid_ranks = {p: r for p, r in pid_ranks.items() if _rank_ok(r)}
    from_name = rank_from_file_name(path)
    if from_name is not None and not _rank_ok(from_name):
        from_name = None
    if option is not None and not _rank_ok(option):
        warnings.append(f"rank option {option} out of range (0 to {RANK_MAX}); ignored")
        option = None
    if pid_ranks:
        ranks = set(pid_ranks.values())
        res = RankResolution(
            next(iter(ranks)) if len(ranks) == 1 else None, pid_source, pid_ranks, warnings
        )
        for other, label in ((from_name, "file name"), (option, "rank option")):
            if other is not None and len(ranks) == 1 and other not in ranks:
                warnings.append(
                    f"rank {sorted(ranks)[0]} from {pid_source} differs from rank {other} "
                    f"given by the {label}; kept {pid_source}"
                )
        return res
    if from_name is not None:
        if option is not None and option != from_name:
            warnings.append(
                f"rank {from_name} from the file name differs from the rank option {option}; "
                "kept the file name"
            )
        return RankResolution(from_name, "file_name", {}, warnings)
    if option is not None:
        return RankResolution(option, "option", {}, warnings)
    warnings.append(
        "rank unknown: no MPI_RANKS table or MPI thread name, no rank_N in the file name and "
        "no rank option; rows carry a null rank"
    )
    return RankResolution(None, "unknown", {}, warnings)


def split_domain(name_col: str = "name") -> tuple[pl.Expr, pl.Expr]:
    """Split ``nsys stats``-style names ``Domain:text`` into (domain, name) expressions.

    The stats reports and recipes print a range of a non-default domain as ``NCCL:ncclAllReduce``
    or ``TSL:XlaModule:#...#`` and one of the default domain bare. A prefix counts as a domain
    only if it looks like an identifier and is followed by a single ``:`` (so C++ ``A::b`` is not
    split). A default-domain name that itself reads ``word:rest`` is split too: the reports do
    not say which it is.
    """
    parts = pl.col(name_col).str.extract_groups(_DOMAIN_PREFIX_RE)
    domain = parts.struct.field("1")
    name = pl.when(domain.is_not_null()).then(parts.struct.field("2")).otherwise(pl.col(name_col))
    return domain, name


def iteration_expr(name_col: str = "name") -> pl.Expr:
    """Iteration number when the whole range name is a step marker (see :data:`STEP_RE`)."""
    return pl.col(name_col).str.extract(STEP_RE, 1).cast(pl.Int32, strict=False).alias("iteration")


def marker_kind_expr(domain_col: str = "domain") -> pl.Expr:
    """``nccl_nvtx`` for ranges of the NCCL domain, ``nvtx`` for the others."""
    return (
        pl.when(pl.col(domain_col) == NCCL_DOMAIN)
        .then(pl.lit("nccl_nvtx"))
        .otherwise(pl.lit("nvtx"))
        .alias("kind")
    )


def api_op_expr(name_col: str = "name") -> pl.Expr:
    """Canonical op of an NCCL API range name (null for non-data-moving API calls)."""
    return pl.col(name_col).replace_strict(NCCL_API_OPS, default=None, return_dtype=pl.Utf8)


def rejects_frame(rows: list[tuple[int, str, str]]) -> pl.DataFrame:
    """A ``rejects`` frame from ``(line_no, raw, reason)`` tuples (raw cut to 4096 chars)."""
    return pl.DataFrame(
        {
            "line_no": [r[0] for r in rows],
            "raw": [r[1][:4096] for r in rows],
            "reason": [r[2] for r in rows],
        },
        schema={"line_no": pl.Int64, "raw": pl.Utf8, "reason": pl.Utf8},
    )


def trace_meta_frame(
    res: RankResolution,
    *,
    anchor_ns: int | None,
    aligned: bool,
    backend: str | None,
    host: str | None,
    pid: int | None,
    source_version: str | None,
) -> pl.DataFrame:
    """The ``trace_meta`` rows of one file: one per rank the file holds.

    A file whose processes carry their own ranks (MPI) gets one row per rank with that
    process's pid; otherwise one row with the file's rank (possibly null). ``aligned`` must be
    True only when the file gives a trustworthy wall-clock anchor of its timeline.
    """
    if res.pid_ranks:
        by_rank: dict[int, list[int]] = {}
        for p, r in res.pid_ranks.items():
            by_rank.setdefault(r, []).append(p)
        rows = [(r, ps[0] if len(ps) == 1 else None) for r, ps in sorted(by_rank.items())]
    else:
        rows = [(res.rank, pid)]
    n = len(rows)
    return pl.DataFrame(
        {
            "rank": [r for r, _ in rows],
            "world_size": [None] * n,
            "rank_source": [res.source] * n,
            "backend": [backend] * n,
            "clock_anchor_ns": [anchor_ns] * n,
            "aligned": [aligned and anchor_ns is not None] * n,
            "host": [host] * n,
            "pid": [p for _, p in rows],
            "source_version": [source_version] * n,
        },
        schema={
            "rank": pl.Int32,
            "world_size": pl.Int32,
            "rank_source": pl.Utf8,
            "backend": pl.Utf8,
            "clock_anchor_ns": pl.Int64,
            "aligned": pl.Boolean,
            "host": pl.Utf8,
            "pid": pl.Int64,
            "source_version": pl.Utf8,
        },
    )
