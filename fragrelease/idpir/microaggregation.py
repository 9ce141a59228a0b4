"""Individual-ranking (IR) microaggregation, Spark-free (docs/specification.md §1; Del Vasto-Terrientes et al. (ICISSP 2025) Alg. 1).

Per attribute, independently: sort the n values ascending, cut the ranks into
``c = max(n // k, 1)`` clusters of k consecutive ranks, the remainder ``n mod k`` joining the last
cluster (size k .. 2k-1; n < 2k gives one cluster), and replace every value by its cluster's
centroid (arithmetic mean). Ties are ordered by a deterministic tie-break key (the record id).

These functions are the numpy reference that the Spark job must match exactly; the Spark job only
uses :func:`cluster_count` and the cluster-of-rank rule (``min(rank // k, c - 1)``).
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


def cluster_of_rank(rank: np.ndarray, n: int, k: int) -> np.ndarray:
    """Cluster index (0-based) of each 0-based rank: ``min(rank // k, c - 1)``."""
    c = cluster_count(n, k)
    return np.minimum(np.asarray(rank) // k, c - 1)


def cluster_bounds(n: int, k: int) -> list[tuple[int, int]]:
    """Half-open rank ranges [start, end) of the IR clusters of n sorted values."""
    c = cluster_count(n, k)
    starts = [i * k for i in range(c)] + [n]
    return list(zip(starts[:-1], starts[1:], strict=False))


def ir_order(values: np.ndarray, tiebreak: np.ndarray | None = None) -> np.ndarray:
    """Indices that sort ``values`` ascending, ties by ``tiebreak`` ascending (stable)."""
    values = np.asarray(values)
    if tiebreak is None:
        return np.argsort(values, kind="stable")
    return np.lexsort((np.asarray(tiebreak), values))


def ir_clusters(values: np.ndarray, k: int, tiebreak: np.ndarray | None = None) -> np.ndarray:
    """Cluster index of every value, in the values' original order.

    Parameters
    ----------
    values : array of shape (n,)
        One attribute's values (numeric, or categorical frequency ranks).
    k : int
        Minimum cluster size (≥ 1, ≤ n).
    tiebreak : array of shape (n,), optional
        Ordering of equal values (the record id); default: original position.

    Returns
    -------
    array of int, shape (n,): cluster index in [0, c), where c = max(n // k, 1).
    """
    values = np.asarray(values)
    n = len(values)
    check_k(k, n)
    order = ir_order(values, tiebreak)
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
