"""Marginal synthesis over horizontal fragments: the owners' measurements and the aggregator's model.

Source: docs/specification.md §10 (the design and its proof); the measurements and the tree selection
follow MST (McKenna, Miklau and Sheldon, "Winning the NIST Contest: A scalable and general approach to
differentially private synthetic data", Journal of Privacy and Confidentiality 2021), the model is
Private-PGM's (McKenna, Sheldon and Miklau, "Graphical-model based estimation and inference for
differential privacy", ICML 2019), fitted with the ``mbi`` library that OpenDP's MST and AIM use.

The protocol, for owners whose fragments hold disjoint records (checked at the plan) and a public
budget ε split into exact shares ``ε = ε₁ + ε_sel + ε₂`` (:class:`SynthesisBudget`):

1. **Round one, at each owner** (:func:`measure_round_one`): the noisy 1-way marginal of every
   attribute (ε₁/l each), and a spanning tree over the features chosen privately on the owner's own
   fragment: l_f − 1 private selections (ε_sel/(l_f − 1) each) scoring a candidate pair by the L1
   distance between its exact 2-way counts and the independent estimate from the owner's own noisy
   1-ways. Each selection is report-noisy-max with exponential noise (permute-and-flip; McKenna and
   Sheldon, NeurIPS 2020) sampled exactly by OpenDP (:mod:`fragrelease.rng.selection`), where MST
   uses the exponential mechanism: the same ε, and pure ε-DP as sampled (a floating-point Gumbel-max
   is not). What leaves the owner: the noisy 1-ways and the chosen edges.
2. **At the aggregator** (:func:`choose_tree`): a maximum spanning tree of the owners' votes, and the
   cliques to measure (:func:`cliques_to_measure`): the tree's edges and, when a target attribute is
   declared, the target with every feature (a tree-augmented naive-Bayes structure).
   Post-processing of round one only.
3. **Round two, at each owner** (:func:`measure_cliques`): the noisy counts of every clique
   (ε₂/m each).
4. **At the aggregator**: the sums of the owners' noisy marginals fit a graphical model
   (:func:`fit_model`), compiled into a :class:`SamplingPlan` (conditional tables only), from which
   any number of rows is sampled (:func:`sample_codes`, numpy only, so Spark executors run it).
   Post-processing.

**Guarantee.** Under the substitution of one record, one count vector of a marginal moves by at most
2 in L1, and the pair score by at most 2. Each owner's two rounds together are ε-DP with respect to
its own fragment (sequential composition of Laplace measurements and report-noisy-max steps, each
calibrated by OpenDP's privacy map); a record lies in exactly one fragment, so the released table,
which is post-processing of all the owners' outputs, is ε-DP for every record of the union
(parallel composition) against the recipients, the aggregator and the other owners, for the records'
values. Not covered by ε: each owner's exact record count (public by the neighbourhood definition:
in the plan, the messages and the release's provenance; the number of rows drawn is a noisy total,
but the exact total is public) and membership (every owner can read the keyed id digests of every
other owner, docs/privacy.md "What is public").
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping, Optional, Sequence

import numpy as np

from fragrelease.errors import InvalidParameterError, MissingDependencyError
from fragrelease.rng.diffgen import DiffGenRandomness
from fragrelease.rng.laplace import LaplaceNoise, NoiseSource
from fragrelease.rng.selection import calibrated_noisy_max_scale
from fragrelease.synthesis.domain import SynthesisDomain, UniformSource

Clique = tuple[str, ...]
Edge = tuple[str, str]

#: The one line when the model's library is missing.
MISSING_MBI = ("marginal synthesis fits its model with mbi (Private-PGM), which is not installed: "
               "pip install 'fragrelease[synthesis]'")


def _mbi():
    """The ``mbi`` package (the ``synthesis`` extra), or :class:`MissingDependencyError` (:data:`MISSING_MBI`)."""
    try:
        import mbi
        from mbi import estimation, junction_tree, marginal_oracles  # noqa: F401  (the submodules used here)
    except ImportError:
        raise MissingDependencyError(MISSING_MBI) from None
    return mbi


def require_mbi() -> None:
    """Refuse early when mbi is missing: :class:`MissingDependencyError` (:data:`MISSING_MBI`)."""
    _mbi()


#: L1 sensitivity of one marginal's count vector, and of the pair score, under substitution.
SUBSTITUTION_SENSITIVITY = 2.0
#: Default shares of ε: 1-way marginals and the tree selection (the rest measures the cliques). Chosen on
#: Adult over 4 owners at ε = 1 (5 runs each): 1/5 and 1/20 give 2-way TVD 0.068 against 0.077 for 1/10 and
#: 1/10, at the same classifier accuracy (docs/specification.md §10).
DEFAULT_ONE_WAY_SHARE = Fraction(1, 5)
DEFAULT_SELECTION_SHARE = Fraction(1, 20)


@dataclass(frozen=True)
class SynthesisBudget:
    """The exact split of one owner's ε over the protocol's three measurements (all public).

    Attributes
    ----------
    epsilon : the total ε of the release (per record, whole table).
    one_way_share, selection_share : shares of ε in (0, 1) for the 1-way marginals and the tree
        selection; the clique measurements get the rest, which must be positive.

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

    def one_way_noise(self, domain: SynthesisDomain) -> dict[str, LaplaceNoise]:
        """The Laplace noise of each 1-way marginal: ε₁/l each, sensitivity 2 (by attribute name)."""
        each = self.one_way / len(domain.names)
        return {a: LaplaceNoise.calibrate(sensitivity=SUBSTITUTION_SENSITIVITY, epsilon=each,
                                          size=domain.sizes[a]) for a in domain.names}

    def clique_noise(self, domain: SynthesisDomain, cliques: Sequence[Clique]) -> dict[Clique, LaplaceNoise]:
        """The Laplace noise of each measured clique: ε₂/m each, sensitivity 2."""
        if not cliques:
            raise InvalidParameterError("no clique to measure")
        each = self.cliques / len(cliques)
        return {c: LaplaceNoise.calibrate(sensitivity=SUBSTITUTION_SENSITIVITY, epsilon=each,
                                          size=int(np.prod([domain.sizes[a] for a in c]))) for c in cliques}

    def spent(self, domain: SynthesisDomain, cliques: Sequence[Clique], selection_steps: int) -> Fraction:
        """ε the whole protocol spends per record by OpenDP's maps and the steps' budgets (≤ :attr:`epsilon`)."""
        one = sum((n.spent() for n in self.one_way_noise(domain).values()), Fraction(0))
        two = sum((n.spent() for n in self.clique_noise(domain, cliques).values()), Fraction(0))
        return one + (self.selection if selection_steps else Fraction(0)) + two


