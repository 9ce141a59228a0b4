"""The IR kind's owner round: protect the fragment once under the aggregator's plan.

Sources: docs/specification.md §3; Del Vasto-Terrientes et al. (ICISSP 2025) §4.2.

``protect`` (the one round of ``linkage: linked`` and ``unlinked``; :class:`fragrelease.jobs.idpir.kind.IRJobs`):
read the aggregator's plan, check that it carries the nonce of this owner's latest metadata round
(:mod:`fragrelease.jobs.protocol.owner`), protect the attributes it assigns with (k, ε_j) and the
plan's category order, replace the record id by its keyed pseudonym (HMAC-SHA-256 under the key
the owners share, context = the plan id with every owner's nonce, :meth:`Plan.pseudonym_context`;
:mod:`fragrelease.pseudonyms`), shuffle the rows with
CSPRNG keys (``linkage: unlinked``: every column on its own, the pseudonym set written apart as
``owners/<owner>/pseudonyms``), write the protected fragment as a Delta table and a manifest of
public parameters beside it, and a private utility report (original vs protected, for the owner
only) in the owner's private folder, which is never under the shared ``work_dir``. The raw fragment never
leaves the owner; nothing data-dependent (local sensitivities, observed min/max,
frequencies) is written to the manifest, the table's commit or the logs.

Run as ``fragrelease owner protect --config CONF --owner NAME`` (the command line asks the release's
kind, :func:`fragrelease.jobs.protocol.kind.kind_jobs`). This module imports nothing from the command line.
"""
from __future__ import annotations

import logging
import posixpath
from typing import Mapping, Optional

from fragrelease.errors import ConfigError
from fragrelease.idpir.linkage import ir_linkage
from fragrelease.idpir.spec import ProtectionSpec
from fragrelease.protocol.config import LedgerConfig
from fragrelease.protocol.messages import Manifest, manifest_for
from fragrelease.pseudonyms import PSEUDONYM_COLUMN, key_check
from fragrelease.rng.laplace import NoiseSource
from fragrelease.schemas.base import Attribute
from fragrelease.version import __version__

from ..protocol.context import OwnerContext
from ..protocol.digests import committed_rows, content_digest, fragment_digests
from ..protocol.draws import Spend, check_spend_once, draw_step, ledger_location, spend_once
from ..protocol.fragment import conform_attributes, conform_id, validate_source_fragment
from ..protocol.keys import owner_pseudonym_key
from ..protocol.ledger import record_spend
from ..protocol.owner import check_plan_nonce, check_pseudonym_column, read_fragment, read_verified_plan
from ..protocol.publish import KeptProtection, keep_tables, new_tables_folder, publish_kept, read_kept, remove_tree
from ..protocol.shuffle import one_task, pseudonym_set_digest, pseudonymize, shuffle_rows
from ..protocol.signatures import describe_table, owner_signing_key, sign_manifest
from ..protocol.workspace import claim_work_dir
from ..storage import commit_delta, register
from .bucket_sort import STORED
from .protect import ReleasedValues, released_fragment

log = logging.getLogger(__name__)

#: The draw step of an IR protection in the owner's private records (:mod:`fragrelease.jobs.protocol.draws`).
PROTECT_STEP = "protect"


