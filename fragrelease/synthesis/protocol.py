"""The marginal-synthesis release kind's protocol: its spec, its three rounds' messages and checks, Spark-free.

``linkage: synthetic`` (docs/specification.md §10). The aggregator's plan is the iDP-IR plan (the
owners, their record counts, ε) with the public collusion bound t; each horizontal owner then runs
three rounds, each written signed under ``owners/<owner>/`` (:data:`ROUND_FILES`):

1. :class:`KeyMessage`: a fresh X25519 key-agreement key for this plan (:mod:`fragrelease.secagg`);
   no data, no spend.
2. once every owner's key is there: :class:`MaskedMessage` of round 2, the owner's counts of every
   1-way and every feature pair plus its noise shares (ε₁ + ε_sel), masked so that only the sum of
   every owner's message decodes (:func:`decode_round`);
3. once every owner's round 2 is there, every party decodes its sums and chooses the same structure
   (:func:`cliques_from_sums`: post-processing), and the owner writes its masked clique counts (ε₂).

The aggregator verifies every message (signature under the owner's configured key, plan, owner, ε,
shapes, the participants' keys), decodes the sums and fits the model. A sum decodes only when every
owner of the plan masked against the plan's participant list with the keys every party verified: a
check cell (each owner's public record count) must decode to the plan's total, or the round is refused.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, Mapping, Optional, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from fragrelease.budget import Epsilon
from fragrelease.errors import InvalidParameterError, ManifestMismatchError, ProtocolError
from fragrelease.protocol.difference import first_difference
from fragrelease.rng.polya import DivisibleDiscreteLaplace
from fragrelease.secagg import decode_vector, parse_public_hex, unmask_sum
from fragrelease.synthesis.domain import DEFAULT_BINS, SynthesisDomain
from fragrelease.synthesis.mechanism import (
    Clique,
    SynthesisBudget,
    choose_tree,
    cliques_to_measure,
    default_collusion_bound,
    feature_pairs,
    features_of,
    honest_parts,
    round_two_cliques,
)

#: The file names of an owner's three messages under ``owners/<owner>/``.
ROUND_FILES = {1: "synthesis-round-1.json", 2: "synthesis-round-2.json", 3: "synthesis-round-3.json"}
#: The rounds whose messages carry masked measurements.
MEASURED_ROUNDS = (2, 3)


@dataclass(frozen=True)
class SynthesisSpec:
    """What one owner measures in a synthetic release (frozen; every field public).

    Attributes
    ----------
    domain : the coded attributes (:class:`~fragrelease.synthesis.domain.SynthesisDomain`: declared
        categories, numeric attributes in ``bins`` equal-width bins of the declared domain).
    budget : the owner's ε_j split (:class:`~fragrelease.synthesis.mechanism.SynthesisBudget`).
    target : the declared label attribute, or None.
    owners : m, the plan's number of owners.
    collusion : t, the owners that may collude with the aggregator (0 ≤ t < m).
    """

    domain: SynthesisDomain
    budget: SynthesisBudget
    target: Optional[str]
    owners: int = 1
    collusion: int = 0

    @property
    def features(self) -> tuple[str, ...]:
        return features_of(self.domain, self.target)

    @property
    def parts(self) -> int:
        """k = m − t: the owners whose noise shares add up to one full noise."""
        return honest_parts(self.owners, self.collusion)

    @property
    def measure_cliques(self) -> tuple[Clique, ...]:
        """Round 2's marginals: every attribute's 1-way, then every feature pair."""
        return round_two_cliques(self.domain, self.target)

    def round_noise(self, number: int, cliques: Sequence[Clique] = ()) -> dict[Clique, DivisibleDiscreteLaplace]:
        """The noise of every marginal of round ``number`` (2; or 3, measuring ``cliques``)."""
        if number == 2:
            return {**self.budget.one_way_noise(self.domain, self.parts),
                    **self.budget.selection_noise(feature_pairs(self.domain, self.target), self.parts)}
        return self.budget.clique_noise(cliques, self.parts)

    def round_epsilon(self, number: int) -> Fraction:
        """ε round ``number`` records before it draws anything: 0 (keys), ε₁ + ε_sel, ε₂."""
        if number == 1:
            return Fraction(0)
        if number == 2:
            return self.budget.one_way + (self.budget.selection if len(self.features) > 1 else Fraction(0))
        return self.budget.cliques

    @property
    def clique_count(self) -> int:
        """c, the number of cliques round 3 measures: the tree's |F| − 1 edges and, with a target, |F| stars."""
        f = len(self.features)
        return (f - 1) + (f if self.target is not None else 0)


