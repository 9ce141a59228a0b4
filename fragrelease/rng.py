"""The one module that owns randomness (docs/specification.md §8; seeds only in tests).

Every random draw of a release comes from here:

- :class:`SecureLaplace` perturbs values with Laplace noise through OpenDP's ``make_laplace``, which
  samples from the operating system's CSPRNG with exact arithmetic and releases values on a grid,
  so the output resists the floating-point attack on naive samplers (Mironov, CCS 2012). The grid
  is 2**-40 (:data:`LAPLACE_GRANULARITY_EXPONENT`) and the vector size is known, which is what
  makes it fast; :func:`calibrated_laplace_scale` computes every release's scale with OpenDP's own
  privacy map, which charges the rounding to that grid.
- :func:`secure_random_keys` draws 63-bit integers from :mod:`secrets` (the OS CSPRNG) for shuffling
  the row order of a release and for assigning records to owners in the demo split.

There are no seeds here. Tests that need reproducible noise pass their own :class:`NoiseSource`
(see ``tests/helpers/noise_injection.py``); the CLI and the jobs never accept one from a user.
"""
from __future__ import annotations

import functools
import secrets
from fractions import Fraction
from types import SimpleNamespace
from typing import Any, Optional, Protocol

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


def laplace_epsilon(scale: float, sensitivity: float, size: int) -> Fraction:
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


def calibrated_laplace_scale(sensitivity: float, epsilon: Fraction | float, size: int) -> float:
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
    size : int, ≥ 1, the number of values the budget covers.

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
    if int(size) != size or size < 1:
        raise InvalidParameterError(f"vector size must be an integer >= 1, not {size}")
    return _calibrated(sensitivity, float(eps), int(size))


@functools.lru_cache(maxsize=65_536)
def _calibrated(sensitivity: float, epsilon: float, size: int) -> float:
    """:func:`calibrated_laplace_scale` on checked arguments (cached: the evaluation grid repeats them)."""
    eps = Fraction(epsilon)
    slack = size * (Fraction(2) ** LAPLACE_GRANULARITY_EXPONENT - Fraction(2) ** -1074)
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


def secure_token_bytes(size: int) -> bytes:
    """``size`` bytes from the OS CSPRNG (:func:`secrets.token_bytes`): secret keys such as a release's pseudonym key."""
    return secrets.token_bytes(size)


def secure_random_keys(size: int) -> np.ndarray:
    """``size`` independent uniform integers in [0, 2**63) from the OS CSPRNG, as int64."""
    if size < 0:
        raise InvalidParameterError(f"size must be >= 0, not {size}")
    raw = np.frombuffer(secrets.token_bytes(8 * size), dtype=np.uint64) if size else np.empty(0, np.uint64)
    return (raw >> np.uint64(1)).astype(np.int64)


def secure_bytes(size: int) -> bytes:
    """``size`` bytes from the OS CSPRNG (:mod:`secrets`): key material (Ed25519 signing keys,
    :func:`fragrelease.signing.generate_private_key`)."""
    if size < 1:
        raise InvalidParameterError(f"size must be >= 1, not {size}")
    return secrets.token_bytes(size)


def secure_permutation(size: int) -> np.ndarray:
    """A uniformly random permutation of ``0 .. size-1`` (int64) from the OS CSPRNG.

    Sorting 63-bit keys from :func:`secure_random_keys`; ties (probability < size² / 2⁶⁴) keep index
    order. Used to order candidate tuples in the cloning anonymizer (docs/specification.md §5 step 4).
    """
    return np.argsort(secure_random_keys(size), kind="stable").astype(np.int64)


# ----------------------------------------------------------------------------------------------
# DiffGen / DistDiffGen randomness (docs/specification.md §7)
# ----------------------------------------------------------------------------------------------
#
# DiffGen needs four kinds of draws: the exponential mechanism (candidate selection and numeric
# split intervals), a uniform point inside the chosen interval, Laplace noise on the leaf counts, and
# (two-party protocol) Gaussian variables whose squares make up that Laplace noise. They come from a
# :class:`DiffGenRandomness`. The exponential mechanism is sampled in its Gumbel-max form: the index
# of ``max_j (log_weight_j + G_j)`` with iid standard Gumbel ``G_j`` has exactly the distribution
# ``Pr[j] ∝ exp(log_weight_j)``. OpenDP 0.16's ``make_noisy_max`` /
# ``make_report_noisy_max_gumbel`` implement permute-and-flip (exponential noise), which is ε-DP but
# is *not* the exponential mechanism's distribution that docs/specification.md §7 prescribes, and it returns no
# noisy maximum, which the two-party protocol needs; so Gumbel variables are drawn here from the OS
# CSPRNG. Laplace and Gaussian noise use OpenDP.


