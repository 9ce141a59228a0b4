"""What an IR release table (``linkage: linked`` or ``unlinked``) says about itself, from its public
provenance: its description, its properties and a comment per released column (docs/privacy.md).

Looked up through the registry (:data:`fragrelease.kinds.KINDS`, ``describe``) by
:func:`fragrelease.jobs.describe.release_description`, which adds the guarantee's properties and writes
them as ``fragrelease.*`` table properties. Public facts only: nothing here reads the data.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from fragrelease.protocol.options import OPTION_NAMES


def _eps_by_owner(provenance: Mapping[str, Any], attribute: str) -> str:
    """``1/10 (o1, o2); 1/5 (o3)``: each owner's ε for ``attribute`` (public budgets from the plan)."""
    groups: dict[str, list[str]] = {}
    for o in provenance.get("owners", []):
        for b in o.get("budgets", []):
            if b.get("attribute") == attribute:
                groups.setdefault(str(b.get("epsilon")), []).append(o["name"])
    return "; ".join(f"{eps} ({', '.join(names)})" for eps, names in groups.items()) or "?"


def release_text(provenance: Mapping[str, Any], guarantee: Mapping[str, str], declared_types: Mapping[str, str],
                 id_column: Optional[str]) -> tuple[str, dict[str, Any], dict[str, str]]:
    """The description of an iDP-IR/DP-IR release: ``(comment, properties, column comments)``.

    ``properties`` (unprefixed, values as recorded; None for an absent one): role, dataset, fragmentation,
    mechanism, k, epsilon, composition, epsilon_split, one per release option
    (:data:`fragrelease.protocol.options.OPTION_NAMES`), owners, plan_id, version. ``declared_types``:
    attribute name -> declared column type; ``id_column``: the released pseudonym column when the release
    keeps it (``keep_id``), which gets its own comment.
    """
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
    return comment, props, columns
