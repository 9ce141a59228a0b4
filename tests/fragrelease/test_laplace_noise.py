"""The one Laplace noise object (issue 25 step 5): mechanism = sensitivity × noise.

:class:`fragrelease.rng.laplace.LaplaceNoise` calibrates its scale from the sensitivity, ε and the
vector size through OpenDP's map, samples and gives its variance; the centroids, the category
histogram and DiffGen's leaf counts take their scales from it (docs/specification.md §2, §7, §8).
"""
from fractions import Fraction

import numpy as np
import pytest
from fit import follows
from scipy import stats

from fragrelease.diffgen.engine import SplitChooser
from fragrelease.diffgen.predictors import AttributeCounts
from fragrelease.diffgen.release import leaf_count_noise, leaf_count_scale
from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.category_order import HISTOGRAM_SENSITIVITY, histogram_noise, histogram_scale
from fragrelease.idpir.mechanisms import MECHANISMS, centroid_noise, laplace_scale
from fragrelease.rng.laplace import (
    LaplaceNoise,
    SecureLaplace,
    calibrated_laplace_scale,
    float_at_most,
    laplace_measurement,
)
from tests.helpers.noise_injection import HashedLaplace


@pytest.mark.parametrize("delta,eps,size", [(0.37, Fraction(1, 3), 7), (2.0, 1.0, 1), (99.5, Fraction(1, 10), 1000)])
def test_calibrate_is_openDP_calibration_and_reports_its_budget(delta, eps, size):
    noise = LaplaceNoise.calibrate(sensitivity=delta, epsilon=eps, size=size)
    assert noise.scale == calibrated_laplace_scale(delta, eps, size)
    assert noise.spent() <= Fraction(eps)
    assert Fraction(laplace_measurement(noise.scale, size).map(delta)) == noise.spent()
    assert noise.variance == 2 * noise.scale ** 2
    assert not noise.exact


def test_exact_measurement_scale_is_the_smallest_float_within_budget():
    for eps in (Fraction(1, 2), Fraction(3, 10), Fraction(7, 10), Fraction(13, 10), Fraction(3)):
        noise = leaf_count_noise(eps)
        assert noise.exact and noise.sensitivity == 1.0 and noise.epsilon == Fraction(float_at_most(eps / 2))
        assert noise.spent() <= eps / 2
        lower = float(np.nextafter(noise.scale, 0))
        assert Fraction(laplace_measurement(lower, None).map(1.0)) > eps / 2
        assert abs(noise.scale - float(2 / eps)) <= 4 * np.spacing(noise.scale)  # 2/ε up to the budget's float
    assert leaf_count_scale(1) == 2.0 and leaf_count_scale(Fraction(1, 2)) == 4.0


def test_every_system_takes_its_scale_from_the_noise_object():
    for mech in MECHANISMS.values():  # the registry varies only the sensitivity
        assert mech.noise(3.0, Fraction(1, 4), 11) == centroid_noise(3.0, Fraction(1, 4), 11)
        assert mech.scale(3.0, Fraction(1, 4), 11) == LaplaceNoise.calibrate(sensitivity=3.0, epsilon=Fraction(1, 4),
                                                                              size=11).scale
    assert laplace_scale(3.0, Fraction(1, 4), 11) == centroid_noise(3.0, Fraction(1, 4), 11).scale
    hist = histogram_noise(Fraction(1, 5), 9)
    assert hist.sensitivity == HISTOGRAM_SENSITIVITY and histogram_scale(Fraction(1, 5), 9) == hist.scale


def test_sample_with_a_test_source_is_that_source_at_the_objects_scale():
    noise = LaplaceNoise.calibrate(sensitivity=1.5, epsilon=0.5, size=4)
    values = np.array([1.0, 2.0, 3.0, 4.0])
    names = np.full(4, "age", dtype=object)
    got = noise.sample(values=values, source=HashedLaplace(), attributes=names, clusters=np.arange(4))
    want = HashedLaplace().perturb(values, np.full(4, noise.scale), names, np.arange(4))
    np.testing.assert_array_equal(got, want)
    with pytest.raises(TypeError):
        noise.sample(values)  # type: ignore[misc]  # numeric arrays are keyword-only


def test_secure_sample_has_the_laplace_distribution():
    noise = LaplaceNoise.calibrate(sensitivity=1.0, epsilon=0.5, size=3000)
    draws = noise.sample(values=np.zeros(3000))
    assert draws.shape == (3000,)
    assert follows(draws, stats.laplace(scale=noise.scale).cdf)
    exact = leaf_count_noise(1).sample(values=np.zeros(3000), source=SecureLaplace(exact=True))
    assert follows(exact, stats.laplace(scale=2.0).cdf)


def test_bad_budgets_are_refused_with_the_value():
    with pytest.raises(InvalidParameterError, match="-1"):
        LaplaceNoise.calibrate(sensitivity=-1.0, epsilon=1, size=3)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        LaplaceNoise.calibrate(sensitivity=1.0, epsilon=0, size=3)
    with pytest.raises(InvalidParameterError, match="size"):
        LaplaceNoise.calibrate(sensitivity=1.0, epsilon=1, size=0)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        leaf_count_noise(0)


def test_split_chooser_is_the_engines_seam():
    class Held:
        def choose_split(self, lo, hi, *, top, eps_prime, score, randomness):
            return (lo + hi) / 2, 0.0

    assert isinstance(Held(), SplitChooser)
    assert not isinstance(AttributeCounts(np.zeros(0), np.zeros((0, 2), dtype=np.int64)), SplitChooser)
