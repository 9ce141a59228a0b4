"""Marginal synthesis over horizontal fragments: the owners' measurements and the aggregator's structure.

Source: docs/specification.md §10 (the design and its proof). The measurements and the model follow
MST (McKenna, Miklau and Sheldon, "Winning the NIST Contest: A scalable and general approach to
differentially private synthetic data", Journal of Privacy and Confidentiality 2021) and Private-PGM
(McKenna, Sheldon and Miklau, "Graphical-model based estimation and inference for differential
privacy", ICML 2019; :mod:`fragrelease.synthesis.model`). The noise is added **once for the sum**:
every owner adds a *share* of discrete-Laplace noise to its integer counts and masks the result
(secure aggregation, :mod:`fragrelease.secagg`), so only the sum of all owners' counts is ever
decoded, and it carries the noise of one release on one machine, times ``m/k`` in variance
(:mod:`fragrelease.rng.polya`: the shares of any k = m − t owners add up to a full discrete Laplace).

The protocol, for m owners whose fragments hold disjoint records (checked at the plan), a public
collusion bound t (:func:`default_collusion_bound`) and a public budget ε split into exact shares
``ε = ε₁ + ε_sel + ε₂`` (:class:`SynthesisBudget`):

1. **Keys**: every owner publishes a fresh key-agreement key for the plan (no data, no spend).
2. **Measure, at each owner** (:func:`measure_shares` over :func:`round_two_cliques`): the counts
   of every attribute (ε₁/l each) and of every pair of features (ε_sel/C(l_f, 2) each) plus a noise
   share, masked.
3. **Structure, at every party** (:func:`choose_tree`): from the *decoded sums* of step 2 only, a
   maximum spanning tree over the features scored by :func:`pair_score`, an unbiased estimate of the
   squared distance of the pair's counts from independence: the noise's expected contribution is
   subtracted exactly, so a pair of many categories gains nothing from its noise. The cliques to
   measure (:func:`cliques_to_measure`): the tree's edges and, with a declared target, the target
   with every feature. Post-processing.
4. **Cliques, at each owner**: the counts of every clique (ε₂/c each) plus a noise share, masked.
5. **At the aggregator**: the decoded sums fit the model (post-processing).

**Guarantee** (docs/privacy.md, "Synthetic releases"). Under the substitution of one record, one
count vector moves by at most 2 in L1. Every decoded sum is the exact sum of the owners' counts plus
the owners' shares; the shares of the owners outside any coalition of at most t owners add up to a
discrete Laplace of parameter α with 2·ln(1/α) ≤ its measurement's ε, and the coalition's own shares
are independent of the data of the others (post-processing). So the released table and everything
the aggregator sees is ε-DP for every record of the union against the recipients, the aggregator
and any t owners together (sequential composition over the measurements, parallel over the
fragments, which hold disjoint records). Not covered by ε: each owner's exact record count (public by
the neighbourhood definition) and membership (docs/privacy.md "What is public").
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping, Optional, Sequence

import numpy as np

from fragrelease.errors import InvalidParameterError
from fragrelease.rng.polya import DivisibleDiscreteLaplace, ShareSource
from fragrelease.synthesis.domain import SynthesisDomain

Clique = tuple[str, ...]
Edge = tuple[str, str]

#: L1 sensitivity of one marginal's count vector under substitution.
SUBSTITUTION_SENSITIVITY = 2
#: Default shares of ε: the 1-way marginals and the pair measurements the structure is chosen from (the rest
#: measures the cliques). Chosen on Adult at ε = 1 (docs/specification.md §10, docs/evaluation.md).
DEFAULT_ONE_WAY_SHARE = Fraction(1, 5)
DEFAULT_SELECTION_SHARE = Fraction(1, 5)


def default_collusion_bound(owners: int) -> int:
    """The default t: how many owners may collude with the aggregator while every record keeps ε-DP.

    0 for one owner (nobody to collude with), 1 for two (either owner with the aggregator: each owner's
    share is then a whole discrete Laplace), and ⌊m/3⌋ from three owners on: a third of the owners, the
    bound of Byzantine agreement, at a noise variance of ``m/(m − t)`` ≤ 3/2 times one machine's
    (docs/privacy.md, "Synthetic releases"). Public.

    Raises
    ------
    InvalidParameterError
        ``owners < 1``.
    """
    if owners < 1:
        raise InvalidParameterError(f"a synthetic release needs at least one owner, not {owners}")
    if owners <= 2:
        return owners - 1
    return owners // 3


def honest_parts(owners: int, collusion: int) -> int:
    """k = m − t, the number of owners whose shares must add up to one full noise.

    Raises
    ------
    InvalidParameterError
        ``collusion`` outside ``[0, owners − 1]``.
    """
    if not 0 <= collusion < owners:
        raise InvalidParameterError(f"synthesis_collusion must lie in [0, {owners - 1}] for {owners} owners "
                                    f"(at least one owner stays honest), not {collusion}")
    return owners - collusion


@dataclass(frozen=True)
class SynthesisBudget:
    """The exact split of one owner's ε over the protocol's three measurements (all public).

    Attributes
    ----------
    epsilon : the total ε of the release (per record, whole table).
    one_way_share, selection_share : shares of ε in (0, 1) for the 1-way marginals and the pair
        measurements the structure is chosen from; the clique measurements get the rest, which must be
        positive.

    Raises
    ------
    InvalidParameterError
        (on construction) ε ≤ 0 or shares outside (0, 1) or summing to 1 or more.
    """

    epsilon: Fraction
    one_way_share: Fraction = DEFAULT_ONE_WAY_SHARE
    selection_share: Fraction = DEFAULT_SELECTION_SHARE

    def __post_init__(self) -> None:
        if Fraction(self.epsilon) <= 0:
            raise InvalidParameterError(f"epsilon must be > 0, not {self.epsilon}")
        for name in ("one_way_share", "selection_share"):
            s = Fraction(getattr(self, name))
            if not 0 < s < 1:
                raise InvalidParameterError(f"{name} must lie in (0, 1), not {s}")
        if Fraction(self.one_way_share) + Fraction(self.selection_share) >= 1:
            raise InvalidParameterError("one_way_share + selection_share must be < 1 (the cliques need budget)")

    @property
    def one_way(self) -> Fraction:
        return Fraction(self.epsilon) * Fraction(self.one_way_share)

    @property
    def selection(self) -> Fraction:
        return Fraction(self.epsilon) * Fraction(self.selection_share)

    @property
    def cliques(self) -> Fraction:
        return Fraction(self.epsilon) - self.one_way - self.selection

    def one_way_noise(self, domain: SynthesisDomain, parts: int) -> dict[Clique, DivisibleDiscreteLaplace]:
        """The noise of each 1-way marginal, by its clique ``(name,)``: ε₁/l each, sensitivity 2, shares of ``parts``."""
        return _calibrated([(a,) for a in domain.names], self.one_way, parts)

    def selection_noise(self, pairs: Sequence[Edge], parts: int) -> dict[Clique, DivisibleDiscreteLaplace]:
        """The noise of each feature pair measured for the structure: ε_sel/|pairs| each (none without pairs)."""
        return _calibrated([tuple(p) for p in pairs], self.selection, parts) if pairs else {}

    def clique_noise(self, cliques: Sequence[Clique], parts: int) -> dict[Clique, DivisibleDiscreteLaplace]:
        """The noise of each measured clique: ε₂/c each, sensitivity 2."""
        if not cliques:
            raise InvalidParameterError("no clique to measure")
        return _calibrated(list(cliques), self.cliques, parts)

    def spent(self, domain: SynthesisDomain, pairs: Sequence[Edge], cliques: Sequence[Clique]) -> float:
        """An upper bound of the ε the protocol's noises give per record (Σ 2·ln(1/α); ≤ :attr:`epsilon`)."""
        noises = [*self.one_way_noise(domain, 1).values(), *self.selection_noise(pairs, 1).values(),
                  *self.clique_noise(cliques, 1).values()]
        return float(sum(n.epsilon(SUBSTITUTION_SENSITIVITY) for n in noises))


