"""Empirical privacy audit of the synthetic kind's aggregated mechanism against a colluding coalition (Spark-free).

What a synthetic release (docs/specification.md §10) lets the strongest adversary its guarantee covers
see: the aggregator together with t of the m owners. Every measurement is decoded only as the sum over
all owners of ``counts + noise share`` (secure aggregation); the coalition knows its own counts and
shares, so what it learns of the k = m − t honest owners is, per measurement, the decoded sum minus its
own vectors = ``Σ_honest (counts + shares)``, whose noise is the honest owners' k shares: exactly a
discrete Laplace DLap(α) when the shares are calibrated for k (:mod:`fragrelease.rng.polya`).

**Case** (:func:`synthesis_case`). Three attributes (2, 2 and 3 codes, :func:`small_case`), m owners of
which the last t collude; the first (honest) owner holds D (8 records) or D', D with its first record
substituted by one that differs in every attribute, so every count vector moves by 2 in L1 (the worst
case); the other owners hold fixed fragments.

**A run** (:func:`synthesis_statistic`) goes through the release's own code: every owner's round 2
(:func:`~fragrelease.synthesis.mechanism.measure_shares` with the spec's
:meth:`~fragrelease.synthesis.protocol.SynthesisSpec.round_noise`), the decoded sums
(:func:`~fragrelease.synthesis.mechanism.add_vectors`, what secure aggregation decodes), round 3's
cliques from the decoded sums (:func:`~fragrelease.synthesis.protocol.cliques_from_sums`,
post-processing), every owner's round 3, and the coalition's view: the decoded sums minus the
coalition's own vectors. The view is reduced to the likelihood-ratio statistic of the discrete Laplace

    T = Σ over the measurements Σ_cells (|z − c'| − |z − c|) · ln(1/α)

(z: the view's cells; c, c': the honest owners' exact counts of that marginal on D and D'; α: that
measurement's public parameter), a function of the view alone, and ε is bounded from below with
:func:`fragrelease.experiments.audit.audit_statistic` (Clopper–Pearson, α = 1e-6 by default). A correct
mechanism gives a bound ≤ ε with probability ≥ 1 − α. ``share_parts`` breaks it on purpose: every owner
draws shares for ``share_parts`` owners instead of k (e.g. m, the design that holds only if nobody
colludes), so the honest view carries k/m of one noise and the loss exceeds ε.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

import numpy as np
import pandas as pd

from fragrelease.rng.polya import DivisibleDiscreteLaplace, ShareSource
from fragrelease.synthesis.domain import CodedAttribute, SynthesisDomain, contingency
from fragrelease.synthesis.mechanism import Clique, SynthesisBudget, add_vectors, measure_shares
from fragrelease.synthesis.protocol import SynthesisSpec, cliques_from_sums

from .audit import StatisticAudit, audit_statistic

#: The audited plan's default m and t (the default t for three owners): two honest owners, whose shares
#: must add up to one full noise (k = 2), and one colluding with the aggregator.
AUDIT_OWNERS = 3
AUDIT_COLLUSION = 1


def small_case() -> tuple[SynthesisDomain, pd.DataFrame, pd.DataFrame]:
    """Three attributes (2, 2 and 3 codes), a fragment D of 8 records and D' with its first record substituted."""
    dom = SynthesisDomain((CodedAttribute("a", ("0", "1")), CodedAttribute("b", ("0", "1")),
                           CodedAttribute("c", ("0", "1", "2"))))
    d = pd.DataFrame({"a": [0, 0, 1, 1, 0, 1, 0, 1], "b": [0, 0, 1, 1, 0, 1, 1, 0], "c": [0, 1, 2, 2, 0, 1, 2, 0]})
    n = d.copy()
    n.iloc[0] = [1, 1, 2]
    return dom, d, n


@dataclass(frozen=True)
class SynthesisCase:
    """The audited plan: its spec, every owner's exact counts of every marginal with owner 0 on D or D'.

    ``counts[side][i]``: owner i's counts of every 1-way and every attribute pair, ``side`` in ``("d", "n")``;
    owners ``m − t .. m − 1`` are the coalition's.
    """

    spec: SynthesisSpec
    counts: dict[str, tuple[dict[Clique, np.ndarray], ...]]

    @property
    def honest(self) -> int:
        return self.spec.owners - self.spec.collusion

    def honest_counts(self, side: str, clique: Clique) -> np.ndarray:
        """Σ over the honest owners of their exact counts of ``clique`` (flattened)."""
        return np.sum([self.counts[side][i][clique] for i in range(self.honest)], axis=0).ravel()


