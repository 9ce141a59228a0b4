"""The reports' charts drawn by the browser (issue 41, sessions 5 and 6): the correlation matrix as a table
coloured as the heat map was, the horizontal bar charts in HTML with their numbers, the distribution charts
as HTML bars with their ticks (no image). No Spark."""
from __future__ import annotations

import html
import re

import numpy as np
import pytest

from fragrelease.jobs.protocol import report_html as report
from fragrelease.jobs.protocol.report_stats import BINS
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


# ---- issue 41, session 6: the distribution charts in HTML ----

NUMERIC = Attribute(name="x", type="double", role="quasi-identifier", kind="numeric", domain=[0, 100])
CATEGORICAL = Attribute(name="g", type="string", role="quasi-identifier", kind="categorical",
                        categories=["a", "b", "c", "d"])
EDGES = list(np.linspace(0, 100, BINS + 1))
HIST = [0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 89, 55, 34, 21, 13, 8, 5, 3]  # largest: 144
ORIGINAL_HIST = [h * 2 for h in HIST[::-1]]  # largest: 288, the chart's top when overlaid
FREQ = {"a": 30, "b": 0, "c": 120, "d": 45}
ORIGINAL_FREQ = {"a": 160, "b": 10, "c": 100, "d": 50}


def _heights_in(text: str) -> list[tuple[str, float]]:
    """``(class, height %)`` of every bar of a rendered distribution chart, in order."""
    return [(c, float(h)) for c, h in re.findall(r'<b(?: class="(o)")? style="height:([0-9.]+)%"></b>', text)]


@pytest.mark.parametrize("overlaid", [False, True], ids=["public", "owner"])
@pytest.mark.parametrize("categorical", [False, True], ids=["numeric", "categorical"])
def test_a_bars_height_is_its_count_over_the_charts_largest_count(categorical, overlaid):
    a = CATEGORICAL if categorical else NUMERIC
    released = {"freq": FREQ} if categorical else {"edges": EDGES, "hist": HIST}
    original = ({"freq": ORIGINAL_FREQ} if categorical else {"edges": EDGES, "hist": ORIGINAL_HIST}) if overlaid else None
    counts = list(FREQ.values()) if categorical else HIST
    before = (list(ORIGINAL_FREQ.values()) if categorical else ORIGINAL_HIST) if overlaid else []
    top = max(counts + before)  # shared by the original's and the released bars
    assert top == (160 if categorical and overlaid else 120 if categorical else 288 if overlaid else 144)
    chart = report._distribution(a, released, original)
    assert chart.categorical == categorical
    assert chart.released == pytest.approx([100 * c / top for c in counts])
    if overlaid:
        assert chart.original == pytest.approx([100 * c / top for c in before])
        assert max(chart.original + chart.released) == 100.0
    else:
        assert chart.original is None and max(chart.released) == 100.0
    # in the HTML: a bar per bin or category, the original's (class "o") before the released one
    text = _macro("distribution", chart)
    expected = [(k, v) for o, r in zip(before or [None] * len(counts), counts)
                for k, v in ((("o", 100 * o / top),) if o is not None else ()) + (("", 100 * r / top),)]
    assert _heights_in(text) == [(k, pytest.approx(v, abs=0.005)) for k, v in expected]
    assert text.count("<i>") == len(counts)
    classes = re.match(r'<figure class="([^"]+)" role="img"', text)
    assert classes is not None and classes.group(1).split() == ["dist"] + ["cat"] * categorical + ["ov"] * overlaid


