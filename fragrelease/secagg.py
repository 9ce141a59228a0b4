"""Pairwise-mask secure aggregation of integer vectors, Spark-free (docs/specification.md §10).

The construction is the pairwise masking of Bonawitz et al., "Practical Secure Aggregation for
Privacy-Preserving Machine Learning", ACM CCS 2017 (§4, masking with one-time pads from pairwise key
agreement), without its dropout recovery (no secret sharing of the keys): a missing owner stops the
round. In a synthetic release each of the m owners of a plan holds an integer vector (its counts
plus its own integer noise share); the aggregator must learn only their SUM.

1. Each owner draws an X25519 key pair for the plan (:class:`KeyAgreementKey`) and publishes its
   public key; the caller must authenticate these keys (signed messages), since an unauthenticated
   key lets whoever substitutes it learn the pad of that pair.
2. Every owner binds the plan id and the full participant list with keys
   (:func:`session_context`) and derives one 32-byte key per peer (:func:`pair_keys`): HKDF-SHA256 of
   the X25519 shared secret, the same at both ends.
3. Owner i sends ``x_i + Σ_{j > i} PRG(k_ij) − Σ_{j < i} PRG(k_ij) mod 2^64`` (:func:`mask`), the PRG
   being the ChaCha20 keystream under a key derived from the pair key and a label (:func:`mask_stream`).
4. The aggregator adds all m messages mod 2^64: the pads cancel pairwise and the sum decodes as
   two's-complement int64 (:func:`unmask_sum`).

What it hides, and from whom:

- One owner's masked message is uniformly distributed on (Z/2^64)^size whatever its values, to anyone
  who lacks at least one of that owner's m−1 pair keys: one pad it cannot compute is a one-time pad
  (exactly uniform for an ideal PRG; computationally indistinguishable from uniform under X25519's
  Diffie-Hellman assumption and ChaCha20 as a PRG). So the aggregator, and any coalition that
  misses at least one other owner, learns nothing about one owner's values from its message.
- Nothing is hidden from a coalition holding all m−1 other owners' pair keys with that owner (all
  other owners colluding): it removes every pad. With m = 1 there is no pad at all. A coalition of
  the aggregator and some owners learns the sum of the remaining owners' values (that is the output).
- The sum of all m messages decodes to the sum of the values exactly, provided |sum| < 2^62 per
  element (the default ``bound`` of :func:`unmask_sum`; the module works mod 2^64).
- A label must never mask two different vectors under the same pair keys: the difference of two
  messages with the same label is the difference of the values. Keys are per plan; labels per
  measurement and round.
- Detection of masks that do not cancel (a missing message, or an owner that masked under another
  participant list): each element of a non-cancelled sum is pseudorandom, and decodes within the
  bound 2^62 with probability 1/2; ``check`` zero elements (:func:`mask` and :func:`unmask_sum`)
  each let such a sum pass with probability 2^-64.

Arithmetic: numpy uint64, which wraps mod 2^64. Randomness: the only entropy is the 32 private-key
bytes of :meth:`KeyAgreementKey.generate` (:func:`fragrelease.rng.secure.secure_bytes`, the OS
CSPRNG); the masks are deterministic PRG output. Errors: :class:`fragrelease.errors.ProtocolError`.
"""
from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Mapping, Sequence

import numpy as np
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.kdf.hkdf import HKDF, HKDFExpand

from fragrelease.errors import ProtocolError
from fragrelease.rng.secure import secure_bytes

#: The ring of the masked arithmetic: Z / 2^64 (numpy uint64 wraps).
MODULUS = 2**64
#: Default decoding bound of :func:`unmask_sum`: a decoded |sum| at or above it means the masks did not cancel.
DEFAULT_BOUND = 2**62
#: Raw X25519 key sizes, in bytes; a pair key's size.
KEY_BYTES = 32
#: Domain-separation prefixes of the HKDF info strings (bump the version when the derivation changes).
PAIR_INFO = b"fragrelease secagg v1 pair"
MASK_INFO = b"fragrelease secagg v1 mask"
CONTEXT_DOMAIN = "fragrelease secagg v1 session"
_HEX = re.compile(r"[0-9a-fA-F]{64}")
_ZERO_NONCE = bytes(16)


