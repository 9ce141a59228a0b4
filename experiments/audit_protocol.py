"""Audit of a synthetic release's message protocol with the production samplers (Spark-free; issue 49 item 5).

:mod:`fragrelease.experiments.audit_synthesis` audits one owner's mechanism functions with seeded
numpy noise. This audit replays what the parties of a synthetic release exchange (docs/specification.md
§10, "On the wire") with the samplers a release uses: Laplace noise from OpenDP's sampler
(:class:`fragrelease.rng.laplace.SecureLaplace`, via ``noise=None``) and the tree selection from
OpenDP's exact report-noisy-max (:class:`fragrelease.rng.diffgen.SecureDiffGenRandomness`), both
from the OS CSPRNG.

**Case** (:func:`protocol_case`). Two binary attributes ``x`` and ``y``; three horizontal owners
``a``, ``b``, ``c``; owner ``a`` holds D (6 records) or D', which substitutes D's first record
(0, 0) by (1, 1), so both 1-way marginals and the clique (x, y) move by 2 in L1 (the worst case).
The budget split gives round two a large share (:data:`AUDIT_ONE_WAY_SHARE`,
:data:`AUDIT_SELECTION_SHARE`: ε₁ = ε/20, ε_sel = ε/100, ε₂ = 0.94 ε), so a round two measured twice
loses ε₁ + 2ε₂ = 1.93 ε on this pair (the selection has a single candidate with two features and
leaks nothing) while the protocol claims ε.

**Paths.** ``replay`` (:func:`replay_run`), per run: every owner measures round one
(:func:`~fragrelease.synthesis.mechanism.measure_round_one`), writes it as a
:class:`~fragrelease.synthesis.protocol.RoundOneMessage` (JSON, content digest), which is read back and
checked (:func:`~fragrelease.synthesis.protocol.check_round_one`); the cliques come from the owners'
vote (:func:`~fragrelease.synthesis.protocol.cliques_from_round_one`); every owner measures them
(:func:`~fragrelease.synthesis.mechanism.measure_cliques`) into a checked
:class:`~fragrelease.synthesis.protocol.RoundTwoMessage`; the aggregator adds the owners
(:func:`~fragrelease.synthesis.mechanism.add_owners`). Exact counts are computed once per fragment
(they are fixed). About 11 ms a run. ``batched`` (:func:`batched_view`): owner a's noisy marginals
for all runs at once, drawn through the call the mechanism makes
(:meth:`fragrelease.rng.laplace.LaplaceNoise.sample` with the same calibrated
:class:`~fragrelease.rng.laplace.LaplaceNoise` objects: one OpenDP measurement over the whole batch,
the same law per value); the selection is not drawn (the statistic ignores it and with two features
the clique set is fixed, :func:`case_cliques`). The two paths' statistics are tested to have one law.

**Statistic.** The view audited is the strongest a party has: owner a's checked messages (the
aggregator's sums and the rows are post-processing of all messages; the other owners' messages do
not depend on the substituted record). T is the log-likelihood ratio of their Laplace measurements
between D and D' (:func:`llr`), ``Σ_cells (|z − c_D'| − |z − c_D|) / b`` over every noisy cell of
both rounds (both copies of round two in the ``twice`` variant) with the calibrated scales b; the
selection output is ignored (a valid, weaker statistic). Thresholds: ``thresholds`` points evenly over
T's whole range ``[−T_max, T_max]``, ``T_max = Σ ‖c_D − c_D'‖₁ / b`` (fixed before any run), and the
bound is :func:`fragrelease.experiments.audit.epsilon_bounds` (Clopper–Pearson, α = 1e-6 overall).

**Variants.** ``honest``; ``twice`` (owner a's round two measured twice and both messages seen: what a
missing ledger allows; loss ε₁ + 2ε₂); ``half-noise`` (every Laplace scale halved, :class:`ScaledNoise`).
Measured figures: docs/privacy.md, "Audits" (the synthetic protocol).
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from fragrelease.errors import FragReleaseError, InvalidParameterError
from fragrelease.rng.diffgen import DiffGenRandomness, SecureDiffGenRandomness
from fragrelease.rng.laplace import LaplaceNoise, NoiseSource, SecureLaplace
from fragrelease.synthesis.domain import CodedAttribute, SynthesisDomain, contingency
from fragrelease.synthesis.mechanism import (
    Clique,
    RoundOne,
    SynthesisBudget,
    add_owners,
    cliques_to_measure,
    measure_cliques,
    measure_round_one,
)
from fragrelease.synthesis.protocol import (
    Measurement,
    RoundOneMessage,
    RoundTwoMessage,
    SynthesisSpec,
    check_round_one,
    check_round_two,
    cliques_from_round_one,
    round_one_digest,
    round_two_digest,
)

from .audit import MIN_RUNS, epsilon_bounds

PLAN_ID = "audit-plan"
OWNERS = ("a", "b", "c")
#: The audit's budget split: a large round-two share, so measuring it twice is a large excess.
AUDIT_ONE_WAY_SHARE = Fraction(1, 20)
AUDIT_SELECTION_SHARE = Fraction(1, 100)
VARIANTS = ("honest", "twice", "half-noise")
PATHS = ("batched", "replay")
#: Thresholds over T's range (fewer: a smaller Bonferroni correction; more: a finer search).
DEFAULT_THRESHOLDS = 41


class ScaledNoise:
    """A broken sampler: ``inner`` with every Laplace scale multiplied by ``factor`` (a :class:`NoiseSource`)."""

    def __init__(self, inner: NoiseSource, factor: float) -> None:
        self._inner, self._factor = inner, float(factor)

    def perturb(self, values, scales, attributes, clusters):
        return self._inner.perturb(values, np.asarray(scales, float) * self._factor, attributes, clusters)


@dataclass(frozen=True)
class ProtocolCase:
    """The audited pair: spec, every owner's fragment and exact marginal counts with owner a on D or on D'.

    ``counts[side][i]``: owner i's exact counts of every marginal it may send (1-ways and the clique),
    ``side`` in ``("d", "n")``.
    """

    spec: SynthesisSpec
    fragments: dict[str, tuple[pd.DataFrame, ...]]
    counts: dict[str, tuple[dict[Clique, np.ndarray], ...]]


def protocol_case(epsilon: Fraction = Fraction(1), *, one_way_share: Fraction = AUDIT_ONE_WAY_SHARE,
                  selection_share: Fraction = AUDIT_SELECTION_SHARE) -> ProtocolCase:
    """The case of the module docstring at ``epsilon``. Raises InvalidParameterError for a bad budget."""
    dom = SynthesisDomain((CodedAttribute("x", ("0", "1")), CodedAttribute("y", ("0", "1"))))
    spec = SynthesisSpec(dom, SynthesisBudget(Fraction(epsilon), Fraction(one_way_share), Fraction(selection_share)),
                         None)
    d = pd.DataFrame({"x": [0, 0, 1, 1, 0, 1], "y": [0, 1, 1, 0, 0, 1]})
    n = d.copy()
    n.iloc[0] = [1, 1]
    b = pd.DataFrame({"x": [1, 0, 1, 0, 1], "y": [1, 0, 0, 1, 1]})
    c = pd.DataFrame({"x": [0, 0, 1, 1, 1, 0, 1], "y": [0, 1, 1, 1, 0, 0, 1]})
    marginals = [(a,) for a in dom.names] + [tuple(dom.names)]
    fragments: dict[str, tuple[pd.DataFrame, ...]] = {"d": (d, b, c), "n": (n, b, c)}
    counts = {side: tuple({m: contingency(f, m, dom.sizes) for m in marginals} for f in frs)
              for side, frs in fragments.items()}
    return ProtocolCase(spec, fragments, counts)


def case_cliques(case: ProtocolCase) -> tuple[Clique, ...]:
    """The cliques round two measures: with two features, the one edge whatever the vote."""
    return cliques_to_measure(case.spec.domain, (tuple(case.spec.features),))  # type: ignore[arg-type]


def _round_one(spec: SynthesisSpec, owner: str, counts: dict[Clique, np.ndarray], n_records: int,
               randomness: DiffGenRandomness, noise: Optional[NoiseSource]) -> RoundOneMessage:
    dom = spec.domain
    feats = spec.features
    pairs = [(a, b) for i, a in enumerate(feats) for b in feats[i + 1:]]
    r1 = measure_round_one(dom, {a: counts[(a,)] for a in dom.names}, {p: counts[p] for p in pairs}, spec.budget,
                           target=spec.target, randomness=randomness, noise=noise)
    one_way = tuple(Measurement.of((a,), r1.one_way[a]) for a in dom.names)
    return RoundOneMessage(plan_id=PLAN_ID, owner=owner, dataset="audit", epsilon=spec.round_one_epsilon,
                           n_records=n_records, content_digest=round_one_digest(one_way, r1.edges),
                           created_at="-", one_way=one_way, edges=r1.edges)


def _round_two(spec: SynthesisSpec, owner: str, counts: dict[Clique, np.ndarray], n_records: int,
               cliques: Sequence[Clique], noise: Optional[NoiseSource]) -> RoundTwoMessage:
    measured = measure_cliques(spec.domain, {c: counts[c] for c in cliques}, cliques, spec.budget, noise=noise)
    ms = tuple(Measurement.of(c, measured[c]) for c in cliques)
    return RoundTwoMessage(plan_id=PLAN_ID, owner=owner, dataset="audit", epsilon=spec.round_two_epsilon,
                           n_records=n_records, content_digest=round_two_digest(ms), created_at="-", cliques=ms)


@dataclass(frozen=True)
class OwnerView:
    """Owner a's checked messages of one run: its round one and every round-two message a party reads."""

    round_one: RoundOne
    round_two: tuple[dict[Clique, np.ndarray], ...]
    cliques: tuple[Clique, ...]


