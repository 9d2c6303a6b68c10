"""Peers side by side (issue 16, item 6): commscope, HTA 0.5.0 and the test oracle on real traces.

For every real Kineto trace in ``../shared/samples/kineto`` (one file = one unit) and every
``sample_traces/*/kineto`` folder (one run, all its ranks = one unit):

* **commscope**: ``bench._child peers``: ingest + derive into a scratch store, then
  ``iteration_breakdown`` (comm_ns, t_comp_ns, hidden_comm_ns per rank and iteration) and every
  ``comm_ops`` call (kernel-timed duration, msg_bytes, group_size);
* **HTA**: ``bench/hta_peers.py`` in the HTA venv (``--hta-python``), loaded twice: with HTA's
  defaults (times rounded to whole µs, last ProfilerStep dropped) and "exact" (rounding off, last
  step kept), per rank-iteration by HTA's own analyzers (see that file for what each computes);
* **reference**: ``tests/oracle/kineto_reference.py`` (``read(path)``), an independent plain-JSON
  reader, when the module is on this branch.

One table per unit: metric | commscope | HTA | reference | Δ vs HTA % | Δ vs reference % | HTA
(defaults). "HTA" is the exact load, so both sides read the same events and the same steps;
the defaults column shows what an HTA user sees (rounded, last step missing). Per collective
op: calls with a kernel time, the summed kernel time, the largest per-call duration difference
to HTA (calls matched to HTA's kernels by rank and correlation id), and the median busbw.
HTA 0.5.0 computes no bandwidth: its busbw here is computed by this module from HTA's parsed
kernel duration and collective args (``In/Out msg nelems`` x ``dtype``, ``Group size``) with the
project's convention (``busbw_gb_s``), where the trace carries those args (PyTorch >= 2.3).
commscope's busbw is the same formula over its own ``comm_ops`` (msg_bytes, group_size,
dur_ns); the largest ``effective_bandwidth`` busbw of the run is shown beside.
"""

from __future__ import annotations

import importlib
import math
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._common import CHILD, ROOT, Context, Row, measure

NAME = "peers"

ACCEPTANCE_TRACE = "hta_nccl_parser_config"
"""The unit whose per-iteration hidden comm must equal HTA (rounding off) within 0.01 %."""

ACCEPTANCE_PCT = 0.01

ELEM_BYTES = {
    "float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2,
    "bfloat16": 2, "long": 8, "int64": 8, "int": 4, "int32": 4, "short": 2, "int16": 2,
    "char": 1, "int8": 1, "byte": 1, "uint8": 1, "bool": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
    "complexfloat": 8, "complexdouble": 16,
}  # fmt: skip
"""Bytes per element of the c10 ScalarType names Kineto writes in ``dtype`` (lower-cased)."""


def elem_bytes(dtype: object) -> int | None:
    """Bytes per element of a Kineto ``dtype`` name (``Float``, ``BFloat16``, ...); None if unknown."""
    if not isinstance(dtype, str) or not dtype:
        return None
    return ELEM_BYTES.get(dtype.strip().lower().removeprefix("c10::"))


def normalize_op(name: object) -> str | None:
    """A collective name as PyTorch/HTA write it -> the project's op name; None if not a collective.

    ``allreduce``, ``allreduce_coalesced`` -> ``all_reduce``; ``_allgather_base``,
    ``allgather_into_tensor_coalesced`` -> ``all_gather``; ``reduce_scatter_tensor`` ->
    ``reduce_scatter``; ``alltoall_base`` -> ``all_to_all``; ``broadcast``, ``reduce``, ``send``,
    ``recv``, ``barrier`` as such.
    """
    if not isinstance(name, str) or not name:
        return None
    s = name.lower().replace("_", "").replace(" ", "")
    for key, op in (
        ("allreduce", "all_reduce"),
        ("reducescatter", "reduce_scatter"),
        ("allgather", "all_gather"),
        ("alltoall", "all_to_all"),
        ("broadcast", "broadcast"),
        ("barrier", "barrier"),
        ("reduce", "reduce"),
        ("send", "send"),
        ("recv", "recv"),
        ("gather", "gather"),
        ("scatter", "scatter"),
    ):
        if key in s:
            return op
    return None


