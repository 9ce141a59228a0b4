"""What a release table says about itself: its description, ``fragrelease.*`` properties, column comments.

Everything here is computed from the release's **public** provenance (the plan: ε, composition, k,
mechanism, linkage, post-processing, category order, owners' budgets, declared domains) and from
the declared schema; no function here reads the data, so nothing data-dependent (observed extremes,
local sensitivities, frequencies) can reach a property, a comment or the description
(tests/jobs/test_lakehouse.py checks this on a fixture). What a release says is its kind's
(:func:`kind_text`: ``fragrelease/idpir/describe_text.py``, ``fragrelease/synthesis/describe_text.py``); the
guarantee sentences are the release's own (:func:`fragrelease.idpir.guarantee.release_guarantee`, docs/privacy.md).

Both commit paths write these (:func:`fragrelease.jobs.storage.commit_delta`): Delta's Spark API
(``tableProperty``/``COMMENT``, column metadata ``comment``) and delta-rs (table description, field
metadata ``comment``, ``alter.set_table_properties``). Spark shows them with ``DESCRIBE TABLE
EXTENDED`` and ``SHOW TBLPROPERTIES``; delta-rs with ``DeltaTable(path).metadata()`` and ``.schema()``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from fragrelease.kinds import entry_of, resolve
from fragrelease.protocol.options import ReleaseOptions

#: Prefix of every table property fragrelease sets.
PROPERTY_PREFIX = "fragrelease."
#: The linkage of a provenance that names none: the release option's default.
_DEFAULT_LINKAGE = ReleaseOptions.model_fields["linkage"].default


@dataclass(frozen=True)
class TableDescription:
    """A table's description (``comment``), its ``fragrelease.*`` properties and per-column comments."""

    comment: str
    properties: dict[str, str] = field(default_factory=dict)
    column_comments: dict[str, str] = field(default_factory=dict)


def release_description(provenance: Mapping[str, Any], *, declared_types: Optional[Mapping[str, str]] = None,
                        id_column: Optional[str] = None) -> TableDescription:
    """The description of a release from its provenance (:func:`fragrelease.jobs.protocol.aggregator.provenance`).

    Parameters
    ----------
    provenance : the release's public provenance (plan facts and guarantee).
    declared_types : attribute name -> declared column type (``integer``, ``long``, ``double``, ``string``).
    id_column : the released pseudonym column when the release keeps it (``keep_id``; ``pseudonym``).

    Returns
    -------
    TableDescription: the comment, the properties and the column comments the release's kind says
    (:func:`kind_text`; an IR release: ``fragrelease.{role, dataset, fragmentation, mechanism, k, epsilon,
    composition, epsilon_split, owners, plan_id, version}`` and one per release option; a synthetic one:
    its synthesis terms), each property prefixed with :data:`PROPERTY_PREFIX` and written as a string
    (JSON for a non-string), an absent one left out, then ``fragrelease.guarantee.*``: the guarantee's
    statements. Raises InvalidParameterError for a linkage no kind is registered for.
    """
    declared_types = declared_types or {}
    guarantee = provenance.get("guarantee") or {}
    comment, props, columns = kind_text(provenance.get("linkage"))(provenance, guarantee, declared_types, id_column)
    props = {**props, **{f"guarantee.{k}": v for k, v in guarantee.items()}}
    properties = {PROPERTY_PREFIX + k: (v if isinstance(v, str) else json.dumps(v))
                  for k, v in props.items() if v is not None}
    return TableDescription(comment, properties, dict(columns))


def kind_text(linkage: Optional[str]) -> Callable[..., tuple[str, Mapping[str, Any], Mapping[str, str]]]:
    """The function by which the release kind ``linkage`` describes a release
    (:data:`fragrelease.kinds.KINDS`, ``describe``): ``(provenance, guarantee, declared_types, id_column)``
    -> ``(comment, properties, column comments)``. A provenance that names no linkage was written before
    the option existed: the option's default kind. Raises InvalidParameterError for an unknown linkage."""
    return resolve(entry_of(linkage or _DEFAULT_LINKAGE).describe)


def integer_columns(attributes: Sequence[dict], declared_types: Mapping[str, str]) -> Mapping[str, str]:
    """Released numeric attributes declared ``integer``/``long``: name -> Spark type name (``int``/``bigint``)."""
    out = {}
    for a in attributes:
        t = declared_types.get(a["name"])
        if a.get("kind") != "categorical" and t in ("integer", "long"):
            out[a["name"]] = "int" if t == "integer" else "bigint"
    return out


def cast_declared_integers(df, columns: Mapping[str, str]):
    """``df`` with each column of ``columns`` rounded half-to-even and cast to its integer type.

    Rounding a released value is post-processing (it reads only the noisy value), so the guarantee
    is unchanged. Columns not in ``df`` are skipped.
    """
    from pyspark.sql import functions as F

    for name, spark_type in columns.items():
        if name in df.columns:
            df = df.withColumn(name, F.bround(F.col(name)).cast(spark_type))
    return df
