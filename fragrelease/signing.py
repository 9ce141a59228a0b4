"""Ed25519 signatures of owners' manifests, Spark-free (docs/known-limitations.md #7, "Trust model").

Each data owner holds an Ed25519 key pair (RFC 8032, through the ``cryptography`` package). The
owner signs a canonical byte string of its manifest (:func:`manifest_payload`); the aggregator
verifies it under the public key the release configuration declares for that owner
(:func:`verify_manifest_fields`). Without the owner's private key nobody, including someone who can
write to the shared ``work_dir``, can produce a manifest the aggregator accepts, so a fragment
cannot be altered, copied into another owner's folder or attributed to another owner undetected.

Encodings:

- public key: the raw 32 bytes in standard base64 (44 characters), one line in the configuration
  (``owners[i].public_key``); :func:`public_key_text`, :func:`parse_public_key`;
- private key: an unencrypted PKCS#8 PEM file (``-----BEGIN PRIVATE KEY-----``), mode 0600, in a
  file the owner's configuration names (``owners[i].signing_key``); :func:`private_key_pem`,
  :func:`load_private_key`;
- signature: the 64 raw bytes in standard base64.

Payload (:func:`manifest_payload`): ``b"fragrelease-manifest-v1\\n"`` followed by the manifest's
fields (every field except ``signature``) as JSON with sorted keys, no whitespace, UTF-8. The
domain-separation prefix keeps a manifest signature from being valid for any other message signed
with the same key. The fields must include the plan id, the owner's name, the dataset, the content
digest and the table's files; the manifest's public parameters (k, ε_j, mechanism, attributes,
budgets, ...) are covered too.

Randomness: private keys are 32 bytes from :func:`fragrelease.rng.secure.secure_bytes` (the OS CSPRNG).
"""
from __future__ import annotations

import base64
import binascii
import json
import os
import stat
from typing import Any, Iterable, Mapping, Optional

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fragrelease.errors import SignatureError, SigningKeyError
from fragrelease.private_files import check_owner_only_mode, file_kind, make_private_dir, read_private_file
from fragrelease.rng.secure import secure_bytes

#: Domain-separation prefix of every manifest payload (bump the version when the payload changes).
MANIFEST_DOMAIN = b"fragrelease-manifest-v1\n"
#: Fields every signed manifest payload must hold.
REQUIRED_FIELDS = ("plan_id", "owner", "dataset", "content_digest", "files")
#: Length of a raw Ed25519 public key and signature, in bytes.
PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64


def generate_private_key() -> Ed25519PrivateKey:
    """A new Ed25519 private key from 32 bytes of the OS CSPRNG (:func:`fragrelease.rng.secure.secure_bytes`)."""
    return Ed25519PrivateKey.from_private_bytes(secure_bytes(32))


def private_key_pem(key: Ed25519PrivateKey) -> bytes:
    """The private key as an unencrypted PKCS#8 PEM (the file format of ``signing_key``)."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def public_key_text(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """The public key (of a private or public key) as base64 of its raw 32 bytes, the configuration's form."""
    pub = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return base64.b64encode(pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)).decode("ascii")


def parse_public_key(text: str, *, owner: str) -> Ed25519PublicKey:
    """An owner's public key from its configuration text (base64 of the raw 32 bytes).

    Raises
    ------
    SigningKeyError
        Not base64, or not 32 bytes; the message names the owner and the value as written.
    """
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise SigningKeyError(f"owner {owner!r}: public_key {text!r} is not base64 (expected the 44-character "
                              "line printed by 'fragrelease keys generate')") from None
    if len(raw) != PUBLIC_KEY_BYTES:
        raise SigningKeyError(f"owner {owner!r}: public_key {text!r} decodes to {len(raw)} bytes, an Ed25519 public "
                              f"key has {PUBLIC_KEY_BYTES}")
    return Ed25519PublicKey.from_public_bytes(raw)


def _within(path: str, folder: str) -> bool:
    a = os.path.realpath(os.path.expanduser(path))
    b = os.path.realpath(os.path.expanduser(folder))
    return a == b or a.startswith(b.rstrip("/") + "/")


