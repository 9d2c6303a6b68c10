"""The pieces a report page is made of: :class:`Block` (a chart, table, text or gap note),
:class:`Section` (a titled list of blocks) and :func:`guard`, which turns a view that cannot be
computed into the note that says why.

Why a module of its own: the section builders (:mod:`commscope.reports.paper`, :mod:`commscope.reports.hang`,
:mod:`commscope.reports.stragglers`) and the page writer (:mod:`commscope.reports.html`) all build blocks; keeping
them here lets each import downward only (no import cycle through the page writer).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import altair as alt
import polars as pl

from commscope.reports import data as rd
from commscope.reports import gaps as rg

log = logging.getLogger(__name__)


@dataclass
class Block:
    """One piece of a section: a chart, a table, a paragraph, or a 'not available' note."""

    kind: str  # chart | table | text | na (view empty: why) | gap (calls left out: why) | pre
    chart: alt.TopLevelMixin | None = None
    frame: pl.DataFrame | None = None
    text: str = ""
    renderer: str = "svg"
    raw_columns: tuple[str, ...] = ()
    total_rows: int | None = None


@dataclass
class Section:
    """A titled part of the page."""

    key: str
    title: str
    blurb: str
    blocks: list[Block] = field(default_factory=list)


def na(reason: str) -> Block:
    """A note for a view with no gap found (a mart missing without a cause in the tables)."""
    return Block("na", text=f"not available ({reason})")


def guard(
    fn: Callable[[], list[Block]], gaps: dict[str, rg.Gap] | None = None, view: str = ""
) -> list[Block]:
    """Run a section body; a view the input cannot feed says why and what to record.

    With ``view`` and a gap for it (:func:`commscope.reports.gaps.gaps`): a missing or empty view shows
    the gap's cause and remedy instead of the body; a partial one shows the body and then the
    gap as a note. Without a gap, an :class:`~commscope.reports.data.Unavailable` becomes a 'not
    available (why)' note.
    """
    gap = (gaps or {}).get(view) if view else None
    if gap is not None and gap.kind != "partial":
        return [Block("na", text=gap.text())]
    try:
        blocks = fn()
    except rd.Unavailable as exc:
        return [Block("na", text=gap.text()) if gap is not None else na(str(exc))]
    except Exception as exc:  # a bug in one view must not lose the whole report
        log.exception("report view failed")
        return [na(f"failed: {type(exc).__name__}: {exc}")]
    if gap is not None:  # partial: say first which calls the view leaves out, and why
        blocks.insert(0, Block("gap", text=gap.text()))
    return blocks
