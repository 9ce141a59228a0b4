"""Individual-ranking (IR) microaggregation, Spark-free (docs/specification.md §1; Del Vasto-Terrientes et al. (ICISSP 2025) Alg. 1).

Per attribute, independently: sort the n values ascending, cut the ranks into
``c = max(n // k, 1)`` clusters of k consecutive ranks, the remainder ``n mod k`` joining the last
cluster (size k .. 2k-1; n < 2k gives one cluster), and replace every value by its cluster's
centroid (arithmetic mean). Ties are ordered by a deterministic tie-break key (the record id).

These functions are the numpy reference that the Spark job must match exactly; the Spark job uses
:func:`cluster_count`, the cluster cut (:func:`cluster_cut`, ``min(rank // k, c - 1)``) and :func:`ir_order`
(the exact packed sort) inside each bucket.
"""
from __future__ import annotations

import numpy as np

from fragrelease.errors import InvalidParameterError


def check_k(k: int, n: int | None = None, *, minimum: int = 1) -> int:
    """Validate the cluster size k.

    Parameters
    ----------
    k : int
        Minimum cluster size; must be an integer in [minimum, n].
    n : int, optional
        Number of records; when given, k > n is refused.
    minimum : int
        Smallest k allowed (1 for plain iDP, 3 for fragmented releases, Del Vasto-Terrientes et al. (ICISSP 2025) §4.2).

    Raises
    ------
    InvalidParameterError
        If k is not an integer, k < minimum or k > n.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise InvalidParameterError(f"k must be an integer, not {k!r}")
    if k < minimum:
        raise InvalidParameterError(f"k must be >= {minimum}, not {k}")
    if n is not None and k > n:
        raise InvalidParameterError(f"k must be <= the number of records n = {n}, not {k}")
    return int(k)


def cluster_count(n: int, k: int) -> int:
    """Number of IR clusters, ``max(n // k, 1)`` (n ≥ 1, k ≥ 1)."""
    if n < 1:
        raise InvalidParameterError(f"n must be >= 1, not {n}")
    check_k(k)
    return max(n // k, 1)


def cluster_cut(rank, k: int, c: int):
    """The cluster cut: cluster index (0-based) of each 0-based rank, ``min(rank // k, c - 1)``.

    ``rank`` an int or an int array of any shape (the same shape out); ``k`` the cluster size the
    mechanism uses, ``c`` the cluster count (:func:`cluster_count`). The one definition of the rule:
    the numpy reference and every Spark task (bucket sort, centroid routing, value mapping) call it.
    """
    return np.minimum(np.asarray(rank) // k, c - 1)


def cluster_of_rank(rank: np.ndarray, n: int, k: int) -> np.ndarray:
    """Cluster index (0-based) of each 0-based rank of n sorted values: :func:`cluster_cut` with c = :func:`cluster_count`."""
    return cluster_cut(rank, k, cluster_count(n, k))


def cluster_bounds(n: int, k: int) -> list[tuple[int, int]]:
    """Half-open rank ranges [start, end) of the IR clusters of n sorted values."""
    c = cluster_count(n, k)
    starts = [i * k for i in range(c)] + [n]
    return list(zip(starts[:-1], starts[1:], strict=False))


#: ``sort`` choices of :func:`ir_order`: ``packed`` (packed 64-bit keys, the default) or ``lexsort``
#: (numpy's ``lexsort``/stable ``argsort``, the reference the packed sort is tested against).
SORTS = ("packed", "lexsort")
_SIGN = np.uint64(1 << 63)


def _ordered_bits(values: np.ndarray) -> np.ndarray | None:
    """Unsigned 64-bit keys in the same order as ``values`` (``u[i] < u[j]`` iff ``values[i] < values[j]``).

    Floats: ``-0.0`` becomes ``0.0`` first (numpy compares them equal, so they stay a tie resolved by
    the tie-break), then the usual transform (negatives: all bits flipped; others: the sign bit set).
    Integers: the sign bit flipped. ``None`` for NaN (unordered) or another dtype: the caller falls back.
    """
    if values.dtype.kind == "f":
        x = values.astype(np.float64, copy=False)
        if np.isnan(x).any():
            return None
        bits = (x + 0.0).view(np.int64)  # x + 0.0 turns -0.0 into +0.0 and leaves every other value alone
        flip = bits >> 63  # arithmetic shift: all ones for negatives, 0 otherwise
        flip |= np.int64(-(1 << 63))  # negatives: flip every bit; others: set the sign bit
        bits ^= flip
        return bits.view(np.uint64)
    if values.dtype.kind in "iu" and values.dtype.itemsize <= 8:
        if values.dtype.kind == "u":
            return values.astype(np.uint64, copy=False)
        return values.astype(np.int64, copy=False).view(np.uint64) ^ _SIGN
    return None


def _packed_order(u: np.ndarray, second: np.ndarray | None = None) -> np.ndarray:
    """The permutation sorting ``u`` (uint64) ascending, ties by ``second`` (default: the position), exactly.

    ``second`` must be a permutation of ``0 .. n-1`` (ranks of the tie-break). Each entry becomes one
    uint64 ``prefix << b | second`` (``b`` = bits of ``n - 1``; ``prefix`` the top ``64 - b`` bits of
    ``u - min(u)``) sorted by ``np.sort`` (several times faster than ``argsort``). When the prefix drops
    low bits of ``u``, runs of equal prefix whose full ``u`` differ (near-ties such as adjacent
    floats, found by one gather of ``u`` into the sorted order) are sorted again by ``(u, second)``
    with ``lexsort``, so the result equals
    ``np.lexsort((second, u))`` always.
    """
    n = u.size
    if n == 0:
        return np.empty(0, dtype=np.int64)
    idx_bits = max(1, int(n - 1).bit_length())
    lo = u.min()
    span = int(u.max() - lo)
    shift = max(0, span.bit_length() - (64 - idx_bits))
    packed = u - lo
    if shift:
        packed >>= np.uint64(shift)
    packed <<= np.uint64(idx_bits)
    packed |= np.arange(n, dtype=np.uint64) if second is None else second.astype(np.uint64)
    packed.sort()
    rank = packed & np.uint64((1 << idx_bits) - 1)  # ``second`` in sorted order
    if second is None:
        order = rank.view(np.int64)
    else:
        where = np.empty(n, dtype=np.int64)
        where[second] = np.arange(n, dtype=np.int64)  # position of each rank of ``second``
        order = where[rank.view(np.int64)]
    if shift:  # distinct values the prefix cannot tell apart (rare): one gather finds them, no second sort
        prefix = packed >> np.uint64(idx_bits)
        su = u[order]
        same = prefix[1:] == prefix[:-1]
        near = same & (su[1:] != su[:-1])
        if near.any():
            group = np.concatenate(([0], np.cumsum(~same)))
            bad = np.unique(group[1:][near])
            rows = np.flatnonzero(np.isin(group, bad))
            fix = np.lexsort((rank[rows], su[rows], group[rows]))
            order[rows] = order[rows][fix]
    return order


def _near_ties(u: np.ndarray, lo: np.uint64, shift: int) -> bool:
    """Whether two distinct keys of ``u`` share their prefix ``(u - lo) >> shift``, by a sort of ``u``.

    A check independent of :func:`_packed_order`'s own (which gathers ``u`` into its sorted order):
    the tests use it to show that their inputs reach the fix-up."""
    su = np.sort(u)
    distinct = su[1:] != su[:-1]
    su -= lo
    su >>= np.uint64(shift)
    return bool((distinct & (su[1:] == su[:-1])).any())


def ir_order(values: np.ndarray, tiebreak: np.ndarray | None = None, *, sort: str = "packed") -> np.ndarray:
    """Indices that sort ``values`` ascending, ties by ``tiebreak`` ascending, then by position (stable).

    ``sort="lexsort"`` is numpy's ``lexsort((tiebreak, values))`` (stable ``argsort`` without a
    tie-break); ``sort="packed"`` returns the same permutation from sorts of packed 64-bit keys
    (:func:`_packed_order`): first the tie-break's order, unless it is already ascending, then the
    values' order with the tie-break's rank in the low bits. Shapes: ``values`` and ``tiebreak``
    (n,), numeric; returns (n,) int64. NaN values, or dtypes without a 64-bit order, take ``lexsort``.

    Raises
    ------
    InvalidParameterError
        Unknown ``sort``, or ``tiebreak`` of another length.
    """
    if sort not in SORTS:
        raise InvalidParameterError(f"sort must be one of {SORTS}, not {sort!r}")
    values = np.asarray(values)
    tb = None if tiebreak is None else np.asarray(tiebreak)
    if tb is not None and tb.shape != values.shape:
        raise InvalidParameterError(f"tiebreak has shape {tb.shape}, values {values.shape}")
    u = _ordered_bits(values) if sort == "packed" and values.ndim == 1 else None
    tu = None if tb is None or u is None else _ordered_bits(tb)
    if u is None or (tb is not None and tu is None):
        if tb is None:
            return np.argsort(values, kind="stable")
        return np.lexsort((tb, values))
    if tu is None or bool(np.all(tu[1:] >= tu[:-1])):
        return _packed_order(u)  # no tie-break, or one already ascending: the position orders ties
    by_tie = _packed_order(tu)  # stable order of the tie-break
    rank = np.empty(u.size, dtype=np.int64)
    rank[by_tie] = np.arange(u.size, dtype=np.int64)
    return _packed_order(u, rank)


def ir_clusters(values: np.ndarray, k: int, tiebreak: np.ndarray | None = None, *, sort: str = "packed") -> np.ndarray:
    """Cluster index of every value, in the values' original order.

    Parameters
    ----------
    values : array of shape (n,)
        One attribute's values (numeric, or categorical frequency ranks).
    k : int
        Minimum cluster size (≥ 1, ≤ n).
    tiebreak : array of shape (n,), optional
        Ordering of equal values (the record id); default: original position.
    sort : "packed" or "lexsort"
        How :func:`ir_order` sorts; both give the same clusters.

    Returns
    -------
    array of int, shape (n,): cluster index in [0, c), where c = max(n // k, 1).
    """
    values = np.asarray(values)
    n = len(values)
    check_k(k, n)
    order = ir_order(values, tiebreak, sort=sort)
    clusters = np.empty(n, dtype=np.int64)
    clusters[order] = cluster_of_rank(np.arange(n), n, k)
    return clusters


def ir_centroids(values: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """Centroid (mean) of every cluster, indexed by cluster id; shape (c,)."""
    values = np.asarray(values, dtype=float)
    clusters = np.asarray(clusters)
    sums = np.bincount(clusters, weights=values)
    counts = np.bincount(clusters)
    return sums / counts
