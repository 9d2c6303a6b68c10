"""Ground truth of a synthetic run: the values a correct analysis of its logs must find.

Why: the generator knows every interval it wrote, so it can state the answers exactly; every
derived metric of commscope can then be tested against them. Everything here is computed from
the same event list the writers consumed.

Definitions (times in ns; a rank's iteration runs from the end of its previous optimizer step to
the end of its own, and its calls tile that span exactly, so
``T_iter = T_comp + T_TP + T_PP + T_DP + T_EmbTableSyn + T_EP + T_bubble``):

* ``T_comp``: compute segments (kernels on the compute stream), optimizer step included;
* a call's *wait* runs from the rank's post to the moment the group's last member posted (the
  transfer start); the rest of the call is its *transfer* (paper §4.1's rule for PP, applied to
  every class);
* ``T_TP``, ``T_DP``, ``T_EP``: whole collective calls of that class, from the rank's call to the
  end (what a per-rank trace shows); their waits (for a slower peer of the same stage) are
  reported separately as ``T_sync_wait``, which they include;
* ``T_PP``, ``T_EmbTableSyn``: the transfer part of the calls on groups that span pipeline
  stages (pipeline send/recv; the tied-embedding all-reduce between the first and last stage);
* ``T_bubble``: the waiting part of those cross-stage calls (a receive waiting for the previous
  stage, a send waiting for the next stage to post its receive, the end-of-iteration
  EmbTableSyn waiting for the other end stage): warm-up on early stages, drain and the
  EmbTableSyn wait on later ones;
* ``T_sync_wait``: the waiting part of same-stage collectives (included in T_TP/T_DP/T_EP);
* ``R_bubble`` = T_bubble / T_iter.

Traffic matrix convention (the analytical model's, :func:`commscope.model.mapping.predicted_matrix`):
ring collectives send their ring bytes (all-reduce 2(n-1)/n S, all-gather (n-1) S, reduce-scatter
(n-1)/n S) to the ring successor in group order, p2p sends to the peer, all-to-alls send each
split to its destination (the diagonal excluded). Bytes per iteration.

Bus bandwidth (nccl-tests convention, Gbit/s = 8e9 bit/s): ``busbw_transfer_gbps`` = bus bytes /
transfer time (link speed seen by the call), ``busbw_call_gbps`` = bus bytes / whole call time
(what a per-rank log that times the call, such as DeepSpeed's, would give with the right group
size).

MoE non-uniform factor per iteration (spec §E), from the EP matrix A[i][j] summed over the
iteration, over ordered pairs i != j inside each EP group: ``nf_abs``, ``nf_rel``, ``nf_ratio``,
``cv``, ``nf_dest``, ``volume``, and the routing parameters that produced it (``skew``, ``f2``).

Cross-rank truth (for the instance, wait, straggler and clock-offset marts), all on the true
clock and from the same events:

* ``truth/instances.parquet``: one row per logical collective or p2p transfer, keyed by
  (``iteration``, ``group_id`` = the group's process-group name, ``seq`` = the call's order on
  that group in the iteration, the same on every member); ``first_arrival_ns`` /
  ``last_arrival_ns`` = min / max of the members' posts, ``last_rank`` = the member the others
  waited for (lowest rank on ties, ``last_tied`` counts them), ``skew_ns`` = last - first
  arrival, ``transfer_ns`` = end - last arrival, ``wait_ns`` = the members' waits summed
  (transfer start - post: equals T_sync_wait + T_bubble; the simulation's transfer start can
  lag the last arrival by 1 ns of floor rounding); p2p pairs have ``op`` ``send/recv``, group
  ``pp``; ``msg_bytes`` is the largest member's (all-to-all sizes differ per member);
* ``truth/rank_waits.parquet``: per iteration, rank and class, calls and wait;
* ``truth/waits_caused.parquet``: per iteration, last-arriving rank and class, the instances it
  was last in and the wait it caused;
* ``clock_offsets``: each node's (and rank's) clock offset as the writers apply it (file clock =
  true time + offset; node 0 = 0);
* ``stragglers``: per iteration, the rank that caused most wait in same-stage collectives (and
  over all classes), beside the scenario's intended straggler and slow node.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from commscope.model.mapping import group_members
from commscope.synthetic.moe import nonuniform_factors, second_share, skew
from commscope.synthetic.simulate import Simulation

TRUTH_SCHEMA = "commscope-synthetic-truth/1"

TIME_COLUMNS = ("T_comp", "T_TP", "T_PP", "T_DP", "T_EmbTableSyn", "T_EP", "T_bubble")
CROSS_STAGE_CLASSES = ("PP", "EmbTableSyn")
"""Classes whose groups span pipeline stages in the generator (pp_next/pp_prev, emb): their
waits are bubble and their time terms count only the transfer."""
JSON_MATRIX_MAX_WORLD = 64
"""Worlds up to this size get dense per-class matrices in truth.json (bigger: Parquet only)."""


def _group_size(sim: Simulation) -> dict[str, int]:
    par = sim.run.parallel
    return {
        "tp": par.tp,
        "dp": par.dp,
        "edp": max(1, par.dp // max(1, sim.cluster.ep)),
        "emb": 2,
        "ep": sim.cluster.ep,
        "pp_next": 2,
        "pp_prev": 2,
    }


class LaneTruth:
    """Accumulates the truth of one lane (in the process that writes that lane)."""

    def __init__(self, sim: Simulation, lane: int, parts: Path) -> None:
        """Prepare the successor map and EP member lists of the lane's ranks."""
        self.sim = sim
        self.lane = lane
        self.parts = parts
        self.ranks = sim.cluster.lane_ranks(lane)
        self.sizes = _group_size(sim)
        rows = []
        for r in self.ranks:
            for kind in ("tp", "dp", "edp", "emb"):
                g = sim.cluster.by_rank[r].get(kind)
                if g is not None and g.nranks > 1:
                    rows.append((r, kind, sim.cluster.ring_successor(r, kind)))
        self.succ = pl.DataFrame(
            rows, schema={"rank": pl.Int32, "group": pl.Utf8, "_dst": pl.Int32}, orient="row"
        )
        self.ep_members = {
            r: group_members(sim.run, "ep", r)
            for r in self.ranks
            if sim.cluster.by_rank[r].get("ep") is not None
        }
        self.gids = pl.DataFrame(
            [
                (r, kind, int(g.pg_name))
                for r in self.ranks
                for kind, g in sim.cluster.by_rank[r].items()
            ],
            schema={"rank": pl.Int32, "group": pl.Utf8, "group_id": pl.Int32},
            orient="row",
        )
        self.calls: list[pl.DataFrame] = []
        self.rank_iter: list[pl.DataFrame] = []
        self.counts: list[pl.DataFrame] = []
        self.traffic: list[pl.DataFrame] = []
        self.intervals: list[pl.DataFrame] = []
        self.busbw: list[pl.DataFrame] = []

    def add(self, iteration: int, ev: pl.DataFrame) -> None:
        """Account one iteration's events of the lane."""
        sim = self.sim
        comm = pl.col("kind") == "comm"
        dur = pl.col("t_end") - pl.col("t_post")
        wait = pl.col("t_start") - pl.col("t_post")
        xfer = pl.col("t_end") - pl.col("t_start")
        cross = pl.col("cls").is_in(CROSS_STAGE_CLASSES)

        def total(expr: pl.Expr, cond: pl.Expr) -> pl.Expr:
            return pl.when(cond).then(expr).otherwise(0).sum()

        agg = ev.group_by("rank").agg(
            total(xfer, pl.col("kind") == "compute").alias("T_comp"),
            total(dur, pl.col("cls") == "TP").alias("T_TP"),
            total(xfer, pl.col("cls") == "PP").alias("T_PP"),
            total(dur, pl.col("cls") == "DP").alias("T_DP"),
            total(xfer, pl.col("cls") == "EmbTableSyn").alias("T_EmbTableSyn"),
            total(dur, pl.col("cls") == "EP").alias("T_EP"),
            total(wait, cross).alias("T_bubble"),
            total(wait, comm & ~cross).alias("T_sync_wait"),
            comm.sum().cast(pl.Int64).alias("comm_calls"),
        )
        bounds = pl.DataFrame(
            [(r, *sim.iteration_bounds(iteration, r)) for r in self.ranks],
            schema={"rank": pl.Int32, "iter_start_ns": pl.Int64, "iter_end_ns": pl.Int64},
            orient="row",
        )
        info = pl.DataFrame(
            [(r, sim.cluster.ranks[r].stage, sim.cluster.ranks[r].node) for r in self.ranks],
            schema={"rank": pl.Int32, "stage": pl.Int32, "node": pl.Int32},
            orient="row",
        )
        self.rank_iter.append(
            info.join(agg, on="rank", how="left")
            .join(bounds, on="rank", how="left")
            .with_columns(
                pl.lit(iteration, dtype=pl.Int32).alias("iteration"),
                (pl.col("iter_end_ns") - pl.col("iter_start_ns")).alias("T_iter"),
            )
        )
        ce = ev.filter(comm)
        self.counts.append(
            ce.group_by("rank", "cls", "op", "group", "msg_bytes")
            .len()
            .with_columns(pl.col("len").cast(pl.Int64))
        )
        self._traffic(iteration, ce)
        self._intervals(iteration, ce)
        self._busbw(ce)
        self._calls(ce)

    def _calls(self, ce: pl.DataFrame) -> None:
        """Each rank's calls with their group identity and order on that group (instance key)."""
        self.calls.append(
            ce.join(self.gids, on=["rank", "group"], how="left")
            .sort("rank", "seq")
            .with_columns(
                pl.int_range(pl.len(), dtype=pl.Int32).over("rank", "group_id").alias("group_seq")
            )
            .select(
                "iteration",
                "rank",
                "cls",
                "op",
                "group",
                "group_id",
                "group_seq",
                "msg_bytes",
                "link",
                "t_post",
                "t_start",
                "t_end",
            )
        )

    def _traffic(self, iteration: int, ce: pl.DataFrame) -> None:
        n = pl.col("group").replace_strict(self.sizes, return_dtype=pl.Int64, default=1)
        ring = ce.filter(pl.col("op").is_in(["all_reduce", "all_gather", "reduce_scatter"])).join(
            self.succ, on=["rank", "group"], how="inner"
        )
        nf = n.cast(pl.Float64)
        msg = pl.col("msg_bytes").cast(pl.Float64)
        sent = (
            pl.when(pl.col("op") == "all_reduce")
            .then(2.0 * (nf - 1) / nf * msg)
            .when(pl.col("op") == "all_gather")
            .then((nf - 1) * msg)
            .otherwise((nf - 1) / nf * msg)
        )
        parts = [
            ring.select(
                pl.col("rank").alias("src"), pl.col("_dst").alias("dst"), "cls", sent.alias("bytes")
            ),
            ce.filter(pl.col("op") == "send").select(
                pl.col("rank").alias("src"),
                pl.col("peer").alias("dst"),
                "cls",
                pl.col("msg_bytes").cast(pl.Float64).alias("bytes"),
            ),
        ]
        a2a = ce.filter(pl.col("op") == "all_to_all")
        if a2a.height:
            members = pl.DataFrame(
                {"rank": list(self.ep_members), "_members": list(self.ep_members.values())},
                schema={"rank": pl.Int32, "_members": pl.List(pl.Int32)},
            )
            x = (
                a2a.select("rank", "cls", "splits")
                .join(members, on="rank")
                .explode(["splits", "_members"])
            )
            parts.append(
                x.filter(pl.col("_members") != pl.col("rank")).select(
                    pl.col("rank").alias("src"),
                    pl.col("_members").alias("dst"),
                    "cls",
                    pl.col("splits").cast(pl.Float64).alias("bytes"),
                )
            )
        t = pl.concat(parts, how="vertical_relaxed")
        self.traffic.append(
            t.group_by("src", "dst", "cls")
            .agg(pl.col("bytes").sum(), pl.len().cast(pl.Int64).alias("messages"))
            .with_columns(pl.lit(iteration, dtype=pl.Int32).alias("iteration"))
        )

    def _intervals(self, iteration: int, ce: pl.DataFrame) -> None:
        x = ce.sort("rank", "seq").with_columns(
            (pl.col("t_post") > pl.col("t_end").shift(1).over("rank"))
            .fill_null(True)
            .cum_sum()
            .over("rank")
            .alias("_blk")
        )
        self.intervals.append(
            x.group_by("rank", "_blk")
            .agg(
                pl.col("t_post").min().alias("start_ns"),
                pl.col("t_end").max().alias("end_ns"),
                pl.col("cls").unique().sort().str.join(",").alias("classes"),
                pl.len().cast(pl.Int64).alias("calls"),
            )
            .drop("_blk")
            .with_columns(pl.lit(iteration, dtype=pl.Int32).alias("iteration"))
        )

    def _busbw(self, ce: pl.DataFrame) -> None:
        n = (
            pl.col("group")
            .replace_strict(self.sizes, return_dtype=pl.Int64, default=1)
            .alias("group_size")
        )
        x = ce.with_columns(n)
        nf = pl.col("group_size").cast(pl.Float64)
        msg = pl.col("msg_bytes").cast(pl.Float64)
        bus = (
            pl.when(pl.col("op") == "all_reduce")
            .then(2.0 * (nf - 1) / nf * msg)
            .when(pl.col("op") == "all_gather")
            .then((nf - 1) * msg)
            .when(pl.col("op").is_in(["reduce_scatter", "all_to_all"]))
            .then((nf - 1) / nf * msg)
            .otherwise(msg)
        )
        self.busbw.append(
            x.group_by("cls", "op", "group_size", "msg_bytes", "link").agg(
                pl.len().cast(pl.Int64).alias("calls"),
                bus.sum().alias("bus_bytes"),
                (pl.col("t_end") - pl.col("t_start")).sum().alias("transfer_ns"),
                (pl.col("t_end") - pl.col("t_post")).sum().alias("call_ns"),
            )
        )

    def finish(self) -> dict[str, pl.DataFrame]:
        """Write the lane's big tables as Parquet parts; return the small ones."""
        self.parts.mkdir(parents=True, exist_ok=True)
        tag = f"lane{self.lane:05d}"
        traffic = pl.concat(self.traffic).sort("iteration", "src", "dst", "cls")
        traffic.select("iteration", "src", "dst", "cls", "bytes", "messages").write_parquet(
            self.parts / f"traffic_{tag}.parquet"
        )
        pl.concat(self.intervals).sort("rank", "iteration", "start_ns").select(
            "rank", "iteration", "start_ns", "end_ns", "classes", "calls"
        ).write_parquet(self.parts / f"intervals_{tag}.parquet")
        pl.concat(self.calls).write_parquet(self.parts / f"calls_{tag}.parquet")
        counts = (
            pl.concat(self.counts)
            .group_by("rank", "cls", "op", "group", "msg_bytes")
            .agg(pl.col("len").sum().alias("calls"))
        )
        ep = traffic.filter(pl.col("cls") == "EP")
        return {
            "rank_iteration": pl.concat(self.rank_iter),
            "counts": counts,
            "busbw": pl.concat(self.busbw)
            .group_by("cls", "op", "group_size", "msg_bytes", "link")
            .agg(
                pl.col("calls").sum(),
                pl.col("bus_bytes").sum(),
                pl.col("transfer_ns").sum(),
                pl.col("call_ns").sum(),
            ),
            "ep_traffic": ep,
        }


