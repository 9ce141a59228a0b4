"""Signed manifests on Spark and Delta: what an owner signs about its table, and the aggregator's checks.

The Spark-free core (keys, payload, sign, verify) is :mod:`fragrelease.signing`; this module
describes a committed protected fragment (:func:`describe_table`), loads an owner's private key
(:func:`owner_signing_key`), signs a manifest (:func:`sign_manifest`) and verifies an owner's
manifest and table before the aggregator uses them (:func:`verify_owner_manifest`,
:func:`verify_table`). Trust model: docs/known-limitations.md #7.

A table's description is public: its Delta version, the active data files at that version
(relative path as in the Delta log, size in bytes, SHA-256 of the bytes) and the SHA-256 of each
commit file ``_delta_log/<version>.json``. File hashes are computed by Spark executors
(``binaryFile`` source, one row per file; only ``(path, size, hash)`` reaches the driver), so no
row-level data is collected.
"""
from __future__ import annotations

import hashlib
import os
import posixpath
from typing import TYPE_CHECKING, Mapping, Optional
from urllib.parse import unquote, urlparse

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fragrelease.errors import ManifestMismatchError, SigningKeyError
from fragrelease.protocol.config import OwnerConfig, ReleaseConfig
from fragrelease.protocol.messages import Manifest
from fragrelease.signing import (
    load_private_key,
    parse_public_key,
    public_key_text,
    same_public_key,
    sign_manifest_fields,
    sorted_files,
    verify_manifest_fields,
)

from ..storage import absolute
from ..storage import fs_path as _fs_path

if TYPE_CHECKING:
    from .context import OwnerContext


def _shared(cfg: ReleaseConfig) -> Mapping[str, Optional[str]]:
    return {"work_dir": cfg.work_dir, "output": cfg.output}


def owner_signing_key(ctx: OwnerContext) -> Ed25519PrivateKey:
    """The owner's private key from its ``signing_key``, checked against its ``public_key`` if declared.

    ``ctx``: the owner's context (:func:`fragrelease.jobs.protocol.context.owner_context`).

    Raises
    ------
    SigningKeyError
        As :func:`load_signing_key`.
    """
    return load_signing_key(ctx.owner, _shared(ctx.config))


def load_signing_key(owner: OwnerConfig, shared: Mapping[str, Optional[str]]) -> Ed25519PrivateKey:
    """``owner``'s private key from ``owner.signing_key`` (refused under the ``shared`` folders, ``work_dir``
    and ``output``), checked against its ``public_key`` if declared.

    Raises
    ------
    SigningKeyError
        No ``signing_key`` configured; the file lies under ``work_dir``/``output``, is readable by
        group or others, is missing or is not an Ed25519 PEM; or its public key differs from the
        configured ``public_key``. One line naming the owner.
    """
    if owner.signing_key is None:
        raise SigningKeyError(f"owner {owner.name!r} has no signing_key: create a key pair with 'fragrelease keys "
                              f"generate --owner {owner.name} --out DIR' and set owners[].signing_key and public_key")
    key = load_private_key(owner.signing_key, owner=owner.name, shared=shared)
    if owner.public_key is not None and not same_public_key(
            key.public_key(), parse_public_key(owner.public_key, owner=owner.name)):
        raise SigningKeyError(f"owner {owner.name!r}: signing_key {owner.signing_key!r} does not belong to the configured "
                              f"public_key (its public key is {public_key_text(key)})")
    return key


def check_signing_keys(cfg: ReleaseConfig, owners: Optional[list[str]] = None) -> None:
    """Load (and so check) the signing keys of ``owners`` (default: all) that configure one; before Spark starts.

    Raises
    ------
    SigningKeyError
        From :func:`load_signing_key`.
    """
    for o in cfg.owners:
        if (owners is None or o.name in owners) and o.signing_key is not None:
            load_signing_key(o, _shared(cfg))


