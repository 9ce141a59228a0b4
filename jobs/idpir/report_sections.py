"""The IR release kinds' own sections of the reports (``linkage: linked`` and ``unlinked``; :mod:`fragrelease.jobs.protocol.report`
writes the pages): the public report's noise per attribute (from the public parameters only) and parameters,
and the owner report's MeanSSE, error per attribute, parameters and measured disclosure risk
(:func:`fragrelease.jobs.idpir.evaluate.mean_sse_by_attribute`; docs/specification.md §4). Reached through
:class:`fragrelease.jobs.idpir.kind.IRJobs` (``report_sections``, ``owner_report_parts``).

Intervals of the Laplace noise come from OpenDP's accuracy function
(:func:`fragrelease.accuracy.laplace_half_width`).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import numpy as np

from fragrelease.idpir.metrics import CATEGORICAL_SCALE, SCALE_TEXT
from fragrelease.schemas.base import Attribute

from ..protocol.kind import OwnerReportParts, Scored
from ..protocol.report_html import BarChart, ReportSection, _bar_chart, shared_top

#: The text of the public report's noise section, after the preview's title.
NOISE_TEXT = ("The interval is the 95 % interval of the Laplace noise on one released centroid (OpenDP's accuracy "
              "function, ±b·ln 20), in the attribute's units (ranks for categorical attributes). In the chart, the "
              "dashed line is the check's threshold and amber bars are the attributes it warns about.")


def report_sections(provenance: Mapping[str, Any], attributes: Sequence[Attribute]) -> tuple[ReportSection, ...]:
    """The public report's sections of an IR release: its noise per attribute first (``lead``; none for a
    provenance written before its fields existed, :func:`noise_section`), its charts drawn in the
    report's plot thread, and its parameters (``parameters``, :func:`parameter_rows`). Public terms only."""
    sections = []
    noise = noise_section(provenance)
    if noise is not None:
        draw = noise["draw"]
        sections.append(ReportSection(
            "Noise per attribute", "charts_section.html.j2",
            {"text": f"{noise['title']}. {NOISE_TEXT}", "warning": noise["warning"], "header": noise["header"],
             "rows": noise["rows"], "folded": f"the figures per attribute ({len(noise['rows'])} rows)",
             "notes": noise["notes"]},
            anchor="noise", place="lead", draw=lambda: {"charts": draw()}))
    sections.append(ReportSection("Parameters", "table_section.html.j2",
                                  {"header": ["parameter", "value"], "rows": parameter_rows(provenance)},
                                  anchor="parameters", place="parameters"))
    return tuple(sections)


def parameter_rows(provenance: Mapping[str, Any]) -> list[list[Any]]:
    """The public report's parameter rows of an IR release: its public terms, from its provenance."""
    return [
        ["dataset", provenance.get("dataset")], ["fragmentation", provenance.get("fragmentation")],
        ["mechanism", provenance.get("mechanism")], ["k", provenance.get("k")],
        ["total ε", provenance.get("epsilon")], ["composition", provenance.get("composition")],
        ["vertical ε split", provenance.get("epsilon_split")], ["plan id", provenance.get("plan_id")],
        ["record id released", provenance.get("keep_id")],
        ["category order", f"{provenance.get('category_order')} (share {provenance.get('category_order_share')})"],
        ["linkage", provenance.get("linkage")], ["post-processing", provenance.get("postprocess")],
    ]


