"""Exact divisible discrete-Laplace noise shares: differences of Pólya variables (docs/specification.md §10).

In a synthetic release each of m owners adds a noise *share* to its integer count vector and only the
sum of all owners' vectors is decoded (secure aggregation). If t owners collude with the aggregator
they know their own shares, so the shares of the k = m − t honest owners alone must already add up to
a full discrete Laplace. A share is ``X − Y`` with X, Y iid Pólya (negative binomial) ``NB(1/k, α)``,
the number of failures, ``P(j) = Γ(j+r)/(Γ(r) j!) · (1−α)^r · α^j`` with r = 1/k. The sum of k iid
``NB(1/k, α)`` is ``NB(1, α)``, the geometric ``P(j) = (1−α) α^j``, and the difference of two
independent geometrics is the discrete Laplace ``DLap(α)``: ``P(z) = (1−α)/(1+α) · α^|z|``. The
colluders' shares are independent of it (post-processing). ``DLap(α)`` on an integer vector of L1
sensitivity Δ is ``Δ·ln(1/α)``-DP. Sources: Goryczka and Xiong, "A comprehensive comparison of
multiparty secure additions with differential privacy", IEEE TDSC 2017; Balle, Bell, Gascón and
Nissim, "Private summation in the multi-message shuffle model", CCS 2020.

**Exact sampling.** α is a dyadic rational ``a / 2**64`` (:func:`discrete_laplace_alpha` rounds
``exp(−ε/Δ)`` *up*, so the mechanism spends at most ε). A Pólya draw is ``X = min{j : U < F(j)}``
(inversion) for a uniform real U in [0, 1) whose binary digits are the source's 64-bit words, read
lazily: after L bits, U lies in ``[n/2**L, (n+1)/2**L)``. Then ``P(X = j) = F(j) − F(j−1)`` exactly.
``F(j) = (1−α)^(1/k) · S_j``, ``S_j = Σ_{i≤j} c_i``, ``c_0 = 1``, ``c_{i+1} = c_i · α · (ki+1)/(k(i+1))``.
Every comparison ``U < F(j)`` is decided from *rigorous integer bounds* ``lo ≤ F(j)·2**(2P) ≤ hi``
(:func:`_cdf_bounds`, precision P bits): the c_i and S_j are computed in fixed point with floor for
the lower and ceiling for the upper bound (all factors are positive, so the roundings stay
one-sided), ``(1−α)^(1/k)`` by an exact integer k-th root (floor, and floor + 1 unless exact). The
decision is taken only when it holds for every U in its interval and every F in its bounds;
otherwise U gets 64 more bits and P doubles. The bound widths shrink to 0 with P and U's interval
with L, so the loop ends with probability 1 (it could only go on if U equalled F(j), an event of
probability 0). No float enters a decision: this is the same X as an infinite-precision inversion.

**Fast path.** Per (α, k) one table (cached) holds ``lo64[j] = ⌊lo·2**64 / 2**(2P)⌋`` and
``hi64[j] = ⌈hi·2**64 / 2**(2P)⌉`` (P = 128) as uint64, for j up to the first where ``hi64`` would
reach 2**64 (``1 − F(j) < 2**-64`` about) or :data:`_TABLE_CAP`. For a first word w (U in
``[w/2**64, (w+1)/2**64)``): ``w < lo64[j]`` proves ``U < F(j)`` and ``w ≥ hi64[j]`` proves
``U ≥ F(j)``; both sequences are nondecreasing in j, so ``np.searchsorted`` gives the smallest j of
the first kind and the count of the second; if they agree, that is X. Otherwise (U's first 64 bits
straddle a table entry: probability at most about 2·(table length)/2**64 per draw; or w lies above
the last entry's ``lo64``: probability ``1 − F(last)``, about 2**-64/α) the element goes through the
exact loop above, from the first j not yet excluded. A draw costs two searches over the table; the
table costs about 1.3·10⁴ integer steps (0.03 s) for ε/Δ ≈ 0.0034.

Randomness: :class:`SecureShareSource` reads the OS CSPRNG (:mod:`secrets`); :class:`SeededShareSource`
is for tests only.
"""
from __future__ import annotations

import decimal
import functools
import math
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

import numpy as np

from fragrelease.errors import InvalidParameterError