def replay_run(case: ProtocolCase, side: str, *, randomness: DiffGenRandomness, noise: Optional[NoiseSource],
               round_two_times: int = 1) -> OwnerView:
    """One run of the three owners' message path with owner a on D (``side="d"``) or D' (``"n"``)."""
    spec = case.spec
    frs, counts = case.fragments[side], case.counts[side]
    msgs = [RoundOneMessage.model_validate_json(_round_one(spec, o, k, len(f), randomness, noise).to_json())
            for o, k, f in zip(OWNERS, counts, frs)]
    rounds = [check_round_one(m, spec, plan_id=PLAN_ID, owner=o, n_records=len(f))
              for m, o, f in zip(msgs, OWNERS, frs)]
    cliques = cliques_from_round_one(spec, rounds)
    seen: list[dict[Clique, np.ndarray]] = []
    measured = []
    for i, (o, k, f) in enumerate(zip(OWNERS, counts, frs)):
        for _ in range(round_two_times if i == 0 else 1):
            m2 = RoundTwoMessage.model_validate_json(_round_two(spec, o, k, len(f), cliques, noise).to_json())
            checked = check_round_two(m2, spec, cliques, plan_id=PLAN_ID, owner=o, n_records=len(f))
            if i == 0:
                seen.append(checked)
        measured.append(checked)
    add_owners(rounds, measured)  # the aggregator's combination (post-processing of the messages)
    return OwnerView(rounds[0], tuple(seen), tuple(cliques))