def _merge_parts(parts: Path, prefix: str, dest: Path) -> int:
    files = sorted(parts.glob(f"{prefix}_lane*.parquet"))
    if not files:
        return 0
    lf = pl.scan_parquet(files)
    lf.sink_parquet(dest)
    for f in files:
        f.unlink()
    return int(pl.scan_parquet(dest).select(pl.len()).collect().item())


def assemble(
    sim: Simulation,
    out: Path,
    lanes: list[dict[str, pl.DataFrame]],
    scenario_effects: dict[str, Any],
) -> dict[str, Any]:
    """Merge the lanes' truth into ``truth.json`` and ``truth/*.parquet``; return the JSON dict."""
    tdir = out / "truth"
    tdir.mkdir(parents=True, exist_ok=True)
    parts = tdir / "parts"
    rank_iter = pl.concat([x["rank_iteration"] for x in lanes]).sort("rank", "iteration")
    cols = [
        "rank",
        "iteration",
        "stage",
        "node",
        *TIME_COLUMNS,
        "T_sync_wait",
        "T_iter",
        "iter_start_ns",
        "iter_end_ns",
        "comm_calls",
    ]
    rank_iter = rank_iter.select(cols).with_columns(
        (pl.col("T_bubble") / pl.col("T_iter")).alias("R_bubble")
    )
    rank_iter.write_parquet(tdir / "rank_iteration.parquet")
    counts = pl.concat([x["counts"] for x in lanes]).sort("rank", "cls", "op", "group", "msg_bytes")
    counts.write_parquet(tdir / "counts.parquet")
    n_traffic = _merge_parts(parts, "traffic", tdir / "traffic.parquet")
    n_intervals = _merge_parts(parts, "intervals", tdir / "intervals.parquet")
    waits = _instances(sim, parts, tdir)
    if parts.is_dir() and not any(parts.iterdir()):
        parts.rmdir()
    busbw = (
        pl.concat([x["busbw"] for x in lanes])
        .group_by("cls", "op", "group_size", "msg_bytes", "link")
        .agg(
            pl.col("calls").sum(),
            pl.col("bus_bytes").sum(),
            pl.col("transfer_ns").sum(),
            pl.col("call_ns").sum(),
        )
        .with_columns(
            (pl.col("bus_bytes") * 8 / pl.col("transfer_ns")).alias("busbw_transfer_gbps"),
            (pl.col("bus_bytes") * 8 / pl.col("call_ns")).alias("busbw_call_gbps"),
            (pl.col("bus_bytes") / pl.col("calls")).alias("bus_bytes_per_call"),
        )
        .sort("cls", "op", "group_size", "msg_bytes", "link")
    )
    iterations = sim.opts.iterations
    world = sim.run.world
    doc: dict[str, Any] = {
        "schema": TRUTH_SCHEMA,
        "synthetic": True,
        "units": {
            "time": "ns",
            "size": "bytes",
            "bandwidth": "Gbit/s (8e9 bit/s, nccl-tests busbw convention)",
        },
        "world_size": world,
        "iterations": iterations,
        "seed": sim.opts.seed,
        "definitions": _definitions(),
        "per_rank_iteration": _columnar(rank_iter),
        "per_rank_calls": _columnar(counts.rename({"calls": "calls_total"})),
        "busbw": _columnar(busbw.drop("bus_bytes", "transfer_ns", "call_ns")),
        "scenario": scenario_effects,
        "parquet": {
            "per_rank_iteration": "truth/rank_iteration.parquet",
            "per_rank_calls": "truth/counts.parquet",
            "traffic": f"truth/traffic.parquet ({n_traffic} rows: iteration, src, dst, cls, bytes, messages)",
            "on_intervals": f"truth/intervals.parquet ({n_intervals} rows: rank, iteration, start_ns, end_ns, classes, calls)",
            "collective_instances": f"truth/instances.parquet ({waits['instances']} rows: "
            + ", ".join(INSTANCE_COLUMNS)
            + ")",
            "rank_waits": "truth/rank_waits.parquet (iteration, rank, cls, calls, wait_ns)",
            "waits_caused": "truth/waits_caused.parquet (iteration, rank, cls, instances_last, "
            "wait_caused_ns)",
        },
    }
    if world <= JSON_MATRIX_MAX_WORLD:
        doc["traffic_matrix"] = _dense_matrices(tdir / "traffic.parquet", world, iterations)
    doc["moe"] = _moe(sim, lanes)
    doc["summary"] = _summary(rank_iter)
    doc["clock_offsets"] = _clock_offsets(sim)
    doc["stragglers"] = _stragglers(sim, waits["caused"])
    (out / "truth.json").write_text(json.dumps(doc, indent=1, allow_nan=False))
    return doc


