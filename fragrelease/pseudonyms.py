"""Keyed pseudonyms for record ids: HMAC-SHA-256 under a key the data owners share (Spark-free).

Why: a protected fragment that carries raw record ids shows its reader which identified records
share a cluster, so no ε bound holds against the aggregator (docs/privacy.md, "Against the
aggregator"). Owners therefore replace each record id by

    pseudonym = hex(HMAC-SHA-256(key, message))

where ``message`` is the id's canonical text (:func:`canonical_id_text`, UTF-8), prefixed by a
context and a NUL byte when a context is given (``context + "\\x00" + id text``). A release's
fragments use the release context (:func:`release_context`): the plan id, which the aggregator
chooses, with every owner's nonce, drawn fresh from the CSPRNG in its metadata step and checked by
the owner in the plan, so the same record gets a different pseudonym in every release even under
one key and even when an aggregator reuses a plan id; the metadata step uses the context
``"metadata"``. HMAC is a
pseudorandom function under the key (RFC 2104; Bellare, "New Proofs for NMAC and HMAC", CRYPTO
2006): without the key the pseudonyms of a fragment are indistinguishable from random labels, and
a guessed id cannot be tested against them. Every owner of a release uses the same key, so the
aggregator can join vertical fragments and detect a record held by two horizontal owners; the
aggregator never holds the key. Sources: RFC 2104 (HMAC), RFC 4231 (HMAC-SHA-256 test vectors).

The secret comes from a file (the owner's alone: mode 0600) or an environment variable named in
the owner's configuration (:class:`fragrelease.protocol.config.PseudonymKeyConfig`), or from a file
fragrelease generated (32 CSPRNG bytes); it must hold at least :data:`MIN_KEY_BYTES` bytes, and the
HMAC key is derived from it with HKDF-SHA-256 (:func:`derive_key`, RFC 5869). :func:`key_check` is a
public fingerprint of the key (an HMAC of a fixed label), so the aggregator can tell whether two
owners use the same key without learning it. Anyone can test a guessed secret against a published
key check offline, so a secret must be random (``openssl rand -hex 32``), never a passphrase.
"""
from __future__ import annotations

import os
from typing import Iterable, Optional

from cryptography.hazmat.primitives import hashes, hmac

from fragrelease.errors import PseudonymKeyError

#: Shortest key accepted, in bytes (the output size of SHA-256; RFC 2104 §3 recommends at least L bytes).
MIN_KEY_BYTES = 32
#: Bytes of fresh key material a generated key holds (hex-encoded in its file: 64 characters).
GENERATED_KEY_BYTES = 32
#: The context of the pseudonyms an owner's metadata step digests (vertical id-set check).
METADATA_CONTEXT = "metadata"
_KEY_CHECK_LABEL = b"fragrelease pseudonym key check v1"


#: Bytes of a metadata-round nonce (hex in the metadata and the plan: 64 characters).
NONCE_BYTES = 32


def new_nonce() -> str:
    """A fresh nonce for one owner's metadata round: :data:`NONCE_BYTES` bytes from the OS CSPRNG
    (:func:`fragrelease.rng.secure.secure_token_bytes`), hex."""
    from fragrelease.rng.secure import secure_token_bytes

    return secure_token_bytes(NONCE_BYTES).hex()


def release_context(plan_id: str, nonces: Iterable[Optional[str]] = ()) -> str:
    """The pseudonym context of a release's fragments: ``plan_id`` followed by the owners' nonces,
    sorted (``plan_id|n1|n2``), or the plan id alone when no owner sent one (metadata of an older fragrelease).

    No single party chooses it: the aggregator picks the plan id, each owner its nonce, so one
    owner's fresh nonce makes the context fresh even when the plan id is reused. Sorted: every
    owner computes the same context from the plan, whatever the order of its owners.
    """
    drawn = sorted(n for n in nonces if n)
    return "|".join([plan_id, *drawn])


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    """HMAC-SHA-256 (RFC 2104) of ``message`` under ``key``, 32 bytes, with the ``cryptography`` package."""
    mac = hmac.HMAC(key, hashes.SHA256())
    mac.update(message)
    return mac.finalize()