def test_the_ticks_of_a_known_domain_and_counts_sit_at_their_values():
    assert report._domain_ticks(0.0, 100.0) == tuple(report.Tick(str(v), float(v)) for v in (0, 25, 50, 75, 100))
    # a negative domain: the ticks within it, at (value - lo) / (hi - lo)
    assert report._domain_ticks(-5.0, 0.5) == tuple(report.Tick(str(v), pytest.approx(100 * (v + 5) / 5.5))
                                                    for v in (-4, -2, 0))
    assert [t.label for t in report._domain_ticks(1000.0, 5000.0)] == ["1000", "2000", "3000", "4000", "5000"]
    assert [t.label for t in report._domain_ticks(0.0, 1.0)] == ["0", "0.25", "0.5", "0.75", "1"]
    # the counts' axis up to the chart's largest count (the top of the plot): 144 -> 0, 50, 100 at 0, 34.7, 69.4 %
    assert report._count_ticks(144) == tuple(report.Tick(str(v), pytest.approx(100 * v / 144)) for v in (0, 50, 100))
    assert report._count_ticks(100) == tuple(report.Tick(str(v), float(v)) for v in (0, 25, 50, 75, 100))
    # rendered: each tick's label at its position, the counts from the bottom, the domain from the left
    text = _macro("distribution", report._distribution(NUMERIC, {"edges": EDGES, "hist": HIST}, None))
    assert re.findall(r'<span class="y" style="bottom:([0-9.]+)%">([^<]*)</span>', text) == [
        ("0.00", "0"), ("34.72", "50"), ("69.44", "100")]
    assert re.findall(r'<span class="x" style="left:([0-9.]+)%">([^<]*)</span>', text) == [
        ("0.00", "0"), ("25.00", "25"), ("50.00", "50"), ("75.00", "75"), ("100.00", "100")]


@pytest.mark.parametrize("lo, hi", [(0, 100), (-5, 0.5), (1000, 5000), (0, 1), (0, 7), (0, 144), (0, 3000),
                                    (17, 90), (-1e6, 1e6), (0.001, 0.002), (0, 2), (0, 13)])
def test_the_ticks_are_those_matplotlibs_axis_showed_over_the_same_range(lo, hi):
    # the charts' tick choice before session 6: MaxNLocator(4, steps=(1, 2, 2.5, 5, 10)) on an axis whose
    # view is the range, the ticks within it shown (at most 5)
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    ax = Figure().add_subplot()
    ax.yaxis.set_major_locator(MaxNLocator(4, steps=[1, 2, 2.5, 5, 10]))
    ax.set_ylim(lo, hi)
    shown = [t for t in ax.get_yticks() if lo - 1e-9 * (hi - lo) <= t <= hi + 1e-9 * (hi - lo)]
    got = report._tick_values(float(lo), float(hi))
    assert got == pytest.approx(shown, rel=1e-9, abs=1e-12 * (hi - lo))
    assert 2 <= len(got) <= 5


def test_many_categories_write_at_most_twenty_names_and_keep_every_name_on_hover():
    """native-country's 41 names overlapped under a 468-pixel chart (issue 53): every third is written now."""
    cats = [f"country-{i:02d}" for i in range(41)]
    a = Attribute(name="native-country", type="string", role="quasi-identifier", kind="categorical", categories=cats)
    chart = report._distribution(a, {"freq": {c: 1 for c in cats}}, None)
    shown = [t.label for t in chart.xticks if t.label]
    assert shown == cats[::3] and len(shown) <= report.MAX_CATEGORY_LABELS
    text = _macro("distribution", chart)
    titles = re.findall(r'<span class="x" style="left:[0-9.]+%" title="([^"]*)">([^<]*)</span>', text)
    assert [t for t, _ in titles] == cats and [s for _, s in titles if s] == cats[::3]
    few = Attribute(name="g", type="string", role="quasi-identifier", kind="categorical", categories=cats[:20])
    assert [t.label for t in report._distribution(few, {"freq": {c: 1 for c in cats[:20]}}, None).xticks] == cats[:20]