def with_release_keys(cfg: ReleaseConfig) -> ReleaseConfig:
    """``cfg`` with a signing key for every owner: single-command releases (``fragrelease run``, ``Release.run()``).

    An owner with neither ``signing_key`` nor ``public_key`` gets a new Ed25519 key pair for this
    release: the private key is written to ``<owner's private folder>/signing-<random>.key``
    (folder 0700, file 0600, a new file per release, never overwriting one) and the returned
    configuration, held in memory only, names it and carries its public key, which the
    aggregator step then verifies against. An owner with a ``signing_key`` only gets its public key
    derived from it. Configured keys are checked (:func:`owner_signing_key`).

    Raises
    ------
    SigningKeyError
        An owner with a ``public_key`` but no ``signing_key`` (this driver must sign for it), or a
        configured key that fails :func:`owner_signing_key`.
    ConfigError
        The owner's private folder exists and is open to group or others, or cannot be created
        (:func:`fragrelease.jobs.protocol.workspace.ensure_private_dir`): refused before any key is written.
    """
    from fragrelease.rng.secure import secure_bytes
    from fragrelease.signing import check_key_location, write_key_pair

    from .layout import owner_private_dir
    from .workspace import ensure_private_dir

    owners = []
    for o in cfg.owners:
        if o.signing_key is None and o.public_key is None:
            folder = owner_private_dir(cfg.name, o)
            name = f"signing-{secure_bytes(6).hex()}.key"
            check_key_location(os.path.join(folder, name), owner=o.name, shared=_shared(cfg))  # before writing
            ensure_private_dir(folder, who=f"owner {o.name!r}")  # an existing folder open to others: refused first
            path, pub = write_key_pair(folder, o.name, filename=name)
            o = o.model_copy(update={"signing_key": path, "public_key": pub})
        elif o.signing_key is None:
            raise SigningKeyError(f"owner {o.name!r} declares a public_key but no signing_key; a release that plays "
                                  "every party on this machine needs the owner's signing_key (or neither key)")
        key = load_signing_key(o, _shared(cfg))
        if o.public_key is None:
            o = o.model_copy(update={"public_key": public_key_text(key)})
        owners.append(o)
    return cfg.model_copy(update={"owners": tuple(owners)})


def _sha2(column: str):
    """SHA-256 of a binary column (imported here: preflight imports this module before Spark exists)."""
    from pyspark.sql import functions as F

    return F.sha2(F.col(column), 256)


#: Local data files up to this many bytes in all are hashed on the driver (no Spark job); larger or
#: remote ones by the executors.
DRIVER_HASH_BYTES = 64 << 20


def _hash_files(spark, uris: list[str]) -> Mapping[str, tuple[int, str]]:
    """``{unquoted file URI: (size, sha256 hex)}`` of ``uris``: hashed on the driver when every file is
    local and they hold at most :data:`DRIVER_HASH_BYTES` in all (a small table: no Spark job), else by
    the executors (also when a local file cannot be read, so that Spark's error is the one raised)."""
    if not uris:
        return {}
    local = [unquote(urlparse(u).path) if urlparse(u).scheme == "file" else u for u in uris]
    if all(urlparse(u).scheme in ("", "file") for u in uris):
        try:
            if sum(os.stat(p).st_size for p in local) <= DRIVER_HASH_BYTES:
                out = {}
                for u, p in zip(uris, local):
                    with open(p, "rb") as f:
                        data = f.read()
                    out[unquote(u)] = (len(data), hashlib.sha256(data).hexdigest())
                return out
        except OSError:
            pass  # missing or unreadable: Spark's read below names the cause as before
    rows = (spark.read.format("binaryFile").load(uris)
            .select("path", "length", _sha2("content").alias("sha256")).collect())
    return {unquote(r["path"]): (int(r["length"]), r["sha256"]) for r in rows}


def _location(uri: str) -> str:
    """A file's place without its scheme (``file:/x``, ``file:///x`` and ``/x`` agree; ``s3a://b/k`` ~ ``s3://b/k``)."""
    u = urlparse(uri)
    return u.netloc + posixpath.normpath(unquote(u.path)) if u.scheme else posixpath.normpath(unquote(uri))