def canonical_id_text(record_id: object) -> str:
    """The text a record id is keyed as: integers in decimal, text as is.

    Spark computes the same text with ``cast(id as string)`` (decimal for integral types), so an id
    held as ``long`` by one vertical owner and as the string ``"42"`` by another gets one pseudonym.

    Raises
    ------
    PseudonymKeyError
        A null id (validation refuses those first) or a boolean.
    """
    if record_id is None or isinstance(record_id, bool):
        raise PseudonymKeyError(f"record id {record_id!r} has no canonical text")
    if isinstance(record_id, int):
        return str(int(record_id))
    return str(record_id)


def _message(record_id: object, context: str) -> bytes:
    text = canonical_id_text(record_id)
    return (f"{context}\x00{text}" if context else text).encode("utf-8")


def check_key(key: bytes, *, owner: str = "?", where: str = "the key") -> bytes:
    """``key`` if it holds at least :data:`MIN_KEY_BYTES` bytes.

    Raises
    ------
    PseudonymKeyError
        A shorter key; the message names the owner, where the key came from and its length (never the key).
    """
    if len(key) < MIN_KEY_BYTES:
        raise PseudonymKeyError(f"owner {owner!r}: pseudonym key from {where} is {len(key)} bytes; "
                                f"at least {MIN_KEY_BYTES} are required")
    return key


def pseudonym(key: bytes, record_id: object, *, context: str = "") -> str:
    """The pseudonym of one record id: 64 lowercase hex characters (HMAC-SHA-256, see the module docstring).

    Raises
    ------
    PseudonymKeyError
        A key shorter than :data:`MIN_KEY_BYTES`, or an id without canonical text.
    """
    check_key(key)
    return hmac_sha256(key, _message(record_id, context)).hex()


def pseudonyms(key: bytes, record_ids: Iterable[object], *, context: str = "") -> list[str]:
    """:func:`pseudonym` of each id, in order (the batch the Spark UDF computes per Arrow batch)."""
    check_key(key)
    base = hmac.HMAC(key, hashes.SHA256())
    out = []
    for rid in record_ids:
        mac = base.copy()
        mac.update(_message(rid, context))
        out.append(mac.finalize().hex())
    return out


def key_check(key: bytes) -> str:
    """A public fingerprint of ``key`` (hex HMAC of a fixed label): equal keys give equal checks.

    Owners publish it in their metadata so the aggregator refuses owners whose keys differ (their
    pseudonyms would neither join nor reveal shared records). It reveals nothing else about the key
    (HMAC is a PRF), but it does show which releases used the same key.
    """
    return hmac_sha256(check_key(key), _KEY_CHECK_LABEL).hex()


#: HKDF-SHA-256 salt and info (RFC 5869) of :func:`derive_key`: fixed project strings, so one secret
#: gives one key in every release and on every owner's machine.
KEY_DERIVATION_SALT = b"fragrelease pseudonym key salt v1"
KEY_DERIVATION_INFO = b"fragrelease pseudonym key v1"
#: Bytes of the key :func:`derive_key` returns (SHA-256's output size).
DERIVED_KEY_BYTES = 32


def derive_key(secret: bytes, *, owner: str = "?", where: str = "the key") -> bytes:
    """The HMAC key derived from a configured or generated secret: HKDF-SHA-256 (RFC 5869, ``cryptography``).

    ``HKDF(SHA-256, length=32, salt=KEY_DERIVATION_SALT, info=KEY_DERIVATION_INFO)(secret)``: the
    secret is never used as the HMAC key itself, and the published :func:`key_check` is a function
    of the derived key only. HKDF is not a slow hash: it does **not** make a guessable secret safe
    against offline guessing through the public key check, so a secret must be random
    (``openssl rand -hex 32``), never a passphrase (docs/privacy.md, "Pseudonym keys").

    Raises
    ------
    PseudonymKeyError
        A secret shorter than :data:`MIN_KEY_BYTES` (:func:`check_key`; names the owner and where).
    """
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    check_key(secret, owner=owner, where=where)
    return HKDF(algorithm=hashes.SHA256(), length=DERIVED_KEY_BYTES, salt=KEY_DERIVATION_SALT,
                info=KEY_DERIVATION_INFO).derive(secret)


