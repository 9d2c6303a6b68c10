"""Round trip: generate a 32-rank run, ingest it with the project's parsers, and get back exactly
the per-rank calls and message sizes the analytical model predicts (issue 5's acceptance)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from commscope.model.config import RunConfig, config_from_dict
from commscope.model.traffic import traffic_rows
from commscope.parsers._ds_sizes import size_to_bytes
from commscope.pipeline import run_config
from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.run_config import load_generate_config
from commscope.pipeline.store import Store
from commscope.synthetic import GenerateOptions, Scenario, generate
from commscope.synthetic.presets import tiny_config as tiny
from commscope.synthetic.write_deepspeed import convert_size

ROOT = Path(__file__).resolve().parents[2]


def expected(run: RunConfig, iterations: int) -> Counter[tuple[int, str, int]]:
    """(rank, op, msg_bytes) -> calls over the run, from the model; sizes in NCCL/c10d count
    semantics (identical to the model's for all-reduce, send and recv, the ops of this layout)."""
    out: Counter[tuple[int, str, int]] = Counter()
    for row in traffic_rows(run):
        out[(row["rank"], row["op"], int(row["msg_bytes"]))] += int(row["count"]) * iterations
    return out


def ingested(store: Store, run_id: str, fmt: str) -> Counter[tuple[int, str, int]]:
    con = store.connect(read_only=True)
    try:
        df = con.sql(
            "SELECT rank, op, msg_bytes, count(*) AS n FROM comm_ops "
            f"WHERE run_id = '{run_id}' AND source_format = '{fmt}' AND op <> 'barrier' GROUP BY ALL"
        ).pl()
    finally:
        con.close()
    return Counter({(r, op, b): n for r, op, b, n in df.iter_rows()})


def roundtrip(tmp: Path, run: RunConfig, opts: GenerateOptions) -> tuple[Store, str, Any]:
    out = tmp / "run"
    res = generate(run, opts, out)
    store = Store.open(tmp / "store")
    results = ingest_paths(store, [out], run_id="synth")
    by_status = Counter(r.status for r in results)
    logs = sum(len(v) for v in res.files.values())
    assert by_status["ingested"] == logs, [
        (r.path, r.status, r.message) for r in results if r.status != "ingested"
    ]
    return store, "synth", res


def test_ingest_gives_back_the_models_calls_and_sizes_in_every_format(tmp_path: Path) -> None:
    run = config_from_dict(tiny())
    iterations = 1
    store, run_id, _ = roundtrip(tmp_path, run, GenerateOptions(iterations=iterations, seed=9))
    want = expected(run, iterations)
    for fmt in ("nccl_debug", "kineto", "nsys"):
        assert ingested(store, run_id, fmt) == want, fmt
    # DeepSpeed: rank 0 only, sizes as printed (1024-based, two decimals).
    ds = ingested(store, run_id, "deepspeed_comms")
    want0 = Counter()
    for (rank, op, size), n in want.items():
        if rank == 0:
            want0[(0, op, size_to_bytes(convert_size(size)))] += n
    assert ds == want0
    # Line accounting: nothing rejected, and the manifest's config was recorded (synthetic).
    con = store.connect(read_only=True)
    rejected = con.execute(
        f"SELECT sum(lines_rejected) FROM ingested_files WHERE run_id = '{run_id}'"
    ).fetchone()[0]
    ranks = con.execute(
        f"SELECT count(DISTINCT rank) FROM trace_meta WHERE run_id = '{run_id}'"
    ).fetchone()[0]
    con.close()
    assert rejected == 0 and ranks == 32
    stored = run_config.load(store, run_id)
    assert stored is not None and stored.synthetic
    assert config_from_dict(stored.config) == run


def test_ingest_of_a_faulty_run(tmp_path: Path) -> None:
    """Missing rank and a log cut mid-line: everything else still ingests; the cut line is the
    only reject; TCP shows in the topology."""
    run = config_from_dict(tiny())
    scn = Scenario(
        missing_ranks=(6,),
        truncate_rank=3,
        truncate_fraction=0.5,
        network="tcp",
        clock_skew_us=500.0,
    )
    store, run_id, _res = roundtrip(
        tmp_path, run, GenerateOptions(iterations=1, formats=("nccl",), scenario=scn)
    )
    con = store.connect(read_only=True)
    per_rank = dict(
        con.execute(
            f"SELECT rank, count(*) FROM comm_ops WHERE run_id = '{run_id}' AND source_format = 'nccl_debug' GROUP BY rank"
        ).fetchall()
    )
    rejects = con.execute(f"SELECT count(*) FROM rejects WHERE run_id = '{run_id}'").fetchone()[0]
    transports = {
        r[0]
        for r in con.execute(
            f"SELECT DISTINCT transport FROM topology WHERE run_id = '{run_id}'"
        ).fetchall()
    }
    con.close()
    assert 6 not in per_rank and len(per_rank) == 31
    want = expected(run, 1)
    full = sum(n for (r, _op, _b), n in want.items() if r == 3)
    assert 0 < per_rank[3] < full
    assert rejects == 1
    assert "NET/Socket" in transports and "NET/IB" not in transports


@pytest.mark.slow
def test_gpt3b_paper_run_round_trip(tmp_path: Path) -> None:
    """The demo config (GPT-3B at (4, 2, 4), Table 3): one iteration, NCCL and nsys."""
    run, opts = load_generate_config(ROOT / "configs" / "synthetic_gpt3b_4x2x4.toml")
    opts = GenerateOptions(iterations=1, seed=opts.seed, formats=("nccl", "nsys"))
    store, run_id, _ = roundtrip(tmp_path, run, opts)
    want = expected(run, 1)
    assert want[(0, "all_reduce", 131_072_000)] == 680  # Table 3: 680 TP all-reduces at rank 0
    for fmt in ("nccl_debug", "nsys"):
        got = ingested(store, run_id, fmt)
        assert got == want, fmt
    frame = pl.DataFrame(
        [(k[0], k[1], k[2], v) for k, v in want.items()],
        schema=["rank", "op", "b", "n"],
        orient="row",
    )
    assert frame["rank"].n_unique() == 32


def test_moe_all_to_all_splits_round_trip_through_nccl(tmp_path: Path) -> None:
    """Routed all-to-alls are Send/Recv groups in the NCCL logs; their per-peer bytes give back
    the truth's EP traffic matrix (what the non-uniform factor is computed from)."""
    b, m, dp = 2, 2, 8
    cfg = {
        "model": {
            "name": "moe",
            "layers": 2,
            "hidden": 128,
            "seq": 64,
            "vocab": 512,
            "global_batch": b * m * dp,
            "micro_batch": b,
            "experts": 8,
            "top_k": 2,
            "moe_every": 2,
        },
        "parallel": {"pp": 1, "tp": 1, "dp": dp, "ep": 8},
        "platform": {"gpus_per_node": 8, "peak_flops": 2e12},
    }
    run = config_from_dict(cfg)
    store, run_id, _res = roundtrip(tmp_path, run, GenerateOptions(iterations=1, formats=("nccl",)))
    con = store.connect(read_only=True)
    sends = con.execute(
        f"SELECT rank, peer_rank, sum(msg_bytes) FROM comm_ops WHERE run_id = '{run_id}' "
        "AND op = 'send' AND group_size = 8 GROUP BY ALL"
    ).fetchall()
    con.close()
    got = {(r, p): n for r, p, n in sends if r != p}  # EP group = world: comm rank = global rank
    traffic = pl.read_parquet(tmp_path / "run" / "truth" / "traffic.parquet").filter(
        pl.col("cls") == "EP"
    )
    want = {(s, d): round(v) for s, d, v in traffic.select("src", "dst", "bytes").iter_rows()}
    assert got == want
    assert len(set(got.values())) > 1  # non-uniform