INSTANCE_COLUMNS = (
    "iteration",
    "cls",
    "op",
    "group",
    "group_id",
    "members",
    "n_ranks",
    "seq",
    "msg_bytes",
    "link",
    "first_arrival_ns",
    "last_arrival_ns",
    "last_rank",
    "last_tied",
    "transfer_start_ns",
    "end_ns",
    "skew_ns",
    "transfer_ns",
    "wait_ns",
)
"""Columns of ``truth/instances.parquet`` (one row per logical collective / p2p transfer)."""


def _instances(sim: Simulation, parts: Path, tdir: Path) -> dict[str, Any]:
    """Match every call across its group's members; write instances, rank waits, waits caused.

    An instance is (iteration, group_id, seq): the seq-th call of the iteration on that
    communicator, the same on every member (the simulation runs each group's calls in one order).
    Times are true time (no clock skew).
    """
    files = sorted(parts.glob("calls_lane*.parquet"))
    if not files:
        return {"instances": 0, "caused": pl.DataFrame()}
    calls = pl.scan_parquet(files)
    members = pl.DataFrame(
        [(int(g.pg_name), list(g.members)) for g in sim.cluster.groups],
        schema={"group_id": pl.Int32, "members": pl.List(pl.Int32)},
        orient="row",
    )
    post = pl.col("t_post")
    last = post.max()
    inst = (
        calls.group_by("iteration", "group_id", "group_seq")
        .agg(
            pl.col("cls").first(),
            pl.col("op").unique().sort(descending=True).str.join("/"),
            pl.col("group").first().replace({"pp_next": "pp", "pp_prev": "pp"}),
            pl.len().cast(pl.Int32).alias("n_ranks"),
            pl.col("msg_bytes").max(),
            pl.col("link").first(),
            post.min().alias("first_arrival_ns"),
            last.alias("last_arrival_ns"),
            pl.col("rank").filter(post == last).min().alias("last_rank"),
            (post == last).sum().cast(pl.Int32).alias("last_tied"),
            pl.col("t_start").max().alias("transfer_start_ns"),
            pl.col("t_end").max().alias("end_ns"),
            (pl.col("t_start") - post).sum().alias("wait_ns"),
        )
        .rename({"group_seq": "seq"})
        .collect()
        .join(members, on="group_id", how="left")
        .with_columns(
            (pl.col("last_arrival_ns") - pl.col("first_arrival_ns")).alias("skew_ns"),
            (pl.col("end_ns") - pl.col("last_arrival_ns")).alias("transfer_ns"),
        )
        .select(INSTANCE_COLUMNS)
        .sort("iteration", "first_arrival_ns", "group_id", "seq")
    )
    inst.write_parquet(tdir / "instances.parquet")
    calls.group_by("iteration", "rank", "cls").agg(
        pl.len().cast(pl.Int64).alias("calls"),
        (pl.col("t_start") - post).sum().alias("wait_ns"),
    ).sort("iteration", "rank", "cls").collect().write_parquet(tdir / "rank_waits.parquet")
    for f in files:
        f.unlink()
    caused = (
        inst.group_by("iteration", pl.col("last_rank").alias("rank"), "cls")
        .agg(
            pl.len().cast(pl.Int64).alias("instances_last"),
            pl.col("wait_ns").sum().alias("wait_caused_ns"),
        )
        .sort("iteration", "rank", "cls")
    )
    caused.write_parquet(tdir / "waits_caused.parquet")
    return {"instances": inst.height, "caused": caused}


