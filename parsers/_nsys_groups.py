"""Fold the grouped ncclSend/ncclRecv ranges of an nsys export into one all_to_all per group.

What NCCL and PyTorch emit (pinned from the sources): PyTorch's ``all_to_all`` /
``all_to_all_single`` (``torch/csrc/cuda/nccl.cpp``: ``all2all_single_equal_split``,
``all2all_single_unequal_split``, ``all2all``) issues ``ncclGroupStart()``, then for every
member ``r`` of the communicator an ``ncclSend`` to ``r`` and an ``ncclRecv`` from ``r`` (itself
included), then ``ncclGroupEnd()``. NCCL (``src/group.cc``) opens a push/pop range named
``ncclGroupStart`` / ``ncclGroupEnd`` in its ``NCCL`` domain (``NCCL_NVTX3_FUNC_RANGE``: the
function's name, no payload) on the calling thread; ``ncclSend``/``ncclRecv``
(``src/collectives.cc``) each push a range with the ``NcclNvtxParamsSendRecv`` payload (from
NCCL 2.25: commHash, bytes = count x type size, peer). The ranges are short (each returns once
it has enqueued): the group is the *sequence* ``ncclGroupStart .. ncclGroupEnd`` on one thread
(``globalTid``), nested groups closing at the outermost ``ncclGroupEnd``, which launches the
group's one ``SendRecv`` kernel. :func:`commscope.parsers._nsys_launch.read_call_ranges` already
follows that depth per thread and links each call to the closing ``ncclGroupEnd``
(``group_end``).

Rule (the same as ``sql/intermediate/int_p2p_groups.sql`` applies to an NCCL debug log's lines
under one opCount): the Send/Recv ranges of one (closing ``ncclGroupEnd``, communicator) whose
communicator size ``n >= 2`` is known are an all-to-all when there are exactly ``n`` Sends with
``n`` distinct peers and ``n`` Recvs with ``n`` distinct peers, every peer in ``0..n-1``, every
size known. Such a set becomes ONE ``comm_ops`` row: op ``all_to_all``, ``op_source``
``nvtx_group``, ``source_line`` / ``raw_op`` the ``ncclGroupEnd`` range's, ``msg_bytes`` the sum
of the Sends (the whole per-rank send buffer, the project's all_to_all size), ``split_bytes`` and
``recv_split_bytes`` the Send and Recv bytes per peer in communicator-rank order, ``peer_rank``
null, the group's kernel interval. Anything else (a pipeline's batch_isend_irecv: a Send and a
Recv to different peers; a group missing a peer, as PyTorch skips zero-size members; a call
without payload, NCCL <= 2.24 giving no peer or communicator) stays one row per range.
"""

from __future__ import annotations

import polars as pl

from commscope.parsers._nsys_launch import GROUP_END

OP_SOURCE = "nvtx_group"
"""``comm_ops.op_source`` of a folded group."""

_KEY = ["group_end", "comm_id"]


def fold_groups(pending: list[pl.DataFrame]) -> pl.DataFrame | None:
    """The ``comm_ops`` rows of the grouped Send/Recv ranges held back while streaming.

    Args:
        pending: rows of Send/Recv ranges made inside a group (``group_end`` set), in the
            ``comm_ops`` columns of the nsys parser plus ``group_end`` (the rowid of the
            closing ``ncclGroupEnd``).

    Returns:
        One row per all-to-all group (see the module) and the other rows as they were, or None.
    """
    if not pending:
        return None
    rows = pl.concat(pending, how="vertical_relaxed")
    if rows.is_empty():
        return None
    n = pl.col("group_size").first()
    send = pl.col("op") == "send"
    recv = pl.col("op") == "recv"
    stats = (
        rows.filter(pl.col("comm_id").is_not_null())
        .group_by(_KEY)
        .agg(
            ok=(n >= 2)
            & (pl.col("group_size").n_unique() == 1)
            & pl.col("group_size").is_not_null().all()
            & pl.col("peer_rank").is_not_null().all()
            & pl.col("msg_bytes").is_not_null().all()
            & (pl.col("peer_rank") >= 0).all()
            & (pl.col("peer_rank") < pl.col("group_size")).all()
            & (send.sum() == n)
            & (recv.sum() == n)
            & (pl.col("peer_rank").filter(send).n_unique() == n)
            & (pl.col("peer_rank").filter(recv).n_unique() == n)
        )
        .filter(pl.col("ok"))
        .select(_KEY)
    )
    if stats.is_empty():
        return rows.drop("group_end")
    members = rows.join(stats, on=_KEY, how="semi")
    rest = rows.join(stats, on=_KEY, how="anti")

    def per_peer(which: pl.Expr) -> pl.Expr:
        return (
            pl.col("msg_bytes")
            .filter(which)
            .sort_by(pl.col("peer_rank").filter(which))
            .cast(pl.Utf8)
            .str.join(",")
        )

    end = pl.col("ts_ns") + pl.col("dur_ns")
    folded = (
        members.sort("launch_ts_ns", "source_line")
        .group_by(_KEY, maintain_order=True)
        .agg(
            pl.col("rank").first(),
            pl.col("host").first(),
            pl.col("pid").first(),
            pl.lit("all_to_all").alias("op"),
            pl.lit(GROUP_END).alias("raw_op"),
            pl.col("group_size").first(),
            pl.col("group_rank").first(),
            pl.col("group_source").first(),
            pl.lit(None, dtype=pl.Int32).alias("peer_rank"),
            pl.col("msg_bytes").filter(send).sum().alias("msg_bytes"),
            pl.lit(None, dtype=pl.Utf8).alias("redop"),
            pl.col("ts_ns").min(),
            pl.when(pl.col("dur_ns").is_not_null().all())
            .then(end.max() - pl.col("ts_ns").min())
            .alias("dur_ns"),
            pl.col("timing_source").min(),  # 'kernel' < 'none'
            pl.col("launch_ts_ns").min(),
            pl.col("kernel_count").max(),
            pl.col("iteration").first(),
            pl.col("rank_source").first(),
            per_peer(send).alias("split_bytes"),
            per_peer(recv).alias("recv_split_bytes"),
            pl.lit(OP_SOURCE).alias("op_source"),
        )
        .with_columns(pl.col("group_end").alias("source_line"))
        .drop("group_end")
    )
    out = pl.concat([folded, rest.drop("group_end")], how="diagonal_relaxed")
    return out if out.height else None


__all__ = ["OP_SOURCE", "fold_groups"]
