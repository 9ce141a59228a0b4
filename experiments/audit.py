"""Empirical privacy audits of what a release publishes, on neighbouring datasets (Spark-free).

Method (a standard black-box DP audit, e.g. Jagielski et al., "Auditing Differentially Private
Machine Learning: How Private is Private SGD?", NeurIPS 2020; Nasr et al., "Adversary Instantiation:
Lower Bounds for Differentially Private Machine Learning", 2021): run the mechanism many times on a
dataset D and on a neighbour D' (one record substituted, docs/specification.md §2), reduce each
output to a scalar statistic T, and for every threshold t bound ε from below by the four ratios
``P[T(M(D)) ≥ t] / P[T(M(D')) ≥ t]``, ``P[T(M(D')) < t] / P[T(M(D)) < t]`` and their mirrors, each
with Clopper–Pearson bounds (confidence 1 − α overall, Bonferroni over every bound used). If the
mechanism is ε-DP (ε-iDP for D), the reported lower bound exceeds ε with probability at most α.
The point estimate is the same ratio without confidence bounds, over tails holding at least
:data:`MIN_TAIL` runs on both sides.

Four audits, one per thing a release publishes (the last two in :mod:`fragrelease.experiments.audit_tables`):

:func:`audit`
    One numeric attribute's centroid vector (IR centroids + one Laplace draw per cluster +
    clamping). D' is the **worst-case neighbour** found by brute force (every substitution of one
    record by lo or hi). T is the likelihood-ratio statistic
    ``Σ_j (|z_j − c'_j| − |z_j − c_j|) / b``. Its thresholds cover T's whole range
    ``[−‖c − c'‖₁ / b, ‖c − c'‖₁ / b]`` (triangle inequality), not only ``[−ε, ε]``: a mechanism
    calibrated with too small a Δ has ``‖c − c'‖₁ / b > ε`` and its loss is measured, not capped.
:func:`audit_category_column`
    One categorical attribute's **released column as a multiset of labels**, including the
    category order that maps noisy ranks back to labels (docs/specification.md §1): ``declared``,
    ``dp-frequency`` (a share of the budget buys the order) or any order function (the paper's
    exact-frequency order :func:`fragrelease.experiments.paper_order.data_frequency_order`, which leaks).
    T is a function of the label histogram, by default ``count(A) − count(B)``.
:func:`fragrelease.experiments.audit_tables.audit_table`
    A table of several attributes: ``linked`` (every row carries its record's cluster value for
    every attribute, the paper's release) or ``unlinked`` (each column permuted independently).
    T is the number of distinct row tuples. The claimed ε is the sum over attributes.
:func:`fragrelease.experiments.audit_tables.audit_aggregator_view`
    One attribute's column **as the aggregator reads it** in an owner's protected fragment: rows
    ``(pseudonym, value)`` in a CSPRNG order, pseudonyms keyed by the owners' key (which the
    aggregator lacks) with a new plan id per release (``view="pseudonyms"``), or, as fragments
    were before, ``(record id, value)`` rows in id order (``view="ids"``). T is the number of
    adjacent rows with equal values once the rows are sorted by their label (id or pseudonym):
    with ids it sees which identified records share a cluster. The claimed ε is ε_attr.

For statistics other than the likelihood ratio, thresholds are chosen on a separate calibration
sample (pooled empirical quantiles of both sides), so they are independent of the runs that give
the bound and reach into the tails, wherever the leak is.

The audits check the calibration and what the release reveals (clusters, sensitivity, scale,
category order, row linkage); the sampler's distribution is tested separately
(Kolmogorov–Smirnov), so they may run with the fast sampler. The Spark path is audited by
``tests/experiments/test_audit_spark.py`` with the secure sampler through these same statistics.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Mapping, Sequence, Union

import numpy as np

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.category_order import (
    CATEGORY_ORDERS,
    DEFAULT_ORDER_SHARE,
    declared_order,
    dp_frequency_order,
    split_attribute_budget,
)
from fragrelease.idpir.mechanisms import get_mechanism, laplace_scale, mechanism_k, sensitivity
from fragrelease.idpir.microaggregation import check_k, cluster_bounds, ir_centroids, ir_clusters
from fragrelease.idpir.postprocess import clamp_and_round
from fragrelease.rng.laplace import NoiseSource

#: Runs a tail must hold before its ratio counts in the point estimate.
MIN_TAIL = 100
#: Fewest runs per side an audit accepts.
MIN_RUNS = 1000
#: Quantile levels of the pooled calibration sample used as thresholds (tail-heavy on both ends).
QUANTILE_LEVELS = tuple(sorted({*np.round(np.linspace(0.02, 0.98, 49), 4),
                                *[10.0 ** -e for e in (1.5, 2, 2.5, 3, 3.5, 4)],
                                *[1 - 10.0 ** -e for e in (1.5, 2, 2.5, 3, 3.5, 4)]}))

#: An order function for the categorical audit: category counts → categories in rank order.
OrderFunction = Callable[[Mapping[str, int]], Sequence[str]]


@dataclass(frozen=True)
class AuditResult:
    """A numeric-attribute audit: Δ used, the worst neighbour's L1 shift, and the ε bounds."""

    mechanism: str
    epsilon: float
    runs: int
    alpha: float
    sensitivity: float
    neighbour_shift: float
    epsilon_lower_bound: float
    epsilon_point_estimate: float