def synthesis_spec(attributes: Sequence, epsilon: Fraction, *, target: Optional[str] = None,
                   bins: int = DEFAULT_BINS, owners: int = 1, collusion: Optional[int] = None) -> SynthesisSpec:
    """The spec of one owner from the plan's public terms.

    ``attributes``: the released attributes (:class:`fragrelease.schemas.base.Attribute`, declared
    domains and categories), in the plan's order; ``epsilon``: the owner's ε_j (horizontal: the whole
    ε); ``owners``: m; ``collusion``: t (None: :func:`~fragrelease.synthesis.mechanism.default_collusion_bound`).

    Raises
    ------
    InvalidParameterError
        Fewer than two attributes, a target that is not one of them, ε ≤ 0, bins < 2, t outside
        [0, m − 1], or no clique to measure (a target and a single feature still measure one clique).
    """
    if len(attributes) < 2:
        raise InvalidParameterError(f"linkage: synthetic needs at least 2 released attributes, got {len(attributes)}")
    if bins < 2:
        raise InvalidParameterError(f"synthesis_bins must be >= 2, not {bins}")
    domain = SynthesisDomain.from_schema(attributes, bins={a.name: bins for a in attributes if not a.categorical})
    if target is not None and target not in domain.names:
        raise InvalidParameterError(f"synthesis_target: {target!r} is not a released attribute "
                                    f"(released: {list(domain.names)})")
    t = default_collusion_bound(owners) if collusion is None else int(collusion)
    honest_parts(owners, t)  # t in [0, m − 1]
    spec = SynthesisSpec(domain, SynthesisBudget(Fraction(epsilon)), target, owners, t)
    if spec.clique_count < 1:
        raise InvalidParameterError("linkage: synthetic has no clique to measure: declare at least 2 features")
    return spec


def mask_label(number: int, clique: Sequence[str]) -> str:
    """The mask stream's label of one marginal of round ``number`` (the check cell's: ``attributes = ()``)."""
    return f"round-{number}/" + ("check" if not clique else "\x1f".join(clique))


class MaskedVector(BaseModel):
    """One masked marginal: its attributes and its cells (uint64, flattened C order, base64)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attributes: tuple[str, ...]
    cells: str


class _SignedMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    plan_id: str
    owner: str
    dataset: str
    #: ε this round spent (exact text), recorded in the owner's ledger before the round drew any noise
    epsilon: Epsilon
    n_records: int
    #: t, the plan's collusion bound, as this owner read it
    collusion: int
    #: SHA-256 of the canonical JSON of the content (what the signature binds, with every other field)
    content_digest: str
    #: no table travels with these messages (kept for the one signed-payload format of fragrelease.signing)
    files: tuple[dict, ...] = ()
    created_at: str
    signature: Optional[str] = None

    def signed_fields(self) -> dict[str, Any]:
        """Every field but ``signature``, as JSON values: what the owner signs."""
        return self.model_dump(mode="json", exclude={"signature"})

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)


class KeyMessage(_SignedMessage):
    """Round 1 of one owner: its X25519 key-agreement key for this plan (64 hex characters)."""

    kind: Literal["synthesis-round-1"] = "synthesis-round-1"
    #: a key round spends nothing
    epsilon: Literal["0"] = "0"  # type: ignore[assignment]
    key_agreement: str


class MaskedMessage(_SignedMessage):
    """Round 2 or 3 of one owner: its masked marginals in the round's order, and its masked check cell."""

    kind: Literal["synthesis-round-2", "synthesis-round-3"]
    #: the participants' key-agreement keys this owner masked against (owner → hex), in plan order
    participants: tuple[tuple[str, str], ...]
    vectors: tuple[MaskedVector, ...]
    check: str