def _clock_offsets(sim: Simulation) -> dict[str, Any]:
    """Each node's (and rank's) clock offset as the writers apply it: file clock = true + offset."""
    skews = sim.cluster.node_skew_ns
    return {
        "definition": "clock the node's files carry minus true time, ns (Kineto ts, nsys "
        "utcEpochNs, DeepSpeed asctime); reference: node 0 = 0",
        "reference_node": 0,
        "per_node": [
            {
                "node": n,
                "host": next(ri.host for ri in sim.cluster.ranks if ri.node == n),
                "offset_ns": off,
                "ranks": [ri.rank for ri in sim.cluster.ranks if ri.node == n],
            }
            for n, off in enumerate(skews)
        ],
        "per_rank_ns": [sim.cluster.skew_ns(r) for r in range(sim.run.world)],
    }


def _stragglers(sim: Simulation, caused: pl.DataFrame) -> dict[str, Any]:
    """Per iteration, the rank the others waited for most (from the instances' last arrivals)."""
    scn = sim.opts.scenario
    intended: dict[str, Any] = {
        "straggler_rank": scn.straggler_rank,
        "straggler_factor": scn.straggler_factor if scn.straggler_rank is not None else None,
        "slow_node": scn.slow_node,
        "slow_link_factor": scn.slow_link_factor if scn.slow_node is not None else None,
        "slow_node_ranks": [ri.rank for ri in sim.cluster.ranks if ri.node == scn.slow_node],
    }
    rows: list[list[Any]] = []
    if caused.height:
        same = ~pl.col("cls").is_in(CROSS_STAGE_CLASSES)
        per = caused.group_by("iteration", "rank").agg(
            pl.col("wait_caused_ns").filter(same).sum().alias("same_stage"),
            pl.col("wait_caused_ns").sum().alias("all"),
        )
        for k in range(sim.opts.iterations):
            cur = per.filter(pl.col("iteration") == k)
            if not cur.height:
                continue
            top = cur.sort("same_stage", "rank", descending=[True, False]).row(0, named=True)
            top_all = cur.sort("all", "rank", descending=[True, False]).row(0, named=True)
            total = int(cur["same_stage"].sum())
            rows.append(
                [
                    k,
                    top["rank"],
                    top["same_stage"],
                    total,
                    top_all["rank"],
                    top_all["all"],
                ]
            )
    return {
        "definition": "an instance's last-arriving member (lowest rank on ties) caused the "
        "others' wait (last arrival - own arrival, summed over the members); per iteration: the "
        "rank that caused most wait in same-stage collectives (TP/DP/EP/EDP; pipeline p2p and "
        "EmbTableSyn waits are mostly bubble) and over all classes; per rank and class in "
        "truth/waits_caused.parquet",
        "intended": intended,
        "per_iteration": {
            "columns": [
                "iteration",
                "rank",
                "wait_caused_ns",
                "same_stage_wait_ns",
                "rank_all_classes",
                "wait_caused_all_classes_ns",
            ],
            "rows": rows,
        },
    }


