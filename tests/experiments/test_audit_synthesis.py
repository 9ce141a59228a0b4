"""Audit of one owner's marginal-synthesis outputs (docs/specification.md §10) on a neighbouring pair."""
from fractions import Fraction

import numpy as np

from fragrelease.experiments.audit_synthesis import audit_synthesis
from fragrelease.rng.diffgen import SeededDiffGenRandomness
from fragrelease.rng.laplace import FastLaplace


class TooLittleNoise(FastLaplace):
    """A broken variant: every Laplace scale a third of its calibrated value."""

    def perturb(self, values, scales, attributes, clusters):
        return super().perturb(values, np.asarray(scales) / 3, attributes, clusters)


def test_synthesis_outputs_stay_within_epsilon():
    # alpha = 1e-6: a correct mechanism's bound exceeds ε here with probability <= 1e-6
    r = audit_synthesis(Fraction(1), runs=12_000, randomness=SeededDiffGenRandomness(11), noise=FastLaplace())
    assert r.epsilon_lower_bound <= 1.0
    assert r.epsilon_lower_bound >= 0.3  # the audit has power: the Laplace parts spend 0.95 of ε


def test_the_audit_catches_too_little_noise():
    r = audit_synthesis(Fraction(1), runs=12_000, randomness=SeededDiffGenRandomness(12), noise=TooLittleNoise())
    assert r.epsilon_lower_bound > 1.0
