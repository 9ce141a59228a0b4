"""DP-IR, iDP-IR and plain iDP on one attribute, Spark-free (docs/specification.md §1-2; Del Vasto-Terrientes et al. (ICISSP 2025) §3).

:func:`perturb_centroids` is the step the Spark job applies per cluster (through a pandas UDF);
:func:`protect_attribute` is the whole mechanism on a numpy array, the reference the Spark job is
tested against with injected noise.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.microaggregation import ir_centroids, ir_clusters
from fragrelease.rng import NoiseSource
from fragrelease.idpir.sensitivity import mechanism_k, sensitivity


def laplace_scale(delta: float, epsilon_attribute: Fraction | float) -> float:
    """Laplace scale ``b = Δ / ε_attr`` (docs/specification.md §2).

    Raises
    ------
    InvalidParameterError
        If Δ is negative or not finite, or ε_attr ≤ 0.
    """
    if not np.isfinite(delta) or delta < 0:
        raise InvalidParameterError(f"sensitivity must be finite and non-negative, not {delta}")
    if epsilon_attribute <= 0:
        raise InvalidParameterError(f"epsilon per attribute must be > 0, not {epsilon_attribute}")
    return float(delta) / float(epsilon_attribute)


def clamp_and_round(noisy: np.ndarray, lo, hi, categorical) -> np.ndarray:
    """Clamp noisy centroids to [lo, hi]; for categorical ranks, then round half up to an integer.

    ``lo``, ``hi`` and ``categorical`` are scalars or arrays of the same shape as ``noisy``.
    Rounding happens only after noise and clamping (docs/specification.md §1), so a rounded rank stays in
    [lo, hi] = [1, |dom|].
    """
    out = np.clip(np.asarray(noisy, dtype=float), np.asarray(lo, float), np.asarray(hi, float))
    return np.where(np.broadcast_to(np.asarray(categorical, bool), out.shape), np.floor(out + 0.5), out)


def perturb_centroids(
    centroids: np.ndarray,
    scales: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    categorical: np.ndarray,
    attributes: np.ndarray,
    clusters: np.ndarray,
    noise: NoiseSource,
) -> np.ndarray:
    """Noisy, clamped (and for categorical attributes, rounded) centroids; all arrays shape (m,).

    One Laplace draw per cluster (never per record), docs/specification.md §2.
    """
    noisy = noise.perturb(np.asarray(centroids, float), np.asarray(scales, float), attributes, clusters)
    return clamp_and_round(noisy, lo, hi, categorical)


def protect_attribute(
    values: np.ndarray,
    *,
    k: int,
    lo: float,
    hi: float,
    epsilon_attribute: Fraction | float,
    mechanism: str,
    noise: NoiseSource,
    attribute: str = "a",
    tiebreak: np.ndarray | None = None,
    categorical: bool = False,
) -> np.ndarray:
    """Protect one attribute with IR microaggregation and Laplace noise on the centroids.

    Parameters
    ----------
    values : array of shape (n,)
        Numeric values in [lo, hi], or categorical ranks in [1, |dom|] (fragrelease.idpir.category_order).
    k : int
        Cluster size (ignored by plain iDP, which uses k = 1).
    lo, hi : float
        Declared domain; ranks use [1, |dom|].
    epsilon_attribute : Fraction or float
        Budget of this attribute (ε_j / l_j).
    mechanism : {"idp-ir", "dp-ir", "idp"}
    noise : NoiseSource
    attribute : str
        Attribute name handed to the noise source.
    tiebreak : array of shape (n,), optional
        Order of ties (record ids).
    categorical : bool
        Round the clamped noisy centroid (ranks).

    Returns
    -------
    array of shape (n,): each value replaced by its cluster's noisy centroid, original order kept.
    """
    values = np.asarray(values, dtype=float)
    if np.any(values < lo) or np.any(values > hi):
        raise InvalidParameterError(f"values of {attribute!r} must lie in [{lo}, {hi}]")
    k_used = mechanism_k(mechanism, k)
    clusters = ir_clusters(values, k_used, tiebreak)
    centroids = ir_centroids(values, clusters)
    delta = sensitivity(mechanism, values, k, lo, hi)
    scale = laplace_scale(delta, epsilon_attribute)
    c = len(centroids)
    noisy = perturb_centroids(
        centroids,
        np.full(c, scale),
        np.full(c, lo),
        np.full(c, hi),
        np.full(c, categorical),
        np.full(c, attribute, dtype=object),
        np.arange(c),
        noise,
    )
    return noisy[clusters]