def _columnar(df: pl.DataFrame) -> dict[str, Any]:
    return {"columns": df.columns, "rows": [list(r) for r in df.iter_rows()]}


def _dense_matrices(path: Path, world: int, iterations: int) -> dict[str, Any]:
    """Per class, the mean rank x rank matrix of one iteration (bytes, rounded)."""
    if not path.is_file():
        return {}
    df = pl.read_parquet(path).group_by("cls", "src", "dst").agg(pl.col("bytes").sum())
    out: dict[str, Any] = {
        "convention": "row = sender, column = receiver, bytes per iteration (mean)"
    }
    for cls in sorted(df["cls"].unique().to_list()):
        mat = [[0] * world for _ in range(world)]
        for _c, s, d, b in df.filter(pl.col("cls") == cls).iter_rows():
            mat[s][d] = round(b / iterations)
        out[cls] = mat
    return out


def _moe(sim: Simulation, lanes: list[dict[str, pl.DataFrame]]) -> dict[str, Any]:
    if not (sim.run.model.is_moe and sim.cluster.ep > 1):
        return {}
    ep = pl.concat([x["ep_traffic"] for x in lanes])
    scn = sim.opts.scenario
    rows = []
    ep_size = sim.cluster.ep
    groups = sorted({tuple(group_members(sim.run, "ep", r)) for r in range(sim.run.world)})
    for k in range(sim.opts.iterations):
        cur = ep.filter(pl.col("iteration") == k)
        lookup = {(s, d): b for s, d, b in cur.select("src", "dst", "bytes").iter_rows()}
        nf = _pooled_factors(groups, lookup)
        rows.append(
            {
                "iteration": k,
                **nf,
                "skew": skew(scn, k) if scn.moe_routing == "routed" else 0.0,
                "f2": second_share(scn, k)
                if (scn.moe_routing == "routed" and sim.run.model.top_k >= 2)
                else 0.0,
            }
        )
    return {
        "routing": scn.moe_routing,
        "ep": ep_size,
        "experts": sim.run.model.experts,
        "top_k": sim.run.model.top_k,
        "definition": "A[i][j] = bytes i sends to j in EP all-to-alls of the iteration (i != j, same EP group); "
        "nf_abs = max - min, nf_rel = (max - min)/mean, nf_ratio = max/min, cv = std/mean over those pairs; "
        "nf_dest = max - min of per-destination totals; volume = sum",
        "per_iteration": rows,
    }