def measurements_digest(measurements: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the measurements as canonical JSON (sorted keys, no spaces, no NaN)."""
    body = json.dumps(measurements, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


def key_digest(key_hex: str) -> str:
    return measurements_digest({"key_agreement": key_hex})


def masked_digest(participants: Sequence[tuple[str, str]], vectors: Sequence[MaskedVector], check: str) -> str:
    return measurements_digest({"participants": [list(p) for p in participants],
                                "vectors": [v.model_dump(mode="json") for v in vectors], "check": check})


def _check_common(msg: _SignedMessage, spec: SynthesisSpec, number: int, *, plan_id: str, owner: str,
                  n_records: int) -> None:
    what = f"synthesis round {number}"
    if msg.plan_id != plan_id:
        raise ManifestMismatchError(f"owner {owner!r}: {what} is for plan {msg.plan_id!r}, not {plan_id!r}: refused")
    if msg.owner != owner:
        raise ManifestMismatchError(f"the {what} in the folder of owner {owner!r} names owner {msg.owner!r}: refused "
                                    "(copied or moved from another owner's folder)")
    if Fraction(msg.epsilon) != spec.round_epsilon(number):
        raise ManifestMismatchError(f"owner {owner!r}: {what} spent ε = {msg.epsilon}, the plan gives "
                                    f"{spec.round_epsilon(number)}: refused")
    if msg.n_records != n_records:
        raise ManifestMismatchError(f"owner {owner!r}: {what} covers {msg.n_records} records, the plan "
                                    f"{n_records}: refused")
    if msg.collusion != spec.collusion:
        raise ManifestMismatchError(f"owner {owner!r}: {what} was made for collusion bound t = {msg.collusion}, the "
                                    f"plan's is {spec.collusion}: refused")


def check_key_message(msg: KeyMessage, spec: SynthesisSpec, *, plan_id: str, owner: str, n_records: int) -> str:
    """Check an owner's round 1 against the plan (signature checked by the caller); return its key (hex).

    Raises
    ------
    ManifestMismatchError
        Another plan or owner, ε other than 0, another record count or t, or a digest that does not match.
    ProtocolError
        A key that is not 64 hex characters (:func:`fragrelease.secagg.parse_public_hex`).
    """
    _check_common(msg, spec, 1, plan_id=plan_id, owner=owner, n_records=n_records)
    if key_digest(msg.key_agreement) != msg.content_digest:
        raise ManifestMismatchError(f"owner {owner!r}: synthesis round 1 does not match its content digest: refused")
    parse_public_hex(msg.key_agreement, owner=owner)
    return msg.key_agreement


def check_masked(msg: MaskedMessage, spec: SynthesisSpec, number: int, cliques: Sequence[Clique],
                 participants: Sequence[tuple[str, str]], *, plan_id: str, owner: str, n_records: int
                 ) -> tuple[dict[Clique, np.ndarray], np.ndarray]:
    """Check an owner's round 2 or 3 against the plan; return its masked vectors and check cell (uint64).

    ``cliques``: what the round measures (round 2: :attr:`SynthesisSpec.measure_cliques`; round 3: the
    structure's, :func:`cliques_from_sums`); ``participants``: (owner, key hex) of every owner of the
    plan, in plan order, from their verified round 1.

    Raises
    ------
    ManifestMismatchError
        Another plan or owner, another ε, record count or t, a digest that does not match, masked
        against other participants or keys, or marginals other than ``cliques`` in order.
    ProtocolError
        A vector of the wrong length (:func:`fragrelease.secagg.decode_vector`).
    """
    _check_common(msg, spec, number, plan_id=plan_id, owner=owner, n_records=n_records)
    if msg.kind != f"synthesis-round-{number}":
        raise ManifestMismatchError(f"owner {owner!r}: the file of synthesis round {number} holds a {msg.kind!r}: refused")
    if masked_digest(msg.participants, msg.vectors, msg.check) != msg.content_digest:
        raise ManifestMismatchError(f"owner {owner!r}: synthesis round {number} does not match its content digest: refused")
    if tuple(tuple(p) for p in msg.participants) != tuple(tuple(p) for p in participants):
        diff = first_difference([list(p) for p in msg.participants], [list(p) for p in participants], "participant")
        raise ManifestMismatchError(f"owner {owner!r}: synthesis round {number} was masked against other participants "
                                    f"than the plan's owners and their verified keys ({diff.where if diff else ''}): refused")
    diff = first_difference([list(v.attributes) for v in msg.vectors], [list(c) for c in cliques], "marginal")
    if diff is not None:
        raise ManifestMismatchError(f"owner {owner!r}: synthesis round {number} measures other marginals than the plan "
                                    f"and the structure fix ({diff.where} is {diff.got}, expected {diff.want}): refused")
    sizes = spec.domain.sizes
    out = {}
    for v in msg.vectors:
        size = int(np.prod([sizes[a] for a in v.attributes]))
        out[tuple(v.attributes)] = decode_vector(v.cells, size, owner=owner, what=f"round {number} {list(v.attributes)}")
    return out, decode_vector(msg.check, 1, owner=owner, what=f"round {number} check cell")


def decode_round(masked: Sequence[tuple[Mapping[Clique, np.ndarray], np.ndarray]], cliques: Sequence[Clique], *,
                 total: int, number: int) -> dict[Clique, np.ndarray]:
    """The decoded noisy sums of round ``number`` from every owner's masked vectors (int64, flattened).

    ``masked``: every owner's :func:`check_masked` output, all owners of the plan; ``total``: the
    plan's total record count, which the check cell must decode to.

    Raises
    ------
    ManifestMismatchError
        The check cell does not decode to ``total``: an owner masked against another participant list
        or keys, or a message is missing or foreign; nothing is decoded.
    ProtocolError
        A sum out of range (:func:`fragrelease.secagg.unmask_sum`).
    """
    try:
        check = int(unmask_sum([c for _, c in masked])[0])
    except ProtocolError:  # out of range: the masks did not cancel
        check = None
    if check != total:
        raise ManifestMismatchError(f"synthesis round {number}: the owners' masks do not cancel (the check cell does "
                                    "not decode to the plan's record count): an owner masked against other keys or "
                                    "participants; nothing was decoded, refused")
    return {tuple(c): unmask_sum([m[tuple(c)] for m, _ in masked]) for c in cliques}


def measure_variances(spec: SynthesisSpec) -> dict[Clique, float]:
    """The public noise variance per cell of every decoded sum of round 2 (m owners' shares)."""
    return {c: n.variance_of_sum(spec.owners) for c, n in spec.round_noise(2).items()}


def cliques_from_sums(spec: SynthesisSpec, sums: Mapping[Clique, np.ndarray]) -> tuple[Clique, ...]:
    """The cliques round 3 measures: the maximum spanning tree of the decoded round-2 sums, and the target's star.

    The same on every party (post-processing of the decoded sums and public variances).
    """
    tree = choose_tree(spec.domain, sums, measure_variances(spec), target=spec.target)
    cliques = cliques_to_measure(spec.domain, tree, target=spec.target)
    assert len(cliques) == spec.clique_count  # a spanning tree has |F| − 1 edges
    return cliques
