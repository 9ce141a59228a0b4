"""Consistency post-processing of one attribute's noisy centroid vector (docs/specification.md §9).

Within an attribute, IR clusters are consecutive ranks, so the exact centroids never decrease in
cluster order. The noisy centroids break that order. :func:`isotonic_projection` replaces the noisy
vector by its weighted least-squares projection onto the non-decreasing vectors within the declared
domain: weights are the cluster sizes, bounds are [lo, hi] (ranks: [1, |dom|]). This is the
"consistency" or constrained-inference step of Hay, Rastogi, Miklau and Suciu, "Boosting the
accuracy of differentially private histograms through consistency" (VLDB 2010).

It reads only released values (the noisy centroids) and public quantities (the cluster order, the
cluster sizes, which follow from the public n and k, and the declared domain), so it is
post-processing: it costs no privacy budget and the guarantee of the noisy vector carries over.

:func:`finish_centroids` is the whole last step of the mechanism, applied by the numpy reference and
by the Spark job alike, under the release options (:class:`fragrelease.protocol.options.ReleaseOptions`):
the projection (``postprocess: isotonic``) or nothing (``none``, the paper's release), then
clamping to [lo, hi] and, for categorical ranks, rounding.
"""
from __future__ import annotations

from typing import Final, Protocol

import numpy as np

from fragrelease.errors import InvalidParameterError


class PostprocessOptions(Protocol):
    """What :func:`finish_centroids` reads of the release options (:class:`fragrelease.protocol.options.ReleaseOptions`
    has it; that module declares its field from this one's default, so this one names it structurally)."""

    @property
    def postprocess(self) -> str: ...

#: Post-processing of the noisy centroids (docs/specification.md §9); the first is the default.
POSTPROCESS = ("isotonic", "none")
DEFAULT_POSTPROCESS: Final = "isotonic"


def check_postprocess(postprocess: str) -> str:
    """Return ``postprocess`` if it is one of :data:`POSTPROCESS`; else raise InvalidParameterError naming it."""
    if postprocess not in POSTPROCESS:
        raise InvalidParameterError(f"postprocess must be one of {POSTPROCESS}, not {postprocess!r}")
    return postprocess


def isotonic_projection(noisy: np.ndarray, sizes: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Weighted isotonic projection of a noisy centroid vector, bounded to [lo, hi].

    Parameters
    ----------
    noisy : array of shape (c,)
        Noisy centroids in cluster order (unclamped), finite.
    sizes : array of shape (c,)
        Cluster sizes (> 0): the weights of the least-squares fit.
    lo, hi : float
        Declared domain (ranks: [1, |dom|]), lo < hi.

    Returns
    -------
    array of shape (c,): the non-decreasing vector z in [lo, hi]^c minimizing Σ_j s_j (z_j − y_j)².
    Clipping the unbounded weighted isotonic fit to [lo, hi] gives exactly this bounded projection
    (the pool-adjacent-violators solution is a step function of block means; clipping keeps it
    non-decreasing and optimal block by block). The unbounded fit is SciPy's
    ``scipy.optimize.isotonic_regression``.

    Raises
    ------
    InvalidParameterError
        Shapes differ, a size is not positive, a value is not finite, or lo ≥ hi.
    """
    y = np.asarray(noisy, dtype=float)
    w = np.asarray(sizes, dtype=float)
    if y.shape != w.shape or y.ndim != 1:
        raise InvalidParameterError(f"noisy centroids {y.shape} and cluster sizes {w.shape} must be equal 1-D shapes")
    if not np.all(np.isfinite(y)):
        raise InvalidParameterError("noisy centroids must be finite")
    if np.any(w <= 0):
        raise InvalidParameterError(f"cluster sizes must be > 0, not {w[w <= 0][0]}")
    if not lo < hi:
        raise InvalidParameterError(f"domain must satisfy lo < hi, not [{lo}, {hi}]")
    if y.size == 0:
        return y.copy()
    from scipy.optimize import isotonic_regression  # here: SciPy's optimize costs 0.3-1 s to import, and
    # the configuration (fragrelease.protocol.options) imports this module before any fit is needed

    fit = isotonic_regression(y, weights=w, increasing=True).x
    return np.clip(np.asarray(fit, dtype=float), lo, hi)


def clamp_and_round(noisy: np.ndarray, lo, hi, categorical) -> np.ndarray:
    """Clamp noisy centroids to [lo, hi]; for categorical ranks, then round half up to an integer.

    ``lo``, ``hi`` and ``categorical`` are scalars or arrays of the same shape as ``noisy``.
    Rounding happens only after noise and clamping (docs/specification.md §1), so a rounded rank stays in
    [lo, hi] = [1, |dom|].
    """
    out = np.clip(np.asarray(noisy, dtype=float), np.asarray(lo, float), np.asarray(hi, float))
    return np.where(np.broadcast_to(np.asarray(categorical, bool), out.shape), np.floor(out + 0.5), out)


def finish_centroids(noisy: np.ndarray, sizes: np.ndarray, lo: float, hi: float, categorical: bool,
                     options: PostprocessOptions) -> np.ndarray:
    """The released values of one attribute's clusters from its noisy centroids, shape (c,) in cluster order.

    ``options`` are the release options (:class:`fragrelease.protocol.options.ReleaseOptions`); their
    ``postprocess`` decides: ``"isotonic"``: :func:`isotonic_projection`, then rounding for
    categorical ranks; ``"none"``: clamping to [lo, hi] and rounding, as the paper does
    (:func:`clamp_and_round`). Ranks are rounded only after both.

    Raises
    ------
    InvalidParameterError
        ``options`` not release options, or the conditions of :func:`isotonic_projection`.
    """
    postprocess = getattr(options, "postprocess", None)
    if postprocess is None or isinstance(options, str):
        raise InvalidParameterError(f"finish_centroids takes the release options, not {type(options).__name__}")
    check_postprocess(postprocess)
    y = np.asarray(noisy, dtype=float)
    if postprocess == "isotonic":
        y = isotonic_projection(y, sizes, lo, hi)
    return clamp_and_round(y, lo, hi, categorical)
