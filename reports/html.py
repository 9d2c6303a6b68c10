"""One self-contained, offline and safe HTML report per run, and a side-by-side comparison.

Why: users open one file per run, often on a laptop without network access, and the text in it
comes from cluster logs that anyone on a shared cluster can write. So the page

* carries Vega, Vega-Lite and vega-embed inline (``vl_convert.javascript_bundle()``, built once:
  :mod:`commscope.reports.vega_bundle`) and loads
  nothing: charts are embedded as inert ``<script type="application/json">`` data blocks;
* HTML-escapes every string that reaches the markup (host, kernel and file names, rejected
  lines, config) and escapes ``<``, ``>`` and ``&`` inside the embedded JSON as ``\\u003c`` etc.,
  so no log text can close a ``<script>`` element or open a comment;
* sets a Content-Security-Policy meta tag: ``default-src 'none'``; scripts only by the SHA-256
  of the two inline scripts (the Vega bundle and the loader), with **no** ``'unsafe-eval'``:
  vega-embed runs with ``ast: true``, which uses the expression interpreter bundled in
  vega-embed instead of compiling expressions with ``Function``; ``style-src 'unsafe-inline'``
  (vega-embed injects a style element and Vega sets style attributes); ``img-src data: blob:``;
  ``connect-src 'none'``.

Sections follow issue 7; each is computed by :mod:`commscope.reports.data` and drawn by
:mod:`commscope.reports.charts`. A view whose data is missing says "not available", the cause found in
the run's tables and what to record to get it (:mod:`commscope.reports.gaps`); a view that leaves some
calls out says how many and why above its chart; a view with truly nothing to show (no
all-to-all, a one-rank world) says "nothing to show" and why.

Two builds of one run from the same marts give the same bytes, whatever order the marts' rows
were written in (a derive's threads decide it): chart records are sorted by every column
(:mod:`commscope.reports.charts`), tables and the frames behind them sort by a full key, and
the one field that depends on the build, its time, is ``SOURCE_DATE_EPOCH`` when set
(:func:`generated_at`).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hashlib
import html
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from commscope.reports import advice as ra
from commscope.reports import charts
from commscope.reports import data as rd
from commscope.reports import gaps as rg
from commscope.reports import hang as rh
from commscope.reports import paper as rp
from commscope.reports import stragglers as rs
from commscope.reports.blocks import Block, Section, guard
from commscope.reports.headline import Headline
from commscope.reports.vega_bundle import vega_bundle

if TYPE_CHECKING:
    from commscope.pipeline.store import Store

log = logging.getLogger(__name__)

LOADER_JS = """(function () {
  "use strict";
  var nodes = document.querySelectorAll('script[type="application/json"][data-spec]');
  var jobs = [];
  nodes.forEach(function (node) {
    var target = document.getElementById(node.getAttribute("data-spec"));
    var opts = {ast: true, actions: false, renderer: node.getAttribute("data-renderer") || "svg"};
    var job;
    try {
      job = vegaEmbed(target, JSON.parse(node.textContent), opts).then(function () {
        target.setAttribute("data-rendered", "ok");
      });
    } catch (err) {
      job = Promise.reject(err);
    }
    jobs.push(job.catch(function (err) {
      target.setAttribute("data-rendered", "error");
      target.textContent = "chart failed: " + err;
      console.error(err);
    }));
  });
  Promise.all(jobs).then(function () {
    document.body.setAttribute("data-charts-done", String(jobs.length));
  });
})();"""

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0 auto;
max-width:1400px;padding:0 24px 48px;color:#222;line-height:1.4}
h1{font-size:1.6em;margin:.6em 0 .2em}h2{border-bottom:1px solid #ddd;padding-bottom:4px;
margin-top:1.8em}.meta{color:#555}.banner{background:#fff3cd;border:1px solid #e0c36a;
padding:8px 12px;margin:12px 0;font-weight:600}.na{color:#8a6d3b;background:#fcf8e3;
padding:6px 10px;border-left:3px solid #e0c36a}.note{color:#555;font-size:.92em}
table{border-collapse:collapse;font-size:.88em;margin:8px 0}td,th{border:1px solid #ddd;
padding:3px 8px;text-align:left;vertical-align:top}td.n{text-align:right;
font-variant-numeric:tabular-nums}th{background:#f5f5f5}.bad{color:#b00020;font-weight:600}
pre{background:#f7f7f7;padding:8px;overflow:auto;max-height:420px;font-size:.85em}
.charts{display:flex;flex-wrap:wrap;gap:16px}.pair{display:grid;
grid-template-columns:1fr 1fr;gap:24px}.pair>div{min-width:0;overflow:auto}
.gap{color:#555;background:#f4f6f8;padding:6px 10px;border-left:3px solid #9aa5b1;
font-size:.92em}nav a{margin-right:12px}.raw{font-family:monospace;white-space:pre-wrap;word-break:break-all}
"""


