"""Exact private selection: report-noisy-max with exponential noise, through OpenDP (docs/specification.md §10).

:func:`secure_noisy_max` (behind ``DiffGenRandomness.noisy_max``; the synthetic kind chose its tree with it up to 0.18.0):
OpenDP 0.16's ``make_noisy_max`` over a vector of float scores with the ``LInfDistance`` metric
(non-monotonic: a substitution may move scores up and down) and the ``MaxDivergence`` (pure ε-DP)
measure, which adds Exponential(scale) noise to every score and reports the index of the largest
noisy score. This is report-noisy-max with exponential noise, which has the distribution of the
permute-and-flip mechanism (McKenna and Sheldon, "Permute-and-Flip: A new mechanism for
differentially private selection", NeurIPS 2020; Ding et al., "The Permute-and-Flip Mechanism is
Identical to Report-Noisy-Max with Exponential Noise", 2021) and is ε-DP with ``ε = 2Δ/scale`` for
scores of L∞ sensitivity Δ (OpenDP's privacy map, which :func:`noisy_max_epsilon` reads).

Why not the Gumbel-max of :mod:`fragrelease.rng.diffgen`: its Gumbel variables come from 52-bit
uniforms, so they lie in about [−3.60, 36.74] and a candidate more than 40.34 log-weight units behind
the best is never chosen; the sampler is then (ε, δ)-DP for a small δ, not pure ε-DP. OpenDP draws
the noise from the OS CSPRNG and compares the noisy scores in exact arithmetic (each float score is
an exact rational; the exponential variables are refined lazily until the comparison is decided), so
every candidate keeps a nonzero probability and the privacy map's ε holds exactly.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from fragrelease.errors import InvalidParameterError
from fragrelease.rng.laplace import _opendp, float_at_most

_MEASUREMENTS: dict[float, Any] = {}  # OpenDP measurements by scale (opendp ships no type information)
_MAX_CACHED = 1024


def noisy_max_measurement(scale: float):
    """OpenDP's report-noisy-max over float scores with Exponential(``scale``) noise (pure ε-DP), cached.

    ``dp.m.make_noisy_max(vector_domain(atom_domain(T=float, nan=False)), linf_distance(T=float,
    monotonic=False), max_divergence(), scale=scale)``. Input: a list of finite floats (any length ≥ 1);
    output: the index (int) of the largest noisy score. Its privacy map takes an L∞ distance between
    score vectors and returns ε = 2·d_in/scale. Raises InvalidParameterError for a scale that is not
    finite and > 0.
    """
    scale = float(scale)
    if not (np.isfinite(scale) and scale > 0):
        raise InvalidParameterError(f"noisy-max scale must be finite and > 0, not {scale}")
    m = _MEASUREMENTS.get(scale)
    if m is None:
        dp = _opendp()
        import opendp.measures as measures
        import opendp.metrics as metrics

        m = dp.m.make_noisy_max(dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                                metrics.linf_distance(T=float, monotonic=False), measures.max_divergence(),
                                scale=scale)
        if len(_MEASUREMENTS) >= _MAX_CACHED:
            _MEASUREMENTS.clear()
        _MEASUREMENTS[scale] = m
    return m


def noisy_max_epsilon(scale: float, sensitivity: float) -> Fraction:
    """ε of :func:`noisy_max_measurement` ``(scale)`` for scores of L∞ sensitivity ``sensitivity``, by OpenDP's map.

    The exact Fraction of the float OpenDP reports. Raises InvalidParameterError for a sensitivity
    that is negative or not finite, or a bad scale.
    """
    sensitivity = float(sensitivity)
    if not (np.isfinite(sensitivity) and sensitivity >= 0):
        raise InvalidParameterError(f"sensitivity must be finite and non-negative, not {sensitivity}")
    return Fraction(noisy_max_measurement(scale).map(sensitivity))


def calibrated_noisy_max_scale(sensitivity: float, epsilon: Fraction | float) -> float:
    """The smallest float scale whose OpenDP privacy map at ``d_in = sensitivity`` is ≤ ``epsilon``.

    About ``2·sensitivity/ε`` (never below it). ``sensitivity``: the L∞ sensitivity of the score
    vector, finite and > 0; ``epsilon``: > 0 (a Fraction is first rounded down to a float).

    Raises
    ------
    InvalidParameterError
        A sensitivity or ε that is not finite and > 0, or no finite scale.
    """
    sensitivity = float(sensitivity)
    if not (np.isfinite(sensitivity) and sensitivity > 0):
        raise InvalidParameterError(f"sensitivity must be finite and > 0, not {sensitivity}")
    eps = Fraction(float_at_most(epsilon))
    if eps <= 0:
        raise InvalidParameterError(f"epsilon must be > 0, not {epsilon}")
    s = float(2 * Fraction(sensitivity) / eps)
    if not (np.isfinite(s) and s > 0):
        raise InvalidParameterError(f"no finite noisy-max scale for sensitivity {sensitivity} and epsilon {epsilon}")
    for _ in range(64):  # the map rounds up by a few ulps at most: step up until it fits
        if noisy_max_epsilon(s, sensitivity) <= eps:
            break
        s = float(np.nextafter(s, np.inf))
    else:  # pragma: no cover - OpenDP's map is within a few ulps of 2Δ/s
        raise InvalidParameterError(f"could not calibrate a noisy-max scale for epsilon {epsilon}")
    while True:  # then down while it still fits: the smallest such float
        lower = float(np.nextafter(s, 0.0))
        if lower <= 0 or noisy_max_epsilon(lower, sensitivity) > eps:
            break
        s = lower
    return s


def check_scores(scores: np.ndarray) -> np.ndarray:
    """``scores`` as a 1-d float64 array of at least one finite value, or InvalidParameterError."""
    s = np.asarray(scores, dtype=float).ravel()
    if s.size == 0:
        raise InvalidParameterError("a private selection needs at least one candidate, got none")
    if not np.all(np.isfinite(s)):
        raise InvalidParameterError(f"selection scores must be finite, not {s[~np.isfinite(s)][0]}")
    return s


def secure_noisy_max(scores: np.ndarray, scale: float) -> int:
    """Index of the largest ``score + Exponential(scale)``, exactly, from the OS CSPRNG (OpenDP).

    ``scores``: shape (m,), m ≥ 1, finite floats; ``scale`` > 0 (e.g. from
    :func:`calibrated_noisy_max_scale`). Every index has a nonzero probability. Raises
    InvalidParameterError for empty or non-finite scores or a bad scale.
    """
    s = check_scores(scores)
    return int(noisy_max_measurement(scale)([float(x) for x in s]))