def test_category_names_sit_under_their_bars_escaped_with_their_title():
    name = 'a<b&"c'
    a = Attribute(name=f"size_{name}", type="string", role="quasi-identifier", kind="categorical",
                  categories=["small", name, "a much longer category name than the chart is wide"])
    chart = report._distribution(a, {"freq": {c: 1 for c in a.categories}}, None)
    assert [(t.label, t.position) for t in chart.xticks] == [
        (c, pytest.approx(100 * (i + 0.5) / 3)) for i, c in enumerate(a.categories)]  # under each bar's middle
    text = _macro("distribution", chart)
    assert name not in text and "<b&" not in text and '"c"' not in text  # never markup
    escaped = "a&lt;b&amp;&#34;c"
    labels = re.findall(r'<span class="x" style="left:([0-9.]+)%" title="([^"]*)">([^<]*)</span>', text)
    assert [(html.unescape(t), html.unescape(s)) for _, t, s in labels] == [(c, c) for c in a.categories]
    assert labels[1] == ("50.00", escaped, escaped)
    assert f'aria-label="size_{escaped}: distribution of the released values"' in text
    assert f"<figcaption>size_{escaped}: records per category</figcaption>" in text


@pytest.mark.parametrize("overlaid", [False, True], ids=["public", "owner"])
def test_the_alt_text_and_caption_say_what_the_chart_shows(overlaid):
    numeric = {"edges": list(np.linspace(-5, 0.5, BINS + 1)), "hist": HIST}
    a = Attribute(name="x", type="double", role="quasi-identifier", kind="numeric", domain=[-5, 0.5])
    charts = report._distributions([a, CATEGORICAL], {"x": numeric, "g": {"freq": FREQ}},
                                   {"x": numeric, "g": {"freq": ORIGINAL_FREQ}} if overlaid else None)
    values = "original and released" if overlaid else "released"
    assert [(c.alt, c.caption) for c in charts] == [
        (f"x: distribution of the {values} values over the declared domain -5 to 0.5",
         "x: records per bin, declared domain -5 to 0.5"),
        (f"g: distribution of the {values} values", "g: records per category")]
    for c in charts:  # an image to assistive technology, labelled with the alt text; the caption under it
        text = _macro("distribution", c)
        assert f'role="img" aria-label="{c.alt}"' in text and text.endswith(f"<figcaption>{c.caption}</figcaption></figure>")
        assert "<img" not in text and "data:image" not in text


@pytest.mark.parametrize("categorical", [False, True], ids=["numeric", "categorical"])
def test_an_empty_histogram_has_flat_bars_and_a_zero_tick(categorical):
    a = CATEGORICAL if categorical else NUMERIC
    zero = {"freq": dict.fromkeys(FREQ, 0)} if categorical else {"edges": EDGES, "hist": [0] * BINS}
    chart = report._distribution(a, zero, zero)  # no division by zero
    n = len(FREQ) if categorical else BINS
    assert chart.released == chart.original == (0.0,) * n
    assert chart.yticks == (report.Tick("0", 0.0),)
    text = _macro("distribution", chart)
    assert _heights_in(text) == [(k, 0.0) for _ in range(n) for k in ("o", "")]
    assert re.findall(r'<span class="y" style="bottom:([0-9.]+)%">([^<]*)</span>', text) == [("0.00", "0")]
    assert report._heights([0, 0], 0) == (0.0, 0.0) and report._heights([1, 3], 4) == (25.0, 75.0)


SCHEMA = [NUMERIC, Attribute(name="neg", type="integer", role="quasi-identifier", kind="numeric", domain=[-5, 0.5]),
          Attribute(name="two", type="string", role="quasi-identifier", kind="categorical",
                    categories=["a", "a much longer category name"]),
          CATEGORICAL,
          Attribute(name="twelve", type="string", role="quasi-identifier", kind="categorical",
                    categories=[f"c{v}" for v in range(12)]),
          Attribute(name="y", type="double", role="quasi-identifier", kind="numeric", domain=[1000, 5000])]


