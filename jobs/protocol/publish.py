"""An owner's protected fragment kept privately, then published to ``work_dir`` as a copy (draw once).

The protect step (:func:`fragrelease.jobs.idpir.owner_round.protect_and_write`) writes its protected
fragment (and, ``linkage: unlinked``, its pseudonym set) as Delta tables into its **private** draw
folder first (``draws/<plan id>/tables-<id>/protected`` and ``.../pseudonyms``,
:mod:`fragrelease.jobs.protocol.draws`), signs the manifest over those tables, fsyncs them and keeps
the record ``draws/<plan id>/protect.kept`` (the tables' folder and the signed manifest) once and
atomically (:func:`keep_tables`). Only then is anything shared: :func:`publish_kept` copies the
tables' files as they are into ``owners/<owner>/`` (a Delta log names its data files by relative
paths, so the copy is the same table: same version, files and digests), checks the copy against the
manifest and writes ``manifest.json`` last (a fragment is published by its manifest). A later run
for the same plan finds the record and publishes the same tables again, never a new draw.

What a publication replaces under ``owners/<owner>/`` (:func:`clear_own_entry`): only what this
owner's protocol writes there (its manifest, a Delta table whose first commit names this owner and
the table's role, with no other version, or the files an interrupted write leaves); anything else is
refused and left in place.
"""
from __future__ import annotations

import json
import logging
import posixpath
import re
import uuid
from dataclasses import asdict, dataclass
from typing import Optional

import pyarrow.fs as pafs

from fragrelease.errors import ConfigError, FragReleaseError, ManifestMismatchError, ReleaseExistsError
from fragrelease.private_files import fsync_tree
from fragrelease.protocol.messages import Manifest
from fragrelease.signing import verify_manifest_fields

from ..storage import absolute, is_delta_table, table_provenance, write_text
from .context import OwnerContext
from .draws import DrawStep
from .signatures import describe_table, sign_manifest
from .workspace import _local, ensure_private_dir, restrict_private_tree

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeptProtection:
    """A protection's kept output (``draws/<plan id>/protect.kept``): the private tables' folder name and the
    signed manifest's JSON."""

    tables: Optional[str] = None
    manifest: Optional[str] = None

    def to_bytes(self) -> bytes:
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None}, sort_keys=True).encode("utf-8")


def read_kept(step: DrawStep) -> Optional[KeptProtection]:
    """The kept output of a protection ``step``, or None when it kept none.

    Raises
    ------
    ConfigError
        The kept record is damaged: the owner never draws again for this plan (one line, what to do).
    """
    data = step.kept_bytes()
    if data is None:
        return None
    try:
        kept = KeptProtection(**json.loads(data))
        ok = kept.tables is not None and kept.manifest is not None
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ConfigError(f"owner {step.owner!r}: the kept output of {step.step} of plan {step.plan_id} at {step.kept!r} "
                          "is damaged; it is never drawn again: restore it from a backup or use a new plan")
    return kept

#: The tables a protection keeps and publishes: name in the kept folder → provenance role.
TABLES = {"protected": "protected-fragment", "pseudonyms": "pseudonym-set"}


def new_tables_folder(step: DrawStep) -> str:
    """A new folder for this attempt's private tables, ``draws/<plan id>/tables-<id>`` (created 0700);
    the folders an earlier attempt left without keeping them are removed first (this owner's own)."""
    ensure_private_dir(step.folder)
    _remove_unkept(step)
    return posixpath.join(step.folder, f"tables-{uuid.uuid4().hex}")


def _remove_unkept(step: DrawStep) -> None:
    kept = read_kept(step)
    keep = None if kept is None else kept.tables
    fs, root = pafs.FileSystem.from_uri(absolute(step.folder))
    for info in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
        if info.type == pafs.FileType.Directory and re.fullmatch(r"tables-[0-9a-f]{32}", info.base_name) \
                and info.base_name != keep:
            fs.delete_dir(info.path)


def keep_tables(step: DrawStep, folder: str, manifest: Manifest) -> KeptProtection:
    """Keep ``folder`` (this attempt's private tables) and the signed ``manifest`` as the step's output; return
    the kept record. When another attempt kept one first, this attempt's tables are removed and that record
    is returned (it is the one published)."""
    restrict_private_tree(folder)
    local = _local(folder)
    if local is not None:
        fsync_tree(local)  # the tables survive a crash before anything is shared
    record = KeptProtection(tables=posixpath.basename(folder), manifest=manifest.to_json())
    if step.keep(record.to_bytes()):
        return record
    log.warning("owner %s: another attempt kept the protection of plan %s first; publishing that one",
                step.owner, step.plan_id)
    remove_tree(folder)
    kept = read_kept(step)
    assert kept is not None  # kept by the other attempt
    return kept


def publish_kept(spark, ctx: OwnerContext, step: DrawStep, record: KeptProtection, signing_key) -> Manifest:
    """Publish the kept protection ``record`` of ``step`` to ``owners/<owner>/`` and return its manifest.

    The manifest is removed first (the fragment is unpublished while its tables are replaced), each
    kept table is copied file by file over what :func:`clear_own_entry` cleared, the copy is checked
    against the manifest (version, files and their SHA-256, commit files), then the manifest is written.
    A manifest kept under another signing key than the owner's current one is signed again over the
    same fields (the same draw).

    Raises
    ------
    ConfigError
        The kept record is damaged (the owner never draws again for this plan).
    ReleaseExistsError
        ``owners/<owner>/`` holds something this owner's protocol did not write (left in place).
    ManifestMismatchError
        The published copy differs from the kept manifest (a write that failed midway: run again).
    """
    paths = ctx.paths
    try:
        manifest = Manifest.model_validate_json(str(record.manifest))
        source = posixpath.join(step.folder, str(record.tables))
    except ValueError:
        raise ConfigError(f"owner {ctx.name!r}: the kept protection of plan {step.plan_id} at {step.kept!r} is damaged; "
                          "it is never drawn again: restore it from a backup or use a new plan") from None
    try:
        verify_manifest_fields(signing_key.public_key(), manifest.signed_fields(), manifest.signature, owner=ctx.name)
    except FragReleaseError:
        manifest = sign_manifest(manifest.model_copy(update={"signature": None}), signing_key)
    _delete_file(paths.manifest)  # unpublished while its tables are replaced
    targets = {"protected": paths.protected, "pseudonyms": paths.pseudonyms}
    for name, role in TABLES.items():
        clear_own_entry(ctx, targets[name], role)
        src = posixpath.join(source, name)
        if _exists(src):
            _copy_tree(src, targets[name])
    _check_copy(spark, ctx, manifest)
    write_text(paths.manifest, manifest.to_json())
    return manifest


