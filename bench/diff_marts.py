"""Compare two sets of materialised marts (or intermediates), row for row: a perf change must not
change any result.

Usage (from the project root)::

    .venv/bin/python bench/diff_marts.py A_DIR B_DIR [--rel 1e-12]

Each directory holds ``<name>.parquet`` files (``bench_derive.py --keep DIR`` writes the marts of
its derive there). For every name in either directory: same columns with the same types, same
row count, and the same multiset of rows (``EXCEPT ALL`` both ways). Floating-point sums taken
in a different order may differ in the last bits, so rows that differ only in DOUBLE/FLOAT
columns are matched again after sorting on every column, each float compared within ``--rel``
(relative); the report says which names were equal exactly and which within the tolerance.
Exit status 1 when any name differs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import duckdb


def _cols(con: duckdb.DuckDBPyConnection, path: Path) -> list[tuple[str, str]]:
    rows = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()
    return [(str(r[0]), str(r[1])) for r in rows]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def compare(con: duckdb.DuckDBPyConnection, a: Path, b: Path, rel: float) -> str | None:
    """None when ``a`` and ``b`` hold the same rows, else why not ('~' prefix: equal within rel)."""
    ca, cb = _cols(con, a), _cols(con, b)
    if ca != cb:
        return f"columns differ: {ca} vs {cb}"
    na = con.execute(f"SELECT count(*) FROM read_parquet('{a}')").fetchone()
    nb = con.execute(f"SELECT count(*) FROM read_parquet('{b}')").fetchone()
    if na != nb:
        return f"row counts differ: {na} vs {nb}"
    diff = con.execute(
        f"SELECT (SELECT count(*) FROM (FROM read_parquet('{a}') EXCEPT ALL "
        f"FROM read_parquet('{b}'))), (SELECT count(*) FROM (FROM read_parquet('{b}') "
        f"EXCEPT ALL FROM read_parquet('{a}')))"
    ).fetchone()
    if diff == (0, 0):
        return None
    floats = [c for c, t in ca if t in ("DOUBLE", "FLOAT")]
    exact = [c for c, _ in ca if c not in floats]
    if not floats:
        return f"{diff[0]} rows only in A, {diff[1]} only in B"
    # pair rows by their exact columns, then by rank of the floats inside equal exact keys
    keys = ", ".join(_q(c) for c in exact) or "1"
    order = ", ".join(_q(c) for c in floats)

    def numbered(p: Path) -> str:
        return (
            f"SELECT *, row_number() OVER (PARTITION BY {keys} ORDER BY {order}) AS _k "
            f"FROM read_parquet('{p}')"
        )

    on = " AND ".join(
        [f"x.{_q(c)} IS NOT DISTINCT FROM y.{_q(c)}" for c in exact] + ["x._k = y._k"]
    )
    far = " OR ".join(
        f"NOT (x.{_q(c)} IS NOT DISTINCT FROM y.{_q(c)} OR abs(x.{_q(c)} - y.{_q(c)}) <= "
        f"{rel} * greatest(abs(x.{_q(c)}), abs(y.{_q(c)})))"
        for c in floats
    )
    bad = con.execute(
        f"SELECT count(*) FILTER (WHERE y._k IS NULL OR x._k IS NULL OR {far}) "
        f"FROM ({numbered(a)}) AS x FULL JOIN ({numbered(b)}) AS y ON {on}"
    ).fetchone()
    if bad and bad[0]:
        return f"{diff[0]} rows only in A, {diff[1]} only in B; {bad[0]} beyond rel {rel}"
    return f"~ equal within rel {rel} ({diff[0]} rows differ in float bits only)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--rel", type=float, default=1e-12)
    args = ap.parse_args()
    con = duckdb.connect()
    names = sorted(
        {p.stem for p in args.a.glob("*.parquet")} | {p.stem for p in args.b.glob("*.parquet")}
    )
    failed = 0
    for name in names:
        pa, pb = args.a / f"{name}.parquet", args.b / f"{name}.parquet"
        if not pa.is_file() or not pb.is_file():
            print(f"{name}: only in {'A' if pa.is_file() else 'B'}")
            failed += 1
            continue
        why = compare(con, pa, pb, args.rel)
        rows = con.execute(f"SELECT count(*) FROM read_parquet('{pa}')").fetchone()
        n = rows[0] if rows else 0
        if why is None:
            print(f"{name}: identical ({n} rows)")
        elif why.startswith("~"):
            print(f"{name}: {why} ({n} rows)")
        else:
            print(f"{name}: DIFFERS: {why}")
            failed += 1
    print(f"{len(names)} compared, {failed} differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
