"""How many times a catalog query reads the store's Parquet: at most what main read before the
narrow classified and lane calls (issue 21 item 3).

In the DuckDB catalog of a store that was ingested but not derived every intermediate is a live
view, and DuckDB inlines a view once per reference, so a view that reads another twice doubles
everything under it. i21-derive7 (5bc080c) made ``int_comm_ops_classified`` the shapes joined to
the shaped calls, which joined the shapes again: a query of ``int_calls`` on an underived run
inlined the classification many times (114 s and 20,000 open files for a small MoE run; reverted
in abdb5ee). Here every ``READ_PARQUET`` node of the optimised plan of ``SELECT count(*) FROM
<view>`` is counted (``EXPLAIN (FORMAT JSON)`` through :meth:`Store.connect`; deterministic: the
plan's shape does not depend on the rows) and bounded by main's count.

Main's counts (1fe1738, before the narrow calls came back) are this module run as a script with
main's code on the same store (``PYTHONPATH= /work/main/.venv/bin/python
tests/pipeline/test_catalog_fanout.py VIEW ...``; the counts are the same on stores of
gpu_nccl_pp2ep2_1gpu and gpu_nccl_tp2_dp2_1gpu): ``int_comm_ops_classified`` 174,
``int_p2p_groups`` 174, ``int_instance_lane_calls`` 582, ``int_calls`` 1078. The reverted
i21-derive7 tree (5bc080c): 356, 356, 938 (``int_calls`` not measured: its plan alone took
minutes). This branch: 134, 134, 542, 838 (``int_comm_op_shapes`` 126, ``int_comm_ops_shaped`` 8).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from commscope.pipeline.ingest import ingest_paths
from commscope.pipeline.store import Store
from commscope.resources import sample_traces_dir

MAIN_1FE1738 = {
    "int_comm_ops_classified": 174,
    "int_p2p_groups": 174,
    "int_instance_lane_calls": 582,
    "int_calls": 1078,
}
"""READ_PARQUET nodes per view on main 1fe1738 (module docstring)."""

FAST = {
    # the shapes and the shaped calls read neither each other nor anything twice: the calls
    # (stg_store__comm_ops: 8 nodes, the canonical comm_ops three times, communicators once,
    # ingested_files four times) and the classification's inputs once each
    "stg_store__comm_ops": 8,
    "int_comm_ops_shaped": 8,
    # the calls' distinct shapes, unclassified (session 12): the lane and the sequencing read
    # them instead of the classification
    "int_comm_op_shape_keys": 8,
    "int_comm_op_shapes": MAIN_1FE1738["int_comm_ops_classified"] - 8,
    "int_comm_ops_classified": MAIN_1FE1738["int_comm_ops_classified"],
    "int_p2p_groups": MAIN_1FE1738["int_p2p_groups"],
}
"""Bounds of the views checked in the quick loop (EXPLAIN of each well under a second)."""


def read_parquet_nodes(con: duckdb.DuckDBPyConnection, view: str) -> int:
    """READ_PARQUET nodes in the optimised physical plan of ``SELECT count(*) FROM view``."""
    plan = json.loads(
        con.execute(f"EXPLAIN (FORMAT JSON) SELECT count(*) FROM {view}").fetchall()[0][1]
    )

    def count(node: dict[str, Any]) -> int:
        own = node.get("extra_info", {}).get("Function") == "READ_PARQUET"
        return int(own) + sum(count(c) for c in node.get("children", []))

    return sum(count(n) for n in plan)


def underived_catalog(folder: Path) -> duckdb.DuckDBPyConnection:
    """The catalog of a new store in ``folder`` holding one bundled sample run, ingested and
    never derived (every intermediate a live view)."""
    store = Store.open(folder / "store")
    run = sample_traces_dir() / "gpu_nccl_hang_1gpu"
    ingest_paths(store, [run], run_id="r", build_catalog=False)
    return store.connect(read_only=True)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    """:func:`underived_catalog` in a temporary folder."""
    con = underived_catalog(tmp_path_factory.mktemp("fanout"))
    yield con
    con.close()


def test_classified_calls_read_the_store_no_more_than_before(
    catalog: duckdb.DuckDBPyConnection,
) -> None:
    got = {view: read_parquet_nodes(catalog, view) for view in FAST}
    assert {v: n for v, n in got.items() if n > FAST[v]} == {}, got


@pytest.mark.slow  # EXPLAIN of these deep chains takes 10-40 s on this 2-core machine
@pytest.mark.parametrize("view", ["int_instance_lane_calls", "int_calls"])
def test_lane_calls_and_calls_read_the_store_no_more_than_before(
    catalog: duckdb.DuckDBPyConnection, view: str
) -> None:
    assert read_parquet_nodes(catalog, view) <= MAIN_1FE1738[view]


if __name__ == "__main__":  # the counts of the views named, with the commscope installed
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        con = underived_catalog(Path(tmp))
        for name in sys.argv[1:]:
            print(name, read_parquet_nodes(con, name), flush=True)
        con.close()
