"""The reports' charts drawn by the browser or with few texts (issue 41, session 5): the correlation
matrix as a table coloured as the heat map was, the horizontal bar charts in HTML with their numbers,
the distribution charts with their titles, axis labels and legend in HTML. No Spark."""
from __future__ import annotations

import html
import re

import numpy as np
import pytest

from fragrelease.jobs.idpir import report
from fragrelease.schemas.base import Attribute

NAMES = ["a", "b<c", "d"]


def _macro(name: str, value) -> str:
    """``value`` rendered by the macro ``name`` of macros.html.j2, with the reports' environment (autoescape on)."""
    return report.environment().from_string('{% import "macros.html.j2" as m %}{{ m.' + name + '(v) }}').render(v=value)


def _expected_colour(v: float, top: float) -> str:
    from matplotlib import colormaps
    from matplotlib.colors import Normalize, to_hex

    return to_hex(colormaps["RdBu_r"](Normalize(-top, top)(v)))  # what imshow(cmap="RdBu_r", vmin=-top, vmax=top) drew


@pytest.mark.parametrize("difference", [False, True], ids=["correlation", "difference"])
def test_the_correlation_tables_cells_are_the_colormaps_colour_at_their_value(difference):
    m = np.array([[1.0, -0.83, np.nan], [-0.83, 1.0, 0.55], [np.nan, 0.55, 1.0]])  # 0.55: dark at 0.5, not at 0.6
    if difference:
        m = np.array([[0.0, -0.12, np.nan], [-0.12, 0.0, 0.065], [np.nan, 0.065, 0.0]])
    top = 0.12 if difference else 1.0  # the largest finite difference; correlations: 1
    heat = report._correlation(NAMES, m, "the <title>", difference=difference)["heat"]
    assert heat["scale"]["low"] == -top and heat["scale"]["high"] == top
    text = _macro("heat", heat)
    assert "<caption>the &lt;title&gt;</caption>" in text
    assert re.findall(r'<th class="col"><span>([^<]*)</span></th>', text) == ["a", "b&lt;c", "d"]
    rows = re.findall(r"<tr><th>([^<]*)</th>((?:<td[^>]*>[^<]*</td>)+)</tr>", text)
    assert [html.unescape(r[0]) for r in rows] == NAMES
    for i, (_, cells) in enumerate(rows):
        got = re.findall(r'<td(?: style="background:(#[0-9a-f]{6})(;color:#fff)?")?>([^<]*)</td>', cells)
        assert len(got) == 3
        for j, (background, white, shown) in enumerate(got):
            v = m[i, j]
            if not np.isfinite(v):
                assert (background, white, shown) == ("", "", "–")  # no colour, a dash
                continue
            assert background == _expected_colour(v, top)
            assert bool(white) == (abs(v) > 0.6 * top)  # white text on the dark cells, as on the image
            assert shown == f"{v:.2f}"
    # the legend: the colormap from -top to top, labelled with both ends
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    samples = [to_hex(c) for c in colormaps["RdBu_r"](np.linspace(0, 1, report.SCALE_STOPS))]
    assert f'<span>{-top:.3g}</span><span class="ramp" style="background:linear-gradient(to right, {", ".join(samples)})">' \
           f'</span><span>{top:.3g}</span>' in text
    assert samples[0] == _expected_colour(-top, top) and samples[-1] == _expected_colour(top, top)


def test_a_difference_of_zeros_is_white_on_a_scale_of_at_least_005():
    heat = report._heat_table(NAMES[:2], np.zeros((2, 2)), "t", difference=True)
    assert heat["scale"]["high"] == 0.05
    assert {c.background for row in heat["rows"] for c in row} == {_expected_colour(0.0, 0.05)}
    # a matrix with other values has other colours (the comparison sees the values)
    other = report._heat_table(NAMES[:2], np.array([[0.0, 0.3], [0.3, 0.0]]), "t", difference=True)
    assert other["rows"][0][1].background == _expected_colour(0.3, 0.3) != heat["rows"][0][1].background


