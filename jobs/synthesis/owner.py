"""A data owner's three rounds of a synthetic release (``linkage: synthetic``; docs/specification.md §10).

The owner's ``protect`` step runs the round that is due (:func:`measure_owner_round`), which the
owner's **private draw records** say, never ``work_dir``'s files (:mod:`fragrelease.jobs.protocol.draws`):

- **round 1** when this owner kept none for the plan yet: a fresh X25519 key-agreement key
  (:mod:`fragrelease.secagg`), its private half kept in the owner's private folder, its public half
  signed to ``owners/<owner>/synthesis-round-1.json``; no data is read, nothing is spent;
- **round 2** once every owner of the plan has written round 1 (each verified under its owner's
  configured public key): its counts of every 1-way and every feature pair plus its noise shares
  (:mod:`fragrelease.rng.polya`), masked against the plan's participants (every owner and the key
  its round 1 published), signed, to ``synthesis-round-2.json``;
- **round 3** once every owner has written round 2: every party decodes round 2's sums and derives the
  same cliques; the owner's masked clique counts plus shares, signed, to ``synthesis-round-3.json``.

Draw once: a round is drawn once per plan; its signed message is kept in the owner's private folder
before it is written to ``work_dir``, and every later run re-publishes the kept bytes (a message deleted
from ``work_dir`` buys no second draw). Spend last: every check that needs no noise (the plan against
the configuration, the keys, the fragment's validation, every owner's earlier rounds) runs before the
owner's claim and its ledger's spend (round 2: ε₁ + ε_sel under the plan id; round 3: ε₂ under
``<plan id>/cliques``, so the two add up to ε_j exactly). Nothing data-dependent is logged; the counts
stay in this driver's memory (aggregates only, Σ cells rows).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Literal, Mapping, Optional

import numpy as np

from fragrelease.errors import ConfigError, FragReleaseError, ManifestMismatchError
from fragrelease.protocol.messages import Plan
from fragrelease.rng.polya import ShareSource
from fragrelease.secagg import KeyAgreementKey, encode_vector, mask, pair_keys, session_context
from fragrelease.signing import sign_manifest_fields, verify_manifest_fields
from fragrelease.synthesis.kind import SYNTHETIC
from fragrelease.synthesis.mechanism import measure_shares
from fragrelease.synthesis.protocol import (
    KeyMessage,
    MaskedMessage,
    MaskedVector,
    SynthesisSpec,
    key_digest,
    mask_label,
    masked_digest,
)

from ..protocol.context import OwnerContext, owner_paths
from ..protocol.draws import DrawStep, Spend, check_nonce_free, check_spend_once, draw_step, spend_once
from ..protocol.fragment import conform_attributes, conform_id, validate_fragment
from ..protocol.owner import check_plan_nonce, read_fragment, read_verified_plan
from ..protocol.signatures import owner_signing_key, public_keys
from ..protocol.workspace import claim_work_dir
from ..storage import file_exists, read_text, write_text
from .counts import coded_columns, marginal_counts
from .messages import Participants, plan_synthesis_spec, read_participants, round_path, structure

log = logging.getLogger(__name__)


#: The ledger's plan id of round 3: a second spend under the same plan, recorded once.
ROUND_THREE_SUFFIX = "/cliques"
#: The draw step of each round in the owner's private records (:mod:`fragrelease.jobs.protocol.draws`).
ROUND_STEPS = {1: "round-1", 2: "round-2", 3: "round-3"}
_MESSAGES: dict[int, type[KeyMessage] | type[MaskedMessage]] = {1: KeyMessage, 2: MaskedMessage, 3: MaskedMessage}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def round_spend(plan: Plan, spec: SynthesisSpec, number: int) -> Optional[Spend]:
    """Round 1 spends nothing (None); round 2 records ε₁ + ε_sel under the plan id (room first for the whole
    ε_j, so round 3 is not refused halfway for want of budget); round 3 ε₂ under ``<plan id>/cliques``."""
    if number == 1:
        return None
    if number == 2:
        return Spend(plan.dataset, plan.plan_id, spec.round_epsilon(2), spec.round_epsilon(2) + spec.round_epsilon(3))
    return Spend(plan.dataset, plan.plan_id + ROUND_THREE_SUFFIX, spec.round_epsilon(3), spec.round_epsilon(3))


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
    """The rounds of plan ``plan_id`` the owner (``ctx``) drew and kept privately: number → the kept bytes.

    Round 1's kept record holds its signed message and the private half of its key (:func:`_key_record`)."""
    out = {}
    for number, step in ROUND_STEPS.items():
        data = draw_step(ctx, plan_id, step).kept_bytes()
        if data is not None:
            out[number] = data
    return out