class DiffGenRandomness(Protocol):
    """The draws DiffGen and DistDiffGen make (docs/specification.md §7). All arrays are float64.

    - ``gumbel(size)``: ``size`` iid standard Gumbel variables (location 0, scale 1).
    - ``uniform(lo, hi)``: one uniform value in the open interval (lo, hi), lo < hi.
    - ``laplace(values, scale)``: ``values + Lap(scale)`` elementwise, scale > 0.
    - ``gaussian(size, std)``: ``size`` iid N(0, std²) variables, std > 0.
    """

    name: str

    def gumbel(self, size: int) -> np.ndarray: ...

    def uniform(self, lo: float, hi: float) -> float: ...

    def laplace(self, values: np.ndarray, scale: float) -> np.ndarray: ...

    def gaussian(self, size: int, std: float) -> np.ndarray: ...


#: Random bits per uniform draw of :func:`secure_open_unit` (and per Gumbel variable).
UNIFORM_BITS = 52


def _open_unit_from_bits(raw: np.ndarray) -> np.ndarray:
    """Map 64-bit words to floats strictly inside (0, 1): ``U = (m + 1/2) / 2**52``, m = a word's top 52 bits.

    ``raw``: array of any shape of uint64 words (other integer dtypes are read as uint64). Returns
    float64 of the same shape. ``m + 1/2`` needs at most 53 significant bits, so every U is exact in
    float64 (no rounding) and lies in ``[2**-53, 1 - 2**-53]``: never 0 and never 1 for any input
    (with 53 bits, the all-ones word gave ``(2**53 - 1/2) / 2**53``, which rounds to 1.0 and made
    the Gumbel variable +inf). The 2**52 values are the midpoints of a uniform grid, each of
    probability 2**-52 for uniform words. Source: docs/specification.md §8 (randomness).
    """
    m = np.asarray(raw).astype(np.uint64) >> np.uint64(64 - UNIFORM_BITS)
    return (m.astype(np.float64) + 0.5) / float(1 << UNIFORM_BITS)


def _gumbel_from_bits(raw: np.ndarray) -> np.ndarray:
    """Standard Gumbel variables ``-ln(-ln U)`` with U from :func:`_open_unit_from_bits` (same shape as ``raw``).

    Since ``2**-53 <= U <= 1 - 2**-53``, the result is finite: about -3.60 for the all-zero word and
    +36.7 for the all-ones word.
    """
    return -np.log(-np.log(_open_unit_from_bits(raw)))


def _secure_words(size: int) -> np.ndarray:
    if size < 0:
        raise InvalidParameterError(f"size must be >= 0, not {size}")
    if size == 0:
        return np.empty(0, dtype=np.uint64)
    return np.frombuffer(secrets.token_bytes(8 * size), dtype=np.uint64)


def secure_open_unit(size: int) -> np.ndarray:
    """``size`` iid uniform floats strictly inside (0, 1) from the OS CSPRNG (52 random bits each; float64).

    Raises InvalidParameterError for ``size < 0``.
    """
    return _open_unit_from_bits(_secure_words(size))


def secure_gumbel(size: int) -> np.ndarray:
    """``size`` iid standard Gumbel variables ``-ln(-ln U)`` with U from :func:`secure_open_unit` (always finite)."""
    return _gumbel_from_bits(_secure_words(size))


def _check_positive(name: str, value: float) -> float:
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise InvalidParameterError(f"{name} must be finite and > 0, not {value}")
    return value


def _check_interval(lo: float, hi: float) -> tuple[float, float]:
    lo, hi = float(lo), float(hi)
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise InvalidParameterError(f"uniform draw needs finite lo < hi, not [{lo}, {hi}]")
    return lo, hi


