"""Peak memory while ingesting one NCCL debug file of 1, 4 and 16 GB (must stay flat, < 2 GB).

Input (SYNTHETIC): the per-rank NCCL logs of the cached text-log run appended round-robin into
ONE file until it reaches the size, i.e. a debug file that many processes' (and restarted jobs')
output was appended to. One file is the hard case: ingest works file by file, so a folder of
many files never holds more than its largest file's working set. The file is deleted after the
measurement unless ``--keep``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bench._common import CHILD, Context, Row, measure
from bench.text_logs import generated_text_run

NAME = "memory_bound"
LIMIT_MB = 2048.0


def big_file(ctx: Context, gb: float) -> Path:
    """Write (or reuse) the single ``gb``-GB NCCL file."""
    gen = generated_text_run(ctx, min(ctx.text_gb, 0.05) if ctx.quick else ctx.text_gb)
    parts = sorted((gen / "nccl").iterdir())
    out = ctx.workdir / "memory" / f"nccl_{gb:g}gb.log"
    target = int(gb * 1e9)
    if out.exists() and out.stat().st_size >= target:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    written, i = 0, 0
    with out.open("wb") as dst:
        while written < target:
            with parts[i % len(parts)].open("rb") as src:
                while chunk := src.read(16 << 20):
                    dst.write(chunk)
                    written += len(chunk)
            i += 1
    return out


def run(ctx: Context) -> list[Row]:
    """Measure and return the rows of this benchmark."""
    sizes = (0.05, 0.2) if ctx.quick else ctx.memory_gb
    rows: list[Row] = []
    peaks: list[float] = []
    for gb in sizes:
        f = big_file(ctx, gb)
        size = f.stat().st_size
        m = measure([*CHILD, "ingest", str(ctx.scratch("memory")), "bench_memory", str(f)])
        peaks.append(m.peak_mb)
        ok = m.out.get("n_errors") == 0 and m.out.get("balanced") is True
        rows.append(
            Row(
                NAME,
                f"one NCCL file, {size / 1e9:.2f} GB",
                "peak RSS MB",
                round(m.peak_mb, 0),
                "",
                None,
                round(m.peak_mb / (size / 1e6), 4),
                "< 2048 MB",
                bool(m.peak_mb < LIMIT_MB and ok),
                f"ratio = peak RSS / file size; {size / 1e6 / m.wall_s:.1f} MB/s, "
                f"{m.wall_s:.0f} s; {m.out.get('lines_total')} lines, balanced {ok}",
                {"wall_s": round(m.wall_s, 1), "ingest": m.out},
            )
        )
        if not ctx.keep:
            f.unlink()
            shutil.rmtree(ctx.workdir / "scratch", ignore_errors=True)
    if len(peaks) > 1:
        flat = round(peaks[-1] / peaks[0], 2)
        rows.append(
            Row(
                NAME,
                f"{sizes[-1]:g} GB vs {sizes[0]:g} GB",
                "peak RSS growth",
                flat,
                target="flat (about 1x)",
                met=bool(flat < 1.5),
                note=f"largest over smallest peak RSS for a {sizes[-1] / sizes[0]:g}x larger file",
            )
        )
    return rows


__all__ = ["NAME", "big_file", "run"]
