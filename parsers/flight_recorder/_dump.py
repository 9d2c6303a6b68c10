"""The top level of a Flight Recorder dump, normalised: rank, groups, group status, entries.

Shared by the parser (rows) and the hang triage (:mod:`commscope.parsers.flight_recorder.hang`), so
both read one dump the same way. Field facts: ``FORMATS_flight_recorder.md`` §1-§4.

* ``pg_config``: ``{pg_name: {"name", "desc", "ranks": "[0, 1]"}}`` (2.x; ``ranks`` a string
  of a Python list, or a list); schema 1.2 wrote a list per group (taken as pg_id → ranks).
  Ranks are global; each rank lists only its own groups.
* ``pg_status``: ``{str(pg_id): {last_enqueued_collective, last_started_collective,
  last_completed_collective}}`` keyed by the rank-local ``pg_id`` (JSON form: values are
  strings). The link pg_id → name is an entry carrying both; for a group without entries in
  the dump it is recovered by creation order (:func:`pg_id_names`).
* The rank is in the file name only (``DebugInfoWriter``: prefix + rank): the trailing digits
  of the name, after dropping ``.json`` and compression suffixes (``fr_trace``'s
  ``([\\w\\-\\_]*?)(\\d+)$``; nvrx ``_dump_<rank>[.json]``). A top-level integer ``rank`` key
  (not written by PyTorch; re-pickled analyzer output has one) is used when present.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commscope.parsers.flight_recorder._load import MAX_ENTRIES
from commscope.parsers.flight_recorder._versions import DumpVersion, parse_version

_I32_MAX = 2**31 - 1
_NAME_RANK = re.compile(r"(\d{1,9})$")
_STRIP_SUFFIXES = (".json", ".pkl", ".pickle", ".gz", ".zst", ".xz", ".bz2")
MAX_RANKS_TEXT = 1 << 20
"""Longest ``ranks`` string parsed (a 100k-rank group is ~700 KB)."""


def as_int(v: Any) -> int | None:
    """An int64 from an int (not bool) or a decimal string; else None."""
    if type(v) is int:
        return v if -(2**63) <= v < 2**63 else None
    if type(v) is str and 0 < len(v) <= 20:
        s = v.strip()
        if s.lstrip("-").isdigit():
            return as_int(int(s))
    return None


def rank_from_name(path: Path) -> int | None:
    """Global rank from a dump's file name (trailing digits, suffixes dropped), else None."""
    name = path.name
    changed = True
    while changed:
        changed = False
        for suf in _STRIP_SUFFIXES:
            if name.lower().endswith(suf) and len(name) > len(suf):
                name, changed = name[: -len(suf)], True
    m = _NAME_RANK.search(name)
    return int(m.group(1)) if m and int(m.group(1)) <= _I32_MAX else None


def parse_ranks(value: Any) -> list[int] | None:
    """Global ranks of a group from ``pg_config``'s ``ranks`` ("[0, 1]" or a list)."""
    if isinstance(value, str):
        if len(value) > MAX_RANKS_TEXT:
            return None
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    if not isinstance(value, (list, tuple)):
        return None
    out: list[int] = []
    for r in value:
        i = as_int(r)
        if i is None or not 0 <= i <= _I32_MAX:
            return None
        out.append(i)
    return out


@dataclass(frozen=True)
class Group:
    """One process group as the dump's ``pg_config`` gives it."""

    name: str
    desc: str | None
    ranks: tuple[int, ...] | None

    @property
    def sorted_ranks(self) -> list[int] | None:
        """Members in group-rank order (c10d sorts a new group's ranks; ``fr_trace`` maps
        a p2p peer's group rank with ``sorted(ranks)[i]``)."""
        return sorted(self.ranks) if self.ranks is not None else None


@dataclass(frozen=True)
class Status:
    """A group's progress counters on one rank (``pg_status``); -1 = none yet."""

    last_enqueued: int | None
    last_started: int | None
    last_completed: int | None


@dataclass
class Dump:
    """A dump's top level, normalised (entries stay raw: the mapping validates each)."""

    version: DumpVersion
    lib_version: str | None
    groups: dict[str, Group]
    status: dict[int, Status]
    entries: list[Any]
    dump_rank: int | None
    has_entries_key: bool
    notes: list[str] = field(default_factory=list)

    @property
    def world_size(self) -> int | None:
        """Size of the default group (desc ``default_pg``), when the dump lists it."""
        for g in self.groups.values():
            if g.desc == "default_pg" and g.ranks is not None:
                return len(g.ranks)
        return None


