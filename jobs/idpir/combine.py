"""The IR kind's aggregator: verify every owner's protected fragment and combine them (docs/specification.md §3).

Sources: docs/specification.md §3; Del Vasto-Terrientes et al. (ICISSP 2025) §4.2.

:func:`verified_combination` (what :meth:`fragrelease.jobs.idpir.kind.IRJobs.combine` runs, called by
:func:`fragrelease.jobs.protocol.aggregator.release`): check every owner's manifest against the plan and its
protected fragment and pseudonym set against the manifest (schema, record count, content digest,
pseudonym-set digest), refuse vertical pseudonym sets that differ and horizontal owners that share a
pseudonym (a record held twice), union (horizontal) or join on the pseudonym (vertical), drop the
pseudonym unless the configuration keeps it (``keep_id: true`` publishes the ``pseudonym`` column, which
only the owners, who hold the key, can map back to record ids), and shuffle the row order with CSPRNG
keys (and, with ``linkage: unlinked``, every column on its own). The protocol then commits the rows
(:func:`fragrelease.jobs.protocol.aggregator.release`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fragrelease.errors import ConfigError, IdentifierError, ManifestMismatchError
from fragrelease.idpir.linkage import ir_linkage
from fragrelease.protocol.fragmentation import fragmentation_of
from fragrelease.protocol.messages import Manifest, Plan, check_manifest
from fragrelease.pseudonyms import PSEUDONYM_COLUMN

from ..protocol.context import AggregatorContext
from ..protocol.digests import committed_rows, content_digest, fragment_digests, set_checks, shared_records
from ..protocol.kind import Combined
from ..protocol.layout import read_message
from ..protocol.shuffle import one_task, pseudonym_set_digest, shuffle_rows
from ..protocol.signatures import public_keys, verify_owner_manifest, verify_table
from ..storage import is_delta_table
from .unlink import unlink_columns, unlink_frames

__all__ = ["assemble", "check_disjoint_pseudonyms", "combine", "join_vertical", "load_verified_fragment",
           "verified_combination"]


def verified_combination(spark, ctx: AggregatorContext, plan: Plan,
                         keys: Optional[Mapping[str, Ed25519PublicKey]]) -> Combined:
    """Every owner's protected fragment verified against its signed manifest and the plan, combined
    (:func:`combine`; linked without ``keep_id``: the pseudonym dropped). Errors: :func:`fragrelease.jobs.protocol.aggregator.release`.

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
        raise shared_records(*shared, stage="release")
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


def check_disjoint_pseudonyms(psets: dict[str, DataFrame], *, stage: str = "release", single_task: bool = False) -> None:
    """Refuse horizontal owners that share a record: a pseudonym held twice (by two owners or by one).

    ``stage``: ``"release"`` (the protected fragments' pseudonyms: a second line of defence) or
    ``"plan"`` (the metadata round's id digests, :func:`fragrelease.jobs.protocol.aggregator.check_disjoint_ids`: before anyone spends).

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
        raise shared_records(pairs[0]["a"], pairs[0]["b"], int(pairs[0]["count"]), stage=stage)


def combine(plan: Plan, fragments: dict[str, DataFrame]) -> DataFrame:
    """Combine the verified fragments; columns in plan order, rows in a random order.

    Linked: union (horizontal) or join on the pseudonym (vertical, :func:`join_vertical`), then a
    CSPRNG row shuffle; out ``(pseudonym, *attributes)``. Unlinked (the fragments hold attributes
    only, each column already in its own random order): union then :func:`unlink_columns`
    (horizontal), or every owner's columns each in a fresh random order, lined up by position
    (vertical, :func:`fragrelease.jobs.idpir.unlink.unlink_frames`); out ``(*attributes)``.

    Vertical fragments must hold the same pseudonym set (:func:`verified_combination` compares their digests first).
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
    :func:`fragrelease.jobs.idpir.evaluate.owners_mean_sse`). Raises ConfigError for a vertical assembly without a key.
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
    of frame 1, ...)``. The frames must hold the same key set: :func:`verified_combination` compares their
    pseudonym-set digests (computed in the same pass as the content digests) before it joins, so the
    chain of inner joins neither loses nor invents records. Inner joins keep the hash partitioning on
    the key, so each fragment is shuffled once (``benchmarks/bench_combine.py``).
    """
    out = frames[0]
    for f in frames[1:]:
        out = out.join(f, id_column, "inner")
    return out
