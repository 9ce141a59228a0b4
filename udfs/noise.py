"""Pandas UDFs that draw randomness on the executors (the pattern of Tumult Analytics).

The UDFs are marked non-deterministic, so Spark's optimizer never duplicates or re-orders them,
and the jobs materialize their output (``localCheckpoint(eager=True)``) before any second use or
write: a retried task or a recomputed plan never draws fresh noise for values already drawn.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd
from pyspark.sql.functions import pandas_udf
from pyspark.sql.types import DoubleType, LongType

from fragrelease.idpir.mechanisms import noisy_centroids, perturb_centroids
from fragrelease.rng.diffgen import SecureDiffGenRandomness
from fragrelease.rng.laplace import LaplaceNoise, NoiseSource, SecureLaplace
from fragrelease.rng.secure import secure_random_keys


def noisy_centroid_udf(attribute_names: Sequence[str], noise: Optional[NoiseSource] = None, *, finish: bool = True):
    """UDF ``(attr, cluster, centroid, scale, lo, hi, categorical) -> noisy value`` (double).

    Columns in: ``attr`` int index into ``attribute_names``; ``cluster`` long; ``centroid``,
    ``scale`` (Laplace b > 0), ``lo``, ``hi`` doubles; ``categorical`` boolean. Out: the centroid
    plus one Laplace draw, clamped to [lo, hi], rounded half up when categorical (docs/specification.md §1-2).
    With ``finish=False`` the draw is returned unclamped, for the isotonic post-processing that
    follows per attribute (:func:`fragrelease.idpir.postprocess.finish_centroids`).

    ``noise`` is a test-only hook; ``None`` (always, in production) means :class:`SecureLaplace`,
    created on the executor.
    """
    names = np.asarray(list(attribute_names), dtype=object)

    @pandas_udf(DoubleType())  # type: ignore[call-overload]  # pyspark's stubs lack the type-hint form
    def noisy_centroid(attr: pd.Series, cluster: pd.Series, centroid: pd.Series, scale: pd.Series,
                       lo: pd.Series, hi: pd.Series, categorical: pd.Series) -> pd.Series:
        source = noise if noise is not None else SecureLaplace()
        if not finish:
            return pd.Series(noisy_centroids(centroids=centroid.to_numpy(float), scales=scale.to_numpy(float),
                                             attributes=names[attr.to_numpy(int)],
                                             clusters=cluster.to_numpy(np.int64), noise=source))
        out = perturb_centroids(
            centroids=centroid.to_numpy(float), scales=scale.to_numpy(float), lo=lo.to_numpy(float),
            hi=hi.to_numpy(float), categorical=categorical.to_numpy(bool), attributes=names[attr.to_numpy(int)],
            clusters=cluster.to_numpy(np.int64), noise=source,
        )
        return pd.Series(out)

    return noisy_centroid.asNondeterministic()


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
