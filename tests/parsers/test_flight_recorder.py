"""The ``flight_recorder`` parser: real dumps, refused globals, every schema version, bad values.

The real dumps (``../shared/samples/flight_recorder``, two nvrx fault-injection runs of 16
ranks) are checked against an independent reader: :func:`oracle_load` decodes the pickle
opcodes with ``pickletools.genops`` and a small stack machine that knows only the opcodes of
plain values, never ``pickle.load``. Version cases build dumps in the test (plain dicts,
pickled or JSON-encoded), one per schema version ``fr_trace`` knows.
"""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from commscope.parsers._io import Source
from commscope.parsers.registry import LineCounts, ParseError, load_all, sniff
from commscope.parsers.schema import conform
from commscope.pipeline.ingest import (
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNKNOWN,
    _fill_provenance,
    ingest_paths,
)
from commscope.pipeline.store import Store
from tests.oracle.fr_pickle_reference import oracle_load

SCENARIOS = {"nvrx_lock_gil_1st": 142, "nvrx_gpu_error_1st": 289}
"""Scenario folder -> entries in its 16 dumps (the .source.txt files say the same)."""


# --------------------------------------------------------------------------- helpers


class Parsed:
    """One parse by the flight_recorder parser: counts, conformed frames, warnings."""

    def __init__(self, path: Path, rank: int | None = None) -> None:
        parser = load_all()["flight_recorder"]
        self.counts = LineCounts()
        self.frames: dict[str, list[pl.DataFrame]] = {}
        self.warnings: list[str] = []
        for chunk in parser.parse(Source(path), run_id="t", rank=rank):
            self.counts += chunk.counts
            self.warnings += chunk.warnings
            for table, df in chunk.tables.items():
                conform(_fill_provenance(df, table, "t", str(path), "flight_recorder"), table)
                self.frames.setdefault(table, []).append(df)
        assert self.counts.balanced, self.counts
        assert self.height("rejects") == self.counts.rejected

    def get(self, table: str) -> pl.DataFrame:
        frames = self.frames.get(table)
        return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()

    def height(self, table: str) -> int:
        return sum(df.height for df in self.frames.get(table, []))


def _entry(**over: Any) -> dict[str, Any]:
    """A 2.9-shaped entry (the samples' 20 keys, in their order)."""
    e: dict[str, Any] = {
        "record_id": 10,
        "pg_id": 1,
        "process_group": ("3", "TENSOR_MODEL_PARALLEL_GROUP"),
        "thread_name": "python3",
        "thread_id": "140000000000",
        "collective_seq_id": 7,
        "p2p_seq_id": 0,
        "op_id": 7,
        "profiling_name": "nccl:all_reduce",
        "time_created_ns": 1_758_000_000_000_000_000,
        "input_sizes": [[4, 1024]],
        "input_dtypes": ["BFloat16"],
        "output_sizes": [[4, 1024]],
        "output_dtypes": ["BFloat16"],
        "state": "scheduled",
        "time_discovered_started_ns": None,
        "time_discovered_completed_ns": None,
        "retired": False,
        "timeout_ms": 600000,
        "is_p2p": False,
    }
    e.update(over)
    return e


def _pg_config() -> dict[str, Any]:
    return {
        "0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"},
        "3": {"name": "3", "desc": "TENSOR_MODEL_PARALLEL_GROUP", "ranks": "[2, 3]"},
        "5": {"name": "5", "desc": "PIPELINE_MODEL_PARALLEL_GROUP", "ranks": "[1, 3]"},
    }


def _write(path: Path, doc: Any, form: str = "pickle", protocol: int = 2) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if form == "pickle":
        path.write_bytes(pickle.dumps(doc, protocol=protocol))
    else:
        path.write_text(json.dumps(doc, sort_keys=True))
    return path