# ---------------------------------------------------------------------------- sections


def _headline(d: rd.RunData) -> list[Block]:
    h = rd.run_headline(d)
    blocks: list[Block] = []
    if h.calibrated is False:
        blocks.append(Block("na", text=h.verdict + "."))
    blocks.append(Block("table", frame=h.rows))
    df = h.rows
    if df["rel_error"].is_not_null().any():
        blocks.append(
            Block(
                "chart", chart=charts.headline_errors(df.filter(pl.col("rel_error").is_not_null()))
            )
        )
    elif df["predicted"].is_not_null().any() and h.calibrated is not False:
        why = d.gaps.get("breakdown") or d.gaps.get("bandwidth")
        blocks.append(
            Block(
                "text",
                text="No relative errors: the measured side of these terms is empty"
                + (f" ({why.text()})" if why is not None else "."),
            )
        )

    def mvm() -> list[Block]:
        return [
            Block(
                "text",
                text="Model vs measured per term (model_vs_measured mart; T_comm, R_comm and "
                "R_bubble, eq. 7 included, are the headline rows above):",
            ),
            Block("table", frame=rd.model_vs_measured(d, calibrated=h.calibrated)),
        ]

    return blocks + guard(mvm, d.gaps, "model")


def _breakdown(d: rd.RunData) -> list[Block]:
    return [Block("chart", chart=charts.breakdown(rd.breakdown(d)))]


def _traffic(d: rd.RunData) -> list[Block]:
    t = rd.traffic(d)
    blocks = [
        Block(
            "text",
            text=f"Bytes per iteration from each sending to each receiving {t.unit} "
            f"({t.size} per axis); red lines mark node boundaries.",
        )
    ]
    present = set(t.cells["traffic_class"].unique().to_list())
    for cls in [c for c in rd.CLASSES if c in present] + sorted(present - set(rd.CLASSES)):
        for source in ("measured", "predicted"):
            cells = t.cells.filter((pl.col("traffic_class") == cls) & (pl.col("source") == source))
            if cells.is_empty():
                if source == "measured":
                    text = f"measured {cls}: no calls with known destinations"
                    blocks.append(Block("na", text=text))
                elif not d.predicted_matrix.is_empty():
                    blocks.append(Block("na", text=f"predicted {cls}: the model predicts none"))
                continue
            chart = charts.traffic_heatmap(
                cells, t.boundaries, unit=t.unit, size=t.size, title=f"{cls} traffic, {source}"
            )
            blocks.append(
                Block("chart", chart=chart, renderer="canvas" if cells.height > 4000 else "svg")
            )
    return blocks


def _onoff(d: rd.RunData) -> list[Block]:
    def overview() -> list[Block]:
        df, unit = rd.onoff_overview(d)
        return [
            Block(
                "chart",
                chart=charts.onoff_overview(df, unit=unit),
                renderer="canvas" if df.height > 4000 else "svg",
            )
        ]

    def timeline() -> list[Block]:
        return [Block("chart", chart=charts.onoff_timeline(rd.onoff_timeline(d)))]

    return guard(timeline, d.gaps, "onoff_timeline") + guard(overview, d.gaps, "onoff")


def _sizes(d: rd.RunData) -> list[Block]:
    return [Block("chart", chart=charts.message_sizes(rd.message_sizes(d)))]


def _bandwidth(d: rd.RunData) -> list[Block]:
    pts, rules = rd.bandwidth(d)
    return [Block("chart", chart=charts.bandwidth(pts, rules))]


