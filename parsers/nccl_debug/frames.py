"""NCCL debug tables: pass 2 turns each block of lines into ``comm_ops`` (with ranks from the
registry and TUNING pairs), ``rejects`` and line accounting, then ``communicators`` and
``topology`` rows not emitted before (resume fingerprints).

See :mod:`commscope.parsers.nccl_debug` (comm_ops, communicators, line accounting).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from pathlib import Path
from typing import Any, NamedTuple

import polars as pl

from commscope.parsers import _nccl_enums as enums
from commscope.parsers._io import LongLine, Source, iter_line_blocks
from commscope.parsers._nccl_coll_fields import coll_field_exprs, plain_coll_mask, plain_coll_rows
from commscope.parsers._nccl_rank_infer import CollSummary
from commscope.parsers.nccl_debug import communicators, topology
from commscope.parsers.nccl_debug.communicators import REGISTRY_FULL, _init_fits, _Registry
from commscope.parsers.nccl_debug.lines import (
    _BARE_RECORD,
    _COLL,
    _COLL_LIKE,
    _END_RE,
    _INIT_LIKE,
    _INIT_RE,
    _TOPO_LIKE,
    _TUNE,
    LINE_LIMIT,
    MAX_KNOWN_HOSTS,
    _add_hosts,
    _fit_ints,
    _split_block,
    _ts_ns_expr,
)
from commscope.parsers.nccl_debug.topology import (
    _TOPO_BATCH,
    TOPOLOGY_FULL,
    _parse_topology,
    _ring_order_rows,
    _Topo,
)
from commscope.parsers.registry import LineCounts, ParsedChunk

HOLD_BYTES = 256 * 1024 * 1024
"""Bytes of prepared blocks a one-pass parse keeps in memory; past it they go to Arrow IPC
files until the registry is complete (peak memory stays flat with the file's size)."""
_MAX_RAW = 4096
"""Characters of a rejected line kept in ``rejects.raw``."""
_REJECTS = {"line_no": pl.Int64, "raw": pl.Utf8, "reason": pl.Utf8}
_INIT_LIKE_RE = re.compile(_INIT_LIKE)
_UNFIT = "Init/Destroy line: a rank, count or device number is out of range"
_NOFIT = "Init/Destroy line does not fit its pattern (truncated or spliced)"
_OTHER = ("line_no", "raw", "pre", "msg", "host", "pid", "tid")
"""Columns of a topology line that :meth:`_Pass2._other` reads."""
_TOPO_MEMO = 20_000
"""Keys remembered by each topology shortcut (distinct messages parsed, (comm, process,
message) keys turned into rows) before it starts afresh: a few MB at most (a message has at
most ``LINE_LIMIT`` characters)."""
_TOPO_MEMO_ROWS = 50_000
"""Parsed rows the message shortcut holds at most (a Trees line gives up to 4 rows per channel):
the memory it keeps stays bounded whatever the file holds."""


def _coll_summary(source: Source, reg: _Registry, resume: dict[str, Any] | None) -> CollSummary:
    """Per-process comm sizes, devices and Send/Recv roots of the COLL lines (one more pass).

    Run only for a file without Init/Destroy lines (:mod:`commscope.parsers._nccl_rank_infer`); a resumed
    parse starts from the summary of the bytes before (its state), so the ranks it infers are
    those of the whole file.
    """
    summary = CollSummary.from_state((resume or {}).get("coll_summary"))
    hosts = set(reg.known_hosts)
    cols = ("host", "pid", "dev", "raw_op", "comm_id", "group_size", "root")
    for block in iter_line_blocks(source):
        lines = block.series
        if not block.complete and len(lines):  # a cut final line is no record
            lines = lines.head(len(lines) - 1)
        numbers = pl.int_range(
            block.first_line_no, block.first_line_no + len(lines), dtype=pl.Int64, eager=True
        )
        mask = plain_coll_mask(lines)
        if mask.any():
            plain = plain_coll_rows(lines.filter(mask), numbers.filter(mask))
            summary.add(plain.select(*cols))
        prefixed, _ = _split_block(lines.filter(~mask), numbers.filter(~mask), hosts)
        coll = prefixed.filter(
            (pl.col("level") == "INFO") & pl.col("msg").str.contains(_COLL)
        ).with_columns(f=pl.col("msg").str.split(" "))
        if coll.height:
            fields = coll_field_exprs(pl.col("f").list.get)
            summary.add(
                coll.select(
                    "host",
                    "pid",
                    pl.col("dev").cast(pl.Int32),
                    *(fields[c].alias(c) for c in cols[3:]),
                )
            )
    return summary


class _Held:
    """A prepared block (:meth:`_Pass2.prepare`) waiting for :meth:`_Pass2.emit`.

    Its frames are kept as Arrow IPC bytes, in memory or, once a parse holds more than
    ``HOLD_BYTES``, in a file. Why bytes and not the frames: a frame cut from a block's lines
    (a filter, a token of a split) shares the string buffers of the whole block, so holding it
    held the block (RSS grew by ~70 MB per 32 MB block for ~16 MB of rows); the IPC copy, with
    contiguous strings (``CompatLevel.oldest()``) and LZ4-compressed, holds only the rows: about
    9 % of the log's size on the nccl-tests log (84 MB uncompressed for 156 MB).
    """

    def __init__(
        self,
        *,
        n_lines: int,
        cut_line: int | None,
        n_parsed: int,
        frames: dict[str, pl.DataFrame],
    ) -> None:
        self.n_lines = n_lines
        self.cut_line = cut_line
        self.n_parsed = n_parsed
        self.data: dict[str, bytes] | None = {}
        for name, df in frames.items():
            buf = io.BytesIO()
            df.write_ipc(buf, compression="lz4", compat_level=pl.CompatLevel.oldest())
            self.data[name] = buf.getvalue()
        self.spilled: dict[str, Path] = {}

    def size(self) -> int:
        """Bytes held in memory."""
        return sum(len(b) for b in self.data.values()) if self.data is not None else 0

    def spill(self, folder: Path, n: int) -> None:
        """Write the frames to ``folder`` and drop them from memory."""
        if self.data is None:
            return
        for name, data in self.data.items():
            path = folder / f"{n}_{name}.arrow"
            path.write_bytes(data)
            self.spilled[name] = path
        self.data = None

    def load(self) -> dict[str, pl.DataFrame]:
        """The frames, as prepared (spill files are removed once read)."""
        if self.data is not None:
            data, self.data = self.data, None
            return {name: pl.read_ipc(io.BytesIO(b)) for name, b in data.items()}
        frames = {name: pl.read_ipc(path) for name, path in self.spilled.items()}
        for path in self.spilled.values():
            path.unlink(missing_ok=True)
        return frames


class _Split(NamedTuple):
    """A block split by :meth:`_Pass2.split` (line count, cut final line, plain COLL rows,
    prefixed and bare lines of the rest, hosts repaired)."""

    n_lines: int
    cut_line: int | None
    plain: pl.DataFrame | None
    prefixed: pl.DataFrame
    bare: pl.DataFrame
    repairs: list[str]


class _Pass2:
    """Row emission, block by block, with what pass 1 learnt."""

    def __init__(
        self,
        reg: _Registry,
        rank: int | None,
        resume: dict[str, Any] | None = None,
        *,
        one_pass: bool = False,
    ) -> None:
        self.reg = reg
        self.rank = rank
        self.incs: pl.DataFrame | None = None  # the registry's, once it is complete (ready())
        self.procs: pl.DataFrame | None = None
        # Two passes: every host of the file's lifecycle lines is known before the first block;
        # one pass (``one_pass``): those of the lines read so far (sync_hosts), and the hosts
        # each block repaired are kept to check at the end that no later one changes a repair.
        self.one_pass = one_pass
        self.known_hosts = set() if one_pass else set(reg.known_hosts)
        self.repair_checks: list[tuple[frozenset[str], list[str]]] = []
        prior = resume if resume and resume.get("v") in (1, communicators.STATE_VERSION) else {}
        _add_hosts(self.known_hosts, list(prior.get("pass2_hosts", [])))
        self.emitted_comms: dict[str, str] = dict(prior.get("comms", {}))
        self.emitted_topo: set[str] = set(prior.get("topo", []))
        self.n_changed = 0
        self.topo: list[_Topo] = []  # topology lines of the current block
        self.topo_pending = 0  # at most this many rows in ``topo`` are new
        self.topo_frames: list[pl.DataFrame] = []  # rows of the block's earlier batches
        # distinct topology messages parsed, and (comm, host, pid, message) already turned
        # into rows: a shortcut only (rows are de-duplicated anyway), bounded by _TOPO_MEMO
        self.topo_parsed: dict[tuple[str, bool], Any] = {}
        self.topo_parsed_rows = 0
        self.topo_seen: set[tuple[Any, ...]] = set()
        self.n_registry_full = 0
        self.n_topology_full = 0
        self.n_spliced = 0
        self.n_unknown_comm = 0
        self.n_tuning = 0
        self.n_tuned = 0

    def ready(self) -> None:
        """Take the registry's incarnations and process ranks (after ``reg.finalize()``)."""
        self.incs = self.reg.inc_frame()
        self.procs = self.reg.proc_frame()

    def sync_hosts(self) -> None:
        """One pass: learn the lifecycle hosts pass 1 has seen so far."""
        _add_hosts(self.known_hosts, list(self.reg.known_hosts - self.known_hosts))

    def repairs_stable(self) -> bool:
        """One pass: whether every host repair made while reading equals the repair with all
        the file's lifecycle hosts known (as the two-pass parse makes it)."""
        final = self.reg.known_hosts
        if len(final) >= MAX_KNOWN_HOSTS or len(self.known_hosts) >= MAX_KNOWN_HOSTS:
            return False  # which hosts a capped table keeps depends on the order: not checked
        for seen, hosts in self.repair_checks:
            late = final - seen
            if late and any(h[j:] in late for h in hosts for j in range(len(h))):
                return False
        return True

    # -- one block ---------------------------------------------------------------------------

    def block(
        self,
        lines: pl.Series,
        first_line_no: int,
        complete: bool,
        overlong: tuple[LongLine, ...] = (),
    ) -> ParsedChunk:
        """Rows, rejects and line accounting of one block of lines (registry complete)."""
        return self.emit(self.prepare(lines, first_line_no, complete, overlong))

    def prepare(
        self,
        lines: pl.Series,
        first_line_no: int,
        complete: bool,
        overlong: tuple[LongLine, ...] = (),
    ) -> _Held:
        """What a block of lines gives without the registry's windows and ranks.

        Plain COLL lines (most of a log) are parsed from their tokens
        (:mod:`commscope.parsers._nccl_coll_fields`); only the other lines go through the general path.
        Lines over ``commscope.parsers._io.MAX_LINE_BYTES`` (``overlong``) come as empty lines, which no
        path takes; each is rejected here with its reason. Needs of the registry only pass 1's
        verdicts on the block's own lifecycle lines (so the one-pass parse scans the block
        between :meth:`split` and :meth:`classify`); COLL ranks, TUNING pairs and topology
        lines wait for :meth:`emit`.
        """
        return self.classify(self.split(lines, first_line_no, complete), overlong)

    def split(self, lines: pl.Series, first_line_no: int, complete: bool) -> _Split:
        """The block's plain COLL lines parsed from their tokens, the others split into prefix
        fields and message (:func:`_split_block`, hosts repaired with ``known_hosts``)."""
        n_lines = len(lines)
        cut_line = first_line_no + n_lines - 1 if not complete else None
        numbers = pl.int_range(first_line_no, first_line_no + n_lines, dtype=pl.Int64, eager=True)
        mask = plain_coll_mask(lines)
        if cut_line is not None:  # a cut line is rejected by the general path
            mask = mask.scatter(n_lines - 1, False)
        plain: pl.DataFrame | None = None
        repairs: list[str] = []
        if mask.any():
            plain = plain_coll_rows(lines.filter(mask), numbers.filter(mask))
            _add_hosts(self.known_hosts, plain["host"].unique().to_list())
            rest = ~mask
            prefixed, bare = _split_block(
                lines.filter(rest), numbers.filter(rest), self.known_hosts, repairs
            )
        else:
            prefixed, bare = _split_block(lines, first_line_no, self.known_hosts, repairs)
        return _Split(n_lines, cut_line, plain, prefixed, bare, repairs)

    def classify(self, split: _Split, overlong: tuple[LongLine, ...] = ()) -> _Held:
        """:meth:`prepare` after the split: rejects, COLL fields, TUNING and topology lines,
        Init/Destroy lines classified from pass 1's verdicts."""
        n_lines, cut_line, plain, prefixed, bare, repairs = split
        if repairs and self.one_pass:
            self.repair_checks.append((frozenset(self.reg.known_hosts), repairs))
        cut = cut_line if cut_line is not None else -1
        self.n_spliced += int(prefixed["spliced"].sum() or 0)
        info = prefixed.filter(pl.col("level") == "INFO")
        # Lines pass 1 kept as lifecycle records are parsed: set apart before the patterns
        # below (none of which such a message matches but the Init/Destroy one).
        events = info.get_column("line_no").is_in(self.reg.event_line_series())
        if cut_line is not None:
            events = events & (info.get_column("line_no") != cut_line)
        n_events = int(events.sum())
        event_nos = info.get_column("line_no").filter(events) if n_events else None
        if n_events:
            info = info.filter(~events)
        rejects: list[tuple[int, str, str]] = []  # (line_no, raw, reason)
        cut_reason = "final line has no newline (file cut mid-line)"

        coll = info.filter(pl.col("msg").str.contains(_COLL_LIKE)).with_columns(
            fits=pl.col("msg").str.contains(_COLL)
        )
        good = coll.filter(pl.col("fits") & (pl.col("line_no") != cut))
        for line_no, raw in (
            coll.filter(~pl.col("fits") | (pl.col("line_no") == cut))
            .select("line_no", "raw")
            .iter_rows()
        ):
            why = cut_reason if line_no == cut else "COLL line does not fit its pattern (cut?)"
            rejects.append((line_no, raw, why))

        n_parsed = good.height + (plain.height if plain is not None else 0) + n_events
        others = info.filter(
            pl.col("msg").str.contains(f"{_INIT_LIKE}|{_TOPO_LIKE}")
            & ~pl.col("msg").str.contains(_COLL_LIKE)
        )
        is_init = pl.col("msg").str.contains(_INIT_LIKE)
        n_parsed += self._lifecycle(others.filter(is_init), cut_line, rejects)
        topo_lines = others.filter(~is_init).select(_OTHER)

        lost = prefixed.filter(pl.col("spliced") & pl.col("frag_kind").is_not_null()).join(
            good.select("line_no"), on="line_no", how="anti"
        )
        if lost.height:  # (rare) lines no other rule decided
            decided = {r[0] for r in rejects} | set(others["line_no"].to_list())
            decided.update(event_nos.to_list() if event_nos is not None else ())
            for line_no, raw, kind in lost.select("line_no", "raw", "frag_kind").iter_rows():
                if line_no not in decided:
                    why = f"spliced line: {kind} record cut by another writer"
                    rejects.append((line_no, raw, why))
        bare_records = bare.filter(pl.col("raw").str.contains(_BARE_RECORD))
        for line_no, raw in bare_records.select("line_no", "raw").iter_rows():
            why = cut_reason if line_no == cut else "NCCL record without its host:pid:tid prefix"
            rejects.append((line_no, raw, why))

        rejects.extend((ln.line_no, ln.raw, ln.reason) for ln in overlong)
        return _Held(
            n_lines=n_lines,
            cut_line=cut_line,
            n_parsed=n_parsed,
            frames={
                # one line is rejected at most once: its number orders them
                "rejects": pl.DataFrame(
                    [(ln, raw[:_MAX_RAW], why) for ln, raw, why in rejects],
                    schema=_REJECTS,
                    orient="row",
                ),
                "fields": self._coll_fields(good, plain),
                "tune": self._tune_lines(info),
                "topo_lines": topo_lines,
            },
        )

    def emit(self, held: _Held) -> ParsedChunk:
        """The block's chunk, with what only the whole file's registry decides: topology lines
        (attributed to incarnations), COLL ranks and TUNING pairs."""
        frames = held.load()
        cut_line, n_parsed = held.cut_line, held.n_parsed
        rejects: list[tuple[int, str, str]] = list(frames["rejects"].iter_rows())
        topo_lines = frames["topo_lines"]
        if topo_lines.height:
            for vals in zip(*(topo_lines.get_column(c).to_list() for c in _OTHER), strict=True):
                row = dict(zip(_OTHER, vals, strict=True))
                why = self._other(row, cut_line)
                if why is None:
                    n_parsed += 1
                else:
                    rejects.append((row["line_no"], row["raw"], why))
        tables = {"comm_ops": self._comm_ops(frames["fields"], frames["tune"])}
        if self.topo:  # attributed now (the registry is complete): nothing held to the end
            self.topo_frames.append(self._topology())
        if self.topo_frames:
            tables["topology"] = pl.concat(self.topo_frames)
            self.topo_frames = []
        if rejects:
            rejects.sort()
            tables["rejects"] = pl.DataFrame(
                [(ln, raw[:_MAX_RAW], why) for ln, raw, why in rejects],
                schema=_REJECTS,
                orient="row",
            )
        n_rej = len(rejects)
        counts = LineCounts(
            total=held.n_lines,
            parsed=n_parsed,
            rejected=n_rej,
            ignored=held.n_lines - n_parsed - n_rej,
        )
        return ParsedChunk(tables=tables, counts=counts)

    def _lifecycle(
        self, lines: pl.DataFrame, cut_line: int | None, rejects: list[tuple[int, str, str]]
    ) -> int:
        """Classify the block's INFO Init/Destroy-like lines from pass 1's verdicts (pass 1
        matched each lifecycle line already); return how many are parsed, add the rejects."""
        if not lines.height:
            return 0
        kept = lines.get_column("line_no").is_in(self.reg.event_line_series())
        if cut_line is not None:
            kept = kept & (lines.get_column("line_no") != cut_line)
        parsed = int(kept.sum())  # records pass 1 kept: nothing more to decide
        rest = lines.filter(~kept)
        status = self.reg.lifecycle_status
        for line_no, raw, msg, pre in rest.select("line_no", "raw", "msg", "pre").iter_rows():
            verdict = status(line_no) if line_no != cut_line else False
            if verdict is None:
                parsed += 1
                continue
            if verdict is False:  # the cut line, or past pass 1's bounds: match it here
                row = {"line_no": line_no, "raw": raw, "msg": msg, "pre": pre}
                why = self._other(row, cut_line)
            elif verdict == "unfit":
                why = _UNFIT
            else:
                why = _NOFIT
            if why is None:
                parsed += 1
            else:
                rejects.append((line_no, raw, why))
        return parsed

    def _other(self, row: dict[str, Any], cut_line: int | None) -> str | None:
        """Classify an Init/Destroy or topology line; store topology; return status."""
        msg: str = row["msg"]
        line_no: int = row["line_no"]
        if line_no == cut_line:
            return "final line has no newline (file cut mid-line)"
        if _INIT_LIKE_RE.match(msg):
            m = _INIT_RE.match(msg) or _END_RE.match(msg)
            if m is not None and not _init_fits(m.groupdict()):
                return _UNFIT
            if m is not None:
                full_from = self.reg.full_from
                if full_from is not None and line_no >= full_from:  # pass 1 did not keep it
                    self.n_registry_full += 1
                    return REGISTRY_FULL
                return None
            return _NOFIT
        nccl_len = len(row["raw"]) - len(row["pre"] or "")
        text = (msg, nccl_len >= LINE_LIMIT)
        parsed = self.topo_parsed.get(text, False)
        if parsed is False:  # each distinct message is parsed once (communicators repeat them)
            try:
                parsed = _parse_topology(*text)
            except ValueError:  # int() of a 4,300+ digit run (a corrupt line)
                return "topology line: a number is out of range"
            size = 1 + (len(parsed[0]) + len(parsed[1].get("ring_order") or ()) if parsed else 0)
            if (
                len(self.topo_parsed) >= _TOPO_MEMO
                or self.topo_parsed_rows + size > _TOPO_MEMO_ROWS
            ):
                self.topo_parsed.clear()
                self.topo_parsed_rows = 0
            self.topo_parsed[text] = parsed
            self.topo_parsed_rows += size
        if parsed is None:
            return "topology line does not fit any topology pattern (truncated or spliced)"
        rows, extra = parsed
        ring = extra.get("ring_order")
        n_rows = len(rows) + (3 * len(ring) + 2 if ring is not None else 0)
        if len(self.emitted_topo) + self.topo_pending + n_rows > topology.MAX_TOPOLOGY_ROWS:
            self.n_topology_full += 1
            return TOPOLOGY_FULL
        self.topo_pending += n_rows
        self.topo.append(
            _Topo(
                line_no=line_no,
                host=row["host"],
                pid=row["pid"],
                tid=row["tid"],
                me_rank=extra.get("me_rank"),
                me_dev=extra.get("me_dev"),
                rows=rows,
                ring_order=extra.get("ring_order"),
                ring_order_cut=extra.get("ring_order_cut", False),
                channel=extra.get("channel"),
                text=text,
            )
        )
        if len(self.topo) >= _TOPO_BATCH:  # rows as a frame: far smaller than the line objects
            self.topo_frames.append(self._topology())
        return None

    @staticmethod
    def _coll_fields(good: pl.DataFrame, plain: pl.DataFrame | None) -> pl.DataFrame:
        """The typed fields of a block's well-formed COLL lines (nothing from the registry).

        ``good`` are the COLL lines of the general path (message in ``msg``), ``plain`` those
        already split into tokens; both map tokens to columns with ``coll_field_exprs``.
        """
        # The full COLL pattern matched, so the fields sit at fixed space-separated positions.
        fields = good.with_columns(f=pl.col("msg").str.split(" ")).select(
            source_line=pl.col("line_no"),
            host=pl.col("host"),
            pid=pl.col("pid"),
            tid=pl.col("tid"),
            cuda_dev=pl.col("dev"),
            ts_ns=_ts_ns_expr(),
            **coll_field_exprs(pl.col("f").list.get),
        )
        if plain is not None and plain.height:
            fields = pl.concat(
                [
                    fields,
                    plain.select(
                        pl.col("line_no").alias("source_line"),
                        "host",
                        "pid",
                        "tid",
                        pl.col("dev").alias("cuda_dev"),
                        pl.lit(None, dtype=pl.Int64).alias("ts_ns"),
                        *fields.columns[6:],
                    ),
                ]
            )
        return fields

    @staticmethod
    def _with_names(fields: pl.DataFrame) -> pl.DataFrame:
        """Op, datatype and reduction names, message size and root of the COLL fields (made
        at emission: the held blocks keep only the fields)."""
        dt_names = {k: v[0] for k, v in enums.DTYPES.items()}
        dt_sizes = {k: v[1] for k, v in enums.DTYPES.items()}
        return fields.with_columns(
            op=pl.col("raw_op").replace_strict(enums.OPS, default="other", return_dtype=pl.Utf8),
            dtype=pl.col("dtype_code")
            .replace_strict(dt_names, default=None, return_dtype=pl.Utf8)
            .fill_null(pl.format("dtype_{}", pl.col("dtype_code"))),
            # the canonical size (parsers/schema.py): NCCL's native AlltoAll (2.28+) logs the
            # per-peer count, the whole send buffer is count x nranks
            msg_bytes=pl.col("count")
            * pl.col("dtype_code").replace_strict(dt_sizes, default=None, return_dtype=pl.Int64)
            * pl.when(pl.col("raw_op") == "AlltoAll")
            .then(pl.col("group_size").cast(pl.Int64))
            .otherwise(1),
            redop=pl.when(pl.col("raw_op").is_in(list(enums.REDUCING_OPS)))
            .then(
                pl.col("redop_code")
                .replace_strict(enums.REDOPS, default=None, return_dtype=pl.Utf8)
                .fill_null(pl.format("user_{}", pl.col("redop_code")))
            )
            .otherwise(None),
            peer_comm=pl.when(pl.col("raw_op").is_in(list(enums.ROOTED_OPS)))
            .then(pl.col("root"))
            .otherwise(None),
        )

    def _comm_ops(self, fields: pl.DataFrame, tune: pl.DataFrame) -> pl.DataFrame:
        """comm_ops rows of a block: its COLL fields with ranks and TUNING pairs."""
        if self.incs is None or self.procs is None:
            self.ready()
        assert self.incs is not None and self.procs is not None
        df = (
            self._with_names(fields)
            .sort("source_line")
            .join_asof(
                self.incs,
                left_on="source_line",
                right_on="window_start",
                by_left=["host", "pid", "comm_id"],
                by_right=["host", "pid", "comm_key"],
                strategy="backward",
                check_sortedness=False,
            )
        )
        in_window = pl.col("window_end").is_null() | (pl.col("source_line") <= pl.col("window_end"))
        matched = pl.col("window_start").is_not_null() & in_window
        df = df.with_columns(
            [
                pl.when(matched).then(pl.col(c)).otherwise(None).alias(c)
                for c in ("group_rank", "inc_global", "comm_hash", "identity_world")
            ]
        )
        self.n_unknown_comm += int(df["group_rank"].null_count())
        df = df.join(self.procs, on=["host", "pid"], how="left")
        fallback = pl.lit(self.rank, dtype=pl.Int32)
        df = df.with_columns(
            rank=pl.coalesce("inc_global", "proc_global", fallback),
            # how the rank is known (schema 1.6.0): an Init line, a rule of
            # parsers/_nccl_rank_infer.py, or the caller's rank option
            rank_source=pl.when(pl.col("inc_global").is_not_null())
            .then(pl.lit("logged"))
            .when(pl.col("proc_global").is_not_null())
            .then(pl.col("proc_how"))
            .when(fallback.is_not_null())
            .then(pl.lit("option")),
            peer_rank=pl.col("peer_comm"),
        ).sort("source_line")
        return self._tuning(df, tune).select(
            "rank",
            "rank_source",
            "host",
            "pid",
            "tid",
            "source_line",
            "op",
            "raw_op",
            "comm_id",
            "group_size",
            "group_rank",
            "peer_rank",
            "count",
            "dtype",
            "msg_bytes",
            "seq",
            "ts_ns",
            "algorithm",
            "protocol",
            "redop",
            "stream",
            "cuda_dev",
            # Constant columns, set once on the block's frame (issue 16): NCCL logs no
            # duration, and a COLL line names its communicator's size ([nranks=N]).
            pl.lit("none").alias("timing_source"),
            pl.when(pl.col("group_size").is_not_null())
            .then(pl.lit("logged"))
            .alias("group_source"),
        )

    @staticmethod
    def _tune_lines(info: pl.DataFrame) -> pl.DataFrame:
        """The block's TUNING lines with their fields (``_TUNE``)."""
        return (
            info.filter(pl.col("msg").str.contains(" Bytes -> Algo ", literal=True))
            .with_columns(g=pl.col("msg").str.extract_groups(_TUNE))
            .unnest("g")
            # A size too large for Int64 (a corrupt line) is no size, not a crash.
            .with_columns(bytes=pl.col("bytes").cast(pl.Int64, strict=False))
            .filter(pl.col("bytes").is_not_null())
            .select("line_no", "host", "pid", "tid", "bytes", "func", "algo", "proto")
        )

    def _tuning(self, ops: pl.DataFrame, tune: pl.DataFrame) -> pl.DataFrame:
        """Pair TUNING lines with COLL rows of the block; return ``ops`` with algorithm/protocol.

        Algorithm: first-in-first-out per key (host, pid, tid, bytes, op), like matching
        brackets. Events of a key are taken in line order; a TUNING line pairs with the oldest
        unpaired candidate before it, and is left unpaired when none is pending (its COLL line
        lies before the block or the file). With d = #TUNING - #COLL so far, a TUNING line is
        unpaired exactly when it raises the running maximum of d above 0; otherwise it pairs
        with candidate number (#TUNING so far - #unpaired so far). Candidates are COLL rows
        whose comm rank is 0 or unknown (TUNING is logged by comm rank 0 only); a candidate is
        listed under ``count x size`` and, for AllGather/ReduceScatter, also under
        ``count x size x nranks`` (2.20-2.23 log the whole buffer), and under its op name and
        under ``*`` (2.20-2.22 lines name no op).
        """
        ops = ops.with_row_index("i")
        self.n_tuning += tune.height
        if tune.height == 0 or ops.height == 0:
            return ops.drop("i").with_columns(
                algorithm=pl.lit(None, dtype=pl.Utf8), protocol=pl.lit(None, dtype=pl.Utf8)
            )
        key = ["host", "pid", "tid", "bytes", "op_key"]
        cand = ops.filter(
            pl.col("msg_bytes").is_not_null()
            & (pl.col("group_rank").is_null() | (pl.col("group_rank") == 0))
        ).select(
            "i",
            line="source_line",
            host="host",
            pid="pid",
            tid="tid",
            raw_op="raw_op",
            bytes="msg_bytes",
            size="group_size",
        )
        whole = cand.filter(
            pl.col("raw_op").is_in(["AllGather", "ReduceScatter"]) & (pl.col("size") > 1)
        ).with_columns(bytes=pl.col("bytes") * pl.col("size"))
        variants = pl.concat([cand, whole])
        cands = pl.concat(
            [
                variants.with_columns(op_key=pl.col("raw_op")),
                variants.with_columns(op_key=pl.lit("*")),
            ]
        ).select("i", "line", *key, is_t=pl.lit(0, dtype=pl.Int64))
        tl = tune.select(
            line="line_no",
            host="host",
            pid="pid",
            tid="tid",
            bytes=pl.col("bytes").cast(pl.Int64),
            op_key=pl.col("func").fill_null("*"),
            is_t=pl.lit(1, dtype=pl.Int64),
            algorithm=pl.col("algo")
            .replace({str(k): v for k, v in enums.ALGOS.items()})
            .str.to_uppercase(),
            protocol=pl.col("proto")
            .replace({str(k): v for k, v in enums.PROTOS.items()})
            .str.to_uppercase(),
        )
        ev = (
            pl.concat([cands, tl], how="diagonal")
            .sort("line", "is_t")
            .with_columns(
                n_t=pl.col("is_t").cum_sum().over(key),
                n_c=(1 - pl.col("is_t")).cum_sum().over(key),
            )
            .with_columns(under=(pl.col("n_t") - pl.col("n_c")).cum_max().clip(0).over(key))
            .with_columns(
                under_prev=pl.col("under").shift(1, fill_value=0).over(key),
            )
        )
        c_idx = ev.filter(pl.col("is_t") == 0).select("i", "line", *key, m=pl.col("n_c") - 1)
        t_idx = ev.filter((pl.col("is_t") == 1) & (pl.col("under") == pl.col("under_prev"))).select(
            *key, "algorithm", "protocol", tline="line", m=pl.col("n_t") - pl.col("under") - 1
        )
        pairs = (
            c_idx.join(t_idx, on=[*key, "m"], how="inner")
            .sort("tline")
            .unique(subset="i", keep="first")
            .select("i", "algorithm", "protocol")
        )
        self.n_tuned += pairs.height
        return ops.join(pairs, on="i", how="left").sort("i").drop("i")

    # -- end of file -------------------------------------------------------------------------

    def finish(self) -> ParsedChunk:
        reg = self.reg
        comm_schema: dict[str, Any] = {
            "comm_id": pl.Utf8,
            "rank": pl.Int32,
            "nranks": pl.Int32,
            "global_rank": pl.Int32,
            "host": pl.Utf8,
            "pid": pl.Int64,
            "cuda_dev": pl.Int32,
            "nvml_dev": pl.Int32,
            "bus_id": pl.Utf8,
            "comm_hash": pl.Utf8,
            "parent_comm_id": pl.Utf8,
            "parent_comm_hash": pl.Utf8,
            "parent_nranks": pl.Int32,
            "split_color": pl.Int64,
            "split_key": pl.Int64,
            "nccl_version": pl.Utf8,
            "source_line": pl.Int64,
        }
        # what the per-process rules decide (one value per incarnation, finalize()) beside
        # the columns finalize() cut: no object and no dict per incarnation
        rank = self.rank
        comm_cols: dict[str, list[Any]] = {
            "global_rank": reg.inc_global
            if rank is None
            else [g if g is not None else rank for g in reg.inc_global],
            "parent_comm_hash": reg.inc_parent_ident,
            "parent_nranks": reg.inc_parent_nranks,
            "nccl_version": reg.inc_version,
        }
        table = reg.inc_table
        assert table is not None  # set by finalize()
        # an int out of its column's range is null (a corrupt line's number), never a crash
        decided = pl.DataFrame(
            [
                pl.Series(c, v, dtype=pl.Int64, strict=False).cast(pl.Int32, strict=False)
                if comm_schema[c] == pl.Int32
                else pl.Series(c, v, dtype=comm_schema[c])
                for c, v in comm_cols.items()
            ]
        )
        comms = pl.concat(
            [
                table.select(
                    comm_id="comm",
                    rank="rank",
                    nranks="nranks",
                    host="host",
                    pid="pid",
                    cuda_dev="cudadev",
                    nvml_dev="nvmldev",
                    bus_id="busid",
                    comm_hash="comm_hash",
                    parent_comm_id="parent",
                    split_color="split_color",
                    split_key="split_key",
                    source_line=pl.coalesce("first_init_line", "end_line", pl.lit(0)),
                ),
                decided,
            ],
            how="horizontal",
        )
        comms = comms.select(pl.col(c).cast(t, strict=False) for c, t in comm_schema.items())
        comms = comms.sort("source_line")
        comms = self._new_rows(comms)
        warnings = list(reg.warnings)
        if self.n_registry_full:
            warnings.append(
                f"{self.n_registry_full} Init/Destroy lines from line {reg.full_from} on rejected: "
                f"more than {communicators.MAX_LIFECYCLE_EVENTS} communicator lifecycle lines in one file"
            )
        if self.n_topology_full:
            warnings.append(
                f"{self.n_topology_full} topology lines rejected: more than {topology.MAX_TOPOLOGY_ROWS} "
                "distinct topology rows in one file"
            )
        if self.n_changed:
            warnings.append(
                f"{self.n_changed} communicators stored by an earlier ingest of this file would "
                "read differently with the appended lines; the stored rows are kept"
            )
        if self.n_spliced:
            warnings.append(
                f"{self.n_spliced} lines carry output of several writers; the last NCCL prefix "
                "of each was used"
            )
        if self.n_unknown_comm:
            warnings.append(
                f"{self.n_unknown_comm} COLL lines on communicators with no Init/Destroy line in "
                "the file: group_rank null, global rank from the process only"
            )
        if self.n_tuning > self.n_tuned:
            warnings.append(
                f"{self.n_tuning - self.n_tuned} of {self.n_tuning} TUNING lines could not be "
                "attributed to a COLL line"
            )
        return ParsedChunk(
            tables={"communicators": comms, "topology": self._topology()}, warnings=warnings
        )

    def _new_rows(self, comms: pl.DataFrame) -> pl.DataFrame:
        """Drop communicators rows emitted by the parse this one resumes; remember the rest."""
        if comms.is_empty():
            return comms
        idents = comms.select(
            pl.concat_str(
                [
                    pl.col(c).cast(pl.Utf8).fill_null("None")  # as the f-string wrote it
                    for c in ("host", "pid", "comm_id", "source_line")
                ],
                separator="\0",
                ignore_nulls=False,
            )
        ).to_series()
        keep: list[bool] = []
        emitted = self.emitted_comms
        keys, fps = idents.to_list(), _fingerprints(comms)
        if not emitted and len(set(keys)) == len(keys):  # nothing emitted before: all new
            emitted.update(zip(keys, fps, strict=True))
            return comms
        for ident, fp in zip(keys, fps, strict=True):
            before = emitted.get(ident)
            keep.append(before is None)
            if before is None:
                emitted[ident] = fp
            elif before != fp:
                self.n_changed += 1
        return comms.filter(pl.Series(keep, dtype=pl.Boolean))

    def emitted_state(self) -> dict[str, Any]:
        """Fingerprints of emitted rows and pass-2 hosts (for a resumed parse)."""
        return {
            "pass2_hosts": sorted(self.known_hosts),
            "comms": self.emitted_comms,
            "topo": sorted(self.emitted_topo),
        }

    def _topology(self) -> pl.DataFrame:
        """Rows of the topology lines in ``topo`` not emitted before (then ``topo`` is empty)."""
        rows: list[dict[str, Any]] = []
        topo, self.topo, self.topo_pending = self.topo, [], 0
        seen = self.topo_seen
        reg = self.reg
        attribute = reg.attribute_at
        comms, nranks_of = (
            (reg.inc_column("comm"), reg.inc_column("nranks")) if topo and reg.n_incs else ([], [])
        )
        for t in topo:
            at = attribute(t.host, t.pid, t.tid, t.line_no, t.me_rank, t.me_dev)
            comm = comms[at] if at is not None else None
            n_of = nranks_of[at] if at is not None else None
            # Rows are a function of this key: a line repeating it (a re-created communicator
            # on the same pointer) adds only rows that the de-duplication below would drop.
            ident = (
                comm,
                n_of if t.ring_order is not None else None,
                t.host,
                t.pid,
                t.text,
            )
            if ident in seen:
                continue
            if len(seen) >= _TOPO_MEMO:
                seen.clear()
            seen.add(ident)
            edges = t.rows
            if t.ring_order is not None and t.channel is not None:
                nranks = n_of
                edges = _ring_order_rows(t.ring_order, t.channel, t.ring_order_cut, nranks)
            for e in edges:
                rows.append(
                    {
                        "comm_id": comm,
                        "host": t.host,
                        "pid": t.pid,
                        "source_line": t.line_no,
                        "transport": None,
                        "transport_detail": None,
                        **e,
                    }
                )
        schema = {
            "comm_id": pl.Utf8,
            "rank": pl.Int32,
            "kind": pl.Utf8,
            "channel": pl.Int32,
            "peer_rank": pl.Int32,
            "direction": pl.Utf8,
            "transport": pl.Utf8,
            "transport_detail": pl.Utf8,
            "host": pl.Utf8,
            "pid": pl.Int64,
            "source_line": pl.Int64,
        }
        df = pl.DataFrame(_fit_ints(rows, schema), schema=schema)
        key = [c for c in schema if c != "source_line" and c != "transport"]
        df = df.unique(subset=key, keep="first", maintain_order=True)
        if df.is_empty():
            return df
        fps = _fingerprints(df.select(key))
        new = pl.Series([fp not in self.emitted_topo for fp in fps], dtype=pl.Boolean)
        self.emitted_topo.update(fps)
        return df.filter(new)


_ENCODER = json.JSONEncoder(sort_keys=True, default=str)
"""``json.dumps(row, sort_keys=True, default=str)``, without building an encoder per row."""


def _fingerprint(row: dict[str, Any]) -> str:
    """Short stable hash of a row (resume state keeps these, not the rows)."""
    text = _ENCODER.encode(row)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


_JSON_PLAIN = r"^[ !#-\[\]-~]*$"
"""Strings that JSON writes as the string in quotes: printable ASCII but the quote and backslash."""


def _fingerprints(df: pl.DataFrame) -> list[str]:
    """:func:`_fingerprint` of every row of ``df`` (a dict of its columns, as
    ``iter_rows(named=True)`` gives them), with the JSON text built column-wise.

    The text is the one ``_ENCODER`` writes (keys sorted, ``", "`` and ``": "`` between items,
    ``null`` for a null, integers in decimal, strings quoted) when every string is plain
    (:data:`_JSON_PLAIN`: nothing to escape) and every column a string or an integer; any other
    frame takes the row-by-row path. Why: a dict and an encoder call per row cost ~5 us, and a
    file of 10,000 incarnations has 10,000 communicators rows (issue 21).
    """
    if df.is_empty():
        return []
    ints = {c for c, t in df.schema.items() if t.is_integer()}
    strs = {c for c, t in df.schema.items() if t == pl.Utf8}
    plain = len(ints) + len(strs) == df.width and (
        not strs
        or bool(
            df.select(
                pl.all_horizontal(
                    pl.col(c).is_null() | pl.col(c).str.contains(_JSON_PLAIN) for c in strs
                ).all()
            ).item()
        )
    )
    if not plain:
        return [_fingerprint(r) for r in df.iter_rows(named=True)]
    parts: list[pl.Expr] = []
    for n, c in enumerate(sorted(df.columns)):
        value = pl.col(c).cast(pl.Utf8)
        if c in strs:
            value = pl.lit('"') + value + pl.lit('"')
        parts.append(pl.lit(("{" if n == 0 else ", ") + _ENCODER.encode(c) + ": "))
        parts.append(value.fill_null("null"))
    parts.append(pl.lit("}"))
    texts = df.select(pl.concat_str(parts, separator="")).to_series().to_list()
    sha = hashlib.sha256
    return [sha(t.encode()).hexdigest()[:16] for t in texts]
