"""Hang triage from Flight Recorder dumps (issue 19 item 4): who never reached, or never
completed, which collective of which group.

A job that hangs dumps one Flight Recorder file per rank. Each rank's ``pg_status`` gives,
per process group, the last collective it enqueued and the last it saw complete; its
``entries`` give the ops not yet completed (an ``onlyActive`` dump) or its recent history. A
collective cannot complete on one member while another never launched it, so comparing the
members' counters names the culprits:

* per collective group, the first sequence number not completed by every member,
  ``S = min(last_completed) + 1``, and every later point where a member stopped enqueuing
  (``last_enqueued + 1`` of a member behind the group's maximum), each a :class:`Finding`;
* in each finding, the members that **never reached** it (``last_enqueued < seq``), those
  that **reached but never completed** it (``last_enqueued >= seq > last_completed``) and
  those that **completed** it;
* a rank **blocks** a finding when it never reached it, or never completed it while another
  member did (its GPU failed or its watchdog stalled: the peers finished the kernel). The
  members that all sit in the same collective (everyone reached, nobody completed) are
  waiting, not culprits. :attr:`HangReport.suspects` ranks the blocking ranks.

Only collective sequence numbers are compared: groups whose entries are p2p (pipeline
send/recv, the default group's p2p) count p2p ops per member, which differ by design; their
pending entries are listed in :attr:`HangReport.pending_p2p` with the peer's global rank.

The pg_status key is the rank-local pg_id; it is mapped to the group name through the
entries, or by creation order for a rank without entries (the hung ranks of the LOCK_GIL
samples): :func:`commscope.parsers.flight_recorder._dump.pg_id_names`; each progress row says which.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commscope.parsers.flight_recorder import DumpFile, read_dump_file
from commscope.parsers.flight_recorder._dump import (
    Group,
    as_int,
    clean_text,
    entry_group,
    pg_id_names,
)
from commscope.parsers.flight_recorder._mapping import OPS, split_profiling_name
from commscope.parsers.registry import ParseError


@dataclass(frozen=True)
class Progress:
    """One rank's counters for one group (``pg_status``): the last completed sequence."""

    group: str
    desc: str | None
    rank: int
    last_enqueued: int | None
    last_completed: int | None
    pending_entries: int
    mapping: str | None
    """Where the counters came from: pg_status with the pg_id tied to the group by an entry
    (entry) or by creation order (order); the entries themselves when the dump has no
    pg_status (entries); None when unknown."""


@dataclass(frozen=True)
class Finding:
    """A collective of one group that not every member completed."""

    group: str
    desc: str | None
    members: tuple[int, ...]
    seq: int
    op: str | None
    raw_op: str | None
    input_sizes: Any
    never_reached: tuple[int, ...]
    never_completed: tuple[int, ...]
    completed: tuple[int, ...]
    unknown: tuple[int, ...]
    """Members without a dump, or without a status for this group."""
    started: tuple[int, ...]
    """Of never_completed, those whose start event was seen (pg_status
    last_started_collective >= seq; recorded only with timing enabled, -1 otherwise): the
    others posted the collective but it never began on their GPU (queued behind another)."""
    first_created_ns: int | None

    @property
    def blocking(self) -> tuple[int, ...]:
        """Members that hold the others up (see the module docstring)."""
        late = self.never_completed if self.completed else ()
        return tuple(sorted({*self.never_reached, *late}))


@dataclass(frozen=True)
class PendingP2P:
    """A send or recv not completed on a rank."""

    rank: int
    group: str
    desc: str | None
    op: str
    peer: int | None
    p2p_seq: int | None
    state: str | None


@dataclass
class HangReport:
    """The triage of one job's dumps."""

    ranks: tuple[int, ...]
    findings: list[Finding]
    progress: list[Progress]
    pending_p2p: list[PendingP2P]
    suspects: list[tuple[int, int]] = field(default_factory=list)
    """(rank, findings it blocks), most first."""
    errors: list[str] = field(default_factory=list)