class KeyAgreementKey:
    """An owner's X25519 key pair for one plan (RFC 7748, through ``cryptography``).

    The private key is 32 raw bytes the owner keeps privately; the public key travels as 64 hex chars.
    """

    def __init__(self, private: X25519PrivateKey) -> None:
        self._private = private

    @classmethod
    def generate(cls) -> KeyAgreementKey:
        """A new key pair from 32 bytes of the OS CSPRNG (:func:`fragrelease.rng.secure.secure_bytes`;
        X25519 clamps the scalar itself, RFC 7748 §5)."""
        return cls(X25519PrivateKey.from_private_bytes(secure_bytes(KEY_BYTES)))

    @classmethod
    def from_private_bytes(cls, data: bytes) -> KeyAgreementKey:
        """The key pair of 32 raw private-key bytes (as :meth:`private_bytes` gives them).

        Raises ProtocolError when ``data`` is not 32 bytes (the message gives the length, never the bytes).
        """
        if not isinstance(data, (bytes, bytearray)) or len(data) != KEY_BYTES:
            size = len(data) if isinstance(data, (bytes, bytearray)) else type(data).__name__
            raise ProtocolError(f"a key-agreement private key is {KEY_BYTES} raw bytes, not {size}")
        return cls(X25519PrivateKey.from_private_bytes(bytes(data)))

    def private_bytes(self) -> bytes:
        """The 32 raw private-key bytes (secret: the owner keeps them in its private folder)."""
        return self._private.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                           serialization.NoEncryption())

    def public_hex(self) -> str:
        """The raw 32-byte public key as 64 lower-case hex characters."""
        return self._private.public_key().public_bytes(serialization.Encoding.Raw,
                                                       serialization.PublicFormat.Raw).hex()

    def exchange(self, peer_public: bytes) -> bytes:
        """The 32-byte X25519 shared secret with a peer's raw public key; ValueError on the zero secret."""
        return self._private.exchange(X25519PublicKey.from_public_bytes(peer_public))


def parse_public_hex(text: str, *, owner: str) -> bytes:
    """An owner's raw 32-byte X25519 public key from its 64 hex characters (either case).

    Raises ProtocolError naming the owner and the value as written when ``text`` is not 64 hex characters.
    """
    if not isinstance(text, str) or not _HEX.fullmatch(text):
        raise ProtocolError(f"owner {owner!r}: key-agreement public key {text!r} is not 64 hex characters")
    return bytes.fromhex(text)


def _participant_keys(participants: Mapping[str, str]) -> dict[str, bytes]:
    """Name -> raw public key, validated: non-empty string names, 64-hex keys, no key held by two names."""
    out: dict[str, bytes] = {}
    seen: dict[bytes, str] = {}
    for name in sorted(participants):
        if not isinstance(name, str) or not name:
            raise ProtocolError(f"participant name {name!r} is not a non-empty string")
        raw = parse_public_hex(participants[name], owner=name)
        if raw in seen:
            raise ProtocolError(f"owners {seen[raw]!r} and {name!r} hold the same key-agreement public key "
                                f"{participants[name]!r}")
        seen[raw] = name
        out[name] = raw
    return out


