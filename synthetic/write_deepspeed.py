"""DeepSpeed comms-logger output of global rank 0: verbose per-op lines and the summary table.

Why: DeepSpeed's logger is the source the paper's Table 3 was read from, with its own quirks
that an analysis must undo (FORMATS_text_logs.md §1): sizes in 1024-based units with SI names
(``convert_size``), algbw doubled for all-reduce, busbw computed with the **global** world size
whatever the group, latencies that include waiting for the slowest peer, 10 % trimmed means in
the summary, and from v0.18.3 cumulative per-record latencies. All of them are reproduced.

Shapes, by ``deepspeed_version``:

* verbose line through the ``DeepSpeed`` logger: ``[<asctime>] [INFO] [logging.py:<n>:log_dist]
  [Rank 0] `` + v0.7.0-v0.10.0 ``rank=0 | comm op: X | time (ms): .. | msg size: .. | algbw
  (Gbps): ..  | busbw (Gbps): .. `` (two spaces, trailing space) or v0.10.1+ ``comm op: X | time
  (ms): .. | msg size: .. | algbw (Gbps): .. | busbw (Gbps): ..``; record names
  ``all_gather_base``/``reduce_scatter_base`` before v0.9.0;
* ``steps: N loss: .. iter time (s): .. samples/sec: ..`` after each iteration (pipeline engine);
* ``log_summary()`` at the end: a ``log_summary_barrier`` verbose line, the table (every cell
  ``f"{x: <20}"``; record names in first-seen order; rows by byte size; Total = sum, Avg /
  tput_avg / busbw_avg = ``trim_mean(.., 0.1)``), then the second barrier's verbose line.

``asctime`` is the wall clock (UTC, node clock of rank 0, skew included) when the op finished,
cut to the millisecond as ``logging`` does: DeepSpeed logs a verbose line after ``timed_op``
synchronized and stopped the op's timer (source facts in ``parsers/deepspeed_comms.py``), so
the op started ``time (ms)`` before it.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import polars as pl

from commscope.model.equations import ring_allreduce_factor, ring_gather_factor
from commscope.model.traffic import stage_layers
from commscope.synthetic.common import DS_RECORD_NAMES, Names
from commscope.synthetic.simulate import Simulation

SIZE_NAMES = ("B", "KB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB")


def convert_size(size_bytes: int) -> str:
    """DeepSpeed's ``convert_size``: 1024-based, two decimals, SI unit names."""
    if size_bytes == 0:
        return "0B"
    i = math.floor(math.log(size_bytes, 1024))
    p = math.pow(1024, i)
    s = round(size_bytes / p, 2)
    return f"{s} {SIZE_NAMES[i]}"


def calc_bw_log(comm_op: str, size: float, duration_ms: float, world: int) -> tuple[float, float]:
    """DeepSpeed's ``calc_bw_log``: (algbw, busbw) in Gbit/s with n = the global world size."""
    n = world
    if duration_ms <= 0:
        return 0.0, 0.0
    if comm_op == "all_to_all_single":
        tput = size / duration_ms
        busbw = (size / duration_ms) * ring_gather_factor(n)
    elif comm_op in (
        "all_gather",
        "all_gather_into_tensor",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "all_gather_base",
        "reduce_scatter_base",
    ):
        size *= n
        tput = size / duration_ms
        busbw = (size / duration_ms) * ring_gather_factor(n)
    elif comm_op in ("all_reduce", "all_reduce_coalesced", "inference_all_reduce"):
        tput = size * 2 / duration_ms
        busbw = (size / duration_ms) * ring_allreduce_factor(n)
    else:  # send, recv, broadcast, barrier, ...
        tput = size / duration_ms
        busbw = tput
    return tput * 8 / 1e6, busbw * 8 / 1e6


def trim_mean(data: list[float], trim_percent: float) -> float:
    """``deepspeed.utils.timer.trim_mean``."""
    n = len(data)
    if n == 0:
        return 0.0
    values = sorted(data)
    k = round(n * trim_percent)
    kept = values[k : n - k]
    return sum(kept) / len(kept) if kept else 0.0