@dataclass(frozen=True)
class StatisticAudit:
    """An audit by a scalar statistic: the claimed ε, runs per side, thresholds used, ε bounds."""

    statistic: str
    epsilon: float
    runs: int
    alpha: float
    thresholds: int
    epsilon_lower_bound: float
    epsilon_point_estimate: float


def _check_runs(runs: int) -> None:
    if runs < MIN_RUNS:
        raise InvalidParameterError(f"an audit needs at least {MIN_RUNS} runs, not {runs}")


def _clopper_pearson(successes: np.ndarray, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    from scipy.stats import beta

    lower = np.where(successes > 0, beta.ppf(alpha, successes, n - successes + 1), 0.0)
    upper = np.where(successes < n, beta.ppf(1 - alpha, successes + 1, n - successes), 1.0)
    return lower, upper


def epsilon_bounds(t_d: np.ndarray, t_n: np.ndarray, thresholds: np.ndarray, alpha: float) -> tuple[float, float]:
    """Lower bound and point estimate of ε from samples of a statistic on D and on D'.

    Parameters
    ----------
    t_d, t_n : arrays of shape (runs_d,), (runs_n,)
        The statistic on independent runs of the mechanism on D and on D'.
    thresholds : array of shape (m,)
        Chosen independently of ``t_d`` and ``t_n``.
    alpha : float in (0, 1)
        Probability that the lower bound exceeds the true ε: every threshold's count on each side
        gets a two-sided Clopper–Pearson interval at ``alpha / (4 m)`` per tail (Bonferroni over
        the 4 m tails), which covers all four ratios per threshold.

    Returns
    -------
    (lower bound, point estimate); 0.0 when no ratio is finite.
    """
    t_d, t_n = np.asarray(t_d, float), np.asarray(t_n, float)
    grid = np.unique(np.asarray(thresholds, float))
    if not 0 < alpha < 1 or grid.size == 0:
        raise InvalidParameterError(f"need 0 < alpha < 1 and thresholds, got alpha={alpha}, {grid.size} thresholds")
    nd, nn = t_d.size, t_n.size
    a = alpha / (4 * grid.size)
    hd = (t_d[None, :] >= grid[:, None]).sum(axis=1)
    hn = (t_n[None, :] >= grid[:, None]).sum(axis=1)
    lo_d, up_d = _clopper_pearson(hd, nd, a)
    lo_n, up_n = _clopper_pearson(hn, nn, a)
    with np.errstate(divide="ignore", invalid="ignore"):
        lower = np.concatenate([np.log(lo_d / up_n), np.log((1 - up_n) / (1 - lo_d)),
                                np.log(lo_n / up_d), np.log((1 - up_d) / (1 - lo_n))])
        pd_, pn_ = hd / nd, hn / nn
        ok_up = (hd >= MIN_TAIL) & (hn >= MIN_TAIL)
        ok_down = (nd - hd >= MIN_TAIL) & (nn - hn >= MIN_TAIL)
        point = np.concatenate([np.abs(np.log(pd_ / pn_))[ok_up], np.abs(np.log((1 - pn_) / (1 - pd_)))[ok_down]])
    lower = lower[np.isfinite(lower)]
    point = point[np.isfinite(point)]
    return (max(0.0, float(lower.max())) if lower.size else 0.0), (float(point.max()) if point.size else 0.0)


def quantile_thresholds(calib_d: np.ndarray, calib_n: np.ndarray) -> np.ndarray:
    """Thresholds from a calibration sample: distinct pooled quantiles at :data:`QUANTILE_LEVELS`.

    Each threshold t is used both ways (``T ≥ t`` and ``T < t``, :func:`epsilon_bounds`), so a
    discrete statistic's values serve as cut points without further care.
    """
    pooled = np.concatenate([np.asarray(calib_d, float), np.asarray(calib_n, float)])
    return np.unique(np.quantile(pooled, QUANTILE_LEVELS, method="higher"))


def audit_statistic(sample_d: Callable[[int], np.ndarray], sample_n: Callable[[int], np.ndarray], *, epsilon: float,
                    runs: int, alpha: float = 1e-6, calibration_runs: int | None = None,
                    name: str = "statistic") -> StatisticAudit:
    """Audit any scalar statistic: ``sample_x(r)`` returns its values on r fresh runs on D or D'.

    Thresholds come from ``calibration_runs`` extra runs per side (default ``max(1000, runs // 10)``),
    the bound from ``runs`` fresh runs per side (:func:`epsilon_bounds`).

    Raises
    ------
    InvalidParameterError
        Fewer than :data:`MIN_RUNS` runs.
    """
    _check_runs(runs)
    cal = calibration_runs if calibration_runs is not None else max(MIN_RUNS, runs // 10)
    grid = quantile_thresholds(sample_d(cal), sample_n(cal))
    lower, point = epsilon_bounds(sample_d(runs), sample_n(runs), grid, alpha)
    return StatisticAudit(name, float(epsilon), runs, alpha, int(grid.size), lower, point)


# ------------------------------------------------------------------------------------------------
# One numeric attribute: the centroid vector and the likelihood-ratio statistic
# ------------------------------------------------------------------------------------------------

def centroid_vector(x: np.ndarray, k: int) -> np.ndarray:
    """IR centroids of x in rank order (record ids = positions for ties)."""
    return ir_centroids(x, ir_clusters(x, k, np.arange(len(x))))


def worst_neighbour(x: np.ndarray, k: int, lo: float, hi: float) -> tuple[np.ndarray, float]:
    """The substitution of one record by lo or hi that moves the centroid vector most (L1)."""
    c = centroid_vector(x, k)
    best, best_y = -1.0, x
    for i in range(len(x)):
        for v in (lo, hi):
            y = x.copy()
            y[i] = v
            shift = float(np.abs(centroid_vector(y, k) - c).sum())
            if shift > best:
                best, best_y = shift, y
    return best_y, best


def lr_statistic(z: np.ndarray, c: np.ndarray, c2: np.ndarray, b: float) -> np.ndarray:
    """``T(z) = Σ_j (|z_j − c'_j| − |z_j − c_j|) / b`` per run; z of shape (runs, m), result (runs,)."""
    return (np.abs(z - c2).sum(axis=1) - np.abs(z - c).sum(axis=1)) / b


def lr_thresholds(c: np.ndarray, c2: np.ndarray, b: float, count: int) -> np.ndarray:
    """``count`` thresholds evenly over T's whole range ``[−‖c − c'‖₁ / b, ‖c − c'‖₁ / b]``."""
    s = float(np.abs(np.asarray(c) - np.asarray(c2)).sum()) / b
    return np.linspace(-s, s, count)


def audit(
    x: np.ndarray, *, k: int, lo: float, hi: float, epsilon: Fraction | float, mechanism: str, runs: int,
    noise: NoiseSource, alpha: float = 1e-6, thresholds: int = 41, sensitivity_factor: float = 1.0,
) -> AuditResult:
    """Estimate the privacy loss of ``mechanism`` on (D, worst-case D'); see the module docstring.

    ``x`` has shape (n,), values in [lo, hi]. The mechanism is calibrated once, on D (DP-IR:
    (hi − lo)/k; iDP-IR: the local sensitivity of D), times ``sensitivity_factor`` (1 for the
    release's calibration; below 1 models an under-calibrated mechanism, to measure the audit's
    power). ``thresholds`` points cover T's whole range.

    Raises
    ------
    InvalidParameterError
        Fewer than 1,000 runs, values outside [lo, hi], or ``sensitivity_factor`` ≤ 0.
    """
    x = np.asarray(x, dtype=float)
    _check_runs(runs)
    if np.any(x < lo) or np.any(x > hi):
        raise InvalidParameterError(f"values must lie in [{lo}, {hi}]")
    if not sensitivity_factor > 0:
        raise InvalidParameterError(f"sensitivity_factor must be > 0, not {sensitivity_factor}")
    k_used = mechanism_k(mechanism, k)
    y, shift = worst_neighbour(x, k_used, lo, hi)
    delta = sensitivity(mechanism, x, k, lo, hi) * sensitivity_factor
    c, c2 = centroid_vector(x, k_used), centroid_vector(y, k_used)
    b = laplace_scale(delta, epsilon, len(c))
    m = len(c)

    def sample(center):
        vals = np.tile(center, runs)
        z = noise.perturb(vals, np.full(vals.shape, b), np.zeros(vals.shape), np.tile(np.arange(m), runs))
        return lr_statistic(clamp_and_round(z, lo, hi, False).reshape(runs, m), c, c2, b)

    lower, point = epsilon_bounds(sample(c), sample(c2), lr_thresholds(c, c2, b, thresholds), alpha)
    return AuditResult(mechanism, float(epsilon), runs, alpha, delta, shift, lower, point)


# ------------------------------------------------------------------------------------------------
# One categorical attribute: the released column as a multiset of labels
# ------------------------------------------------------------------------------------------------

def centroids_from_rank_counts(rank_counts: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """IR centroids of a categorical attribute from its counts in rank order, vectorized over runs.

    ``rank_counts`` has shape (runs, m): row i holds the counts of the categories at ranks 1..m.
    The sorted rank values are rank r repeated ``rank_counts[:, r-1]`` times, so each cluster's sum
    is a difference of the prefix-sum function of that step sequence. Returns the centroids
    (runs, c) and the cluster sizes (c,); equal to ``ir_centroids(ir_clusters(values, k))``
    (checked in tests).
    """
    rc = np.asarray(rank_counts, dtype=np.int64)
    runs, m = rc.shape
    n = int(rc[0].sum())
    if np.any(rc.sum(axis=1) != n):
        raise InvalidParameterError("every run must have the same record count")
    check_k(k, n)
    edges = np.array([a for a, _ in cluster_bounds(n, k)] + [n], dtype=np.int64)  # (c+1,)
    ranks = np.arange(1, m + 1, dtype=np.int64)
    cum = np.cumsum(rc, axis=1)  # (runs, m): positions covered by ranks 1..r
    weighted = np.cumsum(rc * ranks, axis=1)  # Σ_{s ≤ r} s · count_s
    # rank index holding position p (0-based): first r with cum_r > p; one searchsorted over all runs
    off = np.arange(runs, dtype=np.int64)[:, None] * (n + 1)
    flat = np.searchsorted((cum + off).ravel(), (edges[None, :] + off).ravel(), side="right")
    idx = np.minimum(flat.reshape(runs, -1) - np.arange(runs)[:, None] * m, m - 1)  # (runs, c+1)
    below_cum = np.where(idx > 0, np.take_along_axis(cum, np.maximum(idx - 1, 0), axis=1), 0)
    below_w = np.where(idx > 0, np.take_along_axis(weighted, np.maximum(idx - 1, 0), axis=1), 0)
    prefix = below_w + (idx + 1) * (edges[None, :] - below_cum)  # S(p) = Σ of the first p sorted values
    sizes = np.diff(edges)
    return np.diff(prefix, axis=1) / sizes, sizes


def category_label_histograms(
    counts: Mapping[str, int], categories: Sequence[str], *, k: int, epsilon_attribute: Fraction | float,
    mechanism: str, category_order: Union[str, OrderFunction], runs: int, noise: NoiseSource,
    share: Fraction = DEFAULT_ORDER_SHARE, chunk: int = 2000,
) -> np.ndarray:
    """Label histograms of ``runs`` independent releases of one categorical column, shape (runs, |dom|).

    Each run: the category order (``declared``; ``dp-frequency`` with ``share · ε_attr`` drawn
    afresh through :func:`fragrelease.idpir.category_order.dp_frequency_order`; or an order function of
    the exact counts, which gets the whole budget), ranks in that order, IR clusters of size k,
    one Laplace draw per cluster at scale ≈ Δ / ε_centroids (the registry's calibrated scale; DP-IR: (|dom| − 1)/k; iDP-IR: the local
    sensitivity of the ranks), clamping to [1, |dom|], rounding, and the rank → label map through
    the **same** order (docs/specification.md §1). Column j counts the records labelled
    ``categories[j]``.

    Raises
    ------
    InvalidParameterError
        An unknown order name or mechanism, an undeclared category, or too few runs.
    """
    cats = list(categories)
    m = len(cats)
    unknown = sorted(set(counts) - set(cats))
    if unknown:
        raise InvalidParameterError(f"value {unknown[0]!r} is not a declared category")
    if mechanism not in ("dp-ir", "idp-ir"):
        raise InvalidParameterError(f"the categorical audit supports 'dp-ir' and 'idp-ir', not {mechanism!r}")
    mech = get_mechanism(mechanism)
    if callable(category_order):
        eps_order, eps_centroids = Fraction(0), Fraction(epsilon_attribute)
        order_of = lambda: category_order(counts)  # noqa: E731
    elif category_order in CATEGORY_ORDERS:
        budget = split_attribute_budget("a", Fraction(epsilon_attribute), categorical=True,
                                        category_order=category_order, share=share)
        eps_order, eps_centroids = budget.order, budget.centroids
        if category_order == "declared":
            order_of = lambda: declared_order(cats)  # noqa: E731
        else:
            order_of = lambda: dp_frequency_order(counts, cats, eps_order, noise)  # noqa: E731
    else:
        raise InvalidParameterError(f"category_order must be one of {CATEGORY_ORDERS} or a function, not {category_order!r}")
    index = {c: i for i, c in enumerate(cats)}
    exact = np.array([counts.get(c, 0) for c in cats], dtype=np.int64)
    out = np.empty((runs, m), dtype=np.int64)
    cache: dict[tuple, float] = {}
    for s in range(0, runs, chunk):
        r = min(chunk, runs - s)
        orders = np.array([[index[c] for c in order_of()] for _ in range(r)], dtype=np.int64)  # (r, m)
        distinct, inverse = np.unique(orders, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        cent_u, sizes = centroids_from_rank_counts(exact[distinct], k)
        cent = cent_u[inverse]
        c = cent.shape[1]
        scale_u = np.empty(len(distinct))
        for i, o in enumerate(map(tuple, distinct)):  # the scale from Δ of the ranks in this order (registry)
            if o not in cache:
                delta_o = mech.sensitivity(np.repeat(np.arange(1.0, m + 1), exact[list(o)]), k, 1.0, float(m))
                cache[o] = mech.scale(delta_o, eps_centroids, c)
            scale_u[i] = cache[o]
        scale = np.repeat(scale_u[inverse], c)
        z = noise.perturb(cent.ravel(), scale, np.full(scale.shape, "a", dtype=object), np.tile(np.arange(c), r))
        z = clamp_and_round(z, 1.0, float(m), True).reshape(r, c).astype(np.int64)
        labels = np.take_along_axis(orders, z - 1, axis=1)  # rank → category through the same order
        rows = np.repeat(np.arange(r), c)
        out[s:s + r] = np.bincount(rows * m + labels.ravel(), weights=np.tile(sizes, r), minlength=r * m).reshape(r, m)
    return out


def audit_category_column(
    counts_d: Mapping[str, int], counts_n: Mapping[str, int], categories: Sequence[str], *, k: int,
    epsilon_attribute: Fraction | float, mechanism: str, category_order: Union[str, OrderFunction], runs: int,
    noise: NoiseSource, statistic: Union[tuple[str, str], Callable[[np.ndarray], np.ndarray]],
    share: Fraction = DEFAULT_ORDER_SHARE, alpha: float = 1e-6, calibration_runs: int | None = None,
) -> StatisticAudit:
    """Audit one released categorical column on D (``counts_d``) and D' (``counts_n``).

    ``statistic`` is a pair of categories ``(A, B)`` for ``count(A) − count(B)``, or a function of
    the label histograms (runs, |dom|) → (runs,). The claimed ε is ``epsilon_attribute``
    (order and centroids together). See :func:`category_label_histograms` and :func:`audit_statistic`.

    Raises
    ------
    InvalidParameterError
        As :func:`category_label_histograms`; D and D' of different sizes; an unknown category in
        the statistic.
    """
    cats = list(categories)
    if sum(counts_d.values()) != sum(counts_n.values()):
        raise InvalidParameterError(f"D and D' must have the same size, not {sum(counts_d.values())} "
                                    f"and {sum(counts_n.values())}")
    if callable(statistic):
        stat, name = statistic, getattr(statistic, "__name__", "statistic")
    else:
        a, b = statistic
        for x in (a, b):
            if x not in cats:
                raise InvalidParameterError(f"statistic category {x!r} is not declared")
        ia, ib = cats.index(a), cats.index(b)
        stat, name = (lambda h: h[:, ia] - h[:, ib]), f"count({a}) - count({b})"

    def sampler(counts):
        return lambda r: stat(category_label_histograms(
            counts, cats, k=k, epsilon_attribute=epsilon_attribute, mechanism=mechanism,
            category_order=category_order, runs=r, noise=noise, share=share))

    return audit_statistic(sampler(counts_d), sampler(counts_n), epsilon=float(epsilon_attribute), runs=runs,
                           alpha=alpha, calibration_runs=calibration_runs, name=name)
