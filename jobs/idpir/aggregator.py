"""The aggregator's job κ: plan, then validate, combine and release.

Sources: docs/specification.md §3; Del Vasto-Terrientes et al. (ICISSP 2025) §4.2.

``plan``: read every owner's metadata, validate it (horizontal: identical attributes, kinds and
domains; vertical: disjoint attributes, the same id set, no duplicates), and issue the plan
(k ≥ 3, k ≤ n; horizontal: every owner the full ε; vertical: ε_j by the configured split).

``release``: check every owner's manifest against the plan and its protected fragment against the
manifest (schema, record count, content digest), union (horizontal) or join by id (vertical),
drop the record id unless the configuration keeps it, shuffle the row order with CSPRNG keys (and,
with ``linkage: unlinked``, every column on its own), and
commit the release as one Delta transaction whose commit records the provenance: total ε,
composition, k, mechanism, owners and their ε_j with each attribute's budget split, the category
order, the linkage, the exact guarantee (:func:`fragrelease.idpir.guarantee.release_guarantee`) and the
plan id — public parameters only — and
write the public report (statistics of the released table only) beside it.
"""
from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fragrelease import __version__
from fragrelease.errors import ConfigError, IdentifierError, ManifestMismatchError, ReleaseExistsError
from fragrelease.idpir.config import ReleaseConfig
from fragrelease.idpir.guarantee import release_guarantee
from fragrelease.idpir.protocol import Manifest, OwnerMetadata, Plan, check_manifest, make_plan
from fragrelease.jobs.catalog import commit_table, release_exists
from fragrelease.jobs.describe import cast_declared_integers, integer_columns, release_description
from fragrelease.jobs.idpir.layout import manifest_path, metadata_path, plan_path, protected_path
from fragrelease.jobs.idpir.protect import _num_partitions, fragment_digests, global_rank
from fragrelease.jobs.session import get_spark
from fragrelease.jobs.storage import (
    commit_delta,
    is_delta_table,
    read_delta,
    read_text,
    table_self_description,
    write_text,
)
from fragrelease.schemas.datasets import resolve_schema
from fragrelease.udfs.noise import secure_random_key_udf

log = logging.getLogger(__name__)


def issue_plan(cfg: ReleaseConfig, spark=None) -> Plan:
    """Validate the owners' metadata files and write ``plan.json``.

    ``spark`` is needed only when the release goes to a catalog table (``output_table``), to look it
    up; without it the active (or a new local) session is used.

    Raises
    ------
    ReleaseExistsError
        The release table exists and the configuration does not allow a new version: refused
        before any owner spends budget on it.
    ProtocolError, IdentifierError, InvalidParameterError
        From :func:`fragrelease.idpir.protocol.make_plan`.
    """
    if cfg.if_exists == "error":
        if cfg.output_table is None:
            exists = is_delta_table(cfg.output)
        else:
            exists = release_exists(spark if spark is not None else get_spark(), cfg.output, cfg.output_table)
        if exists:
            raise ReleaseExistsError(f"a release already exists at {cfg.output_table or cfg.output!r} and if_exists is 'error'")
    metas = [OwnerMetadata.model_validate_json(read_text(metadata_path(cfg, o.name))) for o in cfg.owners]
    plan = make_plan(metas, fragmentation=cfg.fragmentation, mechanism=cfg.mechanism, k=cfg.k,
                     epsilon=cfg.epsilon, epsilon_split=cfg.epsilon_split, keep_id=cfg.keep_id,
                     category_order=cfg.category_order, category_order_share=cfg.category_order_share_exact,
                     linkage=cfg.linkage, postprocess=cfg.postprocess)
    write_text(plan_path(cfg), plan.to_json())
    log.info("plan %s issued to %d owners", plan.plan_id, len(plan.owners))
    return plan


