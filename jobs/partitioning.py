"""One task per small integer key: rows with ``column`` = v go to shuffle partition v, exactly.

``df.repartition(m, column)`` places a row by ``pmod(murmur3(column, seed 42), m)``, and for keys
0 .. m-1 that collides badly: for m = 2 both keys 0 and 1 land in partition 1 (one task does all
the work), for m = 10 the attributes 0 .. 9 fill only 7 partitions, and a later ``groupBy`` may
also be coalesced by adaptive execution into fewer tasks than cores. :func:`spread` instead adds a
*slot* column whose hash is known to land on partition v (a salt picked for each v from
:func:`murmur3_int`, Spark's ``Murmur3_x86_32.hashInt``), repartitions by it to m partitions (a
shuffle with an explicit partition count, which adaptive execution keeps), and returns the column
to group by with the key so no second shuffle runs. DataFrame API only (works under Spark
Connect and with every supported pyspark); the salts depend on m alone (public).
"""
from __future__ import annotations

from functools import lru_cache

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

SLOT = "__slot"
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def murmur3_int(value: int, seed: int = 42) -> int:
    """Spark's ``hash()`` of a 32-bit int (``Murmur3_x86_32.hashInt(value, seed)``), as a signed int32.

    The partition of a row in ``repartition(m, c)`` for an int column c is ``murmur3_int(c) mod m``
    (non-negative modulo). Checked against Spark's ``F.hash`` in tests/jobs/test_partitioning.py.
    """
    k1 = (value & _M32) * 0xCC9E2D51 & _M32
    k1 = _rotl(k1, 15) * 0x1B873593 & _M32
    h1 = _rotl((seed & _M32) ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & _M32
    h1 ^= 4  # the input length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _M32
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _M32
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


@lru_cache(maxsize=64)
def partition_salts(parts: int) -> tuple[int, ...]:
    """For each partition v in [0, parts), the smallest int s >= 0 with ``murmur3_int(s) mod parts == v``."""
    if parts < 1:
        raise ValueError(f"parts must be >= 1, not {parts}")
    salts: dict[int, int] = {}
    s = 0
    while len(salts) < parts:
        salts.setdefault(murmur3_int(s) % parts, s)
        s += 1
    return tuple(salts[v] for v in range(parts))


def spread(df: DataFrame, column: str, parts: int) -> tuple[DataFrame, str]:
    """``df`` with a slot column, shuffled so rows with ``column`` = v (an int in [0, parts)) are in partition v.

    Returns ``(frame, slot)``: group by ``(slot, column)`` afterwards (``frame.groupBy(slot, column)``)
    so the grouping reuses this partitioning instead of shuffling again; the slot column is in the
    frame (drop it or ignore it downstream). ``parts`` = 1 adds the column and no shuffle of its own.
    ``column`` must hold only ints in [0, parts); any other value is a programming error (ANSI mode
    raises on it; without ANSI its slot is null and its rows share one partition).
    """
    if parts == 1:  # one key: the grouping's own shuffle (no plan-wide single partition)
        return df.withColumn(SLOT, F.lit(0)), SLOT
    salts = partition_salts(parts)
    slot = F.element_at(F.array(*[F.lit(s) for s in salts]), F.col(column).cast("int") + 1)
    return df.withColumn(SLOT, slot).repartition(parts, SLOT), SLOT
