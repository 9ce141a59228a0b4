"""The production Laplace sampler: OpenDP's measurement with a known size on the grid 2**-40, and
scales calibrated by OpenDP's own privacy map (docs/privacy.md, "Granularity and calibration")."""
from fractions import Fraction

import numpy as np
import pytest
from fit import follows, rejects
from scipy import stats

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.mechanisms import get_mechanism, protect_attribute
from fragrelease.idpir.stage import AttributeTask
from fragrelease.protocol.options import ReleaseOptions
from fragrelease.rng.diffgen import SecureDiffGenRandomness
from fragrelease.rng.laplace import (
    LAPLACE_GRANULARITY_EXPONENT,
    SecureLaplace,
    calibrated_laplace_scale,
    float_at_most,
    laplace_epsilon,
    laplace_measurement,
)

K = LAPLACE_GRANULARITY_EXPONENT
R = Fraction(2) ** K - Fraction(2) ** -1074  # OpenDP's rounding distance per value
GRID = [(delta, eps, size)
        for delta in (0.0, 1e-3, 0.37, 2.0, 99.5, 1e6)
        for eps in (Fraction(1, 1000), Fraction(1, 10), Fraction(1, 3), 1.0, 7.25)
        for size in (1, 2, 1000, 100_000, 10_000_000)]


def test_granularity_is_two_to_the_minus_forty():
    assert K == -40


@pytest.mark.parametrize("delta,eps,size", GRID)
def test_map_of_the_measurement_used_is_within_budget_and_smallest(delta, eps, size):
    """OpenDP's map of the exact measurement the sampler builds, at d_in = Δ, is ≤ ε; one ulp less is not."""
    b = calibrated_laplace_scale(delta, eps, size)
    m = laplace_measurement(b, size)
    assert Fraction(m.map(delta)) <= Fraction(eps)
    assert Fraction(laplace_measurement(float(np.nextafter(b, 0)), size).map(delta)) > Fraction(eps)


@pytest.mark.parametrize("delta,eps,size", GRID)
def test_scale_is_at_most_one_plus_size_slack_over_delta_above_delta_over_eps(delta, eps, size):
    """Δ/ε ≤ b ≤ (Δ + size·2**-40)/ε · (1 + 1e-15): the factor over Δ/ε is at most 1 + size·2**-40/Δ."""
    b = calibrated_laplace_scale(delta, eps, size)
    e = float(eps)
    assert b >= delta / e
    assert b <= (delta + size * 2.0 ** K) / e * (1 + 1e-15)
    if delta >= 0.37 and size <= 100_000:  # the ordinary case: within 1e-6 of Δ/ε
        assert b <= delta / e * (1 + 1e-6)


def test_map_is_affine_in_distance_and_size_so_chunks_compose_to_the_whole_vector():
    """OpenDP's map equals (d + size·r)/b rounded up, r = 2**-40 − 2**-1074 (the docstring's premise).

    So chunks of sizes m_i with distances d_i (Σ d_i ≤ Δ, Σ m_i = c) cost Σ (d_i + m_i·r)/b
    = (Σ d_i + c·r)/b ≤ the size-c map at Δ, which the calibration keeps ≤ ε.
    """
    rng = np.random.default_rng(7)
    for b in (0.013, 1.0, 2.7182818, 450.0):
        for size in (1, 3, 1024, 65_536, 10_000_000):
            for d in (0.0, 0.5, 3.3, 1234.5):
                got = Fraction(laplace_measurement(b, size).map(d))
                exact = (Fraction(d) + size * R) / Fraction(b)
                assert exact <= got <= exact * (1 + Fraction(1, 2 ** 50))
    delta, eps, c = 4.2, Fraction(1, 5), 10_000
    b = calibrated_laplace_scale(delta, eps, c)
    cuts = np.sort(rng.choice(np.arange(1, c), size=6, replace=False))
    sizes = np.diff(np.concatenate([[0], cuts, [c]]))
    dists = rng.dirichlet(np.ones(len(sizes))) * delta
    chunks = sum((Fraction(float(d)) + int(m) * R) / Fraction(b) for d, m in zip(dists, sizes, strict=True))
    assert chunks <= Fraction(laplace_measurement(b, c).map(delta)) * (1 + Fraction(1, 2 ** 50))
    assert Fraction(laplace_measurement(b, c).map(delta)) <= eps


