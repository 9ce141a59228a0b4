"""Information loss of a protected table against the original, on Spark (docs/specification.md §4).

Evaluates the same formula as :func:`fragrelease.idpir.metrics.mean_sse`, records matched by id. Only
parties that hold both tables (an owner on its own fragment, or the local driver that simulates
every party) can compute it; the result is a utility figure for the data holders, not part of the
release's metadata.
"""
from __future__ import annotations

from typing import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.metrics import CATEGORICAL_SCALE, CONVENTIONS
from fragrelease.schemas.base import Attribute


def mean_sse(original: DataFrame, protected: DataFrame, attributes: Sequence[Attribute], id_column: str,
             convention: str = "authors") -> float:
    """MeanSSE of ``protected`` against ``original`` (both with ``id_column`` and the attributes).

    Raises
    ------
    InvalidParameterError
        Unknown convention, unmatched ids, or an attribute with zero spread.
    """
    if convention not in CONVENTIONS:
        raise InvalidParameterError(f"MeanSSE convention must be one of {CONVENTIONS}, not {convention!r}")
    attrs = list(attributes)
    numeric = [a for a in attrs if not a.categorical]
    stds = {}
    if numeric:
        row = original.agg(*[F.stddev_samp(F.col(a.name).cast("double")).alias(a.name) for a in numeric]).first()
        stds = {a.name: row[a.name] for a in numeric}
    o = original.select(F.col(id_column), *[F.col(a.name).alias(f"o_{i}") for i, a in enumerate(attrs)])
    p = protected.select(F.col(id_column), *[F.col(a.name).alias(f"p_{i}") for i, a in enumerate(attrs)])
    joined = o.join(p, id_column, "full_outer")
    terms = []
    for i, a in enumerate(attrs):
        s = CATEGORICAL_SCALE if a.categorical else stds[a.name]
        if not s or s <= 0:
            raise InvalidParameterError(f"attribute {a.name!r} has zero spread in the original data")
        s = s if convention == "authors" else s * s
        if a.categorical:
            d = (F.col(f"o_{i}") != F.col(f"p_{i}")).cast("double")
        else:
            d = F.col(f"o_{i}").cast("double") - F.col(f"p_{i}").cast("double")
        terms.append(F.pow(d / F.lit(s), 2))
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    l = len(attrs)
    denom = l if convention == "authors" else l * l
    row = joined.agg(F.avg(total / F.lit(float(denom))).alias("m"),
                     F.sum(total.isNull().cast("int")).alias("unmatched")).first()
    if row["unmatched"]:
        raise InvalidParameterError(f"{row['unmatched']} records could not be matched by {id_column!r}")
    return float(row["m"])
