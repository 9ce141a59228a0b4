"""Information-loss evaluation of the IR microaggregation releases, Spark-free (docs/specification.md §3-4).

Source: *Individual Differential Privacy: A Utility-Preserving Formulation of Differential Privacy
Guarantees* and the fragmented-data paper's §5 (MeanSSE over the ε × k grid).

One *run* protects every fragment of a dataset once per (mechanism, ε, k) cell and measures MeanSSE
and the category total variation distance against the original. Everything that depends only on the
data is computed once per fragment and attribute and reused for every k, ε and mechanism: the sorted
values and their prefix sums (:class:`SortedAttribute`). From them the IR clusters of any k, their
centroids and the iDP-IR sensitivity cost O(number of clusters), and so does the squared error of a
protected attribute:

    Σ_{i ∈ cluster} (x_i - z)² = SS_cluster + size · (mean_cluster - z)²     (numeric)
    Σ_{i ∈ cluster} [cat_i ≠ z] = size - |cluster ∩ block of rank z|          (categorical ranks)

so a run never materializes the protected table. The mechanism steps are the release's own
(:mod:`fragrelease.idpir.sensitivity`, :func:`fragrelease.idpir.mechanisms.laplace_scale`,
:func:`fragrelease.idpir.postprocess.finish_centroids`, :mod:`fragrelease.idpir.microaggregation`,
:mod:`fragrelease.idpir.category_order`), and a test checks that the result equals
:func:`fragrelease.idpir.metrics.mean_sse` of :func:`fragrelease.idpir.mechanisms.protect_attribute` given the
same noise and the same category order.

Post-processing (docs/specification.md §9; :mod:`fragrelease.idpir.postprocess`): every cell is scored
for each requested ``postprocess`` value (``isotonic``: the release default, the weighted isotonic
projection of the noisy centroid vector onto the non-decreasing vectors in [lo, hi]; ``none``: the
paper's clamp-and-round). The noise of a cell is drawn **once** and finished once per value, so the
``isotonic`` and ``none`` rows of one run share their noise and their difference is a paired
measurement. Every row names its ``postprocess``.

Category order (docs/specification.md §1; :mod:`fragrelease.idpir.category_order`): categorical attributes
are clustered on ranks, and each owner ranks the categories of its own fragment with one of

- ``dp-frequency`` (share s): a Laplace histogram of the fragment's category counts bought with
  s·ε_attr, redrawn for every run, ε and fragment through the evaluation's noise source; the
  centroids get (1 − s)·ε_attr. ε_attr in total, as in a release.
- ``declared``: the schema's order, no budget.
- ``data-frequency``: the paper's reading, exact counts of the fragment, **not private** (it spends
  no budget on an order that depends on the data). Only this evaluation computes it, to reproduce
  the paper's figures; every result row names the order it used (``category_order``).

Scenarios: ``centralized`` (one fragment, ε/l per attribute), ``horizontal`` (records dealt to owners
at random on every run; each owner clusters and ranks its own records with the full ε), ``vertical``
(every attribute clustered over all records, owner j's attributes with ε_j/l_j, ``equal`` or
``by-attributes`` split).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Optional, Sequence

import numpy as np

from fragrelease.budget import split_epsilon_vertical
from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.category_order import (
    CATEGORY_ORDERS,
    declared_order,
    dp_frequency_order,
    parse_share,
    split_attribute_budget,
)
from fragrelease.idpir.mechanisms import get_mechanism, laplace_scale, mechanism_k
from fragrelease.idpir.metrics import CATEGORICAL_SCALE
from fragrelease.idpir.microaggregation import check_k, cluster_count
from fragrelease.idpir.postprocess import POSTPROCESS, check_postprocess, finish_centroids
from fragrelease.protocol.options import ReleaseOptions
from fragrelease.rng.laplace import NoiseSource, evaluation_generator

from .paper_order import PAPER_ORDER, data_frequency_order
from .scores import category_tvd, combine_mean_sse

#: Grid of docs/specification.md §3.
EPSILONS = ("0.01", "0.1", "0.5", "1")
K_GRID = {"adult": (1, 50, 150, 200, 250, 400, 600, 1000, 2000), "wine": (1, 50, 100, 150, 200, 250, 300)}
#: Category orders the evaluation can use: the release's two and the paper's (labelled) reading.
EVALUATION_ORDERS = CATEGORY_ORDERS + (PAPER_ORDER,)


@dataclass(frozen=True)
class OrderSetting:
    """A category-order setting of a run: the order and, for ``dp-frequency``, the histogram's share.

    ``share`` is kept as the text the user gave (``"0.1"``) so that result rows name it exactly;
    it is ``"0"`` for ``declared`` and ``data-frequency`` (no budget spent on the order).
    """

    order: str
    share: str = "0"

    @classmethod
    def parse(cls, order: str, share: object = None) -> OrderSetting:
        """Validate an order name and share.

        Raises
        ------
        InvalidParameterError
            An order outside :data:`EVALUATION_ORDERS`, a ``dp-frequency`` share outside (0, 1), or a
            share given for an order that spends no budget on the order.
        """
        if order not in EVALUATION_ORDERS:
            raise InvalidParameterError(f"category order must be one of {EVALUATION_ORDERS}, not {order!r}")
        if order == "dp-frequency":
            if share is None:
                raise InvalidParameterError("category order 'dp-frequency' needs a share in (0, 1), got None")
            parse_share(share, name="order share")
            return cls(order, str(share))
        if share not in (None, 0, "0"):
            raise InvalidParameterError(f"category order {order!r} spends no budget; share must be 0, not {share!r}")
        return cls(order, "0")

    @property
    def share_fraction(self) -> Fraction:
        return parse_share(self.share, name="order share") if self.order == "dp-frequency" else Fraction(0)

    @property
    def label(self) -> str:
        return f"{self.order} {self.share}" if self.order == "dp-frequency" else self.order


@dataclass(frozen=True)
class AttributeSpec:
    """Public description of one protected attribute: bounds [lo, hi] (ranks: [1, |dom|])."""

    name: str
    lo: float
    hi: float
    categorical: bool
    categories: tuple[str, ...] = ()

    @classmethod
    def from_attribute(cls, attr) -> AttributeSpec:
        """From a :class:`fragrelease.schemas.base.Attribute`."""
        lo, hi = attr.bounds()
        return cls(attr.name, lo, hi, attr.categorical, tuple(attr.categories or ()))


class CategoryCounts:
    """Category counts of one categorical attribute in one fragment, shape (|dom|,) in declared order.

    Raises
    ------
    InvalidParameterError
        A value that is not a declared category (the message names it).
    """

    def __init__(self, values: np.ndarray, spec: AttributeSpec) -> None:
        cats = list(spec.categories)
        index = {c: i for i, c in enumerate(cats)}
        vals, counts = np.unique(np.asarray(values, dtype=object).astype(str), return_counts=True)
        unknown = [v for v in vals if v not in index]
        if unknown:
            raise InvalidParameterError(f"value {unknown[0]!r} of {spec.name!r} is not a declared category")
        self.counts = np.zeros(len(cats), dtype=np.int64)
        self.counts[[index[v] for v in vals]] = counts
        self.spec = spec

    def as_dict(self) -> dict[str, int]:
        return {c: int(n) for c, n in zip(self.spec.categories, self.counts, strict=True)}

    def ranked(self, order: Sequence[str]) -> SortedAttribute:
        """The attribute as ranks of ``order`` (rank 1 = order[0]), sorted: O(n) from the counts."""
        return SortedAttribute.from_counts(self.counts, order, self.spec)


class SortedAttribute:
    """One attribute of one fragment, sorted, with prefix sums for any k.

    Parameters
    ----------
    values : array of shape (n,): numeric values, or categories (then ``order`` is required).
    ids : array of shape (n,): record ids (tie-break of equal values; equal values are
        interchangeable for every quantity computed here).
    spec : AttributeSpec
    order : sequence of the declared categories in rank order (rank 1 first), categorical only.
    """

    # categorical attributes only (set by :meth:`from_counts`)
    label_of_rank: np.ndarray
    block_start: np.ndarray
    block_end: np.ndarray

    def __init__(self, values: np.ndarray, ids: np.ndarray, spec: AttributeSpec,
                 order: Optional[Sequence[str]] = None) -> None:
        if spec.categorical:
            if order is None:
                raise InvalidParameterError(f"categorical attribute {spec.name!r} needs a category order")
            other = SortedAttribute.from_counts(CategoryCounts(values, spec).counts, order, spec)
            self.__dict__.update(other.__dict__)
            return
        order_idx = np.lexsort((np.asarray(ids), np.asarray(values, float)))
        self._set(np.asarray(values, float)[order_idx], spec)

    @classmethod
    def from_counts(cls, counts: np.ndarray, order: Sequence[str], spec: AttributeSpec) -> SortedAttribute:
        """A categorical attribute from its counts (declared order) and a rank order.

        Raises
        ------
        InvalidParameterError
            If ``order`` is not a permutation of the declared categories.
        """
        cats = list(spec.categories)
        if sorted(order) != sorted(cats) or len(order) != len(cats):
            raise InvalidParameterError(f"order of {spec.name!r} must be a permutation of its categories, not {order!r}")
        index = {c: i for i, c in enumerate(cats)}
        self = cls.__new__(cls)
        #: declared index of the category at rank r, position r - 1
        self.label_of_rank = np.array([index[c] for c in order], dtype=np.int64)
        ranked_counts = np.asarray(counts, dtype=np.int64)[self.label_of_rank]
        ends = np.cumsum(ranked_counts)
        self.block_start = np.concatenate([[0, 0], ends[:-1]])  # index r: first position of rank r
        self.block_end = np.concatenate([[0], ends])
        self._set(np.repeat(np.arange(1, len(cats) + 1, dtype=float), ranked_counts), spec)
        return self

    def _set(self, x: np.ndarray, spec: AttributeSpec) -> None:
        self.x = x
        self.n = len(x)
        self.spec = spec
        self.s1 = np.concatenate([[0.0], np.cumsum(x)])
        self.s2 = np.concatenate([[0.0], np.cumsum(x * x)])

    def clusters(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Start and end (exclusive) positions of the IR clusters for k."""
        check_k(k, self.n)
        c = cluster_count(self.n, k)
        starts = np.arange(c) * k
        ends = np.append(starts[1:], self.n)
        return starts, ends

    def centroids(self, k: int) -> np.ndarray:
        a, b = self.clusters(k)
        return (self.s1[b] - self.s1[a]) / (b - a)

    def sensitivity(self, mechanism: str, k: int) -> float:
        """Δ of the centroid vector for this fragment (docs/specification.md §2), by the registry."""
        mech = get_mechanism(mechanism)
        k_used = mech.k_used(k)
        lo, hi = self.spec.lo, self.spec.hi
        a, b = self.clusters(k_used)
        c = len(a)
        max_second_last = self.x[b[-2] - 1] if c > 1 else lo
        return mech.sensitivity_from_extremes(self.x[0], self.x[a[-1]], max_second_last, self.x[-1], k=k_used,
                                              size_last=int(b[-1] - a[-1]), n_clusters=c, lo=lo, hi=hi)

    def squared_error(self, k: int, z: np.ndarray) -> float:
        """Σ over records of d² when every record gets its cluster's released value z (shape (c,))."""
        a, b = self.clusters(k)
        size = b - a
        if self.spec.categorical:
            r = z.astype(int)
            same = np.maximum(np.minimum(b, self.block_end[r]) - np.maximum(a, self.block_start[r]), 0)
            return float(np.sum(size - same))
        total = self.s1[b] - self.s1[a]
        mean = total / size
        ss = np.maximum(self.s2[b] - self.s2[a] - total * mean, 0.0)
        return float(np.sum(ss + size * (mean - z) ** 2))

    def released_counts(self, k: int, z: np.ndarray) -> np.ndarray:
        """Released label counts, shape (|dom|,) in declared order: Σ over clusters of size at label(z)."""
        a, b = self.clusters(k)
        labels = self.label_of_rank[z.astype(int) - 1]
        return np.bincount(labels, weights=(b - a).astype(float), minlength=len(self.label_of_rank))