def protect_owner_fragment(spark, ctx: OwnerContext, *, noise: Optional[NoiseSource] = None) -> Manifest:
    """Protect the owner's fragment under the aggregator's plan; write the Delta table and manifest.

    ``ctx``: the owner's context (:func:`fragrelease.jobs.protocol.context.owner_context`).

    Draw once (docs/privacy.md, "Draw once"; :mod:`fragrelease.jobs.protocol.draws`): the owner claims
    the plan in its private folder before its ledger spends, keeps its tables and signed manifest
    there before anything is shared (:mod:`fragrelease.jobs.protocol.publish`), and every later run for
    the same plan publishes that same draw again (no new noise, no spend), whatever ``work_dir``
    holds.

    What is written under ``owners/<owner>/`` (what the aggregator reads): ``protected``, the
    attributes with the record id replaced by its pseudonym (column ``pseudonym``, first) in a
    CSPRNG-shuffled row order; with ``linkage: unlinked`` the attributes only, every column in its
    own random order, and ``pseudonyms``, the set of pseudonyms (one column ``pseudonym``) in a
    random order; ``manifest.json`` with the content digest of ``protected`` and the digest of the
    pseudonym set. See :func:`protect_and_write`.

    Raises
    ------
    ManifestMismatchError
        The owner is not in the plan, or the plan differs from the owner's configuration in any term
        (ε, ε_j, k, mechanism, attributes, category order and share, post-processing, linkage, ...;
        :func:`fragrelease.protocol.plan_check.check_plan_for_owner`), before any budget is spent.
    SchemaMismatchError, DomainError, IdentifierError
        The fragment changed since the metadata step and no longer validates.
    SigningKeyError
        The owner has no ``signing_key``, or it is unsafe or does not match its ``public_key``
        (:func:`fragrelease.jobs.protocol.signatures.owner_signing_key`); raised before any spend.
    ReleaseExistsError
        ``owners/<owner>/`` holds something this owner's protocol did not write
        (:func:`fragrelease.jobs.protocol.publish.clear_own_entry`; left in place).
    StorageError
        The copy to ``work_dir`` or the manifest could not be written; the draw stays kept privately
        and the next run publishes it.
    BudgetExceededError
        The owner's ledger (if configured) has no room for ε_j on this dataset.
    PlanAlreadySpentError
        The owner's ledger records a spend on this plan but the owner holds no claim of it (a replayed
        or copied plan; :func:`fragrelease.jobs.protocol.draws.spend_once`). A rerun of the owner's own
        plan is not refused: it re-publishes what it kept, or draws without spending again when an
        earlier attempt stopped before keeping its output.
    LedgerDamagedError
        The owner's ledger is damaged (:func:`fragrelease.jobs.protocol.ledger.record_spend`); nothing spent.
    PseudonymKeyError
        No pseudonym key (:func:`fragrelease.jobs.protocol.keys.owner_pseudonym_key`), refused before Spark reads data.
    MissingDependencyError
        ``risk_check`` is configured and anonymeter is not installed; refused before any spend.
    Notes
    -----
    ``risk_check`` is advisory: after the fragment and its manifest are written, the owner measures
    the risk of its released rows (:func:`fragrelease.jobs.idpir.risk_check.measure_owner_risk`) and
    writes it, with the thresholds it exceeds, to its private report only; nothing handed over
    depends on it. A keyed share of the records is held out as its control set and not released
    (docs/privacy.md, "Measured disclosure risk and the owner's risk check").
    """
    return protect_and_write(spark, ctx, noise=noise)[0]


def _checks_before_data(ctx: OwnerContext):
    """The protect step's checks before it reads data: ``(signing_key, plan, spec, pseudonym_key)``.

    Claims ``work_dir``; the signing key, the risk check's tool, the plan's terms against this owner's
    configuration and its nonce, the attribute names and the pseudonym key; errors as
    :func:`protect_owner_fragment`.
    """
    from .risk_check import check_risk_tools

    claim_work_dir(ctx.config)
    signing_key = owner_signing_key(ctx)  # signed manifests: refuse a missing or unsafe key before any spend
    check_risk_tools(ctx.config.risk_check)  # a configured risk check without its tool: refused before any spend
    # the plan comes from the shared folder: refuse any term that differs from this owner's own
    # configuration before the ledger, the data or any noise is touched
    plan, spec = read_verified_plan(ctx)
    assert spec is not None  # an IR configuration requires k, and the plan's k was checked equal to it
    check_plan_nonce(ctx, plan)  # the pseudonym context is fresh: this owner's latest nonce is in it
    check_pseudonym_column(ctx.name, [ctx.schema.attribute(a) for a in spec.attributes])
    return signing_key, plan, spec, owner_pseudonym_key(ctx)