def check_key_location(path: str, *, owner: str, shared: Mapping[str, Optional[str]] = {}) -> None:
    """Refuse a private key path under any ``shared`` folder (``{config key: folder}``; URIs skipped).

    Raises
    ------
    SigningKeyError
        One line naming the owner, the path and the shared folder.
    """
    for key, folder in shared.items():
        if folder and "://" not in folder and not folder.startswith("dbfs:") and _within(path, folder):
            raise SigningKeyError(f"owner {owner!r}: signing_key {path!r} lies under the shared {key} {folder!r}; "
                                  "a private key must stay out of every folder the aggregator or recipients read")


def check_private_key_file(path: str, *, owner: str, shared: Mapping[str, Optional[str]] = {}) -> None:
    """Refuse an owner's private key file that others could read or that lies in a shared folder.

    ``shared`` maps a configuration key (``work_dir``, ``output``) to its folder; URIs
    (``s3a://``, ``dbfs:/``) there are compared as text. Checks, in order: the file does not lie
    under any ``shared`` folder; it exists and is a regular file; its mode grants nothing to group
    or others (``mode & 0o077 == 0``).

    Raises
    ------
    SigningKeyError
        One line naming the owner, the path and the reason.
    """
    check_key_location(path, owner=owner, shared=shared)
    local = os.path.expanduser(path)
    try:
        st = os.stat(local)
    except FileNotFoundError:
        raise SigningKeyError(f"owner {owner!r}: signing_key {path!r} does not exist (create one with "
                              f"'fragrelease keys generate --owner {owner} --out DIR')") from None
    except OSError as exc:
        raise SigningKeyError(f"owner {owner!r}: signing_key {path!r} cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise SigningKeyError(f"owner {owner!r}: signing_key {path!r} is not a regular file ({file_kind(st.st_mode)})")
    check_owner_only_mode(st.st_mode, who=f"owner {owner!r}", what="signing_key", path=path,
                          fix=f"chmod 600 {path}", error=SigningKeyError)


#: The first line of the PEM file :func:`private_key_pem` writes.
PEM_BEGIN = b"-----BEGIN PRIVATE KEY-----"


def _is_public_key_line(text: bytes) -> bool:
    try:
        return len(base64.b64decode(text, validate=True)) == PUBLIC_KEY_BYTES
    except (binascii.Error, ValueError):
        return False


def pem_problem(data: bytes) -> Optional[str]:
    """What makes ``data`` (a signing key file's bytes) plainly not an unencrypted PKCS#8 PEM, as the end of
    a sentence (``is empty (0 bytes)``), or ``None`` when it may be one (the parser decides).

    Recognized: an empty file, blanks only, an encrypted PEM, a public key (PEM, or the configuration's
    base64 line), and text without a ``-----BEGIN`` line. The key's bytes are never quoted.
    """
    text = data.strip()
    if not data:
        return "is empty (0 bytes)"
    if not text:
        return f"holds only blanks ({len(data)} bytes)"
    if b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in text:
        return "is encrypted; fragrelease reads an unencrypted PKCS#8 PEM"
    if b"-----BEGIN PUBLIC KEY-----" in text or _is_public_key_line(text):
        return "holds a public key, not the private key"
    if b"-----BEGIN " not in text:
        return f"is not a PEM file (it holds no {PEM_BEGIN.decode()} line)"
    return None


def load_private_key(path: str, *, owner: str, shared: Mapping[str, Optional[str]] = {}) -> Ed25519PrivateKey:
    """The owner's Ed25519 private key from its PKCS#8 PEM file, after :func:`check_private_key_file`.

    Raises
    ------
    SigningKeyError
        The checks of :func:`check_private_key_file`, or a file that is not an unencrypted Ed25519
        PKCS#8 PEM (empty, blanks only, encrypted, a public key, no PEM block: :func:`pem_problem`);
        one line naming the owner and the path.
    """
    check_private_key_file(path, owner=owner, shared=shared)
    # read through a non-blocking descriptor, checked again there (a FIFO swapped in never blocks)
    data = read_private_file(path, who=f"owner {owner!r}", what="signing_key", error=SigningKeyError)
    problem = pem_problem(data)
    if problem is not None:
        raise SigningKeyError(f"owner {owner!r}: signing_key {path!r} {problem}; create a key with 'fragrelease keys "
                              f"generate --owner {owner} --out DIR'")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        reason = str(exc).split(". ")[0][:120] if str(exc) else type(exc).__name__
        raise SigningKeyError(f"owner {owner!r}: signing_key {path!r} is not an unencrypted PEM private key "
                              f"({reason})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"owner {owner!r}: signing_key {path!r} holds a {type(key).__name__.lstrip('_')}, "
                              "not an Ed25519 key")
    return key


def write_key_pair(folder: str, owner: str, key: Optional[Ed25519PrivateKey] = None, *,
                   filename: Optional[str] = None) -> tuple[str, str]:
    """Write ``<folder>/<owner>.key`` (PKCS#8 PEM, 0600; the folder created 0700); return (path, public key text).

    The file is created exclusively (an existing key is never overwritten) with mode 0600 from the
    start, so no other user can open it in between. A missing ``folder`` is created 0700 with its
    missing parents (:func:`fragrelease.private_files.make_private_dir`); an existing one is left as it is.

    Raises
    ------
    SigningKeyError
        The key file exists already, or the folder or file cannot be created.
    """
    key = key if key is not None else generate_private_key()
    path = os.path.join(folder, filename or f"{owner}.key")
    try:
        if not os.path.isdir(folder):  # it and its missing parents 0700 (makedirs gives parents the umask's mode)
            make_private_dir(folder, who=f"owner {owner!r}", error=SigningKeyError)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise SigningKeyError(f"owner {owner!r}: {path!r} exists already; a key file is never overwritten "
                              "(choose another --out or remove the old key yourself)") from None
    except OSError as exc:
        raise SigningKeyError(f"owner {owner!r}: cannot create {path!r}: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(private_key_pem(key))
    return path, public_key_text(key)


def manifest_payload(fields: Mapping[str, Any]) -> bytes:
    """The canonical bytes an owner signs: the domain prefix, then ``fields`` as sorted, compact JSON.

    ``fields`` are JSON values (a manifest's ``model_dump(mode="json")`` without ``signature``);
    it must hold :data:`REQUIRED_FIELDS`. The same fields give the same bytes on every machine
    (sorted keys, ``separators=(",", ":")``, UTF-8, no NaN).

    Raises
    ------
    SignatureError
        A required field is missing or ``signature`` is among the fields.
    """
    if "signature" in fields:
        raise SignatureError("a manifest payload never includes its own signature")
    missing = [f for f in REQUIRED_FIELDS if f not in fields]
    if missing:
        raise SignatureError(f"manifest of owner {fields.get('owner')!r} lacks the signed field(s) {missing}")
    body = json.dumps(dict(fields), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return MANIFEST_DOMAIN + body.encode("utf-8")


def sign_manifest_fields(key: Ed25519PrivateKey, fields: Mapping[str, Any]) -> str:
    """The base64 Ed25519 signature of :func:`manifest_payload` (``fields``)."""
    return base64.b64encode(key.sign(manifest_payload(fields))).decode("ascii")


def verify_manifest_fields(public_key: Ed25519PublicKey, fields: Mapping[str, Any], signature: Optional[str], *,
                           owner: str) -> None:
    """Check ``signature`` over :func:`manifest_payload` (``fields``) under ``owner``'s ``public_key``.

    Raises
    ------
    SignatureError
        No signature, a signature that is not 64 base64 bytes, or one that does not verify (a
        changed field, another key); one line naming the owner.
    """
    if not signature:
        raise SignatureError(f"manifest of owner {owner!r} is not signed; the aggregator accepts only manifests "
                             "signed with the owner's configured key")
    try:
        raw = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != SIGNATURE_BYTES:
        raise SignatureError(f"manifest of owner {owner!r} carries a malformed signature (not {SIGNATURE_BYTES} "
                             "base64 bytes)")
    try:
        public_key.verify(raw, manifest_payload(fields))
    except InvalidSignature:
        raise SignatureError(f"manifest of owner {owner!r} does not verify under the public key configured for "
                             f"owner {owner!r}: it was changed after signing or signed with another key") from None


def same_public_key(a: Ed25519PublicKey, b: Ed25519PublicKey) -> bool:
    """True when both are the same Ed25519 public key (raw bytes compared)."""
    raw = (serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return a.public_bytes(*raw) == b.public_bytes(*raw)


def sorted_files(files: Iterable[Mapping[str, Any]]) -> list[dict]:
    """A table's file list in canonical form: ``{"path", "size", "sha256"}`` dicts sorted by path."""
    return sorted(({"path": str(f["path"]), "size": int(f["size"]), "sha256": str(f["sha256"])} for f in files),
                  key=lambda f: f["path"])