def asctime(epoch_ns: int) -> str:
    """``logging``'s default ``asctime`` (``YYYY-MM-DD HH:MM:SS,mmm``), rendered in UTC."""
    dt = datetime.fromtimestamp(epoch_ns // 1_000_000_000, UTC)
    ms = (epoch_ns // 1_000_000) % 1000
    return dt.strftime("%Y-%m-%d %H:%M:%S") + f",{ms:03d}"


class DeepSpeedWriter:
    """Writes rank 0's DeepSpeed log (only the lane that holds rank 0 does anything)."""

    name = "deepspeed"

    def __init__(self, sim: Simulation, names: Names) -> None:
        """Versions and quirks from the options."""
        self.sim = sim
        self.names = names
        self.opts = sim.opts
        ver = sim.opts.deepspeed
        self.old_verbose = ver < (0, 10, 1)
        self.old_names = ver < (0, 9, 0)
        self.cumulative = ver >= (0, 18, 3)
        self.lineno = 96 if self.old_verbose else (123 if ver >= (0, 18, 0) else 128)
        self.world = sim.run.world
        self.epoch = sim.opts.start_epoch_ns + sim.cluster.skew_ns(0)
        self._fh: IO[str] | None = None
        self._path: Path | None = None
        self._cum: dict[str, float] = {}
        self._summary: dict[str, dict[int, list[list[float]]]] = {}
        self.truncated: dict[str, object] = {}

    def _record(self, op: str) -> str:
        name = DS_RECORD_NAMES.get(op, op)
        if self.old_names:
            name = {
                "all_gather_into_tensor": "all_gather_base",
                "reduce_scatter_tensor": "reduce_scatter_base",
            }.get(name, name)
        return name

    def _log(self, t_ns: int, msg: str, src: str = "") -> str:
        src = src or f"logging.py:{self.lineno}:log_dist"
        return f"[{asctime(self.epoch + t_ns)}] [INFO] [{src}] {msg}"

    def open_lane(self, ranks: list[int]) -> None:
        """Open the log if this lane holds rank 0 (and rank 0 is not a missing file)."""
        if 0 not in ranks or 0 in self.opts.scenario.missing_ranks:
            return
        path = self.names.deepspeed()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        self._fh = path.open("w", encoding="utf-8")
        run = self.sim.run
        par = run.parallel
        ds_ver = self.opts.deepspeed_version
        lines = [
            self._log(
                0,
                "Setting ds_accelerator to cuda (auto detect)",
                "real_accelerator.py:203:get_accelerator",
            ),
            self._log(0, "cdb=None", "comm.py:652:init_distributed"),
            self._log(
                0,
                "Initializing TorchBackend in DeepSpeed with backend nccl",
                "comm.py:683:init_distributed",
            ),
        ]
        coords = ", ".join(
            f"ProcessCoord(pipe={ri.stage}, data={ri.dp}, model={ri.tp}): {ri.rank}"
            for ri in self.sim.cluster.ranks
        )
        lines.append(f"Using topology: {{{coords}}}")
        lines.append(
            self._log(
                0,
                "Partitioning pipeline stages with method type:transformer",
                "module.py:375:_partition_layers",
            )
        )
        for s, n in enumerate(stage_layers(run)):
            lines.append(f"stage={s} layers={n}")
        lines.append(
            self._log(
                0,
                f"[Rank 0] DeepSpeed info: version={ds_ver}, git-hash=unknown, git-branch=unknown",
            )
        )
        lines.append(
            self._log(
                0,
                f"[Rank 0] synthetic run (commscope generate): pp={par.pp} tp={par.tp} dp={par.dp} world={run.world} seed={self.opts.seed}",
            )
        )
        self._fh.write("\n".join(lines) + "\n")

    def _verbose(self, t_ns: int, record: str, latency_ms: float, size: int) -> str:
        shown = latency_ms
        if self.cumulative:
            shown = self._cum.get(record, 0.0) + latency_ms
            self._cum[record] = shown
        raw = record
        algbw, busbw = calc_bw_log(raw, size, shown, self.world)
        bucket = self._summary.setdefault(record, {}).setdefault(size, [[], [], []])
        bucket[0].append(shown)
        bucket[1].append(algbw)
        bucket[2].append(busbw)
        if self.old_verbose:
            msg = (
                f"[Rank 0] rank=0 | comm op: {record} | time (ms): {shown:.2f} | msg size: {convert_size(size)} "
                f"| algbw (Gbps): {algbw:.2f}  | busbw (Gbps): {busbw:.2f} "
            )
        else:
            msg = (
                f"[Rank 0] comm op: {record} | time (ms): {shown:.2f} | msg size: {convert_size(size)} "
                f"| algbw (Gbps): {algbw:.2f} | busbw (Gbps): {busbw:.2f}"
            )
        return self._log(t_ns, msg)

    def write_lane(self, iteration: int, events: pl.DataFrame) -> None:
        """Append rank 0's verbose lines and the ``steps:`` line of one iteration."""
        if self._fh is None:
            return
        ev = events.filter((pl.col("rank") == 0) & (pl.col("kind") == "comm")).sort("seq")
        lines = []
        for op, size, post, end in ev.select("op", "msg_bytes", "t_post", "t_end").iter_rows():
            lines.append(self._verbose(end, self._record(op), (end - post) / 1e6, int(size)))
        start, stop = self.sim.iteration_bounds(iteration, 0)
        secs = (stop - start) / 1e9
        loss = 11.0 * math.exp(-0.04 * iteration) + 1.5
        gb = self.sim.run.model.global_batch
        lines.append(
            f"steps: {iteration + 1} loss: {loss:0.4f} iter time (s): {secs:0.3f} samples/sec: {gb / secs:0.3f}"
        )
        self._fh.write("\n".join(lines) + "\n")

    def close_lane(self) -> list[Path]:
        """Write ``log_summary()`` (barrier, table, barrier) and close."""
        if self._fh is None or self._path is None:
            return []
        end = self.sim.iter_start[-1][0]
        barrier_ms = 0.61
        lines = [self._verbose(end + 610_000, "log_summary_barrier", barrier_ms, 0)]
        lines.append(
            f"{'Comm. Op': <20}{'Message Size': <20}{'Count': <20}{'Total Latency(ms)': <20}"
            f"{'Avg Latency(ms)': <20}{'tput_avg (Gbps)': <20}{'busbw_avg (Gbps)': <20}"
        )
        for record, sizes in self._summary.items():
            lines.append(record)
            for size, (lat, alg, bus) in sorted(sizes.items()):
                lines.append(
                    f"{' ': <20}{convert_size(size): <20}{len(lat): <20}{sum(lat): <20.2f}"
                    f"{trim_mean(lat, 0.1): <20.2f}{trim_mean(alg, 0.1): <20.2f}{trim_mean(bus, 0.1): <20.2f}"
                )
        lines.append(self._verbose(end + 1_850_000, "log_summary_barrier", 1.24, 0))
        self._fh.write("\n".join(lines) + "\n")
        self._fh.close()
        self._fh = None
        path = self._path
        if self.opts.scenario.truncate_rank == 0:
            from commscope.synthetic.write_nccl import truncate_mid_line

            self.truncated = truncate_mid_line(path, self.opts.scenario.truncate_fraction)
        return [path]
