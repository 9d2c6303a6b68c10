"""Shared machinery of the benchmark suite: child-process measurement, result rows, inputs.

Every figure is measured in its own child process so that its peak memory is that process's:
``os.wait4`` returns the child's ``ru_maxrss`` (the largest single process of its tree), and a
poller sums ``VmRSS`` over the child and all its descendants every 50 ms (what a multi-process
tool such as HTA's loader really holds). Wall time is ``perf_counter`` around the child,
interpreter start-up and imports included (what a user waits for).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""Project root."""

PY = sys.executable
"""The project interpreter (children run the project code with it)."""

CHILD = [PY, "-m", "bench._child"]
"""Command prefix of the commscope child (``bench/_child.py``)."""


@dataclass
class Measurement:
    """One child process: wall time, peak memory and its JSON answer.

    Attributes:
        wall_s: wall-clock seconds from spawn to exit.
        maxrss_mb: peak RSS of the largest single process of the tree (``ru_maxrss``), MiB.
        tree_rss_mb: peak of the summed RSS of the child and its descendants (polled), MiB.
        rc: exit status.
        out: the last stdout line parsed as JSON ({} if it is not JSON).
        stderr_tail: the end of stderr (for failures).
        stdout_tail: the end of stdout (for children that do not answer JSON).
        cpu_s: user + system CPU seconds of the child (all its threads, and the children it
            waited for), from ``os.wait4``: the figure to compare on a shared machine.
    """

    wall_s: float
    maxrss_mb: float
    tree_rss_mb: float
    rc: int
    out: dict[str, object]
    stderr_tail: str
    stdout_tail: str = ""
    cpu_s: float = 0.0

    @property
    def peak_mb(self) -> float:
        """Peak memory to report: the larger of the polled tree sum and ``ru_maxrss``."""
        return max(self.maxrss_mb, self.tree_rss_mb)


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            kids.extend(int(x) for x in (task / "children").read_text().split())
    except OSError:
        pass
    return kids


def _rss_kb(pid: int) -> int:
    try:
        with Path(f"/proc/{pid}/status").open() as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kb(pid: int) -> int:
    """Summed resident memory of ``pid`` and all its descendants, KiB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += _rss_kb(p)
        todo.extend(_children(p))
    return total


def measure(cmd: list[str], *, cwd: Path = ROOT, env: dict[str, str] | None = None) -> Measurement:
    """Run ``cmd`` as a child; return its wall time, peak memory and JSON answer.

    Raises:
        RuntimeError: the child exited non-zero (its stderr tail is in the message).
    """
    peak = 0
    done = threading.Event()
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    def poll() -> None:
        nonlocal peak
        while not done.wait(0.05):
            peak = max(peak, tree_rss_kb(proc.pid))

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    out_chunks: list[str] = []
    err_chunks: list[str] = []
    readers = [
        threading.Thread(target=lambda: out_chunks.append(proc.stdout.read()), daemon=True),  # type: ignore[union-attr]
        threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True),  # type: ignore[union-attr]
    ]
    for r in readers:
        r.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    poller.join()
    for r in readers:
        r.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    stdout, stderr = "".join(out_chunks), "".join(err_chunks)
    answer: dict[str, object] = {}
    lines = stdout.strip().splitlines()
    if lines:
        try:
            answer = json.loads(lines[-1])
        except json.JSONDecodeError:
            answer = {}
    m = Measurement(
        wall,
        usage.ru_maxrss / 1024,
        peak / 1024,
        proc.returncode,
        answer,
        stderr[-2000:],
        stdout[-2000:],
        usage.ru_utime + usage.ru_stime,
    )
    if m.rc != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited {m.rc}: {m.stderr_tail}")
    return m


@dataclass
class Row:
    """One figure of the results table, with the baseline it is compared to.

    Attributes:
        bench: benchmark name (module).
        case: what was measured (input and size).
        metric: e.g. ``wall_s``, ``MB/s``, ``peak RSS MB``.
        value: commscope's figure.
        baseline: the baseline's name ('' when the figure stands alone).
        baseline_value: the baseline's figure in the same run.
        ratio: the figure the target is about (defined per row in ``note``).
        target: the target, in words.
        met: whether the target is met (None when the row has no target).
        note: how the ratio is defined, or anything a reader must know.
    """

    bench: str
    case: str
    metric: str
    value: float | None
    baseline: str = ""
    baseline_value: float | None = None
    ratio: float | None = None
    target: str = ""
    met: bool | None = None
    note: str = ""
    extra: dict[str, object] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return asdict(self)


@dataclass
class Context:
    """Options every benchmark sees.

    Attributes:
        workdir: where generated inputs (cached) and scratch stores live.
        quick: small smoke-run sizes.
        text_gb: total size of the text-log input set, GB (1e9 bytes).
        memory_gb: sizes of the single-file memory-bound inputs, GB.
        kineto_iterations: iterations of the 8-rank Kineto run (about 40 MB per rank each 16).
        mart_ranks: world sizes of the marts/report runs.
        mart_iterations: iterations of those runs.
        hta_python: the interpreter of the HTA venv.
        keep: keep large generated inputs after the run.
    """

    workdir: Path
    quick: bool = False
    text_gb: float = 1.0
    memory_gb: tuple[float, ...] = (1.0, 4.0, 16.0)
    kineto_iterations: int = 16
    mart_ranks: tuple[int, ...] = (64, 256, 1024)
    mart_iterations: int = 50
    hta_python: Path = Path("/tmp/hta-venv/bin/python")
    keep: bool = False

    def scratch(self, name: str) -> Path:
        """A fresh, empty scratch folder under the work dir (e.g. a store)."""
        p = self.workdir / "scratch" / name
        shutil.rmtree(p, ignore_errors=True)
        p.mkdir(parents=True)
        return p


def commscope_generate(
    config: Path, out: Path, *, iterations: int, formats: str, extra: list[str] | None = None
) -> Path:
    """Write a synthetic run with ``commscope generate`` unless ``out`` already holds it.

    A ``.bench-done`` marker (with the arguments) makes the cache safe against interrupted runs.
    """
    args = [
        "--config",
        str(config),
        "--out",
        str(out),
        "--iterations",
        str(iterations),
        "--formats",
        formats,
        "--jobs",
        "2",
        *(extra or []),
    ]
    marker = out / ".bench-done"
    if marker.exists() and marker.read_text() == json.dumps(args):
        return out
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    cli = str(Path(PY).with_name("commscope"))
    subprocess.run([cli, "generate", *args], cwd=ROOT, check=True, capture_output=True)
    marker.write_text(json.dumps(args))
    return out


def files_under(folder: Path) -> list[Path]:
    """Regular, non-hidden files under ``folder``, sorted (what ingest discovers, sidecars aside)."""
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not p.name.startswith(".") and p.name != "manifest.json"
    )


def total_bytes(paths: list[Path]) -> int:
    """Sum of file sizes."""
    return sum(p.stat().st_size for p in paths)


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (the machine is shared: read figures with them)."""
    return [round(x, 2) for x in os.getloadavg()]


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b`` rounded, or None."""
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 2)