# --------------------------------------------------------------------------- real dumps


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_sample_entry_has_group_sequence_and_state(
    shared_samples: Path, scenario: str
) -> None:
    folder = shared_samples / "flight_recorder" / scenario
    dumps = sorted(folder.glob("_dump_*"))
    assert len(dumps) == 16
    total = 0
    for path in dumps:
        src = Source(path)
        assert sniff(src.head(), path) is load_all()["flight_recorder"], path
        raw = oracle_load(path.read_bytes())
        rank = int(path.name.rsplit("_", 1)[1])
        want = [
            (
                i,
                e["process_group"][0],
                e["p2p_seq_id"] if e["is_p2p"] else e["collective_seq_id"],
                e["state"],
                e["profiling_name"],
                e["time_created_ns"],
            )
            for i, e in enumerate(raw["entries"], start=1)
        ]
        got = Parsed(path)
        assert got.counts.total == got.counts.parsed == len(want)
        ops = got.get("comm_ops")
        have = (
            [
                tuple(r)
                for r in ops.select(
                    "source_line", "comm_id", "seq", "call_state", "raw_op", "launch_ts_ns"
                ).rows()
            ]
            if ops.height
            else []
        )
        assert have == want, path
        if ops.height:
            assert ops["rank"].unique().to_list() == [rank]
            assert ops["comm_id"].null_count() == ops["seq"].null_count() == 0
            assert ops["call_state"].null_count() == 0
            # no CPU clock as a duration: these dumps have no duration_ms
            assert ops["dur_ns"].null_count() == ops.height
            assert ops["ts_ns"].null_count() == ops.height
            assert set(ops["timing_source"]) == {"none"}
            # group size and membership from the dump's own pg_config
            for name, size in ops.select("comm_id", "group_size").unique().rows():
                assert size == len(json.loads(raw["pg_config"][name]["ranks"]))
        meta = got.get("trace_meta")
        assert meta.select("rank", "rank_source", "world_size").rows() == [(rank, "file_name", 16)]
        assert got.height("communicators") == len(raw["pg_config"])
        total += len(want)
    assert total == SCENARIOS[scenario]


def test_sample_sizes_p2p_peers_and_group_ranks(shared_samples: Path) -> None:
    """Rank 14 of gpu_error: all_to_all, TP all_gather, pipeline recv from stage 2 -> rank 10."""
    path = shared_samples / "flight_recorder" / "nvrx_gpu_error_1st" / "_dump_14"
    raw = oracle_load(path.read_bytes())
    ops = Parsed(path).get("comm_ops")
    by_line = {r["source_line"]: r for r in ops.iter_rows(named=True)}
    for i, e in enumerate(raw["entries"], start=1):
        row = by_line[i]
        ranks = sorted(json.loads(raw["pg_config"][e["process_group"][0]]["ranks"]))
        assert row["group_rank"] == ranks.index(14)
        name = e["profiling_name"]
        assert e["input_dtypes"][0] == "BFloat16" or row["dtype"] != "bfloat16"
        elem = {"BFloat16": 2, "Float": 4, "Long": 8, "Byte": 1}
        if "reduce_scatter" in name or "recv" in name:
            shape, dt = e["output_sizes"][0], e["output_dtypes"][0]
        else:
            shape, dt = e["input_sizes"][0], e["input_dtypes"][0]
        n = 1
        for d in shape:
            n *= d
        assert row["count"] == n and row["msg_bytes"] == n * elem[dt], name
        if name.startswith("nccl:send"):
            dst = int(name.split("->")[1])
            assert row["op"] == "send" and row["peer_rank"] == ranks[dst]
        elif name.startswith("nccl:recv"):
            src = int(name.split("<-")[1])
            assert row["op"] == "recv" and row["peer_rank"] == ranks[src]
        else:
            assert row["peer_rank"] is None
    assert {"all_to_all", "all_gather", "reduce_scatter", "recv", "send"} <= set(ops["op"])


