"""The synthetic release kind's own sections of the public report (``linkage: synthetic``;
docs/specification.md §10): its parameters and how the rows were made (each measurement's ε and noise).
Public terms only. Reached through :meth:`fragrelease.jobs.synthesis.kind.SynthesisJobs.report_sections`;
:mod:`fragrelease.jobs.protocol.report` writes the page.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping, Sequence

from fragrelease.schemas.base import Attribute

from ..protocol.report_html import ReportSection


def report_sections(provenance: Mapping[str, Any], attributes: Sequence[Attribute]) -> tuple[ReportSection, ...]:
    """The public report's sections of a synthetic release: its parameters (``parameters``,
    :func:`parameter_rows`) and "How the rows were made" (``end``): each measurement's ε and noise
    (:func:`fragrelease.synthesis.preview.synthesis_preview`'s table).

    ``attributes``: the released :class:`fragrelease.schemas.base.Attribute` objects in plan order.
    Raises KeyError for a provenance without the synthesis terms.
    """
    from fragrelease.synthesis.preview import synthesis_preview
    from fragrelease.synthesis.protocol import synthesis_spec

    terms = provenance["synthesis"]
    owners = provenance.get("owners", [])
    spec = synthesis_spec(attributes, Fraction(provenance["epsilon"]), target=terms.get("target"), bins=terms["bins"],
                          owners=max(1, len(owners)), collusion=terms.get("collusion"))
    pv = synthesis_preview(spec, len(owners), sum(int(o["n_records"]) for o in owners))
    text = ("The rows are drawn from a graphical model fitted to the sums of the owners' marginals; each owner adds a "
            "share of discrete-Laplace noise to its counts and masks them, so only the sums are decoded, each carrying "
            "noise of scale b or more. " + " ".join(pv.notes))
    return (ReportSection("Parameters", "table_section.html.j2",
                          {"header": ["parameter", "value"], "rows": parameter_rows(provenance)},
                          anchor="parameters", place="parameters"),
            ReportSection("How the rows were made", "table_section.html.j2",
                          {"text": text, "header": pv.header(), "rows": pv.table_rows()}, anchor="synthesis"))


def parameter_rows(provenance: Mapping[str, Any]) -> list[list[Any]]:
    """The public report's parameter rows of a synthetic release (it has no k or mechanism): its public
    terms and the cliques, chosen from round 2's decoded noisy sums."""
    terms = provenance.get("synthesis") or {}
    return [
        ["dataset", provenance.get("dataset")], ["fragmentation", provenance.get("fragmentation")],
        ["total ε", provenance.get("epsilon")], ["composition", provenance.get("composition")],
        ["plan id", provenance.get("plan_id")], ["linkage", "synthetic (rows drawn from a model)"],
        ["ε of the 1-way marginals", terms.get("epsilon_one_way")],
        ["ε of the feature pairs (structure)", terms.get("epsilon_selection")],
        ["owners (m)", terms.get("owners")], ["collusion bound t", terms.get("collusion")],
        ["ε of the cliques", terms.get("epsilon_cliques")],
        ["target", terms.get("target") or "none"], ["numeric bins", terms.get("bins")],
        ["cliques", "; ".join(" × ".join(c) for c in terms.get("cliques", ()))],
    ]
