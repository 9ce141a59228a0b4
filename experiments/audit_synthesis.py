"""Empirical privacy audit of one owner's marginal-synthesis outputs on a neighbouring pair (Spark-free).

What an owner of a marginal-synthesis release hands over (docs/specification.md §10): its noisy 1-way
marginals, its privately chosen tree edges, and the noisy counts of the cliques measured in round
two. The audit runs :func:`fragrelease.synthesis.mechanism.measure_round_one` and
:func:`~fragrelease.synthesis.mechanism.measure_cliques` (the release's own code) many times on a
small fragment D and on a neighbour D' (one record substituted by one that differs in every
attribute, so every count vector moves by 2, the worst case), reduces each output to the
likelihood-ratio statistic of its Laplace measurements

    T = Σ over the output's marginals Σ_cells (|z − c'| − |z − c|) / b

(c, c': the exact counts of that marginal on D and D'; b: its public scale), which is a function of
the output alone, and bounds ε from below with :func:`fragrelease.experiments.audit.audit_statistic`
(Clopper–Pearson, α = 1e-6 by default). A correct mechanism gives a bound ≤ ε with probability
≥ 1 − α; a mechanism with too little noise is caught when its loss exceeds ε. The cliques measured
are the tree this owner chose (one owner: the aggregator's vote is that tree).
"""
from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Optional

import numpy as np
import pandas as pd

from fragrelease.rng.diffgen import DiffGenRandomness
from fragrelease.rng.laplace import NoiseSource
from fragrelease.synthesis.domain import CodedAttribute, SynthesisDomain, contingency
from fragrelease.synthesis.mechanism import SynthesisBudget, cliques_to_measure, measure_cliques, measure_round_one

from .audit import StatisticAudit, audit_statistic


def small_case() -> tuple[SynthesisDomain, pd.DataFrame, pd.DataFrame]:
    """Three attributes (2, 2 and 3 codes), a fragment D of 8 records and D' with its first record substituted."""
    dom = SynthesisDomain((CodedAttribute("a", ("0", "1")), CodedAttribute("b", ("0", "1")),
                           CodedAttribute("c", ("0", "1", "2"))))
    d = pd.DataFrame({"a": [0, 0, 1, 1, 0, 1, 0, 1], "b": [0, 0, 1, 1, 0, 1, 1, 0], "c": [0, 1, 2, 2, 0, 1, 2, 0]})
    n = d.copy()
    n.iloc[0] = [1, 1, 2]
    return dom, d, n


def synthesis_statistic(dom: SynthesisDomain, d: pd.DataFrame, n: pd.DataFrame, budget: SynthesisBudget, *,
                        runs: int, randomness: DiffGenRandomness, noise: Optional[NoiseSource],
                        on: str, target: Optional[str] = None) -> np.ndarray:
    """T of ``runs`` fresh runs of one owner's two rounds on D (``on="d"``) or D' (``on="n"``), shape (runs,)."""
    data = d if on == "d" else n
    sizes = dom.sizes
    pairs = list(itertools.combinations([a for a in dom.names if a != target], 2))
    one = {a: contingency(data, (a,), sizes) for a in dom.names}
    two = {p: contingency(data, p, sizes) for p in pairs}
    exact_d: dict[tuple[str, ...], np.ndarray] = {c: contingency(d, c, sizes) for c in [(a,) for a in dom.names] + pairs}
    exact_n: dict[tuple[str, ...], np.ndarray] = {c: contingency(n, c, sizes) for c in [(a,) for a in dom.names] + pairs}
    if target is not None:
        for f in dom.names:
            if f != target:
                exact_d[(target, f)] = contingency(d, (target, f), sizes)
                exact_n[(target, f)] = contingency(n, (target, f), sizes)
    one_noise = budget.one_way_noise(dom)
    out = np.empty(runs)
    for r in range(runs):
        first = measure_round_one(dom, one, two, budget, target=target, randomness=randomness, noise=noise)
        cliques = cliques_to_measure(dom, first.edges, target=target)
        clique_counts = {c: contingency(data, c, sizes) for c in cliques}
        second = measure_cliques(dom, clique_counts, cliques, budget, noise=noise)
        clique_noise = budget.clique_noise(dom, cliques)
        t = 0.0
        for a, z in first.one_way.items():
            t += float((np.abs(z - exact_n[(a,)]) - np.abs(z - exact_d[(a,)])).sum()) / one_noise[a].scale
        for c, z in second.items():
            t += float((np.abs(z - exact_n[c]) - np.abs(z - exact_d[c])).sum()) / clique_noise[c].scale
        out[r] = t
    return out


def audit_synthesis(epsilon: Fraction, *, runs: int, randomness: DiffGenRandomness, noise: Optional[NoiseSource],
                    alpha: float = 1e-6) -> StatisticAudit:
    """Audit one owner's outputs on :func:`small_case` at ``epsilon`` (module docstring)."""
    dom, d, n = small_case()
    budget = SynthesisBudget(Fraction(epsilon))

    def sample(on: str):
        return lambda r: synthesis_statistic(dom, d, n, budget, runs=r, randomness=randomness, noise=noise, on=on)

    return audit_statistic(sample("d"), sample("n"), epsilon=float(epsilon), runs=runs, alpha=alpha,
                           name="synthesis likelihood ratio")