def features_of(domain: SynthesisDomain, target: Optional[str]) -> tuple[str, ...]:
    """The attributes the tree spans: all but the declared target."""
    if target is not None and target not in domain.names:
        raise InvalidParameterError(f"target {target!r} is not a protected attribute ({list(domain.names)})")
    return tuple(a for a in domain.names if a != target)


def selection_scale(budget: SynthesisBudget, steps: int) -> float:
    """The exponential-noise scale of one tree-selection step: ε_sel/steps by OpenDP's privacy map.

    The smallest float scale whose map at the pair score's L∞ sensitivity
    (:data:`SUBSTITUTION_SENSITIVITY`, 2 under substitution) is ≤ ε_sel/steps; about
    ``4·steps/ε_sel`` (:func:`fragrelease.rng.selection.calibrated_noisy_max_scale`). ``steps`` ≥ 1.
    """
    return calibrated_noisy_max_scale(SUBSTITUTION_SENSITIVITY, budget.selection / int(steps))


def _noisy(counts: np.ndarray, noise: LaplaceNoise, source: Optional[NoiseSource]) -> np.ndarray:
    return noise.sample(values=np.asarray(counts, dtype=float).ravel(), source=source).reshape(np.shape(counts))


@dataclass(frozen=True)
class RoundOne:
    """What an owner hands over after round one: noisy 1-way marginals (by attribute) and its chosen edges."""

    one_way: dict[str, np.ndarray]
    edges: tuple[Edge, ...]


