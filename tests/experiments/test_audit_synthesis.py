"""Audit of one owner's marginal-synthesis outputs (docs/specification.md §10) on a neighbouring pair."""
from fractions import Fraction

import numpy as np
from noise_injection import SeededLaplace

from fragrelease.experiments.audit_synthesis import audit_synthesis
from fragrelease.rng.diffgen import SeededDiffGenRandomness


class TooLittleNoise(SeededLaplace):
    """A broken variant: every Laplace scale a third of its calibrated value."""

    def perturb(self, values, scales, attributes, clusters):
        return super().perturb(values, np.asarray(scales) / 3, attributes, clusters)


def test_synthesis_outputs_stay_within_epsilon():
    # alpha = 1e-6: a correct mechanism's bound exceeds ε here with probability <= 1e-6
    # Seeded noise (the law of the evaluation sampler FastLaplace; this audits the mechanism's
    # calibration, not the sampler): the outcome is fixed. Unseeded, the power check below failed a
    # correct mechanism with probability 3e-4 (its bound over 200 audits resampled from 60,000 runs a
    # side, issue 41, docs/benchmarks.md: mean 0.367, sd 0.034, smallest 0.291; 0.25 is 3.4 sd below).
    # With seed 3 the bound is 0.350 (seeds 1, 2: 0.324, 0.404).
    r = audit_synthesis(Fraction(1), runs=12_000, randomness=SeededDiffGenRandomness(11), noise=SeededLaplace(3))
    assert r.epsilon_lower_bound <= 1.0
    # the audit has power: the Laplace parts spend 0.95 of ε, and a mechanism whose bound the audit
    # cannot lift off 0 fails this
    assert r.epsilon_lower_bound >= 0.25


def test_the_audit_catches_too_little_noise():
    # 4,000 runs a side (was 12,000; 2.6 times fewer draws with the 1,000 calibration runs): the power
    # against this defect stays. The lower bound of this broken mechanism, 200 audits each resampled
    # from 60,000 runs a side (issue 41, docs/benchmarks.md): at 12,000 runs mean 1.69 (sd 0.06,
    # smallest 1.54); at 4,000 mean 1.34 (sd 0.07, 1 % quantile 1.18, smallest 1.15), 4.6 sd above the
    # 1.0 it must exceed; at 3,000 the smallest was 1.06 (2.6 sd), too close. Unseeded 4.6 sd is a false
    # failure in 500,000 runs; seeded (seed 3: 1.337; seeds 1, 2: 1.409, 1.331) none.
    r = audit_synthesis(Fraction(1), runs=4_000, randomness=SeededDiffGenRandomness(12), noise=TooLittleNoise(3))
    assert r.epsilon_lower_bound > 1.0
