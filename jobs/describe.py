"""What a release table says about itself: its description, ``fragrelease.*`` properties, column comments.

Everything here is computed from the release's **public** provenance (the plan: ε, composition, k,
mechanism, linkage, post-processing, category order, owners' budgets, declared domains) and from
the declared schema; no function here reads the data, so nothing data-dependent (observed extremes,
local sensitivities, frequencies) can reach a property, a comment or the description
(tests/jobs/test_lakehouse.py checks this on a fixture). The guarantee sentences come from
:func:`fragrelease.idpir.guarantee.release_guarantee` (docs/privacy.md).

Both commit paths write these (:func:`fragrelease.jobs.storage.commit_delta`): Delta's Spark API
(``tableProperty``/``COMMENT``, column metadata ``comment``) and delta-rs (table description, field
metadata ``comment``, ``alter.set_table_properties``). Spark shows them with ``DESCRIBE TABLE
EXTENDED`` and ``SHOW TBLPROPERTIES``; delta-rs with ``DeltaTable(path).metadata()`` and ``.schema()``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from fragrelease.protocol.options import OPTION_NAMES

#: Prefix of every table property fragrelease sets.
PROPERTY_PREFIX = "fragrelease."


@dataclass(frozen=True)
class TableDescription:
    """A table's description (``comment``), its ``fragrelease.*`` properties and per-column comments."""

    comment: str
    properties: dict[str, str] = field(default_factory=dict)
    column_comments: dict[str, str] = field(default_factory=dict)


def _eps_by_owner(provenance: Mapping[str, Any], attribute: str) -> str:
    """``1/10 (o1, o2); 1/5 (o3)``: each owner's ε for ``attribute`` (public budgets from the plan)."""
    groups: dict[str, list[str]] = {}
    for o in provenance.get("owners", []):
        for b in o.get("budgets", []):
            if b.get("attribute") == attribute:
                groups.setdefault(str(b.get("epsilon")), []).append(o["name"])
    return "; ".join(f"{eps} ({', '.join(names)})" for eps, names in groups.items()) or "?"


def release_description(provenance: Mapping[str, Any], *, declared_types: Optional[Mapping[str, str]] = None,
                        id_column: Optional[str] = None) -> TableDescription:
    """The description of an iDP-IR/DP-IR release from its provenance (:func:`fragrelease.jobs.protocol.aggregator.provenance`).

    Parameters
    ----------
    provenance : the release's public provenance (plan facts and guarantee).
    declared_types : attribute name -> declared column type (``integer``, ``long``, ``double``, ``string``).
    id_column : the released pseudonym column when the release keeps it (``keep_id``; ``pseudonym``).

    Returns
    -------
    TableDescription with the properties ``fragrelease.{role, dataset, fragmentation, mechanism, k,
    epsilon, composition, epsilon_split, owners, plan_id, guarantee.*, version}`` and one per release
    option (:data:`fragrelease.protocol.options.OPTION_NAMES`: category_order, category_order_share,
    linkage, postprocess) (strings), and a comment per released column stating its
    guarantee.
    """
    declared_types = declared_types or {}
    guarantee = provenance.get("guarantee") or {}
    if provenance.get("linkage") == "synthetic":
        return _synthetic_description(provenance, guarantee, declared_types)
    mech = str(provenance.get("mechanism", "?"))
    label = {"idp-ir": "iDP-IR", "dp-ir": "DP-IR"}.get(mech, mech)
    notion = "DP" if mech.lower().startswith("dp") else "iDP"
    comment = (f"fragrelease {provenance.get('role', 'release')} of dataset {provenance.get('dataset')!s} "
               f"({provenance.get('fragmentation')} fragments, {label}: k-anonymous microaggregation with "
               f"Laplace noise, {notion}). Parameters in the table properties fragrelease.*, each version's "
               f"provenance in its commit's userMetadata; guarantee: {guarantee.get('table', '?')}")
    props = {
        "role": provenance.get("role"), "dataset": provenance.get("dataset"),
        "fragmentation": provenance.get("fragmentation"), "mechanism": mech, "k": provenance.get("k"),
        "epsilon": provenance.get("epsilon"), "composition": provenance.get("composition"),
        "epsilon_split": provenance.get("epsilon_split"),
        **{name: provenance.get(name) for name in OPTION_NAMES},  # every release option (fragrelease/protocol/options.py)
        "owners": ", ".join(o["name"] for o in provenance.get("owners", [])),
        "plan_id": provenance.get("plan_id"), "version": provenance.get("fragrelease_version"),
    }
    props.update({f"guarantee.{k}": v for k, v in guarantee.items()})
    properties = {PROPERTY_PREFIX + k: (v if isinstance(v, str) else json.dumps(v))
                  for k, v in props.items() if v is not None}
    linkage = ("linked rows: see the table's guarantee" if provenance.get("linkage") == "linked"
               else "column shuffled on its own (unlinked): see the table's guarantee")
    columns: dict[str, str] = {}
    for a in provenance.get("attributes", []):
        name = a["name"]
        if a.get("kind") == "categorical":
            value = "noisy cluster rank clamped and rounded to a category of the declared list"
        else:
            rounded = " rounded to an integer (post-processing)" if declared_types.get(name) in ("integer", "long") else ""
            value = f"noisy cluster value clamped to the declared domain {a.get('domain')}{rounded}"
        columns[name] = (f"{label}, eps_attr = {_eps_by_owner(provenance, name)} ({notion} of this column "
                         f"as a multiset per owner's fragment); {value}; {linkage}")
    if id_column and provenance.get("keep_id"):
        columns[id_column] = ("keyed pseudonym of the record id (HMAC-SHA-256 under the owners' key; keep_id): a "
                              "linkage key for whoever holds the key, outside every epsilon statement")
    return TableDescription(comment, properties, columns)


