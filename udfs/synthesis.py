"""The marginal-synthesis release's rows, drawn on the executors (docs/specification.md §10).

The aggregator fits the model on the driver (noisy aggregates only) and compiles it into a small
:class:`~fragrelease.synthesis.model.SamplingPlan`; :func:`synthetic_rows` spreads the row count
over ``spark.range`` partitions and each task draws its rows from the plan with uniforms from the OS
CSPRNG (:func:`fragrelease.rng.diffgen.secure_open_unit`), then decodes them (a bin's value uniformly
inside the bin). Post-processing of DP outputs; the draws are fresh on every evaluation, so the
caller writes the frame once (a Delta commit) and reads the written table afterwards.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import pandas as pd

from fragrelease.errors import InvalidParameterError
from fragrelease.rng.diffgen import secure_open_unit
from fragrelease.synthesis.domain import SynthesisDomain
from fragrelease.synthesis.model import SamplingPlan, sample_codes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def spark_type(domain: SynthesisDomain, name: str) -> str:
    """The released column's Spark SQL type: string (categorical), bigint (whole numbers) or double."""
    attr = domain[name]
    return "string" if attr.categorical else ("bigint" if attr.integer else "double")


def synthetic_rows(spark: SparkSession, plan: SamplingPlan, domain: SynthesisDomain, rows: int, *,
                   partitions: int) -> DataFrame:
    """``rows`` records drawn from ``plan`` on the executors: columns ``domain.names`` (:func:`spark_type`).

    Raises
    ------
    InvalidParameterError
        ``rows < 0`` or ``partitions < 1``.
    """
    if rows < 0 or partitions < 1:
        raise InvalidParameterError(f"rows must be >= 0 and partitions >= 1, not {rows} and {partitions}")
    names = list(domain.names)
    schema = ", ".join(f"`{n}` {spark_type(domain, n)}" for n in names)

    def draw(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            codes = pd.DataFrame(sample_codes(plan, len(batch), secure_open_unit))
            values = domain.decode(codes[names], secure_open_unit)
            for n in names:
                if spark_type(domain, n) == "bigint":
                    values[n] = values[n].astype("int64")
            yield values

    return spark.range(0, rows, 1, partitions).mapInPandas(draw, schema)
