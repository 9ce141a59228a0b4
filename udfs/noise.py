"""Noise and random keys drawn on the executors (the pattern of Tumult Analytics).

Pandas UDFs (:func:`secure_random_key_udf`, :func:`laplace_count_udf`) and the draws that the
release's tasks call (:func:`task_noise`, :func:`noisy_cluster_centroids`, :func:`draw_ranked_attribute`,
:func:`gumbel_noise`). The UDFs are marked non-deterministic, so Spark's optimizer never duplicates
or re-orders them. The jobs materialize the centroid noise (:mod:`fragrelease.jobs.idpir.cluster_noise`)
and DiffGen's noisy leaf counts (``localCheckpoint(eager=True)``) before any second use or write: a
retried task or a recomputed plan never draws fresh noise for values already drawn.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd
from pyspark.sql.functions import pandas_udf
from pyspark.sql.types import DoubleType, LongType

from fragrelease.idpir.mechanisms import draw_task, noisy_centroids
from fragrelease.idpir.stage import AttributeTask, StageSpec
from fragrelease.rng.diffgen import SecureDiffGenRandomness, secure_gumbel
from fragrelease.rng.laplace import LaplaceNoise, NoiseSource, SecureLaplace
from fragrelease.rng.secure import secure_random_keys


def secure_random_key_udf():
    """UDF ``(any column) -> long``: a uniform random key in [0, 2**63) per row from the OS CSPRNG.

    Built on each call (after the session exists), so it is a Spark Connect UDF under Connect.
    """

    @pandas_udf(LongType())  # type: ignore[call-overload]  # pyspark's stubs lack the type-hint form
    def secure_key(anchor: pd.Series) -> pd.Series:
        return pd.Series(secure_random_keys(len(anchor)))

    return secure_key.asNondeterministic()


def laplace_count_udf(noise: LaplaceNoise):
    """UDF ``(count double) -> count + Lap(noise.scale)`` (double): DiffGen's noisy leaf counts.

    Columns in: one double count per leaf x class cell. Out: the count plus one Laplace draw of
    ``noise`` (:func:`fragrelease.diffgen.release.leaf_count_noise`, ``b = 2/ε``, docs/specification.md
    §7), from :class:`fragrelease.rng.diffgen.SecureDiffGenRandomness` created on the executor.
    """
    scale = noise.scale

    @pandas_udf(DoubleType())  # type: ignore[call-overload]  # pyspark's stubs lack the type-hint form
    def noisy_count(counts: pd.Series) -> pd.Series:
        return pd.Series(SecureDiffGenRandomness().laplace(counts.to_numpy(float), scale))

    return noisy_count.asNondeterministic()


def task_noise(noise: Optional[NoiseSource]) -> NoiseSource:
    """The Laplace sampler of one executor task: ``noise`` when a test injects one, else a
    :class:`fragrelease.rng.laplace.SecureLaplace` built in the task (OpenDP, OS CSPRNG)."""
    return noise if noise is not None else SecureLaplace()


def noisy_cluster_centroids(centroids: np.ndarray, scales: np.ndarray, attribute: str,
                            noise: Optional[NoiseSource]) -> np.ndarray:
    """One attribute's c centroids plus one Laplace draw each, in the task: shapes (c,) in, (c,) out (unclamped).

    :func:`fragrelease.idpir.mechanisms.noisy_centroids` with the clusters numbered 0..c-1 and the
    sampler of :func:`task_noise`; the distributed plan's draw
    (:func:`fragrelease.jobs.idpir.cluster_noise.noise_per_attribute`). Source: docs/specification.md §2.
    """
    c = int(np.asarray(centroids).size)
    return noisy_centroids(centroids=centroids, scales=scales, attributes=np.full(c, attribute, dtype=object),
                           clusters=np.arange(c), noise=task_noise(noise))


def draw_ranked_attribute(values: np.ndarray, tiebreak: np.ndarray, task: AttributeTask, stage: StageSpec,
                          noise: Optional[NoiseSource]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One attribute's whole mechanism in the task: :func:`fragrelease.idpir.mechanisms.draw_task`.

    ``values`` and ``tiebreak`` shape (n,); ``task`` and ``stage`` the attribute's and the owner's
    stage (:mod:`fragrelease.idpir.stage`); returns ``(order, noisy, sizes)``: the rank order (n,),
    the raw noisy centroids (c,) and the cluster sizes (c,), with the sampler of :func:`task_noise`;
    the whole-attribute plan's draw (:func:`fragrelease.jobs.idpir.cluster_noise.draw_whole_attributes`).
    Raises as :func:`~fragrelease.idpir.mechanisms.draw_task`.
    """
    order, _, noisy, sizes = draw_task(values, task, stage, task_noise(noise), tiebreak=tiebreak)
    return order, noisy, sizes


def gumbel_noise(size: int) -> np.ndarray:
    """``size`` standard Gumbel variables, float64 shape (size,), drawn in the task from the OS CSPRNG
    (:func:`fragrelease.rng.diffgen.secure_gumbel`): DiffGen's distributed exponential mechanism
    (:mod:`fragrelease.jobs.diffgen.marginals`)."""
    return secure_gumbel(size)