def _calibrated(cliques: Sequence[Clique], epsilon: Fraction, parts: int) -> dict[Clique, DivisibleDiscreteLaplace]:
    each = Fraction(epsilon) / len(cliques)
    noise = DivisibleDiscreteLaplace.calibrate(each, SUBSTITUTION_SENSITIVITY, parts)
    return {tuple(c): noise for c in cliques}


def features_of(domain: SynthesisDomain, target: Optional[str]) -> tuple[str, ...]:
    """The attributes the tree spans: all but the declared target."""
    if target is not None and target not in domain.names:
        raise InvalidParameterError(f"target {target!r} is not a protected attribute ({list(domain.names)})")
    return tuple(a for a in domain.names if a != target)


def feature_pairs(domain: SynthesisDomain, target: Optional[str]) -> tuple[Edge, ...]:
    """Every pair of features, in domain order: what the structure is chosen from."""
    return tuple(itertools.combinations(features_of(domain, target), 2))


def round_two_cliques(domain: SynthesisDomain, target: Optional[str]) -> tuple[Clique, ...]:
    """What the measure round counts: every attribute's 1-way, then every feature pair (domain order)."""
    return tuple([(a,) for a in domain.names] + [tuple(p) for p in feature_pairs(domain, target)])


def measure_shares(domain: SynthesisDomain, counts: Mapping[Clique, np.ndarray],
                   noise: Mapping[Clique, DivisibleDiscreteLaplace], *,
                   source: Optional[ShareSource] = None) -> dict[Clique, np.ndarray]:
    """One owner's counts plus its noise share, for every clique of ``noise`` (int64, flattened C order).

    ``counts``: the owner's exact counts of each clique, shape ``(sizes of its attributes)``;
    ``noise``: each clique's share distribution (:class:`~fragrelease.rng.polya.DivisibleDiscreteLaplace`);
    ``source``: tests only (a release draws from the OS CSPRNG). The output is *not* private on its own:
    it is masked before it leaves the owner (:mod:`fragrelease.secagg`), and only the sum over every
    owner is ever decoded.

    Raises
    ------
    InvalidParameterError
        A clique's counts missing, of the wrong shape or not whole numbers.
    """
    out = {}
    for c, n in noise.items():
        shape = tuple(domain.sizes[a] for a in c)
        got = counts.get(c)
        if got is None or np.shape(got) != shape:
            raise InvalidParameterError(f"the counts of clique {c} are missing or not of shape {shape}")
        exact = np.asarray(got).ravel()
        if not np.all(exact == np.round(exact)):
            raise InvalidParameterError(f"the counts of clique {c} are not whole numbers")
        out[c] = exact.astype(np.int64) + n.share(exact.size, source)
    return out


