"""Random keys, bytes and permutations from the OS CSPRNG (:mod:`secrets`; docs/specification.md §8).

Used for a release's row order, the demo split of records to owners, surrogate ids, the cloning
anonymizer's candidate order and key material. No seeds, no numpy generator.
"""
from __future__ import annotations

import secrets

import numpy as np

from fragrelease.errors import InvalidParameterError


def secure_token_bytes(size: int) -> bytes:
    """``size`` bytes from the OS CSPRNG (:func:`secrets.token_bytes`): secret keys such as a release's pseudonym key."""
    return secrets.token_bytes(size)


def secure_random_keys(size: int) -> np.ndarray:
    """``size`` independent uniform integers in [0, 2**63) from the OS CSPRNG, as int64."""
    if size < 0:
        raise InvalidParameterError(f"size must be >= 0, not {size}")
    raw = np.frombuffer(secrets.token_bytes(8 * size), dtype=np.uint64) if size else np.empty(0, np.uint64)
    return (raw >> np.uint64(1)).astype(np.int64)


def secure_bytes(size: int) -> bytes:
    """``size`` bytes from the OS CSPRNG (:mod:`secrets`): key material (Ed25519 signing keys,
    :func:`fragrelease.signing.generate_private_key`)."""
    if size < 1:
        raise InvalidParameterError(f"size must be >= 1, not {size}")
    return secrets.token_bytes(size)


def secure_permutation(size: int) -> np.ndarray:
    """A uniformly random permutation of ``0 .. size-1`` (int64) from the OS CSPRNG.

    Sorting 63-bit keys from :func:`secure_random_keys`; ties (probability < size² / 2⁶⁴) keep index
    order. Used to order candidate tuples in the cloning anonymizer (docs/specification.md §5 step 4).
    """
    return np.argsort(secure_random_keys(size), kind="stable").astype(np.int64)


def secure_randbelow(n: int) -> int:
    """A uniform integer in [0, n) from the OS CSPRNG (:func:`secrets.randbelow`); DistDiffGen's blinding.

    Raises InvalidParameterError for ``n < 1``.
    """
    if n < 1:
        raise InvalidParameterError(f"upper bound must be >= 1, not {n}")
    return secrets.randbelow(n)


def secure_randbits(bits: int) -> int:
    """A uniform integer of ``bits`` random bits, in [0, 2**bits), from the OS CSPRNG; DistDiffGen's masks.

    Raises InvalidParameterError for ``bits < 0``.
    """
    if bits < 0:
        raise InvalidParameterError(f"bits must be >= 0, not {bits}")
    return secrets.randbits(bits) if bits else 0
