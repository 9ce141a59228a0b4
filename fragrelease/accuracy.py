"""Intervals of Laplace noise from OpenDP's accuracy functions (``opendp.accuracy``), not a hand formula.

For X ~ Lap(b), P(|X| ≥ t) = exp(−t/b), so the two-sided (1 − α) interval of one draw is ±b·ln(1/α)
(±b·ln 20 at 95 %). OpenDP computes exactly this: ``laplacian_scale_to_accuracy(scale, alpha)`` returns
the accuracy t with α = P(|X| ≥ t), and ``accuracy_to_laplacian_scale(accuracy, alpha)`` inverts it
(OpenDP's user guide, "Accuracy"; the functions are the continuous-Laplace ones, the distribution the
release's float Laplace noise follows up to its 2⁻⁴⁰ grid). The reports use these numbers wherever they
give an interval of the noise on a released centroid (docs/specification.md §2, "Accuracy preview").
"""
from __future__ import annotations

from fragrelease.errors import InvalidParameterError

#: The reports' significance level: a 95 % interval.
ALPHA = 0.05


def laplace_half_width(scale: float, alpha: float = ALPHA) -> float:
    """Half-width t of the (1 − ``alpha``) interval of Lap(``scale``) noise: P(|X| ≥ t) = alpha.

    Source: ``opendp.accuracy.laplacian_scale_to_accuracy`` (OpenDP 0.16). Units: those of ``scale``.

    Raises
    ------
    InvalidParameterError
        ``scale`` < 0 or not finite, or ``alpha`` outside (0, 1).
    """
    from opendp.accuracy import laplacian_scale_to_accuracy

    _check(scale, alpha, "scale")
    return float(laplacian_scale_to_accuracy(float(scale), float(alpha)))


def laplace_scale_for(half_width: float, alpha: float = ALPHA) -> float:
    """The Laplace scale b whose (1 − ``alpha``) interval is ±``half_width`` (the inverse of
    :func:`laplace_half_width`). Source: ``opendp.accuracy.accuracy_to_laplacian_scale``.

    Raises
    ------
    InvalidParameterError
        ``half_width`` < 0 or not finite, or ``alpha`` outside (0, 1).
    """
    from opendp.accuracy import accuracy_to_laplacian_scale

    _check(half_width, alpha, "half_width")
    return float(accuracy_to_laplacian_scale(float(half_width), float(alpha)))


def _check(value: float, alpha: float, what: str) -> None:
    if not (0 <= float(value) < float("inf")):
        raise InvalidParameterError(f"{what} must be a finite number >= 0, not {value!r}")
    if not 0 < float(alpha) < 1:
        raise InvalidParameterError(f"alpha must be in (0, 1), not {alpha!r}")
