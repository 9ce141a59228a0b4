"""DiffGen: differentially private generalization for classification (docs/specification.md §7), Spark-free.

Source: Mohammed, Chen, Fung and Yu, "Differentially private data release for data mining" (KDD
2011), and the two-party DistDiffGen of Sameera K. M. et al. (IJIRST 2015) Algorithm 1, after Mohammed et al.
(TDSC 2014), which runs exactly these steps between two parties (:mod:`fragrelease.diffgen.two_party`).

The algorithm, as docs/specification.md §7 fixes it:

1. Every predictor starts at its taxonomy root; a numeric predictor at its whole declared domain.
2. ``ε' = ε / (2 (|numeric predictors| + 2h))``.
3. Every numeric interval in the cut gets a split point: the exponential mechanism (ε') over the
   intervals between consecutive distinct values, each weighted by ``exp(ε'·u/(2Δu)) × length``,
   then a uniform draw inside the chosen interval (:func:`choose_split_point`).
4. ``h`` times: a candidate of ∪Cut is drawn by the exponential mechanism (ε', ``Pr ∝ exp(ε'·u/(2Δu))``),
   specialized, and its new numeric children get split points; the two children hold disjoint
   records, so their two draws cost ε' together (parallel composition).
5. Every leaf × class count gets Lap(2/ε), empty leaves included (:func:`noisy_leaf_counts`).

Scores (``u``): ``max`` = Σ_children max_class |D_child^class| and ``infogain`` = H(D_v) − Σ_children
|D_child|/|D_v|·H(D_child) (class entropy in bits); both with Δu = 1 (docs/specification.md §7; for
InfoGain this is log2 |classes| with the binary class). A candidate's score depends only on the records generalized to
it, i.e. on its attribute's value × class counts (:class:`AttributeCounts`), so the whole
specialization process runs on per-attribute marginals; only the final leaf counts need the joint data.

Budget: ``|numeric|·ε'`` (initial split points) + ``h·ε'`` (selections) + ``ε'`` per numeric
specialization (children's split points) ≤ ``(|numeric| + 2h)·ε' = ε/2``; the leaf counts spend
ε/2 (a record changes one leaf count by 1; Lap(2/ε) gives ε/2). Neighbouring tables differ by adding
or removing one record (the DiffGen paper's definition); under substitution the guarantee is 2ε.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial
from typing import Mapping, Optional, Sequence

import numpy as np

from fragrelease.errors import ConfigError, DomainError, InvalidParameterError
from fragrelease.rng import DiffGenRandomness, gumbel_max

#: Score functions of docs/specification.md §7.
SCORES = ("max", "infogain")
#: Sensitivity Δu of both scores (docs/specification.md §7: Δu = 1; log2 |classes| = 1 for a binary class).
SCORE_SENSITIVITY = 1.0


# ----------------------------------------------------------------------------------------------
# Predictors: taxonomy trees (categorical) and declared domains (numeric)
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpecializationTaxonomy:
    """A categorical predictor's taxonomy tree.

    ``children[node]`` lists a node's children in file order (leaves have none); ``leaves[node]``
    lists the leaf values (the data's categories) under each node. Node labels are unique.
    """

    attribute: str
    root: str
    children: Mapping[str, tuple[str, ...]]
    leaves: Mapping[str, tuple[str, ...]]

    @property
    def kind(self) -> str:
        return "categorical"

    def is_leaf(self, node: str) -> bool:
        return not self.children.get(node)


@dataclass(frozen=True)
class NumericDomain:
    """A numeric predictor with its declared public domain [lo, hi] (not the observed range)."""

    attribute: str
    lo: float
    hi: float
    integer: bool = True

    @property
    def kind(self) -> str:
        return "numeric"


Predictor = SpecializationTaxonomy | NumericDomain


def taxonomy_from_paths(attribute: str, paths: Sequence[Sequence[str]]) -> SpecializationTaxonomy:
    """Build a :class:`SpecializationTaxonomy` from root-ward paths ``[leaf, level 1, ..., root]``.

    This is the shape of ARX hierarchy files (``load_adult_taxonomy``). A label used at two places
    of the tree gets a ``"<label>@<level>"`` suffix so that node labels stay unique.

    Raises
    ------
    ConfigError
        No paths, paths of unequal length, several roots, or a node with two parents.
    """
    if not paths:
        raise ConfigError(f"taxonomy of {attribute!r} has no paths")
    depth = len(paths[0])
    if depth < 2 or any(len(p) != depth for p in paths):
        raise ConfigError(f"taxonomy of {attribute!r}: all paths must have the same length >= 2")
    roots = {p[-1] for p in paths}
    if len(roots) != 1:
        raise ConfigError(f"taxonomy of {attribute!r} must have one root, has {sorted(roots)}")
    # label per (level, path prefix from the root) so equal labels under different parents stay apart
    label_levels: dict[str, set[int]] = {}
    for p in paths:
        for level, label in enumerate(p):
            label_levels.setdefault(label, set()).add(level)
    def name(label: str, level: int) -> str:
        return label if len(label_levels[label]) == 1 else f"{label}@{level}"

    children: dict[str, list[str]] = {}
    parent: dict[str, str] = {}
    leaves: dict[str, list[str]] = {}
    for p in paths:
        names = [name(label, level) for level, label in enumerate(p)]
        leaf = p[0]
        for level in range(depth - 1, 0, -1):
            par, child = names[level], names[level - 1]
            if parent.setdefault(child, par) != par:
                raise ConfigError(f"taxonomy of {attribute!r}: node {child!r} has two parents")
            kids = children.setdefault(par, [])
            if child not in kids:
                kids.append(child)
        for n in names:
            leaves.setdefault(n, [])
            if leaf not in leaves[n]:
                leaves[n].append(leaf)
    root = name(paths[0][-1], depth - 1)
    # a leaf is a node whose label is a data value: its leaves list is itself
    return SpecializationTaxonomy(attribute, root, {k: tuple(v) for k, v in children.items()},
                    {k: tuple(v) for k, v in leaves.items()})


def flat_taxonomy(attribute: str, values: Sequence[str], root: str = "*") -> SpecializationTaxonomy:
    """A one-level taxonomy (root → every value), for attributes without a published hierarchy."""
    return taxonomy_from_paths(attribute, [[v, root] for v in values])


# ----------------------------------------------------------------------------------------------
# Marginal counts and scores
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AttributeCounts:
    """Value × class record counts of one predictor: what Spark's ``groupBy(attr, class).count()`` gives.

    ``values``: shape (m,), the distinct values (numeric: sorted ascending floats; categorical:
    leaf labels); ``counts``: int64 array (m, |classes|) with the number of records per value and class.
    """

    values: np.ndarray
    counts: np.ndarray


def counts_from_pairs(values, classes, counts, class_values: Sequence[str], numeric: bool) -> AttributeCounts:
    """Assemble :class:`AttributeCounts` from aggregated rows ``(value, class, count)``.

    Raises
    ------
    DomainError
        A class value not in ``class_values``.
    """
    values = np.asarray(values)
    classes = np.asarray(classes).astype(str)
    counts = np.asarray(counts, dtype=np.int64)
    cidx = {c: i for i, c in enumerate(class_values)}
    bad = [c for c in np.unique(classes) if c not in cidx]
    if bad:
        raise DomainError(f"class value {bad[0]!r} is not one of {list(class_values)}")
    uniq = np.unique(values.astype(float) if numeric else values.astype(str))
    pos = np.searchsorted(uniq, values.astype(float) if numeric else values.astype(str))
    mat = np.zeros((uniq.size, len(class_values)), dtype=np.int64)
    np.add.at(mat, (pos, np.array([cidx[c] for c in classes], dtype=np.int64)), counts)
    return AttributeCounts(uniq, mat)


def _entropy_rows(mat: np.ndarray) -> np.ndarray:
    """Class entropy in bits of each row of a count matrix (0 for empty rows)."""
    mat = np.asarray(mat, dtype=float)
    tot = mat.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(tot > 0, mat / np.where(tot > 0, tot, 1), 0.0)
        h = -np.where(p > 0, p * np.log2(np.where(p > 0, p, 1)), 0.0).sum(axis=-1)
    return h


def score_children(child_counts: np.ndarray, score: str) -> np.ndarray:
    """Score of specializations given their children's class counts.

    Parameters
    ----------
    child_counts : array (..., k, |classes|)
        Records per child and class; leading axes index alternative specializations.
    score : "max" or "infogain"

    Returns
    -------
    array (...,): Max = Σ_child max_class count (records); InfoGain in bits, in [0, log2 |classes|].
    """
    k = np.asarray(child_counts, dtype=float)
    if score == "max":
        return k.max(axis=-1).sum(axis=-1)
    if score == "infogain":
        parent = k.sum(axis=-2)
        n_v = parent.sum(axis=-1)
        n_c = k.sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(n_v[..., None] > 0, n_c / np.where(n_v > 0, n_v, 1)[..., None], 0.0)
        return _entropy_rows(parent) - (w * _entropy_rows(k)).sum(axis=-1)
    raise InvalidParameterError(f"score must be one of {SCORES}, not {score!r}")


def epsilon_prime(epsilon: Fraction, n_numeric: int, specializations: int) -> Fraction:
    """``ε' = ε / (2 (|numeric predictors| + 2h))`` (docs/specification.md §7), exact.

    Raises
    ------
    InvalidParameterError
        ε ≤ 0, a negative number of numeric predictors, or h < 0.
    """
    epsilon = Fraction(epsilon)
    if epsilon <= 0:
        raise InvalidParameterError(f"epsilon must be > 0, not {epsilon}")
    if n_numeric < 0:
        raise InvalidParameterError(f"number of numeric predictors must be >= 0, not {n_numeric}")
    if specializations < 0:
        raise InvalidParameterError(f"number of specializations h must be >= 0, not {specializations}")
    if n_numeric + 2 * specializations == 0:
        raise InvalidParameterError("DiffGen needs a numeric predictor or h >= 1")
    return epsilon / (2 * (n_numeric + 2 * specializations))


def _interval_rows(counts: AttributeCounts, lo: float, hi: float, top: bool) -> tuple[np.ndarray, np.ndarray]:
    """Values and count rows inside [lo, hi) (or [lo, hi] for the domain's top interval)."""
    v = counts.values.astype(float)
    mask = (v >= lo) & ((v <= hi) if top else (v < hi))
    return v[mask], counts.counts[mask]


def split_intervals(counts: AttributeCounts, lo: float, hi: float, *, top: bool,
                    score: str) -> tuple[np.ndarray, np.ndarray]:
    """The sub-intervals a split point of [lo, hi) can fall into, with the score of each split.

    The points ``lo < distinct values in (lo, hi) < hi`` cut the interval into sub-intervals; a split
    anywhere inside sub-interval j = (pts[j], pts[j+1]) sends the records with value ≤ pts[j] to the
    left child and the rest to the right child.

    Returns
    -------
    (pts, u): pts of shape (m + 1,) ascending, u of shape (m,) the score of splitting in sub-interval j.

    Raises
    ------
    InvalidParameterError
        ``lo >= hi`` (the interval cannot be split) or an unknown score.
    """
    if not lo < hi:
        raise InvalidParameterError(f"numeric interval [{lo}, {hi}) cannot be split")
    v, mat = _interval_rows(counts, lo, hi, top)
    inner = v[(v > lo) & (v < hi)]
    pts = np.concatenate([[lo], inner, [hi]])
    cum = np.vstack([np.zeros((1, mat.shape[1]), np.int64), np.cumsum(mat, axis=0)])
    left = cum[np.searchsorted(v, pts[:-1], side="right")]
    total = cum[-1]
    return pts, score_children(np.stack([left, total - left], axis=1), score)


def split_log_weights(u: np.ndarray, length: np.ndarray, eps_prime: Fraction) -> np.ndarray:
    """Exponential-mechanism log-weights of split sub-intervals: ``ε'·u/(2Δu) + ln(length)``."""
    with np.errstate(divide="ignore"):
        return float(eps_prime) * np.asarray(u, dtype=float) / (2 * SCORE_SENSITIVITY) + np.log(length)


def choose_split_point(counts: AttributeCounts, lo: float, hi: float, *, top: bool, eps_prime: Fraction,
                       score: str, randomness: DiffGenRandomness) -> tuple[float, float]:
    """Split point of a numeric interval by the exponential mechanism (docs/specification.md §7).

    Sub-interval j of :func:`split_intervals` is chosen with probability ∝
    ``exp(ε'·u_j/(2Δu)) × length_j``, then s is drawn uniformly inside it.

    Returns
    -------
    (split point s in (lo, hi), score u of the split) — records with value v < s go left.

    Raises
    ------
    InvalidParameterError
        ``lo >= hi`` (the interval cannot be split) or an unknown score.
    """
    pts, u = split_intervals(counts, lo, hi, top=top, score=score)
    j, _ = gumbel_max(split_log_weights(u, np.diff(pts), eps_prime), randomness)
    return randomness.uniform(float(pts[j]), float(pts[j + 1])), float(u[j])


# ----------------------------------------------------------------------------------------------
# The cut and the candidates
# ----------------------------------------------------------------------------------------------
@dataclass
class Candidate:
    """A value of ∪Cut that can be specialized: categorical node or numeric interval (with split)."""

    attribute: str
    node: str
    score: float
    split: Optional[float] = None


@dataclass(frozen=True)
class BudgetSpend:
    """One ε spend of a DiffGen run (exact)."""

    step: str
    attribute: str
    epsilon: Fraction
    composition: str  # "sequential" or "parallel" (children with disjoint records)


def _exact(x: float) -> str:
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(x)


def interval_label(lo: float, hi: float, top: bool) -> str:
    """Public label of a numeric cut interval, e.g. ``[17, 41.30912)`` or ``[41.30912, 100]`` (exact floats)."""
    return f"[{_exact(lo)}, {_exact(hi)}]" if top else f"[{_exact(lo)}, {_exact(hi)})"


@dataclass
class Cut:
    """The current cut of every predictor (public once the release is out).

    Categorical: ``nodes[attr]`` the taxonomy nodes of the cut, in order. Numeric:
    ``bounds[attr]`` sorted boundaries ``[lo, s1, ..., hi]`` (cells [b_i, b_{i+1}), the last closed).
    """

    predictors: dict[str, Predictor]
    nodes: dict[str, list[str]] = field(default_factory=dict)
    bounds: dict[str, list[float]] = field(default_factory=dict)

    @classmethod
    def top(cls, predictors: Sequence[Predictor]) -> Cut:
        cut = cls({p.attribute: p for p in predictors})
        for p in predictors:
            if isinstance(p, SpecializationTaxonomy):
                cut.nodes[p.attribute] = [p.root]
            else:
                cut.bounds[p.attribute] = [float(p.lo), float(p.hi)]
        return cut

    @property
    def attributes(self) -> list[str]:
        return list(self.predictors)

    def size(self, attr: str) -> int:
        return len(self.nodes[attr]) if attr in self.nodes else len(self.bounds[attr]) - 1

    def labels(self, attr: str) -> list[str]:
        if attr in self.nodes:
            return list(self.nodes[attr])
        b = self.bounds[attr]
        return [interval_label(b[i], b[i + 1], i == len(b) - 2) for i in range(len(b) - 1)]

    def interval(self, attr: str, node: str) -> tuple[float, float, bool]:
        labels = self.labels(attr)
        i = labels.index(node)
        b = self.bounds[attr]
        return b[i], b[i + 1], i == len(b) - 2

    def specialize(self, attr: str, node: str, split: Optional[float] = None) -> list[str]:
        """Replace ``node`` by its children (categorical) or by the two halves at ``split``; return the new labels."""
        if attr in self.nodes:
            tax = self.predictors[attr]
            if not isinstance(tax, SpecializationTaxonomy) or tax.is_leaf(node) or node not in self.nodes[attr]:
                raise InvalidParameterError(f"{attr}: {node!r} is not a specializable value of the cut")
            i = self.nodes[attr].index(node)
            kids = list(tax.children[node])
            self.nodes[attr][i:i + 1] = kids
            return kids
        lo, hi, top = self.interval(attr, node)
        if split is None or not lo < split < hi:
            raise InvalidParameterError(f"{attr}: split {split} must lie inside {node}")
        b = self.bounds[attr]
        b.insert(b.index(lo) + 1, float(split))
        return [interval_label(lo, split, False), interval_label(split, hi, top)]

    def cell_codes(self, attr: str, values) -> np.ndarray:
        """Cut cell (0-based, in :meth:`labels` order) of each value; shape (n,) int64.

        Raises
        ------
        DomainError
            A value outside the numeric domain or not a leaf of the taxonomy.
        """
        p = self.predictors[attr]
        if isinstance(p, NumericDomain):
            x = np.asarray(values, dtype=float)
            bad = ~((x >= p.lo) & (x <= p.hi))
            if bad.any():
                raise DomainError(f"{attr} value {x[bad][0]} outside its declared domain [{p.lo}, {p.hi}]")
            return np.searchsorted(np.asarray(self.bounds[attr][1:-1]), x, side="right").astype(np.int64)
        lookup = {}
        for i, node in enumerate(self.nodes[attr]):
            for leaf in p.leaves[node]:
                lookup[leaf] = i
        x = np.asarray(values).astype(str)
        uniq, inv = np.unique(x, return_inverse=True)
        missing = [u for u in uniq if u not in lookup]
        if missing:
            raise DomainError(f"{attr} value {missing[0]!r} is not a leaf of its taxonomy")
        return np.array([lookup[u] for u in uniq], dtype=np.int64)[inv]

    def to_public(self) -> dict:
        """JSON-ready description of the cut (labels, and numeric boundaries)."""
        return {a: {"kind": self.predictors[a].kind, "labels": self.labels(a),
                    **({"bounds": list(self.bounds[a])} if a in self.bounds else {})} for a in self.attributes}


class DiffGenEngine:
    """The specialization process over one party's predictors (docs/specification.md §7 steps 1-4).

    Holds the :class:`Cut` of its own predictors, their candidates with scores, and the ε ledger.
    DiffGen uses one engine over all predictors; DistDiffGen one per party (each over its own
    attributes), with the winner drawn across both (:mod:`fragrelease.diffgen.two_party`).

    Parameters
    ----------
    predictors : the predictors this engine owns.
    counts : attribute -> :class:`AttributeCounts` (value × class counts of all records). A numeric
        predictor's entry may instead be any object with a ``choose_split(lo, hi, *, top, eps_prime,
        score, randomness)`` method with :func:`choose_split_point`'s contract (e.g. the Spark-held
        counts of :class:`fragrelease.jobs.diffgen.marginals.SparkNumericCounts`).
    eps_prime : ε' (:func:`epsilon_prime`, computed from **all** parties' numeric predictors).
    score : "max" or "infogain".
    randomness : a :class:`fragrelease.rng.DiffGenRandomness`.
    """

    def __init__(self, predictors: Sequence[Predictor], counts: Mapping[str, AttributeCounts], *,
                 eps_prime: Fraction, score: str, randomness: DiffGenRandomness) -> None:
        if score not in SCORES:
            raise InvalidParameterError(f"score must be one of {SCORES}, not {score!r}")
        missing = [p.attribute for p in predictors if p.attribute not in counts]
        if missing:
            raise InvalidParameterError(f"no value x class counts for predictor {missing[0]!r}")
        self.cut = Cut.top(predictors)
        self.counts = dict(counts)
        self.eps_prime = Fraction(eps_prime)
        self.score = score
        self.randomness = randomness
        self.candidates: dict[tuple[str, str], Candidate] = {}
        self.ledger: list[BudgetSpend] = []
        for p in predictors:
            node = p.root if isinstance(p, SpecializationTaxonomy) else self.cut.labels(p.attribute)[0]
            self._add_candidate(p.attribute, node)
            if isinstance(p, NumericDomain):
                self.ledger.append(BudgetSpend("split point of the root interval", p.attribute, self.eps_prime,
                                               "sequential"))

    def _add_candidate(self, attr: str, node: str) -> None:
        p = self.cut.predictors[attr]
        c = self.counts[attr]
        if isinstance(p, SpecializationTaxonomy):
            if p.is_leaf(node):
                return
            pos = {v: i for i, v in enumerate(c.values.astype(str))}
            kids = []
            for child in p.children[node]:
                rows = [pos[v] for v in p.leaves[child] if v in pos]
                kids.append(c.counts[rows].sum(axis=0) if rows else np.zeros(c.counts.shape[1], np.int64))
            u = float(score_children(np.stack(kids), self.score))
            self.candidates[(attr, node)] = Candidate(attr, node, u)
            return
        lo, hi, top = self.cut.interval(attr, node)
        if not lo < hi:
            return
        choose = c.choose_split if hasattr(c, "choose_split") else partial(choose_split_point, c)
        split, u = choose(lo, hi, top=top, eps_prime=self.eps_prime, score=self.score, randomness=self.randomness)
        self.candidates[(attr, node)] = Candidate(attr, node, u, split)

    def candidate_list(self) -> list[Candidate]:
        return list(self.candidates.values())

    def log_weights(self) -> np.ndarray:
        """``ε'·u/(2Δu)`` of every candidate, in :meth:`candidate_list` order."""
        return np.array([float(self.eps_prime) * c.score / (2 * SCORE_SENSITIVITY) for c in self.candidate_list()])

    def draw(self) -> tuple[Candidate, float]:
        """This engine's exponential-mechanism draw among its own candidates: (candidate, Gumbel noisy max)."""
        cands = self.candidate_list()
        j, m = gumbel_max(self.log_weights(), self.randomness)
        return cands[j], m

    def specialize(self, cand: Candidate) -> dict:
        """Specialize a winner this engine owns; return the public instruction for the other party.

        The instruction holds the attribute, the specialized value, its children's labels and (numeric)
        the split point: all part of the released cut, no record values.
        """
        if (cand.attribute, cand.node) not in self.candidates:
            raise InvalidParameterError(f"{cand.attribute}: {cand.node!r} is not a candidate of this engine")
        del self.candidates[(cand.attribute, cand.node)]
        children = self.cut.specialize(cand.attribute, cand.node, cand.split)
        for child in children:
            self._add_candidate(cand.attribute, child)
        if cand.split is not None:
            self.ledger.append(BudgetSpend(f"split points of the children of {cand.node}", cand.attribute,
                                           self.eps_prime, "parallel"))
        return {"attribute": cand.attribute, "node": cand.node, "children": children,
                "split": cand.split}


@dataclass
class DiffGenResult:
    """A DiffGen run: the final cut, the ε ledger and the noisy leaf counts.

    ``noisy_counts`` has shape (cut size of attribute 1, ..., cut size of attribute d, |classes|),
    float64, one entry per leaf × class including empty leaves.
    """

    cut: Cut
    class_values: tuple[str, ...]
    epsilon: Fraction
    ledger: list[BudgetSpend]
    noisy_counts: Optional[np.ndarray] = None

    def spent(self) -> Fraction:
        return sum((s.epsilon for s in self.ledger), Fraction(0))


def specialize_cut(predictors: Sequence[Predictor], counts: Mapping[str, AttributeCounts], *, epsilon,
                   specializations: int, score: str, randomness: DiffGenRandomness) -> tuple[Cut, list[BudgetSpend]]:
    """DiffGen steps 1-4 (docs/specification.md §7): the cut after h exponential-mechanism specializations.

    Parameters
    ----------
    predictors : all predictors (taxonomies and numeric domains).
    counts : their value × class counts.
    epsilon : total ε of the release (Fraction, > 0); this step spends at most ε/2.
    specializations : h ≥ 0. Stops early (spending less) when no candidate is left.

    Returns
    -------
    (cut, ledger of the ε spent on the generalization).
    """
    n_numeric = sum(isinstance(p, NumericDomain) for p in predictors)
    eps_p = epsilon_prime(Fraction(epsilon), n_numeric, specializations)
    engine = DiffGenEngine(predictors, counts, eps_prime=eps_p, score=score, randomness=randomness)
    for step in range(specializations):
        if not engine.candidates:
            break
        cand, _ = engine.draw()
        engine.ledger.append(BudgetSpend(f"selection {step + 1}", "∪Cut", eps_p, "sequential"))
        engine.specialize(cand)
    return engine.cut, engine.ledger


def leaf_shape(cut: Cut, n_classes: int) -> tuple[int, ...]:
    return tuple(cut.size(a) for a in cut.attributes) + (n_classes,)


def leaf_codes(cut: Cut, columns: Mapping[str, np.ndarray], classes, class_values: Sequence[str]) -> np.ndarray:
    """Flat leaf × class index of every record (row-major over :func:`leaf_shape`); shape (n,) int64.

    Raises
    ------
    DomainError
        A value outside its domain or taxonomy, or an unknown class value.
    """
    shape = leaf_shape(cut, len(class_values))
    cidx = {c: i for i, c in enumerate(class_values)}
    cls = np.asarray(classes).astype(str)
    uniq, inv = np.unique(cls, return_inverse=True)
    bad = [u for u in uniq if u not in cidx]
    if bad:
        raise DomainError(f"class value {bad[0]!r} is not one of {list(class_values)}")
    codes = [cut.cell_codes(a, columns[a]) for a in cut.attributes] + [np.array([cidx[u] for u in uniq])[inv]]
    return np.asarray(np.ravel_multi_index(codes, shape)).astype(np.int64)


def leaf_count_scale(epsilon) -> float:
    """The Laplace scale of every leaf × class count, ``b = 2 / ε`` (docs/specification.md §7).

    The one definition of DiffGen's count noise: the single-owner release (numpy and Spark), the
    two-party protocol's shares, the evaluation and the sparse-domain filter all call it.

    Raises
    ------
    InvalidParameterError
        ε ≤ 0 (the message repeats it).
    """
    eps = Fraction(epsilon)
    if eps <= 0:
        raise InvalidParameterError(f"epsilon must be > 0, not {eps}")
    return float(2 / eps)


def noisy_leaf_counts(true_counts: np.ndarray, epsilon, randomness: DiffGenRandomness) -> np.ndarray:
    """Every leaf × class count plus Lap(2/ε) (docs/specification.md §7), empty leaves included; same shape, float64."""
    flat = np.asarray(true_counts, dtype=float).ravel()
    return randomness.laplace(flat, leaf_count_scale(epsilon)).reshape(np.shape(true_counts))


def sparse_min_count(n_cells: int, epsilon) -> int:
    """Threshold of the sparse-domain filter used when noisy counts are expanded into records.

    ``t = max(1, ceil(b·ln(n_cells / 2) + 1/2))`` with ``b = 2/ε`` (the leaf-count Laplace scale).
    A cell that holds no record has a rounded noisy count ``floor(Lap(b) + 1/2) >= t`` with probability
    ``exp(-(t - 1/2)/b) / 2 <= 1 / n_cells``, so in expectation at most one of the empty cells yields
    synthetic records, however many leaves the cut has. Without the filter (``t = 1``) each empty
    cell yields about ``b/2`` records on average, which swamps the real records once the cut has far
    more cells than the table has records (e.g. 2.5M cells, ε = 0.1: ~25M synthetic records from
    empty cells against 30,162 real ones). The price: real cells whose noisy count falls below t
    yield no records either.

    The threshold depends only on the public cut size and ε, and the filter reads only released noisy
    counts, so it is post-processing: no privacy cost (the high-pass filter idea of Cormode,
    Procopiuc, Srivastava and Tran, "Differentially private summaries for sparse data", ICDT 2012).
    The generalized table itself is released unfiltered (docs/specification.md §7).

    Parameters
    ----------
    n_cells : number of leaf × class cells of the cut (≥ 1).
    epsilon : total ε of the release (> 0).

    Raises
    ------
    InvalidParameterError
        ``n_cells < 1`` or ε ≤ 0.
    """
    b = leaf_count_scale(epsilon)
    if n_cells < 1:
        raise InvalidParameterError(f"number of leaf x class cells must be >= 1, not {n_cells}")
    return max(1, math.ceil(b * math.log(n_cells / 2) + 0.5))


def sparse_min_count_two_laplace(n_cells: int, epsilon) -> int:
    """Sparse-domain threshold when each released count carries Lap(b) + Lap(b), b = 2/ε (two-party ``laplace-each``).

    The smallest integer ``t >= 1`` with ``Pr[Lap(b) + Lap(b) >= t - 1/2] = exp(-x/b)(1 + x/(2b))/2 <= 1/n_cells``
    (``x = t - 1/2``), so in expectation at most one empty cell yields synthetic records, as
    :func:`sparse_min_count` ensures for one Lap(b). That single-Laplace threshold
    would let about ``1 + x/(2b)`` times more empty cells through (about 6 at 97,200 cells, ε = 1).
    Depends only on the public cut size and ε: post-processing, no privacy cost.

    Raises
    ------
    InvalidParameterError
        ``n_cells < 1`` or ε ≤ 0 (from :func:`sparse_min_count`).
    """
    t = sparse_min_count(n_cells, epsilon)  # validates; the single-Laplace threshold is a lower bound
    b = leaf_count_scale(epsilon)

    def tail(t_: int) -> float:
        x = t_ - 0.5
        return 0.5 * math.exp(-x / b) * (1 + x / (2 * b))

    while tail(t) > 1 / n_cells:
        t += 1
    return t


def release_counts(noisy: np.ndarray, min_count: int = 1) -> np.ndarray:
    """Record counts used to generate synthetic records: ``k = max(0, floor(x + 0.5))``, and 0 where ``k < min_count``.

    ``min_count = 1`` is the plain expansion (negatives clipped to 0); see :func:`sparse_min_count`
    for the filtered one. Returns int64 of the same shape as ``noisy``.

    Raises
    ------
    InvalidParameterError
        ``min_count < 1``.
    """
    if int(min_count) != min_count or min_count < 1:
        raise InvalidParameterError(f"min_count must be an integer >= 1, not {min_count}")
    k = np.maximum(np.floor(np.asarray(noisy) + 0.5), 0).astype(np.int64)
    k[k < min_count] = 0
    return k


def diffgen(predictors: Sequence[Predictor], columns: Mapping[str, np.ndarray], classes, class_values: Sequence[str],
            *, epsilon, specializations: int, score: str, randomness: DiffGenRandomness,
            max_leaves: int = 5_000_000) -> DiffGenResult:
    """Single-party DiffGen on in-memory columns (pandas/numpy), docs/specification.md §7.

    Parameters
    ----------
    columns : attribute -> array (n,) of the records' values (numeric or category labels).
    classes : array (n,) of class labels, each in ``class_values``.
    max_leaves : refuse to enumerate more leaf × class cells than this.

    Returns
    -------
    :class:`DiffGenResult` with ``noisy_counts`` of shape :func:`leaf_shape`.

    Raises
    ------
    InvalidParameterError
        Bad ε, h or score, or more leaves than ``max_leaves``.
    DomainError
        Values outside their domain or taxonomy.
    """
    counts = {p.attribute: marginal_counts(p, columns[p.attribute], classes, class_values) for p in predictors}
    cut, ledger = specialize_cut(predictors, counts, epsilon=epsilon, specializations=specializations, score=score,
                                 randomness=randomness)
    shape = leaf_shape(cut, len(class_values))
    total = math.prod(shape)
    if total > max_leaves:
        raise InvalidParameterError(f"the cut has {total} leaf x class cells, more than max_leaves = {max_leaves}")
    true = np.bincount(leaf_codes(cut, columns, classes, class_values), minlength=total).reshape(shape)
    eps = Fraction(epsilon)
    noisy = noisy_leaf_counts(true, eps, randomness)
    ledger = ledger + [BudgetSpend("Laplace noise on leaf counts", "leaves", eps / 2, "sequential")]
    return DiffGenResult(cut, tuple(class_values), eps, ledger, noisy)


def marginal_counts(p: Predictor, values, classes, class_values: Sequence[str]) -> AttributeCounts:
    """Value × class counts of one predictor from in-memory records (the pandas twin of the Spark groupBy).

    Raises
    ------
    DomainError
        A value outside the declared domain or not a leaf of the taxonomy.
    """
    numeric = isinstance(p, NumericDomain)
    v = np.asarray(values, dtype=float) if numeric else np.asarray(values).astype(str)
    if isinstance(p, NumericDomain):
        outside = ~((v >= p.lo) & (v <= p.hi))
        if outside.any():
            raise DomainError(f"{p.attribute} value {v[outside][0]} outside its declared domain [{p.lo}, {p.hi}]")
    else:
        leaves = set(p.leaves[p.root])
        unknown = [u for u in np.unique(v) if u not in leaves]
        if unknown:
            raise DomainError(f"{p.attribute} value {unknown[0]!r} is not a leaf of its taxonomy")
    cls = np.asarray(classes).astype(str)
    uniq, inv = np.unique(v, return_inverse=True)
    cidx = {c: i for i, c in enumerate(class_values)}
    cu, cinv = np.unique(cls, return_inverse=True)
    bad = [c for c in cu if c not in cidx]
    if bad:
        raise DomainError(f"class value {bad[0]!r} is not one of {list(class_values)}")
    mat = np.zeros((uniq.size, len(class_values)), dtype=np.int64)
    np.add.at(mat, (inv, np.array([cidx[c] for c in cu], dtype=np.int64)[cinv]), 1)
    return AttributeCounts(uniq, mat)


def synthesize_cells(cut: Cut, codes: Mapping[str, np.ndarray], gen: np.random.Generator) -> dict[str, np.ndarray]:
    """Draw record values inside generalized cells (post-processing of the released counts).

    A categorical cell (a taxonomy node) gets a leaf value under it drawn uniformly; a numeric cell
    [a, b) gets an integer drawn uniformly among the integers in it (``integer`` domains; the top cell
    includes b) or a uniform real. ``codes`` maps attribute -> cell index per synthetic record.
    """
    out = {}
    for a in cut.attributes:
        p = cut.predictors[a]
        c = np.asarray(codes[a], dtype=np.int64)
        if isinstance(p, SpecializationTaxonomy):
            pools = [np.asarray(p.leaves[node]) for node in cut.nodes[a]]
            sizes = np.array([len(x) for x in pools])
            pick = np.floor(gen.random(c.size) * sizes[c]).astype(np.int64)
            offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            flat = np.concatenate(pools) if pools else np.empty(0, dtype=str)
            out[a] = flat[offsets[c] + pick]
        else:
            b = np.asarray(cut.bounds[a])
            lo, hi = b[c], b[c + 1]
            if p.integer:
                top = c == b.size - 2
                ilo = np.ceil(lo)
                ihi = np.where(top, np.floor(hi), np.ceil(hi) - 1)
                empty = ihi < ilo  # a cell with no integer inside: take the nearest integer to its middle
                n_int = np.maximum(ihi - ilo + 1, 1)
                val = ilo + np.floor(gen.random(c.size) * n_int)
                val = np.where(empty, np.clip(np.round((lo + hi) / 2), p.lo, p.hi), val)
                out[a] = val.astype(np.int64)
            else:
                out[a] = lo + gen.random(c.size) * (hi - lo)
    return out
