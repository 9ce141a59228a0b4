"""The aggregator's job κ: plan, then validate, combine and release.

Sources: docs/specification.md §3; Del Vasto-Terrientes et al. (ICISSP 2025) §4.2.

``plan``: read every owner's metadata, validate it (horizontal: identical attributes, kinds and
domains, and disjoint records, compared through the owners' keyed id digests; vertical: disjoint
attributes, the same id set, no duplicates), and issue the plan, which copies every owner's nonce
(k ≥ 3, k ≤ n; horizontal: every owner the full ε; vertical: ε_j by the configured split).

``release``: check every owner's manifest against the plan and its protected fragment and
pseudonym set against the manifest (schema, record count, content digest, pseudonym-set digest),
refuse vertical pseudonym sets that differ and horizontal owners that share a pseudonym (a record
held twice), union (horizontal) or join on the pseudonym (vertical), drop the pseudonym unless
the configuration keeps it (``keep_id: true`` publishes the ``pseudonym`` column, which only the
owners, who hold the key, can map back to record ids), shuffle the row order with CSPRNG keys
(and, with ``linkage: unlinked``, every column on its own), and
commit the release as one Delta transaction whose commit records the provenance: total ε,
composition, k, mechanism, owners and their ε_j with each attribute's budget split, the category
order, the linkage, the exact guarantee (:func:`fragrelease.idpir.guarantee.release_guarantee`) and the
plan id — public parameters only — and
write the public report (statistics of the released table only) beside it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fragrelease.errors import ConfigError, IdentifierError, ManifestMismatchError, ProtocolError, ReleaseExistsError
from fragrelease.idpir.linkage import ir_linkage
from fragrelease.protocol.config import PRIVATE_ROOT_ENV
from fragrelease.protocol.fragmentation import fragmentation_of
from fragrelease.protocol.messages import Manifest, OwnerMetadata, Plan, check_manifest, make_plan
from fragrelease.protocol.plan_check import check_plan_for_owner, expected_plan_terms
from fragrelease.pseudonyms import PSEUDONYM_COLUMN
from fragrelease.version import __version__

from ..describe import cast_declared_integers, integer_columns, release_description
from ..idpir.unlink import unlink_columns, unlink_frames
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
from .digests import committed_rows, content_digest, fragment_digests, set_checks
from .kind import Combined, kind_jobs
from .layout import id_digests_path, read_message
from .shuffle import one_task, pseudonym_set_digest, shuffle_rows
from .signatures import public_keys, verify_owner_manifest, verify_table
from .workspace import claim_work_dir

__all__ = ["check_disjoint_pseudonyms", "combine", "issue_plan", "join_vertical", "unlink_frames",
           "load_verified_fragment", "provenance", "release", "shuffle_rows", "unlink_columns"]

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
    """The columns a release of ``plan`` publishes: its attributes, and the pseudonym when kept."""
    return [*([PSEUDONYM_COLUMN] if plan.keep_id else []), *(a["name"] for a in plan.attributes)]


def check_disjoint_ids(spark, ctx: AggregatorContext, metas: Sequence[OwnerMetadata]) -> None:
    """Refuse horizontal owners that share a record, from their metadata round's id digests.

    Every owner's table ``metadata/ids/<owner>/<nonce>`` (one column ``pseudonym``: HMAC of each id
    under the owners' shared key, context ``metadata``) is checked first: it must exist and its set
    digest must equal the owner's ``id_digest`` and count its ``n_records`` (the table lies on shared
    storage). Then :func:`check_disjoint_pseudonyms` compares them (a distributed count; no digest
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
        raise _shared_records(*checks.shared, stage="plan")


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


def _read_checked(spark, owner: str, path: str, what: str, expected: list[str], digest_of, version=None):
    """Read a Delta table of ``owner`` and compute ``digest_of(df)`` if its columns are ``expected``."""
    if not is_delta_table(path):
        raise ManifestMismatchError(f"owner {owner!r} has no {what} Delta table at {path!r}")
    try:
        df = committed_rows(spark, path, version)  # the signed version's data files only (verify_table checked them)
        columns = df.columns
        digests = digest_of(df) if sorted(columns) == sorted(expected) else None
    except Exception as exc:  # a truncated or corrupted file surfaces as a Spark read error
        raise ManifestMismatchError(f"{what} fragment of {owner!r} at {path!r} cannot be read: "
                                    f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}") from None
    if digests is None:
        raise ManifestMismatchError(f"{what} fragment of {owner!r} has columns {columns}, the manifest says {expected}")
    return df, digests


def load_verified_fragment(spark, ctx: AggregatorContext, plan: Plan, owner: str,
                           keys: Optional[Mapping[str, Ed25519PublicKey]] = None,
                           ) -> tuple[Manifest, DataFrame, DataFrame, str]:
    """An owner's protected fragment after checking manifest ↔ owner, signature, plan, tables and content.

    Checks, in order (docs/known-limitations.md #7): the manifest in ``owners/<owner>/`` names
    ``owner``, which is the plan's owner; its Ed25519 signature verifies under ``owner``'s public
    key (``keys``, default: the configuration's ``owners[].public_key``; a missing key is refused);
    it matches the plan; each table's latest Delta version, commit files and active data files
    (path, size, SHA-256) are the signed ones (:func:`fragrelease.jobs.protocol.signatures.verify_table`);
    the content and pseudonym-set digests recomputed from the data are the signed ones.

    Returns the manifest, the fragment (``pseudonym`` first, then the attributes in manifest order;
    with ``linkage: unlinked`` the attributes only), the owner's pseudonym set (a DataFrame with one
    column ``pseudonym``: the fragment's column, or ``owners/<owner>/pseudonyms`` when unlinked) and
    the digest of that set (``count:sum``, checked against the manifest's ``pseudonym_digest``).

    Raises
    ------
    ManifestMismatchError
        Missing or unreadable manifest or table, a manifest naming another owner than its folder,
        an unsigned manifest or one whose signature does not verify, no configured public key, a
        manifest that differs from the plan, a table whose version, files, columns, record count content
        digest or pseudonym-set digest differ from the signed manifest. One line naming the owner. One line naming the owner.
    """
    checked = _fragment_before_digests(spark, ctx, plan, owner, keys)
    if checked.unlinked:
        df, digest = _read_checked(spark, owner, checked.path, "protected", checked.names, content_digest,
                                   checked.manifest.table_version)
        pset, pdigest = _read_checked(spark, owner, checked.pset_path, "pseudonym-set", [PSEUDONYM_COLUMN],
                                      pseudonym_set_digest, checked.manifest.pseudonym_table_version)
    else:
        df, (digest, pdigest) = _read_checked(spark, owner, checked.path, "protected", checked.expected,
                                              lambda d: fragment_digests(d, PSEUDONYM_COLUMN),
                                              checked.manifest.table_version)
        pset = df.select(PSEUDONYM_COLUMN)
    _check_digests(owner, checked.manifest, digest, pdigest)
    return checked.manifest, df.select(*checked.expected), pset, pdigest


@dataclass(frozen=True)
class _Checked:
    """An owner's fragment after every check of :func:`load_verified_fragment` that needs no Spark job:
    its verified manifest, its tables' paths, the columns expected, and (linked) its rows, read lazily."""

    manifest: Manifest
    path: str
    pset_path: str
    names: list[str]
    expected: list[str]
    unlinked: bool
    rows: Optional[DataFrame] = None


def _fragment_before_digests(spark, ctx: AggregatorContext, plan: Plan, owner: str,
                             keys: Optional[Mapping[str, Ed25519PublicKey]], *, read: bool = False) -> _Checked:
    """:func:`load_verified_fragment`'s checks up to its digests, in its order (no Spark job). ``read``
    (linked fragments): also read the signed version's rows and check their columns, as :func:`_read_checked`
    does, without computing anything. Raises ManifestMismatchError as :func:`load_verified_fragment`."""
    paths = ctx.owners.get(owner)
    if paths is None:  # the plan names an owner the configuration does not: check_plan_against_config refuses it first
        raise ManifestMismatchError(f"owner {owner!r} is not an owner of configuration {ctx.config.name!r}")
    try:
        manifest = read_message(Manifest, paths.manifest, party="aggregator",
                                what=f"manifest of owner {owner!r}", error=ManifestMismatchError)
    except ConfigError as exc:
        raise ManifestMismatchError(f"owner {owner!r} has no manifest: {exc}") from None
    # signed manifests: the owner, its folder and its key before anything in the manifest is used
    verify_owner_manifest(manifest, folder_owner=owner, plan_owner=plan.owner(owner).name,
                          keys=public_keys(ctx.config) if keys is None else keys)
    if manifest.plan_id != plan.plan_id:  # an older plan's fragment: this plan's is not published yet
        raise ManifestMismatchError(f"owner {owner!r} has not published its protected fragment of plan {plan.plan_id} "
                                    f"yet ({paths.manifest!r} is of plan {manifest.plan_id}); run its protect step first")
    check_manifest(manifest, plan)
    names = [a["name"] for a in manifest.attributes]
    path, pset_path = paths.protected, paths.pseudonyms
    unlinked = ir_linkage(plan.linkage).shuffles_columns
    if not is_delta_table(path):
        raise ManifestMismatchError(f"owner {owner!r} has no protected Delta table at {path!r}")
    if unlinked and not is_delta_table(pset_path):
        raise ManifestMismatchError(f"owner {owner!r} has no pseudonym-set Delta table at {pset_path!r}")
    verify_table(spark, manifest, path, owner, pseudonyms_path=pset_path if unlinked else None)
    expected = names if unlinked else [PSEUDONYM_COLUMN, *names]
    rows = None
    if read and not unlinked:
        try:
            rows = committed_rows(spark, path, manifest.table_version)  # the signed version's data files only
            columns = rows.columns
        except Exception as exc:  # noqa: BLE001 - as _read_checked: one line naming the owner
            raise ManifestMismatchError(f"protected fragment of {owner!r} at {path!r} cannot be read: "
                                        f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}") from None
        if sorted(columns) != sorted(expected):
            raise ManifestMismatchError(f"protected fragment of {owner!r} has columns {columns}, the manifest says "
                                        f"{expected}")
    return _Checked(manifest=manifest, path=path, pset_path=pset_path, names=names, expected=expected,
                    unlinked=unlinked, rows=rows)


def _check_digests(owner: str, manifest: Manifest, digest: str, pdigest: str) -> None:
    """Refuse a fragment whose recomputed content or pseudonym-set digest is not the signed one (ManifestMismatchError)."""
    if digest != manifest.content_digest:
        raise ManifestMismatchError(
            f"protected fragment of {owner!r} does not match its manifest: content digest {digest} != {manifest.content_digest}"
        )
    if int(digest.split(":")[1]) != manifest.n_records:
        raise ManifestMismatchError(f"protected fragment of {owner!r} has {digest.split(':')[1]} rows, manifest says {manifest.n_records}")
    if pdigest != manifest.pseudonym_digest:
        raise ManifestMismatchError(f"pseudonym set of {owner!r} does not match its manifest: digest {pdigest} != "
                                    f"{manifest.pseudonym_digest}")
    if int(pdigest.split(":")[0]) != manifest.n_records:
        raise ManifestMismatchError(f"pseudonym set of {owner!r} has {pdigest.split(':')[0]} pseudonyms, "
                                    f"manifest says {manifest.n_records} records")


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


def check_disjoint_pseudonyms(psets: dict[str, DataFrame], *, stage: str = "release", single_task: bool = False) -> None:
    """Refuse horizontal owners that share a record: a pseudonym held twice (by two owners or by one).

    ``stage``: ``"release"`` (the protected fragments' pseudonyms: a second line of defence) or
    ``"plan"`` (the metadata round's id digests, :func:`check_disjoint_ids`: before anyone spends).

    Distributed: the owners' pseudonym columns, tagged by owner, are grouped by pseudonym; groups
    held more than once are counted per pair of owners (at most one row per pair reaches the
    driver; no pseudonym is ever collected or printed). Pseudonyms are keyed hashes of record ids
    under one key (the owners' key checks matched at the plan), so equal pseudonyms mean equal ids.
    ``single_task`` (the plan's record counts are small: :func:`fragrelease.jobs.protocol.shuffle.one_task`):
    the union is read in one partition, so the groupings plan no exchange and the check is one job.

    Raises
    ------
    IdentifierError
        Naming both owners and how many pseudonyms they share (one owner: how many it repeats).
    """
    tagged = [df.select(F.lit(name).alias("__owner"), F.col(PSEUDONYM_COLUMN)) for name, df in psets.items()]
    u = tagged[0]
    for t in tagged[1:]:
        u = u.unionByName(t)
    if single_task:
        u = u.coalesce(1)
    held = (u.groupBy(PSEUDONYM_COLUMN)
            .agg(F.count(F.lit(1)).alias("__n"), F.array_sort(F.collect_set("__owner")).alias("__owners"))
            .where(F.col("__n") > 1))
    pairs = (held.select(F.col("__owners")[0].alias("a"),
                         F.when(F.size("__owners") > 1, F.col("__owners")[1]).alias("b"))
             .groupBy("a", "b").count().orderBy(F.desc("count"), "a", "b").limit(1).collect())
    if pairs:
        raise _shared_records(pairs[0]["a"], pairs[0]["b"], int(pairs[0]["count"]), stage=stage)


def _shared_records(a: str, b: Optional[str], count: int, *, stage: str) -> IdentifierError:
    """The error of :func:`check_disjoint_pseudonyms` for ``count`` pseudonyms held by ``a`` and ``b`` (None: ``a`` twice)."""
    if stage == "plan":
        if b is None:
            return IdentifierError(f"the id digests of owner {a!r} hold {count} id{'s' if count > 1 else ''} more "
                                   "than once; no plan was issued")
        return IdentifierError(f"owners {a!r} and {b!r} share {count} record{'s' if count > 1 else ''} (their keyed "
                               "id digests match); horizontal owners must hold disjoint records; no plan was issued "
                               "and no budget was spent")
    if b is None:
        return IdentifierError(f"the protected fragment of {a!r} holds {count} pseudonym{'s' if count > 1 else ''} "
                               "more than once; "
                               "a horizontal owner holds each record once")
    return IdentifierError(f"owners {a!r} and {b!r} hold {count} records with the same pseudonym; horizontal "
                           "owners must hold disjoint records (a record held twice would be released twice under "
                           "parallel composition)")


def combine(plan: Plan, fragments: dict[str, DataFrame]) -> DataFrame:
    """Combine the verified fragments; columns in plan order, rows in a random order.

    Linked: union (horizontal) or join on the pseudonym (vertical, :func:`join_vertical`), then a
    CSPRNG row shuffle; out ``(pseudonym, *attributes)``. Unlinked (the fragments hold attributes
    only, each column already in its own random order): union then :func:`unlink_columns`
    (horizontal), or every owner's columns each in a fresh random order, lined up by position
    (vertical, :func:`fragrelease.jobs.idpir.unlink.unlink_frames`); out ``(*attributes)``.

    Vertical fragments must hold the same pseudonym set (:func:`release` compares their digests first).
    """
    names = [a["name"] for a in plan.attributes]
    frames = [fragments[o.name] for o in plan.owners]
    frag = fragmentation_of(plan.fragmentation)
    if ir_linkage(plan.linkage).shuffles_columns:
        # the row counts are the manifests' (checked against each fragment's digest): public
        rows = frag.released_rows([o.n_records for o in plan.owners])
        if frag.assembly == "union":
            return unlink_columns(assemble(frames, frag.name, names), names, rows).select(*names)
        return unlink_frames([(f, list(f.columns)) for f in frames], rows).select(*names)
    # the plan's record counts (public): a small release is sorted in one task, without an exchange
    rows = frag.released_rows([o.n_records for o in plan.owners])
    return shuffle_rows(assemble(frames, plan.fragmentation, names, key=PSEUDONYM_COLUMN), PSEUDONYM_COLUMN,
                        single_task=one_task(rows, len(names) + 1))


def assemble(frames: Sequence[DataFrame], fragmentation: str, names: Sequence[str], *,
             key: Optional[str] = None) -> DataFrame:
    """The owners' fragments as one table, in their order: what a release and its evaluation combine.

    Horizontal: the union of every frame's ``(key, *names)`` (``(*names)`` without a key); vertical:
    :func:`join_vertical` on ``key`` of every frame's key and its own columns among ``names`` (a
    column two frames hold is taken from the first). Out: ``(key, *names)`` or ``(*names)``. Used by
    :func:`combine` (on pseudonyms) and by the single-machine driver's MeanSSE (on raw ids,
    :func:`fragrelease.jobs.protocol.release._mean_sse`). Raises ConfigError for a vertical assembly without a key.
    """
    if fragmentation_of(fragmentation).assembly == "union":
        cols = [key, *names] if key is not None else list(names)
        out = frames[0].select(*cols)
        for f in frames[1:]:
            out = out.unionByName(f.select(*cols))
        return out
    if key is None:
        raise ConfigError("vertical fragments are lined up by a key column; none was given")
    taken: set[str] = set()
    parts = []
    for f in frames:
        own = [c for c in f.columns if c in names and c not in taken]
        taken.update(own)
        parts.append(f.select(key, *own))
    return join_vertical(parts, key).select(key, *names)


def join_vertical(frames: list[DataFrame], id_column: str) -> DataFrame:
    """Line up vertical fragments by their key column (the pseudonym): one row per key with every fragment's columns.

    Shapes: each frame is ``(id_column, its attributes)``; out: ``(id_column, attributes of frame 0,
    of frame 1, ...)``. The frames must hold the same key set: :func:`release` compares their
    pseudonym-set digests (computed in the same pass as the content digests) before it joins, so the
    chain of inner joins neither loses nor invents records. Inner joins keep the hash partitioning on
    the key, so each fragment is shuffled once (``benchmarks/bench_combine.py``).
    """
    out = frames[0]
    for f in frames[1:]:
        out = out.join(f, id_column, "inner")
    return out


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
    """Validate every owner's protected fragment, combine them and commit the release.

    ``ctx``: the aggregator's context (:func:`fragrelease.jobs.protocol.context.aggregator_context`).
    ``keys``: the owners' public keys (default: the configuration's ``owners[].public_key``);
    :func:`fragrelease.jobs.api.Release.run` passes the keys it generated for the release.
    ``plan``: the plan this aggregator issued, held in memory (the single-command run passes it);
    without it ``plan.json`` is read from ``work_dir`` and refused unless it is the plan the
    aggregator pinned when it issued it (:func:`check_pinned_plan`): an owner who writes
    ``work_dir`` cannot swap in another plan, an earlier one included. ``single_process``: every
    party played in this process (recorded in the guarantee, :func:`provenance`).

    ``linkage: synthetic``: the owners' signed measurements instead of fragments, the model fitted
    and its rows drawn (the kind's :meth:`fragrelease.jobs.protocol.kind.KindJobs.combine`; docs/specification.md §10).

    Returns
    -------
    :class:`CommittedRelease`.

    Raises
    ------
    ManifestMismatchError
        A fragment that does not match its manifest or the plan (:func:`load_verified_fragment`);
        a ``plan.json`` that is not JSON, not a plan, or not the pinned plan (:func:`check_pinned_plan`).
    IdentifierError
        Vertical fragments whose pseudonym sets differ (the join would lose or invent records), or
        horizontal owners holding the same pseudonym (:func:`check_disjoint_pseudonyms`).
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


def verified_combination(spark, ctx: AggregatorContext, plan: Plan,
                         keys: Optional[Mapping[str, Ed25519PublicKey]]) -> Combined:
    """Every owner's protected fragment verified against its signed manifest and the plan, combined
    (:func:`combine`; linked without ``keep_id``: the pseudonym dropped). Errors: :func:`release`.

    The count is the plan's public record counts (:meth:`Fragmentation.released_rows`); a linked union of
    few values (the plan's public counts; :func:`combine` shuffles it in one task) needs no exchange to
    commit, so a new version is committed in fewer Spark jobs (jobs/storage/delta.py)."""
    fragments, psets, digests, manifests = {}, {}, {}, {}
    horizontal = not fragmentation_of(plan.fragmentation).by_attributes
    shared, overlap_found = None, False  # overlap_found: the records owners share were counted with the digests
    if ir_linkage(plan.linkage).shuffles_columns:  # two tables per owner: each owner's digests on their own
        for o in plan.owners:
            manifests[o.name], fragments[o.name], psets[o.name], digests[o.name] = load_verified_fragment(
                spark, ctx, plan, o.name, keys)
    else:  # every owner's digests and the records they share in one pass (_linked_fragments)
        manifests, fragments, digests, shared, overlap_found = _linked_fragments(spark, ctx, plan, keys,
                                                                                 overlaps=horizontal)
        psets = {name: f.select(PSEUDONYM_COLUMN) for name, f in fragments.items()}
    first = plan.owners[0].name
    for o in plan.owners[1:]:  # pseudonyms under different keys would neither join nor show shared records
        if manifests[o.name].pseudonym_key_check != manifests[first].pseudonym_key_check:
            raise ManifestMismatchError(f"owners {first!r} and {o.name!r} wrote their fragments under different "
                                        "pseudonym keys (their key checks differ)")
    if fragmentation_of(plan.fragmentation).by_attributes:  # the same records: the same pseudonym set
        for o in plan.owners[1:]:
            if digests[o.name] != digests[first]:
                raise IdentifierError(f"the protected fragments of {first!r} and {o.name!r} hold different sets of "
                                      "pseudonyms (their pseudonym-set digests differ)")
    elif not overlap_found:  # a small release (the plan's public record counts) in one task
        check_disjoint_pseudonyms(psets, single_task=one_task(sum(o.n_records for o in plan.owners), 1))
    elif shared is not None:  # counted in the digests' pass, told after the digest and key checks, as before
        raise _shared_records(*shared, stage="release")
    released = combine(plan, fragments)
    if ir_linkage(plan.linkage).rows_are_records and not plan.keep_id:
        released = released.drop(PSEUDONYM_COLUMN)
    rows = fragmentation_of(plan.fragmentation).released_rows([o.n_records for o in plan.owners])
    small = (ir_linkage(plan.linkage).rows_are_records and fragmentation_of(plan.fragmentation).assembly == "union"
             and one_task(rows, len(plan.attributes) + 1))
    return Combined(rows=released, count=rows, small=small)


def _linked_fragments(spark, ctx: AggregatorContext, plan: Plan, keys: Optional[Mapping[str, Ed25519PublicKey]], *,
                      overlaps: bool):
    """Every owner's linked fragment verified as :func:`load_verified_fragment` verifies it, with every
    owner's content and pseudonym-set digests (and, ``overlaps``, the records horizontal owners share)
    computed in one pass (:func:`fragrelease.jobs.protocol.digests.set_checks`; one Spark job for a small
    release, gated by the plan's public record counts) instead of one per owner and one more for the
    overlap.

    The checks that need no Spark job run first for each owner in plan order, up to the first that
    fails; then the digests of the owners read so far; then, in plan order, the first digest mismatch is
    raised, else that earlier failure: the same error as checking each owner in turn. If the one pass
    fails (a data file Spark cannot read), every owner is checked again on its own
    (:func:`load_verified_fragment`), which names the owner whose file it is.

    Returns ``(manifests, fragments, pseudonym-set digests, shared, counted)``, the first three keyed
    by owner (the fragments as :func:`load_verified_fragment` returns them); ``shared``: ``(a, b,
    count)`` for :func:`check_disjoint_pseudonyms`' error, or None; ``counted``: whether the pass
    counted shared records (False after the fallback: the caller checks them itself). Raises ManifestMismatchError as :func:`load_verified_fragment`.
    """
    checked: dict[str, _Checked] = {}
    problem: Optional[ManifestMismatchError] = None
    for o in plan.owners:
        try:
            checked[o.name] = _fragment_before_digests(spark, ctx, plan, o.name, keys, read=True)
        except ManifestMismatchError as exc:
            problem = exc
            break
    if not checked:
        raise problem if problem is not None else ManifestMismatchError("the plan names no owner")
    frames = {name: c.rows for name, c in checked.items() if c.rows is not None}
    try:
        checks = set_checks(frames, PSEUDONYM_COLUMN, contents=True, overlaps=overlaps and problem is None,
                            single_task=one_task(sum(o.n_records for o in plan.owners), 1))
    except Exception:  # noqa: BLE001 - a file Spark cannot read: each owner on its own names whose it is
        out = [load_verified_fragment(spark, ctx, plan, o.name, keys) for o in plan.owners]
        return ({o.name: r[0] for o, r in zip(plan.owners, out)}, {o.name: r[1] for o, r in zip(plan.owners, out)},
                {o.name: r[3] for o, r in zip(plan.owners, out)}, None, False)
    assert checks.contents is not None  # asked for
    for name, digest, pdigest in zip(frames, checks.contents, checks.pseudonyms):
        _check_digests(name, checked[name].manifest, digest, pdigest)
    if problem is not None:
        raise problem
    return ({name: c.manifest for name, c in checked.items()},
            {name: frames[name].select(*c.expected) for name, c in checked.items()},
            dict(zip(frames, checks.pseudonyms)), checks.shared, overlaps)


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
        sections = kind_jobs(plan.linkage).report_sections(prov, attrs)
        report = public_report(committed_release(spark, path, version), attrs, prov, public_report_path(path, version),
                               described=table_self_description(path, version), table=cfg.output_table or path,
                               version=version, extra_sections=sections, records=rows)
    return CommittedRelease(path=path, table=cfg.output_table, version=version, rows=rows, provenance=prov,
                            report=report)
