"""Empirical privacy audit at small scale: the estimate stays within ε, and catches a miscalibration."""
import numpy as np
import pytest

from fragrelease.experiments.audit import audit, worst_neighbour
from fragrelease.idpir.sensitivity import idp_ir_sensitivity
from fragrelease.rng.laplace import FastLaplace


@pytest.fixture(scope="module")
def ages(adult_pdf):
    return adult_pdf["age"].to_numpy(float)[:24]


def test_worst_neighbour_attains_the_local_sensitivity(ages):
    _, shift = worst_neighbour(ages, 4, 0.0, 100.0)
    assert shift == pytest.approx(idp_ir_sensitivity(ages, 4, 0.0, 100.0))


@pytest.mark.parametrize("mechanism", ["idp-ir", "dp-ir"])
def test_audit_stays_within_epsilon(ages, mechanism):
    # alpha = 1e-6: a correct mechanism exceeds ε here with probability <= 1e-6
    r = audit(ages, k=4, lo=0.0, hi=100.0, epsilon=1.0, mechanism=mechanism, runs=60_000, noise=FastLaplace())
    assert r.epsilon_lower_bound <= 1.0
    if mechanism == "idp-ir":
        assert r.epsilon_lower_bound >= 0.5  # the audit has power: the worst case is nearly tight


def test_audit_catches_a_miscalibrated_mechanism(ages):
    class TooLittleNoise(FastLaplace):
        def perturb(self, values, scales, attributes, clusters):
            return super().perturb(values, np.asarray(scales) / 3, attributes, clusters)

    r = audit(ages, k=4, lo=0.0, hi=100.0, epsilon=1.0, mechanism="idp-ir", runs=60_000, noise=TooLittleNoise())
    assert r.epsilon_lower_bound > 1.0


def test_threshold_grid_covers_the_statistics_whole_range(ages):
    # b calibrated with 0.8 Δ: T reaches ‖c − c'‖₁ / b = 1.25 ε, beyond the old grid's ±ε
    from fragrelease.experiments.audit import centroid_vector, lr_thresholds

    y, shift = worst_neighbour(ages, 12, 0.0, 100.0)
    b = 0.8 * idp_ir_sensitivity(ages, 12, 0.0, 100.0) / 1.0
    grid = lr_thresholds(centroid_vector(ages, 12), centroid_vector(y, 12), b, 41)
    assert grid.max() == pytest.approx(1.25) and grid.min() == pytest.approx(-1.25)


@pytest.mark.parametrize("k", [8, 12])
def test_audit_flags_a_sensitivity_scaled_by_0_8(ages, k):
    # true loss 1.25 ε on the worst neighbour; 200,000 runs per side (measured bounds 1.14-1.19)
    r = audit(ages, k=k, lo=0.0, hi=100.0, epsilon=1.0, mechanism="idp-ir", runs=200_000, noise=FastLaplace(),
              sensitivity_factor=0.8)
    assert r.sensitivity == pytest.approx(0.8 * idp_ir_sensitivity(ages, k, 0.0, 100.0))
    assert r.epsilon_lower_bound > 1.0