def protect_and_score(attr: SortedAttribute, mechanism: str, k: int, epsilon_centroids: Fraction | float,
                      noise: NoiseSource, postprocess: Sequence[str] = POSTPROCESS
                      ) -> dict[str, tuple[float, Optional[np.ndarray]]]:
    """Protect one sorted attribute once (IR + one Laplace draw per cluster) and finish it per ``postprocess``.

    ``epsilon_centroids`` is the budget of the centroid draws (ε_attr, or (1 − share)·ε_attr for a
    ``dp-frequency`` categorical attribute). The noisy centroid vector is drawn once and finished with
    :func:`fragrelease.idpir.postprocess.finish_centroids` for every value of ``postprocess`` (cluster
    sizes as weights), so the values share their noise. Returns {postprocess: (Σ d², released label
    counts of shape (|dom|,) for a categorical attribute, else None)}.

    Raises
    ------
    InvalidParameterError
        A ``postprocess`` value outside :data:`fragrelease.idpir.postprocess.POSTPROCESS`.
    """
    for p in postprocess:
        check_postprocess(p)
    k_used = mechanism_k(mechanism, k)
    centroids = attr.centroids(k_used)
    a, b = attr.clusters(k_used)
    sizes = b - a
    c = len(centroids)
    scale = laplace_scale(attr.sensitivity(mechanism, k), epsilon_centroids, c)
    # Read-only broadcast views: the same identifiers as the release's, without allocating c objects.
    names = np.broadcast_to(np.asarray(attr.spec.name, dtype=object), (c,))
    noisy = noise.perturb(centroids, np.full(c, scale), names, np.arange(c))
    out = {}
    for p in postprocess:
        z = finish_centroids(noisy, sizes, attr.spec.lo, attr.spec.hi, attr.spec.categorical,
                             ReleaseOptions.of(postprocess=p))
        released = attr.released_counts(k_used, z) if attr.spec.categorical else None
        out[p] = (attr.squared_error(k_used, z), released)
    return out


