"""The reports and the table's self-description ask the release kind (issue 50, item 3): each kind's sections
are its own (placed by the page), and the protocol's report and describe modules import no kind. Spark-free."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.guarantee import release_guarantee
from fragrelease.jobs.describe import kind_text, release_description
from fragrelease.jobs.protocol.kind import OwnerReportParts, kind_jobs
from fragrelease.jobs.protocol.report_html import ReportSection, render
from fragrelease.kinds import KINDS
from fragrelease.schemas.base import Attribute

ROOT = Path(__file__).resolve().parents[2]
ATTRS = [Attribute(name="age", type="integer", role="quasi-identifier", kind="numeric", domain=(0, 100)),
         Attribute(name="sex", type="string", role="quasi-identifier", kind="categorical", categories=("f", "m"))]


def _provenance(linkage: str) -> dict:
    prov = {"dataset": "d", "fragmentation": "horizontal", "mechanism": "dp-ir", "k": 5, "epsilon": "3",
            "composition": "parallel", "category_order": "declared", "category_order_share": "1/10",
            "linkage": linkage, "plan_id": "p-1", "attributes": [a.public_spec() for a in ATTRS],
            "owners": [{"name": o, "n_records": 100, "epsilon": "3", "epsilon_per_attribute": "1",
                        "attributes": [a.name for a in ATTRS],
                        "budgets": [{"attribute": a.name, "epsilon": "1", "epsilon_order": "0", "epsilon_centroids": "1"}
                                    for a in ATTRS]} for o in ("a", "b")]}
    if linkage == "synthetic":
        prov["synthesis"] = {"epsilon_one_way": "3/4", "epsilon_selection": "3/4", "epsilon_cliques": "3/2",
                             "target": None, "bins": 4, "cliques": [["age", "sex"]]}
    else:
        prov["guarantee"] = release_guarantee(mechanism="dp-ir", epsilon="3", composition="parallel", linkage=linkage,
                                              category_order="declared")
    return prov


@pytest.mark.parametrize("linkage, want", [
    ("linked", [("noise", "lead"), ("parameters", "parameters")]),
    ("unlinked", [("noise", "lead"), ("parameters", "parameters")]),
    ("synthetic", [("parameters", "parameters"), ("synthesis", "end")]),
])
def test_each_kind_gives_its_own_public_sections(linkage, want):
    sections = kind_jobs(linkage).report_sections(_provenance(linkage), ATTRS)
    assert [(s.anchor, s.place) for s in sections] == want
    rows = dict(next(s for s in sections if s.place == "parameters").context["rows"])
    assert ("k" in rows) == (linkage != "synthetic") and rows["dataset"] == "d"
    assert (rows["linkage"] == "synthetic (rows drawn from a model)") == (linkage == "synthetic")
    # the noise charts are drawn later, in the report's plot thread: only the IR noise section has a draw
    assert [s.anchor for s in sections if s.draw is not None] == (["noise"] if linkage != "synthetic" else [])


def test_an_ir_provenance_without_the_preview_fields_has_parameters_but_no_noise_section():
    prov = {k: v for k, v in _provenance("linked").items() if k != "owners"}
    assert [s.anchor for s in kind_jobs("linked").report_sections(prov, ATTRS)] == ["parameters"]


def test_only_the_ir_kind_adds_to_the_owner_report():
    manifest = {"owner": "a", "plan_id": "p", "n_records": 3}
    ir = kind_jobs("linked").owner_report_parts(ATTRS, "rid", manifest, mean_sse_value=0.5, risk=None)
    synthetic = kind_jobs("synthetic").owner_report_parts(ATTRS, "rid", manifest, risk=None)
    assert ir.score is not None and "MeanSSE" in ir.disclosed
    assert synthetic == OwnerReportParts() and synthetic.score is None and tuple(synthetic.sections(None, {}, {})) == ()


def _anchors(page: str) -> list[str]:
    return re.findall(r'<(?:section|p class="headline") id="([^"]+)"', page)


def test_the_public_page_puts_each_section_where_its_place_says():
    def section(anchor, place):
        return ReportSection(anchor.title(), "table_section.html.j2", {"header": ["h"], "rows": [[anchor]]},
                             anchor=anchor, place=place)

    page = render("public_report.html.j2", title="t", table="t", version="0", rows=1, guarantee_sentence="g",
                  distributions=[], numeric_header=["attribute"], numeric_rows=[], correlation=None,
                  guarantee_rows=[], owners=[], budgets=[], described=None,
                  extra_sections=[section("closing", "end"), section("terms", "parameters"), section("first", "lead"),
                                  section("second", "lead")])
    assert _anchors(page) == ["headline", "first", "second", "distributions", "guarantee", "terms", "budgets",
                              "closing"]


def test_a_section_in_no_known_place_is_refused():
    with pytest.raises(ValueError, match="place is one of"):
        ReportSection("t", "table_section.html.j2", place="middle")


def test_the_table_describes_itself_as_its_kind_says():
    assert all(callable(kind_text(name)) for name in KINDS)
    synthetic = release_description({**_provenance("synthetic"), "guarantee": {"table": "whole table"}})
    linked = release_description(_provenance("linked"))
    assert synthetic.properties["fragrelease.linkage"] == "synthetic" and "fragrelease.mechanism" not in synthetic.properties
    assert synthetic.properties["fragrelease.synthesis.cliques"] == "age x sex"
    assert linked.properties["fragrelease.mechanism"] == "dp-ir" and "synthetic" not in linked.comment
    # a provenance written before the linkage option existed: the option's default kind (IR)
    old = {k: v for k, v in _provenance("linked").items() if k != "linkage"}
    assert release_description(old).properties["fragrelease.mechanism"] == "dp-ir"
    with pytest.raises(InvalidParameterError, match="linkage must be one of"):
        release_description({**_provenance("linked"), "linkage": "joined"})


PROTOCOL_MODULES = ("jobs/protocol/report.py", "jobs/protocol/report_html.py", "jobs/protocol/report_stats.py",
                    "jobs/describe.py")


@pytest.mark.parametrize("path", PROTOCOL_MODULES)
def test_the_report_and_describe_modules_import_no_kind(path):
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    imported = [(node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
                for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names]
    assert not [m for m in imported if re.search(r"(^|\.)(idpir|synthesis)(\.|$)", m)]
    # nor compares a linkage with a kind's name
    assert not [c for c in ast.walk(tree) if isinstance(c, ast.Constant) and c.value in ("linked", "unlinked", "synthetic")]