#: How many standard deviations of its noise a pair's score is lowered by (:func:`pair_score`): a lower
#: confidence bound, so that a pair of many cells, whose score's noise is wide, wins an edge only on its signal.
SCORE_Z = 3.0
#: The fourth moment of the noise in units of σ⁴: the Laplace's 6, an upper bound for the discrete Laplace
#: and for sums of its shares (their kurtosis is lower). Used only for the score's spread.
NOISE_KURTOSIS = 6.0


def _centring(p: np.ndarray) -> np.ndarray:
    """I − p·1ᵀ: subtracts from a count vector its total times ``p``."""
    return np.eye(p.size) - np.outer(p, np.ones(p.size))


def distribution(noisy: np.ndarray) -> np.ndarray:
    """A noisy count vector clipped at 0 and normalized (uniform when nothing is left); post-processing."""
    p = np.clip(np.asarray(noisy, dtype=float).ravel(), 0.0, None)
    s = p.sum()
    return p / s if s > 0 else np.full(p.shape, 1.0 / p.size)


def pair_score(table: np.ndarray, variance: float, p: np.ndarray, q: np.ndarray) -> float:
    """How far a pair's counts lie from independence, estimated from its noisy sum only: a lower bound.

    ``table``: the decoded noisy sum of the pair's counts, shape (r, c); ``variance``: the public
    variance σ² of each cell's noise in that sum; ``p``, ``q``: distributions of the two attributes from
    the decoded 1-way sums (:func:`distribution`; independent noise). With A = (I − p1ᵀ) ⊗ (I − q1ᵀ)
    fixed, ``A·table = A·x + A·ν`` for the exact counts x and zero-mean i.i.d. noise ν, so
    ``D = ‖A·table‖² − σ²·‖A‖²_F`` has expectation ``‖A·x‖²``: the squared L2 distance of x from its
    independence estimate, up to a second-order term in the 1-ways' errors. Its noise has standard
    deviation ``s = σ²·sqrt(2·tr(B²) + (κ − 3)·Σ B_ii²)`` with B = AᵀA (κ: :data:`NOISE_KURTOSIS`), which
    grows with the pair's cells; the score is ``D − z·s`` (z = :data:`SCORE_Z`), so the noise of a pair
    with many cells neither adds to its score in expectation nor lets it win by its spread
    (docs/specification.md §10). Post-processing of noisy values and public scales.
    """
    left, right = _centring(p), _centring(q)
    centred = left @ np.asarray(table, dtype=float) @ right.T
    bl, br = left.T @ left, right.T @ right
    norm = float(np.trace(bl) * np.trace(br))
    trace_b2 = float(np.sum(bl * bl) * np.sum(br * br))
    diag_b2 = float(np.sum(np.diag(bl) ** 2) * np.sum(np.diag(br) ** 2))
    spread = variance * float(np.sqrt(2.0 * trace_b2 + (NOISE_KURTOSIS - 3.0) * diag_b2))
    return float(np.sum(centred * centred) - variance * norm - SCORE_Z * spread)