def hta_msg_bytes(
    op: str | None, in_nelems: object, out_nelems: object, dtype: object
) -> int | None:
    """msg_bytes (the project's convention) from HTA's parsed collective args.

    all_reduce, broadcast, reduce, all_to_all, send/recv, all_gather: ``In msg nelems`` (the full
    or per-rank send buffer); reduce_scatter: ``Out msg nelems`` (the per-rank shard); times the
    element size. None when the args are missing (HTA's default value 0) or the dtype is unknown.
    """
    elem = elem_bytes(dtype)
    n = out_nelems if op == "reduce_scatter" else in_nelems
    if op is None or elem is None or not isinstance(n, (int, float)) or n <= 0:
        return None
    return int(n) * elem


def busbw_gb_s(op: str | None, msg_bytes: object, n: object, dur_ns: object) -> float | None:
    """nccl-tests bus bandwidth, GB/s (1e9 bytes/s), by the project's convention.

    algbw = S / t with S = msg_bytes x n for all_gather and reduce_scatter, else msg_bytes;
    busbw = algbw x 2(n-1)/n (all_reduce), (n-1)/n (all_gather, reduce_scatter, all_to_all), 1
    otherwise. None when a size, the group size or the duration is missing or not positive.
    """
    ok = all(isinstance(v, (int, float)) and v > 0 for v in (msg_bytes, n, dur_ns))
    if op is None or not ok:
        return None
    size, g, t = float(msg_bytes), float(n), float(dur_ns)  # type: ignore[arg-type]
    if op in ("all_gather", "reduce_scatter"):
        size *= g
    factor = {"all_reduce": 2 * (g - 1) / g}.get(op, (g - 1) / g)
    if op not in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        factor = 1.0
    return size / t * factor


def rel_diff_pct(a: float | None, b: float | None) -> float | None:
    """|a - b| / |b| in %; 0 when both are 0, inf when only b is 0; None when either is missing."""
    if a is None or b is None:
        return None
    if b == 0:
        return 0.0 if a == 0 else float("inf")
    return abs(a - b) / abs(b) * 100


def median(values: Iterable[float | None]) -> float | None:
    """Median of the non-missing values; None when there are none."""
    v = [x for x in values if x is not None]
    return statistics.median(v) if v else None


@dataclass
class Line:
    """One row of a unit's table. Times in µs, bandwidth in GB/s, counts as such."""

    metric: str
    commscope: float | None
    hta: float | None = None
    reference: float | None = None
    hta_default: float | None = None
    compare: bool = True  # Δ columns computed (False for counts shown for information)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form with the Δ columns."""
        return {
            "metric": self.metric,
            "commscope": self.commscope,
            "hta": self.hta,
            "reference": self.reference,
            "delta_hta_pct": rel_diff_pct(self.commscope, self.hta) if self.compare else None,
            "delta_reference_pct": (
                rel_diff_pct(self.commscope, self.reference) if self.compare else None
            ),
            "hta_default": self.hta_default,
        }


def json_safe(obj: Any) -> Any:
    """``obj`` with every infinite or NaN float replaced by the string "inf"/"nan" (strict JSON)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else "inf"
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def _fmt(v: object, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v == float("inf"):
            return "inf"
        return f"{v:,.{digits}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def format_table(lines: Sequence[Line]) -> list[str]:
    """The aligned text table of one unit (Δ columns in % with 4 decimals)."""
    head = ("metric", "commscope", "HTA", "reference", "Δ HTA %", "Δ ref %", "HTA defaults")
    body = []
    for ln in lines:
        d = ln.as_dict()
        body.append(
            (
                ln.metric,
                _fmt(ln.commscope),
                _fmt(ln.hta),
                _fmt(ln.reference),
                _fmt(d["delta_hta_pct"], 4),
                _fmt(d["delta_reference_pct"], 4),
                _fmt(ln.hta_default),
            )
        )
    widths = [
        max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)
    ]
    out = [
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w)
            for i, (h, w) in enumerate(zip(head, widths, strict=True))
        )
    ]
    out.append("  ".join("-" * w for w in widths))
    for b in body:
        out.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(b, widths, strict=True))
            )
        )
    return out


@dataclass
class Unit:
    """One comparison unit: a trace file, or a folder of one run's rank traces."""

    name: str
    paths: list[Path]
    hta_dir: Path
    notes: list[str] = field(default_factory=list)