def _entry_seq(e: dict[str, Any]) -> tuple[bool, int | None]:
    p2p = e.get("is_p2p")
    name = e.get("profiling_name")
    op = OPS.get(split_profiling_name(name)[0]) if isinstance(name, str) else None
    is_p2p = p2p if isinstance(p2p, bool) else op in ("send", "recv")
    return is_p2p, as_int(e.get("p2p_seq_id" if is_p2p else "collective_seq_id"))


def triage_files(paths: Iterable[Path]) -> HangReport:
    """Read every dump among ``paths`` (unreadable ones listed in ``errors``) and triage."""
    files: list[DumpFile] = []
    errors: list[str] = []
    for p in paths:
        try:
            files.append(read_dump_file(p))
        except (ParseError, OSError) as exc:
            errors.append(str(exc))
    report = triage(files)
    report.errors = errors + report.errors
    return report


def triage(files: Sequence[DumpFile]) -> HangReport:
    """Triage the dumps of one job (one per rank; see the module docstring)."""
    errors: list[str] = []
    by_rank: dict[int, DumpFile] = {}
    for f in files:
        if f.rank is None:
            errors.append(f"{f.path}: no rank, left out")
        elif f.rank in by_rank:
            errors.append(f"{f.path}: rank {f.rank} also in {by_rank[f.rank].path}, left out")
        else:
            by_rank[f.rank] = f
    groups: dict[str, Group] = {}
    for f in by_rank.values():
        for name, g in f.dump.groups.items():
            seen = groups.get(name)
            if seen is None or (seen.ranks is None and g.ranks is not None):
                groups[name] = g
            elif g.ranks is not None and set(g.ranks) != set(seen.ranks or ()):
                errors.append(f"group {name!r}: members differ between dumps ({f.path})")

    status: dict[tuple[str, int], tuple[int | None, int | None, str]] = {}
    started: dict[tuple[str, int], int] = {}
    pending: dict[tuple[str, int], int] = defaultdict(int)
    p2p_groups: set[str] = set()
    seq_entries: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    pending_p2p: list[PendingP2P] = []
    by_entries: dict[tuple[str, int], list[int | None]] = {}
    for rank, f in sorted(by_rank.items()):
        for pg_id, (name, how) in pg_id_names(f.dump).items():
            st = f.dump.status.get(pg_id)
            if st is not None:
                status[(name, rank)] = (st.last_enqueued, st.last_completed, how)
                if st.last_started is not None and st.last_started >= 0:
                    started[(name, rank)] = st.last_started
        for e in f.dump.entries:
            if not isinstance(e, dict):
                continue
            name, desc = entry_group(e)
            if name is None:
                continue
            is_p2p, seq = _entry_seq(e)
            state = e.get("state") if isinstance(e.get("state"), str) else None
            if state != "completed":
                pending[(name, rank)] += 1
            if is_p2p:
                p2p_groups.add(name)
                if state != "completed":
                    pname = e.get("profiling_name")
                    op, _, src, dst = split_profiling_name(
                        clean_text(pname[:256]) if isinstance(pname, str) else ""
                    )
                    g = groups.get(name)
                    members = g.sorted_ranks if g is not None else None
                    local = dst if op == "send" else src
                    peer = (
                        members[local]
                        if members is not None and local is not None and 0 <= local < len(members)
                        else None
                    )
                    pending_p2p.append(PendingP2P(rank, name, desc, op, peer, seq, state))
            elif seq is not None:
                seq_entries[(name, seq)].append(e)
                seen = by_entries.setdefault((name, rank), [None, None, None])
                seen[0] = seq if seen[0] is None else max(seen[0], seq)
                if state == "completed":
                    seen[1] = seq if seen[1] is None else max(seen[1], seq)
                else:
                    seen[2] = seq if seen[2] is None else min(seen[2], seq)
        # no pg_status for a group (dumps before it existed): counters from the entries, the
        # last completed being the highest completed entry, else the one before the first
        # pending (collectives complete in order on a group)
        for (name, r), (enq, done, first_pending) in by_entries.items():
            if r == rank and (name, rank) not in status and enq is not None:
                if done is None and first_pending is not None:
                    done = first_pending - 1
                status[(name, rank)] = (enq, done, "entries")

    progress: list[Progress] = []
    findings: list[Finding] = []
    for name in sorted(groups, key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n)):
        g = groups[name]
        members = tuple(g.sorted_ranks or ())
        counters: dict[int, tuple[int, int]] = {}
        unknown: list[int] = []
        for r in members:
            st = status.get((name, r))
            if r in by_rank:
                progress.append(
                    Progress(
                        name,
                        g.desc,
                        r,
                        st[0] if st else None,
                        st[1] if st else None,
                        pending.get((name, r), 0),
                        st[2] if st else None,
                    )
                )
            if st is None or st[0] is None or st[1] is None:
                unknown.append(r)
            else:
                counters[r] = (st[0], st[1])
        if name in p2p_groups or not counters:
            continue
        min_done = min(c[1] for c in counters.values())
        max_enq = max(c[0] for c in counters.values())
        if max_enq <= min_done:
            continue
        seqs = {min_done + 1} | {c[0] + 1 for c in counters.values() if c[0] < max_enq}
        for seq in sorted(s for s in seqs if s <= max_enq):
            entries = seq_entries.get((name, seq), [])
            first = min(
                entries,
                key=lambda e: as_int(e.get("time_created_ns")) or 2**63,
                default=None,
            )
            raw_op = first.get("profiling_name") if first is not None else None
            raw_op = clean_text(raw_op[:256]) if isinstance(raw_op, str) else None
            findings.append(
                Finding(
                    group=name,
                    desc=g.desc,
                    members=members,
                    seq=seq,
                    op=OPS.get(split_profiling_name(raw_op)[0], "other") if raw_op else None,
                    raw_op=raw_op,
                    input_sizes=first.get("input_sizes") if first is not None else None,
                    never_reached=tuple(r for r, c in sorted(counters.items()) if c[0] < seq),
                    never_completed=tuple(
                        r for r, c in sorted(counters.items()) if c[0] >= seq > c[1]
                    ),
                    completed=tuple(r for r, c in sorted(counters.items()) if c[1] >= seq),
                    started=tuple(
                        r
                        for r, c in sorted(counters.items())
                        if c[1] < seq <= started.get((name, r), -1)
                    ),
                    unknown=tuple(unknown),
                    first_created_ns=(
                        as_int(first.get("time_created_ns")) if first is not None else None
                    ),
                )
            )
    findings.sort(key=lambda f: (f.first_created_ns is None, f.first_created_ns or 0, f.group))
    blocks: dict[int, int] = defaultdict(int)
    for f in findings:
        for r in f.blocking:
            blocks[r] += 1
    suspects = sorted(blocks.items(), key=lambda kv: (-kv[1], kv[0]))
    return HangReport(
        ranks=tuple(sorted(by_rank)),
        findings=findings,
        progress=progress,
        pending_p2p=pending_p2p,
        suspects=suspects,
        errors=errors,
    )


