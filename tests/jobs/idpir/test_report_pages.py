"""The reports as pages people read (issue 38, item 5): Jinja2 templates with autoescaping, a public
headline (table, version, rows, the guarantee in one sentence), charts in HTML (no image), the owner report's
values as the release table stores them (integers rounded), OpenDP's Laplace intervals, extra sections."""
from __future__ import annotations

import html
import math
import re

import markupsafe
import numpy as np
import pandas as pd
import pytest

from fragrelease.idpir.guarantee import release_guarantee
from fragrelease.jobs.idpir.report_sections import noise_section
from fragrelease.jobs.protocol.kind import kind_jobs
from fragrelease.jobs.protocol.report import (
    ORIGINAL_COLOUR,
    RELEASED_COLOUR,
    TEMPLATES,
    ReportSection,
    owner_report,
    public_report,
)
from fragrelease.schemas.base import Attribute

ATTRS = [
    Attribute(name="age", type="integer", role="quasi-identifier", kind="numeric", domain=(0, 100)),
    Attribute(name="hours", type="double", role="quasi-identifier", kind="numeric", domain=(0, 100)),
    Attribute(name="sex", type="string", role="quasi-identifier", kind="categorical", categories=("f", "m", "x")),
]
N = 400


def _provenance(linkage: str = "linked") -> dict:
    return {"dataset": "d", "fragmentation": "horizontal", "mechanism": "dp-ir", "k": 5, "epsilon": "3",
            "composition": "parallel", "category_order": "declared", "category_order_share": "1/10",
            "linkage": linkage, "plan_id": "p-1", "fragrelease_version": "9.9.9",
            "attributes": [a.public_spec() for a in ATTRS],
            "guarantee": release_guarantee(mechanism="dp-ir", epsilon="3", composition="parallel", linkage=linkage,
                                           category_order="declared"),
            "owners": [{"name": o, "n_records": N // 2, "epsilon": "3", "epsilon_per_attribute": "1",
                        "attributes": [a.name for a in ATTRS],
                        "budgets": [{"attribute": a.name, "epsilon": "1", "epsilon_order": "0", "epsilon_centroids": "1"}
                                    for a in ATTRS]} for o in ("a", "b")]}


def _kind_sections(provenance: dict) -> tuple:
    """The release kind's own sections of the public report, as the aggregator passes them."""
    return kind_jobs(provenance["linkage"]).report_sections(provenance, ATTRS)


def _released(n: int = N) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame({"age": rng.integers(18, 90, n).astype("int32"), "hours": np.round(rng.uniform(1, 99, n), 2),
                         "sex": rng.choice(["f", "m"], n)})


def _distribution_charts(text: str) -> list[tuple[str, str]]:
    """``(class, aria-label)`` of every distribution chart of a page, in order."""
    return [(c, html.unescape(a)) for c, a in re.findall(r'<figure class="(dist[^"]*)" role="img" aria-label="([^"]*)">', text)]