def provenance(plan: Plan) -> dict:
    """The public facts a release records with its commit (docs/specification.md §3)."""
    return {
        "role": "release",
        "plan_id": plan.plan_id,
        "dataset": plan.dataset,
        "fragmentation": plan.fragmentation,
        "mechanism": plan.mechanism,
        "k": plan.k,
        "epsilon": plan.epsilon,
        "composition": plan.composition,
        "epsilon_split": plan.epsilon_split,
        "owners": [o.model_dump(mode="json") for o in plan.owners],
        "attributes": [dict(a) for a in plan.attributes],
        "keep_id": plan.keep_id,
        "category_order": plan.category_order,
        "category_order_share": plan.category_order_share,
        "linkage": plan.linkage,
        "postprocess": plan.postprocess,
        "guarantee": release_guarantee(mechanism=plan.mechanism, epsilon=plan.epsilon, composition=plan.composition,
                                       linkage=plan.linkage, category_order=plan.category_order),
        "fragrelease_version": __version__,
    }


def load_verified_fragment(spark, cfg: ReleaseConfig, plan: Plan, owner: str) -> tuple[Manifest, DataFrame, str]:
    """An owner's protected fragment after checking manifest ↔ plan and content ↔ manifest.

    Returns the manifest, the fragment (id column first, then the attributes in manifest order) and
    the digest of its id set (:func:`fragrelease.jobs.idpir.protect.id_digest`; same pass as the content
    digest).

    Raises
    ------
    ManifestMismatchError
        Missing manifest or table, a manifest that differs from the plan, a table whose columns,
        record count or content digest differ from the manifest.
    """
    try:
        manifest = Manifest.model_validate_json(read_text(manifest_path(cfg, owner)))
    except ConfigError as exc:
        raise ManifestMismatchError(f"owner {owner!r} has no manifest: {exc}") from None
    check_manifest(manifest, plan)
    path = protected_path(cfg, owner)
    if not is_delta_table(path):
        raise ManifestMismatchError(f"owner {owner!r} has no protected Delta table at {path!r}")
    expected = [plan.id_column, *[a["name"] for a in manifest.attributes]]
    try:
        df = read_delta(spark, path)
        columns = df.columns
        digest, ids = fragment_digests(df, plan.id_column) if sorted(columns) == sorted(expected) else (None, None)
    except Exception as exc:  # a truncated or corrupted file surfaces as a Spark read error
        raise ManifestMismatchError(f"protected fragment of {owner!r} at {path!r} cannot be read: "
                                    f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}") from None
    if digest is None:
        raise ManifestMismatchError(f"protected fragment of {owner!r} has columns {columns}, the manifest says {expected}")
    if digest != manifest.content_digest:
        raise ManifestMismatchError(
            f"protected fragment of {owner!r} does not match its manifest: content digest {digest} != {manifest.content_digest}"
        )
    if int(digest.split(":")[1]) != manifest.n_records:
        raise ManifestMismatchError(f"protected fragment of {owner!r} has {digest.split(':')[1]} rows, manifest says {manifest.n_records}")
    return manifest, df.select(*expected), ids


def combine(plan: Plan, fragments: dict[str, DataFrame]) -> DataFrame:
    """Union (horizontal) or join on the id (vertical) the verified fragments; columns in plan order.

    Vertical fragments must hold the same id set (:func:`release` checks their id digests first).
    """
    id_col = plan.id_column
    names = [a["name"] for a in plan.attributes]
    if plan.fragmentation == "horizontal":
        frames = [fragments[o.name].select(id_col, *names) for o in plan.owners]
        out = frames[0]
        for f in frames[1:]:
            out = out.unionByName(f)
        return out
    return join_vertical([fragments[o.name] for o in plan.owners], id_col).select(id_col, *names)


def join_vertical(frames: list[DataFrame], id_column: str) -> DataFrame:
    """Line up vertical fragments by id: one row per id with every fragment's columns.

    Shapes: each frame is ``(id_column, its attributes)``; out: ``(id_column, attributes of frame 0,
    of frame 1, ...)``. The frames must hold the same id set: :func:`release` compares their id
    digests (computed in the same pass as the content digests) before it joins, so the chain of
    inner joins neither loses nor invents records. Inner joins keep the hash partitioning on the
    id, so each fragment is shuffled once (``benchmarks/bench_combine.py``).
    """
    out = frames[0]
    for f in frames[1:]:
        out = out.join(f, id_column, "inner")
    return out


def shuffle_rows(df: DataFrame, id_column: str) -> DataFrame:
    """Random row order (keys from the OS CSPRNG): the release cannot be lined up with the inputs."""
    return (df.withColumn("__key", secure_random_key_udf()(F.col(id_column)))
            .repartitionByRange("__key").sortWithinPartitions("__key").drop("__key"))