def _pooled_factors(
    groups: list[tuple[int, ...]], lookup: dict[tuple[int, int], float]
) -> dict[str, Any]:
    if len(groups) == 1:
        g = groups[0]
        return nonuniform_factors([[lookup.get((a, b), 0.0) for b in g] for a in g])
    # Several EP groups: factors over the union of their pairs; destination loads per group.
    pairs = [lookup.get((a, b), 0.0) for g in groups for a in g for b in g if a != b]
    hi, lo = max(pairs), min(pairs)
    mean = sum(pairs) / len(pairs)
    var = sum((v - mean) ** 2 for v in pairs) / len(pairs)
    dest = [sum(lookup.get((a, b), 0.0) for a in g if a != b) for g in groups for b in g]
    return {
        "nf_abs": hi - lo,
        "nf_rel": (hi - lo) / mean if mean else 0.0,
        "nf_ratio": hi / lo if lo else None,
        "cv": (var**0.5) / mean if mean else 0.0,
        "nf_dest": max(dest) - min(dest),
        "volume": sum(pairs),
    }


def _summary(rank_iter: pl.DataFrame) -> dict[str, Any]:
    """Mean over iterations of stage 0's rank with the lowest number (the paper's rank 0 view)."""
    r0 = rank_iter.filter(pl.col("rank") == rank_iter["rank"].min())
    means = {c: float(r0[c].mean()) for c in (*TIME_COLUMNS, "T_sync_wait", "T_iter")}  # type: ignore[arg-type]
    means["R_bubble"] = means["T_bubble"] / means["T_iter"] if means["T_iter"] else 0.0
    return {"rank": int(r0["rank"][0]), "mean_per_iteration_ns": means}


