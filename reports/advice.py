"""The report's "What the model suggests" section: the stored advice of ``advise --run``.

Why: a run's report should say what the analytical model, calibrated to that run, would
change. The report is a pure reader: this section reads ``advice/<run>.json``, written by
``commscope advise --run RUN`` (:func:`commscope.pipeline.calibration.save_advice`), and runs no model.
The section is left out for a run without stored advice.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from commscope.reports import data as rd
from commscope.reports.blocks import Block

GIB = 2**30
TOP = 10


def _layout_row(label: str, c: dict[str, Any]) -> dict[str, Any]:
    return {
        "rank": label,
        "p": c["pp"],
        "t": c["tp"],
        "d": c["dp"],
        "b": c["micro_batch"],
        "m": c["micro_batches"],
        "mappings": ", ".join(c.get("mappings") or [c["mapping_name"]]),
        "T_iter_s": c["t_iter"],
        "T_comp_s": c["t_comp"],
        "T_TP_s": c["t_tp"],
        "T_PP_s": c["t_pp"],
        "T_DP_s": c["t_dp"] + c.get("t_emb", 0.0),
        "bubble_s": c["t_bubble"],
        "mu": c["mu"],
        "memory_GiB": c["memory_bytes"] / GIB,
    }


def ranking_table(advice: dict[str, Any], top: int = TOP) -> pl.DataFrame:
    """The stored ranking's first ``top`` layouts, then the run's own layout (rank ``run``)."""
    rows = [_layout_row(str(i), c) for i, c in enumerate(advice["candidates"][:top], start=1)]
    base = advice.get("baseline")
    if base is not None:
        rows.append(_layout_row(f"run ({advice.get('baseline_rank')})", base))
    return pl.DataFrame(rows)


def constants_table(advice: dict[str, Any]) -> pl.DataFrame:
    """Every constant the stored advice used, with its unit and source."""
    return pl.DataFrame(
        advice["constants"],
        schema={"name": pl.Utf8, "value": pl.Float64, "unit": pl.Utf8, "source": pl.Utf8},
    )


def summary(advice: dict[str, Any]) -> str:
    """One paragraph: the search's size and the gain over the run's own layout."""
    text = (
        f"Searched {advice['search_space_size']:,} (p, t, d, b, mapping) tuples "
        f"(exhaustive count): {advice['valid']:,} valid, {advice['evaluated']:,} predicted; "
        + "; ".join(f"{n:,} {why}" for why, n in sorted(advice.get("rejected", {}).items()))
        + "."
    )
    base = advice.get("baseline")
    measured = advice.get("baseline_measured_t_iter")
    if base is not None and advice["candidates"]:
        best = advice["candidates"][0]
        text += (
            f" This run's layout (p, t, d, b) = ({base['pp']}, {base['tp']}, {base['dp']}, "
            f"{base['micro_batch']}) ranks {advice.get('baseline_rank')}: predicted T_iter "
            f"{base['t_iter']:.3f} s"
        )
        if measured:
            text += f", measured {measured:.3f} s ({(base['t_iter'] - measured) / measured:+.1%})"
        text += (
            f". The best, ({best['pp']}, {best['tp']}, {best['dp']}, {best['micro_batch']}), "
            f"is predicted at {best['t_iter']:.3f} s: an expected gain of "
            f"{advice.get('expected_gain') or 0:.2f}x."
        )
    return text


def section(d: rd.RunData) -> list[Block]:
    """The section's blocks; empty (section left out) without stored advice."""

    advice = d.advice
    if not advice:
        return []
    return [
        Block("text", text=summary(advice)),
        Block(
            "text",
            text="Ranked layouts (times in s; T_DP includes the embedding all-reduce; memory: "
            "the peak stage's estimate per GPU):",
        ),
        Block("table", frame=ranking_table(advice), raw_columns=("mappings",)),
        Block("text", text="Constants used and where each came from:"),
        Block("table", frame=constants_table(advice), raw_columns=("source",)),
    ]