def session_context(plan_id: str, participants: Mapping[str, str]) -> bytes:
    """Canonical bytes binding a plan id and its full participant list with keys.

    ``participants``: owner name -> public key hex (:meth:`KeyAgreementKey.public_hex`) of EVERY
    participant, the caller included. The bytes are UTF-8 JSON, compact, of
    ``[CONTEXT_DOMAIN, plan_id, [[name, key hex], ...]]`` sorted by name with lower-case hex; owners that
    disagree about the plan or the list derive different pair keys, so their masks do not cancel.

    Raises ProtocolError for an empty plan id or participant list, a malformed key (naming the owner and
    the value) or a key held by two names.
    """
    if not isinstance(plan_id, str) or not plan_id:
        raise ProtocolError(f"plan id {plan_id!r} is not a non-empty string")
    if not participants:
        raise ProtocolError(f"plan {plan_id!r}: the participant list is empty")
    keys = _participant_keys(participants)
    body = [CONTEXT_DOMAIN, plan_id, [[name, raw.hex()] for name, raw in keys.items()]]
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def pair_keys(own_name: str, own: KeyAgreementKey, participants: Mapping[str, str], *,
              context: bytes) -> dict[str, bytes]:
    """The 32-byte pair key with every other participant (Bonawitz et al. 2017, §4).

    Key of the pair (own, peer): HKDF-SHA256 (RFC 5869) of the X25519 shared secret, salt None, info
    ``PAIR_INFO + context + JSON of the two names sorted``; both ends derive the same key.
    ``participants`` is the full list (name -> public hex, own included) and ``context`` its
    :func:`session_context`. Returns peer name -> key (empty for a single owner).

    Raises ProtocolError when ``own_name`` is not in ``participants``, when the list holds another key
    than ``own``'s under ``own_name`` (an owner refuses a list without its own key), when a key is
    malformed or held by two names, or when a peer's key is a low-order point (zero shared secret;
    the message names the peer).
    """
    keys = _participant_keys(participants)
    if own_name not in keys:
        raise ProtocolError(f"owner {own_name!r} is not in the participant list {sorted(keys)}")
    if keys[own_name].hex() != own.public_hex():
        raise ProtocolError(f"owner {own_name!r}: the participant list gives key-agreement public key "
                            f"{participants[own_name]!r}, not the owner's own {own.public_hex()!r}")
    out = {}
    for peer, raw in keys.items():
        if peer == own_name:
            continue
        try:
            secret = own.exchange(raw)
        except ValueError:
            raise ProtocolError(f"owner {peer!r}: key-agreement public key {participants[peer]!r} is a "
                                "low-order point (zero shared secret)") from None
        names = json.dumps(sorted([own_name, peer]), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        hkdf = HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=PAIR_INFO + context + names)
        out[peer] = hkdf.derive(secret)
    return out


def mask_stream(pair_key: bytes, label: str, size: int) -> np.ndarray:
    """``size`` pseudorandom uint64 words of one pair and label: shape (size,).

    ChaCha20 (RFC 8439) keystream under the key HKDF-Expand-SHA256(pair_key, info=MASK_INFO + label
    in UTF-8), 16-byte zero nonce/counter (each label has its own key), read as little-endian uint64.
    Raises ProtocolError for a pair key that is not 32 bytes or a negative size.
    """
    if not isinstance(pair_key, (bytes, bytearray)) or len(pair_key) != KEY_BYTES:
        raise ProtocolError(f"a pair key is {KEY_BYTES} bytes, not {len(pair_key)}")
    if size < 0:
        raise ProtocolError(f"mask size must be >= 0, not {size}")
    key = HKDFExpand(algorithm=hashes.SHA256(), length=KEY_BYTES,
                     info=MASK_INFO + label.encode("utf-8")).derive(bytes(pair_key))
    stream = Cipher(algorithms.ChaCha20(key, _ZERO_NONCE), mode=None).encryptor().update(bytes(8 * size))
    return np.frombuffer(stream, dtype="<u8").astype(np.uint64)


