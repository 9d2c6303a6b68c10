"""Text-log ingest (NCCL debug + DeepSpeed comms logger) against a regex script and ``wc -l``.

Input (SYNTHETIC, cached in the work dir): ``commscope generate`` of the 32-rank GPT-3B run
(configs/synthetic_gpt3b_4x2x4.toml) writes about 3/4 of the size as per-rank NCCL debug logs;
rank 0's DeepSpeed log is replicated into 12 files (each starts with a distinct
``synthetic replica k`` line, so ingest does not skip them as duplicates) for the last quarter.

Measured, each in its own process, after one untimed read that puts the files in the page cache:
``wc -l`` (the read limit), ``bench/baseline_regex.py`` (the minimal user script),
``bench/floor_polars.py`` (Polars' CSV tokeniser alone: the bound of any Polars-based parser),
``bench/floor_native.py`` (the regex script's fields by one vectorised Polars pass), and
``commscope`` ingest (all tables, Parquet written, every line accounted) with 1 and 2 jobs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from bench._common import (
    CHILD,
    PY,
    ROOT,
    Context,
    Row,
    commscope_generate,
    files_under,
    measure,
    ratio,
    total_bytes,
)

NAME = "text_logs"
NCCL_BYTES_PER_ITERATION = 4.32e6
"""NCCL bytes per iteration of the 32-rank config (measured: 777 MB for 180 iterations)."""
DS_REPLICAS = 12


def generated_text_run(ctx: Context, gb: float) -> Path:
    """The cached ``commscope generate`` run whose NCCL logs are about 3/4 of ``gb``."""
    iters = max(2, round(0.75 * gb * 1e9 / NCCL_BYTES_PER_ITERATION))
    return commscope_generate(
        ROOT / "configs" / "synthetic_gpt3b_4x2x4.toml",
        ctx.workdir / "gen" / f"text_i{iters}",
        iterations=iters,
        formats="nccl,deepspeed",
    )


def text_input_set(ctx: Context, gb: float) -> Path:
    """The input folder: hard links to the NCCL logs and the DeepSpeed replicas (cached)."""
    gen = generated_text_run(ctx, gb)
    out = ctx.workdir / f"text_{gb:g}gb"
    marker = out / ".bench-done"
    if marker.exists() and marker.read_text() == str(gen):
        return out
    shutil.rmtree(out, ignore_errors=True)
    (out / "nccl").mkdir(parents=True)
    (out / "deepspeed").mkdir()
    for f in sorted((gen / "nccl").iterdir()):
        os.link(f, out / "nccl" / f.name)
    ds = gen / "deepspeed" / "synthetic_rank0000.deepspeed.log"
    body = ds.read_bytes()
    for k in range(DS_REPLICAS):
        with (out / "deepspeed" / f"synthetic_replica{k:02d}.deepspeed.log").open("wb") as fh:
            fh.write(f"synthetic replica {k} of {ds.name} (commscope bench)\n".encode())
            fh.write(body)
    marker.write_text(str(gen))
    return out


def _lines_of(paths: list[Path]) -> int:
    """Lines as the parsers count them: ``\\n`` count plus one per file not ending in one."""
    extra = 0
    for p in paths:
        with p.open("rb") as fh:
            fh.seek(-1, os.SEEK_END)
            extra += fh.read(1) != b"\n"
    return extra


def run(ctx: Context) -> list[Row]:
    """Measure and return the rows of this benchmark."""
    gb = min(ctx.text_gb, 0.05) if ctx.quick else ctx.text_gb
    folder = text_input_set(ctx, gb)
    files = files_under(folder)
    size = total_bytes(files)
    mb = size / 1e6
    nccl_mb = total_bytes([f for f in files if "nccl" in f.parts[-2]]) / 1e6
    case = (
        f"{len(files)} files, {mb:.0f} MB (NCCL {nccl_mb:.0f} MB + DeepSpeed {mb - nccl_mb:.0f} MB)"
    )
    measure(["sh", "-c", 'cat "$@" > /dev/null', "sh", *map(str, files)])  # page cache
    wc = measure(["wc", "-l", *map(str, files)])
    wc_lines = int(wc.stdout_tail.strip().splitlines()[-1].split()[0]) + _lines_of(files)
    rx = measure([PY, str(ROOT / "bench" / "baseline_regex.py"), *map(str, files)])
    floor = measure([PY, str(ROOT / "bench" / "floor_polars.py"), *map(str, files)])
    native = measure([PY, str(ROOT / "bench" / "floor_native.py"), *map(str, files)])
    ing = measure([*CHILD, "ingest", str(ctx.scratch("text_j1")), "bench_text", str(folder)])
    ing2 = measure(
        [*CHILD, "ingest", "--jobs", "2", str(ctx.scratch("text_j2")), "bench_text", str(folder)]
    )
    cat = measure([*CHILD, "catalog", str(ctx.scratch("text_j1")), "bench_text"])
    if not ctx.keep:
        shutil.rmtree(ctx.workdir / "scratch", ignore_errors=True)
    o = ing.out
    accounted = (
        o.get("n_errors") == 0 and o.get("balanced") is True and o.get("lines_total") == wc_lines
    )
    note_acc = (
        f"every line accounted: {o.get('lines_total')} lines = {o.get('lines_parsed')} parsed + "
        f"{o.get('lines_ignored')} ignored + {o.get('lines_rejected')} rejected; wc -l "
        f"{wc_lines}; {o.get('rows')} rows; regex script matched {rx.out.get('matches')}"
    )
    speed = ratio(rx.wall_s, ing.wall_s)
    rows = [
        Row(
            NAME,
            case,
            "MB/s (1 job)",
            round(mb / ing.wall_s, 1),
            "regex script",
            round(mb / rx.wall_s, 1),
            speed,
            ">= 2x the regex script",
            bool(speed is not None and speed >= 2 and accounted),
            "ratio = regex wall / commscope wall; " + note_acc,
            {
                "commscope_wall_s": round(ing.wall_s, 2),
                "regex_wall_s": round(rx.wall_s, 2),
                "wc_wall_s": round(wc.wall_s, 2),
                "commscope_cpu_s": round(ing.cpu_s, 2),
                "regex_cpu_s": round(rx.cpu_s, 2),
                "accounted": accounted,
                "bytes": size,
                "ingest": o,
                "regex": rx.out,
            },
        ),
        Row(
            NAME,
            case,
            "MB/s (1 job)",
            round(mb / ing.wall_s, 1),
            "wc -l",
            round(mb / wc.wall_s, 1),
            ratio(wc.wall_s, ing.wall_s),
            "reported",
            None,
            "ratio = wc wall / commscope wall (share of the read limit)",
        ),
        Row(
            NAME,
            case,
            "MB/s (Polars tokeniser floor)",
            round(mb / floor.wall_s, 1),
            "regex script",
            round(mb / rx.wall_s, 1),
            ratio(rx.wall_s, floor.wall_s),
            "bound",
            None,
            "floor_polars.py: every line cut into string fields by Polars' CSV reader and nothing "
            "else (no matching, typing or Parquet); a Polars-based ingest cannot beat it, so "
            "this ratio bounds the commscope / regex-script ratio",
            {
                "floor_wall_s": round(floor.wall_s, 2),
                "floor_cpu_s": round(floor.cpu_s, 2),
                "floor": floor.out,
            },
        ),
        Row(
            NAME,
            case,
            "MB/s (native floor)",
            round(mb / native.wall_s, 1),
            "regex script",
            round(mb / rx.wall_s, 1),
            ratio(rx.wall_s, native.wall_s),
            "bound",
            None,
            "floor_native.py: the regex script's fields by one vectorised Polars pass per file "
            "(lines read multi-threaded, classed by literal search and a capture-free grammar "
            "match, cut by position, typed, one Parquet file; every line counted by class) and "
            f"nothing else; CPU {native.cpu_s:.2f} s vs regex {rx.cpu_s:.2f} s",
            {
                "native_wall_s": round(native.wall_s, 2),
                "native_cpu_s": round(native.cpu_s, 2),
                "regex_cpu_s": round(rx.cpu_s, 2),
                "native": native.out,
            },
        ),
        Row(
            NAME,
            case,
            "MB/s (--jobs 2)",
            round(mb / ing2.wall_s, 1),
            "regex script",
            round(mb / rx.wall_s, 1),
            ratio(rx.wall_s, ing2.wall_s),
            "",
            None,
            "2 worker processes on the 2 cores; regex script is single-process",
            {"commscope_wall_s": round(ing2.wall_s, 2), "commscope_cpu_s": round(ing2.cpu_s, 2)},
        ),
        Row(
            NAME,
            case,
            "catalog build s (one-off per store)",
            round(cat.wall_s, 2),
            "",
            None,
            None,
            "reported",
            None,
            "Store.refresh_catalog on the ingested store (DuckDB views over every table and SQL "
            f"module; {cat.out.get('catalog_s', 0):.2f} s of it in the call): written once per "
            "store, by the first ingest from the CLI or the first query, not part of the "
            "ingest figures above",
        ),
        Row(
            NAME,
            case,
            "peak RSS MB",
            round(ing.peak_mb, 0),
            "regex script",
            round(rx.peak_mb, 0),
            ratio(ing.peak_mb, rx.peak_mb),
            "",
            None,
            "ratio = commscope / regex script (which keeps its matches in a list)",
        ),
    ]
    return rows


__all__ = ["NAME", "generated_text_run", "run", "text_input_set"]
