"""A data owner's two rounds of a synthetic release (``linkage: synthetic``; docs/specification.md §10).

The owner's ``protect`` step runs the round that is due (:func:`measure_owner_round`):

- **round one** when this owner has written none yet: its noisy 1-way marginals and the edges of its
  private spanning tree, signed, to ``owners/<owner>/synthesis-round-1.json``;
- **round two** once every owner of the plan has written round one (each verified under its owner's
  configured public key): the noisy counts of the cliques that every party derives from those
  messages, signed, to ``owners/<owner>/synthesis-round-2.json``.

Spend last: every check that needs no noise (the plan against the configuration, the keys, the
fragment's validation, and for round two every owner's round one) runs before the owner's ledger
records the round's ε (round one: ε₁ + ε_sel under the plan id; round two: ε₂ under
``<plan id>/cliques``, so a round is never measured twice and the two add up to ε_j exactly). Nothing
data-dependent is logged; the counts stay in this driver's memory (aggregates only, Σ cells rows).
"""
from __future__ import annotations

import logging
import posixpath
from datetime import datetime, timezone
from fractions import Fraction
from typing import Mapping, Optional

from fragrelease.budget import check_lifetime
from fragrelease.errors import ConfigError, ManifestMismatchError, ReleaseExistsError
from fragrelease.idpir.fragmentation import linkage_of
from fragrelease.idpir.protocol import Plan
from fragrelease.rng.diffgen import DiffGenRandomness, SecureDiffGenRandomness
from fragrelease.rng.laplace import NoiseSource
from fragrelease.schemas.base import DatasetSchema
from fragrelease.signing import sign_manifest_fields, verify_manifest_fields
from fragrelease.synthesis.mechanism import measure_cliques, measure_round_one
from fragrelease.synthesis.protocol import (
    ROUND_FILES,
    Measurement,
    RoundOneMessage,
    RoundTwoMessage,
    SynthesisSpec,
    check_round_one,
    cliques_from_round_one,
    round_one_digest,
    round_two_digest,
    synthesis_spec,
)

from ..idpir.context import OwnerContext, OwnerPaths, owner_paths
from ..idpir.fragment import conform_attributes, conform_id, validate_fragment
from ..idpir.layout import read_message
from ..idpir.ledger import check_spend, record_spend, spent
from ..idpir.owner import (
    _read_fragment,
    check_plan_nonce,
    ledger_location,
    read_verified_plan,
)
from ..idpir.signatures import owner_signing_key, public_keys
from ..idpir.workspace import claim_work_dir
from ..storage import file_exists, register, write_text
from .counts import coded_columns, marginal_counts
from .rounds import missing_round

log = logging.getLogger(__name__)

#: The ledger's plan id of round two: a second spend under the same plan, recorded once.
ROUND_TWO_SUFFIX = "/cliques"


def round_path(paths: OwnerPaths, number: int) -> str:
    """``owners/<owner>/synthesis-round-<number>.json`` under ``work_dir`` (``paths``: the owner's, :mod:`..idpir.context`)."""
    return posixpath.join(paths.owner_dir, ROUND_FILES[number])


def plan_synthesis_spec(schema: DatasetSchema, plan: Plan, owner: str) -> SynthesisSpec:
    """The owner's :class:`~fragrelease.synthesis.protocol.SynthesisSpec` from the plan's public terms."""
    attrs = [schema.attribute(a["name"]) for a in plan.attributes]
    return synthesis_spec(attrs, Fraction(plan.owner(owner).epsilon), target=plan.synthesis_target,
                          bins=plan.synthesis_bins)


def read_round_one(owners: Mapping[str, OwnerPaths], plan: Plan, spec: SynthesisSpec, keys, *, party: str):
    """Every owner's round one, verified (signature under its configured key, plan, ε, shapes), in plan order.

    ``owners``: every owner's paths by name (:attr:`fragrelease.jobs.idpir.context.AggregatorContext.owners`).

    Raises
    ------
    ConfigError
        An owner's round one is not there yet (:func:`.rounds.missing_round`).
    ManifestMismatchError, SignatureError, ProtocolError
        A message that is damaged, unsigned, signed with another key or for another plan or owner.
    """
    rounds = []
    for o in plan.owners:
        path = round_path(owners[o.name], 1)
        if not file_exists(path):
            raise missing_round(party, o.name, 1, plan.plan_id, path)
        msg = read_message(RoundOneMessage, path, party=party, what=f"synthesis round one of owner {o.name!r}")
        key = keys.get(o.name)
        if key is None:
            raise ManifestMismatchError(f"{party}: no public key is configured for owner {o.name!r} "
                                        "(owners[].public_key): its synthesis round one cannot be verified, refused")
        verify_manifest_fields(key, msg.signed_fields(), msg.signature, owner=o.name)
        rounds.append(check_round_one(msg, spec, plan_id=plan.plan_id, owner=o.name, n_records=o.n_records))
    return rounds


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _spend(spark, ctx: OwnerContext, plan_id: str, dataset: str, epsilon: Fraction, *, room_for: Fraction) -> None:
    """Record ``epsilon`` in the owner's ledger (if any) before the round draws; ``room_for``: refuse first
    unless the ledger has room for that much (round one asks for the whole ε_j, so round two is not
    refused halfway for want of budget; the recording itself checks again, atomically)."""
    owner = ctx.owner
    if owner.ledger is None:
        return
    where = ledger_location(spark, owner.ledger)
    check_lifetime(spent(where, owner.name, dataset), room_for, owner.ledger.lifetime, owner=owner.name,
                   dataset=dataset)
    record_spend(where, owner=owner.name, dataset=dataset, plan_id=plan_id, epsilon=epsilon,
                 lifetime=owner.ledger.lifetime)
    if owner.ledger.table is not None:
        register(spark, owner.ledger.table, where, append_only=True)


