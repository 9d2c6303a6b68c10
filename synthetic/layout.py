"""The simulated cluster: where each rank runs, its process groups, and the speed of each link.

Why: every writer needs the same identity of a rank (host, pid, GPU, bus id), the same
communicators (members, NCCL comm hash, PyTorch process-group name) and the simulator needs the
same link model, so they are computed once here. Rank numbering and process groups come from the
analytical model (:mod:`commscope.model.mapping`), never re-derived, so a generated run has exactly
the layout the model predicts traffic for.

Link model: a group whose members share one node uses the intra-node bandwidth, otherwise the
inter-node bandwidth times the network factor (RoCE 1, TCP 1/1.8), and times
``slow_link_factor`` when one member sits on the slow node. With a mapping-aware platform
(``c_intra`` and ``c_inter`` set) those two numbers are used for every traffic class; otherwise
the class's own ``c_tp``/``c_pp``/``c_dp``/``c_ep`` is the bandwidth and only the factors apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from commscope.model.config import RunConfig
from commscope.model.mapping import group_members, groups, node_of
from commscope.synthetic._rng import STREAM_SKEW, mix64, uniform
from commscope.synthetic.scenario import NETWORKS, GenerateOptions

#: Latency term of one collective or p2p transfer, ns, by link class (RoCE; TCP adds more).
ALPHA_NS: dict[str, int] = {"intra": 8_000, "inter": 20_000, "slow": 40_000}
TCP_EXTRA_ALPHA_NS = 15_000

#: PCI bus ids of the 8 GPUs of a typical node (lowercase hex, as NCCL prints them).
BUS_IDS: tuple[int, ...] = (0x7000, 0xF000, 0x47000, 0x4E000, 0x87000, 0x90000, 0xB7000, 0xBD000)

#: Traffic class -> platform attribute holding its bandwidth (non mapping-aware platforms).
CLASS_BW_ATTR: dict[str, str] = {
    "TP": "c_tp",
    "PP": "c_pp",
    "DP": "c_dp",
    "EmbTableSyn": "c_dp",
    "EP": "c_ep",
}

#: Group kind (model vocabulary) -> traffic class carried by it.
GROUP_CLASS: dict[str, str] = {
    "tp": "TP",
    "dp": "DP",
    "edp": "DP",
    "emb": "EmbTableSyn",
    "ep": "EP",
    "pp": "PP",
}


@dataclass(frozen=True)
class RankInfo:
    """Identity of one rank (process) of the simulated job."""

    rank: int
    stage: int
    dp: int
    tp: int
    node: int
    local_rank: int
    host: str
    pid: int
    cuda_dev: int
    bus_id: int
    lane: int
    member: int


@dataclass(frozen=True)
class Group:
    """One communicator / process group.

    Attributes:
        kind: ``world``, ``tp``, ``dp``, ``emb``, ``ep``, ``edp`` or ``pp`` (a 2-rank p2p pair).
        members: global ranks in communicator-rank order.
        index: position of the group among the groups of its kind (NCCL split colour).
        pg_name: PyTorch process-group name (creation order over the whole job).
        comm_hash: NCCL ``commId`` (the same on every member).
        link: ``intra``, ``inter`` or ``slow``.
    """

    kind: str
    members: tuple[int, ...]
    index: int
    pg_name: str
    comm_hash: int
    link: str

    @property
    def nranks(self) -> int:
        """Number of members."""
        return len(self.members)

    def comm_rank(self, rank: int) -> int:
        """Rank of ``rank`` inside the group."""
        return self.members.index(rank)

    @property
    def ranks_text(self) -> str:
        """Members as PyTorch prints ``Process Group Ranks`` (``"[0, 1]"``)."""
        return "[" + ", ".join(str(r) for r in self.members) + "]"

    @property
    def rank_start_stride(self) -> tuple[int, int]:
        """``Global rank start`` / ``Global rank stride`` of the group (stride -1 if irregular)."""
        m = self.members
        if len(m) == 1:
            return m[0], 1
        step = m[1] - m[0]
        regular = all(m[i + 1] - m[i] == step for i in range(len(m) - 1))
        return m[0], (step if regular else -1)


class Cluster:
    """Ranks, nodes, groups and links of one simulated run."""

    def __init__(self, run: RunConfig, opts: GenerateOptions) -> None:
        """Lay the run out on nodes and build every process group."""
        self.run = run
        self.opts = opts
        self.scenario = opts.scenario
        par = run.parallel
        self.world = run.world
        self.gpn = run.platform.gpus_per_node
        self.nodes = -(-self.world // self.gpn)
        self.ep = par.ep if run.model.is_moe else 1
        self.lane_width = self.ep  # data-parallel replicas per lane
        self.lanes = par.dp // self.lane_width
        self.members_per_stage = par.tp * self.lane_width
        self.ranks: list[RankInfo] = []
        for r in range(self.world):
            stage, dp, tp = run.coords(r)
            node = node_of(r, self.gpn)
            local = r - node * self.gpn
            self.ranks.append(
                RankInfo(
                    rank=r,
                    stage=stage,
                    dp=dp,
                    tp=tp,
                    node=node,
                    local_rank=local,
                    host=f"synthetic-node{node:03d}",
                    pid=2000 + 37 * local + (mix64(opts.seed * 7919 + node) % 4000),
                    cuda_dev=local,
                    bus_id=BUS_IDS[local % len(BUS_IDS)] + 0x100000 * (local // len(BUS_IDS)),
                    lane=dp // self.lane_width,
                    member=(dp % self.lane_width) * par.tp + tp,
                )
            )
        self._build_groups()

    # -- geometry ----------------------------------------------------------------------------

    def rank_at(self, stage: int, lane: int, member: int) -> int:
        """Global rank of ``member`` of ``lane`` on ``stage``."""
        tp = self.run.parallel.tp
        return self.run.rank_of(stage, lane * self.lane_width + member // tp, member % tp)

    def lane_ranks(self, lane: int) -> list[int]:
        """Ranks of one lane, stage-major then member order."""
        return [
            self.rank_at(s, lane, i)
            for s in range(self.run.parallel.pp)
            for i in range(self.members_per_stage)
        ]

    def link_of(self, ranks: tuple[int, ...] | list[int]) -> str:
        """``intra`` if all ranks share a node, ``slow`` if one is on the slow node, else ``inter``."""
        nodes = {self.ranks[r].node for r in ranks}
        if len(nodes) == 1:
            return "intra"
        if self.scenario.slow_node is not None and self.scenario.slow_node in nodes:
            return "slow"
        return "inter"

    # -- groups ------------------------------------------------------------------------------

    def _hash(self, kind: str, index: int) -> int:
        salt = sum(ord(c) * 131**i for i, c in enumerate(kind))
        return mix64((self.opts.seed << 20) ^ (salt << 8) ^ index) | (1 << 62)

    def _build_groups(self) -> None:
        run, par = self.run, self.run.parallel
        self.groups: list[Group] = []
        self.by_rank: dict[int, dict[str, Group]] = {r: {} for r in range(self.world)}
        self.p2p: dict[tuple[int, int], Group] = {}
        pg = 0

        def add(kind: str, members: list[int], index: int) -> Group:
            nonlocal pg
            g = Group(
                kind, tuple(members), index, str(pg), self._hash(kind, index), self.link_of(members)
            )
            pg += 1
            self.groups.append(g)
            return g

        world = add("world", list(range(self.world)), 0)
        for r in range(self.world):
            self.by_rank[r]["world"] = world
        kinds: list[str] = []
        if par.tp > 1:
            kinds.append("tp")
        if par.dp > 1:
            kinds.append("dp")
        if run.model.tied_embeddings and par.pp > 1:
            kinds.append("emb")
        if run.model.is_moe and par.ep > 1:
            kinds.append("ep")
        if run.model.is_moe and par.dp // par.ep > 1:
            kinds.append("edp")
        for kind in kinds:
            for i, members in enumerate(groups(run, kind)):
                g = add(kind, members, i)
                for r in members:
                    self.by_rank[r][kind] = g
        # Pipeline p2p pairs (DeepSpeed's p2p groups; NCCL gives each pair a 2-rank comm).
        index = 0
        for r in range(self.world):
            stage, dp, tp = run.coords(r)
            if stage + 1 < par.pp:
                nxt = run.rank_of(stage + 1, dp, tp)
                pair = sorted((r, nxt))
                g = add("pp", pair, index)
                index += 1
                self.p2p[(pair[0], pair[1])] = g
                self.by_rank[r]["pp_next"] = g
                self.by_rank[nxt]["pp_prev"] = g

    def group(self, rank: int, kind: str) -> Group:
        """The group of ``kind`` (``tp``, ``dp``, ``emb``, ``ep``, ``edp``, ``pp_next``,
        ``pp_prev``, ``world``) that ``rank`` belongs to."""
        return self.by_rank[rank][kind]

    def rank_groups(self, rank: int) -> list[Group]:
        """The groups of ``rank`` in creation order (world first)."""
        mine = {id(g) for g in self.by_rank[rank].values()}
        return [g for g in self.groups if id(g) in mine]

    def ring_successor(self, rank: int, kind: str) -> int:
        """The rank ``rank`` sends to in a ring over its group of ``kind``."""
        members = group_members(self.run, kind, rank)
        return members[(members.index(rank) + 1) % len(members)]

    # -- speeds ------------------------------------------------------------------------------

    def bandwidth(self, cls: str, link: str) -> float:
        """Bus bandwidth in bytes/s of a transfer of ``cls`` over ``link``."""
        plat = self.run.platform
        if plat.mapping_aware:
            base = float(plat.c_intra if link == "intra" else plat.c_inter)  # type: ignore[arg-type]
        else:
            value = getattr(plat, CLASS_BW_ATTR[cls])
            base = float(value if value is not None else plat.c_dp)
        if link == "intra":
            return base
        base *= NETWORKS[self.scenario.network]
        if link == "slow":
            base *= self.scenario.slow_link_factor
        return base

    def alpha_ns(self, link: str) -> int:
        """Latency term of one transfer over ``link``, ns."""
        extra = TCP_EXTRA_ALPHA_NS if self.scenario.network == "tcp" and link != "intra" else 0
        return ALPHA_NS[link] + extra

    def transfer_ns(self, cls: str, link: str, bus_bytes: float) -> float:
        """Base (un-jittered) duration of a transfer of ``bus_bytes`` bus bytes, ns."""
        return self.alpha_ns(link) + bus_bytes / self.bandwidth(cls, link) * 1e9

    # -- clocks ------------------------------------------------------------------------------

    @cached_property
    def node_skew_ns(self) -> list[int]:
        """Clock offset of each node (ns): what its wall clock reads minus true time."""
        skew = self.scenario.clock_skew_us
        if isinstance(skew, tuple):
            return [round(s * 1000) for s in skew]
        if not skew:
            return [0] * self.nodes
        out = [0]
        for n in range(1, self.nodes):
            u = uniform(self.opts.seed, STREAM_SKEW, n)
            out.append(round((2 * u - 1) * skew * 1000))
        return out

    def skew_ns(self, rank: int) -> int:
        """Clock offset of ``rank``'s node, ns."""
        return self.node_skew_ns[self.ranks[rank].node]
