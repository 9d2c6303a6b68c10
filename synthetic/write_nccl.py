"""NCCL debug output (``NCCL_DEBUG=INFO``, ``NCCL_DEBUG_SUBSYS=INIT,COLL,P2P,GRAPH``), one file per
rank, in the line shapes of a chosen NCCL 2.18 - 2.27 release (FORMATS_text_logs.md §2).

Why: NCCL logs are the only source that names every communicator and every call with its
element count; a generated run must look like a real ``NCCL_DEBUG_FILE=%h.%p`` per process.

What each file holds, in order:

* start-up: bootstrap interface, driver version, ``NCCL version`` (every rank from 2.22; before,
  only a process that is rank 0 of some communicator logs it), the network (``NET/IB`` RoCE or
  ``NET/Socket`` TCP);
* one init block per eager communicator (world via ``ncclCommInitRankConfig``, then TP, DP,
  tied-embedding, EP groups via ``ncclCommSplit`` from 2.21): ``Init START`` (2.19+),
  ``nRanks/nNodes/localRanks`` (2.20+), ring order (communicator rank 0 only; ``%3d`` columns up to
  20 ranks until 2.22, compact and capped at 127 characters from 2.23), ``Trees``, ``Ring`` (GRAPH),
  channel counts, ring connections (``P2P/IPC|CUMEM`` inside a node, ``[send]``/``[receive] via
  NET/IB|Socket`` across nodes; made lazily at the first collective from 2.22), ``Connected all
  rings/trees``, ``Init COMPLETE`` (with ``commId``; split lines carry ``parent/color/key``);
* pipeline p2p communicators (2 ranks) are created at their first ``Send``/``Recv`` and connect
  lazily, as PyTorch does;
* one ``COLL`` line per call, in call order: ``<Op>: opCount <hex> sendbuff .. recvbuff .. count ..
  datatype .. op .. root .. comm .. [nranks=..] stream ..`` (Send/Recv: ``sendbuff (nil)``, root =
  peer's rank in the p2p communicator); an all-to-all is a group of Send/Recv lines to every member
  (self included) sharing one opCount, as ``all_to_all_single`` with splits issues it;
* ``Destroy COMPLETE`` lines at exit.

NCCL logs carry no timestamps (2.26+ can add them; not generated), so clock skew does not show.
The truncation scenario cuts the rank's file in the middle of a line (see :func:`truncate_mid_line`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import polars as pl

from commscope.synthetic.common import (
    NCCL_OPNAMES,
    Names,
    buffer_pool,
    comm_pointer,
    host_ip,
    stream_pointer,
)
from commscope.synthetic.layout import Group, RankInfo
from commscope.synthetic.program import DTYPES, ELEM_BYTES
from commscope.synthetic.simulate import Simulation

_GROUP_KINDS = ("world", "tp", "dp", "emb", "ep", "edp")


@dataclass
class _Comm:
    group: Group
    key: str
    ptr: str
    stream: str
    index: int
    comm_rank: int
    parent: str | None


@dataclass
class _RankLog:
    info: RankInfo
    fh: IO[bytes]
    path: Path
    comms: dict[str, _Comm]
    opcount: dict[str, int] = field(default_factory=dict)
    initialised: set[str] = field(default_factory=set)
    connected: set[str] = field(default_factory=set)


class NcclWriter:
    """Writes the NCCL debug file of every rank of a lane, iteration by iteration."""

    name = "nccl"

    def __init__(self, sim: Simulation, names: Names) -> None:
        """Remember the simulation (layout, versions) and where files go."""
        self.sim = sim
        self.names = names
        self.opts = sim.opts
        self.v = sim.opts.nccl
        self.minor = self.v[1]
        self.seed = sim.opts.seed
        self.cluster = sim.cluster
        self._logs: dict[int, _RankLog] = {}
        self._hex = [format(i, "x") for i in range(4096)]
        self.truncated: dict[str, object] = {}
        self._orders: dict[tuple[str, int], list[int]] = {}

    # -- file lifecycle ----------------------------------------------------------------------

    def open_lane(self, ranks: list[int]) -> None:
        """Create the files of ``ranks`` and write their start-up and eager init lines."""
        self._logs = {}
        for r in ranks:
            info = self.cluster.ranks[r]
            path = self.names.nccl(r)
            path.parent.mkdir(parents=True, exist_ok=True)
            fh = path.open("wb")
            comms: dict[str, _Comm] = {}
            world_ptr = None
            for idx, g in enumerate(self.cluster.rank_groups(r)):
                key = ("pp_next" if g.members[0] == r else "pp_prev") if g.kind == "pp" else g.kind
                ptr = f"0x{comm_pointer(self.seed, r, idx):x}"
                if g.kind == "world":
                    world_ptr = ptr
                comms[key] = _Comm(
                    g,
                    key,
                    ptr,
                    f"0x{stream_pointer(self.seed, r, idx):x}",
                    idx,
                    g.comm_rank(r),
                    world_ptr if g.kind in ("tp", "dp", "emb", "ep", "edp") else None,
                )
            log = _RankLog(info, fh, path, comms)
            self._logs[r] = log
            fh.write(("\n".join(self._startup(log)) + "\n").encode())
            lines: list[str] = []
            for key in _GROUP_KINDS:
                if key in comms:
                    lines += self._init_block(log, comms[key])
                    log.initialised.add(key)
                    if self.minor < 22:
                        lines += self._connect_block(log, comms[key])
                        log.connected.add(key)
            fh.write(("\n".join(lines) + "\n").encode())

    def close_lane(self) -> list[Path]:
        """Write the destroy lines, close the files, apply the truncation scenario."""
        paths = []
        for r, log in self._logs.items():
            lines = []
            for comm in sorted(log.comms.values(), key=lambda c: -c.index):
                if comm.key in log.initialised:
                    lines.append(
                        self._prefix(log)
                        + f"comm {comm.ptr} rank {comm.comm_rank} nranks {comm.group.nranks} "
                        f"cudaDev {log.info.cuda_dev} busId {log.info.bus_id:x} - Destroy COMPLETE"
                    )
            log.fh.write(("\n".join(lines) + "\n").encode())
            log.fh.close()
            if self.opts.scenario.truncate_rank == r:
                self.truncated = truncate_mid_line(log.path, self.opts.scenario.truncate_fraction)
            paths.append(log.path)
        self._logs = {}
        return paths

    # -- prefixes and blocks -----------------------------------------------------------------

    def _prefix(self, log: _RankLog, tid: int | None = None) -> str:
        info = log.info
        return f"{info.host}:{info.pid}:{tid if tid is not None else info.pid} [{info.cuda_dev}] NCCL INFO "

    def _startup(self, log: _RankLog) -> list[str]:
        pre = self._prefix(log)
        ip = host_ip(log.info.node)
        out = [
            pre
            + ("Bootstrap: Using" if self.minor >= 23 else "Bootstrap : Using")
            + f" eth0:{ip}<0>",
            pre + "cudaDriverVersion 12040",
        ]
        is_rank0 = any(c.comm_rank == 0 for c in log.comms.values())
        if self.minor >= 22 or is_rank0:
            out.append(pre + f"NCCL version {self.opts.nccl_version}+cuda12.4")
        if self.opts.scenario.network == "tcp":
            out += [
                pre + "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
                pre + f"NET/Socket : Using [0]eth0:{ip}<0>",
                pre + "Using network Socket",
            ]
        else:
            out += [
                pre + "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
                pre + f"NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:{ip}<0>",
                pre + "Using network IB",
            ]
        return out

    def _ring_order(self, g: Group) -> list[int]:
        """Communicator ranks in ring order: nodes in turn, alternating direction inside a node."""
        key = (g.kind, g.index)
        cached = self._orders.get(key)
        if cached is not None:
            return cached
        by_node: dict[int, list[int]] = {}
        for cr, r in enumerate(g.members):
            by_node.setdefault(self.cluster.ranks[r].node, []).append(cr)
        order: list[int] = []
        for i, node in enumerate(sorted(by_node)):
            ranks = by_node[node]
            order += ranks if i % 2 == 0 else list(reversed(ranks))
        self._orders[key] = order
        return order

    def _channels(self, g: Group) -> int:
        return 2 if g.link == "intra" else 4

    def _dev(self, rank: int) -> str:
        info = self.cluster.ranks[rank]
        return f"{info.bus_id:x}" if self.minor < 19 else str(info.cuda_dev)

    def _init_line(self, log: _RankLog, comm: _Comm, phase: str) -> str:
        info, g = log.info, comm.group
        split = comm.parent is not None and self.minor >= 21
        fn = ""
        if self.minor >= 21:
            # 2.21-2.22 print "ncclCommInitRank" for every InitRank entry point; 2.23+ the
            # entry point's own name (PyTorch calls ncclCommInitRankConfig).
            fn = (
                "ncclCommSplit "
                if split
                else ("ncclCommInitRankConfig " if self.minor >= 23 else "ncclCommInitRank ")
            )
        body = f"comm {comm.ptr} rank {comm.comm_rank} nranks {g.nranks} cudaDev {info.cuda_dev}"
        if self.minor >= 19:
            body += f" nvmlDev {info.cuda_dev}"
        body += f" busId {info.bus_id:x}"
        if split:
            count = " splitCount 1" if 24 <= self.minor <= 28 else ""
            body += f" parent {comm.parent}{count} color {g.index} key {comm.comm_rank}"
            sep = "" if (phase == "START" and self.minor >= 23) else " "
            return self._prefix(log) + fn + body + f"{sep}- Init {phase}"
        body += f" commId 0x{g.comm_hash:x}"
        return self._prefix(log) + fn + body + f" - Init {phase}"

    def _init_block(self, log: _RankLog, comm: _Comm) -> list[str]:
        pre = self._prefix(log)
        g = comm.group
        nch = self._channels(g)
        out: list[str] = []
        if self.minor >= 19:
            out.append(self._init_line(log, comm, "START"))
        if self.minor >= 20:
            nodes = sorted({self.cluster.ranks[r].node for r in g.members})
            local = [r for r in g.members if self.cluster.ranks[r].node == log.info.node]
            out.append(
                pre
                + f"comm {comm.ptr} rank {comm.comm_rank} nRanks {g.nranks} nNodes {len(nodes)} "
                f"localRanks {len(local)} localRank {local.index(log.info.rank)} MNNVL 0"
            )
        order = self._ring_order(g)
        pos = order.index(comm.comm_rank)
        n = g.nranks
        if comm.comm_rank == 0:
            for c in range(nch):
                out.append(pre + self._ring_order_line(c, nch, order))
        trees = []
        for c in range(nch):
            seq = order if c % 2 == 0 else list(reversed(order))
            p = seq.index(comm.comm_rank)
            up = seq[p - 1] if p > 0 else -1
            down = seq[p + 1] if p + 1 < n else -1
            trees.append(f" [{c}] {down}/-1/-1->{comm.comm_rank}->{up}")
        out.append(pre + "Trees" + "".join(trees))
        for c in range(nch):
            out.append(
                pre
                + f"Ring {c:02d} : {order[pos - 1]} -> {comm.comm_rank} -> {order[(pos + 1) % n]}"
            )
        out.append(pre + "P2P Chunksize set to 524288")
        if self.minor >= 22:
            out.append(
                pre
                + f"{nch} coll channels, {nch} collnet channels, 0 nvls channels, {2 * nch} p2p channels, 2 p2p channels per peer"
            )
        else:
            out.append(
                pre
                + f"{nch} coll channels, 0 nvls channels, {2 * nch} p2p channels, 2 p2p channels per peer"
            )
        out.append(self._init_line(log, comm, "COMPLETE"))
        if self.minor >= 22:
            fn = "ncclCommSplit" if comm.parent is not None else "ncclCommInitRankConfig"
            timing = f"rank {comm.comm_rank} nranks {n} total 0.42 (kernels 0.21, alloc 0.03, bootstrap 0.05, allgathers 0.01, topo 0.06, graphs 0.01, connections 0.02, rest 0.03)"
            out.append(
                pre + (f"Init timings - {fn}: " if self.minor >= 23 else "Init timings: ") + timing
            )
        return out

    def _ring_order_line(self, c: int, nch: int, order: list[int]) -> str:
        if self.minor <= 22:
            return f"Channel {c:02d}/{nch:02d} : " + "".join(f" {r:3d}" for r in order[:20])
        width = len(str(max(len(order) - 1, 0)))
        line = f"Channel {c:02d}/{nch:02d} :"
        for r in order:
            piece = f" {r:{width}d}"
            if len(line) + len(piece) > 124:
                line += "..."
                break
            line += piece
        return line

    def _net(self) -> str:
        if self.opts.scenario.network == "tcp":
            return "NET/Socket/0"
        return "NET/IB/0/GDRDMA"

    def _connect_block(self, log: _RankLog, comm: _Comm) -> list[str]:
        """Ring connection lines of ``comm`` as the rank logs them, then ``Connected all ...``."""
        pre = self._prefix(log, log.info.pid + 40 + comm.index)
        g = comm.group
        if g.nranks < 2:
            return [pre + "Connected all rings", pre + "Connected all trees"]
        order = self._ring_order(g)
        pos = order.index(comm.comm_rank)
        nxt = order[(pos + 1) % g.nranks]
        prv = order[pos - 1]
        me_r, nxt_r, prv_r = log.info.rank, g.members[nxt], g.members[prv]
        me_node = log.info.node
        conn = "/0" if self.minor >= 14 else ""
        p2p = "P2P/CUMEM/read" if self.minor >= 19 else "P2P/IPC/read"
        out: list[str] = []
        for c in range(self._channels(g)):
            if self.cluster.ranks[prv_r].node != me_node:
                out.append(
                    pre
                    + f"Channel {c:02d}{conn} : {prv}[{self._dev(prv_r)}] -> {comm.comm_rank}[{self._dev(me_r)}] [receive] via {self._net()}"
                )
            if self.cluster.ranks[nxt_r].node != me_node:
                out.append(
                    pre
                    + f"Channel {c:02d}{conn} : {comm.comm_rank}[{self._dev(me_r)}] -> {nxt}[{self._dev(nxt_r)}] [send] via {self._net()}"
                )
            else:
                out.append(
                    pre
                    + f"Channel {c:02d}{conn} : {comm.comm_rank}[{self._dev(me_r)}] -> {nxt}[{self._dev(nxt_r)}] via {p2p}"
                )
        out.append(
            pre
            + (
                "Connected all rings, use ring PXN 0 GDR 1"
                if self.minor >= 24
                else "Connected all rings"
            )
        )
        out.append(pre + "Connected all trees")
        return out

    def _p2p_connect_block(self, log: _RankLog, comm: _Comm) -> list[str]:
        """Lazily printed p2p connection lines of a 2-rank pipeline communicator."""
        pre = self._prefix(log, log.info.pid + 40 + comm.index)
        g = comm.group
        me = comm.comm_rank
        peer = 1 - me
        peer_r = g.members[peer]
        me_r = log.info.rank
        out = []
        for c in range(2):
            if self.cluster.ranks[peer_r].node == log.info.node:
                via = "P2P/CUMEM/read" if self.minor >= 19 else "P2P/IPC/read"
                out.append(
                    pre
                    + f"Channel {c:02d}/1 : {me}[{self._dev(me_r)}] -> {peer}[{self._dev(peer_r)}] via {via}"
                )
                out.append(
                    pre
                    + f"Channel {c:02d}/1 : {peer}[{self._dev(peer_r)}] -> {me}[{self._dev(me_r)}] via {via}"
                )
            else:
                out.append(
                    pre
                    + f"Channel {c:02d}/1 : {me}[{self._dev(me_r)}] -> {peer}[{self._dev(peer_r)}] [send] via {self._net()}/Shared"
                )
                out.append(
                    pre
                    + f"Channel {c:02d}/1 : {peer}[{self._dev(peer_r)}] -> {me}[{self._dev(me_r)}] [receive] via {self._net()}/Shared"
                )
        return out

    # -- COLL lines --------------------------------------------------------------------------

    def write_lane(self, iteration: int, events: pl.DataFrame) -> None:
        """Append the COLL lines of one iteration for every open rank."""
        comm = events.filter((pl.col("kind") == "comm") & pl.col("rank").is_in(list(self._logs)))
        if comm.is_empty():
            return
        lines = self._coll_lines(comm)
        counts = lines.group_by("rank", "gkey").agg(pl.col("ocount").max())
        slow: set[int] = set()
        for r, keys in lines.group_by("rank").agg(pl.col("gkey").unique()).iter_rows():
            log = self._logs[r]
            if any(k not in log.connected or k not in log.initialised for k in keys):
                slow.add(r)
        fast = (
            lines.filter(~pl.col("rank").is_in(list(slow)))
            .group_by("rank", maintain_order=True)
            .agg(pl.col("line").str.join("\n"))
        )
        for r, text in fast.iter_rows():
            fh = self._logs[r].fh
            fh.write(text.encode())
            fh.write(b"\n")
        if slow:
            for key, part in (
                lines.filter(pl.col("rank").is_in(list(slow)))
                .partition_by("rank", as_dict=True, maintain_order=True)
                .items()
            ):
                self._write_with_first_use(self._logs[int(key[0])], part)
        for r, k, n in counts.iter_rows():
            self._logs[r].opcount[k] = n + 1

    def _write_with_first_use(self, log: _RankLog, part: pl.DataFrame) -> None:
        text = part["line"].to_list()
        keys = part["gkey"].to_list()
        out: list[str] = []
        for line, key in zip(text, keys, strict=True):
            comm = log.comms[key]
            if key not in log.initialised:
                out += self._init_block(log, comm)
                log.initialised.add(key)
            out.append(line)
            if key not in log.connected:
                if comm.group.kind == "pp":
                    out += self._p2p_connect_block(log, comm)
                else:
                    out += self._connect_block(log, comm)
                log.connected.add(key)
        log.fh.write(("\n".join(out) + "\n").encode())

    def _comm_frame(self) -> pl.DataFrame:
        rows = []
        for r, log in self._logs.items():
            for key, c in log.comms.items():
                rows.append(
                    (r, key, c.ptr, c.stream, c.group.nranks, c.comm_rank, log.opcount.get(key, 0))
                )
        return pl.DataFrame(
            rows,
            schema={
                "rank": pl.Int32,
                "gkey": pl.Utf8,
                "ptr": pl.Utf8,
                "stream": pl.Utf8,
                "nranks": pl.Int32,
                "crank": pl.Int32,
                "oc0": pl.Int64,
            },
            orient="row",
        )

    def _coll_lines(self, comm: pl.DataFrame) -> pl.DataFrame:
        """Vectorised COLL lines (columns rank, seq, gkey, ocount, line)."""
        dt_enum = {k: v[0] for k, v in DTYPES.items()}
        elem = ELEM_BYTES
        df = comm.select(
            "rank",
            "seq",
            "op",
            "msg_bytes",
            "dtype",
            "peer",
            "splits",
            "rsplits",
            pl.col("group").alias("gkey"),
        ).join(self._comm_frame(), on=["rank", "gkey"], how="left")
        df = df.with_columns(
            (pl.int_range(pl.len()).over(["rank", "gkey"], order_by="seq") + pl.col("oc0")).alias(
                "ocount"
            ),
            pl.col("dtype").replace_strict(elem, return_dtype=pl.Int64).alias("_eb"),
            pl.col("dtype").replace_strict(dt_enum, return_dtype=pl.Int64).alias("_dt"),
        )
        plain = df.filter(pl.col("op") != "all_to_all").with_columns(
            pl.lit(0, dtype=pl.Int32).alias("sub"),
            pl.col("op").replace_strict(NCCL_OPNAMES, return_dtype=pl.Utf8).alias("opname"),
            pl.when(pl.col("op") == "reduce_scatter")
            .then(pl.col("msg_bytes") // (pl.col("nranks") * pl.col("_eb")))
            .otherwise(pl.col("msg_bytes") // pl.col("_eb"))
            .alias("count"),
            pl.when(pl.col("op").is_in(["send", "recv"]))
            .then(pl.when(pl.col("peer") < pl.col("rank")).then(0).otherwise(1))
            .otherwise(0)
            .cast(pl.Int64)
            .alias("root"),
        )
        a2a = df.filter(pl.col("op") == "all_to_all")
        if a2a.height:
            n_ep = int(a2a["nranks"].max())
            a2a = a2a.with_columns(
                pl.lit([i // 2 for i in range(2 * n_ep)], dtype=pl.List(pl.Int64)).alias("root"),
                pl.lit(["Send", "Recv"] * n_ep, dtype=pl.List(pl.Utf8)).alias("opname"),
                pl.concat_list(
                    [
                        pl.col("splits").list.get(i // 2)
                        if i % 2 == 0
                        else pl.col("rsplits").list.get(i // 2)
                        for i in range(2 * n_ep)
                    ]
                ).alias("count"),
                pl.lit(list(range(2 * n_ep)), dtype=pl.List(pl.Int32)).alias("sub"),
            ).explode(["root", "opname", "count", "sub"])
            a2a = a2a.with_columns((pl.col("count") // pl.col("_eb")).alias("count"))
            plain = pl.concat([plain, a2a.select(plain.columns)], how="vertical_relaxed")
        df = plain.sort(["rank", "seq", "sub"])
        pool = pl.Series("pool", buffer_pool(self.seed, 0))
        hexes = self._hex_series(int(df["ocount"].max() or 0))
        df = df.with_columns(
            hexes.gather(df["ocount"]).alias("_oc"),
            pool.gather(df["seq"] % len(pool)).alias("_buf"),
            pool.gather((df["seq"] + 1) % len(pool)).alias("_buf2"),
        )
        p2p = pl.col("opname").is_in(["Send", "Recv"])
        sendbuff = pl.when(p2p).then(pl.lit("(nil)")).otherwise(pl.col("_buf"))
        recvbuff = (
            pl.when(pl.col("op").is_in(["all_gather", "reduce_scatter"]))
            .then(pl.col("_buf2"))
            .otherwise(pl.col("_buf"))
        )
        prefix = self._prefix_frame()
        df = df.join(prefix, on="rank", how="left")
        line = pl.format(
            "{}{}: opCount {} sendbuff {} recvbuff {} count {} datatype {} op 0 root {} comm {} [nranks={}] stream {}",
            pl.col("_pre"),
            pl.col("opname"),
            pl.col("_oc"),
            sendbuff,
            recvbuff,
            pl.col("count"),
            pl.col("_dt"),
            pl.col("root"),
            pl.col("ptr"),
            pl.col("nranks"),
            pl.col("stream"),
        )
        return df.select("rank", "seq", "gkey", "ocount", line.alias("line"))

    def _hex_series(self, upto: int) -> pl.Series:
        while len(self._hex) <= upto:
            self._hex.extend(format(i, "x") for i in range(len(self._hex), 2 * len(self._hex)))
        return pl.Series("hex", self._hex)

    def _prefix_frame(self) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "rank": [r for r in self._logs],
                "_pre": [self._prefix(log) for log in self._logs.values()],
            },
            schema={"rank": pl.Int32, "_pre": pl.Utf8},
        )


def truncate_mid_line(path: Path, fraction: float) -> dict[str, object]:
    """Cut ``path`` in the middle of the line found at ``fraction`` of its size (a killed job).

    Returns:
        ``{"file", "bytes_before", "bytes_kept", "complete_lines_kept"}``.
    """
    data = path.read_bytes()
    target = int(len(data) * fraction)
    start = data.rfind(b"\n", 0, target) + 1
    end = data.find(b"\n", target)
    end = len(data) if end < 0 else end
    cut = max(0, end - 1) if end - start < 2 else start + max(1, (end - start) // 2)
    path.write_bytes(data[:cut])
    return {
        "file": str(path),
        "bytes_before": len(data),
        "bytes_kept": cut,
        "complete_lines_kept": data[:cut].count(b"\n"),
    }