def attribute_scales(original: dict[str, np.ndarray], specs: Sequence[AttributeSpec]) -> dict[str, float]:
    """s_a of every attribute over the whole original dataset (categorical: 0.5)."""
    return {s.name: CATEGORICAL_SCALE if s.categorical else float(np.std(np.asarray(original[s.name], float), ddof=1))
            for s in specs}


@dataclass(frozen=True)
class Scenario:
    """One evaluated setting: scenario name, owners' sizes (horizontal) or attribute groups (vertical)."""

    name: str
    owner_rows: tuple[int, ...] = ()
    owner_attributes: tuple[tuple[str, ...], ...] = ()
    split: str = "none"


def _fragment(data, ids, specs, index) -> dict:
    """Order-independent parts of one fragment: sorted numeric attributes and category counts."""
    out: dict[str, CategoryCounts | SortedAttribute] = {}
    for s in specs:
        v = data[s.name] if index is None else data[s.name][index]
        if s.categorical:
            out[s.name] = CategoryCounts(v, s)
        else:
            out[s.name] = SortedAttribute(v, ids if index is None else ids[index], s)
    return out


def category_order_of(counts: CategoryCounts, setting: OrderSetting, epsilon_attribute: Fraction,
                      noise: NoiseSource) -> tuple[tuple[str, ...], Fraction]:
    """The rank order an owner uses for one categorical attribute, and the centroids' budget.

    ``dp-frequency`` draws a fresh noisy histogram through ``noise`` (budget share·ε_attr) and leaves
    (1 − share)·ε_attr for the centroids; ``declared`` and ``data-frequency`` leave ε_attr.
    """
    spec = counts.spec
    if setting.order == PAPER_ORDER:
        return data_frequency_order(counts.as_dict(), spec.categories), Fraction(epsilon_attribute)
    if setting.order == "declared":
        return declared_order(spec.categories), Fraction(epsilon_attribute)
    budget = split_attribute_budget(spec.name, epsilon_attribute, categorical=True, category_order=setting.order,
                                    share=setting.share_fraction)
    order = dp_frequency_order(counts.as_dict(), spec.categories, budget.order, noise, attribute=spec.name)
    return order, budget.centroids