def llr(z: np.ndarray, c_d: np.ndarray, c_n: np.ndarray, scale: float) -> np.ndarray:
    """``Σ_cells (|z − c_D'| − |z − c_D|) / b`` per run: z of shape (runs, cells), counts (cells,); result (runs,)."""
    z = np.asarray(z, float)
    return (np.abs(z - np.ravel(c_n)).sum(axis=1) - np.abs(z - np.ravel(c_d)).sum(axis=1)) / float(scale)


def _scales(case: ProtocolCase, cliques: Sequence[Clique]) -> dict[Clique, float]:
    dom, budget = case.spec.domain, case.spec.budget
    out: dict[Clique, float] = {(a,): nz.scale for a, nz in budget.one_way_noise(dom).items()}
    out.update({c: nz.scale for c, nz in budget.clique_noise(dom, cliques).items()})
    return out


def statistic_of_views(case: ProtocolCase, views: Sequence[OwnerView]) -> np.ndarray:
    """T (:func:`llr`, summed over every marginal) of replayed runs, shape (runs,)."""
    out = np.empty(len(views))
    ex_d, ex_n = case.counts["d"][0], case.counts["n"][0]
    for r, v in enumerate(views):
        scales = _scales(case, v.cliques)
        t = sum(float(llr(z.reshape(1, -1), ex_d[(a,)], ex_n[(a,)], scales[(a,)])[0])
                for a, z in v.round_one.one_way.items())
        t += sum(float(llr(z.reshape(1, -1), ex_d[c], ex_n[c], scales[c])[0]) for two in v.round_two
                 for c, z in two.items())
        out[r] = t
    return out


