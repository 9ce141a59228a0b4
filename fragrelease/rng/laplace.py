"""Laplace noise: the noise object, OpenDP's measurement and its calibration (docs/specification.md §8).

:class:`LaplaceNoise` is mechanism = sensitivity × noise made concrete: given the L1 sensitivity Δ
of a vector, its budget ε and its size, it holds the scale ``b`` that OpenDP's privacy map certifies
(:func:`calibrated_laplace_scale`), samples ``values + Lap(b)`` and reports the variance ``2b²``.
:class:`SecureLaplace` is the only production sampler (OpenDP ``make_laplace``, OS CSPRNG, grid
2**-40, :data:`LAPLACE_GRANULARITY_EXPONENT`); :class:`FastLaplace` is for the evaluation only.
Source: docs/privacy.md ("Granularity") and OpenDP 0.16's ``make_laplace``.
"""
from __future__ import annotations

import functools
import secrets
from dataclasses import dataclass
from fractions import Fraction
from types import SimpleNamespace
from typing import Optional, Protocol

import numpy as np

from fragrelease.errors import InvalidParameterError


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


#: Exponent k of the noise granularity 2**k of the production Laplace sampler (docs/privacy.md).
#: OpenDP rounds every input to the nearest multiple of 2**k, adds 2**k times a discrete Laplace
#: variable and returns the float nearest that multiple; its privacy map charges the rounding as
#: ``size * (2**k - 2**-1074)`` extra L1 distance. k = -40 keeps that slack below 10**-5 for
#: 10**7 values while keeping every integer the sampler handles small (about 155,000 draws per
#: CPU-second here, against 55,000 for OpenDP's finest grid 2**-1074); see docs/benchmarks.md.
LAPLACE_GRANULARITY_EXPONENT = -40

_MEASUREMENTS: dict[tuple[float, Optional[int]], object] = {}
_MAX_CACHED = 4096


@functools.lru_cache(maxsize=1)
def _opendp() -> SimpleNamespace:
    """OpenDP's constructors, imported module by module.

    ``opendp.prelude`` would also import OpenDP's scikit-learn extras when scikit-learn is installed
    (several seconds in every driver and Python worker process); the release needs only these.
    """
    import opendp.domains as domains
    import opendp.measurements as measurements
    import opendp.metrics as metrics
    from opendp.mod import enable_features

    # make_laplace over floats is in OpenDP's "contrib" set (vetted by its maintainers, not yet
    # formally proven); see docs/privacy.md.
    enable_features("contrib")
    return SimpleNamespace(m=measurements, vector_domain=domains.vector_domain, atom_domain=domains.atom_domain,
                           l1_distance=metrics.l1_distance, l2_distance=metrics.l2_distance)


def laplace_measurement(scale: float, size: Optional[int]):
    """OpenDP's Laplace measurement of the releases: vectors of exactly ``size`` floats, grid 2**k.

    ``dp.m.make_laplace(vector_domain(atom_domain(T=float, nan=False), size=size),
    l1_distance(T=float), scale=scale, k=LAPLACE_GRANULARITY_EXPONENT)``, cached per
    ``(scale, size)``. Input: a list of ``size`` finite floats; output: the list of noisy floats,
    each a multiple of 2**k rounded to the nearest float64. Its privacy map takes an L1 distance
    (same unit as the values) and returns ε (pure DP): ``(d_in + size * (2**k - 2**-1074)) / scale``
    rounded up (OpenDP 0.16, ``make_laplace`` proof document; checked in tests). ``size=None``
    returns OpenDP's exact measurement (granularity 2**-1074, no rounding slack, any length, about a
    third of the speed), which DiffGen's count noise keeps.

    Raises
    ------
    InvalidParameterError
        ``scale`` negative or not finite, or ``size`` < 1.
    """
    scale = float(scale)
    if not np.isfinite(scale) or scale < 0:
        raise InvalidParameterError(f"Laplace scale must be finite and non-negative, not {scale}")
    if size is not None and (int(size) != size or size < 1):
        raise InvalidParameterError(f"vector size must be an integer >= 1, not {size}")
    key = (scale, None if size is None else int(size))
    m = _MEASUREMENTS.get(key)
    if m is None:
        dp = _opendp()
        if size is None:
            m = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float),
                                  scale=scale)
        else:
            m = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=float, nan=False), size=int(size)),
                                  dp.l1_distance(T=float), scale=scale, k=LAPLACE_GRANULARITY_EXPONENT)
        if len(_MEASUREMENTS) >= _MAX_CACHED:
            _MEASUREMENTS.clear()
        _MEASUREMENTS[key] = m
    return m


