from fractions import Fraction

import numpy as np
import pytest
from fit import follows, rejects
from noise_injection import HashedLaplace, ZeroNoise
from scipy import stats

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.mechanisms import laplace_scale, noisy_centroids, protect_attribute
from fragrelease.idpir.microaggregation import check_k, cluster_bounds, cluster_count, ir_centroids, ir_clusters
from fragrelease.idpir.postprocess import clamp_and_round, finish_centroids
from fragrelease.idpir.stage import AttributeTask
from fragrelease.protocol.options import ReleaseOptions
from fragrelease.rng.laplace import SecureLaplace, calibrated_laplace_scale
from fragrelease.rng.secure import secure_random_keys


def test_cluster_sizes_remainder_joins_last():
    assert cluster_bounds(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert cluster_bounds(5, 3) == [(0, 5)]  # n < 2k: one cluster
    assert cluster_count(7, 7) == 1
    for n in range(1, 40):
        for k in range(1, n + 1):
            sizes = [b - a for a, b in cluster_bounds(n, k)]
            assert sum(sizes) == n
            assert all(s == k for s in sizes[:-1]) and k <= sizes[-1] <= 2 * k - 1 or (n < 2 * k and sizes == [n])


def test_ir_clusters_keep_original_order_and_break_ties_by_id():
    x = np.array([5.0, 1.0, 5.0, 3.0, 1.0, 9.0])
    ids = np.array([10, 11, 12, 13, 14, 15])
    cl = ir_clusters(x, 2, ids)
    # sorted by (x, id): 1(11),1(14),3(13),5(10),5(12),9(15) -> clusters 0,0,1,1,2,2
    assert cl.tolist() == [1, 0, 2, 1, 0, 2]
    assert ir_centroids(x, cl).tolist() == [1.0, 4.0, 7.0]


@pytest.mark.parametrize("k,n", [(0, 10), (-1, 10), (11, 10), (2.5, 10)])
def test_check_k_refuses(k, n):
    with pytest.raises(InvalidParameterError, match="k must"):
        check_k(k, n)


def test_laplace_scale_and_errors():
    assert laplace_scale(2.0, Fraction(1, 10), 7) == pytest.approx(20.0, rel=1e-11)
    with pytest.raises(InvalidParameterError, match="-1"):
        laplace_scale(-1.0, 1, 7)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        laplace_scale(1.0, 0, 7)
    with pytest.raises(InvalidParameterError, match="size.*0"):
        laplace_scale(1.0, 1, 0)


def test_rounding_only_after_noise_and_clamp():
    # centroid 1.4 would round to 1 before noise; +0.2 noise gives 1.6 -> 2.
    class Plus:
        def perturb(self, values, scales, attributes, clusters):
            return np.asarray(values) + 0.2

    noisy = noisy_centroids(centroids=np.array([1.4, 4.9]), scales=np.ones(2),
                            attributes=np.array(["a", "a"], dtype=object), clusters=np.arange(2), noise=Plus())
    out = finish_centroids(noisy, np.ones(2), 1.0, 5.0, True, ReleaseOptions.of(postprocess="none"))  # the release's step, without the projection
    assert out.tolist() == [2.0, 5.0]  # 5.1 clamped to 5 before rounding
    assert clamp_and_round(np.array([-3.0, 2.5, 7.2]), 1, 5, True).tolist() == [1.0, 3.0, 5.0]
    assert clamp_and_round(np.array([-3.0, 2.5]), 0, 100, False).tolist() == [0.0, 2.5]


def test_one_draw_per_cluster():
    calls = []

    class Counting(ZeroNoise):
        def perturb(self, values, scales, attributes, clusters):
            calls.append(len(values))
            return super().perturb(values, scales, attributes, clusters)

    x = np.arange(100, dtype=float)
    out = protect_attribute(x, AttributeTask("a", 0, 200, categorical=False, epsilon=1),
                            k=10, mechanism="idp-ir", noise=Counting())
    assert calls == [10]
    assert len(np.unique(out)) == 10
    assert out[:10].tolist() == [4.5] * 10  # bare IR with zero noise


def test_plain_idp_uses_k_one_and_dp_ir_uses_global_scale():
    seen = {}

    class Record(ZeroNoise):
        def perturb(self, values, scales, attributes, clusters):
            seen["n"], seen["scale"] = len(values), scales[0]
            return super().perturb(values, scales, attributes, clusters)

    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    protect_attribute(x, AttributeTask("a", 0, 10, categorical=False, epsilon=Fraction(1, 2)),
                      k=3, mechanism="idp", noise=Record())
    assert seen["n"] == 6
    protect_attribute(x, AttributeTask("a", 0, 10, categorical=False, epsilon=Fraction(1, 2)),
                      k=3, mechanism="dp-ir", noise=Record())
    assert seen["scale"] == pytest.approx((10 / 3) / 0.5)


def test_noise_injection_is_reproducible():
    x = np.linspace(0, 50, 40)
    a = protect_attribute(x, AttributeTask("a", 0, 100, categorical=False, epsilon=1),
                          k=5, mechanism="idp-ir", noise=HashedLaplace())
    b = protect_attribute(x, AttributeTask("a", 0, 100, categorical=False, epsilon=1),
                          k=5, mechanism="idp-ir", noise=HashedLaplace())
    assert np.array_equal(a, b)


def test_secure_laplace_distribution_ks():
    """KS test of the secure sampler: fixed n = 20,000 draws, accepted at p > 1e-6, twice the scale
    rejected at p < 1e-3 (tests/helpers/fit.py)."""
    n, scale = 20_000, 3.0
    draws = SecureLaplace().perturb(np.zeros(n), np.full(n, scale), np.zeros(n), np.arange(n))
    assert follows(draws, stats.laplace(scale=scale).cdf)
    assert rejects(draws, stats.laplace(scale=2 * scale).cdf)


def test_secure_laplace_refuses_bad_scale():
    with pytest.raises(InvalidParameterError, match="-1"):
        SecureLaplace().perturb(np.zeros(1), np.array([-1.0]), np.zeros(1), np.zeros(1))


def test_secure_random_keys_range_and_uniqueness():
    keys = secure_random_keys(10_000)
    assert keys.dtype == np.int64 and keys.min() >= 0
    assert len(np.unique(keys)) == 10_000


def test_registry_is_the_one_definition_of_each_mechanism():
    """k, Δ and scale of every mechanism come from one registry entry (the Spark job calls the same methods)."""
    from fragrelease.idpir.mechanisms import MECHANISM_NAMES, get_mechanism
    from fragrelease.idpir.microaggregation import cluster_bounds
    from fragrelease.idpir.sensitivity import dp_ir_sensitivity, idp_ir_sensitivity

    assert MECHANISM_NAMES == ("idp-ir", "dp-ir", "idp")
    assert [get_mechanism(m).k_used(50) for m in MECHANISM_NAMES] == [50, 50, 1]
    assert [get_mechanism(m).notion for m in MECHANISM_NAMES] == ["iDP", "DP", "iDP"]
    rng = np.random.default_rng(3)
    for _ in range(50):
        n, k = int(rng.integers(1, 60)), int(rng.integers(1, 8))
        if k > n:
            continue
        x = np.sort(rng.integers(0, 20, n).astype(float))
        for name in MECHANISM_NAMES:
            m = get_mechanism(name)
            bounds = cluster_bounds(n, m.k_used(k))
            second = x[bounds[-2][1] - 1] if len(bounds) > 1 else -1.0
            a, b = bounds[-1]
            from_extremes = m.sensitivity_from_extremes(x[0], x[a], second, x[-1], k=k, size_last=b - a,
                                                        n_clusters=len(bounds), lo=-1.0, hi=21.0)
            assert from_extremes == m.sensitivity(x, k, -1.0, 21.0)
            expected = (dp_ir_sensitivity(-1.0, 21.0, k) if name == "dp-ir"
                        else idp_ir_sensitivity(x, m.k_used(k), -1.0, 21.0))
            assert from_extremes == expected
            c = len(bounds)
            assert m.scale(from_extremes, 0.5, c) == calibrated_laplace_scale(from_extremes, 0.5, c)
    with pytest.raises(InvalidParameterError, match="'laplace'"):
        get_mechanism("laplace")
