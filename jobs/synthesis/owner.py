"""A data owner's two rounds of a synthetic release (``linkage: synthetic``; docs/specification.md §10).

The owner's ``protect`` step runs the round that is due (:func:`measure_owner_round`), which the
owner's **private draw records** say, never ``work_dir``'s files (:mod:`fragrelease.jobs.protocol.draws`):

- **round one** when this owner kept none for the plan yet: its noisy 1-way marginals and the edges of
  its private spanning tree, signed, to ``owners/<owner>/synthesis-round-1.json``;
- **round two** once every owner of the plan has written round one (each verified under its owner's
  configured public key): the noisy counts of the cliques that every party derives from those
  messages, signed, to ``owners/<owner>/synthesis-round-2.json``.

Draw once: a round is drawn once per plan; its signed message is kept in the owner's private folder
before it is written to ``work_dir``, and every later run re-publishes the kept bytes (a message deleted
from ``work_dir`` buys no second draw). Spend last: every check that needs no noise (the plan against
the configuration, the keys, the fragment's validation, and for round two every owner's round one)
runs before the owner's claim and its ledger's spend of the round's ε (round one: ε₁ + ε_sel under
the plan id; round two: ε₂ under ``<plan id>/cliques``, so the two add up to ε_j exactly). Nothing
data-dependent is logged; the counts stay in this driver's memory (aggregates only, Σ cells rows).
"""
from __future__ import annotations

import logging
import posixpath
from datetime import datetime, timezone
from fractions import Fraction
from typing import Mapping, Optional

from fragrelease.errors import ConfigError, FragReleaseError, ManifestMismatchError
from fragrelease.protocol.messages import Plan
from fragrelease.rng.diffgen import DiffGenRandomness, SecureDiffGenRandomness
from fragrelease.rng.laplace import NoiseSource
from fragrelease.schemas.base import DatasetSchema
from fragrelease.signing import sign_manifest_fields, verify_manifest_fields
from fragrelease.synthesis.kind import SYNTHETIC
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

from ..protocol.context import OwnerContext, OwnerPaths, owner_paths
from ..protocol.draws import Spend, check_nonce_free, check_spend_once, draw_step, spend_once
from ..protocol.fragment import conform_attributes, conform_id, validate_fragment
from ..protocol.layout import read_message
from ..protocol.owner import check_plan_nonce, read_fragment, read_verified_plan
from ..protocol.signatures import owner_signing_key, public_keys
from ..protocol.workspace import claim_work_dir
from ..storage import file_exists, read_text, write_text
from .counts import coded_columns, marginal_counts
from .rounds import missing_round

log = logging.getLogger(__name__)

#: The ledger's plan id of round two: a second spend under the same plan, recorded once.
ROUND_TWO_SUFFIX = "/cliques"


def round_path(paths: OwnerPaths, number: int) -> str:
    """``owners/<owner>/synthesis-round-<number>.json`` under ``work_dir`` (``paths``: the owner's, :mod:`..protocol.context`)."""
    return posixpath.join(paths.owner_dir, ROUND_FILES[number])


def plan_synthesis_spec(schema: DatasetSchema, plan: Plan, owner: str) -> SynthesisSpec:
    """The owner's :class:`~fragrelease.synthesis.protocol.SynthesisSpec` from the plan's public terms."""
    attrs = [schema.attribute(a["name"]) for a in plan.attributes]
    return synthesis_spec(attrs, Fraction(plan.owner(owner).epsilon), target=plan.synthesis_target,
                          bins=plan.synthesis_bins)