def measure_round_one(domain: SynthesisDomain, one_way_counts: Mapping[str, np.ndarray],
                      pair_counts: Mapping[Edge, np.ndarray], budget: SynthesisBudget, *,
                      target: Optional[str] = None, randomness: DiffGenRandomness,
                      noise: Optional[NoiseSource] = None) -> RoundOne:
    """Round one at an owner: noisy 1-ways, then a private spanning tree over the features.

    ``one_way_counts``: exact counts of every attribute, shape (size,); ``pair_counts``: exact 2-way
    counts of every feature pair ``(a, b)`` with ``a`` before ``b`` in domain order, shape
    (size_a, size_b). ``randomness`` draws the tree selections (``noisy_max``: OpenDP's exact
    report-noisy-max from the OS CSPRNG in a release), ``noise`` the Laplace noise (None: OpenDP's sampler). Data-dependent
    inputs; the outputs are ε₁ + ε_sel-DP (module docstring).

    Raises
    ------
    InvalidParameterError
        A missing marginal or one of the wrong shape.
    """
    sizes = domain.sizes
    for a in domain.names:
        if a not in one_way_counts or np.shape(one_way_counts[a]) != (sizes[a],):
            raise InvalidParameterError(f"the 1-way counts of {a!r} are missing or not of shape ({sizes[a]},)")
    noises = budget.one_way_noise(domain)
    one = {a: _noisy(one_way_counts[a], noises[a], noise) for a in domain.names}
    feats = features_of(domain, target)
    steps = len(feats) - 1
    if steps < 1:
        return RoundOne(one, ())
    # the independent estimate from this owner's noisy 1-ways only (post-processing)
    total = float(np.mean([max(v.sum(), 0.0) for v in one.values()]))
    probs = {a: _distribution(one[a]) for a in feats}
    scores: dict[Edge, float] = {}
    for a, b in itertools.combinations(feats, 2):
        c = pair_counts.get((a, b))
        if c is None or np.shape(c) != (sizes[a], sizes[b]):
            raise InvalidParameterError(f"the 2-way counts of ({a!r}, {b!r}) are missing or not of shape "
                                        f"({sizes[a]}, {sizes[b]})")
        scores[(a, b)] = float(np.abs(np.asarray(c, float) - total * np.outer(probs[a], probs[b])).sum())
    # report-noisy-max with Exponential(scale) noise, ε_step-DP by OpenDP's map for L∞ sensitivity 2
    scale = selection_scale(budget, steps)
    forest = _Forest(feats)
    chosen: list[Edge] = []
    for _ in range(steps):
        candidates = [e for e in scores if forest.joins(e)]
        index = randomness.noisy_max(np.array([scores[e] for e in candidates]), scale)
        forest.add(candidates[index])
        chosen.append(candidates[index])
    return RoundOne(one, tuple(chosen))


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


def _distribution(noisy: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(noisy, dtype=float), 0.0, None)
    s = p.sum()
    return p / s if s > 0 else np.full(p.shape, 1.0 / p.size)


def choose_tree(domain: SynthesisDomain, votes: Sequence[Sequence[Edge]], *, target: Optional[str] = None
                ) -> tuple[Edge, ...]:
    """The aggregator's tree: a maximum spanning tree over the features weighted by the owners' votes.

    ``votes``: each owner's chosen edges (:attr:`RoundOne.edges`). Ties go to the earlier pair in
    domain order (public). Post-processing of round one.

    Raises
    ------
    InvalidParameterError
        An edge whose ends are not two distinct features of the domain.
    """
    feats = features_of(domain, target)
    order = {pair: i for i, pair in enumerate(itertools.combinations(feats, 2))}
    count: dict[Edge, int] = {}
    for owner_edges in votes:
        for a, b in owner_edges:
            key = (a, b) if (a, b) in order else (b, a)
            if key not in order:
                raise InvalidParameterError(f"edge ({a!r}, {b!r}) does not join two features of the domain")
            count[key] = count.get(key, 0) + 1
    forest = _Forest(feats)
    tree: list[Edge] = []
    for e in sorted(order, key=lambda e: (-count.get(e, 0), order[e])):
        if forest.joins(e):
            forest.add(e)
            tree.append(e)
    return tuple(tree)


