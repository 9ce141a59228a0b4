"""Accuracy preview of an IR release from public quantities only, before any data is read.

For each released attribute: its budget ε_attr (and the part ε_μ left for the centroids), the
Laplace scale b of its noisy centroids, the expected absolute noise E|Lap(b)| = b, the 95 %
interval ±b·ln 20 of a released centroid around the exact one (P(|Lap(b)| ≥ t) = exp(−t/b), so
t = b·ln 20 leaves 5 %), in the attribute's units and as the share of the declared domain it covers,
and for a categorical attribute the chance that a cluster's released rank differs from its exact
rank. Sources: docs/specification.md §1 (ranks), §2 (mechanisms, budget) and §3 (fragmented budgets);
Del Vasto-Terrientes et al. (ICISSP 2025) §3.3; Sánchez et al. (Information Fusion 2016).

**What it reads.** The mechanism, k, ε, the fragmentation and ε split, the category order and its
share, the declared domains / categories and, when declared, each owner's record count n (all public:
n is public under substitution neighbourhood). Never the data, never a local sensitivity of anyone's
data (the simulation's Δ is that of the public data it draws), and it spends no budget. Every figure below is a function of these public quantities.

**Scale.** Δ is :meth:`~fragrelease.idpir.mechanisms.IRMechanism.sensitivity_bound`, ``(hi − lo)/k``
(ranks: ``(|dom| − 1)/k``; plain iDP: k = 1). For DP-IR it is the Δ the release uses, so b is exact;
for iDP-IR and plain iDP it is an upper bound of the local Δ of any fragment (docs/specification.md
§2: Δ ≤ (hi − lo)/k), so b, the expected noise, the interval and the rank-move chance are upper bounds.
With n known, b is :meth:`~fragrelease.idpir.mechanisms.IRMechanism.scale` of Δ for the c = max(⌊n/k⌋, 1)
centroids (the production calibration, ≈ (Δ + c·2⁻⁴⁰)/ε_μ); without n, b = Δ/ε_μ, below the
calibrated value by at most c·2⁻⁴⁰/ε_μ.

**Categorical attributes.** The noisy mean rank z = μ + Lap(b) is clamped to [1, |dom|] and rounded
half up (docs/specification.md §1). For a cluster whose exact mean rank μ is a whole interior rank
(every record of the cluster in one category, the usual case for clusters of sorted ranks) the
released rank differs from μ exactly when |Lap(b)| ≥ ½: probability ``exp(−1/(2b))``; it moves by
two ranks or more with probability ``exp(−3/(2b))`` (when μ lies at least two ranks from either end).
This is the smallest chance over interior clusters (an interval of length 1 centred on the mode holds
the most Laplace mass); a cluster at rank
1 or |dom| moves with half of it (clamping keeps one side). Under ``dp-frequency`` the category order
itself is bought with a Laplace histogram of scale ``2/ε_order``
(:func:`~fragrelease.idpir.category_order.histogram_scale`); the preview gives that scale too.

**Released error (the default post-processing).** The figures above describe the Laplace draw on each
centroid; clamping and the isotonic projection (``postprocess: isotonic``, docs/specification.md §9)
act after it and usually remove most of it. With every owner's n declared, the preview also gives
the *expected released error* of each attribute by simulation
(:mod:`fragrelease.idpir.preview_error`): the release's own steps run ``runs`` times with fresh noise
on data drawn from the declared domain (n values spread evenly over [lo, hi], or n records dealt
evenly over the declared categories), scored against those data: the RMSE per record for numeric
attributes, the share of changed categories for categorical ones. Beside it stands the error of
the best constant release on the same data: releasing the mean (RMSE = its standard deviation,
(hi − lo)/√12 for data filling the domain) or the most frequent category (1 − 1/|dom|). These
data are public (the declared domain and n), so the figure is too; an owner's figure on its own
data is :func:`fragrelease.jobs.idpir.owner_preview.owner_preview` (private to that owner).

**Warning and suggestions.** An attribute warns when its expected released error is at least
``threshold`` (default 0.5) times the constant release's on data drawn from the declared domain. At 1
the release would tell no more than that constant about data filling the domain; real data are usually
more concentrated (Adult's age and hours-per-week: standard deviations 0.13 and 0.12 of the domain
width, against 0.29 for data filling it) while their released error is close to the prediction, so the
default 0.5 stands for "about as useless as the constant on typical data". Without every
n declared nothing is simulated and nothing warns (a note says so). :func:`suggest` then finds,
by simulation, the smallest k (≥ 3 and ≤ every declared n), the smallest ε with two significant
digits, and the attributes to keep (dropping the attribute with the largest expected error relative
to its constant release first, budgets recomputed each time) that bring every attribute under the
threshold.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from decimal import ROUND_CEILING, Decimal
from fractions import Fraction
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from fragrelease.budget import format_epsilon, parse_epsilon
from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.accuracy import laplace_half_width
from fragrelease.idpir.category_order import AttributeBudget, histogram_scale, parse_share
from fragrelease.idpir.mechanisms import get_mechanism
from fragrelease.idpir.microaggregation import cluster_count
from fragrelease.idpir.postprocess import DEFAULT_POSTPROCESS
from fragrelease.idpir.preview_error import (
    DEFAULT_RUNS,
    ErrorEstimate,
    combine,
    domain_counts,
    domain_values,
    simulate_categorical,
    simulate_numeric,
)
from fragrelease.idpir.spec import attribute_budgets
from fragrelease.idpir.stage import resolve_k
from fragrelease.protocol.fragmentation import fragmentation_of
from fragrelease.protocol.messages import MIN_K
from fragrelease.protocol.options import ReleaseOptions
from fragrelease.rng.simulation import SecureSimulation, SimulationRandomness

#: Default warning threshold: expected released error over the error of the constant release (mean / mode).
DEFAULT_THRESHOLD = 0.5
#: Simulated releases per evaluation inside the suggestions' searches (common draws across candidates).
_SEARCH_RUNS = 8
#: Largest k the search tries when no owner declares its record count.
_K_SEARCH_LIMIT = 10**9

#: The statement every preview carries (CLI, reports, API).
PUBLIC_NOTE = ("computed from public quantities only (mechanism, k, epsilon, the declared domains and categories, "
               "the declared record counts): no data read, no budget spent")
#: What the expected released error is measured against (CLI, reports, API).
ERROR_NOTE = ("released error: expected after clamping and the isotonic projection, simulated on data drawn from the "
              "declared domain (n values spread evenly from lo to hi, or n records dealt evenly over the categories); "
              "numeric: RMSE per record, categorical: share of changed categories; constant: the same error of "
              "releasing the mean (numeric) or the most frequent category (categorical) of those data")


@dataclass(frozen=True)
class OwnerPlan:
    """One owner as the preview sees it: its name, the attributes it releases and its record count (None: not declared)."""

    name: str
    attributes: tuple[str, ...]
    n: Optional[int] = None


@dataclass(frozen=True)
class PreviewParams:
    """The public parameters a preview depends on (a configuration or a release's provenance).

    ``specs`` maps attribute name → public spec ``{"name", "kind", "domain": [lo, hi]}`` or
    ``{"name", "kind": "categorical", "categories": [...]}`` (:meth:`fragrelease.schemas.base.Attribute.public_spec`).
    ``budgets`` (optional) gives each owner's exact per-attribute budgets, as a released plan records them;
    without it they are derived from ε, the fragmentation and the split (docs/specification.md §2-3).
    """

    mechanism: str
    k: int
    epsilon: Fraction
    fragmentation: str
    owners: tuple[OwnerPlan, ...]
    specs: Mapping[str, Mapping[str, Any]]
    epsilon_split: str = "equal"
    category_order: str = "dp-frequency"
    category_order_share: Fraction = Fraction(1, 10)
    budgets: Optional[Mapping[str, tuple[AttributeBudget, ...]]] = None
    postprocess: str = DEFAULT_POSTPROCESS


@dataclass(frozen=True)
class AttributePreview:
    """The predicted noise of one released attribute (units: the attribute's; ranks for categorical ones).

    ``owners`` hold the attribute (horizontal: all of them; b is the largest over them, which differ only
    by the c·2⁻⁴⁰ calibration). ``scale`` = b = E|noise|; ``half_width`` = b·ln 20; ``coverage`` =
    2·half_width / (hi − lo), the share of the domain width the 95 % interval covers (may exceed 1);
    ``exact`` is True for DP-IR, False when b bounds a local (iDP) scale from above. Categorical only:
    ``p_move`` = exp(−1/(2b)), ``p_move2`` = exp(−3/(2b)), ``order_scale`` the dp-frequency histogram's
    scale in records (None for the declared order). ``error``: the expected released error after the
    release's post-processing, simulated on data drawn from the declared domain
    (:class:`~fragrelease.idpir.preview_error.ErrorEstimate`; None when a record count is not declared);
    ``warn``: that error is at least the threshold times the constant release's.
    """

    attribute: str
    kind: str
    owners: tuple[str, ...]
    lo: float
    hi: float
    epsilon: Fraction
    epsilon_centroids: Fraction
    sensitivity: float
    scale: float
    exact: bool
    half_width: float
    coverage: float
    warn: bool
    p_move: Optional[float] = None
    p_move2: Optional[float] = None
    order_scale: Optional[float] = None
    error: Optional[ErrorEstimate] = None

    @property
    def mean_abs_noise(self) -> float:
        """E|Lap(b)| = b, in the attribute's units."""
        return self.scale

    @property
    def released_error(self) -> Optional[float]:
        """Expected released error (RMSE in units, or share of changed categories); None when not simulated."""
        return None if self.error is None else self.error.released

    @property
    def baseline_error(self) -> Optional[float]:
        """The constant release's error on the same data (the mean's RMSE, or 1 − the top category's share)."""
        return None if self.error is None else self.error.baseline

    @property
    def error_ratio(self) -> Optional[float]:
        """released_error / baseline_error (what ``warn`` compares with the threshold)."""
        return None if self.error is None else self.error.ratio

    def to_dict(self) -> dict:
        """Plain JSON-able form (budgets as exact text)."""
        return {"attribute": self.attribute, "kind": self.kind, "owners": list(self.owners),
                "domain": [self.lo, self.hi], "epsilon": format_epsilon(self.epsilon),
                "epsilon_centroids": format_epsilon(self.epsilon_centroids), "sensitivity": self.sensitivity,
                "scale": self.scale, "exact": self.exact, "mean_abs_noise": self.mean_abs_noise,
                "half_width_95": self.half_width, "coverage_95": self.coverage, "warn": self.warn,
                "p_rank_move": self.p_move, "p_rank_move_2": self.p_move2, "order_scale": self.order_scale,
                "released_error": None if self.error is None else self.error.to_dict()}


@dataclass(frozen=True)
class Suggestions:
    """What brings every attribute under the threshold, each found alone (the others unchanged).

    ``k``: the smallest k, or None when none ≤ the smallest declared n does (or the mechanism fixes k);
    ``epsilon``: the smallest total ε with two significant digits; ``keep``: attributes to keep
    (empty when not even one attribute fits); ``notes``: why a suggestion is missing.
    """

    k: Optional[int]
    epsilon: Optional[Fraction]
    keep: tuple[str, ...]
    drop: tuple[str, ...]
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        out = []
        if self.k is not None:
            out.append(f"k = {self.k} (the smallest k that brings every attribute under the threshold)")
        if self.epsilon is not None:
            out.append(f"epsilon = {_decimal_text(self.epsilon)} (the smallest with two significant digits)")
        if self.drop:
            out.append(f"keep only {', '.join(self.keep)} (drop {', '.join(self.drop)})" if self.keep
                       else "no subset of attributes fits: even a single attribute's interval is too wide")
        out.extend(self.notes)
        return out


@dataclass(frozen=True)
class ReleasePreview:
    """A release's per-attribute accuracy preview (:func:`preview_params`)."""

    params: PreviewParams
    threshold: float
    attributes: tuple[AttributePreview, ...]
    suggestions: Optional[Suggestions] = None
    notes: tuple[str, ...] = field(default=())

    @property
    def warnings(self) -> tuple[AttributePreview, ...]:
        return tuple(a for a in self.attributes if a.warn)

    def warning_text(self) -> Optional[str]:
        """One line naming the attributes expected to be released no better than a constant, or None."""
        if not self.warnings:
            return None
        worst = max(self.warnings, key=lambda a: (a.error_ratio or 0.0, a.attribute))
        assert worst.error is not None
        times = "" if self.threshold == 1 else f"{self.threshold:g} times "
        return (f"{len(self.warnings)} of {len(self.attributes)} attributes are expected to be released with an error "
                f"at least {times}that of releasing their mean (numeric) or most frequent category (categorical), "
                f"on data drawn from the declared domain (worst: {worst.attribute}, expected error "
                f"{error_text(worst.kind, worst.error.released)} against {error_text(worst.kind, worst.error.baseline)})")

    def to_dict(self) -> dict:
        p = self.params
        out: dict[str, Any] = {
            "mechanism": p.mechanism, "k": p.k, "epsilon": format_epsilon(p.epsilon),
            "fragmentation": p.fragmentation, "postprocess": p.postprocess, "threshold": self.threshold,
            "note": PUBLIC_NOTE,
            "attributes": [a.to_dict() for a in self.attributes], "notes": list(self.notes)}
        if self.suggestions is not None:
            s = self.suggestions
            out["suggestions"] = {"k": s.k, "epsilon": None if s.epsilon is None else format_epsilon(s.epsilon),
                                  "keep": list(s.keep), "drop": list(s.drop), "notes": list(s.notes)}
        return out


def error_text(kind: str, value: float) -> str:
    """An error as the table shows it: a share of records (categorical) or a value in the attribute's units."""
    if kind == "categorical":
        return f"{value:.1%}"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _bounds(spec: Mapping[str, Any]) -> tuple[float, float, bool]:
    """(lo, hi, categorical) of a public attribute spec; ranks [1, |dom|] for categorical ones."""
    if spec.get("kind") == "categorical":
        cats = spec.get("categories") or ()
        if len(cats) < 2:
            raise InvalidParameterError(f"categorical attribute {spec.get('name')!r} needs at least 2 categories")
        return 1.0, float(len(cats)), True
    dom = spec.get("domain")
    if dom is None or len(dom) != 2:
        raise InvalidParameterError(f"numeric attribute {spec.get('name')!r} needs a declared domain [lo, hi]")
    return float(dom[0]), float(dom[1]), False


def owner_budgets(p: PreviewParams) -> dict[str, tuple[AttributeBudget, ...]]:
    """Each owner's per-attribute budgets: as given, or derived (docs/specification.md §2-3, the plan's rules)."""
    if p.budgets is not None:
        return {o.name: tuple(p.budgets[o.name]) for o in p.owners}
    # parallel composition: the full ε each; sequential: ε split over the owners
    eps_owner = fragmentation_of(p.fragmentation).owner_epsilons(p.epsilon, {o.name: o.attributes for o in p.owners},
                                                                 p.epsilon_split)
    # the plan's own split (fragrelease.idpir.spec.attribute_budgets), never a copy of it
    options = ReleaseOptions.of(category_order=p.category_order, category_order_share=p.category_order_share)
    return {o.name: attribute_budgets([(a, _bounds(p.specs[a])[2]) for a in o.attributes], eps_owner[o.name],
                                      options=options)
            for o in p.owners}


class _Replay:
    """Common random numbers for a search: one stream of CSPRNG draws, replayed from its start for every candidate.

    Candidates (k, ε, attribute sets) are then compared on the same noise, so a search is not misled by
    the simulation's own randomness."""

    name = "replay"

    def __init__(self, source: SimulationRandomness) -> None:
        self._source = source
        self._buf = np.empty(0)
        self._pos = 0

    def rewind(self) -> None:
        self._pos = 0

    def laplace(self, size: int) -> np.ndarray:
        end = self._pos + size
        if end > self._buf.size:
            self._buf = np.concatenate([self._buf, self._source.laplace(end - self._buf.size)])
        out = self._buf[self._pos:end]
        self._pos = end
        return out


def _domain_error(p: PreviewParams, name: str, held: Sequence[tuple[OwnerPlan, AttributeBudget]], *, runs: int,
                  randomness: SimulationRandomness) -> Optional[ErrorEstimate]:
    """The expected released error of attribute ``name`` on data drawn from its declared domain (None: an n unknown).

    Every owner holding it simulates its own n records (public: declared); categorical records are dealt
    evenly over the categories, so every category order ranks them alike and the order is not simulated.
    The scale is Δ/ε_centroids of the simulated data (the calibrated one is larger by at most c·2⁻⁴⁰/ε).
    """
    if any(o.n is None for o, _ in held):
        return None
    lo, hi, categorical = _bounds(p.specs[name])
    k_used = resolve_k(get_mechanism(p.mechanism), p.k)
    parts = []
    for o, b in held:
        assert o.n is not None
        if o.n < k_used:
            raise InvalidParameterError(f"owner {o.name!r}: k = {k_used} exceeds its record count n = {o.n}")
        if categorical:
            parts.append(simulate_categorical(domain_counts(o.n, int(hi)), mechanism=p.mechanism, k=p.k,
                                              epsilon_centroids=b.centroids, postprocess=p.postprocess, runs=runs,
                                              randomness=randomness, calibrate=False))
        else:
            parts.append(simulate_numeric(domain_values(o.n, lo, hi), mechanism=p.mechanism, k=p.k, lo=lo, hi=hi,
                                          epsilon_centroids=b.centroids, postprocess=p.postprocess, runs=runs,
                                          randomness=randomness, calibrate=False))
    return combine(name, categorical, parts)


def _holders(p: PreviewParams) -> dict[str, list[tuple[OwnerPlan, AttributeBudget]]]:
    """Attribute → the owners releasing it with their budgets, attributes in first-owner order."""
    budgets = owner_budgets(p)
    held: dict[str, list[tuple[OwnerPlan, AttributeBudget]]] = {}
    for o in p.owners:
        if not o.attributes:
            raise InvalidParameterError(f"owner {o.name!r} releases no attribute")
        for b in budgets[o.name]:
            if b.attribute not in p.specs:
                raise InvalidParameterError(f"attribute {b.attribute!r} of owner {o.name!r} has no declared domain")
            held.setdefault(b.attribute, []).append((o, b))
    return held


def _ratios(p: PreviewParams, rnd: _Replay) -> dict[str, float]:
    """Each attribute's expected released error over its constant release's (searches: no closed forms, common
    draws, :data:`_SEARCH_RUNS` runs); every n is declared when a search runs."""
    rnd.rewind()
    out = {}
    for name, held in _holders(p).items():
        error = _domain_error(p, name, held, runs=_SEARCH_RUNS, randomness=rnd)
        assert error is not None
        out[name] = error.ratio
    return out


def attribute_previews(p: PreviewParams, threshold: float = DEFAULT_THRESHOLD, *, runs: int = DEFAULT_RUNS,
                       randomness: Optional[SimulationRandomness] = None) -> tuple[AttributePreview, ...]:
    """One :class:`AttributePreview` per released attribute, in first-owner order (module docstring).

    ``runs`` simulated releases per attribute and owner give the expected released error (every owner's n
    declared); ``randomness``: the simulation's draws (default the OS CSPRNG; tests pass a seeded source).

    Raises
    ------
    InvalidParameterError
        Unknown mechanism, k out of range (also k above a declared n), ε ≤ 0, an owner without
        attributes, an attribute without a public spec, a threshold that is not > 0 or runs < 1.
    """
    if not threshold > 0:
        raise InvalidParameterError(f"threshold must be > 0 (a multiple of the constant release's error), not "
                                    f"{threshold}")
    rnd = randomness if randomness is not None else SecureSimulation()
    mech = get_mechanism(p.mechanism)
    k_used = resolve_k(mech, p.k)
    held = _holders(p)
    out = []
    for name in held:
        lo, hi, categorical = _bounds(p.specs[name])
        delta = mech.sensitivity_bound(p.k, lo, hi)  # public: k and the declared domain
        scales, eps, eps_mu, order_scale = [], None, None, None
        for o, b in held[name]:
            eps, eps_mu = b.total, b.centroids
            if o.n is None:
                scales.append(delta / float(eps_mu))
            else:  # the production calibration for the owner's c public clusters
                scales.append(mech.scale(delta, eps_mu, cluster_count(o.n, k_used)))
            if categorical and b.order > 0:
                order_scale = max(order_scale or 0.0, histogram_scale(b.order, int(hi)))
        assert eps is not None and eps_mu is not None
        scale = max(scales)
        half = laplace_half_width(scale)  # OpenDP's accuracy function: b·ln 20 at 95 %
        coverage = 2 * half / (hi - lo)
        error = _domain_error(p, name, held[name], runs=runs, randomness=rnd)
        out.append(AttributePreview(
            attribute=name, kind="categorical" if categorical else "numeric",
            owners=tuple(o.name for o, _ in held[name]), lo=lo, hi=hi, epsilon=eps, epsilon_centroids=eps_mu,
            sensitivity=delta, scale=scale, exact=not mech.local, half_width=half, coverage=coverage,
            warn=error is not None and error.worse_than_constant(threshold),
            p_move=math.exp(-0.5 / scale) if categorical else None,
            p_move2=math.exp(-1.5 / scale) if categorical else None,
            order_scale=order_scale, error=error))
    return tuple(out)


def _fits(p: PreviewParams, threshold: float, rnd: _Replay) -> bool:
    return all(r < threshold for r in _ratios(p, rnd).values())


def _decimal_text(x: Fraction) -> str:
    d = Decimal(x.numerator) / Decimal(x.denominator)
    return format(d.normalize(), "f")


def _two_digits_up(x: float) -> Fraction:
    """The smallest number with two significant digits that is ≥ x (> 0)."""
    d = Decimal(repr(x))
    exp = d.adjusted() - 1
    q = Decimal(1).scaleb(exp)
    return Fraction((d / q).to_integral_value(rounding=ROUND_CEILING) * q)


def _previous_two_digits(x: Fraction) -> Fraction:
    """The next smaller number with two significant digits (x has two significant digits)."""
    d = Decimal(x.numerator) / Decimal(x.denominator)
    step = Decimal(1).scaleb(d.adjusted() - 1)
    if d - step < Decimal(10).scaleb(d.adjusted() - 1):  # 1.0 → 0.99
        step = step / 10
    return Fraction(d - step)


#: Largest factor the ε search tries above the configured ε.
_EPSILON_SEARCH_FACTOR = 2 ** 20


def _suggest_k(p: PreviewParams, threshold: float, rnd: _Replay) -> tuple[Optional[int], Optional[str]]:
    """The smallest k in [3, min n] that fits: a geometric scan (the error is not monotone in k: larger clusters
    have less noise but coarser centroids), then bisection below the first fitting k."""
    if get_mechanism(p.mechanism).fixed_k is not None:
        return None, f"mechanism {p.mechanism!r} fixes k, so no k is suggested"
    upper = min(o.n for o in p.owners if o.n is not None)
    previous, k = MIN_K - 1, MIN_K
    while True:
        if k <= upper and _fits(replace(p, k=k), threshold, rnd):
            break
        if k >= upper:
            return None, f"no k up to the smallest owner's record count n = {upper} suffices"
        previous, k = k, min(upper, k * 2)
    lo, hi = previous + 1, k  # previous does not fit (or is below 3); k fits
    while lo < hi:
        mid = (lo + hi) // 2
        if _fits(replace(p, k=mid), threshold, rnd):
            hi = mid
        else:
            lo = mid + 1
    return lo, None


def _suggest_epsilon(p: PreviewParams, threshold: float, rnd: _Replay) -> Optional[Fraction]:
    """The smallest ε with two significant digits that fits: doubling, bisection, then the two-digit grid."""
    lo, hi = p.epsilon, p.epsilon * 2
    while not _fits(replace(p, epsilon=hi), threshold, rnd):
        lo, hi = hi, hi * 2
        if hi > p.epsilon * _EPSILON_SEARCH_FACTOR:
            return None
    for _ in range(12):  # to about 0.02 % of ε
        mid = (lo + hi) / 2
        if _fits(replace(p, epsilon=mid), threshold, rnd):
            hi = mid
        else:
            lo = mid
    eps = _two_digits_up(float(hi))
    while not _fits(replace(p, epsilon=eps), threshold, rnd):  # the grid point above may still miss by noise
        eps = _two_digits_up(float(eps) * 1.005)
    while True:  # and down, while the grid point below fits too
        lower = _previous_two_digits(eps)
        if lower <= 0 or not _fits(replace(p, epsilon=lower), threshold, rnd):
            return eps
        eps = lower


def _suggest_keep(p: PreviewParams, threshold: float, rnd: _Replay) -> tuple[str, ...]:
    """Drop the attribute with the largest expected error relative to its constant release until all fit."""
    current = p
    while True:
        ratios = _ratios(current, rnd)
        if all(r < threshold for r in ratios.values()):
            return tuple(ratios)
        worst = max(ratios, key=lambda a: (ratios[a], a))
        owners = tuple(replace(o, attributes=tuple(a for a in o.attributes if a != worst)) for o in current.owners)
        owners = tuple(o for o in owners if o.attributes)
        if not owners:
            return ()
        current = replace(current, owners=owners, budgets=None)


def suggest(p: PreviewParams, threshold: float = DEFAULT_THRESHOLD, *,
            randomness: Optional[SimulationRandomness] = None,
            previews: Optional[Sequence[AttributePreview]] = None) -> Optional[Suggestions]:
    """What brings every attribute under ``threshold`` (None when none warns, or nothing could be simulated).

    Each suggestion changes one thing and keeps the rest, judged by simulation (:data:`_SEARCH_RUNS`
    runs per candidate, every candidate on the same CSPRNG draws): the smallest k in [3, min declared
    n] (a geometric scan, then bisection); the smallest ε with two significant digits (doubling,
    bisection, then the two-digit grid); the attributes to keep, dropping the attribute with the
    largest expected error relative to its constant release (ties: the later name) and recomputing
    the budgets until all fit. A release keeps needing at least two owners; the suggestion does not
    check that. Figures near the threshold are as uncertain as the simulation (its standard error is
    in each :class:`~fragrelease.idpir.preview_error.ErrorEstimate`).
    """
    p = replace(p, budgets=None)  # every variant recomputes its budgets from ε, the split and the order
    rnd = _Replay(randomness if randomness is not None else SecureSimulation())
    if previews is None:
        previews = attribute_previews(p, threshold, randomness=rnd)
    if not any(a.warn for a in previews):
        return None
    notes = []
    k, note = _suggest_k(p, threshold, rnd)
    if note:
        notes.append(note)
    eps = _suggest_epsilon(p, threshold, rnd)
    if eps is None:
        notes.append(f"no epsilon up to {_EPSILON_SEARCH_FACTOR} times the configured one suffices")
    keep = _suggest_keep(p, threshold, rnd)
    drop = tuple(a.attribute for a in previews if a.attribute not in keep)
    return Suggestions(k=k, epsilon=eps, keep=keep, drop=drop, notes=tuple(notes))


def preview_params(p: PreviewParams, threshold: float = DEFAULT_THRESHOLD, *, with_suggestions: bool = True,
                   runs: int = DEFAULT_RUNS, randomness: Optional[SimulationRandomness] = None) -> ReleasePreview:
    """The whole preview of ``p``: per-attribute figures, warnings and (if any warns) suggestions.

    ``runs`` and ``randomness``: the simulation's (:func:`attribute_previews`). Raises as :func:`attribute_previews`.
    """
    attrs = attribute_previews(p, threshold, runs=runs, randomness=randomness)
    notes = [PUBLIC_NOTE]
    if get_mechanism(p.mechanism).local:
        notes.append(f"{p.mechanism}: every figure is an upper bound (the DP-IR value; the local sensitivity never "
                     "exceeds it, docs/specification.md §2)")
    if not all(o.n is not None for o in p.owners):
        notes.append("record counts not declared: b = Δ/ε_centroids, without the sampler's grid allowance "
                     "(at most n/k·2^-40/ε_centroids)")
    if all(a.error is not None for a in attrs):
        notes.append(ERROR_NOTE if p.postprocess == "isotonic" else ERROR_NOTE.replace(
            "clamping and the isotonic projection", "clamping (postprocess none)"))
    else:
        notes.append("record counts not declared: the released error is not simulated and nothing is checked "
                     "against the constant release (declare each owner's rows, or --rows N)")
    notes.append("b, 95 % ± and P(rank moves) describe the Laplace draw on each centroid, before clamping and the "
                 "isotonic projection")
    return ReleasePreview(params=p, threshold=threshold, attributes=attrs,
                          suggestions=(suggest(p, threshold, randomness=randomness, previews=attrs)
                                       if with_suggestions else None), notes=tuple(notes))


def params_from_config(config: Any, specs: Sequence[Mapping[str, Any]], *, rows: Optional[int] = None) -> PreviewParams:
    """:class:`PreviewParams` of a release configuration (:class:`fragrelease.protocol.config.ReleaseConfig`).

    ``specs`` are the public specs of the dataset's released attributes in schema order
    (``[a.public_spec() for a in schema.protected]``). Horizontal owners release all of them and
    their n is their ``rows`` (simulation) or ``rows`` given here; vertical owners release their
    ``attributes`` and share one n (``rows``), None when not given.

    Raises
    ------
    InvalidParameterError
        A vertical owner names an attribute the dataset does not release.
    """
    by_name = {s["name"]: s for s in specs}
    owners = []
    for o in config.owners:
        if not fragmentation_of(config.fragmentation).by_attributes:
            attrs = tuple(by_name)
            n = o.rows if o.rows is not None else rows
        else:
            attrs = tuple(o.attributes or ())
            unknown = [a for a in attrs if a not in by_name]
            if unknown:
                raise InvalidParameterError(f"owner {o.name!r}: attribute {unknown[0]!r} is not a released attribute "
                                            f"of dataset {config.dataset!r}")
            n = rows
        owners.append(OwnerPlan(o.name, attrs, n))
    return PreviewParams(mechanism=config.mechanism, k=config.k, epsilon=config.epsilon,
                         fragmentation=config.fragmentation, owners=tuple(owners), specs=by_name,
                         epsilon_split=config.epsilon_split, category_order=config.category_order,
                         category_order_share=config.category_order_share, postprocess=config.postprocess)


def preview(config: Any, specs: Sequence[Mapping[str, Any]], *, rows: Optional[int] = None,
            threshold: float = DEFAULT_THRESHOLD, randomness: Optional[SimulationRandomness] = None,
            with_suggestions: bool = True) -> ReleasePreview:
    """Accuracy preview of a release configuration before any data is read (module docstring).

    Parameters
    ----------
    config : fragrelease.protocol.config.ReleaseConfig
    specs : the dataset's released attributes as public specs (see :func:`params_from_config`).
    rows : record count of every owner whose configuration declares none (optional, public).
    threshold : float > 0: warn when an attribute's expected released error is at least this multiple of the
        error of releasing its mean or most frequent category (data drawn from the declared domain).
    randomness : the simulation's draws (default the OS CSPRNG; tests only pass a seeded source).
    with_suggestions : search for the k, ε and attributes that fit when an attribute warns (seconds).

    Returns
    -------
    ReleasePreview: one row per attribute, the warnings and, if any, :class:`Suggestions`.
    """
    return preview_params(params_from_config(config, specs, rows=rows), threshold, randomness=randomness,
                          with_suggestions=with_suggestions)


def preview_from_provenance(provenance: Mapping[str, Any], threshold: float = DEFAULT_THRESHOLD, *,
                            randomness: Optional[SimulationRandomness] = None) -> ReleasePreview:
    """The same per-attribute table for a committed release, from its provenance (public parameters only).

    Uses the provenance's ``mechanism``, ``k``, ``epsilon``, ``fragmentation``, ``attributes`` (public
    specs), ``postprocess`` and ``owners`` (names, ``attributes``, ``n_records`` and the exact ``budgets``); no
    suggestions. ``randomness``: the simulation's draws (tests only).
    """
    specs = {a["name"]: a for a in provenance["attributes"]}
    owners, budgets = [], {}
    for o in provenance["owners"]:
        owners.append(OwnerPlan(o["name"], tuple(o["attributes"]), int(o["n_records"])))
        budgets[o["name"]] = tuple(AttributeBudget.model_validate(b) for b in o["budgets"])
    p = PreviewParams(mechanism=provenance["mechanism"], k=int(provenance["k"]),
                      epsilon=parse_epsilon(provenance["epsilon"]), fragmentation=provenance["fragmentation"],
                      owners=tuple(owners), specs=specs, category_order=provenance.get("category_order", "declared"),
                      category_order_share=parse_share(provenance.get("category_order_share") or "1/10"),
                      budgets=budgets, postprocess=provenance.get("postprocess") or DEFAULT_POSTPROCESS)
    return preview_params(p, threshold, with_suggestions=False, randomness=randomness)