class SecureDiffGenRandomness:
    """Production randomness for DiffGen releases: OS CSPRNG (Gumbel, uniform) and OpenDP (Laplace, Gaussian)."""

    name = "secure (secrets Gumbel/uniform, OpenDP Laplace/Gaussian)"

    def __init__(self) -> None:
        self._dp = _opendp()
        self._laplace = SecureLaplace(exact=True)  # leaf counts: scale 2/ε, OpenDP's exact grid
        self._gauss: dict[float, Any] = {}  # OpenDP measurements (opendp ships no type information)

    def gumbel(self, size: int) -> np.ndarray:
        return secure_gumbel(size)

    def uniform(self, lo: float, hi: float) -> float:
        lo, hi = _check_interval(lo, hi)
        while True:
            x = lo + (hi - lo) * float(secure_open_unit(1)[0])
            if lo < x < hi:  # rounding can land on an end point; redraw (probability ~2**-53)
                return x

    def laplace(self, values: np.ndarray, scale: float) -> np.ndarray:
        scale = _check_positive("Laplace scale", scale)
        values = np.asarray(values, dtype=float)
        return self._laplace.perturb(values, np.full(values.shape, scale), values, values)

    def gaussian(self, size: int, std: float) -> np.ndarray:
        std = _check_positive("Gaussian standard deviation", std)
        m = self._gauss.get(std)
        if m is None:
            dp = self._dp
            m = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float),
                                   scale=std)
            self._gauss[std] = m
        return np.asarray(m([0.0] * int(size)), dtype=float) if size else np.empty(0)


class _NumpyDiffGenRandomness:
    """Same draws from a numpy generator (not cryptographically secure)."""

    def __init__(self, gen: np.random.Generator) -> None:
        self._gen = gen

    def gumbel(self, size: int) -> np.ndarray:
        # the same 52-bit construction as the secure source, from this generator's 64-bit words
        words = self._gen.integers(0, np.iinfo(np.uint64).max, size=int(size), dtype=np.uint64, endpoint=True)
        return _gumbel_from_bits(words)

    def uniform(self, lo: float, hi: float) -> float:
        lo, hi = _check_interval(lo, hi)
        while True:
            x = float(self._gen.uniform(lo, hi))
            if lo < x < hi:
                return x

    def laplace(self, values: np.ndarray, scale: float) -> np.ndarray:
        scale = _check_positive("Laplace scale", scale)
        values = np.asarray(values, dtype=float)
        return values + self._gen.laplace(0.0, scale, size=values.shape)

    def gaussian(self, size: int, std: float) -> np.ndarray:
        return self._gen.normal(0.0, _check_positive("Gaussian standard deviation", std), size=size)


class FastDiffGenRandomness(_NumpyDiffGenRandomness):
    """numpy PCG64 seeded from the OS CSPRNG: **evaluation only** (the accuracy experiment), never releases."""

    name = "numpy-pcg64 (evaluation only, not for releases)"

    def __init__(self) -> None:
        super().__init__(evaluation_generator())


class SeededDiffGenRandomness(_NumpyDiffGenRandomness):
    """Deterministic numpy generator from a fixed seed: **tests only** (reproducible runs), never releases."""

    name = "numpy-seeded (tests only, not for releases)"

    def __init__(self, seed: int) -> None:
        super().__init__(np.random.default_rng(seed))


def gumbel_max(log_weights: np.ndarray, randomness: DiffGenRandomness) -> tuple[int, float]:
    """Exponential-mechanism draw in Gumbel-max form: ``(argmax_j, max_j)`` of ``log_weights + G``.

    ``Pr[index = j] = exp(log_weights[j]) / Σ_k exp(log_weights[k])`` exactly; entries equal to
    ``-inf`` (zero weight) are never chosen. The noisy maximum is returned for the two-party protocol
    (each party reports its own maximum; the larger one wins, which is the same distribution over the
    union of both parties' candidates).

    Raises
    ------
    InvalidParameterError
        Empty input, NaN or +inf weights, or every weight zero.
    """
    lw = np.asarray(log_weights, dtype=float)
    if lw.size == 0:
        raise InvalidParameterError("the exponential mechanism needs at least one candidate, got none")
    if np.any(np.isnan(lw)) or np.any(lw == np.inf):
        raise InvalidParameterError(f"log-weights must be finite or -inf, not {lw[np.isnan(lw) | (lw == np.inf)][0]}")
    if np.all(lw == -np.inf):
        raise InvalidParameterError("the exponential mechanism needs a candidate of positive weight, all are zero")
    noisy = lw + randomness.gumbel(lw.size)
    noisy[lw == -np.inf] = -np.inf
    j = int(np.argmax(noisy))
    return j, float(noisy[j])