def _summaries(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for a in SCHEMA:
        if a.categorical:
            out[a.name] = {"freq": {c: int(rng.integers(0, 300)) for c in a.categories}}
        else:
            lo, hi = a.bounds()
            out[a.name] = {"edges": list(np.linspace(lo, hi, BINS + 1)),
                           "hist": list(rng.integers(0, 10 ** (seed % 4 + 1), BINS))}
    return out


@pytest.mark.parametrize("overlaid", [False, True], ids=["public", "owner"])
def test_every_chart_reaches_its_top_with_at_most_5_ticks_per_axis_within_it(overlaid):
    released, original = _summaries(1), _summaries(2) if overlaid else None
    charts = report._distributions(SCHEMA, released, original)
    assert len(charts) == len(SCHEMA)
    for a, c in zip(SCHEMA, charts):
        counts = list(released[a.name]["freq"].values()) if a.categorical else released[a.name]["hist"]
        assert len(c.released) == len(counts) == (len(a.categories) if a.categorical else BINS)
        assert max(c.released + (c.original or ())) == 100.0  # the largest count is the plot's top
        assert 2 <= len(c.yticks) <= 5 and all(0 <= t.position <= 100 for t in c.yticks)
        assert c.yticks[0] == report.Tick("0", 0.0)
        if a.categorical:
            assert [t.label for t in c.xticks] == list(a.categories)
        else:
            assert 2 <= len(c.xticks) <= 5 and all(0 <= t.position <= 100 for t in c.xticks)
    # other numbers give other bars
    assert report._distributions(SCHEMA, _summaries(7), original) != charts


def test_the_pages_style_places_the_bars_and_labels_as_the_images_did():
    # the style every report carries (base.html.j2): bar widths within their bin or category's slot as on
    # the images (released 0.9 of a bin alone, half of it over the original's full bin; a category's bar 0.8
    # of its slot alone, else the original's left 0.4 and the released right 0.4), the original's colour at
    # opacity 0.6, the category names rotated by 60 degrees and cut after 90 px (their title holds them whole)
    page = report.render("base.html.j2", title="t")
    rules = dict(re.findall(r"([^{}\n]+)\{([^{}]*)\}", page[page.index("<style>") + 7:page.index("</style>")]))
    assert rules[".dist b"] == f"position:absolute;bottom:0;left:5%;right:5%;background:{report.RELEASED_COLOUR}"
    assert rules[".dist b.o"] == f"background:{report.ORIGINAL_COLOUR};opacity:.6"
    assert (rules[".dist.ov b"], rules[".dist.ov b.o"]) == ("left:25%;right:25%", "left:0;right:0")
    assert rules[".dist.cat b"] == "left:10%;right:10%"
    assert (rules[".dist.cat.ov b"], rules[".dist.cat.ov b.o"]) == ("left:50%;right:10%", "left:10%;right:50%")
    assert "max-width:90px" in rules[".dist.cat .x"] and "rotate(-60deg)" in rules[".dist.cat .x"]
    assert "transform-origin:100% 0" in rules[".dist.cat .x"]  # the name ends under its bars' middle


def test_the_owner_reports_two_error_charts_share_one_scale():
    """RMS error (numeric) and labels changed (categorical) are both shares, read side by side: one scale
    (issue 53: they had two, so bars of different lengths could stand for the same share)."""
    from fragrelease.jobs.idpir.report_sections import attribute_error

    num = Attribute(name="x", type="double", role="quasi-identifier", kind="numeric", domain=[0, 100])
    cat = Attribute(name="g", type="string", role="quasi-identifier", kind="categorical", categories=["a", "b"])
    original = {"x": {"mean": 50.0, "std": 10.0}, "g": {}}
    released = {"x": {"mean": 51.0, "std": 10.0}, "g": {}}
    charts = attribute_error([num, cat], original, released, {"x": 0.005, "g": 0.1})["charts"]
    assert [c.title for c in charts] == ["RMS error, share of the declared domain", "labels changed"]
    (rms,), (labels,) = charts[0].bars, charts[1].bars
    # RMS 10·√(0.005·2) = 1 → 1 % of the domain; labels 0.1·2·(1/2)² = 5 %: bar widths in the ratio of the shares
    assert rms.label == "1%" and labels.label == "5%"
    assert labels.width / rms.width == pytest.approx(5.0)
    assert charts[0].limit is None and charts[1].limit is None