def trace_units(ctx: Context) -> list[Unit]:
    """The real Kineto traces: ../shared/samples/kineto files and sample_traces/*/kineto folders."""
    units: list[Unit] = []
    shared = next(
        (
            p
            for p in (
                ROOT.parent / "shared" / "samples" / "kineto",
                Path("/work/shared/samples/kineto"),
            )
            if p.is_dir()
        ),
        None,
    )
    links = ctx.workdir / "peers_inputs"
    if shared is not None:
        for f in sorted(shared.iterdir()):
            if not f.name.endswith((".json", ".json.gz")):
                continue
            name = f.name.removesuffix(".gz").removesuffix(".json")
            d = links / name
            d.mkdir(parents=True, exist_ok=True)
            link = d / f.name
            if not link.exists():
                link.symlink_to(f.resolve())
            units.append(Unit(name, [f], d))
    for folder in sorted((ROOT / "sample_traces").glob("*/kineto")):
        files = sorted(p for p in folder.iterdir() if p.name.endswith((".json", ".json.gz")))
        if files:
            units.append(Unit(f"sample_traces/{folder.parent.name}", files, folder))
    return units


def _reference(paths: list[Path]) -> tuple[dict[str, Any] | None, str]:
    """The oracle's figures per (rank, iteration) and per call, or None and why not."""
    try:
        mod = importlib.import_module("tests.oracle.kineto_reference")
    except ImportError as exc:
        return None, f"reference: tests/oracle/kineto_reference.py not importable ({exc})"
    iters: dict[tuple[int, int], dict[str, int]] = {}
    calls: list[dict[str, Any]] = []
    for p in paths:
        ref = mod.read(p)
        rank = ref.rank if ref.rank is not None else 0
        for it, v in ref.per_iteration.items():
            iters[(rank, int(it))] = v
        for c in ref.calls:
            calls.append(
                {
                    "rank": rank,
                    "op": c.op,
                    "ts_ns": c.kernel_ts_ns,
                    "dur_ns": c.dur_ns,
                    "busbw": c.busbw_gb_s,
                }
            )
    return {"iterations": iters, "calls": calls}, ""


def _hta_iterations(mode: dict[str, Any]) -> dict[tuple[int, int], dict[str, Any]]:
    return {(r["rank"], r["iteration"]): r for r in mode.get("iterations", [])}


def compare_unit(
    unit: Unit, cs: dict[str, Any], hta: dict[str, Any], ref: dict[str, Any] | None
) -> tuple[list[Line], dict[str, float | None]]:
    """The table lines of one unit and its largest per-iteration differences (%)."""
    exact = hta.get("exact", {}) if isinstance(hta.get("exact"), dict) else {}
    default = hta.get("default", {}) if isinstance(hta.get("default"), dict) else {}
    h_ex, h_df = _hta_iterations(exact), _hta_iterations(default)
    c_it = {
        (r["rank"] if r["rank"] is not None else 0, r["iteration"]): r
        for r in cs.get("iterations", [])
    }
    r_it = ref["iterations"] if ref else {}
    keys = sorted(
        {k for k in (*c_it, *h_ex, *h_df, *r_it) if k[1] is not None and k[1] >= 0},
        key=lambda k: (k[0], k[1]),
    )
    lines: list[Line] = []
    worst: dict[str, float | None] = {}

    def us(v: object) -> float | None:
        return float(v) / 1000 if isinstance(v, (int, float)) else None

    for key in keys:
        c, he, hd, rf = c_it.get(key, {}), h_ex.get(key, {}), h_df.get(key, {}), r_it.get(key, {})
        for label, ck, hk, rk in (
            ("comm", "comm_ns", "comm_us", "comm_ns"),
            ("compute", "t_comp_ns", "compute_us", "compute_ns"),
            ("hidden comm", "hidden_comm_ns", "hidden_us", "hidden_ns"),
        ):
            remainder = label == "compute" and c.get("comp_source") not in (None, "kernels")
            ln = Line(
                f"r{key[0]} it{key[1]} {label} µs"
                + (" (commscope: remainder)" if remainder else ""),
                us(c.get(ck)),
                he.get(hk),
                us(rf.get(rk)),
                hd.get(hk),
                compare=not remainder,
            )
            lines.append(ln)
            d = ln.as_dict()
            for side in ("hta", "reference"):
                v = d[f"delta_{side}_pct"]
                if v is not None:
                    k = f"{label}_vs_{side}"
                    worst[k] = max(worst.get(k) or 0.0, v)
    # kernels HTA kept but attributed to no step (launched outside every ProfilerStep)
    for (rank, it), he in sorted(h_ex.items()):
        if it < 0:
            for label, hk in (("comm", "comm_us"), ("compute", "compute_us")):
                lines.append(
                    Line(
                        f"r{rank} no step: {label} µs (HTA iteration -1)",
                        None,
                        he.get(hk),
                        compare=False,
                    )
                )
    lines += _collective_lines(cs, exact, ref)
    mx = cs.get("max_effective_busbw_gb_s")
    lines.append(Line("effective_bandwidth max busbw GB/s (mart)", mx, compare=False))
    return lines, worst