def _per_rank(d: rd.RunData) -> list[Block]:
    def strag() -> list[Block]:
        df = rd.stragglers(d)
        out = [Block("chart", chart=charts.stragglers(df))]
        flagged = df.filter(pl.col("straggler"))["rank"].to_list()
        out.append(
            Block("text", text=f"Outlier ranks: {', '.join(map(str, flagged[:50])) or 'none'}.")
        )
        return out

    def bub() -> list[Block]:
        return [Block("chart", chart=charts.bubbles(rd.bubbles(d)))]

    return guard(strag, d.gaps, "stragglers") + guard(bub, d.gaps, "bubbles")


def _predictability(d: rd.RunData) -> list[Block]:
    return [Block("chart", chart=charts.predictability(rd.predictability(d)))]


def _moe(d: rd.RunData) -> list[Block]:
    return [Block("chart", chart=charts.moe(rd.moe(d)))]


def _quality(d: rd.RunData) -> list[Block]:
    blocks: list[Block] = []

    def files() -> list[Block]:
        df = rd.files(d)
        tot = df.select(
            pl.col("lines_total", "lines_parsed", "lines_ignored", "lines_rejected").sum()
        ).row(0)
        bad = df.filter(~pl.col("accounted")).height
        return [
            Block(
                "text",
                text=f"{df.height} files; lines: {tot[0]:,} total = {tot[1]:,} parsed + "
                f"{tot[2]:,} ignored + {tot[3]:,} rejected; files whose lines do not add up: {bad}.",
            ),
            Block(
                "table",
                frame=df.head(rd.MAX_TABLE_ROWS),
                total_rows=df.height,
                raw_columns=("path", "warnings"),
            ),
        ]

    def rejects() -> list[Block]:
        df, total = rd.rejects(d)
        if total == 0:
            return [Block("text", text="No rejected lines.")]
        return [
            Block("text", text=f"{total:,} rejected lines; the first {df.height}:"),
            Block("table", frame=df, total_rows=total, raw_columns=("path", "raw", "reason")),
        ]

    def ranks() -> list[Block]:
        cov = rd.ranks_coverage(d)
        miss = cov["missing"]
        expected = cov["expected"]
        if expected is None:
            expected = "unknown (no config gives pp x tp x dp and no trace states its world size)"
        text = f"Ranks expected: {expected}; present: {cov['present']}; missing: "
        text += (
            (", ".join(map(str, miss[:100])) + (" ..." if len(miss) > 100 else ""))
            if miss
            else "none"
        )
        return [Block("text", text=text + ".")]

    def clocks() -> list[Block]:
        df = rd.clock_alignment(d)
        if df.is_empty():
            return [
                Block(
                    "text",
                    text="No trace metadata (clock anchors): NCCL debug and DeepSpeed text logs "
                    "carry none; Kineto and Nsight Systems traces do.",
                )
            ]
        return [
            Block("text", text="Clock alignment per source:"),
            Block("table", frame=df, raw_columns=("host_names",)),
        ]

    def sources() -> list[Block]:
        df, tot = rd.call_sources(d)
        unpaired = int(df["unpaired_records"].sum())
        text = (
            f"Logical calls: {tot['calls']:,} (each call once however many tools logged it); "
            f"timed by some source: {tot['timed_calls']:,}; logged by several tools: "
            f"{tot['multi_source_calls']:,}; size conflicts (the tools logged different sizes): "
            f"{tot['size_conflicts']:,}; records that could not be paired with a call of "
            f"their rank (not counted): {unpaired:,}. Per source format:"
        )
        return [
            Block("text", text=text),
            Block("table", frame=df, raw_columns=("conflict_example", "unpaired_reasons")),
        ]

    for fn in (files, rejects, ranks, clocks, sources):
        blocks += guard(fn)
    return blocks


def _config(d: rd.RunData) -> list[Block]:
    text, source = rd.config_text(d)
    out = [Block("text", text=f"Source: {source}. Synthetic: {'yes' if d.synthetic else 'no'}.")]
    if text:
        out.append(Block("pre", text=text))
    return out


