"""The hang-triage section: which ranks never reached, or never completed, which collective.

Why: a job that hangs leaves one Flight Recorder dump per rank; the stuck rank is the one
that never posted the collective its peers wait in, which no single dump says. The marts
``hang_collectives`` and ``hang_progress`` (sql/marts; the same rules as ``commscope hang``,
which reads the dump files, and tested to agree with it) compare the members' counters per
process group; this module only reads them: a sentence naming the stuck rank(s) and the
collective, the unfinished collectives per group, and each rank's last completed sequence
per group.

NCCL debug logs feed the same marts (``source`` nccl_debug): a log says what each rank posted,
never what completed, so only a member that stopped posting while its peers went on is found.
The section is left out of a run with neither Flight Recorder dumps nor such an NCCL finding,
and is one line when the dumps show no unfinished collective.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from commscope.reports import data as rd
from commscope.reports.blocks import Block
from commscope.reports.stragglers import rank_ranges

# Blocking collectives named in the sentence (the table lists all).
MAX_NAMED = 3


@dataclass
class Triage:
    """What the section shows, computed from the two marts.

    Attributes:
        dumped_ranks: ranks with a Flight Recorder dump.
        nccl_ranks: ranks with an NCCL log on a communicator known across ranks.
        findings: hang_collectives rows in display order (blocking first, then by creation).
        progress: hang_progress rows in display order (groups with findings and ranks
            behind first).
        suspects: (rank, blocking collectives) most first: the ranks holding the others up.
    """

    dumped_ranks: list[int]
    nccl_ranks: list[int]
    findings: pl.DataFrame
    progress: pl.DataFrame
    suspects: list[tuple[int, int]]


def _group(name: str, desc: str | None, ranks: str | None) -> str:
    label = f"group {name}"
    if desc and desc != "undefined":
        label += f" ({desc}"
        label += f"; ranks {rank_ranges(ranks)})" if ranks else ")"
    elif ranks:
        label += f" (ranks {rank_ranges(ranks)})"
    return label


def triage(d: rd.RunData) -> Triage | None:
    """The run's triage from its marts; None when there is nothing to show: no Flight
    Recorder dumps, and no NCCL-log finding.

    Raises:
        Unavailable: a hang mart was not derived for this run.
    """
    prog = d.mart("hang_progress")
    coll = d.mart("hang_collectives")
    fr = prog.filter(pl.col("source") == "flight_recorder")
    if fr.is_empty() and coll.is_empty():
        return None
    nccl = prog.filter(pl.col("source") == "nccl_debug")
    if fr.is_empty():  # NCCL logs only: the communicators with a finding
        prog = prog.filter(pl.col("group_name").is_in(coll["group_name"].unique().to_list()))
    blocks: dict[int, int] = {}
    for b in coll["blocking"].drop_nulls().to_list():
        for r in str(b).split(","):
            blocks[int(r)] = blocks.get(int(r), 0) + 1
    suspects = sorted(blocks.items(), key=lambda kv: (-kv[1], kv[0]))
    findings = coll.sort(
        [pl.col("is_blocking").not_(), "source", "first_created_ns", "group_name", "seq"],
        nulls_last=True,
    )
    open_groups = coll["group_name"].unique().to_list()
    progress = prog.with_columns(pl.col("group_name").is_in(open_groups).alias("_open")).sort(
        [pl.col("_open").not_(), pl.col("is_behind").not_(), "source", "group_name", "rank"],
        nulls_last=True,
    )
    return Triage(
        dumped_ranks=sorted(set(fr["rank"].to_list())),
        nccl_ranks=sorted(set(nccl["rank"].to_list())),
        findings=findings,
        progress=progress.drop("_open"),
        suspects=suspects,
    )


def _evidence(t: Triage) -> str:
    parts = []
    if t.dumped_ranks:
        parts.append(f"the Flight Recorder dumps of {len(t.dumped_ranks)} ranks")
    if t.nccl_ranks and not t.findings.filter(pl.col("source") == "nccl_debug").is_empty():
        parts.append(f"the NCCL logs of {len(t.nccl_ranks)} ranks")
    return " and ".join(parts)


def sentence(t: Triage) -> str:
    """One or two sentences naming the stuck rank(s) and the collective(s) they hold up."""
    n = len(t.dumped_ranks)
    if t.findings.is_empty():
        return (
            f"Flight Recorder dumps of {n} ranks: every process group's members completed "
            "every collective they enqueued (no hang in a collective group)."
        )
    blocking = t.findings.filter(pl.col("is_blocking"))
    if blocking.is_empty():
        return (
            f"{_evidence(t)[:1].upper()}{_evidence(t)[1:]}: {t.findings.height} collective(s) reached by their "
            "members and completed by none (every member waits in it; no rank holds it up "
            "by the counters: look at the GPU or network of the group)."
        )
    if len(t.suspects) == 1:
        ((r, k),) = t.suspects
        who = f"Rank {r} holds the others up ({k} collective{'s' if k > 1 else ''})"
    else:
        who = "Ranks " + ", ".join(f"{r} ({k})" for r, k in t.suspects)
        who += " hold the others up (collectives each)"
    parts = []
    for f in blocking.head(MAX_NAMED).iter_rows(named=True):
        what = f"{f['op'] or 'collective'} #{f['seq']} of " + _group(
            f["group_name"], f["group_desc"], f["group_ranks"]
        )
        states = []
        if f["never_reached"]:
            states.append(f"never reached by {rank_ranges(f['never_reached'])}")
        if f["never_completed"]:
            late = " (holding it up: a peer completed it)" if f["completed"] else " (waiting in it)"
            states.append(f"reached, never completed by {rank_ranges(f['never_completed'])}{late}")
        elif f["source"] == "nccl_debug" and f["reached"]:
            states.append(f"posted by {rank_ranges(f['reached'])}")
        if f["completed"]:
            states.append(f"completed by {rank_ranges(f['completed'])}")
        parts.append(f"{what}: {'; '.join(states)}")
    more = blocking.height - min(blocking.height, MAX_NAMED)
    tail = f" And {more} more (table below)." if more else ""
    if (blocking["source"] == "nccl_debug").any():
        tail += (
            " NCCL logs show what was posted, not what completed: a collective cannot "
            "complete without every member."
        )
    return f"{who}, by {_evidence(t)}. " + ". ".join(parts) + "." + tail


def findings_table(t: Triage) -> pl.DataFrame:
    """The unfinished collectives for the page."""
    f = t.findings
    return f.select(
        "source",
        pl.col("group_name").alias("group"),
        pl.col("group_desc").alias("description"),
        pl.col("group_ranks").map_elements(rank_ranges, return_dtype=pl.Utf8).alias("members"),
        "seq",
        "op",
        "raw_op",
        "msg_bytes",
        *(
            pl.col(c).map_elements(rank_ranges, return_dtype=pl.Utf8).alias(c)
            for c in (
                "never_reached",
                "reached",
                "never_completed",
                "started",
                "completed",
                "unknown",
            )
        ),
        pl.col("blocking").map_elements(rank_ranges, return_dtype=pl.Utf8).alias("holding_up"),
    )


def progress_table(t: Triage) -> pl.DataFrame:
    """Each rank's counters per group for the page."""
    return t.progress.select(
        "source",
        pl.col("group_name").alias("group"),
        pl.col("group_desc").alias("description"),
        "rank",
        "last_completed_seq",
        "last_enqueued_seq",
        "last_started_seq",
        "group_last_enqueued_seq",
        "pending_entries",
        "is_behind",
        "counter_source",
    )