def clean_text(s: str) -> str:
    """``s`` as valid UTF-8: a pickle's strings may hold lone surrogates (BINUNICODE is
    decoded with ``surrogatepass``), which Arrow cannot store; they become ``?``."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return s.encode("utf-8", "replace").decode("utf-8")
    return s


def _text(v: Any, limit: int = 4096) -> str | None:
    return clean_text(v[:limit]) if isinstance(v, str) else None


def _groups(cfg: Any, notes: list[str]) -> dict[str, Group]:
    groups: dict[str, Group] = {}
    if isinstance(cfg, dict):
        for key, val in cfg.items():
            name = _text(key, 256)
            if name is None:
                continue
            if isinstance(val, dict):
                ranks = parse_ranks(val.get("ranks"))
                groups[name] = Group(
                    name, _text(val.get("desc"), 256), tuple(ranks) if ranks is not None else None
                )
                if ranks is None:
                    notes.append(f"pg_config {name!r}: unreadable ranks")
    elif isinstance(cfg, list):  # schema 1.2: one rank list per group, by position
        for i, val in enumerate(cfg):
            raw = val.get("ranks") if isinstance(val, dict) else val
            ranks = parse_ranks(raw)
            desc = _text(val.get("desc"), 256) if isinstance(val, dict) else None
            groups[str(i)] = Group(str(i), desc, tuple(ranks) if ranks is not None else None)
    elif cfg is not None:
        notes.append("pg_config is neither a dict nor a list: ignored")
    return groups


def _status(st: Any) -> dict[int, Status]:
    out: dict[int, Status] = {}
    if not isinstance(st, dict):
        return out
    for key, val in st.items():
        pg_id = as_int(key)
        if pg_id is None or not isinstance(val, dict):
            continue
        out[pg_id] = Status(
            as_int(val.get("last_enqueued_collective")),
            as_int(val.get("last_started_collective")),
            as_int(val.get("last_completed_collective")),
        )
    return out


def read_top(data: Any) -> Dump | None:
    """Normalise a decoded dump; None when it is not a Flight Recorder dump at all.

    Raises:
        ValueError: more than :data:`~commscope.parsers.flight_recorder._load.MAX_ENTRIES` entries.

    A dump is a dict with ``entries`` or ``pg_config`` (``entries`` may be absent: the JSON
    form omits an empty list, and a dump taken without collectives has none).
    """
    if not isinstance(data, dict) or not ("entries" in data or "pg_config" in data):
        return None
    notes: list[str] = []
    entries = data.get("entries")
    has_entries = "entries" in data
    if entries is None:
        entries = []
    elif not isinstance(entries, list):
        notes.append("entries is not a list: no entries read")
        entries = []
    elif len(entries) > MAX_ENTRIES:
        raise ValueError(f"{len(entries)} entries, more than {MAX_ENTRIES}: not read")
    lib = data.get("comm_lib_version", data.get("nccl_version"))
    rank = as_int(data.get("rank"))
    return Dump(
        version=parse_version(data.get("version")),
        lib_version=_text(lib, 64),
        groups=_groups(data.get("pg_config"), notes),
        status=_status(data.get("pg_status")),
        entries=entries,
        dump_rank=rank if rank is not None and 0 <= rank <= _I32_MAX else None,
        has_entries_key=has_entries,
        notes=notes,
    )


def entry_group(entry: Any) -> tuple[str | None, str | None]:
    """(pg name, pg desc) of an entry's ``process_group`` (a tuple; a list in JSON; a bare
    name string in old dumps)."""
    pg = entry.get("process_group") if isinstance(entry, dict) else None
    if isinstance(pg, (tuple, list)) and pg:
        name = _text(pg[0], 256)
        desc = _text(pg[1], 256) if len(pg) > 1 else None
        return name, desc
    if isinstance(pg, str):
        return _text(pg, 256), None
    return None, None


def pg_id_names(dump: Dump) -> dict[int, tuple[str, str]]:
    """Map the rank-local ``pg_id`` of ``pg_status`` to a pg name, with how it was found.

    Returns ``{pg_id: (pg_name, method)}``, method ``entry`` (an entry carries both) or
    ``order``: groups are created in the same order on a rank as their default names are
    numbered (``_process_group_name``: a global counter), and the rank-local uid counts the
    rank's own groups in creation order, so when every pg_config name is an integer, the
    dump lists as many status keys as groups, and every pair known from entries agrees, the
    i-th pg_id (ascending) is the i-th name (numerically). Observed true on all 32 sample
    dumps; otherwise only the entry pairs are returned.
    """
    known: dict[int, str] = {}
    for e in dump.entries:
        if isinstance(e, dict):
            pg_id = as_int(e.get("pg_id"))
            name, _ = entry_group(e)
            if pg_id is not None and name is not None:
                known.setdefault(pg_id, name)
    out = {k: (v, "entry") for k, v in known.items()}
    names = list(dump.groups)
    ids = sorted(dump.status)
    if names and len(ids) == len(names) and all(n.isdigit() for n in names):
        by_order = dict(zip(ids, sorted(names, key=int), strict=True))
        if all(by_order.get(k) == v for k, v in known.items()):
            for k, v in by_order.items():
                out.setdefault(k, (v, "order"))
    return out
