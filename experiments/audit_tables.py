"""Empirical privacy audits of a release's tables and of the aggregator's view (Spark-free).

The method, the statistics and the bounds are those of :mod:`fragrelease.experiments.audit` (read its
text first): :func:`audit_table` audits a table of several attributes, ``linked`` (the paper's rows)
or ``unlinked`` (each column permuted independently), with T the number of distinct row tuples;
:func:`audit_aggregator_view` audits one attribute's column as the aggregator reads it in an owner's
fragment, ``(pseudonym, value)`` rows in a CSPRNG order or, as fragments were before, ``(record id,
value)`` rows in id order, with T the number of adjacent equal values. Source: docs/privacy.md.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Callable, Sequence

import numpy as np

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.mechanisms import laplace_scale, mechanism_k, sensitivity
from fragrelease.idpir.microaggregation import ir_centroids, ir_clusters
from fragrelease.idpir.postprocess import clamp_and_round
from fragrelease.rng.laplace import NoiseSource, evaluation_generator

from .audit import StatisticAudit, audit_statistic

# ------------------------------------------------------------------------------------------------
# Several attributes: the table's rows, linked or unlinked
# ------------------------------------------------------------------------------------------------

LINKAGES = ("linked", "unlinked")


def released_tables(
    data: np.ndarray, *, k: int, lo: Sequence[float], hi: Sequence[float], epsilon_attribute: Fraction | float,
    mechanism: str, runs: int, noise: NoiseSource, linkage: str,
) -> np.ndarray:
    """``runs`` independent releases of a numeric table, shape (runs, n, l).

    ``data`` has shape (n, l) (record i = row i, ids = positions for ties). Each attribute is
    clustered on its own ranks, one Laplace draw per cluster at Δ / ε_attr, clamped to its
    [lo, hi]; every row carries its record's cluster value for every attribute (``linked``), or
    each column is then permuted independently (``unlinked``; here with the evaluation generator,
    in a release with CSPRNG keys).

    Raises
    ------
    InvalidParameterError
        Unknown linkage, or values outside their domain.
    """
    if linkage not in LINKAGES:
        raise InvalidParameterError(f"linkage must be one of {LINKAGES}, not {linkage!r}")
    data = np.asarray(data, dtype=float)
    n, l = data.shape
    out = np.empty((runs, n, l))
    k_used = mechanism_k(mechanism, k)
    gen = evaluation_generator() if linkage == "unlinked" else None
    for j in range(l):
        x = data[:, j]
        if np.any(x < lo[j]) or np.any(x > hi[j]):
            raise InvalidParameterError(f"values of attribute {j} must lie in [{lo[j]}, {hi[j]}]")
        cl = ir_clusters(x, k_used, np.arange(n))
        cent = ir_centroids(x, cl)
        c = len(cent)
        b = laplace_scale(sensitivity(mechanism, x, k, lo[j], hi[j]), epsilon_attribute, c)
        vals = np.tile(cent, runs)
        z = noise.perturb(vals, np.full(vals.shape, b), np.full(vals.shape, str(j), dtype=object),
                          np.tile(np.arange(c), runs))
        z = clamp_and_round(z, lo[j], hi[j], False).reshape(runs, c)
        col = z[:, cl]
        out[:, :, j] = gen.permuted(col, axis=1) if gen is not None else col
    return out


def distinct_rows(tables: np.ndarray) -> np.ndarray:
    """Number of distinct row tuples of each table; tables of shape (runs, n, l), result (runs,)."""
    t = np.asarray(tables)
    order = np.lexsort(t.transpose(2, 0, 1)[::-1], axis=-1)  # (runs, n): rows sorted lexicographically
    srt = np.take_along_axis(t, order[:, :, None], axis=1)
    new = np.any(srt[:, 1:, :] != srt[:, :-1, :], axis=2)
    return 1 + new.sum(axis=1)


def audit_table(
    data_d: np.ndarray, data_n: np.ndarray, *, k: int, lo: Sequence[float], hi: Sequence[float],
    epsilon_attribute: Fraction | float, mechanism: str, runs: int, noise: NoiseSource, linkage: str,
    statistic: Callable[[np.ndarray], np.ndarray] = distinct_rows, alpha: float = 1e-6,
    calibration_runs: int | None = None,
) -> StatisticAudit:
    """Audit a whole table (shape (n, l)) on D and D'; the claimed ε is ``l · ε_attr``.

    The statistic (default: the number of distinct row tuples) maps (runs, n, l) → (runs,).
    See :func:`released_tables` and :func:`audit_statistic`.

    Raises
    ------
    InvalidParameterError
        D and D' of different shapes, or as :func:`released_tables`.
    """
    data_d, data_n = np.asarray(data_d, float), np.asarray(data_n, float)
    if data_d.shape != data_n.shape or data_d.ndim != 2:
        raise InvalidParameterError(f"D and D' must be tables of the same shape, not {data_d.shape} and {data_n.shape}")

    def sampler(data):
        return lambda r: statistic(released_tables(data, k=k, lo=lo, hi=hi, epsilon_attribute=epsilon_attribute,
                                                   mechanism=mechanism, runs=r, noise=noise, linkage=linkage))

    eps = float(epsilon_attribute) * data_d.shape[1]
    return audit_statistic(sampler(data_d), sampler(data_n), epsilon=eps, runs=runs, alpha=alpha,
                           calibration_runs=calibration_runs, name=f"{getattr(statistic, '__name__', 'statistic')} ({linkage})")


# ------------------------------------------------------------------------------------------------
# The aggregator's view of one attribute: an owner's protected fragment
# ------------------------------------------------------------------------------------------------

AGGREGATOR_VIEWS = ("pseudonyms", "ids")


def aggregator_views(
    x: np.ndarray, *, k: int, lo: float, hi: float, epsilon_attribute: Fraction | float, mechanism: str, runs: int,
    noise: NoiseSource, view: str, key: bytes | None = None, contexts: Sequence[str] | None = None,
) -> np.ndarray:
    """``runs`` independent views of one attribute's column as the aggregator reads it, shape (runs, n).

    Each run is one release of ``x`` (shape (n,), record ids = positions 0..n-1): IR clusters,
    one Laplace draw per cluster, clamping (:func:`released_tables`), then the fragment the owner
    writes. ``view="pseudonyms"`` (the owner job, :func:`fragrelease.jobs.idpir.owner_round.protect_and_write`):
    every id replaced by :func:`fragrelease.pseudonyms.pseudonym` under ``key`` (default: one fresh
    key for all runs, never shown to the reader) with the run's plan id as context (``contexts[r]``,
    default a new one per run) and the rows in a CSPRNG order
    (:func:`fragrelease.rng.secure.secure_permutation`). ``view="ids"``: the fragment before pseudonyms,
    rows ``(id, value)`` in id order. Row r of the result holds the values in the order of their
    labels (pseudonyms or ids): a function of what the reader sees, which any statistic may use.

    Raises
    ------
    InvalidParameterError
        Unknown view, or as :func:`released_tables`.
    """
    from fragrelease.pseudonyms import new_key_text, pseudonyms
    from fragrelease.rng.secure import secure_permutation, secure_token_bytes

    if view not in AGGREGATOR_VIEWS:
        raise InvalidParameterError(f"view must be one of {AGGREGATOR_VIEWS}, not {view!r}")
    x = np.asarray(x, dtype=float)
    n = x.size
    cols = released_tables(x[:, None], k=k, lo=[lo], hi=[hi], epsilon_attribute=epsilon_attribute,
                           mechanism=mechanism, runs=runs, noise=noise, linkage="linked")[:, :, 0]  # (runs, n), id order
    if view == "ids":
        return cols
    secret = key if key is not None else new_key_text()
    out = np.empty_like(cols)
    for r in range(runs):
        context = contexts[r] if contexts is not None else secure_token_bytes(16).hex()
        order = secure_permutation(n)  # the owner's shuffled rows: (pseudonym, value) in file order
        labels = np.asarray(pseudonyms(secret, order.tolist(), context=context))
        values = cols[r, order]
        out[r] = values[np.argsort(labels, kind="stable")]  # the reader sorts by pseudonym
    return out


def adjacent_equal_pairs(views: np.ndarray) -> np.ndarray:
    """Per view (rows of shape (runs, n)): how many neighbouring values are equal, (runs,) integers."""
    v = np.asarray(views)
    return (v[:, 1:] == v[:, :-1]).sum(axis=1)


def audit_aggregator_view(
    x_d: np.ndarray, x_n: np.ndarray, *, k: int, lo: float, hi: float, epsilon_attribute: Fraction | float,
    mechanism: str, runs: int, noise: NoiseSource, view: str,
    statistic: Callable[[np.ndarray], np.ndarray] = adjacent_equal_pairs, alpha: float = 1e-6,
    calibration_runs: int | None = None,
) -> StatisticAudit:
    """Audit one attribute's column as the aggregator reads it, on D (``x_d``) and D' (``x_n``).

    The claimed ε is ``epsilon_attribute``, the per-column statement the guarantee makes against
    the aggregator (docs/privacy.md). See :func:`aggregator_views` and :func:`audit_statistic`.

    Raises
    ------
    InvalidParameterError
        D and D' of different sizes, or as :func:`aggregator_views`.
    """
    x_d, x_n = np.asarray(x_d, float), np.asarray(x_n, float)
    if x_d.shape != x_n.shape or x_d.ndim != 1:
        raise InvalidParameterError(f"D and D' must be columns of the same size, not {x_d.shape} and {x_n.shape}")

    def sampler(x):
        return lambda r: statistic(aggregator_views(x, k=k, lo=lo, hi=hi, epsilon_attribute=epsilon_attribute,
                                                    mechanism=mechanism, runs=r, noise=noise, view=view))

    return audit_statistic(sampler(x_d), sampler(x_n), epsilon=float(epsilon_attribute), runs=runs, alpha=alpha,
                           calibration_runs=calibration_runs,
                           name=f"{getattr(statistic, '__name__', 'statistic')} ({view})")