def test_the_release_scale_passes_the_map_at_its_sensitivity():
    """The scale protect_attribute hands the sampler (numpy reference = Spark job) satisfies the map at Δ."""
    class Recording:
        def perturb(self, values, scales, attributes, clusters):
            self.scales = np.asarray(scales)
            return np.asarray(values, float)

    x = np.random.default_rng(3).uniform(0, 100, 3000)
    for mechanism, k in (("idp-ir", 10), ("dp-ir", 10), ("idp", 1)):
        for eps in (Fraction(1, 10), Fraction(2)):
            rec = Recording()
            protect_attribute(x, AttributeTask("a", 0, 100, categorical=False, epsilon=eps),
                              k=k, mechanism=mechanism, noise=rec, options=ReleaseOptions.of(postprocess="none"))
            mech = get_mechanism(mechanism)
            delta, c = mech.sensitivity(x, k, 0, 100), rec.scales.size
            assert np.all(rec.scales == rec.scales[0])
            assert laplace_epsilon(rec.scales[0], delta, c) <= eps


def test_fraction_budgets_round_down_and_spark_float_gives_the_same_scale():
    eps = Fraction(1, 10)  # float(1/10) is above 1/10
    assert Fraction(float(eps)) > eps and Fraction(float_at_most(eps)) <= eps
    assert float_at_most(0.25) == 0.25
    b_numpy = calibrated_laplace_scale(3.0, eps, 500)
    b_spark = calibrated_laplace_scale(3.0, float(float_at_most(eps)), 500)  # the executors get the float
    assert b_numpy == b_spark
    assert laplace_epsilon(b_numpy, 3.0, 500) <= eps


@pytest.mark.parametrize("args,match", [((-1.0, 1, 5), "-1"), ((1.0, 0, 5), "epsilon"), ((1.0, 1, 0), "size.*0"),
                                        ((float("nan"), 1, 5), "nan"), ((1.0, 1, 2.5), "2.5")])
def test_calibration_refuses_bad_arguments_naming_them(args, match):
    with pytest.raises(InvalidParameterError, match=match):
        calibrated_laplace_scale(*args)


def test_draws_lie_on_the_two_to_the_minus_forty_grid():
    """Every draw is a multiple of 2**-40 (values of modest magnitude, so the float is exact); about half
    are odd multiples, so the grid is not coarser. OpenDP's exact sampler (the old one) is off this grid."""
    n = 20_000
    x = np.random.default_rng(1).uniform(-50, 50, n)
    out = SecureLaplace().perturb(x, np.full(n, 1.7), np.zeros(n), np.arange(n))
    units = out * 2.0 ** 40
    assert np.all(units == np.round(units))
    odd = np.mod(units, 2) == 1
    assert 0.45 < odd.mean() < 0.55
    exact = SecureLaplace(exact=True).perturb(x, np.full(n, 1.7), np.zeros(n), np.arange(n))
    assert np.mean(exact * 2.0 ** 40 != np.round(exact * 2.0 ** 40)) > 0.99


def test_mixed_scales_in_one_batch_ks():
    """A batch mixing two calibrated scales (as a UDF batch mixing attributes): each part is Laplace of its scale.

    Fixed n = 10,000 per part, accepted at p > 1e-6, the other part's scale rejected at p < 1e-3
    (tests/helpers/fit.py).
    """
    n = 10_000
    b1, b2 = calibrated_laplace_scale(1.0, Fraction(1, 2), 2 * n), calibrated_laplace_scale(7.0, 1, 2 * n)
    scales = np.tile([b1, b2], n)
    centre = np.tile([10.0, -3.0], n)
    out = SecureLaplace().perturb(centre, scales, np.tile([0, 1], n), np.arange(2 * n)) - centre
    assert follows(out[0::2], stats.laplace(scale=b1).cdf)
    assert follows(out[1::2], stats.laplace(scale=b2).cdf)
    assert rejects(out[1::2], stats.laplace(scale=b1).cdf)


def test_diffgen_keeps_the_exact_sampler():
    """DiffGen's leaf-count noise (scale 2/ε, not map-calibrated) stays on OpenDP's exact grid."""
    n = 4000
    draws = SecureDiffGenRandomness().laplace(np.zeros(n), 2.0)
    assert np.mean(draws * 2.0 ** 40 != np.round(draws * 2.0 ** 40)) > 0.99
    assert follows(draws, stats.laplace(scale=2.0).cdf)