def run_once(
    data: dict[str, np.ndarray],
    ids: np.ndarray,
    specs: Sequence[AttributeSpec],
    scenario: Scenario,
    *,
    mechanisms: Sequence[str],
    epsilons: Sequence[str],
    ks: Sequence[int],
    noise: NoiseSource,
    category_order: OrderSetting,
    postprocess: Sequence[str] = POSTPROCESS,
    convention: str = "authors",
    rng: Optional[np.random.Generator] = None,
    sorted_cache: Optional[dict] = None,
) -> list[dict]:
    """One run of every (mechanism, ε, k) cell; returns one dict per cell.

    ``data`` maps attribute -> values (numeric, or categories as strings), shape (n,); ``ids`` shape (n,).
    Horizontal runs deal records to owners with ``rng`` (a fresh permutation per run).
    ``sorted_cache`` keeps the sorted whole-dataset attributes and category counts between runs
    (centralized, vertical). Each fragment's category order is drawn once per ε (``dp-frequency``)
    and shared by the mechanisms and k of that ε.

    ``postprocess``: the finishing steps scored per cell, each on the same noise draw (one row each).

    Each row: ``mechanism``, ``epsilon``, ``k``, ``postprocess``, ``mean_sse``, ``category_tvd`` (mean
    TVD over the categorical attributes, NaN if none), ``category_order`` and ``order_share``.

    Raises
    ------
    InvalidParameterError
        ``category_order`` not an :class:`OrderSetting`, or ``postprocess`` empty, repeated or unknown.
    """
    if not isinstance(category_order, OrderSetting):
        raise InvalidParameterError(f"category_order must be an OrderSetting, not {category_order!r}")
    postprocess = tuple(postprocess)
    if not postprocess or len(set(postprocess)) != len(postprocess):
        raise InvalidParameterError(f"postprocess must be distinct and non-empty, not {list(postprocess)}")
    for p in postprocess:
        check_postprocess(p)
    n = len(ids)
    scales = attribute_scales(data, specs)
    names = [s.name for s in specs]
    if scenario.name == "horizontal":
        if sum(scenario.owner_rows) != n:
            raise InvalidParameterError(f"owners' rows add up to {sum(scenario.owner_rows)}, not n = {n}")
        perm = (rng if rng is not None else evaluation_generator()).permutation(n)
        bounds = np.cumsum((0,) + tuple(scenario.owner_rows))
        fragments = [_fragment(data, ids, specs, perm[bounds[j]:bounds[j + 1]]) for j in range(len(scenario.owner_rows))]
    else:
        if sorted_cache is not None and "whole" in sorted_cache:
            whole = sorted_cache["whole"]
        else:
            whole = _fragment(data, ids, specs, None)
            if sorted_cache is not None:
                sorted_cache["whole"] = whole
        fragments = [whole]
    categorical = [s.name for s in specs if s.categorical]
    original_counts = {a: sum(f[a].counts for f in fragments) for a in categorical}
    fixed_orders: dict = sorted_cache.setdefault("ranked", {}) if sorted_cache is not None else {}
    results = []
    for eps_text in epsilons:
        eps = Fraction(eps_text)
        if scenario.name == "vertical":
            groups = scenario.owner_attributes
            eps_owner = split_epsilon_vertical(eps, {str(i): len(g) for i, g in enumerate(groups)}, scenario.split)
            eps_attr = {a: eps_owner[str(i)] / len(g) for i, g in enumerate(groups) for a in g}
        else:
            eps_attr = {a: eps / len(names) for a in names}
        # Each owner ranks its own fragment; dp-frequency orders are redrawn for this run and ε.
        prepared = []
        for frag in fragments:
            attrs = []
            for s in specs:
                if not s.categorical:
                    attrs.append((frag[s.name], eps_attr[s.name]))
                    continue
                order, eps_c = category_order_of(frag[s.name], category_order, eps_attr[s.name], noise)
                key = (s.name, order, len(fragments) == 1)
                if category_order.order != "dp-frequency" and len(fragments) == 1 and key in fixed_orders:
                    ranked = fixed_orders[key]
                else:
                    ranked = frag[s.name].ranked(order)
                    if category_order.order != "dp-frequency" and len(fragments) == 1:
                        fixed_orders[key] = ranked
                attrs.append((ranked, eps_c))
            prepared.append(attrs)
        for mechanism in mechanisms:
            for k in ks:
                errors = {p: {a: 0.0 for a in names} for p in postprocess}
                released: dict[str, dict[str, np.ndarray | float]] = {p: {a: 0.0 for a in categorical}
                                                                       for p in postprocess}
                for attrs in prepared:
                    for attr, eps_c in attrs:
                        scored = protect_and_score(attr, mechanism, k, eps_c, noise, postprocess)
                        for p, (sse, counts) in scored.items():
                            errors[p][attr.spec.name] += sse
                            if counts is not None:
                                released[p][attr.spec.name] = released[p][attr.spec.name] + counts
                for p in postprocess:
                    results.append({"mechanism": mechanism, "epsilon": eps_text, "k": int(k), "postprocess": p,
                                    "mean_sse": combine_mean_sse(errors[p], scales, n, convention),
                                    "category_tvd": category_tvd(original_counts, released[p]),
                                    "category_order": category_order.order, "order_share": category_order.share})
    return results


