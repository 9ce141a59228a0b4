"""Tier measures: disclosure (Jensen–Shannon), weighted distance and utility loss (docs/specification.md §6).

Source: W. Chang and J. Wu, "Strengthening Data Privacy During Propagation", SPME 2014, §2 and §5;
see :mod:`fragrelease.tiers` for the formulas.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from fragrelease.errors import InvalidParameterError

# --------------------------------------------------------------------------------------------------
# Formulas
# --------------------------------------------------------------------------------------------------

def js_divergence(p: Sequence[float] | np.ndarray, q: Sequence[float] | np.ndarray) -> float:
    """Jensen–Shannon divergence of two distributions over the same values, log base 2.

    ``JS(p, q) = ½ KL(p ‖ m) + ½ KL(q ‖ m)`` with ``m = (p + q) / 2``; ``0 · log 0 = 0``.

    Parameters
    ----------
    p, q : 1-D arrays of the same length, non-negative, each summing to 1 (counts are normalized).

    Returns
    -------
    float in [0, 1].

    Raises
    ------
    InvalidParameterError
        Different lengths, negative entries or an all-zero vector.

    References
    ----------
    docs/specification.md §6; Chang & Wu (SPME 2014) §2 (``P(T)``).
    """
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    if p.shape != q.shape or p.ndim != 1:
        raise InvalidParameterError(f"distributions must be 1-D of the same length, not {p.shape} and {q.shape}")
    if (p < 0).any() or (q < 0).any() or p.sum() <= 0 or q.sum() <= 0:
        raise InvalidParameterError(f"distributions must be non-negative and non-zero, not {p.tolist()} and {q.tolist()}")
    return float(_js_rows(p / p.sum(), (q / q.sum())[None, :])[0])


def _js_rows(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """JS(p, q_r) for each row q_r of ``q`` (rows are distributions), log base 2."""
    m = (q + p[None, :]) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(p[None, :] > 0, p[None, :] * np.log2(p[None, :] / m), 0.0)
        b = np.where(q > 0, q * np.log2(q / m), 0.0)
    return np.clip(0.5 * a.sum(axis=1) + 0.5 * b.sum(axis=1), 0.0, 1.0)


def _js_counts(p: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """JS(p, counts_r / Σ counts_r) for each row of a (g, s) count matrix."""
    counts = np.atleast_2d(np.asarray(counts, dtype=float))
    return _js_rows(p, counts / counts.sum(axis=1, keepdims=True))


def disclosure(class_counts: np.ndarray, p: Optional[np.ndarray] = None) -> float:
    """``P(T)``: the largest JS divergence between a class's and the table's sensitive distribution.

    Parameters
    ----------
    class_counts : (classes, sensitive values) array of counts; row ``c`` counts the sensitive
        values of class ``c``.
    p : the table's distribution over the same values; default the column sums, normalized.

    Returns
    -------
    float in [0, 1].

    References
    ----------
    docs/specification.md §6; Chang & Wu (SPME 2014) §2.
    """
    counts = np.atleast_2d(np.asarray(class_counts, dtype=float))
    if p is None:
        p = counts.sum(axis=0) / counts.sum()
    return float(_js_counts(np.asarray(p, dtype=float), counts).max())


def weighted_distance(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, weights: Sequence[float]) -> float:
    """``d(t_i, t_j) = sqrt(Σ_k w_k (t_i[k] - t_j[k])²)`` (Chang & Wu (SPME 2014) §5; docs/specification.md §6)."""
    a, b, w = (np.asarray(x, dtype=float) for x in (a, b, weights))
    return float(np.sqrt(np.sum(w * (a - b) ** 2)))


def table_distance(x: np.ndarray, y: np.ndarray, weights: Sequence[float]) -> float:
    """Distance of two versions of the same rows: the sum of their row distances.

    ``x`` and ``y`` are (rows, quasi-identifiers) arrays with the rows in the same order.
    Source: Chang & Wu (SPME 2014) §2 (``U(T)`` sums the per-value distances over rows) and §5.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return float(np.sum(_row_norms(x - y, np.asarray(weights, dtype=float))))


def _row_norms(diff: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.sqrt(np.sum(w[None, :] * diff * diff, axis=1))


def utility(x: np.ndarray, weights: Sequence[float] | np.ndarray, mean: Optional[np.ndarray] = None) -> float:
    """``U(T') = d(T', T~)``: how far the rows are from the one-class table (Chang & Wu (SPME 2014) §2).

    ``mean`` is the table mean (the value every row takes in ``T~``); default the mean of ``x``.
    """
    x = np.asarray(x, dtype=float)
    mu = x.mean(axis=0) if mean is None else np.asarray(mean, dtype=float)
    return float(np.sum(_row_norms(x - mu[None, :], np.asarray(weights, dtype=float))))


def utility_loss(released: np.ndarray, source: np.ndarray, weights: Sequence[float]) -> float:
    """``UL = 1 - d(T', T~) / d(T, T~)`` with ``T~`` the source merged into one class.

    Parameters
    ----------
    released : (rows, quasi-identifiers) values of the sanitized table ``T'``.
    source : the same rows, same order, in the source table ``T``.
    weights : attribute weights (length = quasi-identifiers).

    Returns
    -------
    float: 0 for ``T' = T``, 1 for ``T' = T~``; 0 when every source row already equals the mean.

    References
    ----------
    docs/specification.md §6; Chang & Wu (SPME 2014) §5.
    """
    source = np.asarray(source, dtype=float)
    mu = source.mean(axis=0)
    base = utility(source, weights, mu)
    if base == 0:
        return 0.0
    return 1.0 - utility(released, weights, mu) / base


def class_means(x: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each row's quasi-identifiers replaced by the mean of its class (``labels``: one per row)."""
    x = np.asarray(x, dtype=float)
    _, inv = np.unique(labels, return_inverse=True)
    sums = np.zeros((inv.max() + 1, x.shape[1]))
    np.add.at(sums, inv, x)
    sizes = np.bincount(inv).astype(float)
    return (sums / sizes[:, None])[inv]