SECTIONS: list[tuple[str, str, str, Callable[[rd.RunData], list[Block]]]] = [
    (
        "headline",
        "Headline numbers",
        "Measured beside the model's prediction, each row including the same things on both "
        "sides (column 'includes'); relative error = (measured - predicted) / predicted. Times "
        "in s, bandwidths in GB/s (1 GB = 1e9 bytes).",
        _headline,
    ),
    (
        "hang",
        "Hang triage",
        "From the Flight Recorder dumps (or NCCL logs) of a job that hung: which ranks never "
        "reached, or never completed, which collective of which process group, and each rank's "
        "last completed sequence per group (for the dumps, the same triage as `commscope hang`).",
        rh.section,
    ),
    (
        "breakdown",
        "Iteration breakdown",
        "Where an iteration's time goes, per pipeline stage, measured vs predicted (Figs. 6, 10).",
        _breakdown,
    ),
    (
        "traffic",
        "Traffic matrices",
        "Rank-to-rank bytes per iteration and class, measured beside predicted (Figs. 2, 11).",
        _traffic,
    ),
    (
        "onoff",
        "On/off pattern",
        "When ranks communicate: selected ranks over a few iterations, and the duty cycle of all ranks.",
        _onoff,
    ),
    (
        "sizes",
        "Message sizes",
        "Distribution of message sizes per op and class, in bytes (NCCL's buffer per op; Fig. 1).",
        _sizes,
    ),
    (
        "bandwidth",
        "Effective bandwidth",
        "Bus bandwidth in GB/s (1e9 bytes/s, as nccl-tests) with the true group size, vs message "
        "size in bytes; dashed: the model's C_* (Fig. 7).",
        _bandwidth,
    ),
    (
        "per-rank",
        "Communication time per rank and bubbles",
        "Communication time per rank (waiting shows up here; which rank caused it: the next "
        "section) and the pipeline bubble per stage.",
        _per_rank,
    ),
    (
        "waits",
        "Stragglers: who the others waited for",
        "Each collective matched across the ranks of its group (collective_instances): the rank "
        "that arrived last made the others wait. Wait caused per rank and iteration, the top "
        "offenders with their evidence, arrival skew per class, the clock offsets the cross-rank "
        "times rest on, and the instances that could not be completed.",
        rs.section,
    ),
    (
        "predictability",
        "Predictability",
        "How much each iteration's traffic repeats the previous one.",
        _predictability,
    ),
    ("moe", "MoE non-uniformity", "All-to-all imbalance over iterations (Fig. 5).", _moe),
    # ---- the paper's tables and figures (commscope.reports.paper; issue 17 item 7) ----
    (
        "paper",
        "The paper: tables and figures (APNet 2024)",
        "Every table and figure of APNet'24 (Li et al.) this run's data supports, titled with "
        "the paper's number, measured beside predicted; the paper map says what the others need.",
        lambda d: rp.section(d, d.paper_rank),
    ),
    # ---- end of the paper's section ----
    (
        "advice",
        "What the model suggests",
        "The analytical model calibrated to this run (`commscope advise --run`): layouts ranked "
        "by predicted iteration time, this run's own layout among them, and every constant with "
        "its source. Read from the stored advice; the report runs no model.",
        ra.section,
    ),
    (
        "quality",
        "Data quality",
        "Files, lines accounted for, rejected lines, missing ranks, clock alignment.",
        _quality,
    ),
    (
        "config",
        "Run configuration",
        "The configuration the model and marts used, and where it came from.",
        _config,
    ),
]


def _dedupe(blocks: list[Block]) -> list[Block]:
    """Drop a note that repeats the one just before it (two views of a section, one cause)."""
    out: list[Block] = []
    for b in blocks:
        if out and b.kind in ("na", "gap") and (out[-1].kind, out[-1].text) == (b.kind, b.text):
            continue
        out.append(b)
    return out


# Sections that are one view: the gap key (commscope.reports.gaps.VIEWS) their body is guarded by.
SECTION_VIEW = {
    "breakdown": "breakdown",
    "traffic": "traffic",
    "sizes": "sizes",
    "bandwidth": "bandwidth",
    "predictability": "predictability",
    "moe": "moe",
}


# Sections left out of the page when their body is empty (a run without Flight Recorder dumps).
OPTIONAL_SECTIONS = frozenset({"hang", "advice"})


def run_sections(d: rd.RunData) -> list[Section]:
    """Compute every section of one run's report (the run's gaps first, :mod:`commscope.reports.gaps`)."""
    d.gaps = rg.gaps(d)
    out = []
    for key, title, blurb, fn in SECTIONS:
        t0 = time.perf_counter()
        body = guard(lambda fn=fn: fn(d), d.gaps, SECTION_VIEW.get(key, ""))  # type: ignore[misc]
        if not body and key in OPTIONAL_SECTIONS:
            continue
        out.append(Section(key, title, blurb, _dedupe(body)))
        log.info("report %s: section %s in %.2f s", d.run_id, key, time.perf_counter() - t0)
    return out