def check_before_spend(spark, ctx: OwnerContext) -> None:
    """Run the owner's (``ctx``) protect-step checks that need no noise, up to its ledger's check of the
    spend, and record nothing: what :func:`protect_and_write` would refuse before its spend.

    In order: the checks before data (``work_dir``, signing key, risk-check tool, the plan's terms
    and nonce, attribute names, pseudonym key), then the draw records' and the ledger's
    (:func:`fragrelease.jobs.protocol.draws.check_spend_once`: nothing when the owner kept its protection
    of this plan, which is re-published without a spend; a plan its nonce was consumed by, or a spend
    the ledger records without this owner's claim, refused; else the ledger's check of ``ε_j``, which
    creates an empty ledger when there is none). It does not read the fragment: the local driver runs
    it after the metadata step validated every owner's fragment, for every owner in configuration
    order before any owner's protection starts (:func:`fragrelease.jobs.protocol.release.play_release`).
    :func:`protect_and_write` runs every one of these checks again (the ledger's in the spend's own
    transaction).

    Raises
    ------
    ConfigError, ManifestMismatchError, ProtocolError, SigningKeyError, PseudonymKeyError,
    MissingDependencyError, BudgetExceededError, PlanAlreadySpentError, LedgerDamagedError,
    LedgerStorageError
        As :func:`protect_owner_fragment`, with the same messages; nothing was spent.
    """
    _, plan, spec, _ = _checks_before_data(ctx)
    check_spend_once(spark, ctx, plan, draw_step(ctx, plan.plan_id, PROTECT_STEP), _spend_of(spec))


def _spend_of(spec: ProtectionSpec) -> Spend:
    return Spend(spec.dataset, spec.plan_id, spec.epsilon, spec.epsilon)


