"""Counter-based random numbers: the same value for the same keys, in Python and in Polars.

Why: the generator simulates a run twice (once for the iteration boundaries, which couple all
ranks through the data-parallel all-reduce, once per lane to write the events) and in two
processes. A sequential RNG would make every draw depend on the order of everything drawn
before it; a counter-based one makes each draw a pure function of ``(seed, keys)``, so any
subset of ranks can be re-simulated and gives the same numbers. The mixer is SplitMix64
(Steele, Lea, Flood 2014) with wrapping 64-bit arithmetic, implemented once for Python ints
and once as Polars ``UInt64`` expressions (Polars integer arithmetic wraps), so both agree bit
for bit and do not depend on the Polars version (unlike ``Expr.hash``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import polars as pl

MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_TWO53 = float(1 << 53)
_SQRT3 = math.sqrt(3.0)

#: Stream tags: independent sequences for each kind of draw.
STREAM_COMPUTE = 1
STREAM_COMM = 2
STREAM_P2P = 3
STREAM_TAIL = 4
STREAM_MOE = 5
STREAM_SKEW = 6
STREAM_MISC = 7


def mix64(x: int) -> int:
    """SplitMix64 finaliser of one 64-bit value (Python ints, wrapping)."""
    z = (x + _GOLDEN) & MASK64
    z = ((z ^ (z >> 30)) * _M1) & MASK64
    z = ((z ^ (z >> 27)) * _M2) & MASK64
    return z ^ (z >> 31)


def key64(seed: int, keys: Iterable[int]) -> int:
    """Fold a seed and integer keys into one 64-bit state (each key mixed in turn)."""
    state = mix64(seed & MASK64)
    for k in keys:
        state = mix64((state ^ (int(k) & MASK64)) & MASK64)
    return state


def uniform(seed: int, *keys: int) -> float:
    """A uniform draw in [0, 1) for ``(seed, keys)``."""
    return (key64(seed, keys) >> 11) / _TWO53


def normalish(seed: int, *keys: int) -> float:
    """An approximately standard-normal draw (Irwin-Hall of 4 uniforms: mean 0, sd 1, |z| < 3.5).

    Bounded tails keep jittered durations positive for any sane relative spread.
    """
    base = key64(seed, keys)
    total = 0.0
    for i in range(4):
        total += (mix64((base + i) & MASK64) >> 11) / _TWO53
    return (total - 2.0) * _SQRT3


def jitter_factor(sigma: float, seed: int, *keys: int) -> float:
    """``1 + sigma * z`` with z from :func:`normalish`, floored at 0.05."""
    if sigma <= 0:
        return 1.0
    return max(0.05, 1.0 + sigma * normalish(seed, *keys))


# -- Polars ----------------------------------------------------------------------------------
# Each mixing round is materialised as a column: a nested expression would be a tree (not a DAG)
# of exponential size.

_U64 = pl.UInt64


def _mix_col(df: pl.DataFrame, col: str) -> pl.DataFrame:
    """Apply the SplitMix64 finaliser to UInt64 column ``col`` (same bits as :func:`mix64`)."""
    c = pl.col(col)
    df = df.with_columns((c + pl.lit(_GOLDEN, dtype=_U64)).alias(col))
    df = df.with_columns((c.xor(c // (1 << 30)) * pl.lit(_M1, dtype=_U64)).alias(col))
    df = df.with_columns((c.xor(c // (1 << 27)) * pl.lit(_M2, dtype=_U64)).alias(col))
    return df.with_columns(c.xor(c // (1 << 31)).alias(col))


def key_frame(
    df: pl.DataFrame, seed: int, keys: Iterable[str | int], out: str = "_key"
) -> pl.DataFrame:
    """Add column ``out``: the Polars twin of :func:`key64` over key columns (or constants)."""
    df = df.with_columns(pl.lit(mix64(seed & MASK64), dtype=_U64).alias(out))
    for k in keys:
        kk = pl.lit(int(k) & MASK64, dtype=_U64) if isinstance(k, int) else pl.col(k).cast(_U64)
        df = df.with_columns(pl.col(out).xor(kk).alias(out))
        df = _mix_col(df, out)
    return df


def normalish_frame(
    df: pl.DataFrame, seed: int, keys: Iterable[str | int], out: str = "z"
) -> pl.DataFrame:
    """Add column ``out``: the Polars twin of :func:`normalish`."""
    df = key_frame(df, seed, keys, "_key")
    parts = []
    for i in range(4):
        name = f"_u{i}"
        df = df.with_columns((pl.col("_key") + pl.lit(i, dtype=_U64)).alias(name))
        df = _mix_col(df, name)
        parts.append((pl.col(name) // (1 << 11)).cast(pl.Float64) / _TWO53)
    total = parts[0] + parts[1] + parts[2] + parts[3]
    df = df.with_columns(((total - 2.0) * _SQRT3).alias(out))
    return df.drop(["_key", "_u0", "_u1", "_u2", "_u3"])


def jitter_table(
    sigma: float,
    seed: int,
    prefix: tuple[int, ...],
    sizes: tuple[int, ...],
    first: list[int] | None = None,
) -> list[float]:
    """Jitter factors for every key tuple ``prefix + (i0, i1, ...)`` with ``i_d < sizes[d]``.

    Vectorised :func:`jitter_factor` over a grid (row-major, last index fastest): element
    ``((i0 * sizes[1]) + i1) * sizes[2] + ...`` equals ``jitter_factor(sigma, seed, *prefix,
    i0, i1, ...)``. With ``first``, the first key takes those values instead of
    ``range(sizes[0])`` (``sizes[0]`` is then ignored) and element ``(j * sizes[1] + i1) ...``
    belongs to ``first[j]``.
    """
    if first is not None:
        sizes = (len(first), *sizes[1:])
    total = 1
    for s in sizes:
        total *= s
    if sigma <= 0 or total == 0:
        return [1.0] * total
    df = pl.int_range(0, total, dtype=_U64, eager=True).alias("i").to_frame()
    names: list[str] = []
    stride = total
    for d, s in enumerate(sizes):
        stride //= s
        name = f"_d{d}"
        df = df.with_columns(((pl.col("i") // stride) % s).alias(name))
        names.append(name)
    if first is not None:
        lookup = pl.Series("_first", first, dtype=_U64)
        df = df.with_columns(lookup.gather(df["_d0"]).alias("_d0"))
    z = normalish_frame(df, seed, [*prefix, *names])["z"]
    return [max(0.05, 1.0 + sigma * v) for v in z.to_list()]
