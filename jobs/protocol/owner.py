"""The data owner's steps every release kind shares: describe the fragment, read and check the plan.

Sources: docs/specification.md §3; Del Vasto-Terrientes et al. (ICISSP 2025) §4.2.

``metadata``: validate the fragment against the declared schema and send the aggregator public
metadata only (attribute names, kinds, declared domains, record count, the public check of the
owners' pseudonym key, a fresh CSPRNG nonce; for vertical fragments the id column and a digest of
the set of record pseudonyms, never of raw ids; for horizontal fragments the keyed digests of its
ids, context ``metadata``, as a Delta table in ``work_dir`` and the digest of that set, so the
aggregator refuses owners sharing a record before anyone spends).

``protect``: the owner's rounds are the release kind's (:class:`fragrelease.jobs.protocol.kind.KindJobs`,
found by :func:`fragrelease.jobs.protocol.kind.kind_jobs`); each reads the plan here
(:func:`read_verified_plan`), checks its nonce (:func:`check_plan_nonce`) and reads the fragment
(:func:`read_fragment`) before its spend.

Run as ``fragrelease owner metadata|protect --config CONF --owner NAME``; under spark-submit or
Databricks through the entry points of :mod:`fragrelease.jobs.cli` (``fragrelease-owner-metadata``,
``fragrelease-owner-protect``). This module imports nothing from the command line, and no kind.
"""
from __future__ import annotations

import logging

from fragrelease.errors import ConfigError, ManifestMismatchError
from fragrelease.protocol.fragmentation import fragmentation_of
from fragrelease.protocol.messages import OwnerMetadata, Plan
from fragrelease.protocol.plan_check import verified_spec
from fragrelease.pseudonyms import METADATA_CONTEXT, PSEUDONYM_COLUMN, key_check, new_nonce
from fragrelease.version import __version__

from ..storage import commit_delta, read_configured, read_text, write_text
from .context import OwnerContext
from .digests import committed_rows
from .fragment import FragmentContext, conform_id, describe_source, validate_source_fragment
from .keys import owner_pseudonym_key
from .kind import kind_jobs
from .layout import read_message
from .shuffle import one_task, pseudonym_set_digest, pseudonymize, shuffle_rows
from .workspace import claim_work_dir, write_private_text

log = logging.getLogger(__name__)


def read_fragment(spark, ctx: OwnerContext):
    """The owner's fragment, the context its validation errors name (the owner and its source), and
    whether it was read as text (a CSV source: no inference pass; the validation parses every value
    against the declared schema and :func:`conform_attributes` casts the numbers afterwards)."""
    from ..storage import check_source_encoding

    source = ctx.paths.fragment
    text = source.table is None and source.format == "csv"
    context = FragmentContext(ctx.name, describe_source(source))
    check_source_encoding(source, context.where())  # a UTF-16 CSV: said so, before Spark reads it
    return read_configured(spark, source, text=text), context, text