def _ranks(rs: Sequence[int]) -> str:
    return ",".join(map(str, rs)) or "-"


def format_report(report: HangReport) -> str:
    """The triage as plain text (what ``commscope hang RUN`` will print)."""
    lines = [f"Flight Recorder dumps of {len(report.ranks)} ranks"]
    if report.suspects:
        lines.append(
            "suspect ranks (blocking findings): "
            + ", ".join(f"{r} ({n})" for r, n in report.suspects)
        )
    else:
        lines.append("no rank blocks a collective that its peers reached or completed")
    waiting = [f for f in report.findings if not f.blocking]
    for f in (f for f in report.findings if f.blocking):
        who = f"{f.group}:{f.desc}" if f.desc and f.desc != "undefined" else f.group
        lines.append(
            f"  group {who} seq {f.seq} {f.raw_op or '?'} {f.input_sizes or ''}: "
            f"never reached {_ranks(f.never_reached)}; never completed "
            f"{_ranks(f.never_completed)}"
            + (f" (started {_ranks(f.started)})" if f.started else "")
            + f"; completed {_ranks(f.completed)}"
            + (f"; unknown {_ranks(f.unknown)}" if f.unknown else "")
        )
    if waiting:
        lines.append(
            f"  {len(waiting)} more collectives reached by their members and completed by none "
            "(waiting, not blocking)"
        )
    for e in report.errors:
        lines.append(f"  note: {e}")
    return "\n".join(lines)
