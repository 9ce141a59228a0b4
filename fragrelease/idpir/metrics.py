"""Information loss, MeanSSE (docs/specification.md §4; Del Vasto-Terrientes et al. (ICISSP 2025) eq. 5-6, and its authors' public code).

Default, the authors' convention::

    MeanSSE = (1/n) Σ_h (1/l) Σ_g (d_g / s_g)²

with s_g the sample standard deviation (ddof = 1) of attribute g in the original data; numeric
d_g = x - x'; categorical d_g = 0 if equal else 1 with s_g = 0.5.

``convention="paper"``, eq. 6 as printed: dist = (1/l)·sqrt(Σ_g (d_g / σ²_g)²), MeanSSE = mean of
dist², with σ²_g the sample variance (categorical: 0.5² = 0.25).
"""
from __future__ import annotations

import numpy as np

from fragrelease.errors import InvalidParameterError

CONVENTIONS = ("authors", "paper")
CATEGORICAL_SCALE = 0.5

#: How to read a MeanSSE in the authors' convention (CLI summary, reports): its unit and what 0 and 1 mean.
SCALE_TEXT = ("mean over records and attributes of the squared error in units of the original's standard "
              "deviation; 0 = every released value equals the original; 1 = errors as large as replacing every "
              "numeric value by its attribute's mean (that scores (n-1)/n), while a changed categorical label "
              "counts 4 (s = 0.5), so 1 = a quarter of the labels changed")


def attribute_scale(original: np.ndarray, categorical: bool, convention: str = "authors") -> float:
    """The divisor of attribute g: s_g (authors) or σ²_g (paper)."""
    if convention not in CONVENTIONS:
        raise InvalidParameterError(f"MeanSSE convention must be one of {CONVENTIONS}, not {convention!r}")
    s = CATEGORICAL_SCALE if categorical else float(np.std(np.asarray(original, float), ddof=1))
    return s if convention == "authors" else s * s


def mean_sse(
    original: dict[str, np.ndarray],
    protected: dict[str, np.ndarray],
    categorical: dict[str, bool],
    convention: str = "authors",
) -> float:
    """MeanSSE of a protected table against the original, records aligned by position.

    Parameters
    ----------
    original, protected : dict attribute -> array of shape (n,)
        The same attributes and the same record order in both.
    categorical : dict attribute -> bool
    convention : {"authors", "paper"}

    Raises
    ------
    InvalidParameterError
        Attribute sets or lengths differ, or an attribute has zero spread.
    """
    if set(original) != set(protected):
        raise InvalidParameterError(f"attributes differ: {sorted(original)} vs {sorted(protected)}")
    attrs = sorted(original)
    n = len(original[attrs[0]])
    terms = np.zeros(n)
    for a in attrs:
        x, y = np.asarray(original[a]), np.asarray(protected[a])
        if len(x) != n or len(y) != n:
            raise InvalidParameterError(f"attribute {a!r} has {len(x)} / {len(y)} values, expected {n}")
        s = attribute_scale(x, categorical[a], convention)
        if not s > 0:
            raise InvalidParameterError(f"attribute {a!r} has zero spread in the original data")
        d = (x != y).astype(float) if categorical[a] else x.astype(float) - y.astype(float)
        terms += (d / s) ** 2
    l = len(attrs)
    if convention == "authors":
        return float(np.mean(terms / l))
    return float(np.mean(terms / (l * l)))