def _match(hashes: Mapping[str, tuple[int, str]], root: str, rel: str) -> Optional[tuple[int, str]]:
    """The hashed file at ``root/rel`` (exact place; else the one file whose path ends with ``/rel``)."""
    want = _location(root.rstrip("/") + "/" + rel)
    exact = [v for k, v in hashes.items() if _location(k) == want]
    if len(exact) == 1:
        return exact[0]
    suffix = "/" + unquote(rel)
    found = [v for k, v in hashes.items() if k.endswith(suffix)]
    return found[0] if len(found) == 1 else None


def describe_table(spark, path: str, version: Optional[int] = None) -> tuple[int, list[dict], list[dict]]:
    """``(version, files, delta_log)`` of the Delta table at ``path`` (latest version by default).

    ``files``: ``{"path", "size", "sha256"}`` per active data file, sorted by path (path relative
    to the table, as in the log; size from the log's add action; sha256 of the file's bytes, which
    must have the logged size). ``delta_log``: ``{"version", "sha256"}`` of each commit file
    ``0 .. version``.

    Raises
    ------
    ManifestMismatchError
        A file whose bytes differ in size from its add action, a file that cannot be found or read,
        or an add action with a deletion vector (owners never write one).
    """
    import pyarrow as pa
    from deltalake import DeltaTable

    root = absolute(path)
    dt = DeltaTable(root) if version is None else DeltaTable(root, version=version)
    v = dt.version()
    actions = pa.table(dt.get_add_actions(flatten=True)).to_pydict()
    for name, values in actions.items():
        if name.startswith("deletionVector") and any(x is not None for x in values):
            raise ManifestMismatchError(f"the Delta table at {path!r} has a deletion vector at version {v}; a protected "
                                        "fragment never has one")
    hashes = _hash_files(spark, dt.file_uris())
    files = []
    for rel, size in zip(actions["path"], actions["size_bytes"], strict=True):
        got = _match(hashes, root, rel)
        if got is None:
            raise ManifestMismatchError(f"data file {rel!r} of the Delta table at {path!r} cannot be read")
        if got[0] != size:
            raise ManifestMismatchError(f"data file {rel!r} of the Delta table at {path!r} has {got[0]} bytes, its "
                                        f"Delta log says {size}")
        files.append({"path": rel, "size": int(size), "sha256": got[1]})
    fs, local = _fs_path(root)
    log = []
    for i in range(v + 1):
        with fs.open_input_stream(posixpath.join(local, "_delta_log", f"{i:020d}.json")) as f:
            log.append({"version": i, "sha256": hashlib.sha256(f.read()).hexdigest()})
    return v, sorted_files(files), log


def _cause(exc: Exception) -> str:
    """One line of an exception: a JVM error's first ``...Exception: message`` line, else its first line."""
    lines = [x.strip().lstrip(": ") for x in str(exc).splitlines() if x.strip().lstrip(": ")]
    java = [x for x in lines if "Exception:" in x or "Error:" in x]
    return (java[0] if java else lines[0] if lines else type(exc).__name__)[:300]


def sign_manifest(manifest: Manifest, key: Ed25519PrivateKey) -> Manifest:
    """``manifest`` with ``signature`` set: Ed25519 over :meth:`Manifest.signed_fields`."""
    return manifest.model_copy(update={"signature": sign_manifest_fields(key, manifest.signed_fields())})


def public_keys(cfg: ReleaseConfig) -> Mapping[str, Ed25519PublicKey]:
    """The configured public key of every owner that declares one (``owners[].public_key``).

    Raises
    ------
    SigningKeyError
        A public key that does not parse (refused at configuration load already).
    """
    return {o.name: parse_public_key(o.public_key, owner=o.name) for o in cfg.owners if o.public_key is not None}


