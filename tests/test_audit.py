"""Empirical privacy audit at small scale: the estimate stays within ε, and catches a miscalibration."""
import numpy as np
import pytest

from fragrelease.audit import audit, worst_neighbour
from fragrelease.rng import FastLaplace
from fragrelease.sensitivity import idp_ir_sensitivity


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
