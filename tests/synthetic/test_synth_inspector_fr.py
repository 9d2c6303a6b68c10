"""Generated NCCL Inspector and Flight Recorder output (issue 19 item 5): every record is one of
the generator's calls, with its size, sequence and kernel time, and a hang shows in the dumps as
torch writes it on timeout.

Oracles, independent of the writers under test: ``truth/counts.parquet`` (calls per rank, op and
size, from the simulation's events), the NCCL log and Kineto trace of the same run as parsed by
their own parsers (identity host:pid -> rank from the NCCL log; kernel times from Kineto), and
for the hang the scenario's own truth (``truth.json`` scenario.hang) read through
:mod:`commscope.pipeline.hang`.
"""

from __future__ import annotations

import pickle
import re
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from commscope.model.config import config_from_dict
from commscope.pipeline.hang import triage_files
from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.store import Store
from commscope.synthetic import GenerateOptions, Scenario, generate
from commscope.synthetic.presets import tiny_config
from commscope.synthetic.write_kineto import CPU_LEAD_NS

FORMATS = ("nccl", "kineto", "inspector", "flight_recorder")


class _Plain(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"global {module}.{name}")


def load_dump(path: Path) -> dict[str, Any]:
    """A dump through an unpickler that admits no globals (what torch writes has none)."""
    with path.open("rb") as fh:
        out: dict[str, Any] = _Plain(fh).load()
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Store, int]:
    """A 32-rank run (PP4 x TP2 x DP4, 2 iterations) in four formats, ingested whole; the
    Flight Recorder ring (60 entries) is shorter than a rank's calls."""
    tmp = tmp_path_factory.mktemp("insp_fr")
    cfg = config_from_dict(tiny_config())
    opts = GenerateOptions(iterations=2, seed=4, formats=FORMATS, fr_buffer_size=60)
    generate(cfg, opts, tmp / "gen")
    store = Store.open(tmp / "store")
    results = ingest_paths(store, [tmp / "gen"], run_id="g")
    bad = [(r.path, r.status, r.message) for r in results if r.status != "ingested"]
    assert not bad
    assert len(results) == 4 * 32
    return tmp / "gen", store, 60


def comm_ops(store: Store, fmt: str) -> pl.DataFrame:
    con = store.connect(read_only=True)
    try:
        return con.sql(
            "SELECT * FROM comm_ops WHERE run_id = 'g' AND source_format = ? ORDER BY rank, source_file, source_line",
            params=[fmt],
        ).pl()
    finally:
        con.close()


def truth_counts(gen: Path) -> pl.DataFrame:
    """(rank, op, msg_bytes in NCCL's count semantics, calls) from the simulation's events."""
    return pl.read_parquet(gen / "truth" / "counts.parquet")


def test_inspector_has_every_call_with_its_size_on_its_process(
    run: tuple[Path, Store, int],
) -> None:
    gen, store, _ = run
    counts = truth_counts(gen)
    assert set(counts["op"]) <= {"all_reduce", "send", "recv"}  # sizes need no RS/AG/A2A rule
    want: Counter[tuple[int, str, int]] = Counter()
    for r, op, size, n in counts.select("rank", "op", "msg_bytes", "calls").iter_rows():
        if size >= 8192:  # NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES default
            want[(r, op, size)] += n
    assert sum(want.values()) > 0
    assert sum(want.values()) < counts["calls"].sum()  # the size filter drops some calls
    # The process -> rank identity comes from the NCCL log of the same run (host:pid).
    ident = dict(
        comm_ops(store, "nccl_debug")
        .select("host", "pid", "rank")
        .unique()
        .select(pl.concat_str("host", "pid", separator=":"), "rank")
        .iter_rows()
    )
    insp = comm_ops(store, "nccl_inspector")
    got = Counter(
        (ident[f"{h}:{p}"], op, b)
        for h, p, op, b in insp.select("host", "pid", "op", "msg_bytes").iter_rows()
    )
    assert got == want
    assert insp["timing_source"].unique().to_list() == ["kernel"]
    assert insp["dur_ns"].null_count() == 0