def read_round_one(owners: Mapping[str, OwnerPaths], plan: Plan, spec: SynthesisSpec, keys, *, party: str):
    """Every owner's round one, verified (signature under its configured key, plan, ε, shapes), in plan order.

    ``owners``: every owner's paths by name (:attr:`fragrelease.jobs.protocol.context.AggregatorContext.owners`).

    Raises
    ------
    ConfigError
        An owner's round one of this plan is not there yet (:func:`.rounds.missing_round`; a message of
        an older plan names that plan).
    ManifestMismatchError, SignatureError, ProtocolError
        A message that is damaged, unsigned, signed with another key or for another plan or owner.
    """
    rounds = []
    for o in plan.owners:
        path = round_path(owners[o.name], 1)
        if not file_exists(path):
            raise missing_round(party, o.name, 1, plan.plan_id, path)
        msg = read_message(RoundOneMessage, path, party=party, what=f"synthesis round one of owner {o.name!r}")
        if msg.plan_id != plan.plan_id:  # an older plan's message: this plan's round one is not there yet
            raise ConfigError(f"{party}: owner {o.name!r} has not written its synthesis round one of plan "
                              f"{plan.plan_id} yet ({path!r} holds plan {msg.plan_id}'s); run its protect step first")
        key = keys.get(o.name)
        if key is None:
            raise ManifestMismatchError(f"{party}: no public key is configured for owner {o.name!r} "
                                        "(owners[].public_key): its synthesis round one cannot be verified, refused")
        verify_manifest_fields(key, msg.signed_fields(), msg.signature, owner=o.name)
        rounds.append(check_round_one(msg, spec, plan_id=plan.plan_id, owner=o.name, n_records=o.n_records))
    return rounds


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


#: The draw step of each round in the owner's private records (:mod:`fragrelease.jobs.protocol.draws`).
ROUND_STEPS = {1: "round-1", 2: "round-2"}
_MESSAGES: dict[int, type[RoundOneMessage] | type[RoundTwoMessage]] = {1: RoundOneMessage, 2: RoundTwoMessage}


def round_spend(plan: Plan, spec: SynthesisSpec, number: int) -> Spend:
    """Round one records ε₁ + ε_sel under the plan id (room first for the whole ε_j, so round two is not
    refused halfway for want of budget); round two ε₂ under ``<plan id>/cliques``."""
    if number == 1:
        return Spend(plan.dataset, plan.plan_id, spec.round_one_epsilon,
                     spec.round_one_epsilon + spec.round_two_epsilon)
    return Spend(plan.dataset, plan.plan_id + ROUND_TWO_SUFFIX, spec.round_two_epsilon, spec.round_two_epsilon)


def _round_before_data(ctx: OwnerContext):
    """The round's checks before the data is read: ``(signing_key, plan, spec)``.

    Claims ``work_dir``; the signing key, the plan's terms and its nonce. Errors as :func:`measure_owner_round`."""
    cfg, owner = ctx.config, ctx.owner
    claim_work_dir(cfg)
    signing_key = owner_signing_key(ctx)
    plan, _ = read_verified_plan(ctx)  # every term against this owner's configuration, no data
    if plan.linkage != SYNTHETIC.name:
        raise ManifestMismatchError(f"owner {owner.name!r}: plan {plan.plan_id} is not a synthetic release")
    check_plan_nonce(ctx, plan)
    check_nonce_free(ctx, plan)
    return signing_key, plan, plan_synthesis_spec(ctx.schema, plan, owner.name)


def kept_rounds(ctx: OwnerContext, plan_id: str) -> Mapping[int, bytes]:
    """The rounds of plan ``plan_id`` the owner (``ctx``) drew and kept privately: number → the signed message's bytes."""
    out = {}
    for number, step in ROUND_STEPS.items():
        data = draw_step(ctx, plan_id, step).kept_bytes()
        if data is not None:
            out[number] = data
    return out


def _republish(ctx: OwnerContext, number: int, data: bytes, signing_key) -> None:
    """Write the kept round ``number`` (``data``, its signed message) to ``work_dir`` unless it is there as it is.

    A message kept under another signing key than the owner's current one is signed again over the
    same fields (the same draw; the signature only binds it to the key the parties now verify)."""
    path = round_path(ctx.paths, number)
    msg = _MESSAGES[number].model_validate_json(data)
    try:
        verify_manifest_fields(signing_key.public_key(), msg.signed_fields(), msg.signature, owner=ctx.name)
    except FragReleaseError:
        msg = msg.model_copy(update={"signature": sign_manifest_fields(signing_key, msg.signed_fields())})
        data = msg.to_json().encode("utf-8")
    text = data.decode("utf-8")
    if file_exists(path) and read_text(path) == text:
        return
    write_text(path, text)  # the owner's own protocol file (owners/<owner>/): the same draw, byte for byte
    log.info("owner %s: synthesis round %d of plan %s re-published from its private copy (no new draw, no spend)",
             ctx.name, number, msg.plan_id)