def _collective_lines(
    cs: dict[str, Any], exact: dict[str, Any], ref: dict[str, Any] | None
) -> list[Line]:
    timed = [c for c in cs.get("calls", []) if c.get("dur_ns")]
    # kernel-timed calls (timing_source unset: a store written before schema 1.4.0)
    calls = [c for c in timed if c.get("timing_source") in (None, "kernel")]
    cpu = [c for c in timed if c.get("timing_source") not in (None, "kernel")]
    hta_k = exact.get("collectives", [])
    by_corr = {(k["rank"], k["correlation"]): k for k in hta_k}
    ref_calls = [c for c in (ref or {}).get("calls", []) if c.get("dur_ns")]
    lines: list[Line] = []
    matched_keys: set[tuple[int, int]] = set()
    for op in sorted({c["op"] for c in calls} | {c["op"] for c in ref_calls}):
        mine = [c for c in calls if c["op"] == op]
        pairs = []
        for c in mine:
            k = by_corr.get((c["rank"] if c["rank"] is not None else 0, c.get("correlation")))
            if k is not None:
                pairs.append((c, k))
                matched_keys.add((k["rank"], k["correlation"]))
        theirs = [c for c in ref_calls if c["op"] == op]
        lines.append(
            Line(
                f"{op}: kernel-timed calls (HTA: kernels matched)",
                len(mine),
                len(pairs) if hta_k else None,
                len(theirs) if ref else None,
                compare=False,
            )
        )
        lines.append(
            Line(
                f"{op}: kernel time sum µs",
                sum(c["dur_ns"] for c in mine) / 1000,
                sum(k["dur_us"] for _, k in pairs) if pairs else None,
                sum(c["dur_ns"] for c in theirs) / 1000 if theirs else None,
            )
        )
        if pairs:
            lines.append(
                Line(
                    f"{op}: max |Δ dur| per call vs HTA µs",
                    max(abs(c["dur_ns"] / 1000 - k["dur_us"]) for c, k in pairs),
                    compare=False,
                )
            )
        h_bw = [
            busbw_gb_s(
                op,
                hta_msg_bytes(
                    op, k.get("in_msg_nelems"), k.get("out_msg_nelems"), k.get("msg_dtype")
                ),
                k.get("group_size"),
                k["dur_us"] * 1000,
            )
            for _, k in pairs
        ]
        lines.append(
            Line(
                f"{op}: median busbw GB/s",
                median(busbw_gb_s(op, c["msg_bytes"], c["group_size"], c["dur_ns"]) for c in mine),
                median(h_bw),
                median(c["busbw"] for c in theirs),
            )
        )
    for op in sorted({c["op"] for c in cpu}):
        mine = [c for c in cpu if c["op"] == op]
        sources = "/".join(sorted({str(c.get("timing_source")) for c in mine}))
        lines.append(
            Line(
                f"{op}: {sources}-timed calls, time sum µs (no kernel)",
                sum(c["dur_ns"] for c in mine) / 1000,
                compare=False,
            )
        )
    unmatched = [k for k in hta_k if (k["rank"], k["correlation"]) not in matched_keys]
    if hta_k:
        lines.append(
            Line(
                "HTA comm kernels with no commscope call (count)",
                None,
                len(unmatched),
                compare=False,
            )
        )
    return lines


