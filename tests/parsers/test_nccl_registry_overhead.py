"""Per-incarnation overhead of the NCCL parser (issue 21, item 1), checked structurally.

* the resume fingerprints of ``communicators``/``topology`` rows, written column-wise in
  Polars (:func:`frames._fingerprints`), are the hashes the row-by-row JSON encoder gives
  (:func:`frames._fingerprint`), for plain strings, strings JSON escapes, nulls and integers;
* the cyclic garbage collector is held off while the registry is built and rows are emitted
  (its full collections walked every live object, a cost growing with the incarnations), never
  across a ``yield``, and its state is restored (nested pauses, a collector already off).
"""

from __future__ import annotations

import gc
import random
from pathlib import Path

import polars as pl
import pytest

import commscope.parsers.nccl_debug as nd
from commscope.parsers._io import Source
from commscope.parsers.nccl_debug import NcclDebugParser, frames
from commscope.parsers.nccl_debug.communicators import _Registry

_CHARS = ["a", "B", "0", " ", "/", "~", "[", "]", ":", '"', "\\", "é", "\n", "\t", "\x7f", "中"]


def _random_frame(rnd: random.Random, plain: bool) -> pl.DataFrame:
    n = rnd.randint(1, 30)
    chars = _CHARS[:9] if plain else _CHARS

    def text() -> str | None:
        if rnd.random() < 0.2:
            return None
        return "".join(rnd.choice(chars) for _ in range(rnd.randint(0, 8)))

    def number(bits: int) -> int | None:
        return None if rnd.random() < 0.2 else rnd.randint(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)

    return pl.DataFrame(
        {
            "zeta": pl.Series([text() for _ in range(n)], dtype=pl.Utf8),
            "host": pl.Series([text() for _ in range(n)], dtype=pl.Utf8),
            "rank": pl.Series([number(32) for _ in range(n)], dtype=pl.Int32),
            "Pid": pl.Series([number(64) for _ in range(n)], dtype=pl.Int64),
            "a_b": pl.Series([number(32) for _ in range(n)], dtype=pl.Int64),
        }
    )


@pytest.mark.parametrize("seed", range(20))
def test_columnwise_fingerprints_equal_the_row_encoder(seed: int) -> None:
    rnd = random.Random(seed)
    for plain in (True, False):
        df = _random_frame(rnd, plain)
        want = [frames._fingerprint(r) for r in df.iter_rows(named=True)]
        assert frames._fingerprints(df) == want


def test_fingerprints_of_an_empty_frame() -> None:
    assert frames._fingerprints(pl.DataFrame({"a": pl.Series([], dtype=pl.Utf8)})) == []


def test_gc_paused_nests_and_restores() -> None:
    was = gc.isenabled()
    try:
        gc.enable()
        with nd.gc_paused():
            assert not gc.isenabled()
            with nd.gc_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the outer pause still holds
        assert gc.isenabled()
        gc.disable()  # a caller that runs without the collector keeps it off
        with nd.gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


_LOG = (
    "h:1:1 [0] NCCL INFO ncclCommInitRankConfig comm 0x10 rank 0 nranks 2 cudaDev 0 busId 1000 "
    "commId 0xab - Init START\n"
    "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
    "h:1:1 [0] NCCL INFO ncclCommInitRankConfig comm 0x10 rank 0 nranks 2 cudaDev 0 busId 1000 "
    "commId 0xab - Init COMPLETE\n"
    "h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 "
    "root 0 comm 0x10 [nranks=2] stream 0x3\n"
)


def test_parse_holds_the_collector_off_while_building_and_never_across_a_yield(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "nccl.log"
    path.write_text(_LOG)
    seen: list[bool] = []
    finalize = _Registry.finalize

    def spy(self: _Registry) -> None:
        seen.append(gc.isenabled())
        finalize(self)

    monkeypatch.setattr(_Registry, "finalize", spy)
    was = gc.isenabled()
    gc.enable()
    try:
        chunks = 0
        for chunk in NcclDebugParser().parse(Source(path), run_id="r"):
            assert gc.isenabled()  # the caller runs with its collector
            chunks += 1
            if "communicators" in chunk.tables:
                assert chunk.tables["communicators"].height == 1
        assert chunks >= 2 and seen == [False]
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_parse_freezes_its_objects_only_while_it_runs(tmp_path: Path) -> None:
    path = tmp_path / "nccl.log"
    path.write_text(_LOG)
    assert gc.get_freeze_count() == 0
    counts = [gc.get_freeze_count() for _ in NcclDebugParser().parse(Source(path), run_id="r")]
    assert counts and all(c > 0 for c in counts)  # frozen between the yields
    assert gc.get_freeze_count() == 0  # and given back at the end
    parse = NcclDebugParser().parse(Source(path), run_id="r")
    next(parse)
    assert gc.get_freeze_count() > 0
    parse.close()  # a caller that stops early gives the freeze back too
    assert gc.get_freeze_count() == 0


def test_parse_leaves_a_freeze_of_the_process_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "nccl.log"
    path.write_text(_LOG)
    gc.freeze()  # as a pre-fork server does
    try:
        calls: list[str] = []
        monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
        monkeypatch.setattr(gc, "unfreeze", lambda: calls.append("unfreeze"))
        chunks = list(NcclDebugParser().parse(Source(path), run_id="r"))
        assert chunks and calls == []
    finally:
        monkeypatch.undo()
        gc.unfreeze()


def test_parse_leaves_no_cyclic_garbage(tmp_path: Path) -> None:
    """Why holding the collector off is safe: a parse builds no reference cycles, so all it
    allocates is freed by reference counting (a cycle per block would pile up unfreed while
    the collector waits)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench.ingest_scale import interleaved_log

    path = interleaved_log(
        tmp_path / "incs.log", ranks=20, per_process=4, topo_per_inc=3, colls_per_inc=5
    )
    was, flags = gc.isenabled(), gc.get_debug()
    gc.collect()
    gc.disable()
    try:
        chunks = list(NcclDebugParser().parse(Source(path), run_id="r"))
        assert sum(c.tables["communicators"].height for c in chunks if "communicators" in c.tables)
        del chunks
        gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds unreachable stays readable
        gc.collect()
        # objects of the parser's or Polars' types in a cycle (another thread's garbage, if
        # any, is of other types)
        cyclic = [
            type(o).__qualname__
            for o in gc.garbage
            if type(o).__module__.startswith(("commscope", "polars"))
        ]
        assert cyclic == []
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
        (gc.enable if was else gc.disable)()