def verify_owner_manifest(manifest: Manifest, *, folder_owner: str, plan_owner: str,
                          keys: Mapping[str, Ed25519PublicKey]) -> None:
    """The aggregator's checks of a manifest before its table is read (docs/known-limitations.md #7).

    ``folder_owner`` is the owner whose folder (``owners/<owner>/``) the manifest was read from,
    ``plan_owner`` the plan's owner it stands for; ``keys`` the configured public keys.

    Raises
    ------
    ManifestMismatchError
        The manifest names another owner than its folder and the plan (a copied or swapped folder);
        no public key is configured for the owner; the signature is missing or does not verify
        under that owner's key (a changed field, a forged manifest). One line naming the owner.
    """
    if manifest.owner != folder_owner or manifest.owner != plan_owner:
        raise ManifestMismatchError(
            f"the manifest in the folder of owner {folder_owner!r} names owner {manifest.owner!r}: refused (a "
            f"fragment copied or moved from another owner's folder)")
    key = keys.get(folder_owner)
    if key is None:
        raise ManifestMismatchError(f"no public key is configured for owner {folder_owner!r} (owners[].public_key): "
                                    "its manifest cannot be verified, refused")
    verify_manifest_fields(key, manifest.signed_fields(), manifest.signature, owner=folder_owner)


def verify_table(spark, manifest: Manifest, path: str, owner: str, *, pseudonyms_path: Optional[str] = None) -> None:
    """Refuse an owner's table that is not exactly the one its (verified) manifest signs.

    The table's latest Delta version must be the signed ``table_version``, its commit files and
    its active data files (path, size, SHA-256 of the bytes) the signed ``delta_log`` and ``files``.
    With ``pseudonyms_path`` (``linkage: unlinked``: the owner's pseudonym-set table), the same holds
    for that table against ``pseudonym_table_version``, ``pseudonym_files`` and ``pseudonym_delta_log``.

    Raises
    ------
    ManifestMismatchError
        Naming the owner and the first difference: another version (an extra commit), another
        file set, a file's bytes, a commit file's bytes; or a pseudonym-set table the manifest does
        not describe.
    """
    if manifest.table_version is None or not manifest.files:
        raise ManifestMismatchError(f"manifest of owner {owner!r} does not describe its table's files: refused")
    _verify_files(spark, path, owner, "protected table", manifest.table_version, manifest.files, manifest.delta_log)
    if pseudonyms_path is not None:
        if manifest.pseudonym_table_version is None or not manifest.pseudonym_files:
            raise ManifestMismatchError(f"manifest of owner {owner!r} does not describe its pseudonym-set table's "
                                        "files: refused")
        _verify_files(spark, pseudonyms_path, owner, "pseudonym-set table", manifest.pseudonym_table_version,
                      manifest.pseudonym_files, manifest.pseudonym_delta_log)


def _verify_files(spark, path: str, owner: str, what: str, version: int, signed_files, signed_log) -> None:
    from deltalake import DeltaTable

    latest = DeltaTable(absolute(path)).version()
    if latest != version:
        raise ManifestMismatchError(f"{what} of owner {owner!r} is at Delta version {latest}, its signed "
                                    f"manifest says {version}: a commit was added or removed")
    try:
        _, files, log = describe_table(spark, path, latest)
    except ManifestMismatchError as exc:
        raise ManifestMismatchError(f"{what} of owner {owner!r}: {exc}") from None
    except Exception as exc:  # a missing or unreadable file surfaces as a Spark or IO error
        raise ManifestMismatchError(f"{what} of owner {owner!r} cannot be read: {_cause(exc)}") from None
    signed = sorted_files(signed_files)
    if [(f["path"], f["size"]) for f in files] != [(f["path"], f["size"]) for f in signed]:
        have = {f["path"] for f in files}
        want = {f["path"] for f in signed}
        raise ManifestMismatchError(
            f"{what} of owner {owner!r} holds other data files than its signed manifest: "
            f"{len(have - want)} unsigned, {len(want - have)} missing, {len(have & want)} common")
    for got, want_f in zip(files, signed, strict=True):
        if got["sha256"] != want_f["sha256"]:
            raise ManifestMismatchError(f"{what} of owner {owner!r}: data file {got['path']!r} was changed "
                                        "after the owner signed it")
    if [dict(x) for x in signed_log] != log:
        raise ManifestMismatchError(f"{what} of owner {owner!r}: its Delta log was rewritten after the owner "
                                    "signed it")