class _Forest:
    """The components of a growing forest over named nodes (Kruskal's union-find)."""

    def __init__(self, nodes: Sequence[str]) -> None:
        self._parent = {a: a for a in nodes}

    def _root(self, x: str) -> str:
        while self._parent[x] != x:
            x = self._parent[x]
        return x

    def joins(self, edge: Edge) -> bool:
        """True when ``edge`` joins two components (adding it keeps a forest)."""
        return self._root(edge[0]) != self._root(edge[1])

    def add(self, edge: Edge) -> None:
        self._parent[self._root(edge[0])] = self._root(edge[1])


def choose_tree(domain: SynthesisDomain, sums: Mapping[Clique, np.ndarray], variances: Mapping[Clique, float], *,
                target: Optional[str] = None) -> tuple[Edge, ...]:
    """The structure: a maximum spanning tree over the features, each pair scored by :func:`pair_score`.

    ``sums``: the decoded noisy sums of the measure round (every attribute's ``(a,)`` and every
    feature pair, flattened or shaped); ``variances``: each one's public noise variance per cell (the
    sum's: :meth:`~fragrelease.rng.polya.DivisibleDiscreteLaplace.variance_of_sum` over the owners).
    Ties go to the earlier pair in domain order (public). The same on every party: post-processing of
    the decoded sums.

    Raises
    ------
    InvalidParameterError
        A sum missing.
    """
    sizes = domain.sizes
    pairs = feature_pairs(domain, target)
    for c in [(a,) for a in domain.names] + [tuple(p) for p in pairs]:
        if c not in sums:
            raise InvalidParameterError(f"the structure needs the decoded sum of {c}")
    probs = {a: distribution(sums[(a,)]) for a in features_of(domain, target)}
    scores = {(a, b): pair_score(np.asarray(sums[(a, b)]).reshape(sizes[a], sizes[b]), variances[(a, b)],
                                 probs[a], probs[b]) for a, b in pairs}
    order = {pair: i for i, pair in enumerate(pairs)}
    forest = _Forest(features_of(domain, target))
    tree: list[Edge] = []
    for e in sorted(pairs, key=lambda e: (-scores[e], order[e])):
        if forest.joins(e):
            forest.add(e)
            tree.append(e)
    return tuple(tree)


def cliques_to_measure(domain: SynthesisDomain, tree: Sequence[Edge], *, target: Optional[str] = None,
                       joint: bool = False) -> tuple[Clique, ...]:
    """The cliques round: the tree's edges, then (target, feature) for every feature when a target is declared.

    ``joint`` (with a target): one 3-way clique (target, a, b) per tree edge instead, which covers every
    (target, feature) pair through the edges (a feature outside every edge, possible only with one
    feature, gets its pair).
    """
    feats = features_of(domain, target)
    if target is not None and joint:
        out: list[Clique] = [(target, *e) for e in tree]
        covered = {f for e in tree for f in e}
        return tuple(out + [(target, f) for f in feats if f not in covered])
    out = [tuple(e) for e in tree]
    if target is not None:
        out += [(target, f) for f in feats]
    return tuple(out)


def add_vectors(parts: Sequence[Mapping[Clique, np.ndarray]]) -> dict[Clique, np.ndarray]:
    """The sums of the owners' (unmasked) count-plus-share vectors, clique by clique (int64).

    What secure aggregation decodes (:func:`fragrelease.secagg.unmask_sum`), without the masks: the
    evaluation harness and tests use it; a release never holds an owner's unmasked vector.

    Raises
    ------
    InvalidParameterError
        No owner, or owners that measured different cliques.
    """
    if not parts:
        raise InvalidParameterError("no owner handed over a measurement")
    keys = list(parts[0])
    if any(list(p) != keys for p in parts):
        raise InvalidParameterError("the owners measured different marginals")
    return {c: np.sum([np.asarray(p[c], dtype=np.int64) for p in parts], axis=0) for c in keys}
