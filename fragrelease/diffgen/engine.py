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
5. Every leaf × class count gets Lap(2/ε), empty leaves included (:func:`fragrelease.diffgen.release.noisy_leaf_counts`).

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

from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial
from typing import Mapping, Optional, Protocol, Sequence, runtime_checkable

import numpy as np

from fragrelease.diffgen.predictors import (
    SCORE_SENSITIVITY,
    SCORES,
    AttributeCounts,
    NumericDomain,
    Predictor,
    SpecializationTaxonomy,
    score_children,
)
from fragrelease.errors import DomainError, InvalidParameterError
from fragrelease.rng.diffgen import DiffGenRandomness, gumbel_max


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


@runtime_checkable
class SplitChooser(Protocol):
    """A numeric predictor's value × class counts held elsewhere, drawing its own split points.

    The seam between the engine and counts too large for the driver, e.g. the Spark-held counts of
    :class:`fragrelease.jobs.diffgen.marginals.SparkNumericCounts`. :meth:`choose_split` has the
    contract and the distribution of :func:`choose_split_point` on the same counts: the split point
    inside [lo, hi) (or [lo, hi] when ``top``) and the score of the chosen sub-interval.
    """

    def choose_split(self, lo: float, hi: float, *, top: bool, eps_prime: Fraction, score: str,
                     randomness: DiffGenRandomness) -> tuple[float, float]: ...


#: What the engine takes per predictor: value × class counts on the driver, or (numeric predictors
#: only) a :class:`SplitChooser`.
PredictorCounts = AttributeCounts | SplitChooser


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
        predictor's entry may instead be a :class:`SplitChooser` (e.g. the Spark-held counts of
        :class:`fragrelease.jobs.diffgen.marginals.SparkNumericCounts`).
    eps_prime : ε' (:func:`epsilon_prime`, computed from **all** parties' numeric predictors).
    score : "max" or "infogain".
    randomness : a :class:`fragrelease.rng.diffgen.DiffGenRandomness`.
    """

    def __init__(self, predictors: Sequence[Predictor], counts: Mapping[str, PredictorCounts], *,
                 eps_prime: Fraction, score: str, randomness: DiffGenRandomness) -> None:
        if score not in SCORES:
            raise InvalidParameterError(f"score must be one of {SCORES}, not {score!r}")
        missing = [p.attribute for p in predictors if p.attribute not in counts]
        if missing:
            raise InvalidParameterError(f"no value x class counts for predictor {missing[0]!r}")
        held = [p.attribute for p in predictors
                if isinstance(p, SpecializationTaxonomy) and not isinstance(counts[p.attribute], AttributeCounts)]
        if held:
            raise InvalidParameterError(f"categorical predictor {held[0]!r} needs its value x class counts "
                                        "(AttributeCounts), not a split chooser")
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
            assert isinstance(c, AttributeCounts)  # checked in __init__
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
        choose = c.choose_split if isinstance(c, SplitChooser) else partial(choose_split_point, c)
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


def specialize_cut(predictors: Sequence[Predictor], counts: Mapping[str, PredictorCounts], *, epsilon,
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