# ---------------------------------------------------------------------------- rendering


def esc(value: object) -> str:
    """HTML-escape any value for text or attribute context."""
    return html.escape(str(value), quote=True)


def json_for_script(obj: Any) -> str:
    """JSON safe inside a <script> element: '<', '>' and '&' become \\u escapes (valid JSON,
    and no '</script' or '<!--' can appear)."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _fmt(v: object) -> tuple[str, bool]:
    """Cell text and whether it is numeric."""
    if v is None:
        return "–", False
    if isinstance(v, bool):
        return ("yes" if v else "no"), False
    if isinstance(v, int):
        return f"{v:,}", True
    if isinstance(v, float):
        if v != v:  # NaN
            return "–", True
        return (f"{v:.4g}" if abs(v) < 1e6 else f"{v:.4e}"), True
    return str(v), False


def render_table(
    df: pl.DataFrame, raw_columns: tuple[str, ...] = (), total_rows: int | None = None
) -> str:
    """An escaped HTML table of a small frame."""
    head = "".join(f"<th>{esc(c)}</th>" for c in df.columns)
    rows = []
    for row in df.iter_rows():
        cells = []
        for col, v in zip(df.columns, row, strict=True):
            text, num = _fmt(v)
            cls = ' class="n"' if num else (' class="raw"' if col in raw_columns else "")
            if col == "rel_error" and isinstance(v, float) and abs(v) > 0.15:
                cls = ' class="n bad"'
            cells.append(f"<td{cls}>{esc(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = ""
    if total_rows is not None and total_rows > df.height:
        more = f'<p class="note">{esc(f"showing {df.height} of {total_rows:,} rows")}</p>'
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{more}"


class _Page:
    """Accumulates chart specs (numbered containers) while rendering blocks."""

    def __init__(self) -> None:
        self.n = 0

    def block(self, b: Block) -> str:
        if b.kind == "chart" and b.chart is not None:
            self.n += 1
            cid = f"chart-{self.n}"
            spec = b.chart.to_dict()
            return (
                f'<div class="chart" id="{cid}"></div>'
                f'<script type="application/json" data-spec="{cid}" data-renderer="{esc(b.renderer)}">'
                f"{json_for_script(spec)}</script>"
            )
        if b.kind == "table" and b.frame is not None:
            return render_table(b.frame, b.raw_columns, b.total_rows)
        if b.kind == "na":
            return f'<p class="na">{esc(b.text)}</p>'
        if b.kind == "gap":
            return f'<p class="gap">{esc(b.text)}</p>'
        if b.kind == "pre":
            return f"<pre>{esc(b.text)}</pre>"
        return f"<p>{esc(b.text)}</p>"

    def blocks(self, blocks: list[Block]) -> str:
        charts_html = []
        out = []
        for b in blocks:
            if b.kind == "chart":
                charts_html.append(self.block(b))
                continue
            if charts_html:
                out.append('<div class="charts">' + "".join(charts_html) + "</div>")
                charts_html = []
            out.append(self.block(b))
        if charts_html:
            out.append('<div class="charts">' + "".join(charts_html) + "</div>")
        return "".join(out)


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def csp(scripts: list[str]) -> str:
    """The Content-Security-Policy for a page with these inline scripts."""
    hashes = " ".join(_sha256(s) for s in scripts)
    return (
        f"default-src 'none'; script-src {hashes}; style-src 'unsafe-inline'; "
        "img-src data: blob:; connect-src 'none'; font-src 'none'; base-uri 'none'; "
        "form-action 'none'"
    )


def render_page(title: str, header_html: str, body_html: str) -> str:
    """A full page with the inline runtime, the loader and the CSP meta tag."""
    bundle = vega_bundle()
    policy = csp([bundle, LOADER_JS])
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(policy)}">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{esc(title)}</title><style>{CSS}</style>"
        f"<script>{bundle}</script></head><body>{header_html}{body_html}"
        f"<script>{LOADER_JS}</script></body></html>\n"
    )


def generated_at() -> str:
    """When the page is built, UTC to the minute: the one part of a page that is not a function
    of the store (two builds from the same marts are otherwise the same bytes). The
    reproducible-builds variable ``SOURCE_DATE_EPOCH`` (seconds since 1970) fixes it."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    when = (
        dt.datetime.fromtimestamp(int(epoch), dt.UTC)
        if epoch.isdigit()
        else dt.datetime.now(dt.UTC)
    )
    return when.strftime("%Y-%m-%d %H:%M UTC")


