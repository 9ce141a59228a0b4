"""The marginal-synthesis release kind's protocol: its spec, its two rounds' messages and their checks, Spark-free.

``linkage: synthetic`` (docs/specification.md §10). The aggregator's plan is the iDP-IR plan (the
owners, their record counts, ε); each horizontal owner then runs two rounds on its own fragment:

1. :class:`RoundOneMessage`: its noisy 1-way marginals (ε₁) and the edges of its private spanning tree
   (ε_sel), written signed to ``owners/<owner>/synthesis-round-1.json``;
2. once every owner's round one is there, every party computes the same cliques from them
   (:func:`cliques_from_round_one`: post-processing of signed noisy outputs), and the owner writes the
   noisy counts of each clique (ε₂) in :class:`RoundTwoMessage` to ``synthesis-round-2.json``.

The aggregator verifies both messages of every owner (:func:`check_round_one`, :func:`check_round_two`),
adds them and fits the model. Only public parameters and noisy values travel: the plan's terms, the
owners' record counts (public under substitution) and the Laplace-noised marginals.
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
from fragrelease.errors import InvalidParameterError, ManifestMismatchError
from fragrelease.protocol.difference import first_difference
from fragrelease.synthesis.domain import DEFAULT_BINS, SynthesisDomain
from fragrelease.synthesis.mechanism import (
    Clique,
    Edge,
    RoundOne,
    SynthesisBudget,
    choose_tree,
    cliques_to_measure,
    features_of,
)

#: The file names of an owner's two messages under ``owners/<owner>/``.
ROUND_FILES = {1: "synthesis-round-1.json", 2: "synthesis-round-2.json"}


@dataclass(frozen=True)
class SynthesisSpec:
    """What one owner measures in a synthetic release (frozen; every field public).

    Attributes
    ----------
    domain : the coded attributes (:class:`~fragrelease.synthesis.domain.SynthesisDomain`: declared
        categories, numeric attributes in ``bins`` equal-width bins of the declared domain).
    budget : the owner's ε_j split (:class:`~fragrelease.synthesis.mechanism.SynthesisBudget`, default
        shares ε/5 for the 1-ways and ε/20 for the tree).
    target : the declared label attribute, or None.
    """

    domain: SynthesisDomain
    budget: SynthesisBudget
    target: Optional[str]

    @property
    def features(self) -> tuple[str, ...]:
        return features_of(self.domain, self.target)

    @property
    def round_one_epsilon(self) -> Fraction:
        """ε₁ + ε_sel: what an owner records in its ledger before round one draws anything."""
        return self.budget.one_way + (self.budget.selection if len(self.features) > 1 else Fraction(0))

    @property
    def round_two_epsilon(self) -> Fraction:
        """ε₂: what an owner records before round two draws anything."""
        return self.budget.cliques

    @property
    def clique_count(self) -> int:
        """m, the number of cliques round two measures: the tree's |F| − 1 edges and, with a target, |F| stars."""
        f = len(self.features)
        return (f - 1) + (f if self.target is not None else 0)


def synthesis_spec(attributes: Sequence, epsilon: Fraction, *, target: Optional[str] = None,
                   bins: int = DEFAULT_BINS) -> SynthesisSpec:
    """The spec of one owner from the plan's public terms.

    ``attributes``: the released attributes (:class:`fragrelease.schemas.base.Attribute`, declared
    domains and categories), in the plan's order; ``epsilon``: the owner's ε_j (horizontal: the whole ε).

    Raises
    ------
    InvalidParameterError
        Fewer than two attributes, a target that is not one of them, ε ≤ 0, bins < 2, or no clique to
        measure (a target and a single feature still measure one clique).
    """
    if len(attributes) < 2:
        raise InvalidParameterError(f"linkage: synthetic needs at least 2 released attributes, got {len(attributes)}")
    if bins < 2:
        raise InvalidParameterError(f"synthesis_bins must be >= 2, not {bins}")
    domain = SynthesisDomain.from_schema(attributes, bins={a.name: bins for a in attributes if not a.categorical})
    if target is not None and target not in domain.names:
        raise InvalidParameterError(f"synthesis_target: {target!r} is not a released attribute "
                                    f"(released: {list(domain.names)})")
    spec = SynthesisSpec(domain, SynthesisBudget(Fraction(epsilon)), target)
    if spec.clique_count < 1:
        raise InvalidParameterError("linkage: synthetic has no clique to measure: declare at least 2 features")
    return spec