def test_inspector_sequences_and_exec_times_equal_the_calls(run: tuple[Path, Store, int]) -> None:
    _, store, _ = run
    insp = comm_ops(store, "nccl_inspector")
    coll = insp.filter(pl.col("op") == "all_reduce")
    # coll_sn counts every call of the communicator (the size filter drops records, not
    # numbers): per (process, comm, op) the kept numbers rise, and the largest is below the
    # number of calls.
    per = coll.group_by("host", "pid", "comm_id", "op").agg(
        pl.col("seq").min().alias("lo"),
        pl.col("seq").max().alias("hi"),
        pl.len().alias("n"),
        (pl.col("seq").diff().drop_nulls() > 0).all().alias("rising"),
    )
    assert per["rising"].all()
    assert (per["lo"] >= 0).all() and (per["hi"] - per["lo"] + 1 >= per["n"]).all()
    p2p = insp.filter(pl.col("op").is_in(["send", "recv"]))
    per = p2p.group_by("host", "pid", "comm_id").agg(pl.col("seq").sort(), pl.len().alias("n"))
    for seqs, n in per.select("seq", "n").iter_rows():
        assert seqs == list(range(1, n + 1))
    # Exec time = the kernel (Kineto's, same call) truncated to whole microseconds.
    ident = dict(
        comm_ops(store, "nccl_debug")
        .select(pl.concat_str("host", "pid", separator=":"), "rank")
        .unique()
        .iter_rows()
    )
    kin = comm_ops(store, "kineto").filter(pl.col("msg_bytes") >= 8192)
    want = Counter(
        (r, op, b, d // 1000 * 1000)
        for r, op, b, d in kin.select("rank", "op", "msg_bytes", "dur_ns").iter_rows()
    )
    got = Counter(
        (ident[f"{h}:{p}"], op, b, d)
        for h, p, op, b, d in insp.select("host", "pid", "op", "msg_bytes", "dur_ns").iter_rows()
    )
    assert got == want
    # busbw as NCCL computes it: all-reduce x 2(n-1)/n of algbw = size / time.
    ar = coll.filter(pl.col("dur_ns") > 0)
    expect = (
        ar["msg_bytes"]
        / (ar["dur_ns"] / 1e9)
        / 1e9
        * 8
        * (2 * (ar["group_size"] - 1) / ar["group_size"])
    )
    assert ((ar["busbw_gbps"] - expect).abs() <= 8e-6 + 1e-9 * expect).all()


def test_inspector_header_id_is_the_nccl_commid_cut(run: tuple[Path, Store, int]) -> None:
    """header.id = the first 16 characters of the commId the NCCL log prints. From NCCL 2.21
    the split communicators' Init lines print no commId (parent/color/key instead), so only
    the pipeline pairs (ncclCommInitRank) can be compared in this 2.21 run: their ids are
    exactly the Inspector ids of the send/recv records."""
    gen, store, _ = run
    text = "\n".join(p.read_text() for p in sorted((gen / "nccl").iterdir()))
    cut = {c[:16] for c in re.findall(r"commId (0x[0-9a-f]+)", text)}
    insp = comm_ops(store, "nccl_inspector")
    p2p_ids = set(insp.filter(pl.col("op").is_in(["send", "recv"]))["comm_id"].to_list())
    assert p2p_ids
    assert set(insp["comm_id"].to_list()) & cut == p2p_ids


def test_flight_recorder_keeps_the_last_n_entries_of_every_rank(
    run: tuple[Path, Store, int],
) -> None:
    gen, store, n_ring = run
    calls = truth_counts(gen).group_by("rank").agg(pl.col("calls").sum())
    total = dict(calls.iter_rows())
    fr = comm_ops(store, "flight_recorder")
    for r, rows in fr.group_by("rank").agg(pl.len()).iter_rows():
        assert rows == min(n_ring, total[r])
    for path in sorted((gen / "flight_recorder").iterdir()):
        dump = load_dump(path)
        r = int(path.name.rsplit("_", 1)[1])
        assert list(dump) == ["version", "pg_config", "comm_lib_version", "pg_status", "entries"]
        assert dump["version"] == "2.10"
        ids = [e["record_id"] for e in dump["entries"]]
        assert ids == list(range(total[r] - n_ring, total[r]))  # the ring: last N, oldest first
        assert all(e["state"] == "completed" and e["retired"] for e in dump["entries"])
        assert all(isinstance(e["process_group"], tuple) for e in dump["entries"])
        # pg_status: every group's last sequence equals the entries' last on that group
        names = {e["pg_id"]: e["process_group"][0] for e in dump["entries"]}
        for pg_id, name in names.items():
            last = max(
                e["p2p_seq_id"] if e["is_p2p"] else e["collective_seq_id"]
                for e in dump["entries"]
                if e["pg_id"] == pg_id
            )
            st = dump["pg_status"][str(pg_id)]
            assert st["last_enqueued_collective"] == st["last_completed_collective"] == last, name
        assert set(dump["pg_config"]) == {e["process_group"][0] for e in dump["entries"]} | set(
            dump["pg_config"]
        )


def test_flight_recorder_full_ring_equals_every_call(tmp_path: Path) -> None:
    """With a ring larger than the run, the dumps hold every call: sizes and per-group
    sequences as the simulation issued them, durations equal the Kineto kernels, enqueue
    times on the same (skewed) node clock as the Kineto trace."""
    raw = tiny_config(pp=2, tp=2, dp=2)
    raw["platform"]["gpus_per_node"] = 4  # two nodes: the second one's clock is skewed
    cfg = config_from_dict(raw)
    opts = GenerateOptions(
        iterations=2,
        seed=2,
        formats=("kineto", "flight_recorder"),
        scenario=Scenario(clock_skew_us=(0.0, 2500.0)),
    )
    generate(cfg, opts, tmp_path / "gen")
    store = Store.open(tmp_path / "store")
    results = ingest_paths(store, [tmp_path / "gen"], run_id="g")
    assert all(r.status == "ingested" for r in results)
    counts = truth_counts(tmp_path / "gen")
    want = Counter()
    for r, op, size, n in counts.select("rank", "op", "msg_bytes", "calls").iter_rows():
        want[(r, op, size)] += n
    fr = comm_ops(store, "flight_recorder")
    assert Counter(fr.select("rank", "op", "msg_bytes").iter_rows()) == want
    coll = fr.filter(~pl.col("op").is_in(["send", "recv"]))
    for seqs in coll.group_by("rank", "comm_id").agg(pl.col("seq").sort())["seq"]:
        assert list(seqs) == list(range(1, len(seqs) + 1))
    kin = comm_ops(store, "kineto")
    a = fr.sort("rank", "comm_id", "launch_ts_ns")
    b = kin.sort("rank", "comm_id", "ts_ns")
    assert a["comm_id"].to_list() == b["comm_id"].to_list()
    rel = ((a["dur_ns"] - b["dur_ns"]).abs() / b["dur_ns"]).max()
    assert rel is not None and rel < 1e-6  # duration_ms is a float32, like CUDA event times
    # Enqueued CPU_LEAD_NS before the kernel starts (Kineto's record_param_comms lead).
    lead = a["launch_ts_ns"] - b["ts_ns"]
    assert lead.unique().to_list() == [-CPU_LEAD_NS]


def test_hang_dumps_name_the_stuck_rank_and_collective(tmp_path: Path) -> None:
    cfg = config_from_dict(tiny_config())
    opts = GenerateOptions(
        iterations=3,
        seed=3,
        formats=("nccl", "flight_recorder"),
        scenario=Scenario(hang_rank=5, hang_iteration=1),
    )
    res = generate(cfg, opts, tmp_path / "gen")
    hang = res.truth["scenario"]["hang"]
    assert hang["rank"] == 5 and hang["class"] == "DP" and 5 in hang["members"]
    dumps = {
        int(p.name.rsplit("_", 1)[1]): load_dump(p)
        for p in (tmp_path / "gen" / "flight_recorder").iterdir()
    }
    # The stuck rank has nothing pending; the members that posted its collective wait in it.
    assert all(e["state"] == "completed" for e in dumps[5]["entries"])
    for m in hang["members"]:
        if m == 5:
            continue
        last = dumps[m]["entries"][-1]
        assert last["state"] == "started" and last["time_discovered_completed_ns"] is None
        assert "duration_ms" not in last
        assert last["process_group"][0] == hang["pg_name"]
        assert last["collective_seq_id"] == hang["collective_seq_id"]
    # Every blocked rank's dump ends in a pending entry; ranks stop at most one iteration later.
    assert len(hang["blocked_at"]) == 31
    for r, d in dumps.items():
        pending = [e for e in d["entries"] if e["state"] != "completed"]
        assert len(pending) == (0 if r == 5 else 1)
    report = triage_files(sorted((tmp_path / "gen" / "flight_recorder").iterdir()))
    assert not report.errors
    assert report.suspects[0][0] == 5
    first = report.findings[0]
    assert first.group == hang["pg_name"] and first.seq == hang["collective_seq_id"]
    assert first.never_reached == (5,)
    assert set(first.never_completed) == set(hang["members"]) - {5}
    assert first.op == "all_reduce"


def test_hang_needs_no_other_format_change(tmp_path: Path) -> None:
    """The hang is in the dumps only: the NCCL logs of a hang run equal those of the same run
    without it (the simulation does not stop)."""
    cfg = config_from_dict(tiny_config(pp=2, tp=2, dp=2))
    base = GenerateOptions(iterations=2, seed=1, formats=("nccl", "flight_recorder"))
    generate(cfg, base, tmp_path / "a")
    hung = GenerateOptions(
        iterations=2,
        seed=1,
        formats=("nccl", "flight_recorder"),
        scenario=Scenario(hang_rank=1, hang_iteration=0),
    )
    generate(cfg, hung, tmp_path / "b")
    for p in sorted((tmp_path / "a" / "nccl").iterdir()):
        assert p.read_bytes() == (tmp_path / "b" / "nccl" / p.name).read_bytes()
    a = load_dump(tmp_path / "a" / "flight_recorder" / "nccl_trace_rank_1")
    b = load_dump(tmp_path / "b" / "flight_recorder" / "nccl_trace_rank_1")
    assert len(b["entries"]) < len(a["entries"])


def test_moe_all_to_all_in_inspector_and_flight_recorder(tmp_path: Path) -> None:
    """A routed all_to_all_single is grouped Send/Recv for NCCL (one Inspector p2p record per
    peer, self included, each with its split) and one ``nccl:all_to_all`` entry in the Flight
    Recorder (the whole send buffer); both equal what the NCCL log of the same run shows."""
    b, m, dp = 2, 2, 8
    cfg = config_from_dict(
        {
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
    )
    opts = GenerateOptions(
        iterations=1, formats=("nccl", "inspector", "flight_recorder"), inspector_min_bytes=0
    )
    generate(cfg, opts, tmp_path / "gen")
    store = Store.open(tmp_path / "store")
    assert all(r.status == "ingested" for r in ingest_paths(store, [tmp_path / "gen"], run_id="g"))
    nccl = comm_ops(store, "nccl_debug")
    ident = dict(
        nccl.select(pl.concat_str("host", "pid", separator=":"), "rank").unique().iter_rows()
    )
    ep = nccl.filter(pl.col("op").is_in(["send", "recv"]))
    assert ep.height > 0
    want = Counter(ep.select("rank", "op", "peer_rank", "msg_bytes").iter_rows())
    insp = comm_ops(store, "nccl_inspector")
    got = Counter(
        (ident[f"{h}:{p}"], op, peer, size)
        for h, p, op, peer, size in insp.filter(pl.col("op").is_in(["send", "recv"]))
        .select("host", "pid", "op", "peer_rank", "msg_bytes")
        .iter_rows()
    )
    assert got == want
    fr = comm_ops(store, "flight_recorder").filter(pl.col("op") == "all_to_all")
    sent = ep.filter(pl.col("op") == "send").group_by("rank").agg(pl.col("msg_bytes").sum())
    assert dict(fr.group_by("rank").agg(pl.col("msg_bytes").sum()).iter_rows()) == dict(
        sent.iter_rows()
    )


def test_inspector_2_28_shape_keeps_the_latest_collective_per_dump_tick(tmp_path: Path) -> None:
    """NCCL 2.28-2.29: one slot per communicator, written at the dump tick: every record is one
    of the run's collectives (size and exec time as Kineto's kernel), none is written twice,
    some are lost (coll_sn gaps), no p2p, no comm_name."""
    cfg = config_from_dict(tiny_config(pp=2, tp=2, dp=2))
    opts = GenerateOptions(
        iterations=2, seed=6, formats=("kineto", "inspector"), inspector_shape="2.28"
    )
    generate(cfg, opts, tmp_path / "gen")
    text = "".join(p.read_text() for p in sorted((tmp_path / "gen" / "inspector").iterdir()))
    assert '"comm_name"' not in text and '"p2p_perf"' not in text
    store = Store.open(tmp_path / "store")
    assert all(r.status == "ingested" for r in ingest_paths(store, [tmp_path / "gen"], run_id="g"))
    insp = comm_ops(store, "nccl_inspector")
    kin = comm_ops(store, "kineto").filter(pl.col("op") == "all_reduce")
    assert set(insp["op"]) == {"all_reduce"}
    assert 0 < insp.height < kin.height
    # Each (process, comm, seq) at most once; every record a real call (size, µs-cut kernel).
    assert insp.select("host", "pid", "comm_id", "seq").is_duplicated().sum() == 0
    calls = Counter((b, d // 1000 * 1000) for b, d in kin.select("msg_bytes", "dur_ns").iter_rows())
    recs = Counter(insp.select("msg_bytes", "dur_ns").iter_rows())
    assert not recs - calls
