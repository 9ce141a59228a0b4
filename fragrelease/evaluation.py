"""Information-loss evaluation of paper 000 §5, Spark-free (SPEC.md §3-4).

One *run* protects every fragment of a dataset once per (mechanism, ε, k) cell and measures MeanSSE
against the original. Everything that depends only on the data is computed once per fragment and
attribute and reused for every k, ε and mechanism: the sorted values and their prefix sums
(:class:`SortedAttribute`). From them the IR clusters of any k, their centroids and the iDP-IR
sensitivity cost O(number of clusters), and so does the squared error of a protected attribute:

    Σ_{i ∈ cluster} (x_i - z)² = SS_cluster + size · (mean_cluster - z)²     (numeric)
    Σ_{i ∈ cluster} [cat_i ≠ z] = size - count_cluster(z)                     (categorical ranks)

so a run never materializes the protected table. The mechanism steps are the release's own
(:mod:`fragrelease.sensitivity`, :func:`fragrelease.mechanisms.laplace_scale`,
:func:`fragrelease.mechanisms.clamp_and_round`, :mod:`fragrelease.microaggregation`), and a test
checks that the result equals :func:`fragrelease.metrics.mean_sse` of :func:`fragrelease.mechanisms.
protect_attribute` given the same noise.

Scenarios: ``centralized`` (one fragment, ε/l per attribute), ``horizontal`` (records dealt to owners
at random on every run; each owner clusters its own records with the full ε), ``vertical`` (every
attribute clustered over all records, owner j's attributes with ε_j/l_j, ``equal`` or
``by-attributes`` split).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Optional, Sequence

import numpy as np

from .budget import split_epsilon_vertical
from .errors import InvalidParameterError
from .mechanisms import clamp_and_round, frequency_ranks, laplace_scale
from .metrics import CATEGORICAL_SCALE, CONVENTIONS
from .microaggregation import check_k, cluster_count
from .rng import NoiseSource, evaluation_generator
from .sensitivity import dp_ir_sensitivity, idp_ir_sensitivity_from_extremes, mechanism_k

SCENARIOS = ("centralized", "horizontal", "vertical")
#: Grid of SPEC.md §3.
EPSILONS = ("0.01", "0.1", "0.5", "1")
K_GRID = {"adult": (1, 50, 150, 200, 250, 400, 600, 1000, 2000), "wine": (1, 50, 100, 150, 200, 250, 300)}


@dataclass(frozen=True)
class AttributeSpec:
    """Public description of one protected attribute: bounds [lo, hi] (ranks: [1, |dom|])."""

    name: str
    lo: float
    hi: float
    categorical: bool
    categories: tuple[str, ...] = ()

    @classmethod
    def from_attribute(cls, attr) -> "AttributeSpec":
        """From a :class:`fragrelease.schemas.base.Attribute`."""
        lo, hi = attr.bounds()
        return cls(attr.name, lo, hi, attr.categorical, tuple(attr.categories or ()))


class SortedAttribute:
    """One attribute of one fragment, sorted (ties by record id), with prefix sums for any k.

    Parameters
    ----------
    values : array of shape (n,): numeric values, or categories (ranked here by their frequency in
        this fragment, as the owner's release does, SPEC.md §1).
    ids : array of shape (n,): record ids (tie-break).
    spec : AttributeSpec
    """

    def __init__(self, values: np.ndarray, ids: np.ndarray, spec: AttributeSpec) -> None:
        if spec.categorical:
            ranks = frequency_ranks(np.asarray(values, dtype=object), list(spec.categories))
            values = np.vectorize(ranks.__getitem__, otypes=[float])(np.asarray(values, dtype=object))
        order = np.lexsort((np.asarray(ids), np.asarray(values, float)))
        self.x = np.asarray(values, float)[order]
        self.n = len(self.x)
        self.spec = spec
        self.s1 = np.concatenate([[0.0], np.cumsum(self.x)])
        self.s2 = np.concatenate([[0.0], np.cumsum(self.x * self.x)])
        if spec.categorical:
            dom = int(spec.hi)
            onehot = np.zeros((dom + 1, self.n + 1), dtype=np.int32)
            onehot[self.x.astype(int), np.arange(1, self.n + 1)] = 1
            self.rank_counts = np.cumsum(onehot, axis=1)  # rank_counts[r, t] = #rank r among the first t

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
        """Δ of the centroid vector for this fragment (SPEC.md §2)."""
        k_used = mechanism_k(mechanism, k)
        lo, hi = self.spec.lo, self.spec.hi
        if mechanism == "dp-ir":
            return dp_ir_sensitivity(lo, hi, k_used)
        a, b = self.clusters(k_used)
        c = len(a)
        max_second_last = self.x[b[-2] - 1] if c > 1 else lo
        return idp_ir_sensitivity_from_extremes(self.x[0], self.x[a[-1]], max_second_last, self.x[-1], k_used,
                                                int(b[-1] - a[-1]), c, lo, hi)

    def squared_error(self, k: int, z: np.ndarray) -> float:
        """Σ over records of d² when every record gets its cluster's released value z (shape (c,))."""
        a, b = self.clusters(k)
        size = b - a
        if self.spec.categorical:
            same = self.rank_counts[z.astype(int), b] - self.rank_counts[z.astype(int), a]
            return float(np.sum(size - same))
        total = self.s1[b] - self.s1[a]
        mean = total / size
        ss = np.maximum(self.s2[b] - self.s2[a] - total * mean, 0.0)
        return float(np.sum(ss + size * (mean - z) ** 2))


def protect_and_score(attr: SortedAttribute, mechanism: str, k: int, epsilon_attribute: Fraction | float,
                      noise: NoiseSource) -> float:
    """Protect one sorted attribute once (IR + one Laplace draw per cluster + clamp/round); return Σ d²."""
    k_used = mechanism_k(mechanism, k)
    centroids = attr.centroids(k_used)
    scale = laplace_scale(attr.sensitivity(mechanism, k), epsilon_attribute)
    c = len(centroids)
    noisy = noise.perturb(centroids, np.full(c, scale), np.full(c, attr.spec.name, dtype=object), np.arange(c))
    z = clamp_and_round(noisy, attr.spec.lo, attr.spec.hi, attr.spec.categorical)
    return attr.squared_error(k_used, z)


def combine_mean_sse(errors: dict[str, float], scales: dict[str, float], n: int, convention: str = "authors") -> float:
    """MeanSSE from per-attribute Σ d² (SPEC.md §4): authors Σ_a E_a/s_a² / (n·l); paper Σ_a E_a/v_a² / (n·l²).

    ``scales`` are s_a (sample std, or 0.5 for categorical); the paper's convention uses v_a = s_a².
    """
    if convention not in CONVENTIONS:
        raise InvalidParameterError(f"MeanSSE convention must be one of {CONVENTIONS}, not {convention!r}")
    l = len(errors)
    if convention == "authors":
        return float(sum(errors[a] / scales[a] ** 2 for a in errors) / (n * l))
    return float(sum(errors[a] / scales[a] ** 4 for a in errors) / (n * l * l))


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
    convention: str = "authors",
    rng: Optional[np.random.Generator] = None,
    sorted_cache: Optional[dict] = None,
) -> list[dict]:
    """One run of every (mechanism, ε, k) cell; returns one dict per cell with its MeanSSE.

    ``data`` maps attribute -> values (numeric, or categories as strings), shape (n,); ``ids`` shape (n,).
    Horizontal runs deal records to owners with ``rng`` (a fresh permutation per run).
    ``sorted_cache`` keeps the sorted whole-dataset attributes between runs (centralized, vertical).
    """
    n = len(ids)
    scales = attribute_scales(data, specs)
    names = [s.name for s in specs]
    if scenario.name == "horizontal":
        if sum(scenario.owner_rows) != n:
            raise InvalidParameterError(f"owners' rows add up to {sum(scenario.owner_rows)}, not n = {n}")
        perm = (rng if rng is not None else evaluation_generator()).permutation(n)
        bounds = np.cumsum((0,) + tuple(scenario.owner_rows))
        fragments = [perm[bounds[j]:bounds[j + 1]] for j in range(len(scenario.owner_rows))]
        sorted_frags = [[SortedAttribute(data[s.name][f], ids[f], s) for s in specs] for f in fragments]
    else:
        key = "whole"
        if sorted_cache is not None and key in sorted_cache:
            whole = sorted_cache[key]
        else:
            whole = [SortedAttribute(data[s.name], ids, s) for s in specs]
            if sorted_cache is not None:
                sorted_cache[key] = whole
        sorted_frags = [whole]
    results = []
    for eps_text in epsilons:
        eps = Fraction(eps_text)
        if scenario.name == "vertical":
            groups = scenario.owner_attributes
            eps_owner = split_epsilon_vertical(eps, {str(i): len(g) for i, g in enumerate(groups)}, scenario.split)
            eps_attr = {a: eps_owner[str(i)] / len(g) for i, g in enumerate(groups) for a in g}
        else:
            eps_attr = {a: eps / len(names) for a in names}
        for mechanism in mechanisms:
            for k in ks:
                errors = {a: 0.0 for a in names}
                for frag in sorted_frags:
                    for attr in frag:
                        errors[attr.spec.name] += protect_and_score(attr, mechanism, k, eps_attr[attr.spec.name], noise)
                results.append({"mechanism": mechanism, "epsilon": eps_text, "k": int(k),
                                "mean_sse": combine_mean_sse(errors, scales, n, convention)})
    return results