def _key_record(message: KeyMessage, key: KeyAgreementKey) -> bytes:
    """What round 1 keeps privately: its signed message and the private half of its key (hex)."""
    return json.dumps({"message": message.to_json(), "private_key": key.private_bytes().hex()}).encode("utf-8")


def _kept_message(number: int, data: bytes) -> bytes:
    """The signed message's bytes of a kept round (round 1's record holds it under ``message``)."""
    return json.loads(data)["message"].encode("utf-8") if number == 1 else data


def _kept_key(kept: Mapping[int, bytes], ctx: OwnerContext, plan: Plan) -> KeyAgreementKey:
    """The owner's private key-agreement key of the plan, from its kept round 1 (before round 2 or 3 draws)."""
    if 1 not in kept:
        raise ConfigError(f"owner {ctx.name!r} has not drawn its synthesis round 1 of plan {plan.plan_id}; run its "
                          "protect step for round 1 first")
    return KeyAgreementKey.from_private_bytes(bytes.fromhex(json.loads(kept[1])["private_key"]))


def _republish(ctx: OwnerContext, number: int, data: bytes, signing_key) -> None:
    """Write the kept round ``number`` (``data``, its kept record) to ``work_dir`` unless it is there as it is.

    A message kept under another signing key than the owner's current one is signed again over the
    same fields (the same draw; the signature only binds it to the key the parties now verify)."""
    path = round_path(ctx.paths, number)
    msg = _MESSAGES[number].model_validate_json(_kept_message(number, data))
    try:
        verify_manifest_fields(signing_key.public_key(), msg.signed_fields(), msg.signature, owner=ctx.name)
        text = _kept_message(number, data).decode("utf-8")
    except FragReleaseError:
        msg = msg.model_copy(update={"signature": sign_manifest_fields(signing_key, msg.signed_fields())})
        text = msg.to_json()
    if file_exists(path) and read_text(path) == text:
        return
    write_text(path, text)  # the owner's own protocol file (owners/<owner>/): the same draw, byte for byte
    log.info("owner %s: synthesis round %d of plan %s re-published from its private copy (no new draw, no spend)",
             ctx.name, number, msg.plan_id)


def _due(ctx: OwnerContext, kept: Mapping[int, bytes], number: Optional[int], plan: Plan) -> int:
    """The round to draw or re-publish: ``number``, or the first the owner's private records hold no output of."""
    due = number if number is not None else next((n for n in ROUND_STEPS if n not in kept), 3)
    for earlier in range(1, due):
        if earlier not in kept:
            raise ConfigError(f"owner {ctx.name!r} has not drawn its synthesis round {earlier} of plan {plan.plan_id}; "
                              f"run its protect step for round {earlier} first")
    return due


def _round_inputs(ctx: OwnerContext, plan: Plan, spec: SynthesisSpec, signing_key, due: int
                  ) -> tuple[Participants, tuple]:
    """What round ``due`` needs from every owner's signed messages, before it reads data or spends: the
    participants (round 2 and 3) and the cliques (round 3: from round 2's decoded sums)."""
    if due == 1:
        return (), ()
    keys = {**public_keys(ctx.config), ctx.name: signing_key.public_key()}  # its own: the key it signs with
    others = {o.name: owner_paths(ctx.config, o) for o in ctx.config.owners}  # the plan's owners (verified against cfg)
    party = f"owner {ctx.name!r}"
    participants = read_participants(others, plan, spec, keys, party=party)
    if due == 2:
        return participants, spec.measure_cliques
    _, cliques = structure(others, plan, spec, participants, keys, party=party)
    return participants, cliques


