"""logged_size_tolerance (sql/macros/logged_size_tolerance.sql) against DeepSpeed's own printing.

The oracle is DeepSpeed's ``convert_size`` (deepspeed/utils/comms_logging.py), copied here from
DeepSpeed's source rather than imported from the generator, and the parser's inverse
(``commscope.parsers._ds_sizes.size_to_bytes``): for every true size, the stored size must lie within the
macro's tolerance of it, and the tolerance must not be loose (some sizes come close to it).
"""

from __future__ import annotations

import math
import random

import duckdb
import pytest

from commscope.parsers._ds_sizes import size_to_bytes
from commscope.pipeline.sql_modules import SQL_DIR


def deepspeed_convert_size(size_bytes: int) -> str:
    """deepspeed.utils.comms_logging.convert_size, as in DeepSpeed's source."""
    if size_bytes == 0:
        return "0B"
    size_name = ("B", "KB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB")
    i = int(math.floor(math.log(size_bytes, 1024)))  # noqa: RUF046 (verbatim DeepSpeed)
    p = math.pow(1024, i)
    s = round(size_bytes / p, 2)
    return f"{s} {size_name[i]}"


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute((SQL_DIR / "macros" / "logged_size_tolerance.sql").read_text())
    return c


def _sizes() -> list[int]:
    rng = random.Random(17)
    out = [0, 1, 127, 1023, 1024, 1025, 2**20 - 1, 2**20, 2**20 + 1, 2**30 - 1, 2**30, 2**40 + 3]
    out += [131072000, 777492000, 100864000, 1000000000, 64724480, 672532000]  # model sizes
    for e in range(1, 45):  # every unit, random mantissas
        out += [rng.randrange(2 ** (e - 1), 2**e) for _ in range(200)]
    # just below a unit boundary: printed as 1024.0 of the smaller unit
    out += [1024**k - d for k in (2, 3, 4) for d in (1, 7, 1024 ** (k - 1) // 300)]
    return out


def test_stored_deepspeed_size_within_tolerance_of_the_true_size(
    con: duckdb.DuckDBPyConnection,
) -> None:
    sizes = _sizes()
    stored = [size_to_bytes(deepspeed_convert_size(s)) for s in sizes]
    assert None not in stored
    tol = [
        r[0]
        for r in con.execute(
            "SELECT logged_size_tolerance('deepspeed_comms', x) FROM unnest($xs) "
            "WITH ORDINALITY AS t(x, i) ORDER BY i",
            {"xs": stored},
        ).fetchall()
    ]
    worst = 0.0
    for true, got, t in zip(sizes, stored, tol, strict=True):
        assert got is not None
        assert abs(got - true) <= t, (true, deepspeed_convert_size(true), got, t)
        if t > 1:
            worst = max(worst, abs(got - true) / t)
    assert worst > 0.9  # the bound is tight: half a unit of the last printed digit


def test_table3_sizes_and_exact_sources(con: duckdb.DuckDBPyConnection) -> None:
    # APNet'24 Table 3: DP 741.47 MiB = 777,492,000 B, printed '741.47 MB'
    assert deepspeed_convert_size(777492000) == "741.47 MB"
    assert size_to_bytes("741.47 MB") == 777487647
    got = con.execute(
        "SELECT logged_size_tolerance('deepspeed_comms', 777487647), "
        "logged_size_tolerance('nccl_debug', 777487647), logged_size_tolerance(NULL, 5), "
        "logged_size_tolerance('deepspeed_comms', 0)"
    ).fetchone()
    assert got == (pytest.approx(0.005 * 2**20 + 0.5), 0.0, 0.0, 0.0)