def _round_cliques(ctx: OwnerContext, plan: Plan, spec: SynthesisSpec, signing_key) -> tuple:
    """The cliques from every owner's signed round one in ``work_dir``: before round two reads data or spends."""
    keys = {**public_keys(ctx.config), ctx.name: signing_key.public_key()}  # its own: the key it signs with
    others = {o.name: owner_paths(ctx.config, o) for o in ctx.config.owners}  # the plan's owners (verified against cfg)
    rounds = read_round_one(others, plan, spec, keys, party=f"owner {ctx.name!r}")
    return cliques_from_round_one(spec, rounds)


def _due(ctx: OwnerContext, kept: Mapping[int, bytes], number: Optional[int], plan: Plan) -> int:
    """The round to draw or re-publish: ``number``, or the first the owner's private records hold no output of."""
    due = number if number is not None else (1 if 1 not in kept else 2)
    if due == 2 and 1 not in kept:
        raise ConfigError(f"owner {ctx.name!r} has not drawn its synthesis round one of plan {plan.plan_id}; run its "
                          "protect step for round one first")
    return due


def check_round_before_spend(spark, ctx: OwnerContext, number: Optional[int] = None) -> int:
    """Run the checks of the owner's (``ctx``) round ``number`` (default: the one due) that need no noise,
    up to its ledger's check of the round's spend, and record nothing; return the round's number (1 or 2).

    The checks of :func:`measure_owner_round` before its data is read, then the draw records' and the
    ledger's (:func:`fragrelease.jobs.protocol.draws.check_spend_once`: a kept round needs none; round
    one asks for room for the whole ε_j). It does not read the fragment (the metadata step validated
    it). The local driver runs it for every owner, in configuration order, before any owner of a round
    starts (:func:`fragrelease.jobs.protocol.release.play_release`); the round runs every check again.

    Raises
    ------
    ManifestMismatchError, ProtocolError, ConfigError, ReleaseExistsError, SigningKeyError,
    BudgetExceededError, PlanAlreadySpentError, LedgerDamagedError, LedgerStorageError
        As :func:`measure_owner_round`, with the same messages; nothing was spent.
    """
    signing_key, plan, spec = _round_before_data(ctx)
    kept = kept_rounds(ctx, plan.plan_id)
    due = _due(ctx, kept, number, plan)
    if due in kept:
        return due
    if due == 2:
        _round_cliques(ctx, plan, spec, signing_key)
    check_spend_once(spark, ctx, plan, draw_step(ctx, plan.plan_id, ROUND_STEPS[due]), round_spend(plan, spec, due))
    return due


def measure_owner_round(spark, ctx: OwnerContext, *, noise: Optional[NoiseSource] = None,
                        randomness: Optional[DiffGenRandomness] = None, number: Optional[int] = None) -> int:
    """Run the owner's due round of a synthetic release (or round ``number``); return its number (1 or 2).

    ``ctx``: the owner's context (:func:`fragrelease.jobs.protocol.context.owner_context`).

    Draw once (:mod:`fragrelease.jobs.protocol.draws`): the round that is due comes from the owner's
    private records, never from ``work_dir``: every round it kept for this plan is re-published
    first, byte for byte (no draw, no spend); the first round it kept no output of is drawn: claimed,
    spent (round one: ε₁ + ε_sel under the plan id; round two: ε₂ under ``<plan id>/cliques``),
    drawn, its signed message kept privately, then written to ``work_dir``. With both rounds kept,
    the call only re-publishes them and returns 2.

    ``noise`` and ``randomness``: tests only (seeded); a release draws Laplace noise through OpenDP and
    the selection's Gumbel variables from the OS CSPRNG.

    Shapes: the owner's fragment (``id_column`` and every released attribute, ``n_records`` rows as the
    plan says) in; two small signed JSON messages out (module docstring).

    Raises
    ------
    ManifestMismatchError, ProtocolError
        The plan differs from this owner's configuration, is not a synthetic plan, or carries a nonce
        another plan consumed; a round-one message of another owner that does not verify (round two).
    ConfigError
        Round two before every owner wrote round one of this plan; the fragment's record count differs
        from the plan.
    SchemaMismatchError, DomainError, IdentifierError
        The fragment does not validate (before any spend).
    BudgetExceededError, PlanAlreadySpentError, LedgerDamagedError
        From the ledger, before any noise (:func:`fragrelease.jobs.protocol.draws.spend_once`).
    SigningKeyError
        The owner has no usable signing key (before any spend).
    """
    schema, owner = ctx.schema, ctx.owner
    assert schema.id_column is not None  # a release's schema names its id column (configuration check)
    signing_key, plan, spec = _round_before_data(ctx)
    kept = kept_rounds(ctx, plan.plan_id)
    for n, data in sorted(kept.items()):
        _republish(ctx, n, data, signing_key)
    due = _due(ctx, kept, number, plan)
    if due in kept:
        return due
    cliques = _round_cliques(ctx, plan, spec, signing_key) if due == 2 else ()  # before the data is read
    attrs = [schema.attribute(a["name"]) for a in plan.attributes]
    df, context, text = read_fragment(spark, ctx)
    check = validate_fragment(df, attrs, schema.id_column, context, id_type=ctx.id_type, text=text)
    if check.n_records != plan.owner(owner.name).n_records:
        raise ConfigError(f"owner {owner.name!r} now has {check.n_records} records, the plan was made for "
                          f"{plan.owner(owner.name).n_records}")
    df = conform_attributes(conform_id(df, schema.id_column, ctx.id_type), attrs)
    coded = coded_columns(df, spec.domain)
    step = draw_step(ctx, plan.plan_id, ROUND_STEPS[due])
    signed = _draw_round(spark, ctx, plan, step, coded, cliques, signing_key, noise=noise, randomness=randomness)
    if not step.keep(signed.to_json().encode("utf-8")):  # kept privately before it is shared
        log.warning("owner %s: another attempt kept round %d of plan %s first; publishing that one", owner.name, due,
                    plan.plan_id)
    published = step.kept_bytes()
    assert published is not None  # kept just above
    write_text(round_path(ctx.paths, due), published.decode("utf-8"))
    log.info("owner %s: synthesis round %d written for plan %s", owner.name, due, plan.plan_id)
    return due