def _header(title: str, d_list: list[rd.RunData]) -> str:
    out = [f"<h1>{esc(title)}</h1>"]
    now = generated_at()
    for d in d_list:
        src = d.stored.source if d.stored else "none (inferred)"
        out.append(
            f'<p class="meta">run <b>{esc(d.run_id)}</b> · config: {esc(src)} · generated {esc(now)}</p>'
        )
        if d.synthetic:
            out.append(
                f'<div class="banner">{esc(d.run_id)}: SYNTHETIC DATA. These logs were generated by '
                "commscope's simulator, not recorded from a real training job.</div>"
            )
    return "".join(out)


def _nav(sections: list[Section]) -> str:
    return (
        "<nav>"
        + "".join(f'<a href="#{esc(s.key)}">{esc(s.title)}</a>' for s in sections)
        + "</nav>"
    )


def check_out_path(out: Path) -> None:
    """Refuse an output path that names a folder (before any work is done).

    Why: the page is written to a temp file beside ``out`` and renamed onto it; onto a folder
    the rename fails and, before this check, left the 1 MB temp file behind.

    Raises:
        ValueError: ``out`` is an existing folder.
    """
    if out.is_dir():
        raise ValueError(f"{out}: is a folder; give the HTML file to write (e.g. {out}/RUN.html)")


def _write(out: Path, text: str) -> Path:
    """Write ``text`` to ``out`` atomically (temp file + rename); no temp file survives a
    failure (disk full, read-only folder, interrupt).

    Raises:
        ValueError: ``out`` is a folder or cannot be written (the message names it and why).
    """
    check_out_path(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)
    except OSError as exc:
        raise ValueError(f"{out}: cannot write the report ({exc.strerror or exc})") from exc
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    return out


def build_report(store: Store, run_id: str, out: Path, *, paper_rank: int = 0) -> Path:
    """Write the HTML report of one run and return its path.

    A pure reader of the run's published marts and model inputs: it derives nothing and runs
    no model (the report command, the flows and the API derive first when needed:
    :func:`commscope.pipeline.derive.ensure_derived`); views of a run that was never derived say so.

    Args:
        store: the store holding the run.
        run_id: the run.
        out: the HTML file to write (atomically).
        paper_rank: the rank of the paper's Table 3 (default 0, the paper's rank_0).
    """
    from commscope.pipeline.store import validate_run_id

    validate_run_id(run_id)
    check_out_path(out)
    if run_id not in store.runs():
        raise ValueError(f"run {run_id!r} not in {store.root}")
    d = rd.load_run(store, run_id)
    d.paper_rank = paper_rank
    try:
        sections = run_sections(d)
    finally:
        if d.con is not None:
            d.con.close()
    page = _Page()
    body = _nav(sections) + "".join(
        f'<section id="{esc(s.key)}"><h2>{esc(s.title)}</h2><p class="note">{esc(s.blurb)}</p>'
        f"{page.blocks(s.blocks)}</section>"
        for s in sections
    )
    title = f"commscope report: {run_id}"
    return _write(out, render_page(title, _header(title, [d]), body))


def _compare_table(a: rd.RunData, b: rd.RunData) -> pl.DataFrame:
    """Headline numbers (:mod:`commscope.reports.headline`) of two runs side by side, B - A."""
    return compare_headlines(rd.run_headline(a), rd.run_headline(b))


COMPARE_SKIP = ("R_bubble (eq. 7)",)
"""Headline rows whose measured value another row already shows (compare shows measured only)."""


