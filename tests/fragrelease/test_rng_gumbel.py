"""Uniform and Gumbel draws of fragrelease/rng/diffgen.py (issue 13 item 7; docs/specification.md §8).

U must lie strictly inside (0, 1) for every 64-bit word, so the Gumbel variable -ln(-ln U) is always
finite. With 53-bit uniforms the all-ones word gave U = 1.0 (probability 2**-53) and a Gumbel of +inf.
"""
from __future__ import annotations

import numpy as np
from fit import follows
from scipy import stats

from fragrelease.rng.diffgen import (
    SecureDiffGenRandomness,
    SeededDiffGenRandomness,
    _open_unit_from_bits,
    secure_gumbel,
    secure_open_unit,
)

ALL_ONES = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
# the all-zero and all-ones words, the words around the top and bottom of the 52-bit grid, a middle one
EXTREMES = np.array([0, 1, (1 << 12) - 1, 1 << 12, 1 << 63, (1 << 64) - (1 << 12) - 1, (1 << 64) - (1 << 12),
                     (1 << 64) - (1 << 11), (1 << 64) - 2, int(ALL_ONES)], dtype=np.uint64)


def test_extreme_bit_patterns_give_uniforms_strictly_inside_0_1_and_finite_gumbels():
    u = _open_unit_from_bits(EXTREMES)
    assert np.all(u > 0.0) and np.all(u < 1.0), u
    assert u[0] == 2.0 ** -53 and u[-1] == 1.0 - 2.0 ** -53  # the exact ends of the grid
    with np.errstate(all="ignore"):  # the old 53-bit map gave U = 1.0 here, so -ln(-ln U) = +inf
        g = -np.log(-np.log(u))  # the Gumbel transform secure_gumbel applies
    assert np.all(np.isfinite(g)), g
    assert -3.7 < g.min() and g.max() < 36.8
    from fragrelease.rng.diffgen import _gumbel_from_bits

    assert np.array_equal(_gumbel_from_bits(EXTREMES), g)  # what secure_gumbel computes from its words


def test_uniforms_are_exact_midpoints_of_the_52_bit_grid():
    words = np.frombuffer(np.random.default_rng(5).bytes(8 * 10_000), dtype=np.uint64)
    words = np.concatenate([words, EXTREMES])
    m = (_open_unit_from_bits(words) * 2.0 ** 52) - 0.5  # exact: no rounding anywhere
    assert np.array_equal(m, np.floor(m))
    assert np.array_equal(m.astype(np.uint64), words >> np.uint64(12))


def test_secure_uniform_and_gumbel_distributions_ks():
    """Fixed sizes: 4,000 draws each against U(0, 1) and the standard Gumbel (KS, accepted at p > 1e-6: tests/helpers/fit.py)."""
    u = secure_open_unit(4000)
    assert np.all((u > 0) & (u < 1))
    assert follows(u, stats.uniform.cdf)
    assert follows(secure_gumbel(4000), stats.gumbel_r.cdf)
    assert follows(SecureDiffGenRandomness().gumbel(4000), stats.gumbel_r.cdf)
    seeded = SeededDiffGenRandomness(11).gumbel(4000)  # the numpy-backed sources use the same 52-bit map
    assert np.all(np.isfinite(seeded))
    assert follows(seeded, stats.gumbel_r.cdf)


def test_numpy_backed_gumbel_uses_the_52_bit_map():
    """The numpy-backed DiffGen sources draw 64-bit words and map them like the secure source."""
    class Words:  # a generator whose words are the extreme patterns
        def integers(self, low, high, size, dtype, endpoint):
            assert dtype == np.uint64 and low == 0 and high == int(ALL_ONES) and endpoint
            return np.resize(EXTREMES, size)

    from fragrelease.rng.diffgen import _gumbel_from_bits, _NumpyDiffGenRandomness

    g = _NumpyDiffGenRandomness(Words()).gumbel(EXTREMES.size)
    assert np.array_equal(g, _gumbel_from_bits(EXTREMES)) and np.all(np.isfinite(g))
