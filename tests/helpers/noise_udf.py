"""Test-only: the release's per-cluster draw as a pandas UDF, for the Spark audit and the no-redraw control.

The release draws in one task per attribute (:mod:`fragrelease.jobs.idpir.cluster_noise`): the
centroids go through :func:`fragrelease.idpir.mechanisms.noisy_centroids` with the executor's
:class:`fragrelease.rng.laplace.SecureLaplace`, then :func:`fragrelease.idpir.postprocess.finish_centroids`.
This UDF runs those same two functions on the executors over arbitrary rows, so a test can draw tens of
thousands of releases of one centroid vector in one Spark job (``postprocess: none``: clamping and,
for ranks, rounding).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql.functions import pandas_udf
from pyspark.sql.types import DoubleType

from fragrelease.idpir.mechanisms import noisy_centroids
from fragrelease.idpir.postprocess import finish_centroids
from fragrelease.protocol.options import ReleaseOptions
from fragrelease.rng.laplace import SecureLaplace


def release_draw_udf(name: str, lo: float, hi: float, categorical: bool = False):
    """UDF ``(cluster long, centroid double, scale double) -> released value`` (double), non-deterministic."""

    @pandas_udf(DoubleType())
    def draw(cluster: pd.Series, centroid: pd.Series, scale: pd.Series) -> pd.Series:
        m = len(centroid)
        raw = noisy_centroids(centroids=centroid.to_numpy(float), scales=scale.to_numpy(float),
                              attributes=np.full(m, name, dtype=object), clusters=cluster.to_numpy(np.int64),
                              noise=SecureLaplace())
        return pd.Series(finish_centroids(raw, np.ones(m), lo, hi, categorical, ReleaseOptions.of(postprocess="none")))

    return draw.asNondeterministic()