def unlink_columns(df: DataFrame, columns: list[str]) -> DataFrame:
    """Shuffle every column on its own (``linkage: unlinked``; docs/specification.md §2).

    Shapes: in, any DataFrame holding ``columns``; out, the same columns with the same multiset of
    values per column, each column in its own uniformly random order (keys from the OS CSPRNG,
    :func:`fragrelease.udfs.noise.secure_random_key_udf`), lined up by position. After this the
    table is a function of the columns' multisets alone: no row links a record's values across
    attributes. Distributed: each column is ranked by its random key with
    :func:`fragrelease.jobs.idpir.protect.global_rank` (range partitioning, stored before counting, so
    the keys are drawn once) and the columns are joined on that rank.
    """
    parts = _num_partitions(df.sparkSession, 0)
    key = secure_random_key_udf()
    out = None
    for c in columns:
        keyed = df.select(F.lit(0).alias("__g"), key(F.col(c)).alias("__key"), F.col(c))
        ranked = global_rank(keyed, "__g", ["__key"], parts).select(F.col("rank").alias("__row"), c)
        out = ranked if out is None else out.join(ranked, "__row")
    return out.drop("__row")


def release(spark, cfg: ReleaseConfig) -> dict:
    """Validate every owner's protected fragment, combine them and commit the release.

    Returns
    -------
    dict with ``path`` (the Delta table's location), ``table`` (the catalog name, or None),
    ``version``, ``rows``, the provenance recorded with the commit and ``report`` (path or None).
    :class:`fragrelease.jobs.api.Release` wraps it in a typed result.

    Raises
    ------
    ManifestMismatchError
        A fragment that does not match its manifest or the plan (:func:`load_verified_fragment`).
    IdentifierError
        Vertical fragments whose id sets differ (the join would lose or invent records).
    """
    plan = Plan.model_validate_json(read_text(plan_path(cfg)))
    fragments, id_sets = {}, {}
    for o in plan.owners:
        _, df, id_sets[o.name] = load_verified_fragment(spark, cfg, plan, o.name)
        fragments[o.name] = df
    if plan.fragmentation == "vertical":
        first = plan.owners[0].name
        for o in plan.owners[1:]:
            if id_sets[o.name] != id_sets[first]:
                raise IdentifierError(f"the protected fragments of {first!r} and {o.name!r} hold different sets of record ids")
    combined = combine(plan, fragments)
    released = shuffle_rows(combined, plan.id_column)
    if not plan.keep_id:
        released = released.drop(plan.id_column)
    if plan.linkage == "unlinked":  # keep_id is refused with unlinked (config and plan)
        released = unlink_columns(released, [a["name"] for a in plan.attributes])
    prov = provenance(plan)
    # integer-declared attributes are written as integers (rounding a released value is post-processing),
    # and the table describes itself from the public provenance only (fragrelease.jobs.describe)
    declared = {a.name: a.type for a in resolve_schema(cfg.dataset).attributes}
    released = cast_declared_integers(released, integer_columns(plan.attributes, declared))
    described = release_description(prov, declared_types=declared, id_column=plan.id_column)
    if cfg.output_table is not None:
        path, version = commit_table(released, cfg.output_table, provenance=prov, if_exists=cfg.if_exists,
                                     description=described)
    else:
        path = cfg.output
        version = commit_delta(released, path, provenance=prov, if_exists=cfg.if_exists, description=described)
    rows = sum(o.n_records for o in plan.owners) if plan.fragmentation == "horizontal" else plan.owners[0].n_records
    log.info("release committed: version %d of %s", version, cfg.output_table or path)
    report = None
    if cfg.reports:
        # imported here: the report module selects matplotlib's Agg backend (see owner.py)
        from fragrelease.jobs.idpir.report import public_report, public_report_path

        schema = resolve_schema(cfg.dataset)
        attrs = [schema.attribute(a["name"]) for a in plan.attributes]
        report = public_report(read_delta(spark, path, version), attrs, prov, public_report_path(path, version),
                               described=table_self_description(path, version))
    return {"path": path, "table": cfg.output_table, "version": version, "rows": rows, "provenance": prov,
            "report": report}
