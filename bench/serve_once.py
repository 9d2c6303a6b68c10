"""Fixed costs of the orchestrated commands: ``serve --once`` and ``demo`` against the bare work.

Issue 21 item 3 ("work done once"): ``serve`` and ``demo`` must not pay per-run fixed costs
that dwarf the work. Each case runs the orchestrated command and, in the same round, the same
work done by the plain commands, one child process each, alternating, ``ROUNDS`` rounds:

* ``serve --once``: a watched folder holding one run of two REAL NCCL debug files
  (``../shared/samples/nccl_debug/gfbench_2.20.5_2rank_normal_rank{0,1}_debugfile.txt``), into
  a new store and reports folder. Baseline: ``commscope ingest``, ``commscope derive`` and
  ``commscope report`` on the same files, one after the other (the sum of the three).
  Also against ``serve --once --prefect``: the same cycle through the Prefect flow on Prefect's
  temporary local server (the route ``--once`` took before issue 21).
* ``demo``: the README's main job (the bundled ``sample_traces/`` and the generated 32-rank
  run), one cycle in process, against ``demo --prefect`` (the same cycle through the flows on
  Prefect's temporary server).

Ratio = command / baseline, by wall time (what the user waits for) and CPU time (user +
system of each child and what it waited for; steadier on a shared machine). The target
(orchestration adds at most half the work) applies to ``serve --once`` against the plain
commands. Prefect's state
lives in a scratch ``XDG_STATE_HOME``, so no run reuses another's server database.
"""

from __future__ import annotations

import os
import shutil
import statistics
from pathlib import Path

from bench._common import PY, ROOT, Context, Measurement, Row, measure

NAME = "serve_once"
SHARED = ROOT.parent / "shared" / "samples" / "nccl_debug"
RANK_FILES = (
    "gfbench_2.20.5_2rank_normal_rank0_debugfile.txt",
    "gfbench_2.20.5_2rank_normal_rank1_debugfile.txt",
)
ROUNDS = 3
TARGET = 1.5
"""Orchestration may add at most half the work's own time (wall, median of the rounds)."""

CLI = str(Path(PY).with_name("commscope"))


def _env(state: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PREFECT_API_URL", None)
    env.pop("PREFECT_HOME", None)
    env["XDG_STATE_HOME"] = str(state)
    return env


def _watch_folder(ctx: Context) -> Path:
    watch = ctx.workdir / "serve_once" / "watch"
    run = watch / "gfbench"
    if not all((run / f).exists() for f in RANK_FILES):
        shutil.rmtree(watch, ignore_errors=True)
        run.mkdir(parents=True)
        for f in RANK_FILES:
            shutil.copy2(SHARED / f, run / f)
    return watch


def _sum(ms: list[Measurement]) -> tuple[float, float]:
    return sum(m.wall_s for m in ms), sum(m.cpu_s for m in ms)


def _serve(watch: Path, work: Path, tag: str, extra: list[str], env: dict[str, str]) -> Measurement:
    m = measure(
        [
            CLI,
            "serve",
            "--once",
            "--watch",
            str(watch),
            "--store",
            str(work / f"s_{tag}"),
            "--reports",
            str(work / f"r_{tag}"),
            *extra,
        ],
        env=env,
    )
    if not (work / f"r_{tag}" / "gfbench.html").exists():
        raise RuntimeError(f"serve --once {' '.join(extra)} wrote no report for gfbench")
    return m


def _serve_round(ctx: Context, watch: Path, i: int) -> tuple[tuple[float, float], ...]:
    """One round: ``serve --once``, the plain commands, ``serve --once --prefect``."""
    work = ctx.scratch(f"serve_once_{i}")
    env = _env(work / "state")
    served = _serve(watch, work, "serve", [], env)
    store = str(work / "s_plain")
    plain = [
        measure(
            [CLI, "ingest", str(watch / "gfbench"), "--run", "gfbench", "--store", store], env=env
        ),
        measure([CLI, "derive", "gfbench", "--store", store], env=env),
        measure(
            [CLI, "report", "gfbench", "--store", store, "-o", str(work / "r_plain.html")], env=env
        ),
    ]
    flowed = _serve(watch, work, "prefect", ["--prefect"], env)
    return (served.wall_s, served.cpu_s), _sum(plain), (flowed.wall_s, flowed.cpu_s)


def _demo_round(ctx: Context, i: int) -> tuple[tuple[float, float], ...]:
    work = ctx.scratch(f"demo_{i}")
    env = _env(work / "state")
    out = []
    for extra in ([], ["--prefect"]):
        tag = "prefect" if extra else "cycle"
        m = measure(
            [
                CLI,
                "demo",
                "--store",
                str(work / f"s_{tag}"),
                "--reports",
                str(work / f"r_{tag}"),
                "--generated",
                str(work / f"g_{tag}"),
                *extra,
            ],
            env=env,
        )
        out.append((m.wall_s, m.cpu_s))
    return tuple(out)


def _rows(
    case: str,
    what: str,
    base: str,
    pairs: list[tuple[tuple[float, float], ...]],
    *,
    targeted: bool = True,
    against: int = 1,
) -> list[Row]:
    """A wall row and a CPU row: element 0 of each round against element ``against``."""
    rows = []
    for k, metric in ((0, "wall s"), (1, "CPU s")):
        ours = [p[0][k] for p in pairs]
        theirs = [p[against][k] for p in pairs]
        ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
        med = statistics.median(ratios)
        target = f"<= {TARGET}x the work" if k == 0 and targeted else ""
        rows.append(
            Row(
                NAME,
                case,
                metric,
                round(statistics.median(ours), 2),
                base,
                round(statistics.median(theirs), 2),
                round(med, 2),
                target,
                bool(med <= TARGET) if target else None,
                note=(
                    f"{what}; {len(pairs)} rounds alternated; ratio = command / baseline, "
                    f"median of the rounds (spread {min(ratios):.2f}-{max(ratios):.2f})"
                ),
                extra={"orchestrated": ours, "baseline": theirs},
            )
        )
    return rows


def run(ctx: Context) -> list[Row]:
    """Measure and return the rows of this benchmark."""
    if not all((SHARED / f).exists() for f in RANK_FILES):
        return [Row(NAME, "skipped", "", None, note=f"real samples not found under {SHARED}")]
    rounds = 1 if ctx.quick else ROUNDS
    watch = _watch_folder(ctx)
    serve = [_serve_round(ctx, watch, i) for i in range(rounds)]
    rows = _rows(
        "serve --once, 2 REAL NCCL files (1 run)",
        "commscope serve --once on a new store vs ingest + derive + report",
        "ingest+derive+report",
        serve,
    )
    rows += _rows(
        "serve --once, 2 REAL NCCL files (1 run)",
        "commscope serve --once (in process) vs serve --once --prefect (Prefect's temporary server)",
        "serve --once --prefect",
        serve,
        targeted=False,
        against=2,
    )
    demo = [_demo_round(ctx, i) for i in range(rounds)]
    rows += _rows(
        "demo (sample_traces + generated 32-rank run)",
        "commscope demo (one cycle in process) vs demo --prefect, each on a new store",
        "demo --prefect",
        demo,
        targeted=False,
    )
    for i in range(rounds):
        for name in (f"serve_once_{i}", f"demo_{i}"):
            shutil.rmtree(ctx.workdir / "scratch" / name, ignore_errors=True)
    return rows


__all__ = ["NAME", "run"]
