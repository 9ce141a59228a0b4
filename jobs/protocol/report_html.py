"""The reports' HTML (:mod:`.report`): the Jinja2 environment and its templates (``templates/``, shipped
as package data), the sections a report adds (:class:`ReportSection`), and the charts, drawn by the
browser from HTML and CSS (no image): distributions, horizontal bar charts, correlation heat maps.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import jinja2
import numpy as np

from fragrelease.schemas.base import Attribute

#: The templates' folder (package data of fragrelease.jobs: setup.py ``package_data``).
# resolved: under a strict editable install report.py is a link into the checkout, whose templates are the current ones
TEMPLATES = Path(__file__).resolve().with_name("templates")


#: Where a :class:`ReportSection` goes in its page: ``lead`` before the page's own sections (after its
#: headline), ``parameters`` where the page's parameters are, ``end`` after all of them.
PLACES = ("lead", "parameters", "end")


@dataclass(frozen=True)
class ReportSection:
    """A section a report's caller or its release kind adds to the page (``extra_sections``; ``base.html.j2``).

    ``template`` is a file under :data:`TEMPLATES`, rendered inside ``<section id=anchor><h2>title</h2>``
    (autoescaped); it sees ``section`` (this object, its values as ``section.context``) and imports
    ``macros.html.j2`` itself. ``table_section.html.j2`` renders ``section.context`` = ``{"text"
    (optional), "header", "rows"}`` as a paragraph and a table; ``charts_section.html.j2`` adds bar
    charts, a warning, a folded table and notes (its header comment). ``place``: one of :data:`PLACES`
    (sections of one place keep their order). ``draw``: None, or a function returning more of the
    context (charts), which the public report calls in its plot thread while Spark summarizes the
    table (:func:`with_drawn`); it reads public parameters only."""

    title: str
    template: str
    context: Mapping[str, Any] = field(default_factory=dict)
    anchor: str = "section"
    place: str = "end"
    draw: Optional[Callable[[], Mapping[str, Any]]] = None

    def __post_init__(self) -> None:
        if self.place not in PLACES:
            raise ValueError(f"a report section's place is one of {PLACES}, not {self.place!r}")


def with_drawn(section: ReportSection) -> ReportSection:
    """``section`` with what its ``draw`` returns added to its context (itself when it has no ``draw``)."""
    if section.draw is None:
        return section
    return ReportSection(section.title, section.template, {**section.context, **section.draw()}, section.anchor,
                         section.place)


def placed(sections: Sequence[ReportSection]) -> Mapping[str, list[ReportSection]]:
    """``sections`` by place (every one of :data:`PLACES`, in order within each): what the page templates iterate."""
    return {place: [s for s in sections if s.place == place] for place in PLACES}


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The reports' Jinja2 environment: templates from :data:`TEMPLATES`, autoescape on for every
    template (a value can never become markup), an undefined variable an error (``StrictUndefined``).
    Every template sees ``chart_colours`` (the distribution charts' :data:`ORIGINAL_COLOUR` and
    :data:`RELEASED_COLOUR`, ``original`` and ``released``: ``base.html.j2``'s style colours the bars with them)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals["chart_colours"] = {"original": ORIGINAL_COLOUR, "released": RELEASED_COLOUR}
    env.tests["prose"] = is_prose
    return env


#: Words a figure may carry and still be a figure (right-aligned): units and marks of the reports' cells.
_FIGURE_WORDS = re.compile(r"^(?:[-+−–~≈<>≤≥=()/.,:%×·±\s0-9eE]|years?|records?|rows?|cells?|runs?|none|n/a|inf)*$",
                           re.IGNORECASE)


def is_prose(value: Any) -> bool:
    """True when a table cell is text to read (left-aligned in the reports), not a figure (right-aligned):
    a string with a word beyond units and marks (``"whole table ε-DP …"``; not ``"1/10"``, ``"0.52 (0.5–0.6)"``)."""
    return isinstance(value, str) and len(value) > 0 and not _FIGURE_WORDS.match(value.replace("ε", ""))


def render(template: str, **context: Any) -> str:
    """Render ``template`` (a file under :data:`TEMPLATES`) with ``context``; the page templates also
    get ``extra_sections`` (default none) and ``placed`` (them by place, :func:`placed`),
    ``fragrelease_version`` and ``generated`` (UTC, seconds).

    Raises ``jinja2.TemplateNotFound`` for a missing template and ``jinja2.UndefinedError`` for a
    variable the template uses and ``context`` lacks."""
    from fragrelease.version import __version__

    context.setdefault("extra_sections", ())
    context["placed"] = placed(context["extra_sections"])
    context.setdefault("fragrelease_version", __version__)
    context.setdefault("generated", datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return environment().get_template(template).render(**context)


#: The distribution charts' colours: the original's bars (drawn with opacity 0.6) and the released ones.
ORIGINAL_COLOUR, RELEASED_COLOUR = "#999999", "#3b75af"
_STEPS = (1, 2, 2.5, 5, 10)  # tick steps (times a power of ten): a domain 0 to 100 gets 0, 25, 50, 75, 100


@dataclass(frozen=True)
class Tick:
    """One labelled tick of a distribution chart's axis: its ``label`` and its ``position``, in % of the
    axis from its start (the counts' axis from the bottom, the x axis from the left); ``title``: the
    name shown on hover (a category's, also where its label is left out so that labels do not overlap)."""

    label: str
    position: float
    title: str = ""


#: The most category names a distribution chart writes under its bars (468 px wide, 10 px type rotated
#: 60°): with more categories, every k-th name is written and the others show on hover, so none overlap.
MAX_CATEGORY_LABELS = 20


@dataclass(frozen=True)
class Distribution:
    """One distribution chart drawn in HTML (``macros.html.j2``, ``distribution``; :func:`_distribution`).

    ``released``: a bar per bin (numeric) or category (categorical), its height in % of the plot's
    height; ``original``: the original's bars in the same way (owner report; None in the public report);
    ``yticks``: the counts' axis; ``xticks``: the declared domain's ticks (numeric) or each category's
    name under its bars (categorical); ``alt``: the alternative text (the figure is ``role="img"`` with
    it as its label); ``caption``: shown under the chart."""

    alt: str
    caption: str
    categorical: bool
    released: tuple[float, ...]
    original: Optional[tuple[float, ...]]
    yticks: tuple[Tick, ...]
    xticks: tuple[Tick, ...]

    @property
    def bins(self) -> list[tuple[Optional[float], float]]:
        """``(original height or None, released height)`` per bin or category, in order."""
        return list(zip(self.original or (None,) * len(self.released), self.released))


def _heights(counts: Sequence[float], top: float) -> tuple[float, ...]:
    """Each of ``counts`` as a share of ``top`` (the chart's largest count), in %; all 0 when ``top`` is 0."""
    return tuple(100.0 * c / top if top > 0 else 0.0 for c in counts)


def _tick_values(lo: float, hi: float) -> list[float]:
    """The ticks Matplotlib's axis drew from ``lo`` to ``hi`` (``lo`` < ``hi``): ``MaxNLocator(4,
    steps=_STEPS).tick_values(lo, hi)`` (no figure, nothing drawn) within [lo, hi], so at most 5, cleared
    of floating-point noise (12 significant digits)."""
    from matplotlib.ticker import MaxNLocator

    slack = 1e-9 * (hi - lo)
    return [float(f"{v:.12g}") + 0.0 for v in MaxNLocator(4, steps=_STEPS).tick_values(lo, hi)
            if lo - slack <= v <= hi + slack]


def _tick_label(v: float) -> str:
    """A tick's value as text: whole numbers without a decimal point (2000, -4), others to 6 significant digits."""
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else f"{v:.6g}"


def _count_ticks(top: float) -> tuple[Tick, ...]:
    """The counts' axis of a chart whose largest count is ``top``: the :func:`_tick_values` from 0 to
    ``top``, each at its share of ``top``; 0 alone when ``top`` is 0 (nothing counted)."""
    if top <= 0:
        return (Tick("0", 0.0),)
    return tuple(Tick(_tick_label(v), 100.0 * v / top) for v in _tick_values(0.0, top))


def _domain_ticks(lo: float, hi: float) -> tuple[Tick, ...]:
    """A numeric attribute's axis over its declared domain [lo, hi]: the :func:`_tick_values`, each at
    (value − lo) / (hi − lo) of the axis."""
    return tuple(Tick(_tick_label(v), 100.0 * (v - lo) / (hi - lo)) for v in _tick_values(lo, hi))


def _distribution(a: Attribute, released: dict, original: Optional[dict]) -> Distribution:
    """The distribution chart of attribute ``a``: its ``released`` summary's histogram (``edges``: the
    declared domain cut into equal bins, ``hist``) or category counts (``freq``), beside ``original``'s
    when given (its bars behind the released ones for a numeric attribute, to their left for a
    categorical one). Every bar's height is its count as a share of the chart's largest count, the
    original's and released ones together (:func:`_heights`). Alternative text and caption: the
    attribute's name, what is drawn and (numeric) the declared domain; nothing else is shown but the
    bars and the axes' ticks."""
    if a.categorical:
        cats = list(a.categories or ())
        counts = [released["freq"][c] for c in cats]
        before = None if original is None else [original["freq"][c] for c in cats]
        step = -(-len(cats) // MAX_CATEGORY_LABELS)  # ceil: 1 up to 20 categories, 3 for native-country's 41
        xticks = tuple(Tick(str(c) if i % step == 0 else "", 100.0 * (i + 0.5) / len(cats), title=str(c))
                       for i, c in enumerate(cats))
        what, over = "records per category", ""
    else:
        counts, before = list(released["hist"]), None if original is None else list(original["hist"])
        lo, hi = float(released["edges"][0]), float(released["edges"][-1])
        xticks = _domain_ticks(lo, hi)
        what, over = "records per bin", f"declared domain {lo:g} to {hi:g}"
    top = max([*counts, *(before or ())], default=0)
    values = "original and released" if original is not None else "released"
    alt = f"{a.name}: distribution of the {values} values" + (f" over the {over}" if over else "")
    return Distribution(alt, f"{a.name}: {what}" + (f", {over}" if over else ""), a.categorical,
                        _heights(counts, top), None if before is None else _heights(before, top),
                        _count_ticks(top), xticks)


def _distributions(attrs: Sequence[Attribute], released: Mapping[str, dict],
                   original: Optional[Mapping[str, dict]] = None) -> list[Distribution]:
    """One distribution chart per attribute of ``attrs`` (in order), from the summaries ``released``
    (and ``original``) by attribute name (:func:`_distribution`).

    Drawn by the browser, not as images: the numbers here are the bars' heights and the ticks, 0.5-3 KB
    of HTML per chart. About 3 ms of driver CPU for 20 charts with their HTML, where Matplotlib's PNGs
    took 0.28-0.37 s (docs/benchmarks.md, "Issue 41, session 6: the distribution charts in HTML")."""
    return [_distribution(a, released[a.name], None if original is None else original[a.name]) for a in attrs]


def _percent(share: float) -> str:
    """A share as a percentage: whole numbers from 10 %, two significant digits below (0.42%, 0.05%)."""
    return f"{share:.0%}" if abs(share) >= 0.1 else f"{100 * share:.2g}%"


#: A horizontal bar chart's bar colours: a bar, a flagged bar (amber).
BAR_COLOUR, FLAGGED_COLOUR = "#3b75af", "#d08c00"


@dataclass(frozen=True)
class Bar:
    """One bar of a :class:`BarChart`: the attribute's ``name``, its share as text (``label``), its
    ``width`` (% of the chart's width) and ``colour``."""

    name: str
    label: str
    width: float
    colour: str


@dataclass(frozen=True)
class BarChart:
    """A horizontal bar chart drawn in HTML (``macros.html.j2``, ``bar_chart``): a ``title``, the
    alternative text ``alt`` (the title, every name with its share and the dashed line's value; the
    chart is ``role="img"`` with it as its label), the ``bars`` and the dashed line's position
    ``limit`` (% of the chart's width; None for none)."""

    title: str
    alt: str
    bars: tuple[Bar, ...]
    limit: Optional[float] = None


def _bar_chart(names: Sequence[str], shares: Sequence[float], title: str, *, limit: Optional[float] = None,
               flagged: Sequence[bool] = (), top: Optional[float] = None) -> BarChart:
    """Horizontal bars of ``shares`` (fractions, shown as %), one per name, each labelled with its share
    (:func:`_percent`); a dashed line at ``limit``; bars with ``flagged`` True in amber.

    Drawn by the browser, not as an image (a Matplotlib image was 0.085 s of CPU each, most of it its 40
    texts; docs/benchmarks.md, "Issue 41, session 5: the reports' charts"): the chart's width is the
    larger of 100 % (1 % without ``limit``) and 115 % of the largest share, room for the labels, as the
    image's axis was; ``top`` (in %) sets that width instead, so that charts read side by side share one scale
    (:func:`shared_top`). Alternative text: the title, every name with its share, then the dashed line's value."""
    if top is None:
        top = max(100.0 if limit is not None else 1.0, *(115 * s for s in shares))  # the width, in %
    colours = [FLAGGED_COLOUR if f else BAR_COLOUR for f in (flagged or [False] * len(names))]
    bars = tuple(Bar(n, _percent(s), 100 * max(100 * s, 0.0) / top, c) for n, s, c in zip(names, shares, colours))
    alt = f"{title}: " + ", ".join(f"{n} {_percent(s)}" for n, s in zip(names, shares))
    if limit is not None:
        alt += f"; dashed line at {_percent(limit)}"
    return BarChart(title, alt, bars, None if limit is None else min(100 * 100 * limit / top, 100.0))


def shared_top(*shares: Sequence[float]) -> float:
    """One width (in %) for bar charts of ``shares`` read side by side: 115 % of the largest share, at least 1 %."""
    return max(1.0, *(115 * s for group in shares for s in group))


#: Samples of the correlation colour scale in its legend (a CSS gradient between them).
SCALE_STOPS = 11


@dataclass(frozen=True)
class HeatCell:
    """One cell of a correlation table: its ``value`` (None when not finite: shown as "–"), its
    ``background`` colour (``#rrggbb``; None when not finite) and whether its text is ``dark``-backed (white)."""

    value: Optional[float]
    background: Optional[str]
    dark: bool


def _heat_scale(m: np.ndarray, difference: bool) -> float:
    """The colour scale's half range: 1 for correlations; for a difference its largest finite magnitude, at least 0.05."""
    finite = np.abs(m[np.isfinite(m)])
    return 1.0 if not difference else max(float(finite.max()) if finite.size else 0.0, 0.05)


def _heat_table(names: Sequence[str], m: np.ndarray, title: str, *, difference: bool = False) -> Mapping[str, Any]:
    """A correlation (or correlation-difference) matrix as a coloured HTML table: no image, the values as text.

    ``m``: p × p, rows and columns in the order of ``names``. Returns ``caption`` (``title``), ``names``,
    ``rows`` (p lists of p :class:`HeatCell`: the background is Matplotlib's ``RdBu_r`` colormap at the
    value on the scale −top to top, top = :func:`_heat_scale`; white text where |value| > 0.6·top) and
    ``scale`` (``low``, ``high``: −top and top; ``gradient``: :data:`SCALE_STOPS` colours of the colormap
    from −top to top, for the legend): the colours and white text of the heat map image it replaces.
    """
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    cmap = colormaps["RdBu_r"]
    top = _heat_scale(m, difference)
    finite = np.isfinite(m)
    shares = (np.where(finite, m, 0.0) + top) / (2 * top)  # Normalize(-top, top); the colormap clips outside [0, 1]
    colours = cmap(shares)
    rows = [[HeatCell(float(m[i, j]), to_hex(colours[i, j]), bool(abs(m[i, j]) > 0.6 * top))
             if finite[i, j] else HeatCell(None, None, False) for j in range(len(names))] for i in range(len(names))]
    return {"caption": title, "names": list(names), "rows": rows,
            "scale": {"low": -top, "high": top,
                      "gradient": ", ".join(to_hex(c) for c in cmap(np.linspace(0.0, 1.0, SCALE_STOPS)))}}


def _correlation(names: Sequence[str], m: Optional[np.ndarray], title: str, *,
                 difference: bool = False) -> Optional[Mapping[str, Any]]:
    """The correlation section's values: ``heat`` (the coloured table, :func:`_heat_table`), ``header``
    and ``rows`` (the matrix as numbers); None without a matrix."""
    if m is None:
        return None
    return {"heat": _heat_table(names, m, title, difference=difference), "header": ["", *names],
            "rows": [[n, *(float(v) for v in m[i])] for i, n in enumerate(names)]}


def _description_html(described: Optional[dict]) -> list[str]:
    """The table's own description, ``fragrelease.*`` properties and column comments
    (:func:`fragrelease.jobs.storage.table_self_description`) as HTML (``description.html.j2``)."""
    if not described:
        return []
    return [render("description.html.j2", described=described)]


def guarantee_sentence(guarantee: Optional[Mapping[str, str]]) -> str:
    """The public report's one-sentence guarantee: the release's own ``per_column`` and ``table``
    statements (:func:`fragrelease.idpir.guarantee.release_guarantee`, docs/privacy.md), stated
    against release recipients (anyone who reads the table), with a pointer to the rest."""
    if not guarantee or not guarantee.get("per_column") or not guarantee.get("table"):
        return "Guarantee: not recorded in this release's provenance."
    return (f"Guarantee against release recipients (anyone who reads the table): {guarantee['per_column']}; "
            f"{guarantee['table']} (against the aggregator and the key holders: see Guarantee below).")