def laplace_epsilon(scale: float, sensitivity: float, size: Optional[int]) -> Fraction:
    """ε of :func:`laplace_measurement` ``(scale, size)`` at L1 distance ``sensitivity``, by OpenDP's map.

    Returned as the exact Fraction of the float OpenDP reports (so comparisons with a Fraction
    budget are exact). Raises InvalidParameterError for a negative or non-finite sensitivity, or
    the errors of :func:`laplace_measurement`; ``scale = 0`` has no finite ε and is refused too.
    """
    sensitivity = float(sensitivity)
    if not np.isfinite(sensitivity) or sensitivity < 0:
        raise InvalidParameterError(f"sensitivity must be finite and non-negative, not {sensitivity}")
    if not float(scale) > 0:
        raise InvalidParameterError(f"Laplace scale must be > 0 to have a finite epsilon, not {scale}")
    return Fraction(laplace_measurement(scale, size).map(sensitivity))


def float_at_most(x: Fraction | float) -> float:
    """The largest float64 ≤ ``x`` (``x`` itself for a float): a budget never rounds up.

    The Spark job carries each attribute's Fraction budget to its executors as this float, and
    :func:`calibrated_laplace_scale` applies it to any Fraction it gets, so both compute the same
    scale from the same float. Raises InvalidParameterError for a value that is not a finite number.
    """
    try:
        exact = Fraction(x)
        f = float(exact)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError):
        raise InvalidParameterError(f"expected a finite number, not {x!r}") from None
    if not np.isfinite(f):
        raise InvalidParameterError(f"expected a finite number, not {x!r}")
    if Fraction(f) > exact:
        f = float(np.nextafter(f, -np.inf))
    return f


def calibrated_laplace_scale(sensitivity: float, epsilon: Fraction | float, size: Optional[int]) -> float:
    """The smallest float scale b whose OpenDP privacy map at ``d_in = sensitivity`` is ≤ ``epsilon``.

    The one place a Laplace scale of a release is computed (docs/privacy.md, "Granularity"): the
    centroids of an attribute (``sensitivity`` = Δ of the attribute's whole centroid vector,
    ``size`` = its number of clusters c) and the category histograms (Δ = 2, size = |dom|). The
    Spark job and the numpy reference both call it (through
    :meth:`fragrelease.idpir.mechanisms.IRMechanism.scale`), so they use the same double.

    Why the whole vector's size: the sampler perturbs an attribute's c centroids in chunks (one per
    Arrow batch and scale), each through ``laplace_measurement(b, m_i)`` with Σ m_i = c. A
    neighbouring dataset moves the vector by L1 distance ≤ Δ in total, d_i in chunk i with
    Σ d_i ≤ Δ. The map is affine, ``ε_i = (d_i + m_i · r) / b`` with ``r = 2**k - 2**-1074``
    (checked against OpenDP's map in tests/fragrelease/test_rng_calibration.py), so sequential
    composition of the chunks gives ``Σ ε_i ≤ (Δ + c · r) / b``: the map of the size-c measurement at
    Δ, which this function makes ≤ ε. Chunks that mix attributes of equal scale split the same way.

    Result: ``b ≈ (Δ + c · r) / ε``, i.e. at most a factor ``1 + c · 2**k / Δ`` (plus a few ulps)
    above Δ / ε; never below Δ / ε. Data-dependent when Δ is a local sensitivity (iDP-IR, iDP):
    never log or publish it.

    Parameters
    ----------
    sensitivity : float, ≥ 0, finite (L1, unit of the values).
    epsilon : Fraction or float, > 0.
    size : int, ≥ 1, the number of values the budget covers; ``None`` for OpenDP's exact
        measurement (granularity 2**-1074, no rounding slack, any length), which DiffGen's leaf
        counts use: then ``b`` is the smallest float with ``Δ / b ≤ ε`` by OpenDP's map.

    Raises
    ------
    InvalidParameterError
        Bad sensitivity, epsilon or size (the message names the value).
    """
    sensitivity = float(sensitivity)
    if not np.isfinite(sensitivity) or sensitivity < 0:
        raise InvalidParameterError(f"sensitivity must be finite and non-negative, not {sensitivity}")
    eps = Fraction(float_at_most(epsilon))
    if eps <= 0:
        raise InvalidParameterError(f"epsilon must be > 0, not {epsilon}")
    if size is not None and (int(size) != size or size < 1):
        raise InvalidParameterError(f"vector size must be an integer >= 1, not {size}")
    return _calibrated(sensitivity, float(eps), None if size is None else int(size))