def unit_notes(unit: Unit, cs: dict[str, Any], hta: dict[str, Any], ref_why: str) -> list[str]:
    """What each side chose on this unit (HTA's rounding, steps and filter; commscope's gaps)."""
    notes = list(unit.notes)
    if "error" in hta:
        notes.append(f"HTA failed: {hta['error']}")
    for mode in ("default", "exact"):
        m = hta.get(mode, {})
        if not isinstance(m, dict):
            continue
        if "error" in m:
            why = m["error"]
            if "'list' object" in why:
                why += " (the trace is a bare JSON array, the 2020 form; HTA reads only the object form)"
            notes.append(f"HTA ({mode}) cannot read it: {why}")
            continue
        load = m.get("load", {})
        parsed = sum(load.get("gpu_rows_parsed", {}).values())
        kept = sum(load.get("gpu_rows_kept", {}).values())
        stream0 = sum(load.get("gpu_rows_stream0_without_iteration", {}).values())
        if stream0 and mode == "exact":
            notes.append(
                f"HTA gives no iteration to GPU rows on stream 0 ({stream0} here; add_iteration "
                "handles stream < 0 and > 0 only): they appear under 'no step', so HTA's "
                "per-iteration compute misses them"
            )
        if not load.get("filter_applied"):
            if mode == "exact":
                notes.append(
                    f"{load.get('profiler_step_names')} ProfilerStep name(s): HTA filters "
                    "nothing (keeps kernels without a launch event; no step is dropped)"
                )
        elif parsed != kept:
            why = (
                "no launch event or launched after the last step's end"
                if mode == "exact"
                else "no launch event, or launched in/after the last step (dropped by default)"
            )
            notes.append(f"HTA ({mode}) dropped {parsed - kept} of {parsed} GPU rows ({why})")
    ex = {
        (r["rank"], r["iteration"])
        for r in hta.get("exact", {}).get("iterations", [])
        if r["iteration"] >= 0
    }
    df = {
        (r["rank"], r["iteration"])
        for r in hta.get("default", {}).get("iterations", [])
        if r["iteration"] >= 0
    }
    if ex - df:
        notes.append(
            "HTA defaults drop the last step: no 'HTA defaults' figure for "
            + ", ".join(f"r{r} it{i}" for r, i in sorted(ex - df))
        )
    e_it, d_it = (
        hta.get("exact", {}).get("iterations", []),
        hta.get("default", {}).get("iterations", []),
    )
    dd = {(r["rank"], r["iteration"]): r for r in d_it}
    rounded = any(
        dd.get((r["rank"], r["iteration"]), {}).get("comm_us") not in (None, r["comm_us"])
        for r in e_it
    )
    if rounded:
        notes.append(
            "the trace's times are fractional µs: HTA's default load rounds each event inward to "
            "whole µs (ts up, end down), so its defaults column is lower"
        )
    kernel_timed = sum(1 for c in cs.get("calls", []) if c.get("timing_source") == "kernel")
    ex_mode = hta.get("exact", {})
    hta_read = isinstance(ex_mode, dict) and "error" not in ex_mode
    if kernel_timed and hta_read and not ex_mode.get("collectives"):
        notes.append(
            "HTA counts only kernels named ^nccl.*Kernel as communication: the comm kernels "
            f"of the {kernel_timed} kernel-timed calls here are COMPUTATION to HTA"
        )
    by_source: dict[str, int] = {}
    for c in cs.get("calls", []):
        key = str(c.get("timing_source") or "unset")
        by_source[key] = by_source.get(key, 0) + 1
    if by_source:
        notes.append(
            "commscope calls by timing_source: "
            + ", ".join(f"{k} {v}" for k, v in sorted(by_source.items()))
        )
    if any(r.get("comp_source") not in (None, "kernels") for r in cs.get("iterations", [])):
        notes.append(
            "commscope: no compute kernels, so iteration_breakdown's t_comp_ns is the iteration "
            "minus communication (comp_source 'remainder'), not a kernel union: not compared"
        )
    ing = cs.get("ingest", {})
    if ing.get("n_errors"):
        notes.append(f"commscope ingest errors: {ing.get('errors')}")
    outside = cs.get("kernels_outside_steps")
    if outside:
        notes.append(
            f"commscope: {outside} of {cs.get('kernels')} kernels have no iteration (kernels.iteration NULL)"
        )
    if ref_why:
        notes.append(ref_why)
    return notes


