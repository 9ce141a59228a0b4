"""TEMPORARY SHIM (replaced by the helper's exact sampler before commit)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

import numpy as np


class ShareSource(Protocol):
    def words(self, size: int) -> np.ndarray: ...


@dataclass(frozen=True)
class DivisibleDiscreteLaplace:
    alpha: Fraction
    parts: int

    @classmethod
    def calibrate(cls, epsilon, sensitivity, parts):
        a = math.exp(-float(epsilon) / sensitivity)
        return cls(Fraction(int(math.ceil(a * 2**64)), 2**64), parts)

    def share(self, size, source=None):
        g = np.random.default_rng()
        p = 1 - float(self.alpha)
        return (g.negative_binomial(1 / self.parts, p, size) - g.negative_binomial(1 / self.parts, p, size)).astype(np.int64)

    def variance_of_sum(self, owners):
        a = float(self.alpha)
        return 2 * (owners / self.parts) * a / (1 - a) ** 2

    def epsilon_bound(self, sensitivity):
        return sensitivity * math.log(1 / float(self.alpha))
