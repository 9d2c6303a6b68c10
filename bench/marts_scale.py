"""Marts at scale: ``derive`` time for generated runs of 64, 256 and 1024 ranks (the cost curve).

Input (SYNTHETIC, cached with its store): configs/synthetic_gpt3b_1024.toml, (p, t) = (8, 4) and
d = ranks / 32, micro-batches per iteration held at 8 (global batch = 4 x 8 x d), NCCL debug +
DeepSpeed logs; ingested once (``--jobs 2``, not part of the figure) into a store kept under
the work dir, which the report benchmark reuses. The figure is one child running
``derive_run`` (every mart materialised to Parquet).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from bench._common import CHILD, ROOT, Context, Row, commscope_generate, measure

NAME = "marts_scale"
BASE_CONFIG = ROOT / "configs" / "synthetic_gpt3b_1024.toml"


def _config(ctx: Context, ranks: int) -> Path:
    d = ranks // 32
    text = BASE_CONFIG.read_text()
    text = re.sub(r"(?m)^dp = \d+", f"dp = {d}", text)
    text = re.sub(r"(?m)^global_batch = \d+", f"global_batch = {4 * 8 * d}", text)
    text = re.sub(r'(?m)^name = "GPT-3B-1024"', f'name = "GPT-3B-{ranks}"', text)
    path = ctx.workdir / "configs" / f"gpt3b_{ranks}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def prepared_store(
    ctx: Context, ranks: int, iterations: int
) -> tuple[Path, str, dict[str, object]]:
    """Generate and ingest the run once; return (store, run id, ingest figures)."""
    gen = commscope_generate(
        _config(ctx, ranks),
        ctx.workdir / "gen" / f"marts_r{ranks}_i{iterations}",
        iterations=iterations,
        formats="nccl,deepspeed",
    )
    store = ctx.workdir / "stores" / f"marts_r{ranks}_i{iterations}"
    run_id = f"bench_r{ranks}_i{iterations}"
    marker = store / ".bench-ingested.json"
    if marker.exists():
        return store, run_id, json.loads(marker.read_text())
    shutil.rmtree(store, ignore_errors=True)
    store.mkdir(parents=True)
    m = measure([*CHILD, "ingest", "--jobs", "2", str(store), run_id, str(gen)])
    info = {"ingest_wall_s": round(m.wall_s, 1), **m.out}
    marker.write_text(json.dumps(info, default=str))
    return store, run_id, info


def sizes(ctx: Context) -> tuple[tuple[int, ...], int]:
    """World sizes and iterations for this run (small ones with ``--quick``)."""
    return ((32, 64), 3) if ctx.quick else (ctx.mart_ranks, ctx.mart_iterations)


def run(ctx: Context) -> list[Row]:
    """Measure and return the rows of this benchmark."""
    ranks_list, iterations = sizes(ctx)
    rows: list[Row] = []
    for ranks in ranks_list:
        store, run_id, info = prepared_store(ctx, ranks, iterations)
        m = measure([*CHILD, "derive", str(store), run_id])
        target = "< 60 s" if ranks >= 1024 else ""
        rows.append(
            Row(
                NAME,
                f"{ranks} ranks x {iterations} iterations, {int(info.get('bytes', 0)) / 1e9:.2f} GB "
                f"of logs, {info.get('rows')} rows",
                "derive wall s",
                round(m.wall_s, 2),
                "",
                None,
                None,
                target,
                bool(m.wall_s < 60) if target else None,
                "all marts; slowest: "
                + ", ".join(
                    f"{k} {v:.1f}s"
                    for k, v in sorted(
                        dict(m.out.get("mart_seconds", {})).items(),  # type: ignore[arg-type]
                        key=lambda kv: -kv[1],
                    )[:3]
                )
                + f"; peak RSS {m.peak_mb:.0f} MB",
                {"derive": m.out, "ingest": info, "peak_rss_mb": round(m.peak_mb)},
            )
        )
    return rows


__all__ = ["NAME", "prepared_store", "run", "sizes"]
