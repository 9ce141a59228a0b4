"""Goodness-of-fit checks for tests of random draws, with one false-alarm rate.

Draws from the OS CSPRNG (``fragrelease.rng``) cannot be seeded, so a test that accepts a law when a
p-value exceeds a threshold fails a correct sampler with probability equal to that threshold, on
every run. At 1e-3 over the suite's ~20 such checks about one CI run in 60 failed on a correct
sampler (0.13.0's CI: ``test_diffgen_keeps_the_exact_sampler``, p = 0.0006 at n = 4,000; the same
sampler at n = 200,000 gave p = 0.12, and 300 repeats at n = 4,000 gave p < 0.01 in 0.3 %). Every
"the draws follow the law" check uses :data:`FALSE_ALARM` = 1e-6 instead: with about 20 checks, one
false failure in about 50,000 runs. A gross error (no noise, a reused draw, a scale off by 1.5× or
more at the sizes used) still gives p far below it (e.g. Laplace(20) draws tested against
Laplace(30) at n = 2,000: p < 10^-7.4 in 99.9 % of 20,000 simulated runs).

"The wrong law is rejected" checks keep a threshold of their own (``REJECT``): their false failure
is the power shortfall, which each such test states.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import stats

#: Probability that one acceptance check fails a correct sampler.
FALSE_ALARM = 1e-6
#: Threshold below which a check counts a law as rejected (power checks against a planted defect).
REJECT = 1e-3


def ks_pvalue(draws, cdf: Callable | str) -> float:
    """One-sample Kolmogorov–Smirnov p-value of ``draws`` against ``cdf``."""
    return float(stats.kstest(np.asarray(draws, dtype=float), cdf).pvalue)


def follows(draws, cdf: Callable | str) -> bool:
    """True unless a KS test rejects ``cdf`` at :data:`FALSE_ALARM`."""
    return ks_pvalue(draws, cdf) > FALSE_ALARM


def rejects(draws, cdf: Callable | str) -> bool:
    """True when a KS test rejects ``cdf`` at :data:`REJECT`."""
    return ks_pvalue(draws, cdf) < REJECT


def same_law(a, b) -> bool:
    """True unless a two-sample KS test tells ``a`` and ``b`` apart at :data:`FALSE_ALARM`."""
    return float(stats.ks_2samp(a, b).pvalue) > FALSE_ALARM


def counts_fit(observed, expected) -> bool:
    """True unless a chi-square test rejects ``expected`` counts at :data:`FALSE_ALARM`."""
    return float(stats.chisquare(observed, expected).pvalue) > FALSE_ALARM


def counts_reject(observed, expected) -> bool:
    """True when a chi-square test rejects ``expected`` counts at :data:`REJECT` (a power check)."""
    return float(stats.chisquare(observed, expected).pvalue) < REJECT