def noise_section(provenance: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    """The public report's noise per attribute, from the provenance's public parameters only
    (mechanism, k, ε, budgets, record counts, declared domains; :func:`fragrelease.idpir.preview.preview_from_provenance`).

    Returns None for a provenance written before these fields existed, else a dict: ``title``,
    ``header``, ``rows`` (the CLI's table: :func:`fragrelease.idpir.preview_table.table_rows`),
    ``warning``, ``notes`` and ``draw``, a function that draws its charts (a list of :class:`BarChart`: the
    interval's share of the domain per attribute, P(rank moves) when an attribute is categorical, and
    the expected released error relative to the constant release's). The half-width is OpenDP's
    (:func:`fragrelease.accuracy.laplace_half_width` of b at α = 0.05), the share 2·half-width /
    (hi − lo); the check is the preview's.
    """
    from fragrelease.idpir.preview import preview_from_provenance
    from fragrelease.idpir.preview_table import table_header, table_rows, table_title

    try:
        pv = preview_from_provenance(provenance)
    except (KeyError, TypeError):  # a provenance written before these fields existed
        return None
    # the rows the CLI prints (one definition): the half-width is the preview's, from OpenDP
    header, rows = table_header(pv), table_rows(pv)
    shares = [a.coverage for a in pv.attributes]
    names = [a.attribute for a in pv.attributes]

    def draw() -> list[BarChart]:
        charts = [_bar_chart(names, shares, "95 % noise interval, share of the declared domain",
                             limit=pv.threshold, flagged=[a.warn for a in pv.attributes])]
        moves = [(a.attribute, a.p_move) for a in pv.attributes if a.p_move is not None]
        if moves:
            charts.append(_bar_chart([n for n, _ in moves], [p for _, p in moves],
                                     "chance a released category rank moves by 1 or more", limit=1.0))
        errors = [(a.attribute, a.error.released / a.error.baseline) for a in pv.attributes
                  if a.error is not None and a.error.baseline > 0]
        if errors:
            charts.append(_bar_chart([n for n, _ in errors], [r for _, r in errors],
                                     "expected released error after post-processing, relative to releasing the "
                                     "mean or most frequent category", limit=pv.threshold,
                                     flagged=[a.warn for a in pv.attributes if a.error is not None
                                              and a.error.baseline > 0]))
        return charts

    return {"title": table_title(pv), "header": header, "rows": rows, "warning": pv.warning_text(),
            "notes": list(pv.notes), "draw": draw}




def owner_report_parts(attributes: Sequence[Attribute], id_column: str, manifest: Mapping[str, Any], *,
                       mean_sse_value: Optional[float] = None, risk=None) -> OwnerReportParts:
    """The IR kind's parts of an owner's private report (:class:`fragrelease.jobs.protocol.report.OwnerReportParts`).

    Score: MeanSSE per attribute over the join by ``id_column`` of the original fragment and its values as
    the table stores them (:func:`fragrelease.jobs.idpir.evaluate.mean_sse_by_attribute`; with the page's
    quantiles from the same aggregation when asked, :func:`~fragrelease.jobs.idpir.evaluate.mean_sse_with_quantiles`).
    Sections: the error per attribute with MeanSSE (``lead``; ``mean_sse_value`` overrides the MeanSSE
    shown, default the sum of the per-attribute contributions), the owner's parameters from ``manifest``
    (``parameters``) and ``risk``, the owner's measured disclosure risk (:func:`risk_section`), when given
    (``end``). The score raises InvalidParameterError when records do not match by ``id_column``.
    """
    attrs = list(attributes)

    def score(original, stored, quantiles: Optional[tuple[list[float], int]]) -> Scored:
        from .evaluate import mean_sse_by_attribute, mean_sse_with_quantiles

        if quantiles is None:
            return mean_sse_by_attribute(original, stored, attrs, id_column), None, None
        return mean_sse_with_quantiles(original, stored, attrs, id_column, *quantiles)

    def sections(contributions: Mapping[str, float], original: Mapping[str, Any],
                 released: Mapping[str, Any]) -> tuple[ReportSection, ...]:
        mean_sse = sum(contributions.values()) if mean_sse_value is None else mean_sse_value
        error = attribute_error(attrs, dict(original), dict(released), contributions)
        parameters = [["owner", manifest.get("owner")], ["plan id", manifest.get("plan_id")],
                      ["mechanism", manifest.get("mechanism")], ["k", manifest.get("k")],
                      ["ε_j", manifest.get("epsilon")], ["ε per attribute", manifest.get("epsilon_per_attribute")],
                      ["records", manifest.get("n_records")], ["MeanSSE (authors' convention)", mean_sse]]
        out = [ReportSection("Error per attribute (this fragment)", "charts_section.html.j2",
                             {"text": f"MeanSSE {_cell(mean_sse)}: {SCALE_TEXT}.", "charts": error["charts"],
                              "header": error["header"], "rows": error["rows"]}, anchor="error", place="lead"),
               ReportSection("Parameters", "table_section.html.j2", {"header": ["parameter", "value"], "rows": parameters},
                             anchor="parameters", place="parameters")]
        measured = risk_section(risk)
        return (*out, measured) if measured is not None else tuple(out)

    return OwnerReportParts(score=score, sections=sections,
                            disclosed="the original statistics, the differences and MeanSSE")


def _cell(v: Any) -> str:
    """``v`` as the reports' table cells show it (``macros.html.j2``, ``cell``): "–" for None, four significant digits."""
    return "–" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)