def protect_and_write(spark, ctx: OwnerContext, *, noise: Optional[NoiseSource] = None):
    """:func:`protect_owner_fragment`, also returning the owner's own protected DataFrame.

    Returns ``(manifest, protected)``: ``protected`` has the raw ``id_column`` and the attributes
    (noise materialized), for the owner's (or the single-machine driver's) utility evaluation only;
    it is never written to the shared ``work_dir``. ``protected`` is None when the owner re-published
    the protection it kept for this plan (nothing drawn, no data read).
    """
    cfg, schema, owner, paths = ctx.config, ctx.schema, ctx.owner, ctx.paths
    assert schema.id_column is not None  # a release's schema names its id column (configuration check)
    from .risk_check import advise, measure_owner_risk, split_control
    signing_key, plan, spec, key = _checks_before_data(ctx)
    step = draw_step(ctx, plan.plan_id, PROTECT_STEP)
    kept = read_kept(step)
    if kept is not None:  # drawn once already: the same tables and manifest again, no spend, no data read
        manifest = publish_kept(spark, ctx, step, kept, signing_key)
        log.info("owner %s: protected fragment of plan %s re-published from its private copy (no new draw, no spend)",
                 owner.name, plan.plan_id)
        return manifest, None
    pseudonym_context = plan.pseudonym_context()
    attrs = [schema.attribute(a) for a in spec.attributes]
    df, context, text = read_fragment(spark, ctx)
    # the dp-frequency order's exact category counts come from the same validation pass
    # (not run again when this driver's metadata step validated the same source bytes)
    check = validate_source_fragment(df, ctx.paths.fragment, attrs, schema.id_column, context,
                                     id_type=ctx.id_type, count_categories=spec.category_order == "dp-frequency",
                                     text=text)
    df = conform_attributes(conform_id(df, schema.id_column, ctx.id_type), attrs)
    n_records, control = check.n_records, None
    if cfg.risk_check is not None:  # the same keyed hold-out as the metadata step: the control set, not released
        df, control = split_control(df, schema.id_column, key, cfg.name, cfg.risk_check.control_share)
        n_records = df.count()
    if n_records != spec.n_records:
        raise ConfigError(f"owner {owner.name!r} now has {n_records} records, the plan was made for {spec.n_records}")
    # draw once: claimed and spent (an earlier attempt's spend reused) before any noise is drawn
    spend_once(spark, ctx, plan, step, _spend_of(spec))
    # public: everything in the spec comes from the plan, checked once against this owner's configuration
    released = released_fragment(df.select(schema.id_column, *[a.name for a in attrs]), attrs, spec,
                                 id_column=schema.id_column, noise=noise, category_counts=check.category_counts)
    # lined up by id only when something reads it (linked: the shuffle's range sample and the write;
    # the owner report; the caller's MeanSSE), then stored by the first job that computes it (the
    # noise itself is stored already, so recomputing was exact but repeated the line-up for every reader)
    protected = released.lined_up().localCheckpoint(eager=False, storageLevel=STORED)
    provenance = {
        "role": "protected-fragment", "plan_id": plan.plan_id, "owner": owner.name, "mechanism": plan.mechanism,
        "k": plan.k, "epsilon": str(spec.epsilon), "epsilon_per_attribute": str(spec.epsilon_per_attribute),
        "budgets": [b.to_dict() for b in spec.budgets], **spec.options.wire(),  # every release option
        "fragrelease_version": __version__,
    }
    # kept privately first (the owner's draw folder), then copied to work_dir; a failure before the
    # record is kept removes this attempt's private tables and nothing was shared
    folder = new_tables_folder(step)
    target, pset_target = posixpath.join(folder, "protected"), posixpath.join(folder, "pseudonyms")
    try:
        pset_table = None
        if ir_linkage(plan.linkage).shuffles_columns:
            # the pseudonyms of the validated fragment's ids; the columns unlinked from the released
            # values directly (the ids never travel with them, no line-up by id)
            ids = pseudonymize(df.select(schema.id_column), schema.id_column, key, pseudonym_context)
            pset = shuffle_rows(ids, PSEUDONYM_COLUMN, single_task=one_task(n_records, 1))
            commit_delta(pset, pset_target, provenance={**provenance, "role": "pseudonym-set"}, if_exists="error",
                         owner_table=True)
            commit_delta(released.unlinked(), target, provenance=provenance, if_exists="error", owner_table=True)
            digest = content_digest(committed_rows(spark, target))
            pset_digest = pseudonym_set_digest(committed_rows(spark, pset_target))
            pset_table = describe_table(spark, pset_target)
        else:
            # what the aggregator reads: pseudonyms (keyed, context = plan id and nonces) and a CSPRNG row order
            shared = pseudonymize(protected, schema.id_column, key, pseudonym_context)
            # a small fragment (its spec's record count × columns) sorted in one task: no exchange
            commit_delta(shuffle_rows(shared, PSEUDONYM_COLUMN, single_task=one_task(n_records, len(attrs) + 1)),
                         target, provenance=provenance, if_exists="error", owner_table=True)
            digest, pset_digest = fragment_digests(committed_rows(spark, target), PSEUDONYM_COLUMN)
        # signed manifests: bind the manifest to this owner's key, the tables' versions, files and logs
        version, files, delta_log = describe_table(spark, target)
        manifest = sign_manifest(manifest_for(
            plan, owner.name, n_records, digest, pset_digest, key_check(key), table_version=version,
            files=tuple(files), delta_log=tuple(delta_log), pseudonym_table=pset_table), signing_key)
        record = keep_tables(step, folder, manifest)
    except BaseException:
        remove_tree(folder)  # this attempt's own private tables, never kept: nothing was shared
        raise
    manifest = _publish(spark, ctx, step, record, signing_key)
    risk = None
    if cfg.risk_check is not None:
        # advisory, owner-side only: measured after the hand-over, so nothing handed over depends on it;
        # the numbers and their flags go to this owner's private report, never shared
        assert control is not None
        linked = ir_linkage(plan.linkage).rows_are_records
        risk = advise(measure_owner_risk(df, protected if linked else released.unlinked(), control, attrs,
                                         schema.id_column, cfg.risk_check, n_kept=n_records,
                                         n_control=check.n_records - n_records, linked=linked), cfg.risk_check)
    if cfg.reports:
        # imported here: only a run that writes reports loads the report module (Jinja2, and Matplotlib's
        # colormaps and tick locator once it makes its charts, which draws nothing: no backend is selected)
        from ..protocol.report import owner_report

        owner_report(df, protected, attrs, schema.id_column, manifest.model_dump(mode="json"),
                     paths.report, risk=risk)
    log.info("owner %s: protected fragment and manifest written for plan %s", owner.name, plan.plan_id)
    return manifest, protected