def synthesis_case(epsilon: Fraction = Fraction(1), *, owners: int = AUDIT_OWNERS,
                   collusion: int = AUDIT_COLLUSION) -> SynthesisCase:
    """The case of the module docstring. Raises InvalidParameterError for a bad ε or t outside [0, m − 1]."""
    dom, d, n = small_case()
    spec = SynthesisSpec(dom, SynthesisBudget(Fraction(epsilon)), None, owners, collusion)
    spec.parts  # noqa: B018 - t in [0, m − 1], else InvalidParameterError
    sizes = dom.sizes
    others = [pd.DataFrame({a: (d[a].to_numpy() + i + j) % sizes[a] for j, a in enumerate(dom.names)})
              for i in range(1, owners)]
    marginals = list(spec.measure_cliques)
    counts = {side: tuple({c: contingency(f, c, sizes) for c in marginals} for f in (first, *others))
              for side, first in (("d", d), ("n", n))}
    return SynthesisCase(spec, counts)


def _noise(noise: dict[Clique, DivisibleDiscreteLaplace], parts: Optional[int]) -> dict[Clique, DivisibleDiscreteLaplace]:
    return noise if parts is None else {c: DivisibleDiscreteLaplace(nz.alpha, parts) for c, nz in noise.items()}


def _llr(case: SynthesisCase, view: dict[Clique, np.ndarray], noise: dict[Clique, DivisibleDiscreteLaplace]) -> float:
    t = 0.0
    for c, z in view.items():
        c_d, c_n = case.honest_counts("d", c), case.honest_counts("n", c)
        t += float((np.abs(z - c_n) - np.abs(z - c_d)).sum()) * -math.log(float(noise[c].alpha))
    return t


def synthesis_statistic(case: SynthesisCase, side: str, runs: int, *, source: Optional[ShareSource],
                        share_parts: Optional[int] = None) -> np.ndarray:
    """T of ``runs`` fresh runs of both measured rounds with owner 0 on D (``side="d"``) or D' (``"n"``), shape (runs,).

    ``source``: the owners' share source (None: the OS CSPRNG; tests pass a seeded one);
    ``share_parts``: None for the release's shares (k = m − t), else the broken variant's parts.
    """
    spec, counts = case.spec, case.counts[side]
    k = case.honest
    plans: dict[tuple[int, tuple[Clique, ...]], tuple[dict, dict]] = {}  # the public noise of each round and cliques
    out = np.empty(runs)
    for r in range(runs):
        t = 0.0
        cliques = spec.measure_cliques
        for number in (2, 3):
            if (number, cliques) not in plans:
                calibrated = spec.round_noise(number, cliques)
                plans[(number, cliques)] = calibrated, _noise(calibrated, share_parts)
            noise, drawn = plans[(number, cliques)]
            vectors = [measure_shares(spec.domain, owner, drawn, source=source) for owner in counts]
            decoded = add_vectors(vectors)
            own = add_vectors(vectors[k:]) if k < len(vectors) else {c: 0 for c in decoded}
            t += _llr(case, {c: decoded[c] - own[c] for c in decoded}, noise)
            if number == 2:
                cliques = cliques_from_sums(spec, decoded)
        out[r] = t
    return out


def audit_synthesis(epsilon: Fraction, *, runs: int, source: Optional[ShareSource], owners: int = AUDIT_OWNERS,
                    collusion: int = AUDIT_COLLUSION, share_parts: Optional[int] = None,
                    alpha: float = 1e-6) -> StatisticAudit:
    """Audit the coalition's view on :func:`synthesis_case` at ``epsilon`` (module docstring).

    Raises InvalidParameterError for fewer than 1,000 runs, a bad ε, t or ``share_parts``.
    """
    case = synthesis_case(Fraction(epsilon), owners=owners, collusion=collusion)

    def sample(side: str):
        return lambda r: synthesis_statistic(case, side, r, source=source, share_parts=share_parts)

    return audit_statistic(sample("d"), sample("n"), epsilon=float(epsilon), runs=runs, alpha=alpha,
                           name="synthesis likelihood ratio (coalition view)")
