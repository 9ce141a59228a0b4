"""Audit of a synthetic release's message protocol with the production samplers (Spark-free; issues 49, 51).

:mod:`fragrelease.experiments.audit_synthesis` audits the mechanism functions with seeded shares. This
audit replays what the parties of a synthetic release exchange (docs/specification.md §10, "On the
wire"): real X25519 keys (:class:`~fragrelease.secagg.KeyAgreementKey`), pair keys and masks
(:func:`~fragrelease.secagg.pair_keys`, :func:`~fragrelease.secagg.mask`), the owners' masked messages
(:class:`~fragrelease.synthesis.protocol.MaskedMessage`, JSON, content digest) read back and checked
(:func:`~fragrelease.synthesis.protocol.check_masked`) and decoded (:func:`~fragrelease.synthesis.protocol.decode_round`),
with the noise shares a release draws: :class:`~fragrelease.rng.polya.DivisibleDiscreteLaplace` from
the OS CSPRNG (``source=None``).

**Case** (:func:`protocol_case`). Two binary attributes ``x`` and ``y``; three horizontal owners
``a``, ``b``, ``c`` and the collusion bound t = 2: the aggregator with ``b`` and ``c`` is the strongest
coalition the guarantee covers, and ``a`` (k = 1) alone must carry one full noise. Owner ``a`` holds
D (6 records) or D', which substitutes D's first record (0, 0) by (1, 1), so both 1-ways and the pair
(x, y) move by 2 in L1 (the worst case). The budget split gives round 3 a large share
(:data:`AUDIT_ONE_WAY_SHARE`, :data:`AUDIT_SELECTION_SHARE`: ε₁ = ε/20, ε_sel = ε/100, ε₂ = 0.94 ε),
so a round 3 measured twice loses ε₁ + ε_sel + 2ε₂ = 1.94 ε on this pair while the protocol claims ε.
The shares' divisibility (k ≥ 2 honest owners) is audited by :mod:`~fragrelease.experiments.audit_synthesis`.

**Paths.** ``replay`` (:func:`replay_run`), per run: fresh keys, then every owner's rounds 2 and 3
(:func:`~fragrelease.synthesis.mechanism.measure_shares`, masked, written, read back, checked); the
coalition decodes each round and subtracts its own unmasked vectors; round 3's cliques come from the
decoded round-2 sums (:func:`~fragrelease.synthesis.protocol.cliques_from_sums`). Exact counts are
computed once per fragment (they are fixed). ``batched`` (:func:`batched_view`): the honest owners'
shares for all runs at once through :meth:`~fragrelease.rng.polya.DivisibleDiscreteLaplace.share` with
the same noise objects (the same law per cell); with two features round 3 measures the one pair
whatever the sums (:func:`case_cliques`). The two paths' statistics are tested to have one law.

**Statistic.** The view audited: the coalition's decoded sums minus its own vectors, i.e. the honest
owners' counts plus their shares, per measurement. T is the log-likelihood ratio of the discrete
Laplace between D and D' (:func:`llr`), ``Σ_cells (|z − c_D'| − |z − c_D|) · ln(1/α)`` over every
decoded cell of both rounds (both views of round 3 in ``twice``), α the measurement's public
parameter. Thresholds: ``thresholds`` points evenly over T's whole range ``[−T_max, T_max]``,
``T_max = Σ ‖c_D − c_D'‖₁ · ln(1/α)`` (fixed before any run); the bound is
:func:`fragrelease.experiments.audit.epsilon_bounds` (Clopper–Pearson, α = 1e-6 overall).

**Variants.** ``honest``; ``twice`` (owner a's round 3 measured twice and both sums decoded: what a
missing ledger allows); ``broken-share`` (every owner draws shares for m owners instead of k = m − t,
the design that holds only if nobody colludes: the coalition's view then carries k/m of one noise).
Measured figures: docs/privacy.md, "Audits" (the synthetic protocol).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd
from scipy.signal import fftconvolve

from fragrelease.errors import FragReleaseError, InvalidParameterError
from fragrelease.rng.polya import DivisibleDiscreteLaplace, ShareSource
from fragrelease.secagg import KeyAgreementKey, encode_vector, mask, pair_keys, session_context
from fragrelease.synthesis.domain import CodedAttribute, SynthesisDomain, contingency
from fragrelease.synthesis.mechanism import Clique, SynthesisBudget, add_vectors, cliques_to_measure, measure_shares
from fragrelease.synthesis.protocol import (
    MaskedMessage,
    MaskedVector,
    SynthesisSpec,
    check_masked,
    cliques_from_sums,
    decode_round,
    mask_label,
    masked_digest,
)

from .audit import MIN_RUNS, epsilon_bounds

PLAN_ID = "audit-plan"
OWNERS = ("a", "b", "c")
#: The owners colluding with the aggregator: the last two, so that owner a alone is honest.
AUDIT_COLLUSION = 2
#: The audit's budget split: a large round-3 share, so measuring it twice is a large excess.
AUDIT_ONE_WAY_SHARE = Fraction(1, 20)
AUDIT_SELECTION_SHARE = Fraction(1, 100)
VARIANTS = ("honest", "twice", "broken-share")
PATHS = ("batched", "replay")
#: Thresholds over T's range (fewer: a smaller Bonferroni correction; more: a finer search).
DEFAULT_THRESHOLDS = 41

#: One decoded measurement of a view: (round number, its marginals' cells), flattened C order.
RoundView = tuple[int, dict[Clique, np.ndarray]]


@dataclass(frozen=True)
class ProtocolCase:
    """The audited pair: spec, every owner's fragment and exact counts with owner a on D or on D'.

    ``counts[side][i]``: owner i's exact counts of every marginal it may send (1-ways and the pair),
    ``side`` in ``("d", "n")``. Owners ``k .. m − 1`` (k = m − t) are the coalition's.
    """

    spec: SynthesisSpec
    fragments: dict[str, tuple[pd.DataFrame, ...]]
    counts: dict[str, tuple[dict[Clique, np.ndarray], ...]]

    @property
    def honest(self) -> int:
        return self.spec.parts

    def honest_counts(self, side: str, clique: Clique) -> np.ndarray:
        """Σ over the honest owners of their exact counts of ``clique``, flattened (cells,)."""
        return np.sum([self.counts[side][i][clique] for i in range(self.honest)], axis=0).ravel()


def protocol_case(epsilon: Fraction = Fraction(1), *, one_way_share: Fraction = AUDIT_ONE_WAY_SHARE,
                  selection_share: Fraction = AUDIT_SELECTION_SHARE, collusion: int = AUDIT_COLLUSION) -> ProtocolCase:
    """The case of the module docstring at ``epsilon``. Raises InvalidParameterError for a bad budget or t."""
    dom = SynthesisDomain((CodedAttribute("x", ("0", "1")), CodedAttribute("y", ("0", "1"))))
    spec = SynthesisSpec(dom, SynthesisBudget(Fraction(epsilon), Fraction(one_way_share), Fraction(selection_share)),
                         None, len(OWNERS), collusion)
    spec.parts  # noqa: B018 - t in [0, m − 1], else InvalidParameterError
    d = pd.DataFrame({"x": [0, 0, 1, 1, 0, 1], "y": [0, 1, 1, 0, 0, 1]})
    n = d.copy()
    n.iloc[0] = [1, 1]
    b = pd.DataFrame({"x": [1, 0, 1, 0, 1], "y": [1, 0, 0, 1, 1]})
    c = pd.DataFrame({"x": [0, 0, 1, 1, 1, 0, 1], "y": [0, 1, 1, 1, 0, 0, 1]})
    fragments: dict[str, tuple[pd.DataFrame, ...]] = {"d": (d, b, c), "n": (n, b, c)}
    counts = {side: tuple({m: contingency(f, m, dom.sizes) for m in spec.measure_cliques} for f in frs)
              for side, frs in fragments.items()}
    return ProtocolCase(spec, fragments, counts)


def case_cliques(case: ProtocolCase) -> tuple[Clique, ...]:
    """The cliques round 3 measures: with two features, the one pair whatever the sums."""
    return cliques_to_measure(case.spec.domain, (tuple(case.spec.features),))  # type: ignore[arg-type]


def round_noise(case: ProtocolCase, number: int, cliques: Sequence[Clique], variant: str
                ) -> tuple[dict[Clique, DivisibleDiscreteLaplace], dict[Clique, DivisibleDiscreteLaplace]]:
    """(the spec's calibrated noise of round ``number``, the noise the owners draw): equal unless ``broken-share``."""
    calibrated = case.spec.round_noise(number, cliques)
    if variant != "broken-share":
        return calibrated, calibrated
    return calibrated, {c: DivisibleDiscreteLaplace(nz.alpha, case.spec.owners) for c, nz in calibrated.items()}


def _message(case: ProtocolCase, number: int, cliques: Sequence[Clique], owner: int, pk: dict[str, bytes],
             participants: tuple[tuple[str, str], ...], values: dict[Clique, np.ndarray]) -> MaskedMessage:
    """Owner ``owner``'s masked message of round ``number`` over its count-plus-share ``values``, as written.

    ``pk``: the owner's pair keys (:func:`~fragrelease.secagg.pair_keys`).
    """
    name, n_records = OWNERS[owner], len(case.fragments["d"][owner])
    vectors = tuple(MaskedVector(attributes=c, cells=encode_vector(mask(values[c], own_name=name, keys=pk,
                                                                         label=mask_label(number, c))))
                    for c in cliques)
    check = encode_vector(mask(np.array([n_records]), own_name=name, keys=pk, label=mask_label(number, ())))
    fields: dict[str, Any] = dict(kind=f"synthesis-round-{number}", plan_id=PLAN_ID, owner=name, dataset="audit",
                                  epsilon=case.spec.round_epsilon(number), n_records=n_records,
                                  collusion=case.spec.collusion, created_at="-", participants=participants,
                                  vectors=vectors, check=check,
                                  content_digest=masked_digest(participants, vectors, check))
    return MaskedMessage(**fields)


def _read(case: ProtocolCase, msg: MaskedMessage, number: int, cliques: Sequence[Clique],
          participants: tuple[tuple[str, str], ...]) -> tuple[dict[Clique, np.ndarray], np.ndarray]:
    """A message as a party reads it: parsed from its JSON and checked against the plan."""
    owner = OWNERS.index(msg.owner)
    return check_masked(MaskedMessage.model_validate_json(msg.to_json()), case.spec, number, cliques, participants,
                        plan_id=PLAN_ID, owner=msg.owner, n_records=len(case.fragments["d"][owner]))


def replay_run(case: ProtocolCase, side: str, *, source: Optional[ShareSource] = None,
               variant: str = "honest") -> tuple[RoundView, ...]:
    """One run of the owners' message path with owner a on D (``side="d"``) or D' (``"n"``).

    Returns the coalition's view: per decoded round (round 3 twice in ``twice``), the decoded sums minus
    the coalition's own vectors. ``source`` None: the OS CSPRNG (a release's shares).
    """
    spec, counts, k = case.spec, case.counts[side], case.honest
    keys = [KeyAgreementKey.generate() for _ in OWNERS]
    participants = tuple((o, key.public_hex()) for o, key in zip(OWNERS, keys))
    context = session_context(PLAN_ID, dict(participants))
    pks = [pair_keys(o, key, dict(participants), context=context) for o, key in zip(OWNERS, keys)]
    total = sum(len(f) for f in case.fragments[side])
    views: list[RoundView] = []
    cliques = spec.measure_cliques
    for number in (2, 3):
        drawn = round_noise(case, number, cliques, variant)[1]
        values = [measure_shares(spec.domain, own, drawn, source=source) for own in counts]
        firsts = [values[0]] + ([measure_shares(spec.domain, counts[0], drawn, source=source)]
                                if number == 3 and variant == "twice" else [])
        others = [_read(case, _message(case, number, cliques, i, pks[i], participants, values[i]), number, cliques,
                        participants) for i in range(1, len(OWNERS))]
        own = add_vectors(values[k:])
        for first in firsts:
            mine = _read(case, _message(case, number, cliques, 0, pks[0], participants, first), number, cliques,
                         participants)
            decoded = decode_round([mine, *others], cliques, total=total, number=number)
            views.append((number, {c: decoded[c] - own[c] for c in cliques}))
        if number == 2:
            cliques = cliques_from_sums(spec, decoded)
    return tuple(views)


def _rates(case: ProtocolCase) -> dict[tuple[int, Clique], float]:
    """ln(1/α) of every measurement (round, marginal) of the case: the calibrated, public parameters."""
    return {(number, c): -math.log(float(nz.alpha)) for number, cliques in ((2, case.spec.measure_cliques),
                                                                           (3, case_cliques(case)))
            for c, nz in case.spec.round_noise(number, cliques).items()}


def llr(z: np.ndarray, c_d: np.ndarray, c_n: np.ndarray, rate: float) -> np.ndarray:
    """``Σ_cells (|z − c_D'| − |z − c_D|) · ln(1/α)`` per run: z (runs, cells), counts (cells,); result (runs,)."""
    z = np.asarray(z, float)
    return (np.abs(z - np.ravel(c_n)).sum(axis=1) - np.abs(z - np.ravel(c_d)).sum(axis=1)) * float(rate)


def statistic_of_views(case: ProtocolCase, views: Sequence[Sequence[RoundView]]) -> np.ndarray:
    """T (:func:`llr`, summed over every decoded measurement) of replayed runs, shape (runs,)."""
    rates = _rates(case)
    return np.array([sum(float(llr(z.reshape(1, -1), case.honest_counts("d", c), case.honest_counts("n", c),
                                   rates[(number, c)])[0]) for number, view in run for c, z in view.items())
                     for run in views])


def batched_view(case: ProtocolCase, side: str, runs: int, *, source: Optional[ShareSource] = None,
                 variant: str = "honest") -> list[tuple[int, Clique, np.ndarray]]:
    """The coalition's view of ``runs`` runs: (round, marginal, honest counts + shares of shape (runs, cells)).

    The honest owners' shares are drawn by :meth:`~fragrelease.rng.polya.DivisibleDiscreteLaplace.share`
    (``source`` None: the OS CSPRNG), as :func:`~fragrelease.synthesis.mechanism.measure_shares` draws
    them, all runs in one call per owner and marginal; in ``twice`` owner a's round 3 twice.
    """
    out = []
    for number, cliques in ((2, case.spec.measure_cliques), (3, case_cliques(case))):
        drawn = round_noise(case, number, cliques, variant)[1]
        for c, nz in drawn.items():
            exact = case.honest_counts(side, c)
            cells = exact.size
            rest = sum((nz.share(runs * cells, source).reshape(runs, cells) for _ in range(1, case.honest)),
                       np.zeros((runs, cells), np.int64))
            for _ in range(2 if number == 3 and variant == "twice" else 1):
                out.append((number, c, exact + rest + nz.share(runs * cells, source).reshape(runs, cells)))
    return out


def statistic_of_batch(case: ProtocolCase, view: Sequence[tuple[int, Clique, np.ndarray]]) -> np.ndarray:
    """T (:func:`llr`, summed over every measurement) of a :func:`batched_view`, shape (runs,)."""
    rates = _rates(case)
    return np.sum([llr(z, case.honest_counts("d", c), case.honest_counts("n", c), rates[(number, c)])
                   for number, c, z in view], axis=0)


def statistic_max(case: ProtocolCase, variant: str = "honest") -> float:
    """T_max = Σ ‖c_D − c_D'‖₁ · ln(1/α) over the view's measurements: T's range is [−T_max, T_max]."""
    return float(sum(np.abs(case.honest_counts("d", c) - case.honest_counts("n", c)).sum() * rate
                     * (2 if number == 3 and variant == "twice" else 1) for (number, c), rate in _rates(case).items()))


def _sum_pmf(nz: DivisibleDiscreteLaplace, owners: int) -> np.ndarray:
    """pmf of the sum of ``owners`` shares, NB(owners/parts, α) − NB(owners/parts, α), on z = −J .. J (float)."""
    r, a = owners / nz.parts, float(nz.alpha)
    j = np.arange(int(60 / (1 - a)) + 60)
    log_nb = (np.array([math.lgamma(i + r) - math.lgamma(r) - math.lgamma(i + 1) for i in j])
              + r * math.log1p(-a) + j * math.log(a))
    nb = np.exp(log_nb)
    return np.clip(fftconvolve(nb, nb[::-1]), 0.0, None)


def pair_loss(case: ProtocolCase, variant: str) -> float:
    """The privacy loss of the coalition's view on this pair (numerical; for a fixed round-3 clique set).

    Σ over the view's measurements and cells of ``max_z |ln p(z) − ln p(z + d)|``, d the cell's
    change and p the pmf of the honest owners' shares' sum, over the z where p ≥ 1e-9 (FFT convolution);
    when those shares add up to the discrete Laplace, exactly ``d · ln(1/α)``. Honest: ε₁ + ε_sel + ε₂ ≤ ε.
    """
    loss = 0.0
    for number, cliques in ((2, case.spec.measure_cliques), (3, case_cliques(case))):
        for c, nz in round_noise(case, number, cliques, variant)[1].items():
            copies = 2 if number == 3 and variant == "twice" else 1
            changes = [int(d) for d in np.abs(case.honest_counts("d", c) - case.honest_counts("n", c)) if d]
            if nz.parts == case.honest:  # the discrete Laplace: exactly d · ln(1/α)
                loss += copies * sum(changes) * -math.log(float(nz.alpha))
                continue
            p = _sum_pmf(nz, case.honest)
            for d in changes:
                ok = (p[:-d] >= 1e-9) & (p[d:] >= 1e-9)
                loss += copies * float(np.abs(np.log(p[:-d][ok]) - np.log(p[d:][ok])).max())
    return loss


def protocol_statistic(case: ProtocolCase, side: str, runs: int, *, path: str = "batched",
                       source: Optional[ShareSource] = None, variant: str = "honest") -> np.ndarray:
    """T of ``runs`` fresh runs with owner a on D (``side="d"``) or D' (``"n"``) by ``path``, shape (runs,).

    ``source`` None: the OS CSPRNG (the shares a release draws).
    """
    if path == "batched":
        return statistic_of_batch(case, batched_view(case, side, runs, source=source, variant=variant))
    return statistic_of_views(case, [replay_run(case, side, source=source, variant=variant) for _ in range(runs)])


@dataclass(frozen=True)
class ProtocolAudit:
    """One audit: variant, path, claimed ε, the view's loss on the pair, runs per side, ε bounds, seconds."""

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
                   alpha: float = 1e-6, thresholds: int = DEFAULT_THRESHOLDS, source: Optional[ShareSource] = None
                   ) -> ProtocolAudit:
    """Audit ``variant`` of the protocol on :func:`protocol_case` at ``epsilon`` (module docstring).

    ``pair_loss``: :func:`pair_loss` (honest ε₁ + ε_sel + ε₂ ≤ ε; twice ε₁ + ε_sel + 2ε₂). If the
    variant is ε-DP, the lower bound exceeds ε with probability ≤ ``alpha``.

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
    t_max = statistic_max(case, variant)
    start = time.perf_counter()
    t_d, t_n = (protocol_statistic(case, side, runs, path=path, source=source, variant=variant) for side in ("d", "n"))
    lower, point = epsilon_bounds(t_d, t_n, np.linspace(-t_max, t_max, thresholds), alpha)
    return ProtocolAudit(variant, path, float(epsilon), pair_loss(case, variant), runs, alpha, thresholds, lower, point,
                         time.perf_counter() - start)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m fragrelease.experiments.audit_protocol --variant V --runs N``: one line of results; exit 2 on bad input."""
    p = argparse.ArgumentParser(prog="python -m fragrelease.experiments.audit_protocol",
                                description="Audit the synthetic kind's message protocol with the production samplers.")
    p.add_argument("--variant", choices=VARIANTS, default="honest")
    p.add_argument("--runs", type=int, default=20_000, help="runs per side (default 20,000)")
    p.add_argument("--epsilon", type=Fraction, default=Fraction(1), help="claimed ε (default 1)")
    p.add_argument("--path", choices=PATHS, default="batched",
                   help="batched: the honest shares for all runs in one call; replay: the message path per run")
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