class Measurement(BaseModel):
    """One noisy marginal: its attributes and its cells, flattened in row-major (C) order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attributes: tuple[str, ...]
    counts: tuple[float, ...]

    @classmethod
    def of(cls, attributes: Sequence[str], noisy: np.ndarray) -> Measurement:
        return cls(attributes=tuple(attributes), counts=tuple(float(x) for x in np.asarray(noisy, float).ravel()))

    def array(self, domain: SynthesisDomain, *, owner: str, what: str) -> np.ndarray:
        """The cells as an array of the attributes' sizes.

        Raises
        ------
        ManifestMismatchError
            An attribute outside the domain, a cell count of the wrong size or a value that is not finite.
        """
        if any(a not in domain.names for a in self.attributes):
            raise ManifestMismatchError(f"owner {owner!r}: {what} measures {list(self.attributes)}, not attributes of "
                                        "the plan")
        shape = tuple(domain.sizes[a] for a in self.attributes)
        values = np.asarray(self.counts, dtype=float)
        if values.size != int(np.prod(shape)) or not np.all(np.isfinite(values)):
            raise ManifestMismatchError(f"owner {owner!r}: {what} of {list(self.attributes)} holds {values.size} "
                                        f"cells, not the {int(np.prod(shape))} finite ones of its attributes")
        return values.reshape(shape)


class _SignedMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    plan_id: str
    owner: str
    dataset: str
    #: ε this round spent (exact text), recorded in the owner's ledger before the round drew any noise
    epsilon: Epsilon
    n_records: int
    #: SHA-256 of the canonical JSON of the measurements (what the signature binds, with every other field)
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


class RoundOneMessage(_SignedMessage):
    """Round one of one owner: noisy 1-way marginals of every attribute and its chosen tree edges."""

    kind: Literal["synthesis-round-1"] = "synthesis-round-1"
    one_way: tuple[Measurement, ...]
    edges: tuple[tuple[str, str], ...]

    def round_one(self, domain: SynthesisDomain) -> RoundOne:
        """The message as the mechanism's :class:`~fragrelease.synthesis.mechanism.RoundOne` (shapes checked)."""
        return RoundOne({m.attributes[0]: m.array(domain, owner=self.owner, what="1-way marginal")
                         for m in self.one_way}, tuple((a, b) for a, b in self.edges))


class RoundTwoMessage(_SignedMessage):
    """Round two of one owner: the noisy counts of every clique, in the order of :func:`cliques_from_round_one`."""

    kind: Literal["synthesis-round-2"] = "synthesis-round-2"
    cliques: tuple[Measurement, ...]

    def measured(self, domain: SynthesisDomain) -> dict[Clique, np.ndarray]:
        return {m.attributes: m.array(domain, owner=self.owner, what="clique") for m in self.cliques}