def _publish(spark, ctx: OwnerContext, step, record: KeptProtection, signing_key) -> Manifest:
    """:func:`fragrelease.jobs.protocol.publish.publish_kept`, a storage failure told in one line."""
    from fragrelease.errors import FragReleaseError, StorageError

    from ..storage import is_write_failure, path_cause

    try:
        return publish_kept(spark, ctx, step, record, signing_key)
    except Exception as exc:
        if isinstance(exc, FragReleaseError) or not is_write_failure(exc):
            raise
        raise StorageError(f"owner {ctx.name!r} could not publish its protected fragment: "
                           f"{path_cause(ctx.paths.manifest, exc)}; its draw is kept privately: run the owner step "
                           "again to publish it") from None


def protect_attributes(
    spark, df, attrs: list[Attribute], spec: ProtectionSpec, *, id_column: str,
    ledger: Optional[LedgerConfig] = None, noise: Optional[NoiseSource] = None,
    category_counts: Optional[Mapping[str, Mapping[str, int]]] = None,
):
    """:func:`spend_and_release` lined up by id: the protected DataFrame ``(id_column, *attrs)``.

    Parameters and errors: :func:`spend_and_release`.
    """
    return spend_and_release(spark, df, attrs, spec, id_column=id_column, ledger=ledger, noise=noise,
                             category_counts=category_counts).lined_up()


def spend_and_release(
    spark, df, attrs: list[Attribute], spec: ProtectionSpec, *, id_column: str,
    ledger: Optional[LedgerConfig] = None, noise: Optional[NoiseSource] = None,
    category_counts: Optional[Mapping[str, Mapping[str, int]]] = None,
) -> ReleasedValues:
    """One owner's spend and protection of a validated fragment under ``spec``: the step both the
    owner job (:func:`protect_owner_fragment`) and the Python API (:func:`fragrelease.jobs.api.protect`) run.

    Records ``spec.epsilon`` (ε_j, exact) in the owner's ``ledger`` **before** any noise is drawn,
    then runs :func:`fragrelease.jobs.idpir.protect.released_fragment` (noise materialized, never
    redrawn). The budget split is the spec's (:class:`fragrelease.idpir.spec.ProtectionSpec`,
    computed once by :func:`fragrelease.idpir.spec.protection_spec` and, for a plan, verified once by
    :func:`fragrelease.protocol.plan_check.verified_spec`). docs/specification.md §1-3;
    Del Vasto-Terrientes et al. (ICISSP 2025) §4.2.

    Shapes: ``df`` holds ``id_column`` and every attribute in ``attrs`` (``spec.n_records`` rows,
    already validated); returns the released values
    (:class:`fragrelease.jobs.idpir.protect.ReleasedValues`: lined up by id, or unlinked). ``category_counts``:
    the exact category counts from the validation pass, if it made them
    (:attr:`fragrelease.jobs.protocol.fragment.FragmentCheck.category_counts`), spent on nothing but
    the ``dp-frequency`` order's noised histogram.

    Raises
    ------
    BudgetExceededError
        The ledger has no room for ``spec.epsilon`` on ``spec.dataset``.
    PlanAlreadySpentError, LedgerDamagedError, LedgerStorageError
        The owner already spent on ``spec.plan_id``, or its ledger is damaged or unreadable
        (:func:`fragrelease.jobs.protocol.ledger.record_spend`); nothing was spent, no noise drawn.
    InvalidParameterError
        From :func:`protect_fragment` (attributes other than the spec's, k larger than the fragment, ...).
    """
    if ledger is not None:
        # Record the spend before any noise is drawn: a crash afterwards over-counts, never under-counts.
        where = ledger_location(spark, ledger)
        record_spend(where, owner=spec.owner, dataset=spec.dataset, plan_id=spec.plan_id, epsilon=spec.epsilon,
                     lifetime=ledger.lifetime)
        if ledger.table is not None:
            register(spark, ledger.table, where, append_only=True)
    return released_fragment(df.select(id_column, *[a.name for a in attrs]), attrs, spec, id_column=id_column,
                             noise=noise, category_counts=category_counts)