def section(d: rd.RunData) -> list[Block]:
    """The section's blocks; empty (section left out) for a run with nothing to show."""

    t = triage(d)
    if t is None:
        return []
    out = [Block("text", text=sentence(t))]
    if not t.findings.is_empty():
        out += [
            Block(
                "text",
                text="Collectives not completed by every member, per process group "
                "(hang_collectives; p2p groups left out: their members count sends and "
                "receives, which differ by design). holding_up: the members that never "
                "reached it, and those that never completed it while a peer did. NCCL logs "
                "(source nccl_debug; group = nccl: and the communicator's member ranks, "
                "seq = opCount) show only what was posted.",
            ),
            Block(
                "table",
                frame=findings_table(t).head(rd.MAX_TABLE_ROWS),
                total_rows=t.findings.height,
                raw_columns=("raw_op",),
            ),
        ]
    out += [
        Block(
            "text",
            text="Last completed and last enqueued collective sequence number per rank and "
            "group when the rank dumped (hang_progress; pg_status, else the dump's entries: "
            "counter_source; NCCL logs: the last opCount posted, no completion); is_behind: "
            "enqueued less than another member.",
        ),
        Block(
            "table",
            frame=progress_table(t).head(rd.MAX_TABLE_ROWS),
            total_rows=t.progress.height,
        ),
    ]
    return out