@functools.lru_cache(maxsize=65_536)
def _calibrated(sensitivity: float, epsilon: float, size: Optional[int]) -> float:
    """:func:`calibrated_laplace_scale` on checked arguments (cached: the evaluation grid repeats them)."""
    eps = Fraction(epsilon)
    slack = 0 if size is None else size * (Fraction(2) ** LAPLACE_GRANULARITY_EXPONENT - Fraction(2) ** -1074)
    b = float((Fraction(sensitivity) + slack) / eps)
    if not (np.isfinite(b) and b > 0):
        raise InvalidParameterError(f"no finite Laplace scale for sensitivity {sensitivity} and epsilon {epsilon}")
    for _ in range(64):  # the map rounds up by a few ulps at most: step up until it fits
        if laplace_epsilon(b, sensitivity, size) <= eps:
            break
        b = float(np.nextafter(b, np.inf))
    else:  # pragma: no cover - OpenDP's map is within a few ulps of the exact value
        raise InvalidParameterError(f"could not calibrate a Laplace scale for epsilon {epsilon}")
    while True:  # then down while it still fits: the smallest such float
        lower = float(np.nextafter(b, 0.0))
        if lower <= 0 or laplace_epsilon(lower, sensitivity, size) > eps:
            break
        b = lower
    assert laplace_epsilon(b, sensitivity, size) <= eps, "calibrated scale exceeds its budget"
    return b