def _draw_round(spark, ctx: OwnerContext, plan: Plan, step, coded, cliques: tuple, signing_key, *,
                noise: Optional[NoiseSource], randomness: Optional[DiffGenRandomness]):
    """Claim and spend once, then draw the round of ``step`` (a :class:`~fragrelease.jobs.protocol.draws.DrawStep`)
    on the ``coded`` fragment and return its signed message (not yet kept)."""
    spec = plan_synthesis_spec(ctx.schema, plan, ctx.name)
    n_records, names = plan.owner(ctx.name).n_records, spec.domain.names
    if step.step == ROUND_STEPS[1]:
        pairs: list[tuple[str, str]] = [(a, b) for i, a in enumerate(spec.features) for b in spec.features[i + 1:]]
        wanted: list[tuple[str, ...]] = [(a,) for a in names]
        counts = marginal_counts(coded, spec.domain, wanted + list(pairs))  # aggregates only
        spend_once(spark, ctx, plan, step, round_spend(plan, spec, 1))  # before any noise is drawn
        r1 = measure_round_one(spec.domain, {a: counts[(a,)] for a in names}, {p: counts[p] for p in pairs},
                               spec.budget, target=spec.target,
                               randomness=randomness if randomness is not None else SecureDiffGenRandomness(),
                               noise=noise)
        one_way = tuple(Measurement.of((a,), r1.one_way[a]) for a in names)
        msg1 = RoundOneMessage(plan_id=plan.plan_id, owner=ctx.name, dataset=plan.dataset, epsilon=spec.round_one_epsilon,
                               n_records=n_records, content_digest=round_one_digest(one_way, r1.edges),
                               created_at=_now(), one_way=one_way, edges=r1.edges)
        return msg1.model_copy(update={"signature": sign_manifest_fields(signing_key, msg1.signed_fields())})
    counts = marginal_counts(coded, spec.domain, list(cliques))  # aggregates only
    spend_once(spark, ctx, plan, step, round_spend(plan, spec, 2))  # before any noise
    measured = measure_cliques(spec.domain, counts, cliques, spec.budget, noise=noise)
    measurements = tuple(Measurement.of(c, measured[c]) for c in cliques)
    msg2 = RoundTwoMessage(plan_id=plan.plan_id, owner=ctx.name, dataset=plan.dataset, epsilon=spec.round_two_epsilon,
                           n_records=n_records, content_digest=round_two_digest(measurements),
                           created_at=_now(), cliques=measurements)
    return msg2.model_copy(update={"signature": sign_manifest_fields(signing_key, msg2.signed_fields())})
