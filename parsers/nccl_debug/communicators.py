"""NCCL debug communicators: pass 1 (lifecycle and version lines of the raw bytes), the
registry of communicator incarnations (windows, world size, global ranks, split parents,
identities, versions) and the index that attributes a line to its incarnation in O(log n).

See :mod:`commscope.parsers.nccl_debug` (Communicator incarnations and global ranks).
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from commscope.parsers.nccl_debug.lines import (
    _BARE_VERSION_RE,
    _END_RE,
    _INIT_RE,
    _LIFECYCLE_HINT,
    _LIFECYCLE_KEYS,
    _NCCL_LINE_HINT,
    _NCCL_LINE_KEYS,
    _PLAIN_LIFECYCLE,
    _TAG_ONLY,
    _VERSION_RE,
    _add_hosts,
    _fix_host,
    _launcher_tag,
    _split_block,
)

# Bounds on what one file's parse keeps (memory and the resume state stored in the commit log
# grow with these, never with the file). Past a bound the lines concerned are rejected with the
# reason (counted, with one warning), or for hosts/processes/tags only the repair or version
# attribution they feed stops learning; rows already parsed are unchanged.
MAX_LIFECYCLE_EVENTS = 100_000
"""Init START/COMPLETE and Destroy/Abort lines kept per file (about 50,000 communicators).
Measured: 200,000 events took 640 MB and a 52 MB resume state before this bound and the
compact events; later lifecycle lines are rejected ("communicator registry full")."""
MAX_PROCESSES = 100_000
"""Processes with a version line, and launcher tags, remembered for ``nccl_version``."""
MAX_BARE_VERSIONS = 1_000
"""Distinct (launcher tag, version) pairs of bare version lines remembered."""
REGISTRY_FULL = (
    f"communicator registry full: more than {MAX_LIFECYCLE_EVENTS} Init/Destroy lines in one "
    "file; this communicator is not stored"
)


_SCAN_COLUMNS = ("line_no", "msg", "host", "pid", "tid", "pre", "spliced")
"""Columns of a split line pass 1 reads (as Python lists: no per-row dict)."""

# --------------------------------------------------------------------------------------------
# Communicator registry (pass 1)
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Inc:
    """One communicator incarnation in one process."""

    host: str
    pid: int
    comm: str
    rank: int
    nranks: int
    cuda_dev: int | None
    nvml_dev: int | None
    bus_id: str | None
    comm_hash: str | None
    parent: str | None
    window_start: int
    split_color: int | None = None
    split_key: int | None = None
    parent_inc: _Inc | None = field(default=None, compare=False, repr=False)
    ident: str | None = None
    first_init_line: int | None = None
    has_start: bool = False
    complete_line: int | None = None
    end_line: int | None = None
    init_tids: set[int] = field(default_factory=set)
    global_rank: int | None = None
    identity_world: bool = False
    nccl_version: str | None = None
    at: int = -1  # its row in the registry's incarnation table

    @property
    def source_line(self) -> int:
        """First Init line, or the Destroy/Abort line when no Init line is known."""
        return self.first_init_line if self.first_init_line is not None else self.end_line or 0


@dataclass
class _Event:
    line_no: int
    host: str
    pid: int
    tid: int
    kind: str  # START | COMPLETE | END
    fields: dict[str, Any]
    spliced: bool


class _WorldOf:
    """The world comm a sub-communicator of a several-GPU process belongs to (O(log n) each).

    Its ``parent`` chain (each step: the latest incarnation of the parent pointer opened at or
    before the child, destroyed or not) up to a world comm; else the world comm on the same bus
    id (or, without one, the same CUDA device) when all those give one rank; else None.
    """

    def __init__(self, incs: list[_Inc], worlds: list[_Inc]) -> None:
        by_comm: dict[str, list[_Inc]] = defaultdict(list)
        for i in incs:
            by_comm[i.comm].append(i)
        self.by_comm: dict[str, tuple[list[int], list[_Inc]]] = {}
        for comm, members in by_comm.items():
            # ties on window_start: the first in ``incs`` order wins, as max() did
            order = sorted(enumerate(members), key=lambda t: (t[1].window_start, -t[0]))
            self.by_comm[comm] = ([m.window_start for _, m in order], [m for _, m in order])
        self.worlds = {id(w) for w in worlds}
        self.by_bus: dict[str, list[_Inc]] = defaultdict(list)
        self.by_dev: dict[int, list[_Inc]] = defaultdict(list)
        for w in worlds:
            if w.bus_id is not None:
                self.by_bus[w.bus_id].append(w)
            if w.cuda_dev is not None:
                self.by_dev[w.cuda_dev].append(w)

    def __call__(self, inc: _Inc) -> _Inc | None:
        cur: _Inc | None = inc
        seen: set[int] = set()
        while cur is not None and cur.parent is not None and id(cur) not in seen:
            seen.add(id(cur))  # a cycle of pointers reaches no world (the scan went round it)
            starts, members = self.by_comm.get(cur.parent, ([], []))
            at = bisect.bisect_right(starts, cur.window_start) - 1
            cur = members[at] if at >= 0 else None
            if cur is not None and id(cur) in self.worlds:
                return cur
        if inc.bus_id is not None:
            same_dev = self.by_bus.get(inc.bus_id, [])
        elif inc.cuda_dev is not None:
            same_dev = self.by_dev.get(inc.cuda_dev, [])
        else:
            same_dev = []
        return same_dev[0] if len({w.rank for w in same_dev}) == 1 else None


@dataclass
class _Registry:
    """Everything pass 1 learns: incarnations, versions, hosts."""

    event_frames: list[pl.DataFrame] = field(default_factory=list)  # rows of _EVENT_SCHEMA
    n_events: int = 0  # rows in event_frames
    known_hosts: set[str] = field(default_factory=set)
    proc_versions: dict[tuple[str, int], str] = field(default_factory=dict)
    bare_versions: list[tuple[str | None, str]] = field(default_factory=list)
    tag_procs: dict[str, set[tuple[str, int]]] = field(default_factory=lambda: defaultdict(set))
    nccl_lines: int = 0  # > 0 once any NCCL line was seen (pass 1 stops counting there)
    full_from: int | None = None  # first lifecycle line past MAX_LIFECYCLE_EVENTS
    proc_global: dict[tuple[str, int], int] = field(default_factory=dict)
    proc_how: dict[tuple[str, int], str] = field(default_factory=dict)  # rank_source if not logged
    world_size: int | None = None
    warnings: list[str] = field(default_factory=list)
    _index: _IncIndex | None = None  # built on the first attribute() call
    _started: pl.DataFrame | None = None  # finalize(): incarnations with a START, per init tid
    inc_table: pl.DataFrame | None = None  # finalize(): the incarnations (_INC_COLUMNS)
    # What the per-process rules decide, one value per row of ``inc_table`` (finalize()):
    # global rank, world comm of its process, identity, version, the parent's identity and
    # nranks (split children).
    inc_global: list[int | None] = field(default_factory=list)
    inc_world: list[bool] = field(default_factory=list)
    inc_ident: list[str | None] = field(default_factory=list)
    inc_version: list[str | None] = field(default_factory=list)
    inc_parent_ident: list[str | None] = field(default_factory=list)
    inc_parent_nranks: list[int | None] = field(default_factory=list)
    _objs: dict[int, _Inc] = field(default_factory=dict)  # rows made objects by the rules
    _all: list[_Inc] | None = None  # every row as an object, made on first use (``incs``)
    _cols: dict[str, list[Any]] = field(default_factory=dict)  # inc_table columns as lists
    _by_start: dict[tuple[str, int, int, int], tuple[list[int], list[int], list[int]]] | None = (
        None  # _started per (host, pid, tid, rank), built on the first attribute() call
    )
    _memo: dict[tuple[Any, ...], tuple[int, int, int | None]] = field(default_factory=dict)
    # (bus id, nvml device, CUDA device) per incarnation row (built with ``_by_start``)
    _devs: list[tuple[str | None, int | None, int | None]] = field(default_factory=list)
    # Lines of *this* parse's range that pass 1 read as lifecycle records (``event_lines``) or
    # as lifecycle records with a number out of range (``unfit_lines``): pass 2 classifies its
    # Init/Destroy lines from them instead of matching each again. Bounded; past the bound
    # (``unsure_from``) pass 2 matches the lines itself.
    event_lines: set[int] = field(default_factory=set)
    event_line_parts: list[pl.Series] = field(default_factory=list)  # below the bound
    n_event_lines: int = 0  # lines in event_line_parts
    unfit_lines: set[int] = field(default_factory=set)
    unsure_from: int | None = None

    def _note_line(self, lines: set[int], line_no: int) -> None:
        if len(lines) < MAX_LIFECYCLE_EVENTS:
            lines.add(line_no)
        elif self.unsure_from is None:
            self.unsure_from = line_no

    def event_line_series(self) -> pl.Series:
        """The lines pass 1 kept as records, as a Series (for a vectorised ``is_in``): the
        parts kept as they were added, or the ``event_lines`` set once a bound cut them short
        (the set is only filled from then on: below the bound the parts are enough)."""
        parts = self.event_line_parts
        if not self.event_lines:
            return pl.concat(parts) if parts else pl.Series("line_no", [], dtype=pl.Int64)
        return pl.Series("line_no", list(self.event_lines), dtype=pl.Int64)

    def lifecycle_status(self, line_no: int) -> str | bool | None:
        """Pass 1's verdict on an INFO Init/Destroy-like line of this range that is not in
        :meth:`event_line_series` (records pass 1 kept): None (a record it kept), ``"unfit"`` (a number out of range), ``"nofit"`` (no full pattern), or False
        when pass 1 cannot tell (past a bound: the caller matches the line itself)."""
        if line_no in self.event_lines:
            return None
        if line_no in self.unfit_lines:
            return "unfit"
        if (self.full_from is not None and line_no >= self.full_from) or (
            self.unsure_from is not None and line_no >= self.unsure_from
        ):
            return False
        return "nofit"

    # -- pass 1 ------------------------------------------------------------------------------

    def scan(self, data: bytes, first_line_no: int) -> None:
        """Collect lifecycle and version lines of one block of whole lines (raw bytes).

        The hints are ASCII, so searching the bytes finds exactly the lines whose decoded
        text matches ``_LIFECYCLE_HINT``; only those lines are decoded and split.
        """
        if not self.nccl_lines:  # only "none at all" matters: stop at the first
            self.nccl_lines += any(k in data for k in _NCCL_LINE_KEYS)
        starts: set[int] = set()
        for key in _LIFECYCLE_KEYS:
            pos = data.find(key)
            while pos >= 0:
                start = data.rfind(b"\n", 0, pos) + 1
                starts.add(start)
                end = data.find(b"\n", pos)
                pos = data.find(key, end if end >= 0 else len(data))
        if not starts:
            return
        sub: list[str] = []
        nos: list[int] = []
        line_no, prev = first_line_no, 0
        for start in sorted(starts):
            line_no += data.count(b"\n", prev, start)
            prev = start
            end = data.find(b"\n", start)
            text = data[start : end if end >= 0 else len(data)].decode("utf-8", errors="replace")
            sub.append(text[:-1] if text.endswith("\r") else text)
            nos.append(line_no)
        self._scan_selected(sub, nos)

    def scan_split(self, lines: pl.Series, prefixed: pl.DataFrame, bare: pl.DataFrame) -> None:
        """:meth:`scan` of a block that pass 2 has already split (the one-pass parse:
        ``prefixed``/``bare`` from :func:`_split_block` of the block's lines that are not
        plain COLL lines, which never hold a hint). The same lines are selected (the hints
        are ASCII, so a decoded line holds one exactly when its bytes do) and read as
        :meth:`scan` reads them.

        Only the host repair differs between the two splits: pass 1 repairs with the hosts of
        the lifecycle and version lines alone. So the clean hosts are learnt as :meth:`scan`
        learns them, and the lines whose host a split repairs (glued to foreign text, or
        spliced) and the lines without a usable prefix are split again with those hosts.
        Why: splitting the hint lines a second time cost ~0.6 us a line, and a file of 10,000
        incarnations has 29,000 lifecycle lines (issue 21, item 1).
        """
        if not self.nccl_lines:  # only "none at all" matters: stop at the first
            self.nccl_lines += bool(lines.str.contains(_NCCL_LINE_HINT).any())
        hint = pl.col("raw").str.contains(_LIFECYCLE_HINT)
        hp = prefixed.filter(hint)
        hb = bare.filter(hint)
        if not hp.height and not hb.height:
            return
        odd = hp.select((pl.col("spliced") | ~pl.col("pre").str.contains(_TAG_ONLY)).alias("o"))
        odd_rows = odd.get_column("o")
        plain = hp.filter(~odd_rows) if odd_rows.any() else hp
        _add_hosts(self.known_hosts, plain.get_column("host").unique().to_list())
        if plain.height < hp.height or hb.height:
            again = pl.concat([hp.filter(odd_rows).select("raw", "line_no"), hb])
            redo, hb = _split_block(again["raw"], again["line_no"], self.known_hosts)
            hp = pl.concat([plain, redo]).sort("line_no")
        self._scan_rows(hp, hb)

    def _scan_selected(self, sub: list[str], nos: list[int]) -> None:
        """Pass 1 on the lines holding a lifecycle or version hint (numbers ``nos``).

        Lifecycle lines are matched by Polars (``_INIT_RE``/``_END_RE``, the same patterns in
        Rust's engine) and kept as columns (:data:`_EVENT_SCHEMA`), not as a Python object and
        a dict per line: a file of 10,000 incarnations has 29,000 of them (issue 21, item 1).
        Version and launcher-tagged lines (few) are read per line as before.
        """
        prefixed, bare = _split_block(sub, nos, self.known_hosts)
        self._scan_rows(prefixed, bare)

    def _scan_rows(self, prefixed: pl.DataFrame, bare: pl.DataFrame) -> None:
        """Pass 1 on the split hint lines (``prefixed``/``bare`` of :func:`_split_block`)."""
        info = prefixed.filter(pl.col("level") == "INFO")
        is_version = pl.col("msg").str.starts_with("NCCL version")
        versions = info.filter(is_version)
        for host, pid, msg in versions.select("host", "pid", "msg").iter_rows():
            vm = _VERSION_RE.match(msg)
            if vm and len(self.proc_versions) < MAX_PROCESSES:
                self.proc_versions.setdefault((host, pid), vm.group("ver"))
        rest = info.filter(~is_version)
        tagged = rest.filter(pl.col("pre").is_not_null() & (pl.col("pre") != ""))
        for pre, host, pid in tagged.select("pre", "host", "pid").iter_rows():
            tag = _launcher_tag(pre)
            if tag and (tag in self.tag_procs or len(self.tag_procs) < MAX_PROCESSES):
                procs = self.tag_procs[tag]
                if len(procs) < 2:  # only "exactly one process" matters (_assign_versions)
                    procs.add((host, pid))
        if rest.height:
            self._scan_lifecycle(rest)
        for row in bare.iter_rows(named=True):
            bm = _BARE_VERSION_RE.match(row["raw"])
            if bm:
                pair = (_launcher_tag(bm.group("pre")), bm.group("ver"))
                # The first of each pair decides (_assign_versions): repeats add nothing.
                if pair not in self.bare_versions and len(self.bare_versions) < MAX_BARE_VERSIONS:
                    self.bare_versions.append(pair)

    def _scan_lifecycle(self, rest: pl.DataFrame) -> None:
        """Match the INFO lines of ``rest`` against ``_INIT_RE`` then ``_END_RE``; keep the
        records whose numbers fit (``_init_fits``) as event rows, up to
        ``MAX_LIFECYCLE_EVENTS`` (then ``full_from``), and note pass 1's verdicts."""
        rest = rest.select("line_no", "host", "pid", "tid", "spliced", "msg")
        plain = rest.get_column("msg").str.contains(_PLAIN_LIFECYCLE)
        parts = [_plain_lifecycle_rows(rest.filter(plain))] if plain.any() else []
        if not plain.all():
            parts.append(_captured_lifecycle_rows(rest.filter(~plain)))
        m = pl.concat(parts).sort("line_no") if len(parts) > 1 else parts[0]
        m = m.filter(pl.col("kind").is_not_null())
        if not m.height:
            return
        # A number of 10+ characters may not fit int32: those rows (rare) are checked in Python.
        long = pl.any_horizontal(
            pl.col(c).str.len_chars() >= 10 for c in (*_INIT_NUMBERS, *_SPLIT_NUMBERS)
        ).fill_null(False)
        check = m.select(long.alias("long"))["long"].arg_true()
        kept = m
        if check.len():
            rows = m.select(*_INIT_NUMBERS, *_SPLIT_NUMBERS)[check.to_list()]
            fits = pl.Series("fits", [True] * m.height, dtype=pl.Boolean).scatter(
                check, [_init_fits(r) for r in rows.iter_rows(named=True)]
            )
            for line_no in m.filter(~fits)["line_no"].to_list():
                self._note_line(self.unfit_lines, line_no)  # (pass 2 rejects the line)
            kept = m.filter(fits)
        room = MAX_LIFECYCLE_EVENTS - self.n_events
        if kept.height > room:  # pass 2 rejects the rest (REGISTRY_FULL)
            if self.full_from is None:
                self.full_from = int(kept["line_no"][max(room, 0)])
            kept = kept.head(max(room, 0))
        if not kept.height:
            return
        self.event_frames.append(kept)
        self.n_events += kept.height
        if not self.event_lines and self.n_event_lines + kept.height < MAX_LIFECYCLE_EVENTS:
            self.event_line_parts.append(kept["line_no"])
            self.n_event_lines += kept.height
        else:  # the bound: from here on a set, filled up to it (then ``unsure_from``)
            if not self.event_lines:
                for part in self.event_line_parts:
                    self.event_lines.update(part.to_list())
            for line_no in kept["line_no"].to_list():
                self._note_line(self.event_lines, line_no)

    # -- resume state ------------------------------------------------------------------------

    def raw_state(self) -> dict[str, Any]:
        """Pass 1's raw material as JSON-serialisable data (before :meth:`finalize`).

        State version 2: the lifecycle events as columns (``events``: one list per prefix
        field and per pattern group, null where a group did not take part), not a list and a
        dict per event as in version 1 (still read, :meth:`restore`; :func:`state_v1` gives a
        version-2 state in version 1's form). Why: 10,000 incarnations made 29,000 events, and
        building and encoding their lists and dicts cost more than the rest of the state.
        """
        ev = self._event_frame()
        return {
            "v": STATE_VERSION,
            "events": _encode_events(ev),
            "known_hosts": sorted(self.known_hosts),
            "proc_versions": [[h, p, v] for (h, p), v in self.proc_versions.items()],
            "bare_versions": [list(t) for t in self.bare_versions],
            "tag_procs": {t: sorted([h, p] for h, p in ps) for t, ps in self.tag_procs.items()},
            "nccl_lines": self.nccl_lines,
            "full_from": self.full_from,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Start from the raw material of :meth:`raw_state` (an earlier parse's prefix): a
        version-2 state, or a version-1 one (stores written before issue 21's columnar
        registry)."""
        version = state.get("v")
        if version == 1:
            events = [
                _Event(int(n), str(h), int(p), int(t), str(k), dict(f), bool(sp))
                for n, h, p, t, k, f, sp in state.get("events", [])
            ]
            self.event_frames = [_events_frame(events)] if events else []
        elif version == STATE_VERSION:
            ev = _state_events(state.get("events") or {})
            self.event_frames = [ev] if ev.height else []
        else:
            return
        self.n_events = sum(f.height for f in self.event_frames)
        self.known_hosts = set(state.get("known_hosts", []))
        self.proc_versions = {(h, int(p)): v for h, p, v in state.get("proc_versions", [])}
        self.bare_versions = [(t, v) for t, v in state.get("bare_versions", [])]
        for tag, procs in state.get("tag_procs", {}).items():
            self.tag_procs[tag] = {(h, int(p)) for h, p in procs}
        self.nccl_lines = int(state.get("nccl_lines", 0))
        full_from = state.get("full_from")
        self.full_from = int(full_from) if full_from is not None else None

    # -- after pass 1 ------------------------------------------------------------------------

    def finalize(self) -> None:
        """Build incarnations, world size, global ranks, memberships and versions.

        The incarnations are cut from the event columns by Polars (events in (host, pid,
        comm, line) order; a ``COMPLETE`` right after a ``START`` of the same rank completes
        it, an ``END`` closes the open one, every other event opens one: the rules of the
        module docstring), then made into :class:`_Inc` objects for the per-process rules.
        """
        incs = _incarnations(self._event_frame(), self.known_hosts)
        self.inc_table = incs
        self._started = (
            incs.with_row_index("inc")
            .filter("has_start")
            .select("host", "pid", "rank", "first_init_line", "end_line", "inc", tid="init_tids")
            .explode("tid")
            .sort("first_init_line")
        )
        n = incs.height
        self.world_size = incs.get_column("nranks").max()  # type: ignore[assignment]
        self.inc_parent_ident = [None] * n
        self.inc_parent_nranks = [None] * n
        if not n:
            self._assign_versions([])
            return
        # Per process: how many distinct ranks its world-size comms give, that rank, and
        # whether it has split children (a parent pointer). A process with one world rank (or
        # none) and no split child is decided by columns: every row gets that rank, its world
        # comms are its identity worlds, a logged commId is the identity. The others (several
        # GPUs in one process, split children) go through the rules on objects.
        is_world = pl.col("nranks") == self.world_size
        procs = incs.group_by("host", "pid", maintain_order=True).agg(
            n=pl.len(),
            n_ranks=pl.col("rank").filter(is_world).n_unique(),
            world_rank=pl.col("rank").filter(is_world).first(),
            parents=pl.col("parent").is_not_null().any(),
        )
        hard = (pl.col("n_ranks") > 1) | pl.col("parents")
        single = pl.col("n_ranks") == 1
        rows = incs.select("host", "pid", "nranks").join(
            procs, on=["host", "pid"], how="left", maintain_order="left"
        )
        decided = rows.select(
            glob=pl.when(single & ~hard).then(pl.col("world_rank")),
            world=(single & ~hard & is_world).fill_null(False),
            hard=hard,
        )
        self.inc_global = decided.get_column("glob").to_list()
        self.inc_world = decided.get_column("world").to_list()
        self.inc_ident = incs.get_column("comm_hash").to_list()
        for host, pid, world_rank in (
            procs.filter(single & ~hard).select("host", "pid", "world_rank").iter_rows()
        ):
            self.proc_global[(host, pid)] = world_rank
        at = decided.get_column("hard").arg_true()
        if at.len():
            self._hard_rules(incs, at.to_list())
        self._assign_versions(procs.select("host", "pid", "n").rows())

    def _hard_rules(self, incs: pl.DataFrame, at: list[int]) -> None:
        """The per-process rules on objects for the rows ``at`` (whole processes: several
        GPUs in one process, or split children), in process order as the columns are."""
        made = self._make(incs, at)
        self._objs.update(zip(at, made, strict=True))
        with_parent = set(
            incs[at].filter(pl.col("parent").is_not_null()).select("host", "pid").rows()
        )
        # rows are in (host, pid, ...) order: each process's incarnations are consecutive
        for proc, group in itertools.groupby(made, key=_proc_of):
            incs_of = list(group)
            self._assign_global(proc, incs_of)
            if proc in with_parent:
                self._link_parents(incs_of)
        ident = self._ident
        for inc in made:  # a logged commId is the identity (_ident's first step)
            inc.ident = inc.comm_hash if inc.comm_hash is not None else ident(inc)
        for n, inc in zip(at, made, strict=True):
            self.inc_global[n] = inc.global_rank
            self.inc_world[n] = inc.identity_world
            self.inc_ident[n] = inc.ident
            parent = inc.parent_inc
            if parent is not None:
                self.inc_parent_ident[n] = parent.ident
                self.inc_parent_nranks[n] = parent.nranks

    @staticmethod
    def _make(incs: pl.DataFrame, at: list[int] | None = None) -> list[_Inc]:
        """:class:`_Inc` objects of the rows ``at`` (all when None) of the incarnation table."""
        rows = incs[at] if at is not None else incs
        make = _Inc
        made = [
            make(*vals[:13], None, None, *vals[13:17], set(vals[17]))
            for vals in zip(*(rows.get_column(c).to_list() for c in _INC_COLUMNS), strict=True)
        ]
        for n, inc in zip(at if at is not None else range(len(made)), made, strict=True):
            inc.at = n
        return made

    @property
    def n_incs(self) -> int:
        """Incarnations found (after :meth:`finalize`)."""
        return self.inc_table.height if self.inc_table is not None else 0

    @property
    def incs(self) -> list[_Inc]:
        """Every incarnation as an :class:`_Inc` (in ``inc_table`` order), made on first use:
        the index of :meth:`attribute` and the tests read objects; the parse itself reads the
        columns (a file of 10,000 incarnations made 10,000 objects, ~1 us each)."""
        if self._all is None:
            table = self.inc_table
            if table is None:
                return []
            made = self._make(table)
            for n, obj in self._objs.items():
                made[n] = obj
            for n, inc in enumerate(made):
                if n not in self._objs:
                    inc.global_rank = self.inc_global[n]
                    inc.identity_world = self.inc_world[n]
                    inc.ident = self.inc_ident[n]
                inc.nccl_version = self.inc_version[n]
            self._all = made
        return self._all

    @property
    def by_proc(self) -> dict[tuple[str, int], list[_Inc]]:
        """:attr:`incs` per process."""
        out: dict[tuple[str, int], list[_Inc]] = {}
        for inc in self.incs:
            out.setdefault((inc.host, inc.pid), []).append(inc)
        return out

    def inc_column(self, name: str) -> list[Any]:
        """A column of ``inc_table`` as a list (kept)."""
        got = self._cols.get(name)
        if got is None:
            assert self.inc_table is not None  # set by finalize()
            got = self._cols[name] = self.inc_table.get_column(name).to_list()
        return got

    def _event_frame(self) -> pl.DataFrame:
        """Every event kept, as one frame of :data:`_EVENT_SCHEMA`."""
        frames = self.event_frames
        if not frames:
            return pl.DataFrame(schema=_EVENT_SCHEMA)
        return pl.concat(frames, how="vertical") if len(frames) > 1 else frames[0]

    @staticmethod
    def _link_parents(incs: list[_Inc]) -> None:
        """Tie each split child to its parent's incarnation in the same process.

        The parent is the latest incarnation of the logged parent pointer that opened before the
        child and was not closed before it (a destroyed pointer may be reused by a later comm).
        Incarnations of each pointer are sorted once; each child costs O(log n).
        """
        by_comm: dict[str, list[_Inc]] = defaultdict(list)
        for i in incs:
            by_comm[i.comm].append(i)
        trees: dict[str, tuple[list[int], list[_Inc], _MaxTree]] = {}
        for inc in incs:
            if inc.parent is None or inc.parent not in by_comm:
                continue
            got = trees.get(inc.parent)
            if got is None:
                # ties on window_start: the first in ``incs`` order wins, as max() did
                order = sorted(
                    enumerate(by_comm[inc.parent]), key=lambda t: (t[1].window_start, -t[0])
                )
                ps = [p for _, p in order]
                got = trees[inc.parent] = (
                    [p.window_start for p in ps],
                    ps,
                    _MaxTree([_end_key(p) for p in ps]),
                )
            starts, ps, tree = got
            at = tree.rightmost_at_least(
                bisect.bisect_right(starts, inc.window_start), inc.window_start
            )
            if at >= 0 and ps[at] is inc:  # never its own parent: the next one before it
                at = tree.rightmost_at_least(at, inc.window_start)
            inc.parent_inc = ps[at] if at >= 0 else None

    @staticmethod
    def _ident(inc: _Inc) -> str | None:
        """Identity of a communicator, the same on every member (None when unknown).

        Its ``commId`` when logged; for a split child without one (NCCL 2.21+ split lines),
        ``split:<parent identity>/<parent nranks>:<color>``: the members of one child are
        exactly the ranks of one parent that passed the same color.
        """
        chain: list[_Inc] = []
        cur: _Inc | None = inc
        while cur is not None and cur.comm_hash is None and all(c is not cur for c in chain):
            chain.append(cur)
            cur = cur.parent_inc
        if cur is None or cur.comm_hash is None:
            return None
        ident = cur.comm_hash
        for child in reversed(chain):
            parent = child.parent_inc
            if parent is None or child.split_color is None:
                return None
            ident = f"split:{ident}/{parent.nranks}:{child.split_color}"
        return ident

    def _assign_global(self, proc: tuple[str, int], incs: list[_Inc]) -> None:
        worlds = [i for i in incs if i.nranks == self.world_size]
        ranks = {i.rank for i in worlds}
        if not worlds:
            return
        if len(ranks) == 1:
            self._single(proc, incs, worlds, worlds[0].rank)
            return
        devices = {(i.bus_id, i.cuda_dev) for i in worlds}
        if len(devices) < len(ranks):
            first = min(worlds, key=lambda i: i.window_start)
            self.warnings.append(
                f"{proc[0]}:{proc[1]} is in several world-size communicators with different "
                f"ranks on one device; global rank taken from the first ({first.rank})"
            )
            self._single(proc, incs, [i for i in worlds if i.rank == first.rank], first.rank)
            return
        for w in worlds:  # one process, several GPUs: per-incarnation global rank
            w.global_rank, w.identity_world = w.rank, True
        world_of = _WorldOf(incs, worlds)
        for inc in incs:
            if inc.global_rank is None:
                world = world_of(inc)
                inc.global_rank = world.rank if world else None

    def _single(
        self, proc: tuple[str, int], incs: list[_Inc], worlds: list[_Inc], rank: int
    ) -> None:
        self.proc_global[proc] = rank
        for inc in incs:
            inc.global_rank = rank
        for w in worlds:
            w.identity_world = True

    def _assign_versions(self, procs: list[tuple[str, int, int]]) -> None:
        """``inc_version``: one version per process (``procs``: host, pid and its number of
        rows, in row order)."""
        by_proc = dict(self.proc_versions)
        for tag, ver in self.bare_versions:
            tagged = self.tag_procs.get(tag or "", set())
            if len(tagged) == 1:
                by_proc.setdefault(next(iter(tagged)), ver)
        if len(procs) == 1 and self.bare_versions:
            by_proc.setdefault((procs[0][0], procs[0][1]), self.bare_versions[0][1])
        host_versions: dict[str, set[str]] = defaultdict(set)
        for (host, _), ver in by_proc.items():
            host_versions[host].add(ver)
        distinct = set(self.proc_versions.values()) | {v for _, v in self.bare_versions}
        fallback = next(iter(distinct)) if len(distinct) == 1 else None
        inferred = 0
        versions: list[str | None] = []
        for host, pid, n in procs:  # every inc of a process: one version
            ver = by_proc.get((host, pid))
            if ver is None:
                on_host = host_versions.get(host, set())
                ver = next(iter(on_host)) if len(on_host) == 1 else fallback
                inferred += n if ver is not None else 0
            versions.extend(itertools.repeat(ver, n))
        self.inc_version = versions
        if inferred:
            self.warnings.append(
                f"nccl_version of {inferred} communicators inferred from other processes of the "
                "same host or file (those processes logged no version line themselves)"
            )

    # -- lookups used by pass 2 --------------------------------------------------------------

    def inc_frame(self) -> pl.DataFrame:
        """Incarnations as a frame for the as-of join of COLL lines."""
        schema = {
            "host": pl.Utf8,
            "pid": pl.Int64,
            "comm_key": pl.Utf8,
            "window_start": pl.Int64,
            "window_end": pl.Int64,
            "group_rank": pl.Int32,
            "inc_global": pl.Int32,
            "comm_hash": pl.Utf8,
            "identity_world": pl.Boolean,
        }
        cols: dict[str, list[Any]] = {
            "inc_global": self.inc_global,
            "comm_hash": self.inc_ident,
            "identity_world": self.inc_world,
        }
        table = self.inc_table
        assert table is not None  # set by finalize()
        # what finalize() cut stays in columns; the per-process rules' results join it
        frame = table.select(
            "host",
            "pid",
            comm_key="comm",
            window_start="window_start",
            window_end="end_line",
            group_rank=pl.col("rank").cast(pl.Int32, strict=False),
            **{
                c: pl.Series(cols[c], dtype=schema[c], strict=False)
                for c in ("inc_global", "comm_hash", "identity_world")
            },
        )
        return frame.select(list(schema)).sort("window_start")

    def proc_frame(self) -> pl.DataFrame:
        """Process-level global ranks (single-GPU processes)."""
        keys = list(self.proc_global)
        return pl.DataFrame(
            {
                "host": [k[0] for k in keys],
                "pid": [k[1] for k in keys],
                "proc_global": [self.proc_global[k] for k in keys],
                "proc_how": [self.proc_how.get(k, "logged") for k in keys],
            },
            schema={
                "host": pl.Utf8,
                "pid": pl.Int64,
                "proc_global": pl.Int32,
                "proc_how": pl.Utf8,
            },
            strict=False,  # a corrupt line's out-of-range number becomes null, never a crash
        )

    def attribute(
        self, host: str, pid: int, tid: int, line_no: int, me_rank: int | None, me_dev: str | None
    ) -> _Inc | None:
        """The incarnation a topology line of (host, pid, tid) at ``line_no`` belongs to.

        The rule (module docstring, topology) over the process's incarnations that match the
        line (its rank and device) and are live at it: on the line's thread the latest one
        whose Init START is at or before the line, else the earliest whose Init COMPLETE is at
        or after it; else, among those on the thread (if any) or all, the only one, else the
        latest by ``source_line`` at or before the line, else the earliest after it.
        Answered from :class:`_IncIndex` in O(log n) per line (n = incarnations of the
        process), with the same result as a scan of every incarnation.
        """
        at = self.attribute_at(host, pid, tid, line_no, me_rank, me_dev)
        return self.incs[at] if at is not None else None

    def attribute_at(
        self, host: str, pid: int, tid: int, line_no: int, me_rank: int | None, me_dev: str | None
    ) -> int | None:
        """:meth:`attribute` as the incarnation's row in ``inc_table`` (no object made when
        the START lines answer)."""
        # The answer only changes where some incarnation of the process starts, completes,
        # ends or has its source line: remembered per query key for the interval between two
        # such lines (consecutive topology lines of one init mostly fall in one interval).
        key = (host, pid, tid, me_rank, me_dev)
        memo = self._memo
        got = memo.get(key)
        if got is not None and got[0] <= line_no < got[1]:
            return got[2]
        if len(memo) >= _ATTRIBUTE_MEMO:
            memo.clear()
        fast = self._started_on_thread(host, pid, tid, line_no, me_rank, me_dev)
        if fast is not None:
            memo[key] = fast
            return fast[2]
        if self._index is None:
            self._index = _IncIndex(self.incs)
        idx = self._index
        found = self._attribute(idx, host, pid, tid, line_no, me_rank, me_dev)
        lo, hi = idx.interval(host, pid, line_no)
        at = found.at if found is not None else None
        memo[key] = (lo, hi, at)
        return at

    def _started_on_thread(
        self, host: str, pid: int, tid: int, line_no: int, me_rank: int | None, me_dev: str | None
    ) -> tuple[int, int, int] | None:
        """The common case of :meth:`attribute` without the index: a line on the thread that
        initialises its comm. The incarnation of the process with the line's rank whose Init
        START on this thread is the latest at or before the line, when it is live at the line
        and its device fits, is what the rule picks (the latest of those live); it stays the
        answer for this query key from its START until the next START of the key's thread and
        rank or its end, the interval returned with it (and its row). None when that does not
        hold (the caller asks the index). O(log n): a bisection in the key's START lines.

        Why: 10,000 incarnations made 10,000 distinct query keys, each building index groups
        (~7 us) for a question the START lines answer (issue 21, item 1)."""
        if not _FAST_ATTRIBUTION or me_rank is None:
            return None
        by_start = self._by_start
        if by_start is None:
            by_start = self._by_start = _starts_by_thread(self._started)
            self._devs = list(
                zip(
                    self.inc_column("busid"),
                    self.inc_column("nvmldev"),
                    self.inc_column("cudadev"),
                    strict=True,
                )
            )
        got = by_start.get((host, pid, tid, me_rank))
        if got is None:
            return None
        starts, ends, which = got
        at = bisect.bisect_right(starts, line_no) - 1
        if at < 0 or ends[at] < line_no:
            return None
        row = which[at]
        if me_dev is not None and not _dev_fits(*self._devs[row], me_dev):
            return None
        hi = min(ends[at] + 1, starts[at + 1] if at + 1 < len(starts) else _NEVER)
        return starts[at], hi, row

    @staticmethod
    def _attribute(
        idx: _IncIndex,
        host: str,
        pid: int,
        tid: int,
        line_no: int,
        me_rank: int | None,
        me_dev: str | None,
    ) -> _Inc | None:
        cands = idx.group(host, pid, None, me_rank, me_dev)
        if cands is None or cands.n_live(line_no) == 0:
            return None
        on_tid = idx.group(host, pid, tid, me_rank, me_dev)
        if on_tid is not None and on_tid.n_live(line_no):
            found = on_tid.latest_started(line_no) or on_tid.earliest_pending(line_no)
            if found is not None:
                return found
            cands = on_tid
        if cands.n_live(line_no) == 1:
            return cands.last_to_end
        return cands.latest_before(line_no) or cands.earliest_after(line_no)


_FAST_ATTRIBUTION = True
"""Whether :meth:`_Registry.attribute` answers a line on its comm's init thread from the START
lines alone (:meth:`_Registry._started_on_thread`) before building the index (tests turn it
off to measure the index alone)."""
_NEVER = 1 << 62
"""End line of an incarnation never destroyed (live at every later line)."""
_ATTRIBUTE_MEMO = 20_000
"""Query keys whose last answer :meth:`_Registry.attribute` keeps (then it starts afresh)."""


def _starts_by_thread(
    started: pl.DataFrame | None,
) -> dict[tuple[str, int, int, int], tuple[list[int], list[int], list[int]]]:
    """Incarnations with an Init START, per (host, pid, init tid, rank): their START lines
    (ascending), end lines (``_NEVER`` when never destroyed) and positions in ``incs``."""
    out: dict[tuple[str, int, int, int], tuple[list[int], list[int], list[int]]] = {}
    if started is None or started.is_empty():
        return out
    groups = (
        started.sort("first_init_line")
        .group_by("host", "pid", "tid", "rank", maintain_order=True)
        .agg("first_init_line", pl.col("end_line").fill_null(_NEVER), "inc")
    )
    for host, pid, tid, rank, starts, ends, incs in groups.iter_rows():
        out[(host, pid, tid, rank)] = (starts, ends, incs)
    return out


def _proc_of(inc: _Inc) -> tuple[str, int]:
    return inc.host, inc.pid


def _end_key(inc: _Inc) -> int:
    return _NEVER if inc.end_line is None else inc.end_line


class _MaxTree:
    """Segment tree of maxima over a list of ints: the rightmost index below a bound whose
    value is at least ``x``, in O(log n) (``steps`` counts the nodes visited)."""

    def __init__(self, values: list[int]) -> None:
        size = 1
        while size < len(values):
            size *= 2
        self.size = size
        self.tree = [-1] * (2 * size)
        self.tree[size : size + len(values)] = values
        for i in range(size - 1, 0, -1):
            self.tree[i] = max(self.tree[2 * i], self.tree[2 * i + 1])
        self.steps = 0

    def rightmost_at_least(self, hi: int, x: int) -> int:
        """The largest ``i < hi`` with ``values[i] >= x``; -1 if none."""
        if hi <= 0:
            return -1
        tree, size = self.tree, self.size
        # Walk up from leaf hi - 1: each left sibling that holds a value >= x bounds the answer;
        # then descend into the rightmost qualifying child. Both walks are O(log n).
        i = hi - 1 + size
        while True:
            self.steps += 1
            if tree[i] >= x:
                break
            while i > 1 and i % 2 == 0:  # a left child: its left neighbours are not subtrees
                i //= 2
            if i <= 1:
                return -1
            i -= 1  # the subtree just left of the covered range
        while i < size:
            self.steps += 1
            i = 2 * i + 1 if tree[2 * i + 1] >= x else 2 * i
        return i - size


class _IncGroup:
    """The incarnations of one (host, pid[, tid][, rank][, device]) sorted three ways, with
    the trees and sorted ends that answer :meth:`_Registry.attribute`'s queries in O(log n).

    Each order and its tree is built on its first query (most groups answer one kind: a line
    on its init thread needs the START order of its thread's group and the ends of the
    process's; 10,000 incarnations made 4,000 groups, each building all three)."""

    def __init__(self, incs: list[_Inc]) -> None:
        self.incs = incs
        self.ends = sorted(_end_key(i) for i in incs)
        self.last_to_end = max(incs, key=_end_key) if incs else None
        self._src: tuple[list[int], list[_Inc], _MaxTree] | None = None
        self._start: tuple[list[int], list[_Inc], _MaxTree] | None = None
        self._pending: tuple[list[int], list[_Inc]] | None = None

    @property
    def steps(self) -> int:
        return sum(t[2].steps for t in (self._src, self._start) if t is not None)

    def _by_src(self) -> tuple[list[int], list[_Inc], _MaxTree]:
        if self._src is None:
            by_src = sorted(self.incs, key=lambda i: i.source_line)
            keys = [i.source_line for i in by_src]
            self._src = (keys, by_src, _MaxTree([_end_key(i) for i in by_src]))
        return self._src

    def _started(self) -> tuple[list[int], list[_Inc], _MaxTree]:
        if self._start is None:
            started = sorted(
                (i for i in self.incs if i.has_start and i.first_init_line is not None),
                key=lambda i: i.first_init_line or 0,
            )
            keys = [i.first_init_line or 0 for i in started]
            self._start = (keys, started, _MaxTree([_end_key(i) for i in started]))
        return self._start

    def n_live(self, line_no: int) -> int:
        """How many are live at ``line_no`` (not destroyed before it)."""
        return len(self.ends) - bisect.bisect_left(self.ends, line_no)

    def latest_started(self, line_no: int) -> _Inc | None:
        """Latest Init START at or before ``line_no`` among those live at it."""
        keys, started, tree = self._started()
        at = tree.rightmost_at_least(bisect.bisect_right(keys, line_no), line_no)
        return started[at] if at >= 0 else None

    def earliest_pending(self, line_no: int) -> _Inc | None:
        """Earliest Init COMPLETE at or after ``line_no`` (live there: destroyed after it)."""
        if self._pending is None:
            pending = sorted(
                (i for i in self.incs if i.complete_line is not None),
                key=lambda i: i.complete_line or 0,
            )
            self._pending = ([i.complete_line or 0 for i in pending], pending)
        keys, pending = self._pending
        at = bisect.bisect_left(keys, line_no)
        return pending[at] if at < len(pending) else None

    def latest_before(self, line_no: int) -> _Inc | None:
        """Latest ``source_line`` at or before ``line_no`` among those live at it."""
        keys, by_src, tree = self._by_src()
        at = tree.rightmost_at_least(bisect.bisect_right(keys, line_no), line_no)
        return by_src[at] if at >= 0 else None

    def earliest_after(self, line_no: int) -> _Inc | None:
        """Earliest ``source_line`` after ``line_no`` (live there: it starts later)."""
        keys, by_src, _ = self._by_src()
        at = bisect.bisect_right(keys, line_no)
        return by_src[at] if at < len(by_src) else None


class _IncIndex:
    """Incarnations grouped by (host, pid, init tid or None, rank or None); device-filtered
    groups are derived from these on first use. Built in O(n) lists, each group sorted once."""

    def __init__(self, incs: list[_Inc]) -> None:
        lists: dict[tuple[str, int, int | None, int | None], list[_Inc]] = defaultdict(list)
        for inc in incs:
            for tid in (None, *sorted(inc.init_tids)):
                lists[(inc.host, inc.pid, tid, None)].append(inc)
                lists[(inc.host, inc.pid, tid, inc.rank)].append(inc)
        self.lists = dict(lists)
        self.groups: dict[tuple[str, int, int | None, int | None, str | None], _IncGroup] = {}
        self._breaks: dict[tuple[str, int], list[int]] = {}

    def interval(self, host: str, pid: int, line_no: int) -> tuple[int, int]:
        """The lines ``[lo, hi)`` around ``line_no`` where no incarnation of the process
        starts (``first_init_line``, ``source_line``), stops being pending
        (``complete_line + 1``) or stops being live (``end_line + 1``): every query of
        :meth:`_Registry.attribute` gives one answer over it."""
        marks = self._breaks.get((host, pid))
        if marks is None:
            points: set[int] = set()
            for inc in self.lists.get((host, pid, None, None), []):
                points.add(inc.source_line)
                if inc.first_init_line is not None:
                    points.add(inc.first_init_line)
                if inc.complete_line is not None:
                    points.add(inc.complete_line + 1)
                if inc.end_line is not None:
                    points.add(inc.end_line + 1)
            marks = self._breaks[(host, pid)] = sorted(points)
        at = bisect.bisect_right(marks, line_no)
        lo = marks[at - 1] if at > 0 else -_NEVER
        hi = marks[at] if at < len(marks) else _NEVER
        return lo, hi

    @property
    def steps(self) -> int:
        """Tree nodes visited by all queries so far (the scale test's structural measure)."""
        return sum(g.steps for g in self.groups.values())

    def group(
        self, host: str, pid: int, tid: int | None, rank: int | None, dev: str | None
    ) -> _IncGroup | None:
        key = (host, pid, tid, rank, dev)
        got = self.groups.get(key)
        if got is None:
            incs = self.lists.get((host, pid, tid, rank))
            if incs is None:
                return None
            if dev is not None:
                incs = [i for i in incs if _dev_matches(i, dev)]
            got = self.groups[key] = _IncGroup(incs)
        return got


_INIT_NUMBERS = ("rank", "nranks", "cudadev", "nvmldev")
"""Init/Destroy numbers stored as int32 (ranks, counts, devices)."""
_SPLIT_NUMBERS = ("color", "key")
"""ncclCommSplit's color and key: C ints, stored as int64 (split_color, split_key). PyTorch passes
a hash of the group's ranks as the color, often 10 digits (``color 2130503744``, NCCL 2.28.9 via
torch 2.11), so a digit count is not a range check."""


def _captured_lifecycle_rows(rest: pl.DataFrame) -> pl.DataFrame:
    """Event rows of ``rest`` (``line_no, host, pid, tid, spliced, msg``) by ``_INIT_RE`` then
    ``_END_RE`` (Polars' captures); ``kind`` null where neither matches."""
    init = pl.col("msg").str.extract_groups(_INIT_RE.pattern)
    end = pl.col("msg").str.extract_groups(_END_RE.pattern)
    m = rest.select("line_no", "host", "pid", "tid", "spliced", i=init, e=end).with_columns(
        kind=pl.when(pl.col("i").struct.field("phase").is_not_null())
        .then(pl.col("i").struct.field("phase"))
        .when(pl.col("e").struct.field("comm").is_not_null())
        .then(pl.lit("END"))
    )
    is_init = pl.col("kind") != "END"
    return m.select(
        *_EVENT_HEAD,
        *(
            pl.when(is_init)
            .then(pl.col("i").struct.field(name) if name in _INIT_GROUPS else None)
            .otherwise(pl.col("e").struct.field(name) if name in _END_GROUPS else None)
            .cast(pl.Utf8)
            .alias(name)
            for name in _EVENT_FIELDS
        ),
    )


def _plain_lifecycle_rows(rest: pl.DataFrame) -> pl.DataFrame:
    """Event rows of lines whose message matches :data:`_PLAIN_LIFECYCLE`, cut from its
    space-separated tokens: what ``_INIT_RE``/``_END_RE`` capture from such a message (the
    pattern fixes every token, so each group is a token at a known position).

    Why: Polars' captures cost ~1 us a line, a capture-free match and a split a fraction of
    it, and a file of 10,000 incarnations has 29,000 lifecycle lines (issue 21, item 1).
    """
    t = pl.col("t")

    def tok(i: pl.Expr | int) -> pl.Expr:
        return t.list.get(i, null_on_oob=True)

    named = pl.col("b")  # 1 when an ncclComm* function name leads the Init line
    j1 = named + 8  # after "comm X rank R nranks N cudaDev D": nvmlDev, busId, commId in turn
    has_nvml = tok(j1) == "nvmlDev"
    j2 = j1 + 2 * has_nvml.cast(pl.Int64)
    has_bus = tok(j2) == "busId"
    j3 = j2 + 2 * has_bus.cast(pl.Int64)
    has_cid = tok(j3) == "commId"
    is_end = tok(-2) != "Init"
    text = pl.lit(None, dtype=pl.Utf8)
    fields = {
        "fn": pl.when(named == 1).then(tok(0)),
        "comm": tok(named + 1),
        "rank": tok(named + 3),
        "nranks": tok(named + 5),
        "cudadev": tok(named + 7),
        "nvmldev": pl.when(has_nvml).then(tok(j1 + 1)),
        "busid": pl.when(has_bus).then(tok(j2 + 1)),
        "commid": pl.when(has_cid).then(tok(j3 + 1)),
        "phase": pl.when(~is_end).then(t.list.last()),
        "what": pl.when(is_end).then(tok(-2)),
    }
    return (
        rest.with_columns(t=pl.col("msg").str.split(" "))
        .with_columns(b=(t.list.first() != "comm").cast(pl.Int64))
        .select(
            "line_no",
            "host",
            "pid",
            "tid",
            pl.when(is_end).then(pl.lit("END")).otherwise(t.list.last()).alias("kind"),
            "spliced",
            *(fields.get(name, text).alias(name) for name in _EVENT_FIELDS),
        )
    )


def _init_fits(fields: dict[str, Any]) -> bool:
    """Whether an Init/Destroy line's numbers fit their columns (int32; color/key int32 as in C)."""
    for name in (*_INIT_NUMBERS, *_SPLIT_NUMBERS):
        v = fields.get(name)
        if v is None or len(v) < 10:  # at most 9 digits (or - and 8): fits without int()
            continue
        if len(v.lstrip("-")) > 10 or not -(2**31) <= int(v) < 2**31:
            return False
    return True


def _dev_matches(inc: _Inc, dev: str) -> bool:
    """Does the ``[x]`` of a connection line (busId hex <= 2.18, nvmlDev 2.19+) fit ``inc``?"""
    return _dev_fits(inc.bus_id, inc.nvml_dev, inc.cuda_dev, dev)


def _dev_fits(bus_id: str | None, nvml_dev: int | None, cuda_dev: int | None, dev: str) -> bool:
    """:func:`_dev_matches` of an incarnation given by its bus id and devices."""
    if bus_id is not None and dev.lower().lstrip("0") == bus_id.lstrip("0"):
        return True
    if dev.isdigit():
        n = int(dev)
        return n in (nvml_dev, cuda_dev)
    return False


_INIT_GROUPS = tuple(sorted(_INIT_RE.groupindex, key=_INIT_RE.groupindex.__getitem__))
_END_GROUPS = tuple(sorted(_END_RE.groupindex, key=_END_RE.groupindex.__getitem__))
_EVENT_FIELDS = (*_INIT_GROUPS, *(g for g in _END_GROUPS if g not in _INIT_GROUPS))
"""The named groups of ``_INIT_RE`` and ``_END_RE``: one text column each in an event row."""
_EVENT_SCHEMA: dict[str, Any] = {
    "line_no": pl.Int64,
    "host": pl.Utf8,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "kind": pl.Utf8,
    "spliced": pl.Boolean,
    **dict.fromkeys(_EVENT_FIELDS, pl.Utf8),
}
"""A lifecycle event (Init START/COMPLETE, Destroy/Abort ``END``): the line's prefix fields and
the groups its pattern matched, as logged (null where a group did not take part)."""
_EVENT_HEAD = ("line_no", "host", "pid", "tid", "kind", "spliced")
"""The prefix columns of an event row (then one column per group, :data:`_EVENT_FIELDS`)."""
STATE_VERSION = 2
"""Version of the resume state :meth:`_Registry.raw_state` writes (1: events as rows)."""
_INC_COLUMNS = (
    "host",
    "pid",
    "comm",
    "rank",
    "nranks",
    "cudadev",
    "nvmldev",
    "busid",
    "comm_hash",
    "parent",
    "window_start",
    "split_color",
    "split_key",
    "first_init_line",
    "has_start",
    "complete_line",
    "end_line",
    "init_tids",
)
"""Columns of :func:`_incarnations`, in :class:`_Inc` field order (``parent_inc`` and
``ident`` are set later)."""
_INC_SCHEMA: dict[str, Any] = {
    c: pl.Utf8 if c in ("host", "comm", "busid", "comm_hash", "parent") else pl.Int64
    for c in _INC_COLUMNS
} | {"has_start": pl.Boolean, "init_tids": pl.List(pl.Int64)}
"""Their types (an empty registry's frame)."""


def _events_frame(events: list[_Event]) -> pl.DataFrame:
    """Event objects (a registry built by hand, or a version-1 resume state) as event rows."""
    cols: dict[str, list[Any]] = {
        "line_no": [e.line_no for e in events],
        "host": [e.host for e in events],
        "pid": [e.pid for e in events],
        "tid": [e.tid for e in events],
        "kind": [e.kind for e in events],
        "spliced": [e.spliced for e in events],
    }
    for name in _EVENT_FIELDS:
        cols[name] = [e.fields.get(name) for e in events]
    return pl.DataFrame(cols, schema=_EVENT_SCHEMA)


def _event_rows(ev: pl.DataFrame) -> list[list[Any]]:
    """Event rows in a version-1 resume state's form: ``[line_no, host, pid, tid, kind,
    fields, spliced]``, ``fields`` holding the groups that took part (pattern order)."""
    names = {k: (_INIT_GROUPS if k != "END" else _END_GROUPS) for k in ("START", "END")}
    out: list[list[Any]] = []
    heads = (ev.get_column(c).to_list() for c in ("line_no", "host", "pid", "tid", "kind"))
    fields = [ev.get_column(c).to_list() for c in _EVENT_FIELDS]
    pos = {name: n for n, name in enumerate(_EVENT_FIELDS)}
    for n, (line_no, host, pid, tid, kind) in enumerate(zip(*heads, strict=True)):
        keys = names["END" if kind == "END" else "START"]
        f = {k: v for k in keys if (v := fields[pos[k]][n]) is not None}
        out.append([line_no, host, pid, tid, kind, f, None])
    for row, sp in zip(out, ev.get_column("spliced").to_list(), strict=True):
        row[6] = sp
    return out


_SEP = " "
"""Separator of the values of one event column in a version-2 state (text without whitespace:
every value is a token of a pattern, never empty; a null is the empty string)."""


def _encode_events(ev: pl.DataFrame) -> dict[str, Any]:
    """A version-2 state's ``events``: ``n`` rows; each column as its values joined by
    :data:`_SEP` (a null empty), which JSON writes as one string (a list of values where a
    value is empty or holds the separator: never from the patterns). Groups that took part in
    no event are left out (read back as nulls).

    Why one string per column: 29,000 events are 500,000 values, whose lists and their JSON
    cost more than the rest of the state; Polars joins a column in one call."""
    out: dict[str, Any] = {"n": ev.height}
    fields: dict[str, Any] = {}
    if not ev.height:
        out |= dict.fromkeys(_EVENT_HEAD, "")
        out["fields"] = fields
        return out
    cols = [
        c
        for c in (*_EVENT_HEAD, *_EVENT_FIELDS)
        if c not in _EVENT_FIELDS or ev.get_column(c).null_count() < ev.height
    ]
    texts = [c for c in cols if ev.schema[c] == pl.Utf8]
    # one pass over every column: which text columns hold a value the join cannot carry,
    # and each column joined
    odd = ev.select(
        (pl.col(c).str.contains(_SEP, literal=True) | (pl.col(c) == "")).any().alias(c)
        for c in texts
    ).row(0, named=True)
    plain = [c for c in cols if not odd.get(c)]
    joined = (
        ev.select(
            (pl.col(c).cast(pl.Int8) if ev.schema[c] == pl.Boolean else pl.col(c))
            .cast(pl.Utf8)
            .fill_null("")
            .str.join(_SEP)
            .alias(c)
            for c in plain
        ).row(0, named=True)
        if plain
        else {}
    )
    for c in cols:
        value = ev.get_column(c).to_list() if odd.get(c) else joined[c]
        (fields if c in _EVENT_FIELDS else out)[c] = value
    out["fields"] = fields
    return out


def _decode_column(value: Any, n: int, dtype: Any) -> pl.Series:
    """One column of :func:`_encode_events` back (joined text or a list)."""
    if not isinstance(value, str):
        return pl.Series(value if value is not None else [None] * n, dtype=dtype)
    text = pl.Series([value]).str.split(_SEP).explode() if n else pl.Series([], dtype=pl.Utf8)
    text = pl.select(pl.when(text != "").then(text)).to_series()
    if dtype == pl.Boolean:
        return text.cast(pl.Int8).cast(pl.Boolean)
    return text.cast(dtype)


def _state_events(events: dict[str, Any]) -> pl.DataFrame:
    """The event rows of a version-2 state's ``events``."""
    n = int(events.get("n") or 0)
    fields = events.get("fields") or {}
    cols = [
        _decode_column(fields.get(c) if c in _EVENT_FIELDS else events.get(c), n, t).alias(c)
        for c, t in _EVENT_SCHEMA.items()
    ]
    return pl.DataFrame(cols, schema=_EVENT_SCHEMA)


def state_v1(state: dict[str, Any]) -> dict[str, Any]:
    """A version-2 resume state in version 1's form (events as ``[line_no, host, pid, tid,
    kind, fields, spliced]`` rows); any other state unchanged. The two carry the same
    content: the differential test of the parser's outputs compares states in this form."""
    if state.get("v") != STATE_VERSION:
        return state
    rows = _event_rows(_state_events(state.get("events") or {}))
    return {**state, "v": 1, "events": rows}


def _int_column(col: pl.Expr, values: pl.Series) -> pl.Expr:
    """A digit-run text column as Int64: by a cast when every value is ASCII digits, else by
    Python's ``int`` (other Unicode digits match ``\\d`` too), as the object path read them.
    The values are ``-?\\d+`` runs whose numbers fit (``_init_fits``): Polars' cast reads
    exactly the ASCII ones, so a cast that nulls no value means every value is ASCII."""
    if values.cast(pl.Int64, strict=False).null_count() == values.null_count():
        return col.cast(pl.Int64)
    return col.map_elements(int, return_dtype=pl.Int64)


def _lower_expr(name: str, values: pl.Series) -> pl.Expr:
    """``str.lower`` of a text column (Python's, value by value over the distinct values)."""
    distinct = values.drop_nulls().unique().to_list()
    if not distinct:
        return pl.col(name)
    return pl.col(name).replace({v: v.lower() for v in distinct})


def _incarnations(ev: pl.DataFrame, known_hosts: set[str]) -> pl.DataFrame:
    """Incarnations (columns :data:`_INC_COLUMNS`, in (host, pid, window_start, comm) order)
    cut from the lifecycle events.

    Per (host, pid, comm pointer), in line order: an event opens an incarnation unless it is
    a ``COMPLETE`` right after a ``START`` of the same rank (it completes that one) or an
    ``END`` after an open one (it closes it); an ``END`` that opens one (no Init before it)
    spans from the previous close of the pointer (or line 1). Hosts of spliced lines are
    repaired with every known host first.
    """
    if ev.is_empty():
        return pl.DataFrame(schema=_INC_SCHEMA)
    if ev["spliced"].any():
        fixes = {h: _fix_host(h, known_hosts) for h in ev.filter("spliced")["host"].unique()}
        ev = ev.with_columns(
            host=pl.when("spliced").then(pl.col("host").replace(fixes)).otherwise("host")
        )
    ev = ev.with_columns(
        comm=pl.col("comm").str.to_lowercase(),  # hex digits (ASCII) by the patterns
        busid=pl.col("busid").str.to_lowercase(),
        commid=pl.col("commid").str.to_lowercase(),
        parent=_lower_expr("parent", ev["parent"]),
        **{c: _int_column(pl.col(c), ev[c]) for c in (*_INIT_NUMBERS, *_SPLIT_NUMBERS)},
    ).sort("host", "pid", "comm", "line_no", maintain_order=True)
    same = (
        (pl.col("host") == pl.col("host").shift(1))
        & (pl.col("pid") == pl.col("pid").shift(1))
        & (pl.col("comm") == pl.col("comm").shift(1))
    ).fill_null(False)
    prev_kind = pl.when(same).then(pl.col("kind").shift(1))
    kind = pl.col("kind")
    ev = ev.with_columns(
        attach=(kind == "COMPLETE")
        & (prev_kind == "START").fill_null(False)
        & (pl.col("rank") == pl.col("rank").shift(1)),
        closes=(kind == "END") & prev_kind.is_not_null() & (prev_kind != "END"),
        last_close=pl.when(prev_kind == "END").then(pl.col("line_no").shift(1)).otherwise(0),
    ).with_columns(opens=~pl.col("attach") & ~pl.col("closes"))
    ev = ev.with_columns(inc=pl.col("opens").cum_sum())
    opens = ev.filter("opens")
    attached = ev.filter("attach").select(
        "inc",
        a_line="line_no",
        a_tid="tid",
        a_commid="commid",
        a_parent="parent",
        a_color="color",
        a_key="key",
    )
    ends = ev.filter(kind == "END").select("inc", end_line="line_no")
    o_kind = pl.col("kind")
    no_color = pl.col("color").is_null()
    incs = (
        opens.join(attached, on="inc", how="left")
        .join(ends, on="inc", how="left")
        .select(
            "host",
            "pid",
            "comm",
            "rank",
            "nranks",
            "cudadev",
            "nvmldev",
            "busid",
            comm_hash=pl.coalesce("commid", "a_commid"),
            parent=pl.coalesce("parent", "a_parent"),
            window_start=pl.when(o_kind == "END")
            .then(pl.col("last_close") + 1)
            .otherwise(pl.col("line_no")),
            split_color=pl.when(no_color).then(pl.col("a_color")).otherwise(pl.col("color")),
            split_key=pl.when(no_color).then(pl.col("a_key")).otherwise(pl.col("key")),
            first_init_line=pl.when(o_kind != "END").then(pl.col("line_no")),
            has_start=o_kind == "START",
            complete_line=pl.when(o_kind == "COMPLETE")
            .then(pl.col("line_no"))
            .otherwise(pl.col("a_line")),
            end_line="end_line",
            init_tids=pl.when(o_kind == "END")
            .then(pl.lit([], dtype=pl.List(pl.Int64)))
            .otherwise(pl.concat_list("tid", pl.col("a_tid")).list.drop_nulls()),
            inc="inc",
        )
    )
    return incs.sort("host", "pid", "window_start", "comm", "inc").drop("inc")