_WORD_BITS = 64
_ONE = 1 << _WORD_BITS
#: Fixed-point precision (bits) of the fast table's rigorous bounds.
_TABLE_PRECISION = 128
#: Largest fast-table length; draws beyond it take the exact loop (correct, slower). The table
#: reaches ``1 − F < 2**-64`` at about ``44·(mean of the geometric)`` entries: up to ε/Δ ≈ 2e-5.
_TABLE_CAP = 1 << 21
_DECIMAL_DIGITS = 60


class ShareSource(Protocol):
    """Where a share's random bits come from: ``words(count)`` returns ``count`` independent uniform
    64-bit words, a uint64 array of shape (count,) (count ≥ 0)."""

    def words(self, count: int) -> np.ndarray: ...


class SecureShareSource:
    """64-bit words from the OS CSPRNG (:func:`secrets.token_bytes`): the source of every release."""

    name = "os-csprng"

    def words(self, count: int) -> np.ndarray:
        if count < 0:
            raise InvalidParameterError(f"word count must be >= 0, not {count}")
        return np.frombuffer(secrets.token_bytes(8 * count), dtype=np.uint64).copy()


class SeededShareSource:
    """Deterministic words from a numpy generator with a fixed seed: **tests only**, never releases."""

    name = "numpy-seeded (tests only, not for releases)"

    def __init__(self, seed: int) -> None:
        self._bits = np.random.default_rng(seed).bit_generator

    def words(self, count: int) -> np.ndarray:
        if count < 0:
            raise InvalidParameterError(f"word count must be >= 0, not {count}")
        return np.asarray(self._bits.random_raw(count), dtype=np.uint64).reshape(count)


@functools.lru_cache(maxsize=4096, typed=True)  # a pure function of public values; the calibration costs 60-digit arithmetic
def discrete_laplace_alpha(epsilon: Fraction | int | str, sensitivity: int) -> Fraction:
    """The parameter α = a / 2**64 of the discrete Laplace that is ε-DP at L1 sensitivity Δ.

    ``a = ⌈2**64 · e⌉`` with ``e ≥ exp(−ε/Δ)`` a rigorous upper bound: for ε/Δ < 45, ε/Δ and exp are
    computed with :mod:`decimal` at 60 significant digits (relative error at most 10**-59 each, since
    Decimal's exp is correctly rounded; with ε/Δ < 45 the first moves exp by a factor below
    1 + 10**-57), and the result is multiplied by ``1 + 10**-40`` before rounding up; for ε/Δ ≥ 45,
    ``a = 1`` (exp(−45) < 2**-64). So ``α ≥ exp(−ε/Δ)`` and ``Δ·ln(1/α) ≤ ε``: the mechanism spends at
    most ε (Goryczka and Xiong 2017; docs/specification.md §10). Returns a Fraction with ``0 < α < 1``
    and a denominator dividing 2**64.

    Raises InvalidParameterError for ε ≤ 0 or not a finite number, Δ < 1 or not an int, or ε/Δ so
    small (below about 5e-20) that α would round up to 1 (infinite noise).
    """
    try:
        eps = Fraction(epsilon)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError):
        raise InvalidParameterError(f"epsilon must be a finite number, not {epsilon!r}") from None
    if eps <= 0:
        raise InvalidParameterError(f"epsilon must be > 0, not {epsilon}")
    rate = eps / _positive_int(sensitivity, "sensitivity")
    if rate >= 45:
        return Fraction(1, _ONE)
    ctx = decimal.Context(prec=_DECIMAL_DIGITS, rounding=decimal.ROUND_HALF_EVEN)
    x = ctx.divide(decimal.Decimal(rate.numerator), decimal.Decimal(rate.denominator))
    upper = Fraction(ctx.exp(-x)) * (1 + Fraction(1, 10 ** 40))
    a = math.ceil(upper * _ONE)
    if a >= _ONE:
        raise InvalidParameterError(f"epsilon / sensitivity = {float(rate)} is too small: alpha rounds up to 1")
    return Fraction(a, _ONE)