def mask(values: np.ndarray, *, own_name: str, keys: Mapping[str, bytes], label: str,
         check: int = 0) -> np.ndarray:
    """One owner's masked message: uint64, shape (values.size + check,).

    ``values``: integers (any shape, flattened in C order) that fit int64; ``check`` zero elements are
    appended (they must decode to 0, see :func:`unmask_sum`). Returns the values mod 2^64 plus
    :func:`mask_stream` of every peer whose name sorts after ``own_name`` minus that of every peer that
    sorts before, mod 2^64 (Bonawitz et al. 2017, §4). With no peers the values mod 2^64 unchanged.

    Raises ProtocolError when ``values`` are not integers that fit int64, ``check`` < 0, or ``keys``
    names ``own_name`` itself (the message names the owner).
    """
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu" or not np.can_cast(arr.dtype, np.int64):
        raise ProtocolError(f"owner {own_name!r}: masked values must be integers that fit int64, not {arr.dtype}")
    if check < 0:
        raise ProtocolError(f"owner {own_name!r}: check must be >= 0, not {check}")
    if own_name in keys:
        raise ProtocolError(f"owner {own_name!r}: the pair keys name the owner itself")
    out = np.concatenate([arr.astype(np.int64).ravel(order="C"), np.zeros(check, np.int64)]).view(np.uint64).copy()
    for peer in sorted(keys):
        stream = mask_stream(keys[peer], label, out.size)
        if peer > own_name:
            out += stream
        else:
            out -= stream
    return out


def unmask_sum(masked: Sequence[np.ndarray], *, bound: int = DEFAULT_BOUND, check: int = 0) -> np.ndarray:
    """The elementwise sum of every participant's masked message, decoded: int64, shape (size − check,).

    ``masked``: uint64 vectors of one shape (size,), one per participant (:func:`mask`). Sums mod 2^64 and
    reads two's-complement int64; the last ``check`` elements must decode to exactly 0 and are dropped.
    Raises ProtocolError when the list is empty, shapes or dtypes differ, any decoded |value| >= ``bound``
    (1 <= bound <= 2^63) or a check element is not 0: the masks did not cancel (a missing message, or one
    masked under another participant list). The message names an element index, never a value.
    """
    if not 1 <= bound <= 2**63:
        raise ProtocolError(f"bound must be in [1, 2^63], not {bound}")
    if not masked:
        raise ProtocolError("no masked messages to sum")
    first = np.asarray(masked[0])
    total = np.zeros(first.shape, np.uint64)
    for i, m in enumerate(masked):
        arr = np.asarray(m)
        if arr.shape != first.shape or arr.dtype != np.uint64 or arr.ndim != 1:
            raise ProtocolError(f"masked message {i} has shape {arr.shape} and dtype {arr.dtype}, "
                                f"not ({first.shape[0] if first.ndim else '?'},) uint64 like message 0")
        total += arr
    if not 0 <= check <= total.size:
        raise ProtocolError(f"check must be in [0, {total.size}], not {check}")
    far = (total >= np.uint64(bound)) & (total <= np.uint64(MODULUS - bound))
    if check:
        far[total.size - check:] = total[total.size - check:] != 0
    if far.any():
        bad = int(np.flatnonzero(far)[0])
        raise ProtocolError(f"the masked sum does not decode: element {bad} of {total.size} "
                            f"({int(far.sum())} in all) is out of range; the masks did not cancel "
                            "(a missing message, or an owner masked under another participant list)")
    return total[:total.size - check].view(np.int64).copy()


def encode_vector(v: np.ndarray) -> str:
    """A uint64 vector (shape (size,)) as standard base64 of its little-endian bytes, for a JSON message."""
    arr = np.asarray(v)
    if arr.dtype != np.uint64 or arr.ndim != 1:
        raise ProtocolError(f"only a uint64 vector is encoded, not shape {arr.shape} dtype {arr.dtype}")
    return base64.b64encode(arr.astype("<u8").tobytes()).decode("ascii")


def decode_vector(text: str, size: int, *, owner: str, what: str) -> np.ndarray:
    """The uint64 vector, shape (size,), of :func:`encode_vector`'s text.

    Raises ProtocolError naming the owner and ``what`` (the message field) when the text is not base64
    or does not hold exactly ``8 * size`` bytes.
    """
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError, TypeError):
        shown = text if len(str(text)) <= 40 else f"{str(text)[:40]}..."
        raise ProtocolError(f"owner {owner!r}: {what} {shown!r} is not base64") from None
    if len(raw) != 8 * size:
        raise ProtocolError(f"owner {owner!r}: {what} holds {len(raw)} bytes, not {8 * size} "
                            f"({size} uint64 values)")
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64)