def batched_view(case: ProtocolCase, side: str, runs: int, *, noise: Optional[NoiseSource],
                 round_two_times: int = 1) -> dict[Clique, list[np.ndarray]]:
    """Owner a's noisy marginals of ``runs`` runs: {marginal: one array (runs, cells) per message holding it}.

    Drawn by :meth:`~fragrelease.rng.laplace.LaplaceNoise.sample` (``source=noise``; None: OpenDP's
    sampler from the OS CSPRNG), as :func:`~fragrelease.synthesis.mechanism.measure_round_one` and
    :func:`~fragrelease.synthesis.mechanism.measure_cliques` draw them, all runs in one call.
    """
    dom, budget = case.spec.domain, case.spec.budget
    exact = case.counts[side][0]
    cliques = case_cliques(case)
    plan: list[tuple[Clique, LaplaceNoise, int]] = [((a,), nz, 1) for a, nz in budget.one_way_noise(dom).items()]
    plan += [(c, nz, round_two_times) for c, nz in budget.clique_noise(dom, cliques).items()]
    out: dict[Clique, list[np.ndarray]] = {}
    for m, nz, times in plan:
        cells = exact[m].size
        for _ in range(times):
            z = nz.sample(values=np.tile(exact[m].ravel().astype(float), runs), source=noise)
            out.setdefault(m, []).append(z.reshape(runs, cells))
    return out


def statistic_of_batch(case: ProtocolCase, view: dict[Clique, list[np.ndarray]]) -> np.ndarray:
    """T (:func:`llr`, summed over every marginal and message) of a :func:`batched_view`, shape (runs,)."""
    scales = _scales(case, case_cliques(case))
    ex_d, ex_n = case.counts["d"][0], case.counts["n"][0]
    return np.sum([llr(z, ex_d[m], ex_n[m], scales[m]) for m, zs in view.items() for z in zs], axis=0)


def statistic_max(case: ProtocolCase, round_two_times: int = 1) -> float:
    """T_max = Σ ‖c_D − c_D'‖₁ / b over owner a's messages: T's range is [−T_max, T_max] (triangle inequality)."""
    scales = _scales(case, case_cliques(case))
    ex_d, ex_n = case.counts["d"][0], case.counts["n"][0]
    return float(sum(np.abs(ex_d[m] - ex_n[m]).sum() / b * (round_two_times if len(m) > 1 else 1)
                     for m, b in scales.items()))


def protocol_statistic(case: ProtocolCase, side: str, runs: int, *, path: str = "batched",
                       randomness: Optional[DiffGenRandomness] = None, noise: Optional[NoiseSource] = None,
                       round_two_times: int = 1) -> np.ndarray:
    """T of ``runs`` fresh runs with owner a on D (``side="d"``) or D' (``"n"``) by ``path``, shape (runs,).

    ``randomness`` None: the production selection (replay only); ``noise`` None: OpenDP's Laplace sampler.
    """
    if path == "batched":
        return statistic_of_batch(case, batched_view(case, side, runs, noise=noise, round_two_times=round_two_times))
    rnd = randomness if randomness is not None else SecureDiffGenRandomness()
    return statistic_of_views(case, [replay_run(case, side, randomness=rnd, noise=noise,
                                                round_two_times=round_two_times) for _ in range(runs)])


