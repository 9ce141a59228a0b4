"""Divisible discrete-Laplace noise shares (fragrelease/rng/polya.py; docs/specification.md §10).

A share is X − Y with X, Y iid Pólya NB(1/k, α); any k shares sum to DLap(α) (Goryczka and Xiong,
TDSC 2017). The draws are exact: every inversion step is decided from rigorous integer bounds, which
the tests check against a direct Fraction computation (U < F(j) ⟺ U^k < (1−α)·S_j^k).

Statistical checks use seeded sources (deterministic) except the one on the OS CSPRNG; every
acceptance check uses ``fit.counts_fit`` (chi-square, false alarm 1e-6) or a 6-sigma band
(two-sided normal tail 2e-9); each rejection check states its power.
"""
from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest
from fit import counts_fit, counts_reject

from fragrelease.errors import InvalidParameterError
from fragrelease.rng import polya
from fragrelease.rng.polya import (
    DivisibleDiscreteLaplace,
    SeededShareSource,
    discrete_laplace_alpha,
    polya_sample,
)

ALPHA = Fraction(3, 4)  # geometric mean α/(1−α) = 3; DLap variance 2α/(1−α)² = 24
N = 40_000
MASK = (1 << 64) - 1


class ListSource:
    """Words from a list, then from a seeded generator; records every word handed out."""

    def __init__(self, words, seed: int = 0) -> None:
        self.pending = [int(w) for w in words]
        self.rest = SeededShareSource(seed)
        self.used: list[int] = []

    def words(self, count: int) -> np.ndarray:
        take, self.pending = self.pending[:count], self.pending[count:]
        out = take + [int(w) for w in self.rest.words(count - len(take))]
        self.used += out
        return np.array(out, dtype=np.uint64)


# --- the laws, computed independently of the module ----------------------------------------------

def nb_pmf(alpha: Fraction, r: float, size: int) -> np.ndarray:
    """P(j), j < size, of NB(r, α) (failures), from log-gamma."""
    j = np.arange(size)
    lg = np.vectorize(math.lgamma)
    a = float(alpha)
    return np.exp(lg(j + r) - math.lgamma(r) - lg(j + 1.0) + r * math.log1p(-a) + j * math.log(a))


def difference_pmf(alpha: Fraction, r: float, size: int) -> tuple[np.ndarray, int]:
    """P(z) of NB(r, α) − NB(r, α) on z = −(size−1) .. size−1, as (pmf, offset of z = 0)."""
    p = nb_pmf(alpha, r, size)
    return np.convolve(p, p[::-1]), size - 1


def dlap_pmf(alpha: Fraction, size: int) -> tuple[np.ndarray, int]:
    a = float(alpha)
    z = np.arange(-(size - 1), size)
    return (1 - a) / (1 + a) * a ** np.abs(z), size - 1


