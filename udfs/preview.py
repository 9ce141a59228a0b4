"""The accuracy preview's simulated releases, drawn on the executors (never released).

:func:`simulated_attribute` runs in one task per numeric attribute of an owner's private preview
(:func:`fragrelease.jobs.idpir.owner_preview.owner_preview`): the mechanism simulated ``runs`` times on
the attribute's own values with Laplace draws from :class:`fragrelease.rng.simulation.SecureSimulation`
(the OS CSPRNG) built in the task, unless a test passes a seeded source.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Optional

import numpy as np

from fragrelease.idpir.preview_error import FragmentError, simulate_numeric
from fragrelease.rng.simulation import SecureSimulation, SimulationRandomness


def simulated_attribute(sorted_values: np.ndarray, *, mechanism: str, k: int, lo: float, hi: float,
                        epsilon_centroids: Fraction, postprocess: str, runs: int,
                        randomness: Optional[SimulationRandomness]) -> FragmentError:
    """:func:`fragrelease.idpir.preview_error.simulate_numeric` in the task: values sorted, shape (n,).

    ``randomness``: a test's seeded source, else a :class:`~fragrelease.rng.simulation.SecureSimulation`
    built here. Returns and raises as :func:`~fragrelease.idpir.preview_error.simulate_numeric`.
    """
    return simulate_numeric(sorted_values, mechanism=mechanism, k=k, lo=lo, hi=hi, epsilon_centroids=epsilon_centroids,
                            postprocess=postprocess, runs=runs,
                            randomness=randomness if randomness is not None else SecureSimulation())
