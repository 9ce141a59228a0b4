"""The aggregator's job κ: plan, then have the release kind verify and combine, and commit the release.

Sources: docs/specification.md §3; Del Vasto-Terrientes et al. (ICISSP 2025) §4.2.

``plan``: read every owner's metadata, validate it (horizontal: identical attributes, kinds and
domains, and disjoint records, compared through the owners' keyed id digests; vertical: disjoint
attributes, the same id set, no duplicates), and issue the plan, which copies every owner's nonce
(k ≥ 3, k ≤ n; horizontal: every owner the full ε; vertical: ε_j by the configured split).

``release``: the release kind (:meth:`fragrelease.jobs.protocol.kind.KindJobs.combine`, found by
:func:`fragrelease.jobs.protocol.kind.kind_jobs`) verifies every owner's signed messages against the
plan and combines them into the release's rows (IR: :mod:`fragrelease.jobs.idpir.combine`); this module
then commits them as one Delta transaction whose commit records the provenance: total ε,
composition, k, mechanism, owners and their ε_j with each attribute's budget split, the category
order, the linkage, the exact guarantee and the plan id — public parameters only — and
writes the public report (statistics of the released table only) beside it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from fragrelease.errors import ConfigError, ManifestMismatchError, ProtocolError, ReleaseExistsError
from fragrelease.protocol.config import PRIVATE_ROOT_ENV
from fragrelease.protocol.fragmentation import fragmentation_of
from fragrelease.protocol.messages import OwnerMetadata, Plan, make_plan
from fragrelease.protocol.plan_check import check_plan_for_owner, expected_plan_terms
from fragrelease.pseudonyms import PSEUDONYM_COLUMN
from fragrelease.version import __version__

from ..describe import cast_declared_integers, integer_columns, release_description
from ..session import get_spark
from ..storage import (
    check_output,
    commit_release,
    finish_output,
    is_delta_table,
    prepare_output,
    read_text,
    release_exists,
    release_target,
    stamp_provenance,
    table_self_description,
    write_text,
)
from .context import AggregatorContext
from .digests import committed_rows, set_checks, shared_records
from .kind import Combined, kind_jobs
from .layout import id_digests_path, read_message
from .shuffle import one_task
from .workspace import claim_work_dir

__all__ = ["CommittedRelease", "check_disjoint_ids", "check_plan_against_config", "issue_plan", "pin_plan",
           "pinned_plan", "provenance", "refuse_existing_release", "release"]

log = logging.getLogger(__name__)


def issue_plan(ctx: AggregatorContext, spark=None, *, pin: bool = True) -> Plan:
    """Validate the owners' metadata files, pin the plan in the aggregator's private folder
    (:func:`pin_plan`) and write ``plan.json``.

    ``ctx``: the aggregator's context (:func:`fragrelease.jobs.protocol.context.aggregator_context`).

    ``spark`` is needed only when the release goes to a catalog table (``output_table``), to look it
    up; without it the active (or a new local) session is used. ``pin=False``: the caller keeps the
    plan in memory and hands it to :func:`release` itself (the single-command run), so no pin is written.

    Horizontal releases: the owners' id digests (``metadata/ids/<owner>/<nonce>``, written by
    :func:`fragrelease.jobs.protocol.owner.describe_fragment`) are checked against their metadata and
    compared (:func:`check_disjoint_ids`, a Spark job): owners that share a record are refused here,
    before any of them spends budget. The plan copies every owner's nonce (its pseudonym context).

    Raises
    ------
    ReleaseExistsError
        The release table exists and the configuration does not allow a new version: refused
        before any owner spends budget on it.
    OutputConflictError, SchemaMismatchError, TableWriteError
        The output path holds something this release must not write into, or a release with other
        columns (:func:`fragrelease.jobs.storage.check_output`), or the marker beside a new output
        cannot be written (:func:`fragrelease.jobs.storage.prepare_output`): refused before any
        owner spends.
    ProtocolError, IdentifierError, InvalidParameterError
        From :func:`fragrelease.protocol.messages.make_plan`; ProtocolError also for a metadata file
        that is not UTF-8, not JSON or not valid metadata (:func:`fragrelease.jobs.protocol.layout.read_message`),
        and for a horizontal owner's id digests missing or not matching its metadata; two horizontal
        owners sharing records (IdentifierError).
    ConfigError
        A metadata file is missing, or the aggregator's private folder is open to others.
    """
    cfg = ctx.config
    claim_work_dir(cfg)  # the plan goes into work_dir: it must be this release's (jobs/protocol/workspace.py)
    refuse_existing_release(ctx, spark)
    metas = [read_message(OwnerMetadata, ctx.owners[o.name].metadata, party="aggregator",
                          what=f"metadata of owner {o.name!r}") for o in cfg.owners]
    plan = make_plan(metas, fragmentation=cfg.fragmentation, mechanism=cfg.mechanism, k=cfg.k,
                     epsilon=cfg.epsilon, epsilon_split=cfg.epsilon_split, keep_id=cfg.keep_id, options=cfg.options)
    if not fragmentation_of(cfg.fragmentation).by_attributes:  # disjoint records; the metadata checks first: no Spark
        check_disjoint_ids(spark if spark is not None else get_spark(), ctx, metas)
    target = release_target(cfg, plan.dataset)
    if target is None:
        refuse_existing_release(ctx, spark, columns=release_columns(plan))  # now with the plan's columns
    else:  # checked again with the plan's columns; the marker claims the output (and probes it) before any spend
        prepare_output(target, plan.plan_id, if_exists=cfg.if_exists, columns=release_columns(plan))
    text = plan.to_json()
    if pin:
        pin_plan(ctx, plan)  # before the owners can see it: the release step accepts only this plan
    write_text(ctx.plan, text)
    log.info("plan %s issued to %d owners", plan.plan_id, len(plan.owners))
    return plan


def release_columns(plan: Plan) -> list[str]:
    """The columns a release of ``plan`` publishes: the kind's own (:meth:`KindJobs.table_columns`), else its
    attributes, and the pseudonym when kept."""
    own = kind_jobs(plan.linkage).table_columns(plan)
    if own is not None:
        return list(own)
    return [*([PSEUDONYM_COLUMN] if plan.keep_id else []), *(a["name"] for a in plan.attributes)]


def check_disjoint_ids(spark, ctx: AggregatorContext, metas: Sequence[OwnerMetadata]) -> None:
    """Refuse horizontal owners that share a record, from their metadata round's id digests.

    Every owner's table ``metadata/ids/<owner>/<nonce>`` (one column ``pseudonym``: HMAC of each id
    under the owners' shared key, context ``metadata``) is checked first: it must exist and its set
    digest must equal the owner's ``id_digest`` and count its ``n_records`` (the table lies on shared
    storage). Then :func:`fragrelease.jobs.protocol.digests.set_checks` compares them (a distributed count; no digest
    reaches the driver).

    The count of shared records in the message is data-dependent; it goes to the parties of this
    release only (the error line, never a manifest, a table property or a log at INFO), who must
    learn that records are shared to fix their fragments; the same count was told at the release
    step before this check existed.

    Raises
    ------
    ProtocolError
        An owner's metadata names no id digests (metadata of an older version: run its metadata step
        again), or its table is missing or does not match its metadata.
    IdentifierError
        ``owners 'a' and 'b' share N records (their keyed id digests match) ...``.
    """
    psets, paths = {}, {}
    problem: Optional[ProtocolError] = None  # the first owner's problem that needs no digest, raised in owner order
    for m in metas:
        if m.nonce is None or m.id_digest is None:
            problem = ProtocolError(f"the metadata of owner {m.owner!r} has no id digests (written by an older "
                                    "fragrelease); run its owner metadata step again")
            break
        path = id_digests_path(ctx.config.work_dir, m.owner, m.nonce)
        if not is_delta_table(path):
            problem = ProtocolError(f"owner {m.owner!r} has no id-digest table at {path!r}; run its owner metadata step again")
            break
        df = committed_rows(spark, path)
        paths[m.owner] = path
        if df.columns != [PSEUDONYM_COLUMN]:
            problem = _id_digests_mismatch(m.owner, path)
            break
        psets[m.owner] = df
    # the digests of the tables read so far and, when every table was read, the records they share, in one
    # pass (one Spark job for small fragments); a mismatch of an earlier owner is told first, then a problem
    # that needed no digest, then shared records
    if not psets:
        raise problem if problem is not None else ProtocolError("no owner metadata to plan from")
    checks = set_checks(psets, PSEUDONYM_COLUMN, overlaps=problem is None,
                        single_task=one_task(sum(m.n_records for m in metas), 1))
    digests = dict(zip(psets, checks.pseudonyms))
    for m in metas:
        if m.owner not in psets:
            break
        if digests[m.owner] != m.id_digest or int(str(m.id_digest).split(":")[0]) != m.n_records:
            raise _id_digests_mismatch(m.owner, paths[m.owner])
    if problem is not None:
        raise problem
    if checks.shared is not None:
        raise shared_records(*checks.shared, stage="plan")


def _id_digests_mismatch(owner: str, path: str) -> ProtocolError:
    return ProtocolError(f"the id-digest table of owner {owner!r} at {path!r} does not match its metadata; "
                         "run its owner metadata step again")


def refuse_existing_release(ctx: AggregatorContext, spark=None, *, columns: Optional[Sequence[str]] = None) -> None:
    """Refuse an output this release (``ctx``, the aggregator's context) must not write into, before any owner spends.

    An output path is checked by :func:`fragrelease.jobs.storage.check_output` (``columns``: the
    release's columns once the plan is known). A catalog table is refused when it exists and
    ``if_exists`` is ``error``.

    Raises
    ------
    ReleaseExistsError, OutputConflictError, SchemaMismatchError
        As :func:`fragrelease.jobs.storage.check_output`.
    """
    cfg = ctx.config
    target = release_target(cfg)
    if target is not None:
        check_output(target, if_exists=cfg.if_exists, columns=columns)
        return
    if cfg.if_exists == "error" and release_exists(spark if spark is not None else get_spark(), cfg.output,
                                                   cfg.output_table):
        raise ReleaseExistsError(f"a release already exists at {cfg.output_table!r} and if_exists is 'error'")


def plan_digest(plan: Plan) -> str:
    """SHA-256 (hex) of the plan's canonical JSON (:meth:`Plan.to_json`): equal plans, equal digests."""
    import hashlib

    return hashlib.sha256(plan.to_json().encode("utf-8")).hexdigest()


def pin_plan(ctx: AggregatorContext, plan: Plan) -> str:
    """Record the issued plan's id and digest in the aggregator's private folder (0600 in 0700); return the path.

    The folder lies outside ``work_dir`` (:func:`fragrelease.jobs.protocol.layout.aggregator_private_dir`),
    so no owner who writes ``work_dir`` can change it.

    Raises
    ------
    ConfigError
        The private folder exists and is open to group or others.
    """
    import json

    from .workspace import write_private_text

    path = ctx.plan_pin
    write_private_text(path, json.dumps({"release": ctx.config.name, "plan_id": plan.plan_id, "sha256": plan_digest(plan)}),
                       who="aggregator")
    return path


def pinned_plan(ctx: AggregatorContext, plan_id: Optional[str] = None) -> Plan:
    """``plan.json`` from ``work_dir``, if it is the plan this aggregator issued and pinned (no Spark).

    ``plan_id`` (``aggregator release --plan-id``): the id the plan step printed; a plan with
    another id is refused, and this id stands in for the pin when the release step runs where the
    plan step's private folder is not (another machine): the pin, when there is one, is checked too.

    Raises
    ------
    ConfigError
        ``plan.json`` does not exist.
    ManifestMismatchError
        ``plan.json`` is not UTF-8, not JSON or not a plan
        (:func:`fragrelease.jobs.protocol.layout.read_message`), not the pinned plan
        (:func:`check_pinned_plan`), or not ``plan_id``.
    """
    plan = read_message(Plan, ctx.plan, party="aggregator", what="plan.json", error=ManifestMismatchError)
    if plan_id is not None and plan.plan_id != plan_id:
        raise ManifestMismatchError(f"aggregator: plan.json in work_dir is not the plan this aggregator issued "
                                    f"(plan id {plan.plan_id}, expected {plan_id} from --plan-id); refusing")
    check_pinned_plan(ctx, plan, required=plan_id is None)
    return plan


def check_pinned_plan(ctx: AggregatorContext, plan: Plan, *, required: bool = True) -> None:
    """Refuse a ``plan.json`` that is not the plan this aggregator issued (its pin, :func:`pin_plan`).

    ``required=False``: no pin at all is accepted (the caller checked the plan id otherwise); a
    damaged pin or one naming another plan is still refused.

    Raises
    ------
    ManifestMismatchError
        No pin (the plan step did not run with this private root), a damaged pin, or a plan whose
        id or digest differs: ``aggregator: plan.json in work_dir is not the plan this aggregator
        issued (plan id X, expected Y); refusing``.
    """
    import json

    path = ctx.plan_pin
    try:
        pin = json.loads(read_text(path))
    except ConfigError:
        if not required:
            return
        raise ManifestMismatchError(f"aggregator: no pinned plan at {path!r} (written by 'fragrelease aggregator plan' "
                                    f"with this {PRIVATE_ROOT_ENV}); refusing plan.json from work_dir") from None
    except ValueError as exc:
        raise ManifestMismatchError(f"aggregator: the pinned plan {path!r} cannot be read ({type(exc).__name__}); "
                                    "refusing: issue the plan again") from None
    if not isinstance(pin, dict) or not isinstance(pin.get("plan_id"), str) or not isinstance(pin.get("sha256"), str):
        raise ManifestMismatchError(f"aggregator: the pinned plan {path!r} names no plan id and digest; refusing: "
                                    "issue the plan again")
    if plan.plan_id != pin["plan_id"]:
        raise ManifestMismatchError(f"aggregator: plan.json in work_dir is not the plan this aggregator issued "
                                    f"(plan id {plan.plan_id}, expected {pin['plan_id']}); refusing")
    if plan_digest(plan) != pin["sha256"]:
        raise ManifestMismatchError(f"aggregator: plan.json in work_dir is not the plan this aggregator issued "
                                    f"(plan id {plan.plan_id}, but its content differs from the issued plan's); "
                                    "refusing")


def provenance(plan: Plan, *, single_process: bool = False, risk_check: bool = False) -> Mapping[str, Any]:
    """The public facts a release records with its commit (docs/specification.md §3).

    ``single_process``: one process played every party (the guarantee then says it held the key).
    ``risk_check``: the configuration sets the owners' advisory risk check (the guarantee then says
    the hand-over does not depend on it; :data:`fragrelease.idpir.guarantee.HAND_OVER`).
    """
    from fragrelease.protocol.kind import release_kind

    kind = release_kind(plan.linkage)
    prov: dict[str, Any] = {
        "role": "release",
        "plan_id": plan.plan_id,
        "dataset": plan.dataset,
        "fragmentation": plan.fragmentation,
        "mechanism": plan.mechanism,
        "k": plan.k,
        "epsilon": str(plan.epsilon),  # exact text, as in plan.json
        "composition": plan.composition,
        "epsilon_split": plan.epsilon_split,
        "owners": [o.model_dump(mode="json") for o in plan.owners],
        "attributes": [dict(a) for a in plan.attributes],
        "keep_id": plan.keep_id,
        **plan.wire(),  # every release option as its wire text (fragrelease/protocol/options.py)
        "guarantee": kind.guarantee(mechanism=plan.mechanism, epsilon=str(plan.epsilon), composition=plan.composition,
                                    category_order=plan.category_order, keep_id=plan.keep_id,
                                    fragmentation=plan.fragmentation, single_process=single_process,
                                    risk_check=risk_check),
        "fragrelease_version": __version__,
    }
    # the terms that do not act on the kind are not recorded as if they did (synthetic: the IR terms; IR: the
    # synthesis options), and its owners as the kind records them
    return kind.provenance_terms(prov, plan.owners)


def check_plan_against_config(plan: Plan, ctx: AggregatorContext) -> None:
    """Refuse a ``plan.json`` whose terms differ from the aggregator's own configuration.

    The plan lies on shared storage; the owners' signed manifests pin each owner's part of it, not
    the release-wide terms only the aggregator uses (``keep_id``, ``linkage``, the owners' list).
    Every owner's terms are recomputed from ``ctx.config`` (:func:`fragrelease.protocol.plan_check.expected_plan_terms`)
    and compared (:func:`fragrelease.protocol.plan_check.check_plan_for_owner`).

    Raises
    ------
    ManifestMismatchError
        ``the aggregator refuses plan.json: ...`` naming the field and both values.
    """
    cfg, schema = ctx.config, ctx.schema
    for o in cfg.owners:
        try:
            check_plan_for_owner(plan, o.name, expected_plan_terms(cfg, schema, o.name))
        except ManifestMismatchError as exc:
            raise ManifestMismatchError(f"the aggregator refuses plan.json ({exc})") from None


@dataclass(frozen=True)
class CommittedRelease:
    """What :func:`release` committed: ``path`` (the Delta table's location), ``table`` (the catalog name,
    or None), ``version``, ``rows`` (the records released; a synthetic release: the drawn, noisy count),
    the ``provenance`` recorded with the commit (public facts only) and ``report`` (path or None).
    :class:`fragrelease.jobs.api.Release` wraps it in a typed result with the owners' parts."""

    path: str
    table: Optional[str]
    version: int
    rows: int
    provenance: Mapping[str, Any]
    report: Optional[str]


def release(spark, ctx: AggregatorContext, *, keys: Optional[Mapping[str, Ed25519PublicKey]] = None,
            plan: Optional[Plan] = None, single_process: bool = False) -> CommittedRelease:
    """Have the release kind verify and combine every owner's messages, and commit the release.

    ``ctx``: the aggregator's context (:func:`fragrelease.jobs.protocol.context.aggregator_context`).
    ``keys``: the owners' public keys (default: the configuration's ``owners[].public_key``);
    :func:`fragrelease.jobs.api.Release.run` passes the keys it generated for the release.
    ``plan``: the plan this aggregator issued, held in memory (the single-command run passes it);
    without it ``plan.json`` is read from ``work_dir`` and refused unless it is the plan the
    aggregator pinned when it issued it (:func:`check_pinned_plan`): an owner who writes
    ``work_dir`` cannot swap in another plan, an earlier one included. ``single_process``: every
    party played in this process (recorded in the guarantee, :func:`provenance`).

    The kind verifies and combines (:meth:`fragrelease.jobs.protocol.kind.KindJobs.combine`): IR, the
    owners' protected fragments (:func:`fragrelease.jobs.idpir.combine.verified_combination`); ``linkage:
    synthetic``, their signed measurements, the model fitted and its rows drawn (docs/specification.md §10).

    Returns
    -------
    :class:`CommittedRelease`.

    Raises
    ------
    ManifestMismatchError
        An owner's message that does not match its manifest or the plan (the kind's verification; IR:
        :func:`fragrelease.jobs.idpir.combine.load_verified_fragment`); a ``plan.json`` that is not JSON, not a plan, or not the pinned plan (:func:`check_pinned_plan`).
    IdentifierError
        Vertical fragments whose pseudonym sets differ (the join would lose or invent records), or
        horizontal owners holding the same pseudonym
        (IR: :func:`fragrelease.jobs.idpir.combine.check_disjoint_pseudonyms`).
    ReleaseExistsError, OutputConflictError, SchemaMismatchError
        The output (:func:`refuse_existing_release`). An output path without a committed version gets
        this release's marker before the commit, and a crashed earlier attempt of the same release
        is cleared first (:func:`fragrelease.jobs.storage.prepare_output`).
    """
    refuse_existing_release(ctx, spark)  # before any fragment is read or verified
    plan = pinned_plan(ctx) if plan is None else plan
    check_plan_against_config(plan, ctx)  # plan.json lies on shared storage: nothing in it is trusted
    refuse_existing_release(ctx, spark, columns=release_columns(plan))
    prov = dict(provenance(plan, single_process=single_process,  # public facts only, stamped as every commit is
                           risk_check=ctx.config.risk_check is not None))
    combined = kind_jobs(plan.linkage).combine(spark, ctx, plan, keys)  # the kind verifies and combines
    prov.update(combined.provenance)  # the kind's terms: public, or computed from noised values only
    return _commit(spark, ctx, plan, combined, prov)


def _commit(spark, ctx: AggregatorContext, plan: Plan, combined: Combined, prov: Mapping[str, Any]) -> CommittedRelease:
    """Commit ``combined`` (the release's rows) with ``prov`` and write the public report; :func:`release`'s result."""
    released, rows = combined.rows, combined.count
    cfg, schema = ctx.config, ctx.schema
    prov = stamp_provenance(prov, system="idpir", guarantee=prov["guarantee"])
    # integer-declared attributes are written as integers (rounding a released value is post-processing),
    # and the table describes itself from the public provenance only (fragrelease.jobs.describe)
    declared = {a.name: a.type for a in schema.attributes}
    released = cast_declared_integers(released, integer_columns(plan.attributes, declared))
    described = release_description(prov, declared_types=declared, id_column=PSEUDONYM_COLUMN)
    target = release_target(cfg, plan.dataset)
    if target is not None:  # a first version: mark the folder as this release's, clearing its own crashed write
        prepare_output(target, plan.plan_id, if_exists=cfg.if_exists, columns=release_columns(plan))
    path, version = commit_release(released, system="idpir", provenance=prov, guarantee=prov["guarantee"],
                                   path=cfg.output if cfg.output_table is None else None, table=cfg.output_table,
                                   if_exists=cfg.if_exists, description=described, small=combined.small)
    if target is not None:
        finish_output(target)
    log.info("release committed: version %d of %s", version, cfg.output_table or path)
    report = None
    if cfg.reports:
        # imported here: only a run that writes reports loads the report module (see owner.py)
        from .report import committed_release, public_report, public_report_path

        attrs = [schema.attribute(a["name"]) for a in plan.attributes]
        kind = kind_jobs(plan.linkage)
        sections = kind.report_sections(prov, attrs)
        summarised = attrs if kind.table_columns(plan) is None else []  # the table's attributes
        report = public_report(committed_release(spark, path, version), summarised, prov, public_report_path(path, version),
                               described=table_self_description(path, version), table=cfg.output_table or path,
                               version=version, extra_sections=sections, records=rows)
    return CommittedRelease(path=path, table=cfg.output_table, version=version, rows=rows, provenance=prov,
                            report=report)
