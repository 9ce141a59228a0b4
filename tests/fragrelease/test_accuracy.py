"""The 95 % interval of Laplace noise comes from OpenDP's accuracy functions (fragrelease.accuracy)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from fragrelease.accuracy import ALPHA, laplace_half_width, laplace_scale_for
from fragrelease.errors import InvalidParameterError


def test_the_half_width_is_the_known_answer():
    # P(|Lap(b)| >= t) = exp(-t/b) = alpha  =>  t = b ln(1/alpha); b = 40, alpha = 0.05: 40 ln 20 = 119.829...
    assert laplace_half_width(40.0) == pytest.approx(119.82929094215963, rel=1e-12)
    assert laplace_half_width(40.0, 0.05) == pytest.approx(40 * math.log(20), rel=1e-12)
    assert laplace_half_width(1.0, 0.01) == pytest.approx(math.log(100), rel=1e-12)
    assert laplace_half_width(0.0) == 0.0
    assert ALPHA == 0.05
    # the inverse
    assert laplace_scale_for(119.82929094215963) == pytest.approx(40.0, rel=1e-12)
    assert laplace_scale_for(laplace_half_width(3.5, 0.2), 0.2) == pytest.approx(3.5, rel=1e-12)


def test_the_half_width_covers_95_percent_of_laplace_draws():
    rng = np.random.default_rng(11)  # a seed: this test checks the number, not the release's noise
    b = 2.5
    draws = rng.laplace(0.0, b, 200_000)
    share_outside = float(np.mean(np.abs(draws) >= laplace_half_width(b)))
    assert share_outside == pytest.approx(0.05, abs=0.003)


@pytest.mark.parametrize("scale, alpha", [(-1.0, 0.05), (float("inf"), 0.05), (float("nan"), 0.05), (1.0, 0.0),
                                          (1.0, 1.0), (1.0, 1.5)])
def test_bad_arguments_are_refused(scale, alpha):
    with pytest.raises(InvalidParameterError):
        laplace_half_width(scale, alpha)
    with pytest.raises(InvalidParameterError):
        laplace_scale_for(scale, alpha)