def _round_before_data(ctx: OwnerContext):
    """The round's checks before the data is read: ``(signing_key, plan, spec, number, cliques)``.

    Claims ``work_dir``; the signing key, the plan's terms and nonce, which round is due (refused when
    both are written) and, for round two, the cliques from every owner's verified round one. Errors
    as :func:`measure_owner_round`."""
    cfg, owner = ctx.config, ctx.owner
    claim_work_dir(cfg)
    signing_key = owner_signing_key(ctx)
    plan, _ = read_verified_plan(ctx)  # every term against this owner's configuration, no data
    if not linkage_of(plan.linkage).synthesized:
        raise ManifestMismatchError(f"owner {owner.name!r}: plan {plan.plan_id} is not a synthetic release")
    check_plan_nonce(ctx, plan)
    spec = plan_synthesis_spec(ctx.schema, plan, owner.name)
    one, two = round_path(ctx.paths, 1), round_path(ctx.paths, 2)
    number = 2 if file_exists(one) else 1
    if number == 2 and file_exists(two):
        raise ReleaseExistsError(f"owner {owner.name!r} has written both synthesis rounds of plan {plan.plan_id} "
                                 f"already ({two!r}); the aggregator's release step is next")
    cliques: tuple = ()
    if number == 2:  # the cliques from every owner's signed round one: before the data is read
        keys = {**public_keys(cfg), owner.name: signing_key.public_key()}  # its own: the key it signs with
        others = {o.name: owner_paths(cfg, o) for o in cfg.owners}  # the plan's owners (verified against cfg)
        rounds = read_round_one(others, plan, spec, keys, party=f"owner {owner.name!r}")
        cliques = cliques_from_round_one(spec, rounds)
    return signing_key, plan, spec, number, cliques


def check_round_before_spend(spark, ctx: OwnerContext) -> int:
    """Run the checks of the owner's (``ctx``) due round that need no noise, up to its ledger's check of
    the round's spend, and record nothing; return the round's number (1 or 2).

    The checks of :func:`measure_owner_round` before its data is read, then its ledger's: room for
    the round (round one: the whole ε_j) and the round's plan id not spent yet
    (:func:`fragrelease.jobs.idpir.ledger.check_spend`; creates an empty ledger when there is none).
    It does not read the fragment (the metadata step validated it). The local driver runs it for
    every owner, in configuration order, before any owner of a round starts
    (:func:`fragrelease.jobs.idpir.release.play_release`); the round runs every check again.

    Raises
    ------
    ManifestMismatchError, ProtocolError, ConfigError, ReleaseExistsError, SigningKeyError,
    BudgetExceededError, PlanAlreadySpentError, LedgerDamagedError, LedgerStorageError
        As :func:`measure_owner_round`, with the same messages; nothing was spent.
    """
    _, plan, spec, number, _ = _round_before_data(ctx)
    owner = ctx.owner
    if owner.ledger is None:
        return number
    if number == 1:
        plan_id, epsilon, room_for = plan.plan_id, spec.round_one_epsilon, spec.round_one_epsilon + spec.round_two_epsilon
    else:
        plan_id, epsilon, room_for = plan.plan_id + ROUND_TWO_SUFFIX, spec.round_two_epsilon, spec.round_two_epsilon
    where = ledger_location(spark, owner.ledger)
    # in the order of _spend: the room first, then the recording's own checks
    check_lifetime(spent(where, owner.name, plan.dataset), room_for, owner.ledger.lifetime, owner=owner.name,
                   dataset=plan.dataset)
    check_spend(where, owner=owner.name, dataset=plan.dataset, plan_id=plan_id, epsilon=epsilon,
                lifetime=owner.ledger.lifetime)
    return number