def compare_headlines(ha: Headline, hb: Headline) -> pl.DataFrame:
    """Measured headline rows of two runs side by side with the difference B - A.

    ``includes`` is A's; where B's rows include something else (marts of another commscope
    version), B's text is appended so the two numbers are never silently unlike.
    """
    skip = pl.col("metric").is_in(COMPARE_SKIP)
    ra = ha.rows.filter(~skip).select("metric", "unit", "includes", pl.col("measured").alias("A"))
    rb = hb.rows.filter(~skip).select(
        "metric",
        pl.col("unit").alias("_unit_b"),
        pl.col("includes").alias("_inc_b"),
        pl.col("measured").alias("B"),
    )
    out = ra.join(rb, on="metric", how="full", coalesce=True, maintain_order="left_right")
    return out.with_columns(
        unit=pl.coalesce("unit", "_unit_b"),
        includes=pl.when(pl.col("includes").is_null())
        .then(pl.col("_inc_b"))
        .when(pl.col("_inc_b").is_null() | (pl.col("_inc_b") == pl.col("includes")))
        .then(pl.col("includes"))
        .otherwise(pl.format("A: {}; B: {}", pl.col("includes"), pl.col("_inc_b"))),
        diff=pl.col("B") - pl.col("A"),
        rel_diff=(pl.col("B") - pl.col("A")) / pl.col("A").abs(),
    ).select("metric", "unit", "includes", "A", "B", "diff", "rel_diff")


@dataclass
class Comparison:
    """What ``compare`` produced: the page and the straggler changes it shows (for the
    command's text and JSON output)."""

    path: Path
    stragglers: rs.StragglerChanges


def build_compare(store: Store, run_a: str, run_b: str, out: Path) -> Path:
    """Write an HTML page comparing two runs (:func:`compare_runs`) and return its path."""
    return compare_runs(store, run_a, run_b, out).path


def compare_runs(store: Store, run_a: str, run_b: str, out: Path) -> Comparison:
    """Write an HTML page comparing two runs: headline differences, straggler changes, then
    every view of run A beside the same view of run B."""
    check_out_path(out)
    runs = store.runs()
    for r in (run_a, run_b):
        if r not in runs:
            raise ValueError(f"run {r!r} not in {store.root}")
    da, db = rd.load_run(store, run_a), rd.load_run(store, run_b)
    try:
        sa, sb = run_sections(da), run_sections(db)
        diff = guard(lambda: [Block("table", frame=_compare_table(da, db))])
        strag = rs.compare(da, db)
        paper_pair = rp.compare_blocks(
            da, db
        )  # the paper's Figs. 8 and 11 (commscope.reports.paper)
    finally:
        for d in (da, db):
            if d.con is not None:
                d.con.close()
    page = _Page()
    strag_blocks = [Block("text", text=line) for line in strag.run_lines]
    if strag.table.height:
        strag_blocks.append(Block("table", frame=strag.table))
    parts = [
        '<section id="diff"><h2>Differences</h2><p class="note">'
        f"{esc(f'Headline numbers of {run_a} (A) and {run_b} (B); diff = B - A.')}</p>"
        f"{page.blocks(diff)}</section>",
        '<section id="straggler-changes"><h2>Straggler changes</h2><p class="note">'
        + esc(
            f"Top offenders (ranks the others waited for; stragglers mart) of {run_a} (A) and "
            f"{run_b} (B): rank order, same-stage wait caused (ms), share of the run's wait "
            "(%), where the delay sat, persistent; diff = B - A."
        )
        + f"</p>{page.blocks(strag_blocks)}</section>",
        # the paper's two-run figures (commscope.reports.paper.compare_blocks)
        '<section id="paper-pair"><h2>The paper\'s two-run figures</h2><p class="note">'
        f"{esc(f'APNet 2024 Figs. 8 and 11 from {run_a} (A) and {run_b} (B).')}</p>"
        f"{page.blocks(paper_pair)}</section>",
    ]
    for x, y in zip(sa, sb, strict=True):
        parts.append(
            f'<section id="{esc(x.key)}"><h2>{esc(x.title)}</h2><p class="note">{esc(x.blurb)}</p>'
            f'<div class="pair"><div><h3>{esc(run_a)}</h3>{page.blocks(x.blocks)}</div>'
            f"<div><h3>{esc(run_b)}</h3>{page.blocks(y.blocks)}</div></div></section>"
        )
    title = f"commscope compare: {run_a} vs {run_b}"
    nav = _nav(
        [
            Section("diff", "Differences", ""),
            Section("straggler-changes", "Straggler changes", ""),
            Section("paper-pair", "Paper Figs. 8, 11", ""),
            *sa,
        ]
    )
    path = _write(out, render_page(title, _header(title, [da, db]), nav + "".join(parts)))
    return Comparison(path, strag)