@pytest.mark.slow
def test_sample_folder_ingests_as_one_run(shared_samples: Path, tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store")
    results = ingest_paths(
        store, [shared_samples / "flight_recorder" / "nvrx_lock_gil_1st"], run_id="fr"
    )
    by_name = {Path(r.path).name: r for r in results}
    assert by_name["fault_injection.log"].status == STATUS_UNKNOWN
    dumps = [r for n, r in by_name.items() if n.startswith("_dump_")]
    assert len(dumps) == 16 and all(r.status == STATUS_OK for r in dumps)
    store.ensure_catalog()
    con = store.connect(read_only=True)
    try:
        q = (
            "SELECT count(*), count(comm_id), count(seq), count(call_state) FROM comm_ops "
            "WHERE source_format = 'flight_recorder'"
        )
        assert con.execute(q).fetchone() == (142, 142, 142, 142)
        q = "SELECT sum(lines_total), sum(lines_parsed) FROM ingested_files"
        assert con.execute(q).fetchone() == (142, 142)
        q = "SELECT count(*) FROM stg_store__comm_ops WHERE call_state = 'scheduled'"
        assert con.execute(q).fetchone() == (142,)
    finally:
        con.close()


# --------------------------------------------------------------------------- refused globals


class _Evil:
    def __init__(self, cmd: str) -> None:
        self.cmd = cmd

    def __reduce__(self) -> tuple[Any, ...]:
        import os

        return (os.system, (self.cmd,))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_malicious_pickle_is_refused_with_file_and_global_named(
    tmp_path: Path, protocol: int
) -> None:
    canary = tmp_path / "pwned"
    doc = {"version": "2.9", "pg_config": _pg_config(), "entries": [_Evil(f"touch {canary}")]}
    path = _write(tmp_path / "nccl_trace_rank_0", doc, protocol=protocol)
    assert b"system" in path.read_bytes()
    assert sniff(Source(path).head(), path) is load_all()["flight_recorder"]
    with pytest.raises(ParseError) as err:
        Parsed(path)
    msg = str(err.value)
    assert str(path) in msg
    assert "posix.system" in msg or "os.system" in msg
    assert not canary.exists()


def test_refused_global_is_never_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pickle naming a module that runs code on import: the module is never imported."""
    mod_dir = tmp_path / "mods"
    mod_dir.mkdir()
    canary = tmp_path / "imported"
    (mod_dir / "fr_canary_mod.py").write_text(
        f"open({str(canary)!r}, 'w').write('x')\ndef boom(*a):\n    return 1\n"
    )
    monkeypatch.syspath_prepend(str(mod_dir))
    body = b"\x80\x02}q\x00(X\x09\x00\x00\x00pg_configq\x01cfr_canary_mod\nboom\nq\x02)Rq\x03u."
    path = tmp_path / "_dump_3"
    path.write_bytes(body)
    with pytest.raises(ParseError, match=r"fr_canary_mod\.boom"):
        Parsed(path)
    assert "fr_canary_mod" not in sys.modules
    assert not canary.exists()


def test_ingest_reports_the_refused_pickle(tmp_path: Path) -> None:
    doc = {"version": "2.9", "pg_config": _pg_config(), "entries": [_Evil("true")]}
    path = _write(tmp_path / "in" / "nccl_trace_rank_1", doc)
    store = Store.open(tmp_path / "store")
    (res,) = ingest_paths(store, [path], run_id="r")
    assert res.status == STATUS_ERROR
    assert "system" in res.message and "refused" in res.message


# --------------------------------------------------------------------------- schema versions


def _doc(version: str | None, **top: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {} if version is None else {"version": version}
    doc.update(top)
    return doc


def _rows(path: Path, rank: int | None = None) -> tuple[Parsed, list[dict[str, Any]]]:
    got = Parsed(path, rank=rank)
    ops = got.get("comm_ops")
    return got, list(ops.iter_rows(named=True)) if ops.height else []


def test_version_2_9_given_expect(tmp_path: Path) -> None:
    doc = _doc(
        "2.9",
        pg_config=_pg_config(),
        nccl_version="2.27.3",
        pg_status={
            "1": {
                "last_enqueued_collective": 7,
                "last_started_collective": -1,
                "last_completed_collective": 6,
            }
        },
        entries=[
            _entry(),
            _entry(
                record_id=11,
                pg_id=2,
                process_group=("5", "PIPELINE_MODEL_PARALLEL_GROUP"),
                collective_seq_id=4,
                p2p_seq_id=12,
                profiling_name="nccl:send 1->0",
                input_sizes=[[2, 8]],
                input_dtypes=["Float"],
                is_p2p=True,
            ),
            _entry(
                record_id=12,
                collective_seq_id=8,
                profiling_name="nccl:_reduce_scatter_base",
                input_sizes=[[8, 10]],
                output_sizes=[[4, 10]],
                state="completed",
                duration_ms=1.5,
                time_discovered_started_ns=1_758_000_000_000_100_000,
                time_discovered_completed_ns=1_758_000_000_009_000_000,
            ),
        ],
    )
    got, rows = _rows(_write(tmp_path / "nccl_trace_rank_3", doc))
    assert [
        (
            r["source_line"], r["op"], r["comm_id"], r["group_size"], r["group_rank"],
            r["peer_rank"], r["seq"], r["count"], r["dtype"], r["msg_bytes"], r["call_state"],
            r["ts_ns"], r["dur_ns"], r["timing_source"], r["launch_ts_ns"], r["group_source"],
        )
        for r in rows
    ] == [
        (1, "all_reduce", "3", 2, 1, None, 7, 4096, "bfloat16", 8192, "scheduled",
         None, None, "none", 1_758_000_000_000_000_000, "pg_config"),
        (2, "send", "5", 2, 1, 1, 12, 16, "float32", 64, "scheduled",
         None, None, "none", 1_758_000_000_000_000_000, "pg_config"),
        (3, "reduce_scatter", "3", 2, 1, None, 8, 40, "bfloat16", 80, "completed",
         None, 1_500_000, "logged", 1_758_000_000_000_000_000, "pg_config"),
    ]  # fmt: skip
    meta = got.get("trace_meta").row(0, named=True)
    assert meta["rank"] == 3 and meta["rank_source"] == "file_name"
    assert meta["source_version"] == "2.9;pickle;2.27.3" and meta["world_size"] == 4
    assert meta["backend"] == "nccl"
    comms = got.get("communicators").sort("comm_id")
    assert comms.select("comm_id", "rank", "nranks", "global_rank").rows() == [
        ("0", 3, 4, 3),
        ("3", 1, 2, 3),
        ("5", 1, 2, 3),
    ]
    assert not got.warnings


def test_version_2_10_comm_lib_version_and_recv_peer(tmp_path: Path) -> None:
    doc = _doc(
        "2.10",
        pg_config=_pg_config(),
        comm_lib_version="2.28.3",
        pg_status={},
        entries=[
            _entry(
                profiling_name="nccl:recv 1<-0",
                process_group=("5", "PIPELINE_MODEL_PARALLEL_GROUP"),
                p2p_seq_id=3,
                output_sizes=[[6]],
                output_dtypes=["Long"],
                is_p2p=True,
            )
        ],
    )
    got, rows = _rows(_write(tmp_path / "_dump_3", doc, protocol=4))
    assert [(r["op"], r["peer_rank"], r["seq"], r["msg_bytes"], r["dtype"]) for r in rows] == [
        ("recv", 1, 3, 48, "int64")
    ]
    assert got.get("trace_meta")["source_version"].to_list() == ["2.10;pickle;2.28.3"]
    assert not got.warnings


def test_version_2_7_coalesced_end_marker_is_other(tmp_path: Path) -> None:
    base = {k: v for k, v in _entry().items() if k not in ("thread_name", "thread_id")}
    entries = [
        {**base, "profiling_name": "nccl:_all_gather_base", "collective_seq_id": 5,
         "input_sizes": [[10]], "output_sizes": [[20]]},
        {**base, "profiling_name": "nccl:_all_gather_base", "collective_seq_id": 5,
         "input_sizes": [[30]], "output_sizes": [[60]]},
        {**base, "profiling_name": "nccl:ALLGATHER_coalesced", "collective_seq_id": 5,
         "input_sizes": [], "output_sizes": [], "input_dtypes": [], "output_dtypes": []},
    ]  # fmt: skip
    doc = _doc("2.7", pg_config=_pg_config(), nccl_version="2.21.5", entries=entries)
    got, rows = _rows(_write(tmp_path / "nccl_trace_rank_2", doc))
    assert [(r["op"], r["seq"], r["msg_bytes"]) for r in rows] == [
        ("all_gather", 5, 20),
        ("all_gather", 5, 60),
        ("other", 5, 0),
    ]
    assert rows[2]["raw_op"] == "nccl:ALLGATHER_coalesced"
    assert not got.warnings


@pytest.mark.parametrize(("version", "trusted"), [("2.3", False), ("2.4", True), ("2.5", True)])
def test_all_to_all_sizes_from_2_4(tmp_path: Path, version: str, trusted: bool) -> None:
    """fr_trace: all_to_all sizes are not logged before 2.4; 2.5 carries frames (tutorial)."""
    base = {k: v for k, v in _entry().items() if k not in ("thread_name", "thread_id")}
    e = {**base, "profiling_name": "nccl:all_to_all", "input_sizes": [[16, 4]],
         "input_dtypes": ["Float"], "frames": [{"name": "f", "filename": "a.py", "line": 3}]}  # fmt: skip
    doc = _doc(version, pg_config=_pg_config(), pg_status={}, entries=[e])
    _, rows = _rows(_write(tmp_path / "nccl_trace_rank_2", doc))
    assert rows[0]["op"] == "all_to_all" and rows[0]["seq"] == 7
    assert rows[0]["msg_bytes"] == (256 if trusted else None)


def test_version_1_2_list_pg_config(tmp_path: Path) -> None:
    """Schema 1.2 wrote pg_config as a list, one rank list per group (position = name)."""
    e = {
        "record_id": 0,
        "pg_id": 1,
        "process_group": "1",
        "seq_id": 3,
        "collective_seq_id": 3,
        "p2p_seq_id": 0,
        "profiling_name": "nccl:broadcast",
        "time_created_ns": 1_700_000_000_000_000_000,
        "input_sizes": [[5]],
        "input_dtypes": ["Half"],
        "output_sizes": [[5]],
        "output_dtypes": ["Half"],
        "state": "completed",
    }
    doc = _doc("1.2", pg_config=[[0, 1, 2, 3], [1, 3]], entries=[e])
    got, rows = _rows(_write(tmp_path / "nccl_trace_rank_1", doc))
    assert [(r["op"], r["comm_id"], r["group_size"], r["group_rank"], r["seq"], r["msg_bytes"])
            for r in rows] == [("broadcast", "1", 2, 0, 3, 10)]  # fmt: skip
    assert got.get("trace_meta")["world_size"].to_list() == [None]


def test_json_form_of_dump_json(tmp_path: Path) -> None:
    """C++ dump_json: sorted keys, pg_status values as strings, time_discovered 0, lists."""
    e = _entry(process_group=["3", "TENSOR_MODEL_PARALLEL_GROUP"], state="started",
               time_discovered_started_ns=0, time_discovered_completed_ns=0)  # fmt: skip
    doc = _doc(
        "2.9",
        pg_config=_pg_config(),
        nccl_version="2.26.2",
        pg_status={
            "1": {
                "last_enqueued_collective": "7",
                "last_started_collective": "7",
                "last_completed_collective": "6",
            }
        },
        entries=[e],
    )
    path = _write(tmp_path / "_dump_2.json", doc, form="json")
    assert sniff(Source(path).head(), path) is load_all()["flight_recorder"]
    assert load_all()["kineto"].sniff(Source(path).head(), path) == 0
    got, rows = _rows(path)
    assert [(r["rank"], r["comm_id"], r["seq"], r["call_state"], r["msg_bytes"]) for r in rows] == [
        (2, "3", 7, "started", 8192)
    ]
    assert got.get("trace_meta")["source_version"].to_list() == ["2.9;json;2.26.2"]


def test_json_without_entries_is_an_empty_valid_dump(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "nccl_trace_rank_0.json",
        _doc("2.10", pg_config=_pg_config(), pg_status={}, comm_lib_version="2.28"),
        form="json",
    )
    got = Parsed(path)
    assert got.counts == LineCounts(0, 0, 0, 0)
    assert got.height("communicators") == 1  # rank 0 is only in the default group
    assert any("no entries key" in w for w in got.warnings)


def test_unknown_version_is_read_by_keys_with_a_warning(tmp_path: Path) -> None:
    doc = _doc("3.1", pg_config=_pg_config(), entries=[_entry()])
    got, rows = _rows(_write(tmp_path / "_dump_3", doc))
    assert [(r["op"], r["seq"], r["call_state"]) for r in rows] == [("all_reduce", 7, "scheduled")]
    assert any("'3.1'" in w for w in got.warnings)


@pytest.mark.parametrize(
    ("name", "doc_rank", "option", "want"),
    [
        ("nccl_trace_rank_12", None, None, (12, "file_name")),
        ("_dump_7.json", None, None, (7, "file_name")),
        ("trace.pkl", None, 5, (5, "option")),
        ("trace.pkl", None, None, (None, "unknown")),
        ("_dump_4", 9, None, (9, "dump_key")),
    ],
)
def test_rank_sources(
    tmp_path: Path, name: str, doc_rank: int | None, option: int | None, want: tuple[Any, str]
) -> None:
    doc = _doc("2.9", pg_config=_pg_config(), entries=[_entry()])
    if doc_rank is not None:
        doc["rank"] = doc_rank
    form = "json" if name.endswith(".json") else "pickle"
    got = Parsed(_write(tmp_path / name, doc, form=form), rank=option)
    meta = got.get("trace_meta").row(0, named=True)
    assert (meta["rank"], meta["rank_source"]) == want
    assert got.get("comm_ops")["rank"].to_list() == [want[0]]
    if want[1] in ("unknown", "dump_key"):
        assert got.warnings


# --------------------------------------------------------------------------- bad values


def test_bad_values_cost_the_value_not_the_entry(tmp_path: Path) -> None:
    entries: list[Any] = [
        _entry(collective_seq_id="x7"),
        _entry(collective_seq_id=-3),
        _entry(input_sizes=[[4, "a"]]),
        _entry(input_sizes=[[2**40, 2**40]]),  # 2**80 elements: past int64
        _entry(state="exploded"),
        _entry(time_created_ns=2**70),
        _entry(duration_ms=float("nan"), state="completed"),
        _entry(input_dtypes=["NewType"]),
        _entry(profiling_name="nccl:send 1->9", is_p2p=True, p2p_seq_id=1),  # peer outside
        _entry(process_group=42),
        "not a dict",
        _entry(profiling_name=None),
        _entry(profiling_name="nccl:"),
    ]
    doc = _doc("2.9", pg_config=_pg_config(), entries=entries)
    got, rows = _rows(_write(tmp_path / "nccl_trace_rank_3", doc))
    assert got.counts == LineCounts(total=13, parsed=10, ignored=0, rejected=3)
    rej = got.get("rejects")
    assert rej["line_no"].to_list() == [11, 12, 13]
    by = {r["source_line"]: r for r in rows}
    assert by[1]["seq"] is None and by[2]["seq"] is None
    assert by[3]["msg_bytes"] is None and by[3]["count"] is None
    assert by[4]["msg_bytes"] is None and by[4]["count"] is None
    assert by[5]["call_state"] is None
    assert by[6]["launch_ts_ns"] is None
    assert by[7]["dur_ns"] is None and by[7]["timing_source"] == "none"
    assert by[8]["count"] == 4096 and by[8]["msg_bytes"] is None and by[8]["dtype"] == "newtype"
    assert by[9]["op"] == "send" and by[9]["peer_rank"] is None
    assert by[10]["comm_id"] is None and by[10]["group_size"] is None
    text = "\n".join(got.warnings)
    for what in ("collective_seq_id", "input_sizes", "state", "time_created_ns", "duration_ms",
                 "p2p peer outside its group", "process_group"):  # fmt: skip
        assert what in text, what


@pytest.mark.parametrize("cut", [1, 2, 30, -1])
def test_cut_or_foreign_pickles_are_parse_errors_naming_the_file(tmp_path: Path, cut: int) -> None:
    data = pickle.dumps(_doc("2.9", pg_config=_pg_config(), entries=[_entry()]), protocol=2)
    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(data[:cut])
    with pytest.raises(ParseError) as err:
        Parsed(path)
    assert str(path) in str(err.value)


def test_a_pickle_that_is_no_dump_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(pickle.dumps([1, 2, 3], protocol=2))
    with pytest.raises(ParseError, match="not a Flight Recorder dump"):
        Parsed(path)
    # a generic pickle without FR keys or an FR-like name is not claimed
    other = tmp_path / "model.bin"
    other.write_bytes(pickle.dumps({"weights": [1.0]}, protocol=4))
    assert load_all()["flight_recorder"].sniff(Source(other).head(), other) == 0


def test_protocol_2_bytes_and_sets_are_plain_values(tmp_path: Path) -> None:
    """Python's protocol 2 writes bytes/set as calls (_codecs.encode, set): read by stand-ins."""
    e = _entry(thread_name=b"python3", extra={1, 2}, frozen=frozenset({3}), empty=b"")
    path = _write(tmp_path / "_dump_2", _doc("2.9", pg_config=_pg_config(), entries=[e]))
    data = path.read_bytes()
    assert b"_codecs" in data and b"set" in data
    _, rows = _rows(path)
    assert [(r["op"], r["seq"]) for r in rows] == [("all_reduce", 7)]
    # the stand-ins accept only what the pickler writes: other arguments are refused
    bad = tmp_path / "_dump_3"
    bad.write_bytes(b"\x80\x02c_codecs\nencode\nX\x01\x00\x00\x00aX\x05\x00\x00\x00rot13\x86R.")
    with pytest.raises(ParseError, match="corrupt pickle"):
        Parsed(bad)


def test_lone_surrogates_in_pickled_strings_become_replacement_text(tmp_path: Path) -> None:
    """Pickle strings may hold lone surrogates (surrogatepass); Arrow stores only UTF-8."""
    cfg = {"3\udc00": {"name": "3\udc00", "desc": "x\ud800", "ranks": "[0, 1]"}}
    e = _entry(profiling_name="nccl:all_reduce\ud800", process_group=("3\udc00", "x"),
               input_dtypes=["Float\ud800"])  # fmt: skip
    doc = _doc("2.9\ud800", pg_config=cfg, entries=[e, "junk\ud800"])
    got, rows = _rows(_write(tmp_path / "nccl_trace_rank_1", doc))
    assert got.counts == LineCounts(total=2, parsed=1, ignored=0, rejected=1)
    (r,) = rows
    assert (r["raw_op"], r["comm_id"], r["group_size"], r["dtype"]) == (
        "nccl:all_reduce?",
        "3?",
        2,
        "float?",
    )
    assert got.get("communicators")["comm_id"].to_list() == ["3?"]


def test_deep_nesting_and_too_many_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 100,000-deep entry is one bounded reject; past MAX_ENTRIES the file is refused."""
    deep: list[Any] = []
    cur = deep
    for _ in range(100_000):
        nxt: list[Any] = []
        cur.append(nxt)
        cur = nxt
    path = tmp_path / "nccl_trace_rank_0"
    head = pickle.dumps(_doc("2.9", pg_config=_pg_config(), entries=[_entry()]), protocol=4)
    # build the deep list with opcodes (pickle.dumps itself recurses): EMPTY_LIST, then
    # 100,000 x (EMPTY_LIST), then 100,000 x APPEND, as the entries' second item
    body = b"]" + b"]" * 100_000 + b"a" * 100_000
    assert head.endswith(b"a\x94u.") or head.endswith(b"au.")
    cut = head.rindex(b"a")  # the APPEND that puts the one entry in the list
    path.write_bytes(head[:cut] + b"a" + body + b"a" + head[cut + 1 :])
    got = Parsed(path)
    assert got.counts == LineCounts(total=2, parsed=1, ignored=0, rejected=1)
    assert len(got.get("rejects")["raw"][0]) < 400
    monkeypatch.setattr("commscope.parsers.flight_recorder._dump.MAX_ENTRIES", 1)
    with pytest.raises(ParseError, match="more than 1: not read"):
        Parsed(path)


# --------------------------------------------------------------------------- a real GPU run

GPU_RUN = "gpu_nccl_tp2_dp2_1gpu"


def _comm_ops(fmt: str, path: Path) -> pl.DataFrame:
    frames = [
        ch.tables["comm_ops"]
        for ch in load_all()[fmt].parse(Source(path), run_id="t")
        if "comm_ops" in ch.tables
    ]
    return pl.concat(frames, how="diagonal_relaxed")


@pytest.mark.parametrize("rank", range(4))
def test_real_gpu_dump_agrees_with_the_kineto_trace_of_the_same_calls(
    sample_traces: Path, rank: int
) -> None:
    """Oracle: the same job's Kineto trace (kernels). Each profiled call is matched to the
    FR entry enqueued at its CPU launch; group name, op and size agree, and FR's duration_ms
    (CUDA events around the collective) is the kernel's duration plus a few microseconds,
    never less: a GPU time, not a CPU one."""
    run = sample_traces / GPU_RUN
    kin = _comm_ops("kineto", run / "kineto" / f"rank{rank}.pt.trace.json.gz")
    fr = _comm_ops("flight_recorder", run / "flight_recorder" / f"nccl_trace_rank_{rank}")
    assert fr.height == 81 and kin.height == 54
    fr_json = _comm_ops("flight_recorder", run / "flight_recorder" / f"rank{rank}.json")
    assert fr_json.equals(fr)  # the JSON form gives the same rows as the pickle
    kin = kin.sort("launch_ts_ns")
    right = fr.select(
        "launch_ts_ns",
        pl.col("launch_ts_ns").alias("created"),
        pl.col("comm_id").alias("fr_comm"),
        pl.col("op").alias("fr_op"),
        pl.col("msg_bytes").alias("fr_bytes"),
        pl.col("dur_ns").alias("fr_dur"),
        pl.col("timing_source").alias("fr_timing"),
    ).sort("launch_ts_ns")
    j = kin.join_asof(right, on="launch_ts_ns", strategy="nearest")
    assert (j["created"] - j["launch_ts_ns"]).abs().max() < 1_000_000  # < 1 ms apart
    assert j["fr_comm"].to_list() == j["comm_id"].to_list()
    assert j["fr_op"].to_list() == j["op"].to_list()
    assert j["fr_bytes"].to_list() == j["msg_bytes"].to_list()
    assert set(j["fr_timing"]) == {"logged"} and set(j["timing_source"]) == {"kernel"}
    extra = j["fr_dur"] - j["dur_ns"]
    assert extra.min() >= 0 and extra.max() < 20_000, (extra.min(), extra.max())


def _fr_dumps(shared_samples: Path, sample_traces: Path) -> list[Path]:
    """Every real dump: the two nvrx runs (16 ranks each) and the bundled GPU hang (4)."""
    paths = [p for s in SCENARIOS for p in (shared_samples / "flight_recorder" / s).glob("_dump_*")]
    bundled = sample_traces / "gpu_nccl_hang_1gpu" / "flight_recorder"
    return sorted(paths) + sorted(bundled.glob("nccl_trace_rank_*"))


def test_group_descriptions_members_and_status_of_every_real_dump(
    shared_samples: Path, sample_traces: Path
) -> None:
    """Oracle (the opcode walker): per dump, each pg_config group holding the rank is one
    communicators row with the group's desc and sorted members; its counters are the dump's
    pg_status of the pg_id an entry of the group carries, or, for a group without entries,
    the pg_id of the same position (pg_status keys and group names both ascending)."""
    checked = {"entry": 0, "order": 0, None: 0}
    for path in _fr_dumps(shared_samples, sample_traces):
        rank = int(path.name.rsplit("_", 1)[1])
        raw = oracle_load(path.read_bytes())
        comms = Parsed(path).get("communicators")
        got = {r["comm_id"]: r for r in comms.iter_rows(named=True)}
        want = {
            name: cfg for name, cfg in raw["pg_config"].items() if rank in json.loads(cfg["ranks"])
        }
        assert set(got) == set(want), path
        by_entry = {e["process_group"][0]: e["pg_id"] for e in raw["entries"]}
        by_order = dict(
            zip(
                sorted(raw["pg_config"], key=int),
                sorted(map(int, raw["pg_status"])),
                strict=True,
            )
        )
        for name, cfg in want.items():
            row = got[name]
            members = sorted(json.loads(cfg["ranks"]))
            assert row["group_desc"] == cfg["desc"]
            assert row["group_ranks"] == ",".join(map(str, members))
            assert (row["rank"], row["nranks"], row["global_rank"]) == (
                members.index(rank),
                len(members),
                rank,
            )
            how = row["seq_status_source"]
            pg_id = by_entry[name] if how == "entry" else by_order[name]
            st = raw["pg_status"][str(pg_id)]
            assert (how == "entry") == (name in by_entry), (path, name)
            assert row["last_enqueued_seq"] == st["last_enqueued_collective"]
            assert row["last_started_seq"] == st["last_started_collective"]
            assert row["last_completed_seq"] == st["last_completed_collective"]
            checked[how] += 1
    # 36 dumps, 420 (group, rank) rows, every one with pg_status counters: 158 tied to their
    # group by an entry, 262 (groups the dump holds no entry of) by creation order
    assert checked == {"entry": 158, "order": 262, None: 0}
