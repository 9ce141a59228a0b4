"""DiffGen / DistDiffGen randomness (docs/specification.md §7-8).

DiffGen needs four kinds of draws: the exponential mechanism (candidate selection and numeric
split intervals), a uniform point inside the chosen interval, Laplace noise on the leaf counts, and
(two-party protocol) Gaussian variables whose squares make up that Laplace noise. They come from a
:class:`DiffGenRandomness`. The exponential mechanism is sampled in its Gumbel-max form: the index
of ``max_j (log_weight_j + G_j)`` with iid standard Gumbel ``G_j`` has exactly the distribution
``Pr[j] ∝ exp(log_weight_j)``. OpenDP 0.16's ``make_noisy_max`` /
``make_report_noisy_max_gumbel`` implement permute-and-flip (exponential noise), which is ε-DP but
is *not* the exponential mechanism's distribution that docs/specification.md §7 prescribes, and it returns no
noisy maximum, which the two-party protocol needs; so Gumbel variables are drawn here from the OS
CSPRNG. Laplace and Gaussian noise use OpenDP.

**Not exact.** The Gumbel variables come from 52-bit uniforms, so each lies in [−3.60, 36.74]: a
candidate more than 40.34 log-weight units behind the best is never chosen, and DiffGen's selections
are not pure ε-DP (docs/specification.md §7, "Exponential mechanism sampler"). The synthetic kind's
selection uses the exact report-noisy-max of :mod:`fragrelease.rng.selection` (``noisy_max``).
"""
from __future__ import annotations

import secrets
from typing import Any, Protocol

import numpy as np

from fragrelease.errors import InvalidParameterError
from fragrelease.rng.laplace import SecureLaplace, _opendp, evaluation_generator
from fragrelease.rng.selection import check_scores, secure_noisy_max


class DiffGenRandomness(Protocol):
    """The draws DiffGen and DistDiffGen make (docs/specification.md §7). All arrays are float64.

    - ``gumbel(size)``: ``size`` iid standard Gumbel variables (location 0, scale 1).
    - ``uniform(lo, hi)``: one uniform value in the open interval (lo, hi), lo < hi.
    - ``laplace(values, scale)``: ``values + Lap(scale)`` elementwise, scale > 0.
    - ``gaussian(size, std)``: ``size`` iid N(0, std²) variables, std > 0.
    - ``noisy_max(scores, scale)``: the index of the largest ``score + Exponential(scale)`` over a
      vector of m ≥ 1 finite scores (report-noisy-max; exact in the secure source:
      :func:`fragrelease.rng.selection.secure_noisy_max`).
    """

    name: str

    def gumbel(self, size: int) -> np.ndarray: ...

    def uniform(self, lo: float, hi: float) -> float: ...

    def laplace(self, values: np.ndarray, scale: float) -> np.ndarray: ...

    def gaussian(self, size: int, std: float) -> np.ndarray: ...

    def noisy_max(self, scores: np.ndarray, scale: float) -> int: ...


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

    def noisy_max(self, scores: np.ndarray, scale: float) -> int:
        return secure_noisy_max(scores, scale)


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

    def noisy_max(self, scores: np.ndarray, scale: float) -> int:
        s = check_scores(scores)
        return int(np.argmax(s + self._gen.exponential(_check_positive("noisy-max scale", scale), size=s.size)))


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