def chi_cells(draws: np.ndarray, pmf: np.ndarray, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """The chi-square cells of integer ``draws`` against ``pmf`` (value v at index v + offset): the cells
    with an expected count ≥ 20, plus one cell for each tail beyond them. Returns (observed, expected)."""
    n = draws.size
    keep = np.flatnonzero(pmf * n >= 20)
    lo, hi = keep[0], keep[-1]
    expected = np.concatenate([[pmf[:lo].sum()], pmf[lo:hi + 1], [1.0 - pmf[:hi + 1].sum()]]) * n
    idx = np.clip(draws + offset, lo - 1, hi + 1) - (lo - 1)
    observed = np.bincount(idx, minlength=hi - lo + 3)
    cells = expected >= 5  # the tail cells go when (nearly) empty: merged into their neighbours
    if not cells[0]:
        observed[1] += observed[0]
        expected[1] += expected[0]
    if not cells[-1]:
        observed[-2] += observed[-1]
        expected[-2] += expected[-1]
    observed, expected = observed[cells], expected[cells]
    expected *= n / expected.sum()
    return observed, expected


def chi_fits(draws: np.ndarray, pmf: np.ndarray, offset: int) -> tuple[bool, str]:
    """(the draws fit ``pmf`` at the suite's false-alarm rate (tests/helpers/fit.py), a message)."""
    observed, expected = chi_cells(draws, pmf, offset)
    return counts_fit(observed, expected), f"observed {observed.tolist()} expected {np.round(expected, 1).tolist()}"


def _s(alpha: Fraction, k: int, j: int) -> Fraction:
    """S_j = Σ_{i≤j} c_i, c_0 = 1, c_{i+1} = c_i·α·(i + 1/k)/(i + 1), in Fractions."""
    c = s = Fraction(1)
    for i in range(j):
        c *= alpha * (i + Fraction(1, k)) / (i + 1)
        s += c
    return s


def oracle_below(u: Fraction, alpha: Fraction, k: int, j: int) -> bool:
    """U < F(j) by k-th powers in Fractions: U^k < (1−α)·S_j^k (both sides ≥ 0)."""
    return u ** k < (1 - alpha) * _s(alpha, k, j) ** k


def oracle_bits(alpha: Fraction, k: int, j: int, bits: int) -> int:
    """⌊F(j)·2**bits⌋ by bisection on the oracle (no code of the module)."""
    lo, hi = 0, 1 << bits  # lo < F(j)·2**bits ≤ hi (F(j) > 0; F(j) < 1 for a dyadic α)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if oracle_below(Fraction(mid, 1 << bits), alpha, k, j):
            lo = mid
        else:
            hi = mid
    return lo  # ⌊F(j)·2**bits⌋, or that − 1 when F(j)·2**bits is an integer


def assert_decision_exact(x: int, n: int, bits: int, alpha: Fraction, k: int) -> None:
    """U in [n/2**bits, (n+1)/2**bits) proves X = x: every U there has F(x−1) ≤ U < F(x)."""
    if x:
        assert not oracle_below(Fraction(n, 1 << bits), alpha, k, x - 1)
    assert Fraction(n + 1, 1 << bits) ** k <= (1 - alpha) * _s(alpha, k, x) ** k


# --- 1. calibration ----------------------------------------------------------------------------------

@pytest.mark.parametrize("eps, delta", [(Fraction("0.0067"), 2), (Fraction(1), 1), (Fraction(1, 3), 5),
                                        (Fraction(20), 1), (Fraction(1, 10 ** 12), 3)])
def test_alpha_rounds_up_so_the_spent_epsilon_is_at_most_the_declared_one(eps, delta):
    alpha = discrete_laplace_alpha(eps, delta)
    assert 0 < alpha < 1 and (1 << 64) % alpha.denominator == 0
    ctx = decimal.Context(prec=120)
    dec = lambda f: ctx.divide(decimal.Decimal(f.numerator), decimal.Decimal(f.denominator))  # noqa: E731
    target = ctx.exp(-dec(eps / delta))
    assert dec(alpha) >= target  # α ≥ exp(−ε/Δ)
    assert dec(alpha - Fraction(2, 1 << 64)) < target  # and not wastefully larger (within 2 ulps)
    spent = ctx.multiply(decimal.Decimal(delta), ctx.ln(ctx.divide(1, dec(alpha))))
    assert spent <= dec(eps)  # Δ·ln(1/α) ≤ ε
    noise = DivisibleDiscreteLaplace.calibrate(eps, delta, parts=3)
    assert noise.alpha == alpha
    assert decimal.Decimal(noise.epsilon(delta)) >= spent  # a float upper bound ...
    assert noise.epsilon(delta) <= float(eps) * (1 + 2 ** -50)  # ... and a tight one


def test_huge_epsilon_gives_the_smallest_alpha():
    assert discrete_laplace_alpha(Fraction(100), 2) == Fraction(1, 1 << 64)  # exp(−50) < 2**-64


@pytest.mark.parametrize("eps, delta", [(0, 1), (Fraction(-1, 2), 1), (1, 0), (1, -3), (1, True), (1, 1.5),
                                        (Fraction(1, 10 ** 21), 1), ("nan", 1)])
def test_bad_epsilon_or_sensitivity_is_refused(eps, delta):
    with pytest.raises(InvalidParameterError):
        discrete_laplace_alpha(eps, delta)


@pytest.mark.parametrize("alpha, parts", [(Fraction(1, 3), 2), (Fraction(0), 2), (Fraction(1), 2),
                                          (ALPHA, 0), (ALPHA, 2.0)])
def test_bad_alpha_or_parts_is_refused(alpha, parts):
    with pytest.raises(InvalidParameterError):
        DivisibleDiscreteLaplace(alpha, parts)


# --- 2. one Pólya draw -----------------------------------------------------------------------------

@pytest.mark.parametrize("k, seed", [(1, 11), (4, 12)])
def test_one_polya_draw_follows_its_pmf(k, seed):
    draws = polya_sample(ALPHA, k, N, SeededShareSource(seed))
    assert draws.dtype == np.int64 and draws.min() >= 0
    fits, p = chi_fits(draws, nb_pmf(ALPHA, 1 / k, 200), 0)
    assert fits, p


# --- 3. sums of shares --------------------------------------------------------------------------------

def _sum_of_shares(noise: DivisibleDiscreteLaplace, owners: int, seed: int) -> np.ndarray:
    source = SeededShareSource(seed)
    return sum(noise.share(N, source) for _ in range(owners))


def test_k_shares_sum_to_the_discrete_laplace():
    noise = DivisibleDiscreteLaplace(ALPHA, 3)
    fits, p = chi_fits(_sum_of_shares(noise, 3, 21), *dlap_pmf(ALPHA, 200))
    assert fits, p
    assert noise.variance_of_sum(3) == pytest.approx(24.0)


def _variance_band(pmf: np.ndarray, offset: int, n: int) -> tuple[float, float]:
    """Variance of the law and 6 standard deviations of a sample variance of n draws (normal approx)."""
    z = np.arange(pmf.size) - offset
    var = float((pmf * z ** 2).sum() - (pmf * z).sum() ** 2)
    m4 = float((pmf * z ** 4).sum())
    return var, 6 * math.sqrt((m4 - var ** 2) / n)


def test_2k_shares_sum_to_a_difference_of_nb2_with_the_stated_variance():
    noise = DivisibleDiscreteLaplace(ALPHA, 3)
    total = _sum_of_shares(noise, 6, 31)
    pmf, offset = difference_pmf(ALPHA, 2.0, 300)
    var, band = _variance_band(pmf, offset, N)
    assert noise.variance_of_sum(6) == pytest.approx(var, rel=1e-9) == pytest.approx(48.0)
    assert band < 0.1 * var  # the band tells 48 from the DLap's 24 or an NB(3)-difference's 72
    assert abs(float(np.var(total)) - noise.variance_of_sum(6)) < band
    fits, p = chi_fits(total, pmf, offset)
    assert fits, p


# --- 4. the exact path --------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [1, 3, 7, 43])
@pytest.mark.parametrize("precision", [64, 128])
def test_cdf_bounds_enclose_the_cdf_and_shrink_with_precision(k, precision):
    """lo ≤ F(j)·2**(2P) ≤ hi against the k-th-power oracle, and hi − lo ≤ ((j+2)² + 4)·2**P: the bounds
    that every decision of the sampler rests on are rigorous and tighten as P grows (each rounding of
    c_i costs one unit of 2**-P and later steps shrink it, so S_j is off by ≤ j(j+1)/2 units; the
    root is off by ≤ 1 unit and multiplies S_j ≤ (1−α)^(-1/k) ≤ 4)."""
    scale = 1 << (2 * precision)
    for j, (lo, hi) in zip(range(25), polya._cdf_bounds(polya._alpha_word(ALPHA), k, precision)):
        target = (1 - ALPHA) * _s(ALPHA, k, j) ** k  # F(j)**k
        assert Fraction(lo, scale) ** k <= target <= Fraction(hi, scale) ** k, j
        assert 0 <= hi - lo <= ((j + 2) ** 2 + 4) << precision, j


def test_integer_root_is_the_floor():
    rng = np.random.default_rng(3)
    for k in (1, 2, 3, 43, 100):
        for bits in (1, 7, 64, 300, 5000):
            n = int.from_bytes(rng.bytes(bits // 8 + 1), "big") >> (7 - bits % 8 if bits % 8 else 0)
            for m in (n, n + 1, max(n - 1, 0), 0, 1, 5 ** k, 5 ** k - 1):
                x = polya._iroot(m, k)
                assert x ** k <= m < (x + 1) ** k, (k, m)


@pytest.mark.parametrize("k, j, step, expected", [(3, 2, -1, 2), (3, 2, +1, 3), (5, 5, -1, 5), (7, 7, +1, 8)])
def test_a_uniform_at_a_cdf_boundary_is_decided_exactly(k, j, step, expected):
    """U's first 192 bits are ⌊F(j)·2**192⌋ ± 1: the table and the first refinement cannot decide."""
    n = oracle_bits(ALPHA, k, j, 192) + step
    source = ListSource([n >> 128, (n >> 64) & MASK, n & MASK])
    assert polya_sample(ALPHA, k, 1, source)[0] == expected
    assert len(source.used) == 3  # three words were needed
    x, n_final, bits = polya._exact_index(polya._alpha_word(ALPHA), k, n >> 128, 64, 0,
                                          ListSource([(n >> 64) & MASK, n & MASK]))
    assert (x, n_final, bits) == (expected, n, 192)
    assert_decision_exact(x, n_final, bits, ALPHA, k)


def test_a_uniform_equal_to_a_dyadic_cdf_value_is_at_or_above_it():
    """k = 1: F(j) = 1 − α^(j+1) is dyadic; U = F(j) exactly (zero bits after) gives X = j + 1."""
    j = 40
    f = (1 - ALPHA ** (j + 1)) * (1 << 128)
    assert f.denominator == 1
    n = int(f)
    source = ListSource([n >> 64, n & MASK, 0])
    assert polya_sample(ALPHA, 1, 1, source)[0] == j + 1
    assert len(source.used) == 2


def test_draws_beyond_the_fast_table_are_exact():
    a = polya._alpha_word(ALPHA)
    table_size = polya._table(a, 3)[0].size
    source = ListSource([MASK, MASK, MASK], seed=5)  # U ≥ 1 − 2**-192: far in the tail
    x = polya_sample(ALPHA, 3, 1, source)[0]
    assert x >= table_size
    n = 0
    for w in source.used:
        n = (n << 64) | w
    assert_decision_exact(int(x), n, 64 * len(source.used), ALPHA, 3)


@pytest.mark.parametrize("alpha, k, count", [(ALPHA, 1, 2_000), (ALPHA, 3, 2_000),
                                             (discrete_laplace_alpha(Fraction("0.0067"), 2), 43, 300)])
def test_fast_table_and_exact_path_agree(alpha, k, count):
    words = SeededShareSource(41).words(count)
    fast = polya_sample(alpha, k, count, ListSource(words))
    a = polya._alpha_word(alpha)
    exact = [polya._exact_index(a, k, int(w), 64, 0, SeededShareSource(0))[0] for w in words]
    assert fast.tolist() == exact


# --- 5. the checker has power -------------------------------------------------------------------------

def test_a_broken_share_fails_the_same_checker():
    """Power: the broken sums below differ from DLap(3/4) in variance by a third or more; at N = 40,000
    their chi-square p-values are below 1e-100 (far below REJECT = 1e-3 for any seed)."""
    pmf, offset = dlap_pmf(ALPHA, 200)
    too_few = _sum_of_shares(DivisibleDiscreteLaplace(ALPHA, 3), 2, 51)  # k − 1 owners
    wrong_parts = _sum_of_shares(DivisibleDiscreteLaplace(ALPHA, 4), 3, 52)  # NB(1/(k+1)) shares
    for broken in (too_few, wrong_parts):
        assert counts_reject(*chi_cells(broken, pmf, offset))


# --- 6. the secure source -----------------------------------------------------------------------------

def test_the_os_csprng_is_the_default_source(monkeypatch):
    calls = []
    real = polya.secrets.token_bytes

    def recording(nbytes):
        calls.append(nbytes)
        return real(nbytes)

    monkeypatch.setattr(polya.secrets, "token_bytes", recording)
    noise = DivisibleDiscreteLaplace(ALPHA, 3)
    out = noise.share(7)
    assert out.dtype == np.int64 and out.shape == (7,)
    assert calls[0] == 8 * 14  # one 64-bit word per Pólya draw, two draws per share
    empty = noise.share(0)
    assert empty.dtype == np.int64 and empty.shape == (0,)
    with pytest.raises(InvalidParameterError):
        noise.share(-1)


def test_secure_shares_sum_to_the_discrete_laplace():
    noise = DivisibleDiscreteLaplace(ALPHA, 3)
    total = sum(noise.share(N) for _ in range(3))
    fits, p = chi_fits(total, *dlap_pmf(ALPHA, 200))
    assert fits, p
