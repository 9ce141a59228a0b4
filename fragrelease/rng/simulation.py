"""Randomness of the accuracy preview's simulations (docs/specification.md §2 "Accuracy preview", §8).

The preview predicts a release's error by simulating the mechanism many times
(:mod:`fragrelease.idpir.preview_error`). Its draws protect nothing (the preview spends no budget and
its simulated noise is never released), but an owner's preview runs on the owner's own data, so the
project's rule holds here too: production draws come from the OS CSPRNG (:class:`SecureSimulation`),
and a seed exists only for tests (:class:`SeededSimulation`).

A source gives standard Laplace variables (scale 1); the caller multiplies by the scale.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from fragrelease.errors import InvalidParameterError
from fragrelease.rng.diffgen import secure_open_unit


class SimulationRandomness(Protocol):
    """Standard Laplace draws (location 0, scale 1) for the preview's simulations."""

    name: str

    def laplace(self, size: int) -> np.ndarray:
        """``size`` iid standard Laplace variables, float64, shape (size,)."""
        ...


def _laplace_from_unit(u: np.ndarray) -> np.ndarray:
    """Inverse CDF of the standard Laplace law at ``u`` in (0, 1): ``−sign(u − ½)·ln(1 − 2|u − ½|)``.

    ``u`` strictly inside (0, 1) (:func:`fragrelease.rng.diffgen.secure_open_unit` never gives 0 or 1),
    so every value is finite.
    """
    d = u - 0.5
    return -np.sign(d) * np.log1p(-2.0 * np.abs(d))


class SecureSimulation:
    """Production source: standard Laplace by inversion of uniforms from the OS CSPRNG (52 bits each)."""

    name = "os-csprng-inversion"

    def laplace(self, size: int) -> np.ndarray:
        if size < 0:
            raise InvalidParameterError(f"size must be >= 0, not {size}")
        return _laplace_from_unit(secure_open_unit(size))


class SeededSimulation:
    """Tests only: numpy's PCG64 with a fixed seed (reproducible simulations)."""

    name = "seeded-pcg64 (tests only)"

    def __init__(self, seed: int) -> None:
        self._gen = np.random.Generator(np.random.PCG64(seed))

    def laplace(self, size: int) -> np.ndarray:
        if size < 0:
            raise InvalidParameterError(f"size must be >= 0, not {size}")
        return self._gen.laplace(0.0, 1.0, size=size)
