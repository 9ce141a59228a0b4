"""Random keys and seeded samples drawn on the executors (docs/specification.md §2, §8).

:func:`random_keys` is called inside Spark tasks (the unlinking's scatter,
:mod:`fragrelease.jobs.idpir.unlink`); :func:`bernoulli_sample` is Spark's own Bernoulli sampler,
which draws on the executors from a seed this module takes from the OS CSPRNG. The per-row key UDF
is :func:`fragrelease.udfs.noise.secure_random_key_udf`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fragrelease.rng.secure import secure_random_keys

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def random_keys(size: int) -> np.ndarray:
    """``size`` uniform keys in [0, 2**63), int64, shape (size,), drawn in the calling task from the OS CSPRNG.

    :func:`fragrelease.rng.secure.secure_random_keys`; a retried task draws fresh keys, so the
    caller stores what it derives from them before any second read.

    Raises
    ------
    InvalidParameterError
        ``size < 0``.
    """
    return secure_random_keys(size)


def bernoulli_sample(df: DataFrame, fraction: float) -> DataFrame:
    """``df.sample(fraction, seed)``: each row kept with probability ``fraction`` (same columns), drawn
    by Spark's sampler on the executors from a seed taken here from the OS CSPRNG (63 bits).

    Spark's sampler is a seeded pseudo-random generator, not a CSPRNG: only for samples that protect
    nothing (the bucket sort's splitters, which balance work; the risk check's attack sample).
    """
    return df.sample(fraction=fraction, seed=int(secure_random_keys(1)[0]))
