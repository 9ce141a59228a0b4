"""Shared pieces of the Python API (:mod:`fragrelease.jobs.api`, :mod:`fragrelease.jobs.release_api`) and
the local driver (:mod:`fragrelease.jobs.protocol.release`).

:class:`Guarantee`, the typed privacy statement both results carry; :class:`OwnerResult` and
:class:`ReleaseResult`, what a whole release played in one driver returns; and the pandas input path
(a pandas fragment becomes a Spark DataFrame with the dataset schema's declared types). This module
sits below the local driver and the API (tests/test_architecture.py, ``JOBS_LAYERS``): it imports
only the storage layer, never a party module, the driver or the API.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Mapping, Optional, Sequence, Union

try:
    from pyspark.sql import DataFrame
except ImportError:  # pyspark is not a wheel dependency: one clear line instead of the bare import error
    from . import require_pyspark

    require_pyspark()
    raise

from fragrelease.protocol.messages import Manifest, Plan
from fragrelease.schemas.base import Attribute, DatasetSchema

from . import require_pyspark
from .storage import read_delta, read_table

SchemaLike = Union[str, DatasetSchema, Sequence[Attribute]]


@dataclass(frozen=True)
class Guarantee:
    """The exact privacy statement of a protected fragment or a release, in plain sentences.

    Source: :func:`fragrelease.idpir.guarantee.release_guarantee` (docs/privacy.md;
    docs/specification.md §2): ``per_column`` always holds; ``table`` says whether the joint table has
    an ε bound (only with ``linkage: unlinked``); ``against`` says against whom; ``hand_over`` (with
    ``risk_check``, else None) says the owners' advisory risk check adds nothing to it.
    """

    neighbouring: str
    notion: str
    per_column: str
    table: str
    against: str
    hand_over: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, str]) -> Guarantee:
        return cls(**{k: d[k] for k in ("neighbouring", "notion", "per_column", "table", "against")},
                   hand_over=d.get("hand_over"))


@dataclass(frozen=True)
class OwnerResult:
    """One owner's part of a release: its name, record count, ε_j, attributes and manifest."""

    name: str
    records: int
    epsilon: Fraction
    attributes: tuple[str, ...]
    #: the owner's signed manifest; None for a synthetic release, whose owners write signed
    #: measurements instead (fragrelease.synthesis.protocol)
    manifest: Optional[Manifest]


@dataclass(frozen=True)
class ReleaseResult:
    """What the local driver returns (:func:`fragrelease.jobs.protocol.release.play_release`, hence
    :meth:`fragrelease.jobs.api.Release.run` and ``fragrelease run``).

    Attributes
    ----------
    path : the release's Delta table folder (absolute for local paths).
    table : its catalog name when the release went to ``output_table``, else None.
    version : the Delta version this run committed (0 for a new table).
    rows : released rows (horizontal: Σ n_j; vertical: n).
    plan : the aggregator's plan (k, each owner's ε_j and budget split, ...).
    owners : one :class:`OwnerResult` per owner, in plan order.
    epsilon : the release's total ε (exact); ``composition``: parallel (horizontal) or sequential.
    guarantee : the exact statement recorded in the provenance.
    provenance : the public facts recorded with the commit, as recorded (read-only mapping).
    report : path of the public report (statistics of the released table only), or None.
    mean_sse : MeanSSE of the protected fragments against the originals, when ``evaluate=True``
        (the driver holds the originals: simulations and experiments only), else None.
    """

    path: str
    table: Optional[str]
    version: int
    rows: int
    plan: Plan
    owners: tuple[OwnerResult, ...]
    epsilon: Fraction
    composition: str
    guarantee: Guarantee
    provenance: Mapping[str, Any]
    report: Optional[str] = None
    mean_sse: Optional[float] = None

    def dataframe(self, spark) -> DataFrame:
        """This version of the release as a DataFrame (columns in plan order; no id unless ``keep_id``)."""
        if self.table is not None:
            return read_table(spark, self.table, self.version)
        return read_delta(spark, self.path, self.version)


def _is_pandas(obj) -> bool:
    import pandas as pd

    return isinstance(obj, pd.DataFrame)


#: The values Spark's IntegerType and LongType hold (32- and 64-bit two's complement).
_INTEGER_RANGE = {"integer": (-(2 ** 31), 2 ** 31 - 1), "long": (-(2 ** 63), 2 ** 63 - 1)}


def _from_pandas(spark, pdf, columns: Sequence[Attribute], *, owner: str) -> DataFrame:
    """A pandas fragment as a Spark DataFrame with the declared types (the dataset schema's columns).

    Every declared column that ``pdf`` has is converted to its declared type (``integer``/``long``:
    whole numbers; ``double``; ``string``: labels as text); other columns are dropped (they are never
    released). Missing columns, nulls and values outside a domain are left to the fragment's
    validation (:func:`fragrelease.jobs.idpir.protect.validate_fragment`), which names them.

    Raises
    ------
    SchemaMismatchError
        A value that is not of the declared type, or a whole number outside the declared type's range
        (``integer``: 32 bits, ``long``: 64 bits); names the owner, the column and the value as written.
    """
    import pandas as pd

    from fragrelease.errors import SchemaMismatchError

    present = [a for a in columns if a.name in pdf.columns]
    if not present:
        raise SchemaMismatchError(f"owner {owner!r}: the pandas DataFrame has none of the declared columns "
                                  f"{[a.name for a in columns]} (it has {list(pdf.columns)[:10]})")
    out = {}
    for a in present:
        col = pdf[a.name].reset_index(drop=True)
        given = col.notna()
        if a.type == "string":
            out[a.name] = pd.Series([v if isinstance(v, str) else str(v) if g else None for v, g in zip(col, given)],
                                    dtype=object)
            continue
        num = pd.to_numeric(col, errors="coerce")
        bad = given & num.isna()
        if a.type in ("integer", "long"):
            finite = num.where(num.abs() != float("inf"))
            bad |= given & ~num.isna() & (finite.isna() | (finite != finite.round()))
        if bad.any():
            value = col[bad].iloc[0]
            value = value.item() if hasattr(value, "item") else value  # numpy scalars as plain Python values
            raise SchemaMismatchError(f"owner {owner!r}, source pandas DataFrame, column {a.name!r}: declared "
                                      f"{a.type}, holds {value!r}")
        if a.type in ("integer", "long"):
            lo, hi = _INTEGER_RANGE[a.type]
            outside = given & ((num < lo) | (num > hi))
            if outside.any():
                value = col[outside].iloc[0]
                value = value.item() if hasattr(value, "item") else value
                more = "; declare it long" if a.type == "integer" else ""
                raise SchemaMismatchError(f"owner {owner!r}, source pandas DataFrame, column {a.name!r}: declared "
                                          f"{a.type}, holds {value!r}, outside its range [{lo}, {hi}]{more}")
        dtype = {"integer": "Int32", "long": "Int64", "double": "float64"}[a.type]
        out[a.name] = num.astype(dtype)
    from pyspark.sql import types as T

    spark_type = {"integer": T.IntegerType(), "long": T.LongType(), "double": T.DoubleType(), "string": T.StringType()}
    struct = T.StructType([T.StructField(a.name, spark_type[a.type], nullable=True) for a in present])
    return spark.createDataFrame(pd.DataFrame(out), schema=struct)