def cliques_to_measure(domain: SynthesisDomain, tree: Sequence[Edge], *, target: Optional[str] = None,
                       joint: bool = False) -> tuple[Clique, ...]:
    """Round two's cliques: the tree's edges, then (target, feature) for every feature when a target is declared.

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


def measure_cliques(domain: SynthesisDomain, counts: Mapping[Clique, np.ndarray], cliques: Sequence[Clique],
                    budget: SynthesisBudget, *, noise: Optional[NoiseSource] = None) -> dict[Clique, np.ndarray]:
    """Round two at an owner: the noisy counts of every clique (ε₂/m each, sensitivity 2).

    ``counts``: exact counts of each clique, shape ``(sizes of its attributes)``.

    Raises
    ------
    InvalidParameterError
        A clique's counts missing or of the wrong shape.
    """
    noises = budget.clique_noise(domain, cliques)
    out = {}
    for c in cliques:
        shape = tuple(domain.sizes[a] for a in c)
        if c not in counts or np.shape(counts[c]) != shape:
            raise InvalidParameterError(f"the counts of clique {c} are missing or not of shape {shape}")
        out[c] = _noisy(counts[c], noises[c], noise)
    return out


def add_owners(rounds: Sequence[RoundOne], measured: Sequence[Mapping[Clique, np.ndarray]]
               ) -> tuple[dict[str, np.ndarray], dict[Clique, np.ndarray]]:
    """The aggregator's sums of the owners' noisy 1-ways and clique counts (post-processing).

    Raises
    ------
    InvalidParameterError
        No owner, or owners that measured different attributes or cliques.
    """
    if not rounds or len(rounds) != len(measured):
        raise InvalidParameterError("every owner must hand over both rounds")
    names, cliques = set(rounds[0].one_way), set(measured[0])
    if any(set(r.one_way) != names for r in rounds) or any(set(m) != cliques for m in measured):
        raise InvalidParameterError("the owners measured different marginals")
    one = {a: np.sum([r.one_way[a] for r in rounds], axis=0) for a in rounds[0].one_way}
    two = {c: np.sum([m[c] for m in measured], axis=0) for c in measured[0]}
    return one, two


def noisy_total(one_way_sums: Mapping[str, np.ndarray], one_way_noise: Mapping[str, LaplaceNoise]) -> int:
    """The released row count from the summed noisy 1-way totals (post-processing), at least 1.

    Each attribute's total is an unbiased estimate of n whose variance is proportional to its cell count
    times b² (the same number of owners add noise to every one), so the estimates are averaged with
    weights 1 / (cells · b²): the minimum-variance unbiased combination (as mbi's
    ``minimum_variance_unbiased_total``).
    """
    weights = np.array([1.0 / (np.size(one_way_sums[a]) * one_way_noise[a].scale ** 2) for a in one_way_sums])
    totals = np.array([float(np.sum(one_way_sums[a])) for a in one_way_sums])
    return max(1, int(round(float(np.sum(weights * totals) / np.sum(weights)))))


# ----------------------------------------------------------------------------------------------------
# the aggregator's model (post-processing)


@dataclass(frozen=True)
class SamplingPlan:
    """Conditional tables of a fitted model, in sampling order (public: post-processing of noisy marginals).

    ``steps``: per attribute, ``(name, parents, cdf)`` where ``cdf`` has shape
    ``(*parent sizes, size)`` and holds the cumulative conditional distribution of the attribute
    given its parents (the last entry of each row is 1). Small (cells of the model's cliques), so a
    Spark job ships it to its executors.
    """

    steps: tuple[tuple[str, tuple[str, ...], np.ndarray], ...]


def fit_model(domain: SynthesisDomain, one_way_sums: Mapping[str, np.ndarray], one_way_noise: Mapping[str, LaplaceNoise],
              clique_sums: Mapping[Clique, np.ndarray], clique_noise: Mapping[Clique, LaplaceNoise], *,
              owners: int, iters: int = 1000) -> SamplingPlan:
    """Fit Private-PGM to the owners' summed noisy marginals and compile its :class:`SamplingPlan`.

    ``*_sums``: the sums over ``owners`` owners of their noisy marginals; ``*_noise``: the Laplace
    noise each owner added (public scales: a sum's standard deviation is ``sqrt(2 · owners) · b``).
    ``iters``: mirror-descent iterations (post-processing; more is closer to the noisy marginals).

    Raises
    ------
    InvalidParameterError
        ``owners < 1`` or ``iters < 1``.
    MissingDependencyError
        mbi is not installed (:data:`MISSING_MBI`).
    """
    if owners < 1 or iters < 1:
        raise InvalidParameterError(f"owners and iters must be >= 1, not {owners} and {iters}")
    mbi = _mbi()
    Domain, LinearMeasurement, estimation = mbi.Domain, mbi.LinearMeasurement, mbi.estimation

    names = list(domain.names)
    mdomain = Domain(names, [domain.sizes[a] for a in names])
    meas = [LinearMeasurement(np.asarray(one_way_sums[a], float).ravel(), (a,),
                              stddev=float(np.sqrt(2.0 * owners) * one_way_noise[a].scale)) for a in names]
    meas += [LinearMeasurement(np.asarray(clique_sums[c], float).ravel(), tuple(c),
                               stddev=float(np.sqrt(2.0 * owners) * clique_noise[c].scale)) for c in clique_sums]
    model = estimation.mirror_descent(mdomain, meas, iters=iters)
    return compile_plan(model)


def compile_plan(model) -> SamplingPlan:
    """The :class:`SamplingPlan` of a fitted ``mbi.MarkovRandomField`` (its junction tree's elimination order).

    The order and parents are those of mbi's own sampler (``MarkovRandomField.synthetic_data``);
    the draws are not: :func:`sample_codes` samples every row i.i.d. from the caller's uniforms.
    """
    mbi = _mbi()
    junction_tree, marginal_oracles = mbi.junction_tree, mbi.marginal_oracles
    cliques = [set(cl) for cl in model.cliques]
    jtree, elimination_order = junction_tree.make_junction_tree(model.domain, cliques)
    marginals = marginal_oracles.message_passing_stable(model.potentials.expand(list(jtree.nodes)))
    order = list(elimination_order)[::-1]
    steps = []
    used: set[str] = set()
    for col in order:
        relevant = [cl for cl in cliques if col in cl]
        parents = tuple(sorted(used.intersection(set().union(*relevant)), key=order.index)) if relevant else ()
        marg = np.asarray(marginals.project(parents + (col,)).datavector(flatten=False), dtype=float)
        marg = np.clip(marg, 0.0, None)
        totals = marg.sum(axis=-1, keepdims=True)
        size = marg.shape[-1]
        cond = np.divide(marg, totals, out=np.full(marg.shape, 1.0 / size), where=totals > 0)
        cdf = np.cumsum(cond, axis=-1)
        cdf[..., -1] = 1.0
        steps.append((col, parents, cdf))
        used.add(col)
    return SamplingPlan(tuple(steps))


def sample_codes(plan: SamplingPlan, rows: int, uniforms: UniformSource, *, chunk: int = 200_000) -> dict[str, np.ndarray]:
    """``rows`` i.i.d. records from the model: {attribute: int64 codes of shape (rows,)} (post-processing).

    Each attribute in plan order is drawn by inverting its conditional CDF given its parents' codes
    at one uniform from ``uniforms`` (the OS CSPRNG in a release: :func:`fragrelease.rng.diffgen.secure_open_unit`).
    Memory: ``chunk`` rows at a time.

    Raises
    ------
    InvalidParameterError
        ``rows < 0``.
    """
    if rows < 0:
        raise InvalidParameterError(f"rows must be >= 0, not {rows}")
    out: dict[str, list[np.ndarray]] = {name: [] for name, _, _ in plan.steps}
    for start in range(0, rows, chunk):
        m = min(chunk, rows - start)
        got: dict[str, np.ndarray] = {}
        for name, parents, cdf in plan.steps:
            size = cdf.shape[-1]
            table = cdf.reshape(-1, size)
            if parents:
                flat = np.ravel_multi_index(tuple(got[p] for p in parents), cdf.shape[:-1])
            else:
                flat = np.zeros(m, dtype=np.int64)
            u = uniforms(m)
            codes = (u[:, None] >= table[flat]).sum(axis=1)
            got[name] = np.minimum(codes, size - 1).astype(np.int64)
        for name in got:
            out[name].append(got[name])
    return {name: (np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)) for name, parts in out.items()}
