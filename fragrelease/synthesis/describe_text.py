"""What a synthetic release table (``linkage: synthetic``; docs/specification.md §10) says about itself,
from its public provenance: its description, its properties and a comment per released column.

Looked up through the registry (:data:`fragrelease.kinds.KINDS`, ``describe``) by
:func:`fragrelease.jobs.describe.release_description`, which adds the guarantee's properties and writes
them as ``fragrelease.*`` table properties. Public terms and values computed from noised values only.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional


def release_text(provenance: Mapping[str, Any], guarantee: Mapping[str, str], declared_types: Mapping[str, str],
                 id_column: Optional[str]) -> tuple[str, dict[str, Any], dict[str, str]]:
    """The description of a synthetic release: ``(comment, properties, column comments)``.

    ``properties`` (unprefixed; None for an absent one): role, dataset, fragmentation, epsilon, composition,
    linkage, synthesis_target, synthesis_bins, synthesis.epsilon_one_way, synthesis.epsilon_selection,
    synthesis.epsilon_cliques, synthesis.collusion (t), synthesis.cliques (chosen from round 2's decoded noisy
    sums), owners,
    plan_id, version. ``id_column`` is unused (the rows are not records: no pseudonym is released).
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
        "synthesis.collusion": terms.get("collusion"),
        "synthesis.cliques": "; ".join(" x ".join(c) for c in terms.get("cliques", ())) or None,
        "owners": ", ".join(o["name"] for o in provenance.get("owners", [])),
        "plan_id": provenance.get("plan_id"), "version": provenance.get("fragrelease_version"),
    }
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
    return comment, props, columns