@dataclass(frozen=True)
class ProtocolAudit:
    """One audit: variant, path, claimed ε, the pair's Laplace loss, runs per side, ε bounds, seconds."""

    variant: str
    path: str
    epsilon: float
    pair_loss: float
    runs: int
    alpha: float
    thresholds: int
    epsilon_lower_bound: float
    epsilon_point_estimate: float
    seconds: float


def audit_protocol(variant: str, *, runs: int, epsilon: Fraction = Fraction(1), path: str = "batched",
                   alpha: float = 1e-6, thresholds: int = DEFAULT_THRESHOLDS,
                   randomness: Optional[DiffGenRandomness] = None, noise: Optional[NoiseSource] = None
                   ) -> ProtocolAudit:
    """Audit ``variant`` of the protocol on :func:`protocol_case` at ``epsilon`` (module docstring).

    ``pair_loss``: the Laplace measurements' privacy loss on this pair with the scales used
    (honest ε₁ + ε₂ ≤ ε; twice ε₁ + 2ε₂; half-noise 2(ε₁ + ε₂)). If the variant is ε-DP, the lower
    bound exceeds ε with probability ≤ ``alpha``.

    Raises
    ------
    InvalidParameterError
        An unknown variant or path, fewer than :data:`MIN_RUNS` runs, fewer than 2 thresholds, or a bad ε.
    """
    if variant not in VARIANTS or path not in PATHS:
        raise InvalidParameterError(f"variant must be one of {VARIANTS} and path one of {PATHS}, not {variant!r}, "
                                    f"{path!r}")
    if runs < MIN_RUNS or thresholds < 2:
        raise InvalidParameterError(f"an audit needs at least {MIN_RUNS} runs and 2 thresholds, not {runs}, "
                                    f"{thresholds}")
    case = protocol_case(Fraction(epsilon))
    times = 2 if variant == "twice" else 1
    factor = 0.5 if variant == "half-noise" else 1.0
    source = noise
    if variant == "half-noise":
        source = ScaledNoise(noise if noise is not None else SecureLaplace(), factor)
    t_max = statistic_max(case, times)
    start = time.perf_counter()
    t_d, t_n = (protocol_statistic(case, side, runs, path=path, randomness=randomness, noise=source,
                                   round_two_times=times) for side in ("d", "n"))
    lower, point = epsilon_bounds(t_d, t_n, np.linspace(-t_max, t_max, thresholds), alpha)
    return ProtocolAudit(variant, path, float(epsilon), t_max / factor, runs, alpha, thresholds, lower, point,
                         time.perf_counter() - start)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m fragrelease.experiments.audit_protocol --variant V --runs N``: one line of results; exit 2 on bad input."""
    p = argparse.ArgumentParser(prog="python -m fragrelease.experiments.audit_protocol",
                                description="Audit the synthetic kind's message protocol with the production samplers.")
    p.add_argument("--variant", choices=VARIANTS, default="honest")
    p.add_argument("--runs", type=int, default=20_000, help="runs per side (default 20,000)")
    p.add_argument("--epsilon", type=Fraction, default=Fraction(1), help="claimed ε (default 1)")
    p.add_argument("--path", choices=PATHS, default="batched",
                   help="batched: owner a's noise for all runs in one OpenDP call; replay: the message path per run")
    p.add_argument("--alpha", type=float, default=1e-6)
    args = p.parse_args(argv)
    try:
        r = audit_protocol(args.variant, runs=args.runs, epsilon=args.epsilon, path=args.path, alpha=args.alpha)
    except FragReleaseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"variant={r.variant} path={r.path} epsilon={r.epsilon:g} pair_loss={r.pair_loss:.3f} runs={r.runs} "
          f"alpha={r.alpha:g} lower_bound={r.epsilon_lower_bound:.3f} point={r.epsilon_point_estimate:.3f} "
          f"seconds={r.seconds:.1f}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
