"""Report: build time and HTML size of ``commscope.reports.html.build_report`` for the marts runs.

Reuses the stores of ``bench.marts_scale`` (derived there; run that benchmark first, or this one
derives on its own). Skipped with a note when ``commscope.reports.html`` is not importable yet.
"""

from __future__ import annotations

import importlib.util

from bench._common import CHILD, Context, Row, measure
from bench.marts_scale import prepared_store, sizes

NAME = "report_scale"


def run(ctx: Context) -> list[Row]:
    """Measure and return the rows of this benchmark."""
    if importlib.util.find_spec("commscope.reports.html") is None:
        return [Row(NAME, "skipped", "", None, note="commscope.reports.html is not importable yet")]
    ranks_list, iterations = sizes(ctx)
    rows: list[Row] = []
    for ranks in ranks_list:
        store, run_id, _ = prepared_store(ctx, ranks, iterations)
        if not (store / "marts").exists():
            measure([*CHILD, "derive", str(store), run_id])
        out = ctx.workdir / "reports" / f"{run_id}.html"
        out.parent.mkdir(parents=True, exist_ok=True)
        m = measure([*CHILD, "report", str(store), run_id, str(out)])
        if "skipped" in m.out:
            return [Row(NAME, "skipped", "", None, note=str(m.out["skipped"]))]
        target = "< 15 s" if ranks >= 1024 else ""
        rows.append(
            Row(
                NAME,
                f"{ranks} ranks x {iterations} iterations",
                "build wall s",
                round(m.wall_s, 2),
                target=target,
                met=bool(m.wall_s < 15) if target else None,
                note=f"HTML {int(m.out.get('html_bytes', 0)) / 1e6:.2f} MB; peak RSS {m.peak_mb:.0f} MB",  # type: ignore[call-overload]
                extra={"report": m.out},
            )
        )
    return rows


__all__ = ["NAME", "run"]
