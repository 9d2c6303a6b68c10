"""PyTorch Flight Recorder (NCCL trace) dumps: every entry as a communication call with its state.

The recorder (``TORCH_NCCL_TRACE_BUFFER_SIZE`` / ``TORCH_FR_BUFFER_SIZE``) keeps a ring buffer
of the collectives and p2p ops each rank enqueued, with process-group names (Megatron's TP /
PP / DP / EP groups), sequence ids and states; a rank writes it on a timeout or on request to
``<prefix><rank>`` (``/tmp/nccl_trace_rank_<rank>`` by default, ``_dump_<rank>`` under nvrx).
It is the standard evidence for hangs. Format facts, per schema version, with sources:
``FORMATS_flight_recorder.md``; the version table: :mod:`commscope.parsers.flight_recorder._versions`.

Inputs, recognised by content (any name, compressed or not):

* the **pickle** dump (PROTO 2-5 magic and FR keys in the head), read by a restricted
  unpickler that builds only plain values and refuses every global by name, never importing
  it (:mod:`commscope.parsers.flight_recorder._load`): a pickle naming ``os.system`` is a
  :class:`~commscope.parsers.registry.ParseError` naming the file and the global;
* the **JSON** form (C++ ``dump_json``: keys sorted, ``pg_status`` values strings,
  ``time_discovered_*`` 0 for none, ``entries`` omitted when empty; or nvrx's ``json.dump`` of
  the unpickled dict).

Every schema version the ``fr_trace`` tooling knows is read (1.2 list ``pg_config`` … 2.10
``comm_lib_version``); reading follows the keys present, and a version outside the table is
read the same way with a warning.

Tables written:

* ``comm_ops``: one row per entry (:mod:`commscope.parsers.flight_recorder._mapping`): op, pg name as
  ``comm_id``, group size/rank and p2p peers (global) from ``pg_config``, ``seq``
  (collective_seq_id, p2p_seq_id for p2p), message size and dtype from the tensor shapes,
  ``call_state`` (scheduled/started/completed), ``launch_ts_ns`` = ``time_created_ns``;
  ``ts_ns`` null (no GPU start is recorded), ``dur_ns`` only from ``duration_ms`` (timing
  enabled; ``timing_source`` ``logged``, else ``none``): the CPU discovery times are never a
  duration. ``source_line`` = the entry's 1-based position in ``entries`` (oldest first).
* ``communicators``: one row per ``pg_config`` group containing the rank (``comm_id`` the pg
  name, ``rank`` its group rank, ``nranks``, ``global_rank``), as the Kineto parser writes
  them from ``distributedInfo.pg_config``; with ``group_desc`` (pg_config ``desc``: TP, DP,
  default_pg, ...), ``group_ranks`` (the members' global ranks) and the rank's ``pg_status``
  counters for the group (``last_enqueued_seq`` / ``last_started_seq`` /
  ``last_completed_seq``, tied to the group through ``pg_id_names``: ``seq_status_source``
  entry or order), which the hang marts read (schema 1.7.0).
* ``trace_meta``: one row: rank, ``rank_source`` (``dump_key`` | ``file_name`` | ``option`` |
  ``unknown``), world size (the ``default_pg`` group), backend, ``source_version`` =
  ``<schema>;<pickle|json>;<library version>``, ``clock_anchor_ns`` 0 (times are epoch ns).
* ``rejects``: entries that are not a dict or carry no ``profiling_name`` (no op).

Rank: a top-level ``rank`` key when the dump has one (``dump_key``; PyTorch writes none),
else the file name's trailing digits (``file_name``: ``nccl_trace_rank_3``, ``_dump_12``,
``_dump_12.json``), else the ``rank`` argument (``option``), else null with a warning.

Records: ``total`` = entries; ``parsed`` = entries with a row; ``rejected`` = the rejects;
nothing is ignored. A file with no entries (the hang signature of a rank that enqueued
nothing) is a valid dump: zero records, its groups and trace_meta still written.

Bad values cost the value, never the entry: a seq, size, time, state or duration of the wrong
type or out of range is null in its row, counted in one warning per field.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import polars as pl

from commscope.parsers.flight_recorder._dump import (
    Dump,
    Status,
    clean_text,
    pg_id_names,
    rank_from_name,
    read_top,
)
from commscope.parsers.flight_recorder._load import is_pickle_head, load_dump
from commscope.parsers.flight_recorder._mapping import EntryRows, map_entry, split_profiling_name
from commscope.parsers.registry import LineCounts, ParsedChunk, ParseError, register
from commscope.parsers.schema import polars_schema

if TYPE_CHECKING:
    from commscope.parsers._io import Source

_FR_KEYS = (b"pg_config", b"pg_status", b"profiling_name", b"collective_seq_id")
_NAME_HINTS = ("nccl_trace_rank_", "_dump_", "fr_trace", "flight_recorder")

COMM_OPS_SCHEMA: dict[str, pl.DataType] = {
    name: dtype
    for name, dtype in polars_schema("comm_ops").items()
    if name
    in (
        "rank",
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
        "dur_ns",
        "timing_source",
        "launch_ts_ns",
        "group_source",
        "call_state",
    )
}
"""The comm_ops columns a Flight Recorder entry fills, with the canonical types (schema.py)."""


def _sniff_json(head: bytes) -> int:
    text = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if text[:1] != b"{" or b'"traceEvents"' in head:
        return 0
    hits = sum(1 for k in (b'"pg_config"', b'"pg_status"', b'"profiling_name"') if k in head)
    if hits >= 2 or (hits and b'"entries"' in head):
        return 90
    return 0


def resolve_rank(
    dump: Dump, path: Path, option: int | None, warnings: list[str]
) -> tuple[int | None, str]:
    """(rank, rank_source) of a dump: its own key, its file name, the option, else unknown."""
    by_name = rank_from_name(path)
    if dump.dump_rank is not None:
        if by_name is not None and by_name != dump.dump_rank:
            warnings.append(
                f"the dump's rank key says {dump.dump_rank}, its file name {by_name}: "
                "the key is used"
            )
        return dump.dump_rank, "dump_key"
    if by_name is not None:
        return by_name, "file_name"
    if option is not None:
        return option, "option"
    warnings.append(
        "no rank: a Flight Recorder dump names its rank only in its file name "
        "(<prefix><rank>); pass --rank"
    )
    return None, "unknown"


@dataclass(frozen=True)
class DumpFile:
    """One dump read from a file, for analyses over a whole job (the hang triage).

    Attributes:
        path: the file.
        rank: its global rank (see :func:`resolve_rank`), None when unknown.
        rank_source: where the rank came from.
        dump: the normalised dump.
        warnings: what :func:`resolve_rank` noted.
    """

    path: Path
    rank: int | None
    rank_source: str
    dump: Dump
    warnings: tuple[str, ...] = ()


def read_dump_file(path: Path, *, rank: int | None = None) -> DumpFile:
    """Read one dump (pickle or JSON) through the restricted loader.

    Raises:
        ParseError: as :meth:`FlightRecorderParser.parse`.
    """
    from commscope.parsers._io import Source

    raw = load_dump(Source(Path(path)))
    try:
        dump = read_top(raw.data)
    except ValueError as exc:
        raise ParseError(path, str(exc)) from None
    if dump is None:
        raise ParseError(path, f"decoded {raw.form} is not a Flight Recorder dump")
    warnings: list[str] = []
    the_rank, source = resolve_rank(dump, Path(path), rank, warnings)
    return DumpFile(Path(path), the_rank, source, dump, tuple(warnings))


def _backend(dump: Dump) -> str | None:
    for e in dump.entries[:64]:
        name = e.get("profiling_name") if isinstance(e, dict) else None
        if isinstance(name, str):
            backend = split_profiling_name(clean_text(name[:256]))[1]
            if backend:
                return backend[:32]
    return None


@register
class FlightRecorderParser:
    """PyTorch Flight Recorder dumps (pickle, read without executing anything, or JSON)."""

    name: ClassVar[str] = "flight_recorder"
    version: ClassVar[str] = "1.0.0"

    def sniff(self, head: bytes, path: Path) -> int:
        """Pickle magic plus Flight Recorder keys in the head (95), or plus an FR-like file
        name (60); a JSON object with FR keys (90). Anything else 0."""
        if is_pickle_head(head):
            if sum(1 for k in _FR_KEYS if k in head) >= 1:
                return 95
            name = path.name.lower()
            return 60 if any(h in name for h in _NAME_HINTS) else 0
        return _sniff_json(head)

    def parse(
        self, source: Source, *, run_id: str, rank: int | None = None
    ) -> Iterator[ParsedChunk]:
        """Yield the rows of one dump (see the module docstring).

        Raises:
            ParseError: a refused pickle global, a cut/corrupt pickle or JSON, or a decoded
                value that is not a Flight Recorder dump.
        """
        del run_id  # filled by ingest
        if source.start_offset:
            raise ParseError(source.path, "Flight Recorder dumps are ingested whole")
        raw = load_dump(source)
        try:
            dump = read_top(raw.data)
        except ValueError as exc:
            raise ParseError(source.path, str(exc)) from None
        if dump is None:
            raise ParseError(
                source.path,
                f"decoded {raw.form} is not a Flight Recorder dump "
                "(expected a dict with entries or pg_config)",
            )
        warnings = list(dump.notes)
        if raw.trailing_bytes:
            warnings.append(f"{raw.trailing_bytes} bytes after the pickle's end: ignored")
        if dump.version.text is None:
            warnings.append("no version key: read by the keys present")
        elif not dump.version.known:
            warnings.append(
                f"schema version {dump.version.text!r} is not one commscope has a source for: "
                "read by the keys present"
            )
        if not dump.has_entries_key:
            warnings.append("no entries key (an empty JSON dump, or dumped without collectives)")
        the_rank, rank_source = resolve_rank(dump, source.path, rank, warnings)

        out = EntryRows()
        for i, entry in enumerate(dump.entries, start=1):
            map_entry(entry, i, dump, the_rank, out)
        for what, n in sorted(out.bad_values.items()):
            warnings.append(f"{n} entries with an unreadable {what}: the value is null")

        tables: dict[str, pl.DataFrame] = {}
        if out.parsed:
            tables["comm_ops"] = pl.DataFrame(out.cols, schema=COMM_OPS_SCHEMA)
        if out.rejects:
            tables["rejects"] = pl.DataFrame(
                out.rejects,
                schema={"line_no": pl.Int64, "raw": pl.Utf8, "reason": pl.Utf8},
                orient="row",
            )
        comms = _communicators(dump, the_rank)
        if comms is not None:
            tables["communicators"] = comms
        tables["trace_meta"] = pl.DataFrame(
            {
                "rank": [the_rank],
                "world_size": [dump.world_size],
                "rank_source": [rank_source],
                "backend": [_backend(dump)],
                "clock_anchor_ns": [0],
                "aligned": [True],
                "source_version": [
                    ";".join([dump.version.text or "?", raw.form, dump.lib_version or "?"])[:256]
                ],
            },
            schema={
                "rank": pl.Int32,
                "world_size": pl.Int32,
                "rank_source": pl.Utf8,
                "backend": pl.Utf8,
                "clock_anchor_ns": pl.Int64,
                "aligned": pl.Boolean,
                "source_version": pl.Utf8,
            },
        )
        counts = LineCounts(
            total=len(dump.entries), parsed=out.parsed, ignored=0, rejected=len(out.rejects)
        )
        yield ParsedChunk(tables=tables, counts=counts, warnings=warnings)


def _communicators(dump: Dump, rank: int | None) -> pl.DataFrame | None:
    """One row per pg_config group holding the rank: its name, desc, members and the rank's
    pg_status counters for it (tied to the group by :func:`pg_id_names`)."""
    counters: dict[str, tuple[Status, str]] = {}
    for pg_id, (name, how) in pg_id_names(dump).items():
        st = dump.status.get(pg_id)
        if st is not None:
            counters[name] = (st, how)
    rows: list[dict[str, Any]] = []
    for g in dump.groups.values():
        members = g.sorted_ranks
        if rank is not None and members is not None and rank not in members:
            continue
        st, how = counters.get(g.name, (None, None))
        rows.append(
            {
                "comm_id": g.name,
                "rank": members.index(rank) if members and rank in members else None,
                "nranks": len(members) if members is not None else None,
                "global_rank": rank,
                "group_desc": g.desc,
                "group_ranks": ",".join(map(str, members)) if members is not None else None,
                "last_enqueued_seq": st.last_enqueued if st else None,
                "last_started_seq": st.last_started if st else None,
                "last_completed_seq": st.last_completed if st else None,
                "seq_status_source": how,
            }
        )
    if not rows:
        return None
    schema = polars_schema("communicators")
    return pl.DataFrame(
        rows,
        schema={
            c: schema[c]
            for c in (
                "comm_id",
                "rank",
                "nranks",
                "global_rank",
                "group_desc",
                "group_ranks",
                "last_enqueued_seq",
                "last_started_seq",
                "last_completed_seq",
                "seq_status_source",
            )
        },
    )