def risk_section(risk) -> Optional[ReportSection]:
    """The owner report's "Measured disclosure risk" section, or None without a measurement.

    ``risk``: a :class:`fragrelease.jobs.idpir.risk_check.AdvisoryRisk` (``risk_check``). One row per
    attack: risk, 95 % interval, attack, control and random-guess success rates, and its flag
    (``above flag_<attack>_risk <t>`` when the point estimate exceeds the configured threshold). The
    text says the check is advisory and names the flagged attacks (docs/privacy.md, "Measured
    disclosure risk and the owner's risk check"). Only this private report shows it.
    """
    if risk is None:
        return None
    report = risk.report
    rows = [[r.attack, r.attribute or "", f"{r.risk.value:.3f}", f"{r.risk.low:.3f} – {r.risk.high:.3f}",
             f"{r.attack_rate.value:.3f}", f"{r.control_rate.value:.3f}", f"{r.baseline_rate:.3f}", r.n_attacks,
             risk.flag(r)] for r in report.results]
    flagged = risk.flagged()
    if flagged:
        named = ", ".join(f"{r.attack} of {r.attribute}" if r.attribute else r.attack for r in flagged)
        verdict = (f"Flagged: {len(flagged)} of {len(report.results)} measured risks are above the thresholds you "
                   f"set ({named}). ")
    elif risk.inference_limit is not None or risk.linkability_limit is not None:
        verdict = "No measured risk is above the thresholds you set. "
    else:
        verdict = ""
    text = (f"{verdict}Advisory: this fragment was handed over before the measurement ran, whatever it found; "
            "lowering the risk means another release (a larger k, a smaller ε, linkage: unlinked), which spends "
            f"its ε again. anonymeter 1.1.0's attacks (Giomi et al., PoPETs 2023) on this owner's released rows, "
            f"against {report.n_control} of its held-out records as the control set. An empirical lower bound on "
            "what these attacks achieve, not a guarantee: another attack may do better.")
    return ReportSection("Measured disclosure risk", "table_section.html.j2",
                         {"text": text, "header": ["attack", "attribute", "risk", "95 % interval", "attack rate",
                                                   "control rate", "random guess", "attacks", "flag"], "rows": rows},
                         anchor="risk")


def attribute_error(attrs: Sequence[Attribute], original: dict, released: dict, contributions: Mapping[str, float]) -> Mapping[str, Any]:
    """The owner's actual error per attribute (private): ``header``, ``rows`` and ``charts``.

    Numeric: released mean − original mean (the attribute's units), that shift in original standard
    deviations, released sd / original sd, and the root-mean-square error s·√(c·l) (s the original's
    sample sd, c the attribute's MeanSSE contribution, l the number of attributes), charted as a share
    of the declared domain width; categorical: the share of changed labels c·l·(1/2)², charted.
    Every attribute: its contribution to MeanSSE (the contributions add up to it; docs/specification.md §4).
    """
    l = len(attrs)
    rows: list[list] = []
    numeric: list[tuple[str, float]] = []
    labels: list[tuple[str, float]] = []
    for a in attrs:
        c = contributions[a.name]
        if a.categorical:  # c = changed · (1/s)² / l, s = CATEGORICAL_SCALE
            changed = c * l * CATEGORICAL_SCALE ** 2
            labels.append((a.name, changed))
            rows.append([a.name, "categorical", None, None, None, None, f"{changed:.1%} labels changed", c])
            continue
        o, r = original[a.name], released[a.name]
        shift = None if o["mean"] is None or r["mean"] is None else r["mean"] - o["mean"]
        in_sd = None if shift is None or not o["std"] else shift / o["std"]
        ratio = None if not o["std"] or r["std"] is None else r["std"] / o["std"]
        rms = None if not o["std"] else float(o["std"] * np.sqrt(c * l))
        if rms is not None:
            lo, hi = a.bounds()
            numeric.append((a.name, rms / (hi - lo)))
        rows.append([a.name, "numeric", shift, in_sd, ratio, rms, "", c])

    def draw() -> list[BarChart]:
        # both charts are shares, read side by side: one scale for both (they had two)
        top = shared_top([s for _, s in numeric], [s for _, s in labels])
        out = []
        if numeric:
            out.append(_bar_chart([n for n, _ in numeric], [s for _, s in numeric],
                                  "RMS error, share of the declared domain", top=top))
        if labels:
            out.append(_bar_chart([n for n, _ in labels], [s for _, s in labels], "labels changed", top=top))
        return out

    return {"header": ["attribute", "kind", "mean shift (released − original)", "shift in original sd",
                       "sd ratio (released / original)", "RMS error", "labels", "MeanSSE contribution"],
            "rows": rows, "charts": draw()}
