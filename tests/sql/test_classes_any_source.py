"""Classes from any source, on generated runs (issue 17 items 1 and 6; slow).

* The paper's own instrument: only rank 0's DeepSpeed comms log of a generated GPT-3B (4, 2, 4)
  run, ingested with configs/gpt3b_paper.toml. The log names no group, so TP, DP and
  EmbTableSyn all-reduces are told apart by the model's predicted (op, size) signatures. Oracle:
  the raw log's lines, counted per iteration (between its ``steps:`` lines) and per printed size
  with a regex, and the paper's Table 3 (680 TP all-reduces of 125 MiB, 8 + 8 PP send/recv of
  125 MiB, 1 DP all-reduce of 741.47 MiB, 1 EmbTableSyn all-reduce of 96.19 MiB per iteration).
* MoE EP 8 (configs/synthetic_moe_ep8.toml) in all four formats: every source's all-reduce is
  DP and its all-to-all EP; the traffic matrix's network bytes equal the generator's truth
  (which has no self-sends) and each rank's own all-to-all blocks are local bytes, equal to the
  sends to itself counted in its raw NCCL log.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

import polars as pl
import pytest
from generated_runs import CONFIGS, GeneratedRun, generate_run, ingest_and_derive, make_run

from commscope.parsers._ds_sizes import size_to_bytes

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ds_rank0(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    """GPT-3B (4, 2, 4), 3 iterations, rank 0's DeepSpeed log only + gpt3b_paper.toml."""
    tmp = tmp_path_factory.mktemp("ds_rank0")
    gen = generate_run(tmp, "synthetic_gpt3b_4x2x4.toml", iterations=3, formats=("deepspeed",))
    return ingest_and_derive(
        gen, tmp / "store", "ds", paths=[gen / "deepspeed"], config=CONFIGS / "gpt3b_paper.toml"
    )


DS_CALL = re.compile(r"comm op: (\w+) \| time \(ms\): [0-9.]+ \| msg size: ([0-9.]+ [KMGT]?B)")
TABLE3 = {  # APNet'24 Table 3, rank 0, per iteration: (op, printed size) -> (class, messages)
    ("all_reduce", "125.0 MB"): ("TP", 680),
    ("send", "125.0 MB"): ("PP", 8),
    ("recv", "125.0 MB"): ("PP", 8),
    ("all_reduce", "741.47 MB"): ("DP", 1),
    ("all_reduce", "96.19 MB"): ("EmbTableSyn", 1),
}


def _raw_per_iteration(log: Path) -> list[Counter[tuple[str, str]]]:
    """(op, printed size) counts of each iteration: the lines before each ``steps:`` line."""
    out: list[Counter[tuple[str, str]]] = [Counter()]
    for line in log.read_text().splitlines():
        if line.startswith("steps: "):
            out.append(Counter())
        elif m := DS_CALL.search(line):
            out[-1][(m.group(1), m.group(2))] += 1
    return [c for c in out if c]


def test_deepspeed_rank0_log_classified_as_table3_every_iteration(ds_rank0: GeneratedRun) -> None:
    (log,) = (ds_rank0.gen / "deepspeed").glob("*.log")
    raw = _raw_per_iteration(log)
    assert len(raw) == 3
    for counts in raw:  # the log holds Table 3's messages (checks the oracle itself)
        assert {k: v for k, v in counts.items() if k[0] != "barrier"} == {
            k: n for k, (_, n) in TABLE3.items()
        }
    got = ds_rank0.query(
        "SELECT i.iteration, c.traffic_class, c.op, c.msg_bytes, c.class_source, c.group_size, "
        "count(*) AS calls "
        "FROM int_comm_ops_classified AS c LEFT JOIN int_comm_op_iteration AS i "
        "ON i.run_id = c.run_id AND i.rank = c.rank AND i.source_file = c.source_file "
        "AND i.source_line = c.source_line "
        "WHERE c.run_id = ? AND c.counted AND c.is_traffic GROUP BY ALL"
    )
    want = pl.DataFrame(
        [
            {
                "iteration": it,
                "traffic_class": TABLE3[(op, size)][0],
                "op": op,
                "msg_bytes": size_to_bytes(size),
                "want": n,
            }
            for it, counts in enumerate(raw)
            for (op, size), n in counts.items()
            if op != "barrier"
        ]
    )
    j = want.join(
        got.with_columns(pl.col("iteration").cast(pl.Int64)),
        on=["iteration", "traffic_class", "op", "msg_bytes"],
        how="full",
        coalesce=True,
    )
    assert j.height == want.height == got.height, j
    assert (j["calls"] == j["want"]).all(), j
    # the collectives' class came from the signatures, with the group sizes of Table 3's groups
    coll = got.filter(pl.col("op") == "all_reduce")
    assert set(coll["class_source"]) == {"signature"}
    sizes = dict(zip(coll["traffic_class"], coll["group_size"], strict=False))
    assert sizes == {"TP": 2, "DP": 4, "EmbTableSyn": 2}