def _check_copy(spark, ctx: OwnerContext, manifest: Manifest) -> None:
    version, files, delta_log = describe_table(spark, ctx.paths.protected)
    expected = [(manifest.table_version, list(manifest.files), list(manifest.delta_log))]
    found = [(version, files, delta_log)]
    if manifest.pseudonym_table_version is not None:
        expected.append((manifest.pseudonym_table_version, list(manifest.pseudonym_files),
                         list(manifest.pseudonym_delta_log)))
        found.append(describe_table(spark, ctx.paths.pseudonyms))
    if [(v, list(f), list(d)) for v, f, d in found] != expected:
        raise ManifestMismatchError(f"owner {ctx.name!r}: the published copy of its kept protected fragment of plan "
                                    f"{manifest.plan_id} differs from the kept manifest; run the owner step again")


def clear_own_entry(ctx: OwnerContext, target: str, role: str) -> None:
    """Remove what this owner's (``ctx``) protocol wrote at ``target`` (``owners/<owner>/protected`` or
    ``.../pseudonyms``), so that a kept table can be published there.

    Removed: a Delta table with one version whose commit names this owner and ``role`` (of any plan:
    a table of an older plan is this owner's own protocol entry; the draw itself stays in the owner's
    private records), or the ``part-<uuid>`` folders, Parquet part files and uncommitted
    ``_delta_log`` an interrupted write leaves.

    Raises
    ------
    ReleaseExistsError
        ``target`` holds something else (another owner's or role's table, more than one version,
        files fragrelease does not write there); nothing is deleted, the message names what is there.
    """
    if not is_delta_table(target):
        _discard_interrupted_write(ctx.name, target)
        return
    from deltalake import DeltaTable

    version = DeltaTable(absolute(target)).version()
    provenance = table_provenance(target, 0)
    found = (provenance.get("role"), provenance.get("plan_id"), provenance.get("owner"))
    if found[0] != role or found[2] != ctx.name or version != 0:
        raise ReleaseExistsError(
            f"{target!r} holds a Delta table (role {found[0]!r}, plan {found[1]!r}, owner {found[2]!r}, "
            f"version {version}) that the protect step of owner {ctx.name!r} did not write; it was left in place; remove it "
            "or use another work_dir")
    remove_tree(target)


def _discard_interrupted_write(owner_name: str, target: str) -> None:
    """Remove ``part-<uuid>`` folders (and an uncommitted ``_delta_log``) a killed write left at ``target``."""
    part, commit = re.compile(r"part-[0-9a-f]{32}"), re.compile(r"\d{20}\.json")
    spark_file = re.compile(r"\.?part-\d{5}-[0-9a-f-]{36}(-c\d{3})?(\.\w+)*\.parquet(\.crc)?")
    fs, root = pafs.FileSystem.from_uri(absolute(target))
    if fs.get_file_info(root).type == pafs.FileType.NotFound:
        return
    entries = fs.get_file_info(pafs.FileSelector(root))
    log_dir = [e for e in entries if e.base_name == "_delta_log"]
    commits = [e for d in log_dir for e in fs.get_file_info(pafs.FileSelector(d.path)) if commit.fullmatch(e.base_name)]
    strangers = [e.base_name for e in entries
                 if not (e.type == pafs.FileType.Directory and (part.fullmatch(e.base_name) or e.base_name == "_delta_log")
                         or e.type == pafs.FileType.File and spark_file.fullmatch(e.base_name))]
    if strangers or commits:
        raise ReleaseExistsError(f"{target!r} is not a Delta table but holds {sorted(strangers + [c.base_name for c in commits])[:3]}, "
                                 f"which the step of owner {owner_name!r} did not write; it was left in place")
    if entries:
        remove_tree(target)
        log.warning("owner %s: removed the uncommitted files an interrupted write left at %r", owner_name, target)


def _exists(uri: str) -> bool:
    fs, path = pafs.FileSystem.from_uri(absolute(uri))
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def _copy_tree(src: str, dst: str) -> None:
    """Copy every file under folder ``src`` to the same relative path under ``dst`` (byte for byte)."""
    sfs, spath = pafs.FileSystem.from_uri(absolute(src))
    dfs, dpath = pafs.FileSystem.from_uri(absolute(dst))
    dfs.create_dir(dpath, recursive=True)
    pafs.copy_files(spath, dpath, source_filesystem=sfs, destination_filesystem=dfs)


def remove_tree(uri: str) -> None:
    """Delete folder ``uri`` and everything in it (only ever a table this owner's step wrote)."""
    fs, path = pafs.FileSystem.from_uri(absolute(uri))
    try:
        fs.delete_dir(path)
    except FileNotFoundError:
        pass


def _delete_file(uri: str) -> None:
    fs, path = pafs.FileSystem.from_uri(absolute(uri))
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        pass