def describe_fragment(spark, ctx: OwnerContext) -> OwnerMetadata:
    """Validate the owner's fragment and write its public metadata for the aggregator.

    ``ctx``: the owner's context (:func:`fragrelease.jobs.protocol.context.owner_context`).

    Claims ``work_dir`` for the release first (:func:`fragrelease.jobs.protocol.workspace.claim_work_dir`:
    refused when it holds user files or belongs to another release). Draws a fresh nonce
    (:func:`fragrelease.pseudonyms.new_nonce`), kept in the owner's private folder
    (:func:`fragrelease.jobs.protocol.layout.nonce_path`) and sent in the metadata. A horizontal owner
    also writes its ids' keyed digests (HMAC under the pseudonym key, context ``metadata``, in a
    CSPRNG row order) as a new Delta table ``metadata/ids/<owner>/<nonce>``; ``id_digest`` is the
    digest of that set. Written: the table, the nonce, then ``metadata/<owner>.json``. The
    records the release kind holds out (:meth:`fragrelease.jobs.protocol.kind.KindJobs.held_out`; IR
    with ``risk_check``: the owner's keyed control share) are left out first: the metadata counts and
    digests the records to be released only.

    Raises
    ------
    SchemaMismatchError, DomainError, IdentifierError
        The fragment does not validate (:func:`fragrelease.jobs.protocol.fragment.validate_fragment`;
        ids are compared as values of the declared id type).
    ConfigError, PseudonymKeyError
        No id column in the schema, no pseudonym key (before Spark reads data); an unknown owner is
        refused when its context is built (:func:`fragrelease.jobs.protocol.context.owner_context`).
    """
    cfg, schema = ctx.config, ctx.schema
    claim_work_dir(cfg)
    if schema.id_column is None:
        raise ConfigError(
            f"dataset schema {schema.name!r} declares no id column (role: id); fragments need a unique record id "
            "to order ties and, for vertical releases, to join"
        )
    owner, attrs = ctx.owner, list(ctx.offered)
    check_pseudonym_column(owner.name, attrs)
    key = owner_pseudonym_key(ctx)  # before Spark reads anything: a missing key needs no data
    df, context, text = read_fragment(spark, ctx)
    # run once per driver for the same source bytes: the protect step reuses it (and the dp-frequency counts)
    check = validate_source_fragment(df, ctx.paths.fragment, attrs, schema.id_column, context,
                                     id_type=ctx.id_type, count_categories=ctx.config.category_order == "dp-frequency",
                                     text=text)
    df = conform_id(df, schema.id_column, ctx.id_type)
    n_records = check.n_records
    split = kind_jobs(cfg.linkage).held_out(ctx, df, key)
    if split is not None:  # records the kind holds out of the release (IR's risk check: its control set)
        df = split[0]
        n_records = df.count()
    nonce = new_nonce()
    ids = pseudonymize(df.select(schema.id_column), schema.id_column, key, METADATA_CONTEXT)
    if fragmentation_of(cfg.fragmentation).by_attributes:  # the same records: the set of pseudonyms, never raw ids
        digest = pseudonym_set_digest(ids)
    else:  # the keyed digests themselves, a new table for this round: the aggregator compares the owners' sets
        target = ctx.paths.id_digests(nonce)
        # a small fragment's digests in one task (its own record count: never written anywhere)
        commit_delta(shuffle_rows(ids, PSEUDONYM_COLUMN, single_task=one_task(n_records, 1)), target, if_exists="error",
                     provenance={"role": "id-digests", "owner": owner.name, "fragrelease_version": __version__},
                     owner_table=True)
        digest = pseudonym_set_digest(committed_rows(spark, target))
    meta = OwnerMetadata(
        owner=owner.name, dataset=schema.name, fragmentation=cfg.fragmentation,
        attributes=tuple(a.public_spec() for a in attrs), n_records=n_records,
        id_column=schema.id_column, id_digest=digest, pseudonym_key_check=key_check(key), nonce=nonce,
    )
    write_private_text(ctx.paths.nonce, nonce + "\n")  # what this owner checks in the plan
    write_text(ctx.paths.metadata, meta.to_json())
    log.info("owner %s: metadata written (%d attributes)", owner.name, len(attrs))
    return meta


def check_plan_nonce(ctx: OwnerContext, plan: Plan) -> None:
    """Refuse a plan that does not carry the nonce of the owner's (``ctx``) latest metadata round.

    The nonce is read from the owner's private folder (:func:`fragrelease.jobs.protocol.layout.nonce_path`),
    not from ``work_dir``: a plan made from older metadata, or one whose plan id and nonces were
    copied from an earlier release (whose pseudonyms would then link with this one's), is refused
    before the ledger, the data or any noise is touched.

    Raises
    ------
    ManifestMismatchError
        ``owner 'a': plan <id> ... nonce ...``: the owner has no recorded nonce (its metadata step
        did not run here), or the plan's differs.
    """
    owner, path = ctx.owner, ctx.paths.nonce
    try:
        mine = read_text(path).strip()
    except ConfigError:
        raise ManifestMismatchError(f"owner {owner.name!r}: no metadata nonce at {path!r} (the owner metadata step "
                                    f"writes it); run the owner metadata step, then the aggregator plan step") from None
    if plan.owner(owner.name).nonce != mine:
        raise ManifestMismatchError(f"owner {owner.name!r}: plan {plan.plan_id} does not carry the nonce of this owner's "
                                    f"latest metadata round (kept at {path!r}); the aggregator must issue the plan "
                                    "from the current metadata")


def check_pseudonym_column(owner: str, attrs) -> None:
    if any(a.name == PSEUDONYM_COLUMN for a in attrs):
        raise ConfigError(f"owner {owner!r} releases an attribute named {PSEUDONYM_COLUMN!r}, the name of the "
                          "pseudonym column of protected fragments; rename the attribute")


def read_verified_plan(ctx: OwnerContext):
    """``plan.json`` from ``work_dir`` and the owner's (``ctx``) verified spec in it; no Spark, no data.

    Returns ``(plan, spec)`` (:func:`fragrelease.protocol.plan_check.verified_spec`; ``spec`` None for a
    kind without microaggregation). The owner's
    ``protect`` command calls it before Spark starts, and the kind's round again
    (:meth:`fragrelease.jobs.protocol.kind.KindJobs.play_round`).

    Raises
    ------
    ConfigError
        ``plan.json`` does not exist.
    ProtocolError
        ``plan.json`` is not UTF-8, not JSON or not a plan, one line naming the owner and the path
        (:func:`fragrelease.jobs.protocol.layout.read_message`); ManifestMismatchError (a ProtocolError)
        when its terms differ from the owner's configuration.
    """
    plan = read_message(Plan, ctx.paths.plan, party=f"owner {ctx.name!r}", what="plan.json")
    return plan, verified_spec(plan, ctx.config, ctx.schema, ctx.name)