@pytest.fixture(scope="module")
def moe(tmp_path_factory: pytest.TempPathFactory) -> GeneratedRun:
    """MoE EP 8, 8 ranks, 2 iterations, NCCL + Kineto + nsys + DeepSpeed (rank 0)."""
    tmp = tmp_path_factory.mktemp("moe_all")
    return make_run(
        tmp,
        "synthetic_moe_ep8.toml",
        "moe",
        iterations=2,
        profile_iterations=(0, 1),
        formats=("nccl", "kineto", "nsys", "deepspeed"),
    )


def test_moe_every_source_dp_all_reduce_and_ep_all_to_all(moe: GeneratedRun) -> None:
    got = moe.query(
        "SELECT source_format, op, traffic_class, class_source, group_size, count(*) AS n "
        "FROM int_comm_ops_classified WHERE run_id = ? AND is_traffic GROUP BY ALL"
    )
    assert set(got["source_format"]) == {"nccl_debug", "kineto", "nsys", "deepspeed_comms"}
    want = {"all_reduce": "DP", "all_to_all": "EP", "send": "EP", "recv": "EP"}
    for fmt, op, cls, src, n, _ in got.rows():
        assert want[op] == cls, (fmt, op, cls, src)
        if op == "all_reduce" and fmt in ("deepspeed_comms", "nsys"):
            # these log no group members: the model's predicted signature decides, group of 8
            assert (src, n) == ("signature", 8), (fmt, src, n)


NCCL_SEND = re.compile(
    r"NCCL INFO Send: opCount \S+ .*? count (\d+) datatype (\d+) .*? root (\d+) "
)
DTYPE_SIZE = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 1, 11: 1}


def test_moe_matrix_network_bytes_equal_truth_self_sends_are_local(moe: GeneratedRun) -> None:
    tm = pl.read_parquet(moe.store.mart_files("moe")["traffic_matrix"])
    truth = pl.read_parquet(moe.gen / "truth" / "traffic.parquet").select(
        pl.col("iteration").cast(pl.Int32),
        pl.col("src").cast(pl.Int32).alias("src_rank"),
        pl.col("dst").cast(pl.Int32).alias("dst_rank"),
        pl.col("cls").alias("traffic_class"),
        pl.col("bytes").alias("want"),
    )
    assert (truth["src_rank"] != truth["dst_rank"]).all()  # truth counts no self-sends
    net = tm.filter(pl.col("src_rank") != pl.col("dst_rank"))
    j = net.join(truth, on=["iteration", "src_rank", "dst_rank", "traffic_class"], how="full")
    assert j.height == truth.height == net.height
    assert ((j["bytes"] - j["want"]).abs() <= 0.5).all()
    assert (net["local_bytes"] == 0).all()
    diag = tm.filter(pl.col("src_rank") == pl.col("dst_rank"))
    assert (diag["bytes"] == 0).all() and set(diag["traffic_class"]) == {"EP"}
    # each rank's sends to itself, from its raw NCCL log (the EP group is the 8-rank world, so
    # the send's peer ("root") is the global rank)
    want: dict[int, float] = defaultdict(float)
    for log in sorted((moe.gen / "nccl").glob("*.log")):
        rank = int(re.search(r"rank(\d+)", log.name).group(1))  # type: ignore[union-attr]
        text = log.read_text()
        assert "[nranks=8]" in text
        for m in NCCL_SEND.finditer(text):
            if int(m.group(3)) == rank:
                want[rank] += int(m.group(1)) * DTYPE_SIZE[int(m.group(2))]
    got = diag.group_by("src_rank").agg(pl.col("local_bytes").sum())
    assert dict(zip(got["src_rank"], got["local_bytes"], strict=True)) == pytest.approx(dict(want))
    assert len(want) == 8
