"""Pandas UDFs that draw randomness on the executors (the pattern of Tumult Analytics).

The UDFs are marked non-deterministic, so Spark's optimizer never duplicates or re-orders them,
and the jobs materialize their output (``localCheckpoint(eager=True)``) before any second use or
write: a retried task or a recomputed plan never draws fresh noise for values already drawn.
"""
from __future__ import annotations

import pandas as pd
from pyspark.sql.functions import pandas_udf
from pyspark.sql.types import DoubleType, LongType

from fragrelease.rng.diffgen import SecureDiffGenRandomness
from fragrelease.rng.laplace import LaplaceNoise
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
