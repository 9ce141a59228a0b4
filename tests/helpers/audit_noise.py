"""Test-only noise for the Spark audit: exposes the job's own scale (never used outside tests)."""
from __future__ import annotations

import numpy as np


class ScaleProbe:
    """Adds ``fraction · scale`` to every centroid: the output minus the bare centroid reveals b."""

    def __init__(self, fraction: float) -> None:
        self.fraction = float(fraction)

    def perturb(self, values, scales, attributes, clusters):
        return np.asarray(values, float) + self.fraction * np.asarray(scales, float)