def _plain(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


@pytest.mark.parametrize("linkage", ["linked", "unlinked"])
def test_public_report_opens_with_table_version_rows_and_the_guarantee(spark, tmp_path, linkage):
    prov = _provenance(linkage)
    path = public_report(spark.createDataFrame(_released()), ATTRS, prov, str(tmp_path / "p.html"),
                         table="main.reports.d_release", version=3, extra_sections=_kind_sections(prov))
    text = open(path, encoding="utf-8").read()
    head = re.search(r'<p class="headline" id="headline">(.*?)</p>', text, re.S)
    assert head is not None and head.start() < text.index("<h2>")  # first, before every section
    plain = _plain(head.group(1))
    g = prov["guarantee"]
    assert plain == (f"main.reports.d_release, version 3 (written by fragrelease 9.9.9): 400 rows. Guarantee against "
                     f"release recipients (anyone who reads the table): {g['per_column']}; {g['table']} (against the "
                     "aggregator and the key holders: see Guarantee below).")
    assert ("no epsilon bound" in plain) == (linkage == "linked") and ("3-DP as a whole" in plain) == (linkage == "unlinked")
    assert f"<h1>Release report: {prov['dataset']} (horizontal, {linkage})</h1>" in text  # the title names the kind
    # the full statement follows, each sentence as written
    for key, sentence in g.items():
        assert f"<td>{key.replace('_', ' ')}</td><td class=\"text\">{markupsafe.escape(sentence)}</td>" in text


def test_public_report_is_one_file_with_charts_and_nothing_from_outside_the_release(spark, tmp_path):
    path = public_report(spark.createDataFrame(_released()), ATTRS, _provenance(), str(tmp_path / "p.html"),
                         table="t", version=0, extra_sections=_kind_sections(_provenance()))
    text = open(path, encoding="utf-8").read()
    # no image: in HTML, one distribution per attribute, the noise interval, the rank-move chance, the
    # expected released error against the constant release's, and the correlations as a coloured table
    assert "<img" not in text and "data:image" not in text
    assert _distribution_charts(text) == [
        ("dist", "age: distribution of the released values over the declared domain 0 to 100"),
        ("dist", "hours: distribution of the released values over the declared domain 0 to 100"),
        ("dist cat", "sex: distribution of the released values")]
    # the bars are the released table's counts, each over the chart's largest (sex: f, m and the empty x)
    counts = _released()["sex"].value_counts()
    sex = text[text.index('aria-label="sex: distribution'):]
    heights = [float(h) for h in re.findall(r'<b style="height:([0-9.]+)%"></b>', sex[:sex.index("</figure>")])]
    assert heights == [pytest.approx(100 * counts.get(c, 0) / counts.max(), abs=0.005) for c in ("f", "m", "x")]
    assert text.count('<figure class="bars" role="img"') == 3 and text.count('<table class="heat">') == 1
    assert not re.search(r"""(src|href)=["']?(https?:|//|file:)""", text) and "<script" not in text
    assert ('aria-label="95 % noise interval, share of the declared domain: age 120%, hours 120%, sex 120%; '
            'dashed line at 50%"') in text
    assert "original" not in text.lower() and "MeanSSE" not in text  # nothing computed from the original data
    # long tables are folded under their chart, not gone
    assert re.search(r"<details><summary>ε of every attribute of every owner \(6 rows\)</summary><table>", text)


def test_values_are_escaped_never_markup(spark, tmp_path):
    prov = {**_provenance(), "dataset": "<b>d</b>", "plan_id": "<script>alert(1)</script>"}
    described = {"description": "<img src=x onerror=alert(1)>", "properties": {"k": "<i>v</i>"},
                 "column_comments": {"age": "a & b"}}
    path = public_report(spark.createDataFrame(_released()), ATTRS, prov, str(tmp_path / "p.html"), described,
                         table="<t>", version=0, extra_sections=_kind_sections(prov))
    text = open(path, encoding="utf-8").read()
    for raw in ("<b>d</b>", "<script", "<img src=x", "<i>v</i>", "<t>"):
        assert raw not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert '<td class="text">a &amp; b</td>' in text


def test_the_noise_interval_is_opendps(monkeypatch):
    import opendp.accuracy

    base = noise_section(_provenance())
    assert base is not None
    # DP-IR, k = 5, domain [0, 100], ε_attr = 1: b = 20 (+ the grid allowance), 95 % ± 20 ln 20 = 59.9, 120 %
    assert base["header"] == ["attribute", "kind", "ε_attr", "b = E|noise|", "95 % ±", "of domain", "P(rank moves)",
                              "released error", "constant's", "check"]
    age = next(r for r in base["rows"] if r[0] == "age")
    assert age[3:7] == ["20", "59.91", "120%", ""] and 20 * math.log(20) == pytest.approx(59.91, abs=0.005)
    calls = []

    def fake(scale, alpha):
        calls.append((scale, alpha))
        return 3.0 * scale

    monkeypatch.setattr(opendp.accuracy, "laplacian_scale_to_accuracy", fake)
    age = next(r for r in noise_section(_provenance())["rows"] if r[0] == "age")
    assert age[4:6] == ["60", "120%"] and calls and all(a == 0.05 for _, a in calls)


def test_owner_report_shows_the_values_the_table_stores(spark, tmp_path):
    rng = np.random.default_rng(3)
    orig = pd.DataFrame({"rid": np.arange(N), "age": rng.integers(18, 90, N).astype(float),
                         "hours": np.round(rng.uniform(1, 99, N), 1), "sex": rng.choice(["f", "m"], N)})
    orig.loc[:1, "age"] = [2.0, 3.0]
    prot = orig.copy()
    prot["age"] = orig["age"] + 0.4  # rounds back to the original value ...
    prot.loc[:1, "age"] = [2.5, 3.5]  # ... and half to even: 2.5 -> 2 (error 0), 3.5 -> 4 (error 1)
    prot["hours"] = orig["hours"] + 0.4  # a double: stored as it is
    extra = ReportSection(title="Measured risk", template="table_section.html.j2", anchor="risk",
                          context={"text": "a <lower> bound", "header": ["attack", "risk"], "rows": [["inference", 0.25]]})
    path = owner_report(spark.createDataFrame(orig), spark.createDataFrame(prot), ATTRS, "rid",
                        {"owner": "a", "plan_id": "p-1", "mechanism": "idp-ir", "k": 5}, str(tmp_path / "r.html"),
                        extra_sections=[extra])
    text = open(path, encoding="utf-8").read()
    assert "For the data owner's eyes only" in text
    assert "age rounded half to even to integers, as the release table holds them" in _plain(text)
    cells = re.search(r"<tr><td>age</td><td class=\"text\">numeric</td><td>([^<]+)</td><td>[^<]+</td><td>[^<]+</td><td>([^<]+)</td>",
                      text)
    assert cells is not None
    # stored: one record off by 1, every other exact (before rounding: every record off by 0.4)
    assert float(cells.group(1)) == pytest.approx(1 / N, rel=1e-3)
    assert float(cells.group(2)) == pytest.approx(math.sqrt(1 / N), rel=1e-3)
    hours = re.search(r"<tr><td>hours</td><td class=\"text\">numeric</td><td>([^<]+)</td><td>[^<]+</td><td>[^<]+</td><td>([^<]+)</td>",
                      text)
    assert hours is not None and float(hours.group(1)) == pytest.approx(0.4, rel=1e-3)
    assert float(hours.group(2)) == pytest.approx(0.4, rel=1e-3)
    # the released quantiles of age are integers (the stored values)
    row = re.search(r"<tr><td>age \(released\)</td>((?:<td(?: class=\"text\")?>[^<]*</td>)+)</tr>", text)
    assert row is not None
    quantiles = [float(v) for v in re.findall(r"<td(?: class=\"text\")?>([^<]*)</td>", row.group(1))[2:]]
    assert len(quantiles) == 5 and all(q == round(q) for q in quantiles)
    # charts, all HTML: a distribution per attribute, the error (numeric) and the label changes (bar
    # charts), the correlation difference (a coloured table); the distributions' legend once
    assert "<img" not in text and "data:image" not in text
    assert [c for c, _ in _distribution_charts(text)] == ["dist ov", "dist ov", "dist cat ov"]
    assert text.count('<figure class="bars" role="img"') == 2 and text.count('<table class="heat">') == 1
    assert 'aria-label="RMS error, share of the declared domain: age 0.05%, hours 0.4%"' in text  # √(1/400) and 0.4 of 100
    assert text.count('<p class="legend">') == 1 and text.index('<p class="legend">') < text.index('<figure class="dist')
    assert _distribution_charts(text)[0][1] == ("age: distribution of the original and released values over the "
                                                "declared domain 0 to 100")
    assert "<figcaption>age: records per bin, declared domain 0 to 100</figcaption>" in text
    # the original's bars grey at opacity 0.6, the released ones blue: the legend's colours
    assert f".dist b.o{{background:{ORIGINAL_COLOUR};opacity:.6}}" in text and f"background:{RELEASED_COLOUR}}}" in text
    assert (f'<i style="background:{ORIGINAL_COLOUR};opacity:.6"></i>grey, the original' in text
            and f'<i style="background:{RELEASED_COLOUR}"></i>blue, the released values' in text)
    # an extra section: after the report's own sections, before the footer, its values escaped
    risk = text.index('<section id="risk">')
    assert text.index('<section id="parameters">') < risk < text.index("Generated by fragrelease")
    assert "<h2>Measured risk</h2>" in text and "a &lt;lower&gt; bound" in text
    assert "<tr><th>attack</th><th>risk</th></tr><tr><td>inference</td><td>0.25</td></tr>" in text


def test_every_template_is_package_data():
    """setup.py ships ``protocol/templates/*.j2`` of fragrelease.jobs: every template must match it (the wheel
    carries them: tests/test_wheel_install.py)."""
    from pathlib import Path

    names = sorted(p.name for p in TEMPLATES.iterdir())
    assert {"base.html.j2", "public_report.html.j2", "owner_report.html.j2"} <= set(names)
    assert all(n.endswith(".j2") for n in names)
    setup_py = (Path(__file__).resolve().parents[3] / "setup.py").read_text(encoding="utf-8")
    assert re.search(r'"fragrelease\.jobs": \[[^\]]*"protocol/templates/\*\.j2"', setup_py)