def _iroot(n: int, k: int) -> int:
    """⌊n^(1/k)⌋ for integers n ≥ 0, k ≥ 1 (Newton's method from above, then checked)."""
    if n < 2 or k == 1:
        return n
    x = 1 << -(-n.bit_length() // k)  # 2**⌈bits/k⌉ > n^(1/k)
    while True:
        y = ((k - 1) * x + n // x ** (k - 1)) // k
        if y >= x:
            break
        x = y
    if not (x ** k <= n < (x + 1) ** k):  # pragma: no cover - Newton from above lands on the floor
        raise AssertionError(f"integer root failed for k={k}")
    return x


def _cdf_bounds(a: int, k: int, precision: int) -> Iterator[tuple[int, int]]:
    """Rigorous bounds of the Pólya CDF, for j = 0, 1, 2, ... without end.

    Yields ``(lo, hi)`` with ``lo ≤ F(j) · 2**(2·precision) ≤ hi``, F the CDF of ``NB(1/k, a/2**64)``.
    Fixed point at 2**precision: ``c`` and ``S`` floored for ``lo``, ceiled for ``hi`` (positive
    factors only); the root factor ``(1−α)^(1/k)`` by :func:`_iroot`. ``precision ≥ 64``.
    """
    radicand = (_ONE - a) << (k * precision - _WORD_BITS)  # (1−α)·2**(k·precision), exact
    r_lo = _iroot(radicand, k)
    r_hi = r_lo if r_lo ** k == radicand else r_lo + 1
    c_lo = c_hi = s_lo = s_hi = 1 << precision
    j = 0
    while True:
        yield r_lo * s_lo, r_hi * s_hi
        num = a * (k * j + 1)
        den = (k * (j + 1)) << _WORD_BITS
        c_lo = c_lo * num // den
        c_hi = -(-c_hi * num // den)
        s_lo += c_lo
        s_hi += c_hi
        j += 1


@functools.lru_cache(maxsize=64)
def _table(a: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The fast path's ``(lo64, hi64)`` uint64 tables for ``NB(1/k, a/2**64)`` (see the module docstring)."""
    shift = 2 * _TABLE_PRECISION - _WORD_BITS
    lo64: list[int] = []
    hi64: list[int] = []
    for lo, hi in _cdf_bounds(a, k, _TABLE_PRECISION):
        h = -(-hi >> shift)
        if h >= _ONE or len(lo64) >= _TABLE_CAP:
            break
        lo64.append(lo >> shift)
        hi64.append(h)
    return np.array(lo64, dtype=np.uint64), np.array(hi64, dtype=np.uint64)


def _exact_index(a: int, k: int, n: int, bits: int, start: int, source: ShareSource) -> tuple[int, int, int]:
    """``X = min{j ≥ start : U < F(j)}`` decided exactly, U in ``[n/2**bits, (n+1)/2**bits)`` refined lazily.

    The caller guarantees ``U ≥ F(j)`` for every ``j < start``. Returns ``(X, n, bits)``: the index and
    U's final interval (for tests). Each undecided comparison adds one word to U and doubles the
    precision of the bounds.
    """
    precision = _TABLE_PRECISION
    while True:
        shift = 2 * precision
        for j, (lo, hi) in enumerate(_cdf_bounds(a, k, precision)):
            if j < start:
                continue
            if (n + 1) << shift <= lo << bits:  # (n+1)/2**bits ≤ lo/2**shift ≤ F(j): U < F(j)
                return j, n, bits
            if n << shift >= hi << bits:  # n/2**bits ≥ hi/2**shift ≥ F(j): U ≥ F(j)
                start = j + 1
                continue
            break  # undecided at this precision
        n = (n << _WORD_BITS) | int(source.words(1)[0])
        bits += _WORD_BITS
        precision *= 2


def polya_sample(alpha: Fraction, parts: int, size: int, source: ShareSource) -> np.ndarray:
    """``size`` iid ``NB(1/parts, alpha)`` draws (number of failures), int64 of shape (size,), exact.

    ``alpha`` is a Fraction in (0, 1) whose denominator divides 2**64; ``parts ≥ 1``. One word of
    ``source`` per draw, more for the rare draws that the fast table cannot decide (module docstring).
    Raises InvalidParameterError for a bad ``alpha``, ``parts`` or ``size``.
    """
    a = _alpha_word(alpha)
    k = _positive_int(parts, "parts")
    size = _positive_int(size, "size", 0)
    lo64, hi64 = _table(a, k)
    words = np.asarray(source.words(size), dtype=np.uint64).reshape(size)
    upper = np.searchsorted(lo64, words, side="right")  # first j with w < lo64[j]: U < F(j) proven
    lower = np.searchsorted(hi64, words, side="right")  # #{j : hi64[j] ≤ w}: U ≥ F(j) proven for j < it
    out = upper.astype(np.int64)
    for i in np.flatnonzero((upper != lower) | (upper >= lo64.size)):
        out[i] = _exact_index(a, k, int(words[i]), _WORD_BITS, int(lower[i]), source)[0]
    return out


def _alpha_word(alpha: Fraction) -> int:
    """``a`` with ``alpha = a / 2**64``; InvalidParameterError unless 0 < alpha < 1 with such a denominator."""
    try:
        frac = Fraction(alpha)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError):
        raise InvalidParameterError(f"alpha must be a number in (0, 1), not {alpha!r}") from None
    scaled = frac * _ONE
    if not (0 < frac < 1) or scaled.denominator != 1:
        raise InvalidParameterError(f"alpha must be a/2**64 with 0 < a < 2**64, not {alpha}")
    return int(scaled)


def _positive_int(value: int, what: str, least: int = 1) -> int:
    """``value`` as an int; InvalidParameterError unless it is an integer (not a bool) ≥ ``least``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise InvalidParameterError(f"{what} must be an integer >= {least}, not {value!r}")
    return int(value)


@dataclass(frozen=True)
class DivisibleDiscreteLaplace:
    """Noise shares whose sum over any ``parts`` owners is exactly ``DLap(alpha)`` (module docstring).

    ``alpha``: a Fraction ``a/2**64`` in (0, 1) (from :func:`discrete_laplace_alpha`); ``parts``: k ≥ 1,
    the number of honest owners whose shares alone must carry the full noise (m − t in
    docs/specification.md §10). Raises InvalidParameterError for a bad ``alpha`` or ``parts``.
    """

    alpha: Fraction
    parts: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", Fraction(_alpha_word(self.alpha), _ONE))
        object.__setattr__(self, "parts", _positive_int(self.parts, "parts"))

    @classmethod
    def calibrate(cls, epsilon: Fraction | int | str, sensitivity: int, parts: int) -> DivisibleDiscreteLaplace:
        """Shares whose k-sum is ε-DP at L1 sensitivity Δ: ``alpha = discrete_laplace_alpha(ε, Δ)``."""
        return cls(discrete_laplace_alpha(epsilon, sensitivity), parts)

    def share(self, size: int, source: ShareSource | None = None) -> np.ndarray:
        """One owner's share: ``X − Y``, X, Y iid ``NB(1/parts, alpha)``; int64 of shape (size,).

        ``source`` defaults to :class:`SecureShareSource` (the OS CSPRNG); tests pass a
        :class:`SeededShareSource`. Raises InvalidParameterError for ``size < 0``.
        """
        size = _positive_int(size, "size", 0)
        src = SecureShareSource() if source is None else source
        both = polya_sample(self.alpha, self.parts, 2 * size, src)
        return both[:size] - both[size:]

    def variance_of_sum(self, owners: int) -> float:
        """Variance of the sum of ``owners`` independent shares (per coordinate, in counts²).

        That sum is ``NB(owners/k, α) − NB(owners/k, α)``, of variance ``2·(owners/k)·α/(1−α)²``;
        at owners = k it is the discrete Laplace's ``2α/(1−α)²``. Raises InvalidParameterError for
        owners < 1.
        """
        return float(2 * Fraction(_positive_int(owners, "owners"), self.parts) * self.alpha / (1 - self.alpha) ** 2)

    def epsilon(self, sensitivity: int) -> float:
        """A float **upper bound** of ``Δ·ln(1/alpha)``, the ε of the k-sum at L1 sensitivity Δ.

        Computed as ``Δ·(ln 2**64 − ln a)`` with :mod:`decimal` at 100 digits (each ln correctly
        rounded: absolute error below 10**-97, relative below 10**-77 since ln(1/α) ≥ 2**-64), raised
        by a relative 10**-40 and rounded up to a float, so it is never below the true value; it may
        exceed the ε given to :meth:`calibrate` by the float rounding (relative 2**-52). Raises
        InvalidParameterError for Δ < 1.
        """
        delta = _positive_int(sensitivity, "sensitivity")
        ctx = decimal.Context(prec=100)
        a = decimal.Decimal(self.alpha.numerator * (_ONE // self.alpha.denominator))  # exact integer
        log_inverse = ctx.subtract(ctx.ln(decimal.Decimal(_ONE)), ctx.ln(a))
        value = Fraction(log_inverse) * delta * (1 + Fraction(1, 10 ** 40))
        f = float(value)
        return f if Fraction(f) >= value else math.nextafter(f, math.inf)
