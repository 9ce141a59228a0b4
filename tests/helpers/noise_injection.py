"""Test-only noise: a deterministic function of (attribute, cluster), so that a numpy reference and
the Spark job can be given the same noise. Never used outside tests."""
from __future__ import annotations

import hashlib

import numpy as np


class HashedLaplace:
    """Laplace(scale) noise whose draw for (attribute, cluster) is fixed by a hash and a salt."""

    def __init__(self, salt: str = "test") -> None:
        self.salt = salt

    def unit(self, attribute: str, cluster: int) -> float:
        h = hashlib.sha256(f"{self.salt}|{attribute}|{int(cluster)}".encode()).digest()
        u = (int.from_bytes(h[:8], "big") + 0.5) / 2**64 - 0.5  # in (-0.5, 0.5)
        return float(-np.sign(u) * np.log1p(-2 * abs(u)))

    def perturb(self, values, scales, attributes, clusters):
        units = np.array([self.unit(a, c) for a, c in zip(attributes, clusters, strict=False)], dtype=float)
        return np.asarray(values, float) + np.asarray(scales, float) * units


class ZeroNoise:
    """No noise at all: exposes the bare IR microaggregation (tests only)."""

    def perturb(self, values, scales, attributes, clusters):
        return np.asarray(values, float).copy()


class SeededLaplace:
    """Laplace(scale) noise from numpy's PCG64 with a fixed seed: the law of ``FastLaplace`` (the
    evaluation sampler), reproducibly. For tests whose pass/fail must not depend on unseeded draws
    (audits of a mechanism's calibration, not of the sampler); never used outside tests."""

    def __init__(self, seed: int) -> None:
        self._gen = np.random.default_rng(seed)

    def perturb(self, values, scales, attributes, clusters):
        values = np.asarray(values, float)
        return values + self._gen.laplace(0.0, 1.0, size=values.shape) * np.asarray(scales, float)
