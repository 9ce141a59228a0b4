"""Sensitivity of the vector of IR centroids of one attribute (docs/specification.md §2).

Neighbouring datasets differ by the substitution of one record (n is public). The quantity that
calibrates the noise is the L1 sensitivity of the **whole vector** of an attribute's centroids: one
substituted record shifts every cluster between its old and its new rank.

- DP-IR, global: ``Δ = (hi - lo) / k`` (Sánchez et al. (Information Fusion 2016); the iDP-IR authors' public code).
- iDP-IR, local to the actual data [derived, brute-force checked in tests]: with sorted values
  x(0..n-1), s(t) the size of the cluster holding rank t, and sentinels lo before the first and hi
  after the last value, ``U = Σ_t (x(t+1) - x(t)) / s(t)``, ``D = Σ_t (x(t) - x(t-1)) / s(t)``,
  ``Δ = max(U, D)`` (always ≤ (hi - lo) / k).

Summed cluster by cluster the sums telescope, so U and D need only each cluster's minimum, maximum
and size and its neighbours' (:func:`idp_ir_sensitivity_from_clusters`); this is what the Spark
job computes with aggregations. The local sensitivity is data-dependent and must never be
published (docs/specification.md §2). Which formula a mechanism uses is decided in one place, the
registry :data:`fragrelease.idpir.mechanisms.MECHANISMS`.
"""
from __future__ import annotations

import numpy as np

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.microaggregation import check_k, cluster_bounds


def check_domain(lo: float, hi: float, *, name: str = "attribute") -> None:
    """Raise InvalidParameterError unless lo < hi are finite."""
    if not (np.isfinite(lo) and np.isfinite(hi)) or not lo < hi:
        raise InvalidParameterError(f"domain of {name} must satisfy lo < hi (finite), not [{lo}, {hi}]")


def dp_ir_sensitivity(lo: float, hi: float, k: int) -> float:
    """Global L1 sensitivity of an attribute's IR centroid vector, ``(hi - lo) / k``.

    Parameters
    ----------
    lo, hi : float
        Declared domain of the attribute (public), lo < hi.
    k : int
        Cluster size, ≥ 1.
    """
    check_domain(lo, hi)
    check_k(k)
    return (hi - lo) / k


def idp_ir_sensitivity(values: np.ndarray, k: int, lo: float, hi: float) -> float:
    """Local L1 sensitivity ``max(U, D)`` of the IR centroid vector of ``values`` (docs/specification.md §2).

    Parameters
    ----------
    values : array of shape (n,)
        The attribute's values in any order, all within [lo, hi].
    k : int
        Cluster size, 1 ≤ k ≤ n.
    lo, hi : float
        Declared domain.

    Raises
    ------
    InvalidParameterError
        Bad k or domain. DomainError is the caller's job (values are assumed in [lo, hi]).
    """
    xs = np.sort(np.asarray(values, dtype=float))
    n = len(xs)
    check_k(k, n)
    check_domain(lo, hi)
    bounds = cluster_bounds(n, k)
    c = len(bounds)
    a_last, b_last = bounds[-1]
    max_second_last = xs[bounds[-2][1] - 1] if c > 1 else lo
    return idp_ir_sensitivity_from_extremes(
        xs[0], xs[a_last], max_second_last, xs[b_last - 1], k, b_last - a_last, c, lo, hi
    )


def idp_ir_sensitivity_from_clusters(
    mins: np.ndarray, maxs: np.ndarray, sizes: np.ndarray, lo: float, hi: float
) -> float:
    """``max(U, D)`` from per-cluster statistics, clusters in rank order.

    ``U = Σ_j (min_{j+1} - min_j) / s_j`` with ``min_c = hi``;
    ``D = Σ_j (max_j - max_{j-1}) / s_j`` with ``max_{-1} = lo``.
    """
    mins = np.asarray(mins, dtype=float)
    maxs = np.asarray(maxs, dtype=float)
    sizes = np.asarray(sizes, dtype=float)
    next_min = np.append(mins[1:], hi)
    prev_max = np.insert(maxs[:-1], 0, lo)
    up = np.sum((next_min - mins) / sizes)
    down = np.sum((maxs - prev_max) / sizes)
    return float(max(up, down))


def idp_ir_sensitivity_from_extremes(
    min_first: float, min_last: float, max_second_last: float, max_last: float,
    k: int, size_last: int, n_clusters: int, lo: float, hi: float,
) -> float:
    """``max(U, D)`` from four order statistics (the telescoped form of docs/specification.md §2).

    Every cluster but the last has size k, so the sums telescope to::

        U = (min_last - min_first) / k + (hi - min_last) / size_last
        D = (max_second_last - lo) / k + (max_last - max_second_last) / size_last

    (one cluster: U = (hi - min) / n, D = (max - lo) / n). The Spark job evaluates exactly this
    expression, so it and this reference give the same double.
    """
    if n_clusters == 1:
        up = (hi - min_first) / size_last
        down = (max_last - lo) / size_last
    else:
        up = (min_last - min_first) / k + (hi - min_last) / size_last
        down = (max_second_last - lo) / k + (max_last - max_second_last) / size_last
    return float(max(up, down))