def read_key_file(path: str, *, owner: str) -> bytes:
    """The key derived (:func:`derive_key`) from the secret held in a file: its bytes, without one
    trailing line break. The file must be the owner's alone (mode ``0600`` or stricter), as a
    signing key must (:func:`fragrelease.private_files.check_owner_only_mode`).

    Raises
    ------
    PseudonymKeyError
        The file cannot be read (naming the owner, the path and the OS error), is not a regular
        file (a FIFO, a socket, a device or a folder: refused without waiting on it), is readable or
        writable by group or others (:func:`fragrelease.private_files.read_private_file`), is empty,
        holds only blanks or a PEM key (a signing key's file), or the secret is short.
    """
    from fragrelease.private_files import read_private_file

    # never blocks: a FIFO or device named as the key file is refused, not waited on
    raw = read_private_file(path, who=f"owner {owner!r}", what="pseudonym key file", error=PseudonymKeyError)
    problem = _secret_file_problem(raw)
    if problem is not None:
        raise PseudonymKeyError(f"owner {owner!r}: pseudonym key file {path!r} {problem}; write a random secret: "
                                f"openssl rand -hex 32 > {path} && chmod 600 {path}")
    key = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1] if raw.endswith(b"\n") else raw
    return derive_key(key, owner=owner, where=f"file {path!r}")


def _secret_file_problem(raw: bytes) -> Optional[str]:
    """Why a pseudonym key file's bytes are plainly no secret (the end of a sentence), or ``None``.

    Empty, blanks only, or a PEM block (a signing key's file named by mistake: the owners share the
    pseudonym secret, never a signing key). The bytes are never quoted."""
    if not raw:
        return "is empty (0 bytes)"
    if not raw.strip():
        return f"holds only blanks ({len(raw)} bytes)"
    if raw.lstrip().startswith(b"-----BEGIN "):
        return ("holds a PEM key (a signing key?), not a pseudonym secret; the owners share the pseudonym secret, "
                "never a signing key")
    return None


def read_key_env(variable: str, *, owner: str, environ: Optional[dict] = None) -> bytes:
    """The key derived (:func:`derive_key`) from the secret held in environment variable ``variable``
    (its UTF-8 bytes).

    Raises
    ------
    PseudonymKeyError
        The variable is unset, empty or blanks only, or the secret is short.
    """
    env = os.environ if environ is None else environ
    value = env.get(variable)
    if value is None:
        raise PseudonymKeyError(f"owner {owner!r}: pseudonym key environment variable {variable!r} is not set")
    if not value.strip():
        raise PseudonymKeyError(f"owner {owner!r}: pseudonym key environment variable {variable!r} is "
                                f"{'empty' if not value else 'blanks only'}; set it to a random secret "
                                "(openssl rand -hex 32)")
    return derive_key(value.encode("utf-8"), owner=owner, where=f"environment variable {variable!r}")


def new_key_text() -> bytes:
    """A fresh key for one release: :data:`GENERATED_KEY_BYTES` bytes from the OS CSPRNG, hex-encoded
    (what a generated key file holds; :func:`fragrelease.rng.secure.secure_token_bytes`)."""
    from fragrelease.rng.secure import secure_token_bytes

    return secure_token_bytes(GENERATED_KEY_BYTES).hex().encode("ascii")


def write_key_file(path: str, key: bytes, *, exclusive: bool = False, owner: str = "?") -> bool:
    """Write ``key`` to ``path`` with mode 0600; its missing folders are created 0700, an existing
    folder is never chmod-ed and is refused if open to group or others
    (:func:`fragrelease.private_files.make_private_dir`).

    The key is written to a temporary file in the same folder first, then moved over ``path``
    (``os.replace``), or, with ``exclusive``, linked to ``path`` only if no file is there yet
    (atomic ``link(2)``); returns False when one was (another party of the same machine created
    it first, whose key is then the one to use).

    Raises
    ------
    PseudonymKeyError
        The folder is open to group or others or cannot be created (names ``owner`` and the folder).
    """
    from fragrelease.private_files import make_private_dir

    folder = os.path.dirname(os.path.abspath(path))
    make_private_dir(folder, who=f"owner {owner!r}", error=PseudonymKeyError)
    tmp = f"{path}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        os.fchmod(fh.fileno(), 0o600)
        fh.write(key)
    if not exclusive:
        os.replace(tmp, path)
        return True
    try:  # link(2) fails if path exists: a reader never sees a half-written key
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)
    return True


#: Name of the pseudonym column in owners' protected fragments, their pseudonym-set tables and,
#: with ``keep_id: true``, the release.
PSEUDONYM_COLUMN = "pseudonym"