@dataclass(frozen=True)
class LaplaceNoise:
    """Laplace noise of one budget: mechanism = sensitivity × noise (docs/specification.md §2, §7, §8).

    Build it with :meth:`calibrate`. ``scale`` is :func:`calibrated_laplace_scale` ``(sensitivity,
    epsilon, size)``: the smallest float ``b`` whose OpenDP privacy map at ``d_in = sensitivity``
    is ≤ ε for a vector of ``size`` values (``size=None``: OpenDP's exact measurement). Every
    quantity is public or the caller's responsibility: a local sensitivity (iDP-IR, iDP) makes
    ``scale`` data-dependent, so it is never logged or published.

    Attributes
    ----------
    sensitivity : L1 sensitivity Δ of the whole vector (≥ 0, the values' unit).
    epsilon : the budget the vector spends, as the exact Fraction of the largest float ≤ ε.
    size : the number of values the budget covers (≥ 1), or None for the exact measurement.
    scale : the Laplace scale b (> 0, the values' unit).
    """

    sensitivity: float
    epsilon: Fraction
    size: Optional[int]
    scale: float

    @classmethod
    def calibrate(cls, *, sensitivity: float, epsilon: Fraction | float, size: Optional[int]) -> LaplaceNoise:
        """The noise whose OpenDP map certifies ``epsilon`` at ``sensitivity`` for ``size`` values.

        Raises
        ------
        InvalidParameterError
            Sensitivity negative or not finite, ε ≤ 0, or size < 1 (the message names the value).
        """
        scale = calibrated_laplace_scale(sensitivity, epsilon, size)
        return cls(float(sensitivity), Fraction(float_at_most(epsilon)), size, scale)

    @property
    def variance(self) -> float:
        """Variance of one draw, ``2 b²`` (the values' unit squared)."""
        return 2.0 * self.scale * self.scale

    @property
    def exact(self) -> bool:
        """True for OpenDP's exact measurement (granularity 2**-1074), False for the 2**-40 grid."""
        return self.size is None

    def spent(self) -> Fraction:
        """ε by OpenDP's privacy map at the sensitivity (≤ :attr:`epsilon`; exact Fraction of OpenDP's float)."""
        return laplace_epsilon(self.scale, self.sensitivity, self.size)

    def scales(self, size: int) -> np.ndarray:
        """This scale repeated ``size`` times, shape (size,): the per-value scales a :class:`NoiseSource` takes."""
        return np.full(int(size), self.scale)

    def sample(self, *, values: np.ndarray, source: Optional[NoiseSource] = None,
               attributes: Optional[np.ndarray] = None, clusters: Optional[np.ndarray] = None) -> np.ndarray:
        """``values + Lap(scale)`` elementwise: shape (m,) in, shape (m,) float64 out.

        ``source`` is the sampler (None: :class:`SecureLaplace`, exact when :attr:`exact`).
        ``attributes`` and ``clusters`` (shape (m,)) identify each value to a test source; they
        default to the empty name and the positions 0..m-1.

        Raises
        ------
        InvalidParameterError
            A value that is not finite.
        """
        vals = np.asarray(values, dtype=float)
        m = vals.size
        src = source if source is not None else SecureLaplace(exact=self.exact)
        names = attributes if attributes is not None else np.full(m, "", dtype=object)
        ids = clusters if clusters is not None else np.arange(m)
        return np.asarray(src.perturb(vals.ravel(), self.scales(m), names, ids), dtype=float).reshape(vals.shape)


class SecureLaplace:
    """Laplace noise from OpenDP (OS CSPRNG, floating-point-safe), the only production source.

    Each call perturbs the values of each distinct scale with one :func:`laplace_measurement` of
    the chunk's size (grid 2**LAPLACE_GRANULARITY_EXPONENT); the scales must come from
    :func:`calibrated_laplace_scale` at the size of the whole vector the budget covers (see there
    why chunks compose to that bound). ``exact=True`` uses OpenDP's exact measurement instead
    (granularity 2**-1074, no rounding slack): DiffGen's leaf counts keep it.
    """

    def __init__(self, *, exact: bool = False) -> None:
        _opendp()
        self._exact = bool(exact)

    def perturb(
        self, values: np.ndarray, scales: np.ndarray, attributes: np.ndarray, clusters: np.ndarray
    ) -> np.ndarray:
        values, scales = _checked(values, scales)
        out = np.empty_like(values)
        for scale in np.unique(scales):
            idx = np.flatnonzero(scales == scale)
            m = laplace_measurement(float(scale), None if self._exact else idx.size)
            out[idx] = np.asarray(m(values[idx].tolist()), dtype=float)
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

#: The environment variable pytest sets while a test runs; injected noise is accepted only then.
TEST_MARKER = "PYTEST_CURRENT_TEST"


def refuse_injected_noise(source: object, *, parameter: str) -> None:
    """Refuse an injected noise source outside a test run: InvalidParameterError naming ``parameter``.

    ``source``: what a caller passed as ``parameter`` (``_noise`` of ``Release.run`` and
    ``protect``, ``noise`` of the local driver); None (the release's own CSPRNG samplers) always
    passes. Anything else passes only while pytest runs a test (the environment variable
    :data:`TEST_MARKER` is set), so seeded noise never reaches a real release whose provenance would
    not say so (docs/privacy.md, "What is public"). Called before any Spark action.
    """
    import os

    if source is not None and not os.environ.get(TEST_MARKER):
        raise InvalidParameterError(f"{parameter}={type(source).__name__} is for tests only (seeded noise); a release "
                                    f"draws its noise from the OS CSPRNG: drop {parameter}")