def check_round_before_spend(spark, ctx: OwnerContext, number: Optional[int] = None) -> int:
    """Run the checks of the owner's (``ctx``) round ``number`` (default: the one due) that need no noise,
    up to its ledger's check of the round's spend, and record nothing; return the round's number (1, 2 or 3).

    The checks of :func:`measure_owner_round` before its data is read (every owner's earlier rounds
    included), then the draw records' and the ledger's (:func:`fragrelease.jobs.protocol.draws.check_spend_once`:
    a kept round needs none; round 2 asks for room for the whole ε_j). It does not read the fragment.
    The local driver runs it for every owner, in configuration order, before any owner of a round
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
    if due > 1:
        _kept_key(kept, ctx, plan)
        _round_inputs(ctx, plan, spec, signing_key, due)
    _check_room(spark, ctx, plan, spec, due)
    return due


def _check_room(spark, ctx: OwnerContext, plan: Plan, spec: SynthesisSpec, due: int) -> None:
    """The ledger's checks of round ``due``'s spend, recording nothing; the key round (which spends nothing)
    asks for round 2's, so an owner without room for the whole ε_j is refused before it publishes a key."""
    number = 2 if due == 1 else due
    spend = round_spend(plan, spec, number)
    assert spend is not None  # rounds 2 and 3 spend
    check_spend_once(spark, ctx, plan, draw_step(ctx, plan.plan_id, ROUND_STEPS[number]), spend)