def measure_owner_round(spark, ctx: OwnerContext, *, noise: Optional[NoiseSource] = None,
                        randomness: Optional[DiffGenRandomness] = None) -> int:
    """Run the owner's due round of a synthetic release; return its number (1 or 2).

    ``ctx``: the owner's context (:func:`fragrelease.jobs.idpir.context.owner_context`).

    ``noise`` and ``randomness``: tests only (seeded); a release draws Laplace noise through OpenDP and
    the selection's Gumbel variables from the OS CSPRNG.

    Shapes: the owner's fragment (``id_column`` and every released attribute, ``n_records`` rows as the
    plan says) in; two small signed JSON messages out (module docstring).

    Raises
    ------
    ManifestMismatchError, ProtocolError
        The plan differs from this owner's configuration, or is not a synthetic plan; a round-one
        message of another owner that does not verify (round two).
    ConfigError
        Round two before every owner wrote round one; the fragment's record count differs from the plan.
    ReleaseExistsError
        Both rounds are written already.
    SchemaMismatchError, DomainError, IdentifierError
        The fragment does not validate (before any spend).
    BudgetExceededError, PlanAlreadySpentError, LedgerDamagedError
        From the ledger, before any noise (:func:`fragrelease.jobs.idpir.ledger.record_spend`).
    SigningKeyError
        The owner has no usable signing key (before any spend).
    """
    schema, owner = ctx.schema, ctx.owner
    assert schema.id_column is not None  # a release's schema names its id column (configuration check)
    signing_key, plan, spec, number, cliques = _round_before_data(ctx)
    one, two = round_path(ctx.paths, 1), round_path(ctx.paths, 2)
    attrs = [schema.attribute(a["name"]) for a in plan.attributes]
    df, context, text = _read_fragment(spark, ctx)
    check = validate_fragment(df, attrs, schema.id_column, context, id_type=ctx.id_type, text=text)
    if check.n_records != plan.owner(owner.name).n_records:
        raise ConfigError(f"owner {owner.name!r} now has {check.n_records} records, the plan was made for "
                          f"{plan.owner(owner.name).n_records}")
    df = conform_attributes(conform_id(df, schema.id_column, ctx.id_type), attrs)
    coded = coded_columns(df, spec.domain)
    names = spec.domain.names
    if number == 1:
        pairs: list[tuple[str, str]] = [(a, b) for i, a in enumerate(spec.features) for b in spec.features[i + 1:]]
        wanted: list[tuple[str, ...]] = [(a,) for a in names]
        counts = marginal_counts(coded, spec.domain, wanted + list(pairs))  # aggregates only
        epsilon = spec.round_one_epsilon
        _spend(spark, ctx, plan.plan_id, plan.dataset, epsilon,  # before any noise is drawn
               room_for=spec.round_one_epsilon + spec.round_two_epsilon)
        r1 = measure_round_one(spec.domain, {a: counts[(a,)] for a in names}, {p: counts[p] for p in pairs},
                               spec.budget, target=spec.target,
                               randomness=randomness if randomness is not None else SecureDiffGenRandomness(),
                               noise=noise)
        one_way = tuple(Measurement.of((a,), r1.one_way[a]) for a in names)
        msg1 = RoundOneMessage(plan_id=plan.plan_id, owner=owner.name, dataset=plan.dataset, epsilon=epsilon,
                               n_records=check.n_records, content_digest=round_one_digest(one_way, r1.edges),
                               created_at=_now(), one_way=one_way, edges=r1.edges)
        signed1 = msg1.model_copy(update={"signature": sign_manifest_fields(signing_key, msg1.signed_fields())})
        write_text(one, signed1.to_json())
    else:
        counts = marginal_counts(coded, spec.domain, list(cliques))  # aggregates only
        epsilon = spec.round_two_epsilon
        _spend(spark, ctx, plan.plan_id + ROUND_TWO_SUFFIX, plan.dataset, epsilon,  # before any noise
               room_for=epsilon)
        measured = measure_cliques(spec.domain, counts, cliques, spec.budget, noise=noise)
        measurements = tuple(Measurement.of(c, measured[c]) for c in cliques)
        msg2 = RoundTwoMessage(plan_id=plan.plan_id, owner=owner.name, dataset=plan.dataset, epsilon=epsilon,
                               n_records=check.n_records, content_digest=round_two_digest(measurements),
                               created_at=_now(), cliques=measurements)
        signed2 = msg2.model_copy(update={"signature": sign_manifest_fields(signing_key, msg2.signed_fields())})
        write_text(two, signed2.to_json())
    log.info("owner %s: synthesis round %d written for plan %s", owner.name, number, plan.plan_id)
    return number