def _synthetic_description(provenance: Mapping[str, Any], guarantee: Mapping[str, str],
                           declared_types: Mapping[str, str]) -> TableDescription:
    """:func:`release_description` of a ``linkage: synthetic`` release (docs/specification.md §10).

    Properties ``fragrelease.{role, dataset, fragmentation, epsilon, composition, linkage,
    synthesis_target, synthesis_bins, synthesis.epsilon_one_way, synthesis.epsilon_selection,
    synthesis.epsilon_cliques, synthesis.cliques, owners, plan_id, guarantee.*, version}``: public terms
    and values computed from noised values only (the cliques, chosen from the owners' noisy round one).
    """
    terms = provenance.get("synthesis") or {}
    comment = (f"fragrelease synthetic release of dataset {provenance.get('dataset')!s} (horizontal fragments, "
               "marginal synthesis: rows drawn from a graphical model fitted to the owners' noisy marginals; the rows "
               "are not records). Parameters in the table properties fragrelease.*, each version's provenance in its "
               f"commit's userMetadata; guarantee: {guarantee.get('table', '?')}")
    props = {
        "role": provenance.get("role"), "dataset": provenance.get("dataset"),
        "fragmentation": provenance.get("fragmentation"), "epsilon": provenance.get("epsilon"),
        "composition": provenance.get("composition"), "linkage": "synthetic",
        "synthesis_target": provenance.get("synthesis_target"), "synthesis_bins": provenance.get("synthesis_bins"),
        **{f"synthesis.{k}": terms.get(k) for k in ("epsilon_one_way", "epsilon_selection", "epsilon_cliques")},
        "synthesis.cliques": "; ".join(" x ".join(c) for c in terms.get("cliques", ())) or None,
        "owners": ", ".join(o["name"] for o in provenance.get("owners", [])),
        "plan_id": provenance.get("plan_id"), "version": provenance.get("fragrelease_version"),
    }
    props.update({f"guarantee.{k}": v for k, v in guarantee.items()})
    properties = {PROPERTY_PREFIX + k: (v if isinstance(v, str) else json.dumps(v))
                  for k, v in props.items() if v is not None}
    columns: dict[str, str] = {}
    for a in provenance.get("attributes", []):
        name = a["name"]
        if a.get("kind") == "categorical":
            value = "drawn from the model: one of the declared categories"
        else:
            whole = " (a whole number)" if declared_types.get(name) in ("integer", "long") else ""
            value = (f"drawn from the model's bin of the declared domain {a.get('domain')}, then uniformly inside the "
                     f"bin{whole} (post-processing)")
        columns[name] = f"synthetic: {value}; part of a whole table that is {provenance.get('epsilon')}-DP"
    return TableDescription(comment, properties, columns)


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
