"""Cross-rank instances on the real GPU recordings, checked against readers of the raw files (issue 18).

Complements test_instances_real.py (the shared samples and the CPU pipeline recording).

Oracles (independent of commscope's parsers and SQL):

* Kineto (``sample_traces/gpu_nccl_tp2_dp2_1gpu``: 4 NCCL ranks, TP {0,1},{2,3} x DP {0,2},{1,3},
  one machine, so one clock): the NCCL kernels of each rank's trace are read with ``json``; a
  kernel's group is its ``Process Group Ranks`` arg; the k-th kernel of a group on each member is
  one instance (every member traced the same steps); its last-arriving rank is the member whose
  kernel started last, its skew the spread of the starts. The planted straggler (rank 3 before
  its DP reduce_scatter in steps 4-6, ``manifest.json`` → ``planted``) must be what the raw
  starts say and what the mart says.
* NCCL debug logs (the same job's logs; gfbench 2 ranks in two files; nccl-tests' spliced
  one-process log is checked in test_instances_real.py): COLL lines are counted per (process,
  communicator) with a regex; a communicator's members each log every call, so the number of instances of a group is the per-member count and
  every call belongs to exactly one instance.
* Every real sample (../shared/samples, sample_traces/): an instance that misses a member only
  misses ranks the run has no calls from at all (a partial trace set such as 2 of 128 ranks),
  never a rank that was traced but lacks the call.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import polars as pl
import pytest

from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.store import Store
from tests.sql.conftest import materialised

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "sample_traces" / "gpu_nccl_tp2_dp2_1gpu"
COLL = re.compile(
    r"^(?P<host>[^:\s]+):(?P<pid>\d+):\d+ \[\d+\] NCCL INFO (?P<op>[A-Za-z]+): opCount "
    r"(?P<oc>[0-9a-f]+) .* comm (?P<comm>0x[0-9a-f]+) \[nranks=(?P<n>\d+)\]"
)


# ------------------------------------------------------------------------------------ oracles


def kineto_instances(folder: Path) -> dict[str, list[dict[str, int]]]:
    """Per group ('0,1'; the whole world 'world', as commscope names it): its instances in
    order, each {rank: kernel start ns} (raw traces)."""
    per_rank: dict[int, dict[str, list[int]]] = {}
    for path in sorted(folder.glob("rank*.pt.trace.json.gz")):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        rank = int(doc["distributedInfo"]["rank"])
        groups: dict[str, list[int]] = defaultdict(list)
        for ev in doc["traceEvents"]:
            if ev.get("cat") != "kernel" or not ev.get("name", "").startswith("ncclDevKernel"):
                continue
            members = json.loads(ev["args"]["Process Group Ranks"])
            world = len(members) == doc["distributedInfo"]["world_size"]
            key = "world" if world else ",".join(map(str, sorted(members)))
            groups[key].append(round(float(ev["ts"]) * 1000))
        per_rank[rank] = {g: sorted(v) for g, v in groups.items()}
    out: dict[str, list[dict[str, int]]] = {}
    for group in {g for v in per_rank.values() for g in v}:
        members = list(per_rank) if group == "world" else [int(r) for r in group.split(",")]
        counts = {len(per_rank[r][group]) for r in members}
        assert len(counts) == 1, (group, counts)  # every member traced the same steps
        out[group] = [{r: per_rank[r][group][k] for r in members} for k in range(counts.pop())]
    return out


def nccl_calls_per_comm(files: list[Path]) -> dict[tuple[str, str, str], int]:
    """COLL lines (collectives on communicators of more than one rank) per (host, pid, comm)."""
    n: Counter[tuple[str, str, str]] = Counter()
    for path in files:
        for line in path.read_text(errors="replace").splitlines():
            m = COLL.match(line)
            if m and int(m["n"]) > 1 and m["op"] not in ("Send", "Recv"):
                n[(m["host"], m["pid"], m["comm"])] += 1
    return dict(n)


# ----------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def con(
    tmp_path_factory: pytest.TempPathFactory, shared_samples: Path
) -> Iterator[duckdb.DuckDBPyConnection]:
    """The real multi-rank sets, one run each, with the SQL applied."""
    store = Store.open(tmp_path_factory.mktemp("inst_real") / "store")
    nccl = shared_samples / "nccl_debug"
    runs = {
        "gpu": [GPU / "kineto", GPU / "nccl", GPU / "manifest.json"],
        "gpu_nccl": [GPU / "nccl", GPU / "manifest.json"],
        "gf": sorted(nccl.glob("gfbench_2.20.5_2rank_normal_rank*_debugfile.txt")),
        "nccltests": [nccl / "nccltests_2.27.7_1proc_2gpu_allreduce.log"],
        "hta2": sorted(
            (shared_samples / "kineto").glob("hta_trace_filter__sampled_rank-*.json.gz")
        ),
    }
    for run_id, paths in runs.items():
        ingest_paths(store, paths, run_id=run_id)
    c = materialised(store)
    yield c
    c.close()


def instances(con: duckdb.DuckDBPyConnection, run_id: str) -> pl.DataFrame:
    return con.sql(
        "SELECT * FROM collective_instances WHERE run_id = ? ORDER BY global_group, first_arrival_ns, instance_seq",
        params=[run_id],
    ).pl()


# -------------------------------------------------------------------------------------- tests


def test_gpu_last_rank_and_skew_equal_raw_kernel_starts(con: duckdb.DuckDBPyConnection) -> None:
    """real (Kineto, 4 ranks): every instance of every group is found complete; its last rank is
    the member whose NCCL kernel started last; its skew equals the spread of the raw starts."""
    want = kineto_instances(GPU / "kineto")
    got = instances(con, "gpu").filter(pl.col("op").is_in(["send", "recv"]).not_())
    assert set(got["global_group"]) == set(want)
    for group, inst in want.items():
        mine = got.filter(pl.col("global_group") == group).sort("first_arrival_ns")
        assert mine.height == len(inst), group
        assert (mine["status"] == "complete").all(), mine.filter(pl.col("status") != "complete")
        for row, starts in zip(mine.iter_rows(named=True), inst, strict=True):
            latest = max(starts.values())
            last = min(r for r, t in starts.items() if t == latest)
            spread = latest - min(starts.values())
            assert row["last_rank"] == last, (group, row, starts)
            # one machine: offsets ~0; the mart's skew is on aligned time (± its offset bound)
            tol = 2 + (row["offset_bound_ns"] or 0)
            assert abs(row["skew_ns"] - spread) <= tol, (group, row["skew_ns"], spread)


def test_gpu_planted_straggler_is_what_the_raw_starts_say(con: duckdb.DuckDBPyConnection) -> None:
    """real: rank 3's extra compute in steps 4-6 makes it the last of its DP reduce_scatter there
    (raw starts, by this oracle) and the mart names it in exactly those iterations."""
    planted = json.loads((GPU / "manifest.json").read_text())["planted"]
    assert planted["rank"] == 3
    dp = kineto_instances(GPU / "kineto")["1,3"]
    # per step (2..7 traced) one reduce_scatter then one all_gather on the DP group
    rs = dp[0::2]
    late = [i + 2 for i, s in enumerate(rs) if s[3] - s[1] > 50_000_000]  # > 50 ms late
    assert late == planted["steps"]
    got = (
        instances(con, "gpu")
        .filter((pl.col("global_group") == "1,3") & (pl.col("op") == "reduce_scatter"))
        .sort("first_arrival_ns")
    )
    named = got.filter((pl.col("last_rank") == 3) & (pl.col("skew_ns") > 50_000_000))
    assert sorted(named["iteration"].to_list()) == planted["steps"]


@pytest.mark.parametrize(
    ("run_id", "files"),
    [
        ("gpu_nccl", lambda s: sorted((GPU / "nccl").glob("*.log"))),
        (
            "gf",
            lambda s: sorted(
                (s / "nccl_debug").glob("gfbench_2.20.5_2rank_normal_rank*_debugfile.txt")
            ),
        ),
    ],
)
def test_nccl_logs_every_call_in_one_complete_instance(
    con: duckdb.DuckDBPyConnection,
    shared_samples: Path,
    run_id: str,
    files: Callable[[Path], list[Path]],
) -> None:
    """real (NCCL logs, untimed): each collective COLL line is in exactly one instance, every
    instance holds every member (no gap), matched by the logged opCount."""
    per_comm = nccl_calls_per_comm(files(shared_samples))
    got = instances(con, run_id).filter(pl.col("op").is_in(["send", "recv"]).not_())
    assert got.height > 0
    assert int(got["ranks_seen"].sum()) == sum(per_comm.values())
    assert (got["ranks_seen"] == got["ranks_expected"]).all()
    assert (got["status"] == "complete").all(), got["status"].value_counts()
    assert (got["match_method"] == "seq").all()
    assert got["instance_key"].n_unique() == got.height


def test_missing_members_are_only_untraced_ranks(con: duckdb.DuckDBPyConnection) -> None:
    """real (2 of 128 ranks traced, HTA sample; and every other set): an instance lacking members
    lacks only ranks the run holds no calls from; a traced rank never silently misses a call."""
    for run_id in ("gpu", "gpu_nccl", "gf", "nccltests", "hta2"):
        traced = {
            r
            for (r,) in con.sql(
                "SELECT DISTINCT rank FROM comm_ops WHERE run_id = ? AND rank IS NOT NULL",
                params=[run_id],
            ).fetchall()
        }
        gaps = instances(con, run_id).filter(pl.col("missing_ranks").is_not_null())
        for row in gaps.iter_rows(named=True):
            missing = {int(x) for x in row["missing_ranks"].split(",")}
            assert not (missing & traced), (run_id, row["instance_key"], missing & traced)
