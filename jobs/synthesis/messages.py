"""Reading the owners' signed synthesis messages from ``work_dir`` (``linkage: synthetic``; docs/specification.md §10).

Every party (an owner before its next round, the aggregator before it fits) reads the messages the same
way: each verified under its owner's configured public key and checked against the plan
(:mod:`fragrelease.synthesis.protocol`), in plan order. Round 1's keys give the participant list
every owner masks against; round 2's masked vectors decode, summed over every owner, to the noisy sums
the structure is chosen from; round 3's to the clique sums. Nothing read from ``work_dir`` is
trusted: a message that does not verify, names another plan or owner, or masks against another
participant list is refused with one line.
"""
from __future__ import annotations

import posixpath
from fractions import Fraction
from typing import Mapping, Sequence

import numpy as np

from fragrelease.errors import ConfigError, ManifestMismatchError
from fragrelease.protocol.messages import Plan
from fragrelease.schemas.base import DatasetSchema
from fragrelease.signing import verify_manifest_fields
from fragrelease.synthesis.mechanism import Clique
from fragrelease.synthesis.protocol import (
    ROUND_FILES,
    KeyMessage,
    MaskedMessage,
    SynthesisSpec,
    check_key_message,
    check_masked,
    cliques_from_sums,
    decode_round,
    synthesis_spec,
)

from ..protocol.context import OwnerPaths
from ..protocol.layout import read_message
from ..storage import file_exists
from .rounds import missing_round

Participants = tuple[tuple[str, str], ...]


def round_path(paths: OwnerPaths, number: int) -> str:
    """``owners/<owner>/synthesis-round-<number>.json`` under ``work_dir`` (``paths``: the owner's, :mod:`..protocol.context`)."""
    return posixpath.join(paths.owner_dir, ROUND_FILES[number])


def plan_synthesis_spec(schema: DatasetSchema, plan: Plan, owner: str) -> SynthesisSpec:
    """The owner's :class:`~fragrelease.synthesis.protocol.SynthesisSpec` from the plan's public terms.

    Raises
    ------
    InvalidParameterError
        The plan's ``synthesis_collusion`` is not in [0, m − 1] (:func:`fragrelease.synthesis.protocol.synthesis_spec`).
    """
    attrs = [schema.attribute(a["name"]) for a in plan.attributes]
    return synthesis_spec(attrs, Fraction(plan.owner(owner).epsilon), target=plan.synthesis_target,
                          bins=plan.synthesis_bins, owners=len(plan.owners), collusion=plan.synthesis_collusion)


def _read(owners: Mapping[str, OwnerPaths], plan: Plan, number: int, model, keys, *, party: str):
    """Every owner's round ``number`` message, verified under its configured key, in plan order."""
    out = []
    for o in plan.owners:
        path = round_path(owners[o.name], number)
        if not file_exists(path):
            raise missing_round(party, o.name, number, plan.plan_id, path)
        msg = read_message(model, path, party=party, what=f"synthesis round {number} of owner {o.name!r}")
        if msg.plan_id != plan.plan_id:  # an older plan's message: this plan's round is not there yet
            raise ConfigError(f"{party}: owner {o.name!r} has not written its synthesis round {number} of plan "
                              f"{plan.plan_id} yet ({path!r} holds plan {msg.plan_id}'s); run its protect step first")
        key = keys.get(o.name)
        if key is None:
            raise ManifestMismatchError(f"{party}: no public key is configured for owner {o.name!r} "
                                        f"(owners[].public_key): its synthesis round {number} cannot be verified, refused")
        verify_manifest_fields(key, msg.signed_fields(), msg.signature, owner=o.name)
        out.append((o, msg))
    return out


def read_participants(owners: Mapping[str, OwnerPaths], plan: Plan, spec: SynthesisSpec, keys, *,
                      party: str) -> Participants:
    """The plan's participants: (owner, key-agreement key hex) of every owner's verified round 1, in plan order.

    ``owners``: every owner's paths by name; ``keys``: the owners' configured Ed25519 public keys.

    Raises
    ------
    ConfigError
        An owner's round 1 of this plan is not there yet (:func:`.rounds.missing_round`).
    ManifestMismatchError, SignatureError, ProtocolError
        A message that is damaged, unsigned, signed with another key or for another plan or owner; two
        owners with the same key-agreement key (a copied message).
    """
    got = []
    for o, msg in _read(owners, plan, 1, KeyMessage, keys, party=party):
        got.append((o.name, check_key_message(msg, spec, plan_id=plan.plan_id, owner=o.name, n_records=o.n_records)))
    seen: dict[str, str] = {}
    for name, key in got:
        if key in seen:
            raise ManifestMismatchError(f"{party}: owners {seen[key]!r} and {name!r} publish the same key-agreement key "
                                        "for synthesis round 1 (a copied message): refused")
        seen[key] = name
    return tuple(got)


def decoded_sums(owners: Mapping[str, OwnerPaths], plan: Plan, spec: SynthesisSpec, number: int,
                 cliques: Sequence[Clique], participants: Participants, keys, *, party: str) -> Mapping[Clique, np.ndarray]:
    """The decoded noisy sums of round ``number`` (2 or 3) over every owner of the plan (int64, flattened).

    Raises
    ------
    ConfigError
        An owner's round is not there yet.
    ManifestMismatchError, SignatureError, ProtocolError
        A message that does not verify or check (:func:`fragrelease.synthesis.protocol.check_masked`), or
        masks that do not cancel (:func:`fragrelease.synthesis.protocol.decode_round`): nothing decoded.
    """
    masked = [check_masked(msg, spec, number, cliques, participants, plan_id=plan.plan_id, owner=o.name,
                           n_records=o.n_records)
              for o, msg in _read(owners, plan, number, MaskedMessage, keys, party=party)]
    return decode_round(masked, cliques, total=sum(o.n_records for o in plan.owners), number=number)


def structure(owners: Mapping[str, OwnerPaths], plan: Plan, spec: SynthesisSpec, participants: Participants, keys, *,
              party: str) -> tuple[Mapping[Clique, np.ndarray], tuple[Clique, ...]]:
    """Round 2's decoded sums and the cliques round 3 measures (post-processing; the same on every party)."""
    sums = decoded_sums(owners, plan, spec, 2, spec.measure_cliques, participants, keys, party=party)
    return sums, cliques_from_sums(spec, sums)