def measurements_digest(measurements: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the measurements as canonical JSON (sorted keys, no spaces, no NaN)."""
    body = json.dumps(measurements, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


def round_one_digest(one_way: Sequence[Measurement], edges: Sequence[Edge]) -> str:
    return measurements_digest({"one_way": [m.model_dump(mode="json") for m in one_way],
                                "edges": [list(e) for e in edges]})


def round_two_digest(cliques: Sequence[Measurement]) -> str:
    return measurements_digest({"cliques": [m.model_dump(mode="json") for m in cliques]})


def _check_common(msg: _SignedMessage, *, plan_id: str, owner: str, epsilon: Fraction, n_records: int,
                  what: str) -> None:
    if msg.plan_id != plan_id:
        raise ManifestMismatchError(f"owner {owner!r}: {what} is for plan {msg.plan_id!r}, not {plan_id!r}: refused")
    if msg.owner != owner:
        raise ManifestMismatchError(f"the {what} in the folder of owner {owner!r} names owner {msg.owner!r}: refused "
                                    "(copied or moved from another owner's folder)")
    if Fraction(msg.epsilon) != Fraction(epsilon):
        raise ManifestMismatchError(f"owner {owner!r}: {what} spent ε = {msg.epsilon}, the plan gives {epsilon}: "
                                    "refused")
    if msg.n_records != n_records:
        raise ManifestMismatchError(f"owner {owner!r}: {what} covers {msg.n_records} records, the plan "
                                    f"{n_records}: refused")


def check_round_one(msg: RoundOneMessage, spec: SynthesisSpec, *, plan_id: str, owner: str, n_records: int) -> RoundOne:
    """Check an owner's round one against the plan (signature checked by the caller); return it as data.

    Raises
    ------
    ManifestMismatchError
        Another plan or owner, another ε or record count, a digest that does not match its
        measurements, 1-way marginals other than one per attribute of the plan in its order, or edges
        other than |F| − 1 pairs of distinct features.
    """
    _check_common(msg, plan_id=plan_id, owner=owner, epsilon=spec.round_one_epsilon, n_records=n_records,
                  what="synthesis round one")
    if round_one_digest(msg.one_way, msg.edges) != msg.content_digest:
        raise ManifestMismatchError(f"owner {owner!r}: synthesis round one does not match its content digest: refused")
    measured = [m.attributes[0] if len(m.attributes) == 1 else list(m.attributes) for m in msg.one_way]
    diff = first_difference(measured, list(spec.domain.names), "1-way marginal")
    if diff is not None:
        raise ManifestMismatchError(f"owner {owner!r}: synthesis round one measures other 1-way marginals than the "
                                    f"plan's attributes ({diff.where} is {diff.got}, the plan's is {diff.want}): refused")
    feats = set(spec.features)
    steps = max(len(spec.features) - 1, 0)
    if len(msg.edges) != steps or any(a == b or a not in feats or b not in feats for a, b in msg.edges):
        raise ManifestMismatchError(f"owner {owner!r}: synthesis round one holds {len(msg.edges)} edges, not the "
                                    f"{steps} pairs of distinct features its tree has: refused")
    return msg.round_one(spec.domain)


def cliques_from_round_one(spec: SynthesisSpec, rounds: Sequence[RoundOne]) -> tuple[Clique, ...]:
    """The cliques round two measures: the max spanning tree of the owners' votes, and the target's star.

    The same on every party (post-processing of the signed round-one messages, in plan order).

    Raises
    ------
    InvalidParameterError
        An edge that does not join two features (:func:`~fragrelease.synthesis.mechanism.choose_tree`).
    """
    tree = choose_tree(spec.domain, [r.edges for r in rounds], target=spec.target)
    cliques = cliques_to_measure(spec.domain, tree, target=spec.target)
    assert len(cliques) == spec.clique_count  # a spanning tree has |F| − 1 edges
    return cliques


def check_round_two(msg: RoundTwoMessage, spec: SynthesisSpec, cliques: Sequence[Clique], *, plan_id: str,
                    owner: str, n_records: int) -> dict[Clique, np.ndarray]:
    """Check an owner's round two against the plan and the cliques of round one; return its noisy counts.

    Raises
    ------
    ManifestMismatchError
        Another plan or owner, another ε or record count, a digest that does not match, or cliques
        other than ``cliques`` (in order) or of the wrong size.
    """
    _check_common(msg, plan_id=plan_id, owner=owner, epsilon=spec.round_two_epsilon, n_records=n_records,
                  what="synthesis round two")
    if round_two_digest(msg.cliques) != msg.content_digest:
        raise ManifestMismatchError(f"owner {owner!r}: synthesis round two does not match its content digest: refused")
    if tuple(m.attributes for m in msg.cliques) != tuple(tuple(c) for c in cliques):
        raise ManifestMismatchError(f"owner {owner!r}: synthesis round two measured other cliques than the ones its "
                                    "owners' round one selects: refused")
    return msg.measured(spec.domain)