def _definitions() -> dict[str, str]:
    return {
        "T_comp": "sum of compute segments (optimizer step included), ns",
        "T_TP": "sum of TP collective calls, call to end (sync wait included), ns",
        "T_PP": "transfer part of pipeline send/recv (after both sides posted), ns",
        "T_DP": "sum of data-parallel collective calls, call to end (sync wait included), ns",
        "T_EmbTableSyn": "transfer part of the tied-embedding all-reduce between first and last "
        "stage (after both members posted; its wait is T_bubble), ns",
        "T_EP": "MoE all-to-all calls, call to end (sync wait included), ns",
        "T_bubble": "waiting part of cross-stage calls: pipeline send/recv (previous/next stage "
        "not ready) and EmbTableSyn (the other end stage not ready), ns",
        "T_sync_wait": "waiting part of same-stage collective calls (waiting for a slower peer of "
        "the stage; included in T_TP/T_DP/T_EP), ns",
        "T_iter": "end of the rank's optimizer step minus the end of its previous one; equals the sum of "
        "T_comp, T_TP, T_PP, T_DP, T_EmbTableSyn, T_EP, T_bubble",
        "R_bubble": "T_bubble / T_iter",
        "traffic": "ring collectives: ring bytes to the ring successor in group order; p2p: to the peer; "
        "all-to-all: each split to its destination; bytes per iteration",
        "busbw_transfer_gbps": "bus bytes / transfer time of the calls (link speed), Gbit/s",
        "busbw_call_gbps": "bus bytes / whole call time (waiting included), Gbit/s",
        "on_intervals": "per rank and iteration, maximal spans of back-to-back communication calls",
        "clock": "truth times are true time since the run start; files carry each node's clock "
        "(see scenario.clock_skew_ns)",
    }
