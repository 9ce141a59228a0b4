"""The accuracy preview's objects (:mod:`fragrelease.idpir.preview`): its public parameters, one
attribute's predicted noise and released error, the suggestions and the whole preview, with the notes
every preview carries. Plain frozen dataclasses; nothing here computes a figure."""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any, Mapping, Optional

from fragrelease.budget import format_epsilon
from fragrelease.idpir.category_order import AttributeBudget
from fragrelease.idpir.postprocess import DEFAULT_POSTPROCESS
from fragrelease.idpir.preview_error import ErrorEstimate

#: Default warning threshold: expected released error over the error of the constant release (mean / mode).
DEFAULT_THRESHOLD = 0.5

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


def _decimal_text(x: Fraction) -> str:
    d = Decimal(x.numerator) / Decimal(x.denominator)
    return format(d.normalize(), "f")
