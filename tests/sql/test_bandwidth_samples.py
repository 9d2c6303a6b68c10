"""Bandwidths of every real sample are physically possible, and groups the trace omits are known
(issue 16 acceptance, items 3 and 4).

Every file of ../shared/samples (every parser) and every sample_traces/ folder is ingested into
one temporary store (tests/sql/conftest.py) and the SQL applied. No bandwidth the marts expose
may exceed 1,000 GB/s (1e12 bytes/s): the fastest links of today move well under that per GPU
(NVLink 5: 900 GB/s bidirectional), so a larger figure is a wrong clock or a wrong size.
Before issue 16 hta_negative_queue_length showed 33,806 GB/s (an all_reduce timed by its CPU
enqueue call).

The 2-rank sample of a 128-rank Kineto run (hta_trace_filter: distributedInfo world_size 128,
calls naming no process group) must have busbw, a traffic matrix, predictability and MoE rows on
the 128-rank world group, marked group_source inferred_default; the world size is read here from
the file itself.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from commscope.pipeline.store import Store
from tests.conftest import ROOT, SHARED
from tests.sql.conftest import materialised, sample_files

MAX_GB_S = 1000.0
DEFAULT_GROUP_TRACES = (
    "kineto/hta_trace_filter__sampled_rank-0.json.gz",
    "kineto/hta_trace_filter__sampled_rank-1.json.gz",
)


@pytest.fixture(scope="module")
def con(all_samples: tuple[Store, dict[str, Path]]) -> Iterator[duckdb.DuckDBPyConnection]:
    """All sample runs with the SQL modules applied."""
    c = materialised(all_samples[0])
    # the per-sample tests read these marts once each: keep one computed copy
    c.execute("CREATE TABLE bw_rows AS SELECT * FROM effective_bandwidth")
    c.execute("CREATE TABLE c_rows AS SELECT * FROM model_vs_measured WHERE term LIKE 'C_%'")
    yield c
    c.close()


def _samples() -> list[Path]:
    """The samples the store holds (as tests/sql/conftest.py ingests them), for one test each."""
    shared = SHARED / "samples"
    found = sample_files(shared) if shared.is_dir() else []
    return found + sorted(p for p in (ROOT / "sample_traces").iterdir() if p.is_dir())


SAMPLES = _samples()


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_no_bandwidth_over_1000_gb_s(
    con: duckdb.DuckDBPyConnection, all_samples: tuple[Store, dict[str, Path]], path: Path
) -> None:
    """No effective_bandwidth figure (algbw, busbw, mean busbw, DeepSpeed's corrected busbw,
    the run's C values) and no measured C of model_vs_measured exceeds 1,000 GB/s."""
    _, runs = all_samples
    (run_id,) = [r for r, p in runs.items() if p == path]
    args = {"cap": MAX_GB_S, "r": run_id}
    bad = con.execute(
        """
        SELECT source, op, group_size, size_bucket_bytes, timing_source, algbw_gb_s,
          busbw_gb_s, mean_busbw_gb_s, corrected_busbw_gbit_s / 8,
          greatest(c_tp_bytes_s, c_pp_bytes_s, c_dp_bytes_s, c_ep_bytes_s) / 1e9
        FROM bw_rows
        WHERE run_id = $r AND (
          algbw_gb_s > $cap OR busbw_gb_s > $cap OR mean_busbw_gb_s > $cap
          OR corrected_busbw_gbit_s / 8 > $cap
          OR c_tp_bytes_s > $cap * 1e9 OR c_pp_bytes_s > $cap * 1e9
          OR c_dp_bytes_s > $cap * 1e9 OR c_ep_bytes_s > $cap * 1e9
        )
        ORDER BY op, size_bucket_bytes
        """,
        args,
    ).fetchall()
    assert bad == []
    measured_c = con.execute(
        "SELECT term, measured FROM c_rows WHERE run_id = $r AND measured > $cap * 1e9",
        args,
    ).fetchall()
    assert measured_c == []


def test_the_bandwidth_check_is_not_vacuous(
    con: duckdb.DuckDBPyConnection, all_samples: tuple[Store, dict[str, Path]]
) -> None:
    """Bandwidths exist for samples of several parsers, kernel-timed ones among them, so the
    bound above checks real values (the nsys and NCCL samples log no size or no duration)."""
    _, runs = all_samples
    rows = con.execute(
        "SELECT DISTINCT run_id, timing_source FROM bw_rows WHERE busbw_gb_s IS NOT NULL"
    ).fetchall()
    formats = {runs[r].parent.name for r, _ in rows if r.startswith("s")}
    assert {"kineto", "deepspeed_comms"} <= formats, formats
    assert "kernel" in {ts for _, ts in rows}, rows


def test_untimed_calls_give_no_bandwidth(con: duckdb.DuckDBPyConnection) -> None:
    """No effective_bandwidth row with a bandwidth lacks a timed call; none says 'none'."""
    bad = con.execute(
        "SELECT run_id, op, timed_calls, timing_source FROM bw_rows "
        "WHERE source = 'comm_ops' AND (busbw_gb_s IS NOT NULL OR algbw_gb_s IS NOT NULL) "
        "AND (timed_calls = 0 OR timing_source IS NULL OR timing_source LIKE '%none%')"
    ).fetchall()
    assert bad == []


@pytest.mark.parametrize("name", DEFAULT_GROUP_TRACES)
def test_default_group_of_a_world_gets_busbw_and_a_matrix(
    con: duckdb.DuckDBPyConnection,
    all_samples: tuple[Store, dict[str, Path]],
    shared_samples: Path,
    name: str,
) -> None:
    path = shared_samples / name
    if not path.is_file():
        pytest.skip(f"{name} not in ../shared")
    with gzip.open(path, "rt") as f:
        info = json.load(f)["distributedInfo"]
    world, rank = int(info["world_size"]), int(info["rank"])
    _, runs = all_samples
    (run_id,) = [r for r, p in runs.items() if p == path]
    groups = con.execute(
        "SELECT DISTINCT global_group, group_size, group_source FROM int_comm_ops_classified "
        "WHERE run_id = $r AND is_traffic AND op <> 'send' AND op <> 'recv' "
        "AND group_source IS DISTINCT FROM 'inferred_shapes'",
        {"r": run_id},
    ).fetchall()
    assert groups == [("world", world, "inferred_default")]
    # all_gather / reduce_scatter sized by their c10d op's shapes are a smaller group whose
    # members the trace does not name: a known size, no world membership assumed
    shaped = con.execute(
        "SELECT DISTINCT op, global_group, group_size FROM int_comm_ops_classified "
        "WHERE run_id = $r AND group_source = 'inferred_shapes'",
        {"r": run_id},
    ).fetchall()
    for op, global_group, n in shaped:
        assert op in ("all_gather", "reduce_scatter") and global_group is None and n < world
    bw = con.execute(
        "SELECT op, group_size, group_source, busbw_gb_s FROM bw_rows "
        "WHERE run_id = $r AND source = 'comm_ops' AND op IN ('all_reduce', 'all_to_all')",
        {"r": run_id},
    ).fetchall()
    assert {op for op, *_ in bw} == {"all_reduce", "all_to_all"}
    for _op, n, group_source, busbw in bw:
        assert (n, group_source) == (world, "inferred_default")
        assert busbw is not None and 0 < busbw <= MAX_GB_S
    sent = con.execute(
        "SELECT count(DISTINCT dst_rank) FILTER (WHERE dst_rank <> src_rank), sum(bytes), "
        "sum(local_bytes) FILTER (WHERE dst_rank = src_rank) FROM traffic_matrix "
        "WHERE run_id = $r AND src_rank = $k",
        {"r": run_id, "k": rank},
    ).fetchone()
    assert sent is not None
    # all_to_all reaches every other member of the world; its own block stays local
    assert sent[0] == world - 1 and sent[1] > 0 and sent[2] > 0
    # the marts built on the matrix have the run too: one predictability row per iteration with
    # traffic of the rank, one MoE row per iteration with EP (all_to_all) traffic
    iters = con.execute(
        "SELECT count(DISTINCT iteration) FROM int_flows_expanded WHERE run_id = $r "
        "AND src_rank = $k AND iteration IS NOT NULL",
        {"r": run_id, "k": rank},
    ).fetchone()
    assert iters is not None and iters[0] >= 1
    pred = con.execute(
        "SELECT count(*) FROM predictability WHERE run_id = $r AND scope = 'rank' AND rank = $k",
        {"r": run_id, "k": rank},
    ).fetchone()
    assert pred == (iters[0],)
    moe = con.execute(
        "SELECT count(*) FROM moe_nonuniform WHERE run_id = $r AND volume_bytes > 0",
        {"r": run_id},
    ).fetchone()
    assert moe is not None and moe[0] >= 1