def test_a_bar_chart_is_html_with_its_numbers():
    names, shares = ["age", "hours", "<sex>"], [0.2, 1.2, 0.004]
    chart = report._bar_chart(names, shares, "noise", limit=0.5, flagged=[False, True, False])
    top = 115 * 1.2  # the chart's width in %: 115 % of the largest share, room for its label
    assert [b.width for b in chart.bars] == pytest.approx([100 * 100 * s / top for s in shares])
    assert [b.colour for b in chart.bars] == [report.BAR_COLOUR, report.FLAGGED_COLOUR, report.BAR_COLOUR]
    assert chart.limit == pytest.approx(100 * 50 / top)
    assert chart.alt == "noise: age 20%, hours 120%, <sex> 0.4%; dashed line at 50%"
    text = _macro("bar_chart", chart)
    # an image to assistive technology, labelled with every number; the numbers shown as text
    assert text.startswith('<figure class="bars" role="img" aria-label="noise: age 20%, hours 120%, &lt;sex&gt; 0.4%; '
                           'dashed line at 50%"><figcaption>noise</figcaption>')
    rows = re.findall(r'<tr><th>([^<]*)</th><td class="track"><span class="bar" style="width:([0-9.]+)%;'
                      r'background:(#[0-9a-f]{6})"></span><small>([^<]*)</small><span class="limit" style="left:([0-9.]+)%">'
                      r'</span></td></tr>', text)
    assert [(html.unescape(n), float(w), c, label, float(left)) for n, w, c, label, left in rows] == [
        (n, pytest.approx(b.width, abs=0.005), b.colour, b.label, pytest.approx(chart.limit, abs=0.005))
        for n, b in zip(names, chart.bars)]
    assert [b.label for b in chart.bars] == ["20%", "120%", "0.4%"]
    # without a limit: no dashed line, the width at least 1 %
    plain = report._bar_chart(["x"], [0.002], "err")
    assert plain.limit is None and plain.alt == "err: x 0.2%" and plain.bars[0].width == pytest.approx(20.0)
    assert 'class="limit"' not in _macro("bar_chart", plain)


ATTRS = [Attribute(name="x", type="double", role="quasi-identifier", kind="numeric", domain=[-5, 0.5]),
         Attribute(name="g", type="string", role="quasi-identifier", kind="categorical", categories=["a", "b", "c"])]


def _summary(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"x": {"edges": list(np.linspace(-5, 0.5, report.BINS + 1)), "hist": list(rng.integers(0, 5000, report.BINS))},
            "g": {"freq": {c: int(rng.integers(0, 300)) for c in "abc"}}}


@pytest.mark.parametrize("overlaid", [True, False], ids=["owner", "public"])
def test_distribution_charts_draw_bars_and_ticks_only_their_words_in_html(overlaid):
    drawer = report._Distributions()
    charts = [drawer.chart(a, _summary(1)[a.name], _summary(2)[a.name] if overlaid else None) for a in ATTRS]
    values = "original and released" if overlaid else "released"
    assert [(c.alt, c.caption) for c in charts] == [
        (f"x: distribution of the {values} values over the declared domain -5 to 0.5",
         "x: records per bin, declared domain -5 to 0.5"),
        (f"g: distribution of the {values} values", "g: records per category")]
    assert all(c.uri.startswith("data:image/png;base64,") for c in charts)
    for (categorical, _), (fig, ax, _) in drawer._figures.items():
        assert ax.get_title() == "" and ax.get_xlabel() == "" and ax.get_ylabel() == "" and ax.get_legend() is None
        fig.canvas.draw()
        lo, hi = ax.get_ylim()
        assert 2 <= sum(lo <= t <= hi for t in ax.get_yticks()) <= 5  # the counts' axis: at most 5 ticks
        lo, hi = sorted(ax.get_xlim())
        shown = [t for t in ax.get_xticks() if lo <= t <= hi]
        assert len(shown) == 3 if categorical else 2 <= len(shown) <= 5  # a tick per category
    # the owner report's legend is HTML, once per section (tests/jobs/idpir/test_report_pages.py)