#: Columns that identify one paired (isotonic, none) measurement of a run.
PAIR_KEYS = ("dataset", "scenario", "split", "mechanism", "category_order", "order_share", "epsilon", "k")


def postprocess_comparison(per_run):
    """Paired comparison of ``isotonic`` against ``none`` per cell, from the per-run rows.

    ``per_run``: a pandas DataFrame with the columns of :data:`PAIR_KEYS`, ``run``, ``postprocess`` and
    ``mean_sse`` (the evaluation's ``runs.csv.gz``). The two values of a run share their noise draw,
    so the per-run difference d_r = MeanSSE_isotonic − MeanSSE_none is a paired measurement.

    Returns one row per cell with ``mean_sse_none``, ``mean_sse_isotonic``, ``ratio`` (mean isotonic /
    mean none), ``diff`` (mean of d_r), ``se_diff`` (std(d_r, ddof=1)/√runs, NaN for one run),
    ``worse_by_2se`` (diff > 2·se_diff) and ``runs``. Cells without both values are dropped.
    """
    import pandas as pd

    keys = [c for c in PAIR_KEYS if c in per_run.columns]
    wide = per_run.pivot_table(index=keys + ["run"], columns="postprocess", values="mean_sse", aggfunc="first")
    if not {"isotonic", "none"} <= set(wide.columns):
        return pd.DataFrame(columns=keys + ["mean_sse_none", "mean_sse_isotonic", "ratio", "diff", "se_diff",
                                            "worse_by_2se", "runs"])
    wide = wide.dropna(subset=["isotonic", "none"])
    wide["d"] = wide["isotonic"] - wide["none"]
    g = wide.groupby(level=keys)
    out = pd.DataFrame({"mean_sse_none": g["none"].mean(), "mean_sse_isotonic": g["isotonic"].mean(),
                        "diff": g["d"].mean(), "se_diff": g["d"].std(ddof=1) / np.sqrt(g["d"].count()),
                        "runs": g["d"].count()}).reset_index()
    out["ratio"] = out["mean_sse_isotonic"] / out["mean_sse_none"]
    out["worse_by_2se"] = out["diff"] > 2 * out["se_diff"]
    return out[keys + ["mean_sse_none", "mean_sse_isotonic", "ratio", "diff", "se_diff", "worse_by_2se", "runs"]]
