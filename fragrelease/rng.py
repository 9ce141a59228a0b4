"""The one module that owns randomness (STYLE.md habit 2; SPEC.md §8).

Every random draw of a release comes from here:

- :class:`SecureLaplace` perturbs values with Laplace noise through OpenDP's ``make_laplace``, which
  samples from the operating system's CSPRNG with exact arithmetic and releases values on a grid,
  so the output resists the floating-point attack on naive samplers (Mironov, CCS 2012).
- :func:`secure_random_keys` draws 63-bit integers from :mod:`secrets` (the OS CSPRNG) for shuffling
  the row order of a release and for assigning records to owners in the demo split.

There are no seeds here. Tests that need reproducible noise pass their own :class:`NoiseSource`
(see ``tests/noise_injection.py``); the CLI and the jobs never accept one from a user.
"""
from __future__ import annotations

import secrets
from typing import Protocol

import numpy as np

from .errors import InvalidParameterError


class NoiseSource(Protocol):
    """Adds Laplace noise of the given scale to each value.

    Parameters of :meth:`perturb` (all arrays of shape (m,)):
    ``values`` the exact centroids, ``scales`` the Laplace scales b > 0 (same unit as the values),
    ``attributes`` and ``clusters`` identify each centroid (used only by test sources, which
    derive their noise from them so a reference implementation can reproduce it).
    Returns the noisy values, shape (m,), float64.
    """

    def perturb(
        self, values: np.ndarray, scales: np.ndarray, attributes: np.ndarray, clusters: np.ndarray
    ) -> np.ndarray: ...


def _checked(values, scales) -> tuple[np.ndarray, np.ndarray]:
    """Values and scales as float arrays; raise InvalidParameterError on a bad scale or value."""
    values = np.asarray(values, dtype=float)
    scales = np.asarray(scales, dtype=float)
    if not np.all(np.isfinite(scales)) or np.any(scales < 0):
        bad = scales[~(np.isfinite(scales) & (scales >= 0))][0]
        raise InvalidParameterError(f"Laplace scale must be finite and non-negative, not {bad}")
    if not np.all(np.isfinite(values)):
        raise InvalidParameterError("values to perturb must be finite")
    return values, scales


class SecureLaplace:
    """Laplace noise from OpenDP (OS CSPRNG, floating-point-safe), the only production source."""

    def __init__(self) -> None:
        import opendp.prelude as dp

        # make_laplace over floats is in OpenDP's "contrib" set (vetted by its maintainers, not yet
        # formally proven); see docs/privacy.md.
        dp.enable_features("contrib")
        self._dp = dp
        self._cache: dict[float, object] = {}

    def _measurement(self, scale: float):
        m = self._cache.get(scale)
        if m is None:
            dp = self._dp
            m = dp.m.make_laplace(
                dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float), scale=scale
            )
            self._cache[scale] = m
        return m

    def perturb(
        self, values: np.ndarray, scales: np.ndarray, attributes: np.ndarray, clusters: np.ndarray
    ) -> np.ndarray:
        values, scales = _checked(values, scales)
        out = np.empty_like(values)
        for scale in np.unique(scales):
            idx = np.flatnonzero(scales == scale)
            out[idx] = np.asarray(self._measurement(float(scale))(values[idx].tolist()), dtype=float)
        return out


class FastLaplace:
    """Laplace noise from numpy's PCG64, seeded from the OS CSPRNG: **evaluation only**.

    The evaluation job draws hundreds of millions of values to estimate information loss on public
    benchmark data; OpenDP's exact sampler is too slow for that. This sampler has the same
    distribution but neither a cryptographic generator nor floating-point hardening, so it is never
    used for a release (the release jobs take no sampler argument from users); every evaluation
    result names the sampler it used (:data:`FAST_SAMPLER_NAME`).
    """

    name = "numpy-pcg64-laplace (evaluation only, not for releases)"

    def __init__(self) -> None:
        self._gen = evaluation_generator()

    def perturb(
        self, values: np.ndarray, scales: np.ndarray, attributes: np.ndarray, clusters: np.ndarray
    ) -> np.ndarray:
        values, scales = _checked(values, scales)
        return values + self._gen.laplace(0.0, 1.0, size=values.shape) * scales


def evaluation_generator() -> np.random.Generator:
    """A fast numpy generator seeded from the OS CSPRNG, for the evaluation job only (never releases)."""
    return np.random.Generator(np.random.PCG64(secrets.randbits(128)))


FAST_SAMPLER_NAME = FastLaplace.name


def secure_random_keys(size: int) -> np.ndarray:
    """``size`` independent uniform integers in [0, 2**63) from the OS CSPRNG, as int64."""
    if size < 0:
        raise InvalidParameterError(f"size must be >= 0, not {size}")
    raw = np.frombuffer(secrets.token_bytes(8 * size), dtype=np.uint64) if size else np.empty(0, np.uint64)
    return (raw >> np.uint64(1)).astype(np.int64)


def secure_permutation(size: int) -> np.ndarray:
    """A uniformly random permutation of ``0 .. size-1`` (int64) from the OS CSPRNG.

    Sorting 63-bit keys from :func:`secure_random_keys`; ties (probability < size² / 2⁶⁴) keep index
    order. Used to order candidate tuples in the cloning anonymizer (SPEC.md §5 step 4).
    """
    return np.argsort(secure_random_keys(size), kind="stable").astype(np.int64)
