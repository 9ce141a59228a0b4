"""Information loss of a protected table against the original, on Spark (docs/specification.md §4).

Evaluates the same formula as :func:`fragrelease.idpir.metrics.mean_sse`, records matched by id. Only
parties that hold both tables (an owner on its own fragment, or the local driver that simulates
every party) can compute it; the result is a utility figure for the data holders, not part of the
release's metadata.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.metrics import CATEGORICAL_SCALE, CONVENTIONS
from fragrelease.protocol.fragmentation import fragmentation_of
from fragrelease.schemas.base import Attribute

from ..frames import aggregate_row
from ..protocol.fragment import conform_attributes, conform_id
from ..protocol.shuffle import ONE_TASK_VALUES, one_task
from ..storage import read_configured

if TYPE_CHECKING:
    from fragrelease.protocol.messages import Plan

    from ..protocol.context import OwnerContext


def mean_sse(original: DataFrame, protected: DataFrame, attributes: Sequence[Attribute], id_column: str,
             convention: str = "authors") -> float:
    """MeanSSE of ``protected`` against ``original`` (both with ``id_column`` and the attributes).

    Records are matched by ``id_column`` (a full outer join); numeric attributes are scaled by the
    original's sample standard deviation, categorical ones count a mismatch as 1 scaled by
    ``CATEGORICAL_SCALE`` (docs/specification.md §4; the ``convention`` as in
    :func:`fragrelease.idpir.metrics.mean_sse`, which this equals up to float rounding). Returns a
    non-negative float (unitless). One Spark aggregation; the result is owner-only information.

    Raises
    ------
    InvalidParameterError
        Unknown convention, unmatched ids, empty tables, or an attribute with zero spread.
    """
    return sum(mean_sse_by_attribute(original, protected, attributes, id_column, convention).values())


def mean_sse_by_attribute(original: DataFrame, protected: DataFrame, attributes: Sequence[Attribute],
                          id_column: str, convention: str = "authors") -> Mapping[str, float]:
    """Each attribute's contribution to :func:`mean_sse`, attribute name → non-negative float; they add up to it.

    Attribute g contributes ``(1/(n·l)) Σ_h (d_g / s_g)²`` (authors' convention; ``(1/(n·l²)) Σ_h (d_g/σ²_g)²``
    for ``paper``), docs/specification.md §4. Same inputs, errors and single Spark aggregation as
    :func:`mean_sse`; owner-only information (computed from the original data).
    """
    return _joined_pass(original, protected, attributes, id_column, convention)[0]


def mean_sse_with_quantiles(original: DataFrame, protected: DataFrame, attributes: Sequence[Attribute], id_column: str,
                            probabilities: Sequence[float], accuracy: int
                            ) -> tuple[Mapping[str, float], Mapping[str, list[float]], Mapping[str, list[float]]]:
    """:func:`mean_sse_by_attribute` (authors' convention) and, from the same Spark aggregation, the
    ``probabilities`` quantiles (``percentile_approx`` with ``accuracy``, values as doubles) of every
    numeric attribute in ``original`` and in ``protected``: one pass over the join instead of three.

    Returns ``(contributions, quantiles of original, quantiles of protected)``, the last two attribute
    name → list of floats (an attribute whose values are all null has none). Each record is one row
    of the join (ids match one to one, else InvalidParameterError as :func:`mean_sse_by_attribute`),
    so the quantiles are those of each table alone. Owner-only information.
    """
    attrs = list(attributes)
    numeric = [(i, a.name) for i, a in enumerate(attrs) if not a.categorical]
    extra = [F.percentile_approx(F.col(f"{side}_{i}").cast("double"), list(probabilities), accuracy).alias(f"q{side}_{i}")
             for side in ("o", "p") for i, _ in numeric]
    contributions, row = _joined_pass(original, protected, attrs, id_column, "authors", extra)
    q = {side: {name: [float(v) for v in row[f"q{side}_{i}"]] for i, name in numeric if row[f"q{side}_{i}"] is not None}
         for side in ("o", "p")}
    return contributions, q["o"], q["p"]


def _joined_pass(original: DataFrame, protected: DataFrame, attributes: Sequence[Attribute], id_column: str,
                 convention: str, extra: Sequence[Column] = ()) -> tuple[Mapping[str, float], Row]:
    """The contributions of :func:`mean_sse_by_attribute` and the aggregation's row (with ``extra``
    aggregates over the join's columns ``o_<i>``, ``p_<i>``): one Spark aggregation."""
    if convention not in CONVENTIONS:
        raise InvalidParameterError(f"MeanSSE convention must be one of {CONVENTIONS}, not {convention!r}")
    attrs = list(attributes)
    o = original.select(F.col(id_column), *[F.col(a.name).alias(f"o_{i}") for i, a in enumerate(attrs)])
    p = protected.select(F.col(id_column), *[F.col(a.name).alias(f"p_{i}") for i, a in enumerate(attrs)])
    joined = o.join(p, id_column, "full_outer")
    # One pass: per attribute the sum of squared differences and (numeric) the original's standard
    # deviation; the scaling happens here on the driver, so no statistic of the original data
    # becomes a literal of a Spark plan (explain output, the UI, event logs).
    aggs = [F.sum((F.col("o_0").isNull() | F.col("p_0").isNull()).cast("long")).alias("unmatched"),
            F.count(F.lit(1)).alias("n")]
    for i, a in enumerate(attrs):
        if a.categorical:
            d = (F.col(f"o_{i}") != F.col(f"p_{i}")).cast("double")
        else:
            d = F.col(f"o_{i}").cast("double") - F.col(f"p_{i}").cast("double")
            aggs.append(F.stddev_samp(F.col(f"o_{i}").cast("double")).alias(f"s_{i}"))
        aggs.append(F.sum(d * d).alias(f"ss_{i}"))
    aggs.extend(extra)
    row = aggregate_row(joined.agg(*aggs))
    if row["unmatched"]:
        raise InvalidParameterError(f"{row['unmatched']} records could not be matched by {id_column!r}")
    if not row["n"]:
        raise InvalidParameterError("MeanSSE needs at least one record; both tables are empty")
    l = len(attrs)
    denom = int(row["n"]) * (l if convention == "authors" else l * l)
    out = {}
    for i, a in enumerate(attrs):
        s = CATEGORICAL_SCALE if a.categorical else row[f"s_{i}"]
        if not s or s <= 0:
            raise InvalidParameterError(f"attribute {a.name!r} has zero spread in the original data")
        s = s if convention == "authors" else s * s
        out[a.name] = float(row[f"ss_{i}"]) / (s * s) / denom
    return out, row


def owners_mean_sse(spark, plan: Plan, owners: Sequence[OwnerContext], by_owner: Mapping[str, DataFrame]) -> float:
    """MeanSSE of the owners' protected fragments (with raw ids, this driver's own copies, never
    the pseudonymized ones under ``work_dir``) against the originals; ``owners`` in configuration order.

    What the single-machine driver scores (:meth:`fragrelease.jobs.idpir.kind.IRJobs.mean_sse`, called by
    :func:`fragrelease.jobs.protocol.release.play_release`): ``by_owner`` maps each owner to the protected
    DataFrame its round returned (``(id_column, *attributes)``). One Spark job when the release is small
    (:func:`fragrelease.jobs.protocol.shuffle.one_task` of the plan's record counts), else the join's and
    the aggregation's stages. Raises InvalidParameterError as :func:`mean_sse`."""
    from .combine import assemble

    cfg, schema = owners[0].config, owners[0].schema
    attrs = [schema.attribute(a["name"]) for a in plan.attributes]
    id_col = schema.id_column
    assert id_col is not None  # a release's schema names its id column (checked with the configuration)
    # read as the owners read them (CSV as text, no inference pass), ids and numbers cast as the owners
    # cast them once their validation passed
    id_type = schema.attribute(id_col).type
    originals = [conform_attributes(conform_id(read_configured(spark, o.paths.fragment, text=True), id_col,
                                               id_type), attrs) for o in owners]
    if cfg.risk_check is not None:  # the owners' held-out control records were not released: not scored
        from ..protocol.keys import owner_pseudonym_key
        from .risk_check import split_control

        originals = [split_control(df, id_col, owner_pseudonym_key(o), cfg.name, cfg.risk_check.control_share)[0]
                     for df, o in zip(originals, owners)]
    protecteds = [by_owner[o.name] for o in owners]
    names = [a.name for a in attrs]
    # the same assembly as the release's (fragrelease.jobs.idpir.combine.combine), on raw ids
    original = assemble(originals, cfg.fragmentation, names, key=id_col)
    protected = assemble(protecteds, cfg.fragmentation, names, key=id_col)
    rows = fragmentation_of(cfg.fragmentation).released_rows([o.n_records for o in plan.owners])
    if one_task(rows, len(names) + 1):
        # a small release (the plan's public record counts): each side one partition (no rows move),
        # so the join and its aggregation plan no exchange and MeanSSE is one Spark job. The limit
        # drops nothing (at least the plan's record count; a row too many would show as unmatched):
        # it gives the planner the stored protected values' size, which it otherwise shuffles
        cap = ONE_TASK_VALUES // (len(names) + 1)
        original, protected = original.coalesce(1), protected.coalesce(1).limit(cap)
    return mean_sse(original, protected, attrs, id_col)