def run_peers(ctx: Context) -> tuple[list[Row], dict[str, Any]]:
    """Compare every unit; print its table; return the summary rows and the JSON section."""
    if not ctx.hta_python.exists():
        why = f"no HTA venv at {ctx.hta_python} (see bench/README.md)"
        return [Row(NAME, "skipped", "", None, note=why)], {"skipped": why}
    section: dict[str, Any] = {"hta_python": str(ctx.hta_python), "units": {}}
    rows: list[Row] = []
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    for unit in trace_units(ctx):
        print(f"[bench] peers: {unit.name}", file=sys.stderr, flush=True)
        try:
            hta = measure(
                [str(ctx.hta_python), str(ROOT / "bench" / "hta_peers.py"), str(unit.hta_dir)]
            ).out
        except RuntimeError as exc:
            hta = {"error": str(exc)[-300:]}
        section.setdefault("hta_version", hta.get("hta_version"))
        section.setdefault("pandas_version", hta.get("pandas_version"))
        store = ctx.scratch(f"peers_{unit.hta_dir.name}")
        cs = measure([*CHILD, "peers", str(store), "peers", *map(str, unit.paths)]).out
        try:
            ref, ref_why = _reference(unit.paths)
        except Exception as exc:  # the oracle is another helper's work in progress
            ref, ref_why = None, f"reference failed: {type(exc).__name__}: {exc}"[:300]
        lines, worst = compare_unit(unit, cs, hta, ref)
        notes = unit_notes(unit, cs, hta, ref_why)
        print(f"\n== {unit.name}")
        print("\n".join(format_table(lines)))
        for n in notes:
            print(f"  * {n}")
        section["units"][unit.name] = {
            "files": [str(p) for p in unit.paths],
            "table": [ln.as_dict() for ln in lines],
            "notes": notes,
            "max_delta_pct": worst,
            "hta_overall_overlap_pct": {
                m: hta.get(m, {}).get("overall")
                for m in ("default", "exact")
                if isinstance(hta.get(m), dict)
            },
            "hta_seconds": {
                m: hta.get(m, {}).get("seconds")
                for m in ("default", "exact")
                if isinstance(hta.get(m), dict)
            },
        }
        is_target = unit.name.startswith(ACCEPTANCE_TRACE)
        hid = worst.get("hidden comm_vs_hta")
        rows.append(
            Row(
                NAME,
                unit.name,
                "max |Δ| hidden comm vs HTA, %",
                round(hid, 6) if hid is not None else None,
                "reference (max |Δ| %)",
                round(worst["hidden comm_vs_reference"], 6)
                if worst.get("hidden comm_vs_reference") is not None
                else None,
                None,
                f"<= {ACCEPTANCE_PCT} % of HTA (rounding off)" if is_target else "",
                (hid is not None and hid <= ACCEPTANCE_PCT) if is_target else None,
                "per rank-iteration; max |Δ| comm vs HTA "
                f"{_fmt(worst.get('comm_vs_hta'), 4)} %, compute {_fmt(worst.get('compute_vs_hta'), 4)} %",
            )
        )
    print()
    for r in rows:  # Row values go to JSON too
        r.value = r.value if r.value is None or math.isfinite(r.value) else None
        if r.baseline_value is not None and not math.isfinite(r.baseline_value):
            r.baseline_value = None
    return rows, json_safe(section)


def run(ctx: Context) -> list[Row]:
    """The summary rows only (``python -m bench`` stores the JSON section via ``run_peers``)."""
    return run_peers(ctx)[0]


__all__ = [
    "NAME",
    "busbw_gb_s",
    "elem_bytes",
    "format_table",
    "hta_msg_bytes",
    "json_safe",
    "median",
    "normalize_op",
    "rel_diff_pct",
    "run",
    "run_peers",
    "trace_units",
]