def measure_owner_round(spark, ctx: OwnerContext, *, source: Optional[ShareSource] = None,
                        number: Optional[int] = None) -> int:
    """Run the owner's due round of a synthetic release (or round ``number``); return its number (1, 2 or 3).

    ``ctx``: the owner's context (:func:`fragrelease.jobs.protocol.context.owner_context`).

    Draw once (:mod:`fragrelease.jobs.protocol.draws`): the round that is due comes from the owner's
    private records, never from ``work_dir``: every round it kept for this plan is re-published
    first, byte for byte (no draw, no spend); the first round it kept no output of is drawn: claimed,
    spent (round 2: ε₁ + ε_sel under the plan id; round 3: ε₂ under ``<plan id>/cliques``; round 1
    spends nothing), drawn, its signed message kept privately, then written to ``work_dir``. With every
    round kept, the call only re-publishes them and returns 3.

    ``source``: tests only (seeded noise shares); a release draws them exactly from the OS CSPRNG.

    Shapes: the owner's fragment (``id_column`` and every released attribute, ``n_records`` rows as the
    plan says) in (rounds 2 and 3); small signed JSON messages out (module docstring).

    Raises
    ------
    ManifestMismatchError, ProtocolError
        The plan differs from this owner's configuration, is not a synthetic plan, or carries a nonce
        another plan consumed; another owner's message that does not verify, masks against other
        participants, or masks that do not cancel (round 3).
    ConfigError
        A round before every owner wrote the round before; the fragment's record count differs from the plan.
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
    step = draw_step(ctx, plan.plan_id, ROUND_STEPS[due])
    if due == 1:
        _check_room(spark, ctx, plan, spec, due)  # room for the whole ε_j before a key is published
        key = KeyAgreementKey.generate()  # fresh for this plan; no data, no spend
        msg = KeyMessage(plan_id=plan.plan_id, owner=ctx.name, dataset=plan.dataset,
                         n_records=plan.owner(owner.name).n_records, collusion=spec.collusion,
                         content_digest=key_digest(key.public_hex()), created_at=_now(), key_agreement=key.public_hex())
        msg = msg.model_copy(update={"signature": sign_manifest_fields(signing_key, msg.signed_fields())})
        record = _key_record(msg, key)
    else:
        own_key = _kept_key(kept, ctx, plan)
        participants, cliques = _round_inputs(ctx, plan, spec, signing_key, due)  # before the data is read
        attrs = [schema.attribute(a["name"]) for a in plan.attributes]
        df, context, text = read_fragment(spark, ctx)
        check = validate_fragment(df, attrs, schema.id_column, context, id_type=ctx.id_type, text=text)
        if check.n_records != plan.owner(owner.name).n_records:
            raise ConfigError(f"owner {owner.name!r} now has {check.n_records} records, the plan was made for "
                              f"{plan.owner(owner.name).n_records}")
        df = conform_attributes(conform_id(df, schema.id_column, ctx.id_type), attrs)
        coded = coded_columns(df, spec.domain)
        record = _draw_round(spark, ctx, plan, spec, _Draw(step, due, cliques, participants), coded,
                             (own_key, signing_key), source=source)
    if not step.keep(record):  # kept privately before it is shared
        log.warning("owner %s: another attempt kept round %d of plan %s first; publishing that one", owner.name, due,
                    plan.plan_id)
    published = step.kept_bytes()
    assert published is not None  # kept just above
    write_text(round_path(ctx.paths, due), _kept_message(due, published).decode("utf-8"))
    log.info("owner %s: synthesis round %d written for plan %s", owner.name, due, plan.plan_id)
    return due


@dataclass(frozen=True)
class _Draw:
    """A measured round to draw: its draw step, number (2 or 3), cliques and participants."""

    step: DrawStep
    number: int
    cliques: tuple
    participants: Participants


def _draw_round(spark, ctx: OwnerContext, plan: Plan, spec: SynthesisSpec, draw: _Draw, coded, keys: tuple, *,
                source: Optional[ShareSource]) -> bytes:
    """Claim and spend once, then draw round ``draw.number`` (2 or 3) on the ``coded`` fragment: counts plus
    noise shares, masked against ``draw.participants``; return its signed message's bytes (not yet kept).
    ``keys``: the owner's key-agreement key of the plan and its signing key."""
    step, number, cliques, participants = draw.step, draw.number, draw.cliques, draw.participants
    own_key, signing_key = keys
    n_records = plan.owner(ctx.name).n_records
    counts = marginal_counts(coded, spec.domain, list(cliques))  # aggregates only
    pairs = pair_keys(ctx.name, own_key, dict(participants), context=session_context(plan.plan_id, dict(participants)))
    spend = round_spend(plan, spec, number)
    assert spend is not None  # rounds 2 and 3 spend
    spend_once(spark, ctx, plan, step, spend)  # before any noise is drawn
    shares = measure_shares(spec.domain, counts, spec.round_noise(number, cliques), source=source)
    vectors = tuple(MaskedVector(attributes=tuple(c), cells=encode_vector(
        mask(shares[tuple(c)], own_name=ctx.name, keys=pairs, label=mask_label(number, c)))) for c in cliques)
    check = encode_vector(mask(np.array([n_records], dtype=np.int64), own_name=ctx.name, keys=pairs,
                               label=mask_label(number, ())))
    kind: Literal["synthesis-round-2", "synthesis-round-3"] = "synthesis-round-2" if number == 2 else "synthesis-round-3"
    msg = MaskedMessage(kind=kind, plan_id=plan.plan_id, owner=ctx.name, dataset=plan.dataset,
                        epsilon=spec.round_epsilon(number), n_records=n_records, collusion=spec.collusion,
                        content_digest=masked_digest(participants, vectors, check), created_at=_now(),
                        participants=participants, vectors=vectors, check=check)
    msg = msg.model_copy(update={"signature": sign_manifest_fields(signing_key, msg.signed_fields())})
    return msg.to_json().encode("utf-8")
