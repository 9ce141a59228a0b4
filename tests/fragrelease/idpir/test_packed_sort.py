"""The packed 64-bit sort of IR ranking equals numpy's lexsort exactly (docs/specification.md §1: ties by id).

:func:`fragrelease.idpir.microaggregation.ir_order` with ``sort="packed"`` must return the very
permutation of ``np.lexsort((tiebreak, values))`` (stable ``argsort`` without a tie-break), so the
clusters, hence every released value, are bit-identical to the reference sort.
"""
from __future__ import annotations

import numpy as np
import pytest
from noise_injection import HashedLaplace

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir import microaggregation as ma
from fragrelease.idpir.mechanisms import draw_attribute
from fragrelease.idpir.stage import AttributeTask


def _same(values, tiebreak=None):
    packed = ma.ir_order(values, tiebreak, sort="packed")
    ref = ma.ir_order(values, tiebreak, sort="lexsort")
    assert packed.dtype == np.int64
    np.testing.assert_array_equal(packed, ref)


def _tiebreaks(rng, n):
    return [None, np.arange(n), rng.permutation(n), -np.arange(n), rng.integers(0, 3, n),  # ties in the tie-break too
            rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64)]  # full-range keys (xxhash of string ids)


@pytest.mark.parametrize("seed", range(6))
def test_ties_negatives_and_the_tiebreak(seed):
    rng = np.random.default_rng(seed)
    n = 2_000
    v = np.round(rng.uniform(-5, 5, n), 1)  # heavy exact ties, negative values
    for tb in _tiebreaks(rng, n):
        _same(v, tb)


def test_near_ties_adjacent_floats():
    rng = np.random.default_rng(7)
    base = rng.uniform(0, 1000, 500)
    v = np.concatenate([base, np.nextafter(base, np.inf), np.nextafter(base, -np.inf), base])
    v = v[rng.permutation(v.size)]
    u = ma._ordered_bits(v)
    lo = u.min()
    shift = max(0, int(u.max() - lo).bit_length() - (64 - int(v.size - 1).bit_length()))
    assert shift > 0 and ma._near_ties(u, lo, shift)  # the prefix cannot tell them apart: the fix-up runs
    for tb in _tiebreaks(rng, v.size):
        _same(v, tb)
    _same(-v, np.arange(v.size))


def test_signed_zeros_tie_and_extremes():
    # numpy compares -0.0 == 0.0: they are a tie broken by the tie-break, not ordered by sign
    v = np.array([0.0, -0.0, 5e-324, -5e-324, np.inf, -np.inf, 1e308, -1e308, -0.0, 0.0])
    rng = np.random.default_rng(3)
    for tb in _tiebreaks(rng, v.size):
        _same(v, tb)
    order = ma.ir_order(v, np.arange(v.size)[::-1].copy())
    assert list(order[3:7]) == [9, 8, 1, 0]  # the four zeros, by descending position = ascending tie-break


def test_integer_values_and_one_value():
    rng = np.random.default_rng(4)
    _same(rng.integers(-2**62, 2**62, 3_000), rng.permutation(3_000))
    _same(rng.integers(1, 4, 3_000).astype(float), rng.permutation(3_000))  # categorical ranks
    _same(np.array([2.5]), np.array([9]))
    assert ma.ir_order(np.empty(0), np.empty(0, dtype=np.int64)).size == 0


def test_fallback_to_lexsort():
    # NaN has no 64-bit order and object tie-breaks none either: both fall back to lexsort, same result
    v = np.array([3.0, np.nan, 1.0, 1.0, np.nan])
    np.testing.assert_array_equal(ma.ir_order(v, np.arange(5)), np.lexsort((np.arange(5), v)))
    tb = np.array(["b", "a", "c", "e", "d"], dtype=object)
    np.testing.assert_array_equal(ma.ir_order(np.ones(5), tb), np.lexsort((tb, np.ones(5))))
    with pytest.raises(InvalidParameterError, match="sort must be one of"):
        ma.ir_order(v, sort="quick")
    with pytest.raises(InvalidParameterError, match="tiebreak has shape"):
        ma.ir_order(v, np.arange(4))


def test_clusters_and_noisy_centroids_identical_either_way():
    rng = np.random.default_rng(5)
    x = np.round(rng.uniform(0, 100, 5_000), 0)
    ids = rng.permutation(5_000) * 7 - 10_000
    out = [draw_attribute(x, AttributeTask("a", 0.0, 100.0, categorical=False, epsilon=1.0),
                          k=10, mechanism="idp-ir", noise=HashedLaplace("packed"), tiebreak=ids, sort=s) for s in ma.SORTS]
    for a, b in zip(out[0], out[1]):
        np.testing.assert_array_equal(a, b)
