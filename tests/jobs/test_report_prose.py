"""Report tables: prose left-aligned, figures right-aligned (issue 53: prose in report tables was right-aligned)."""
from __future__ import annotations

from fragrelease.jobs.protocol.report_html import environment, is_prose


def test_text_cells_are_prose_and_figures_are_not():
    for text in ("whole table ε-DP, ε = 1: the rows are drawn from a model", "discrete Laplace", "age"):
        assert is_prose(text), text
    for figure in ("1/10", "0.52 (0.5–0.6)", "12 %", "45,222 records", "ε 1/55", "–", "n/a", "2.1e-05", "", 1.5, 3, None):
        assert not is_prose(figure), figure


def test_the_table_macro_marks_prose_cells_and_the_page_style_aligns_them_left():
    page = environment().from_string('{% import "macros.html.j2" as m %}{{ m.table(["term", "value", "n"], rows) }}')
    html = page.render(rows=[["guarantee", "whole table ε-DP against the recipients", 12], ["share", "1/10", 0.5],
                             ["first column", "x", 1]])
    assert '<td class="text">whole table ε-DP against the recipients</td>' in html
    assert "<td>1/10</td>" in html and "<td>12</td>" in html and "<td>0.5</td>" in html
    assert "<td>first column</td>" in html  # the first column is left-aligned by the style already
    style = open(environment().loader.get_source(environment(), "base.html.j2")[1], encoding="utf-8").read()
    assert "td.text{text-align:left}" in style.replace("td:first-child,", "")
