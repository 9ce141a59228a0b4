"""DistDiffGen's Paillier operations: the winner comparison and the secure scalar product.

Source: Mohammed et al., "Secure two-party differentially private data release for vertically
partitioned data" (TDSC 2014), as restated by Sameera K. M. et al. (IJIRST 2015) Algorithm 1; the
protocol that sends these messages is :mod:`fragrelease.diffgen.two_party` (its module text
describes the messages and the guarantees). Keys and ciphertexts travel as hexadecimal text.
The blinding factors and masks come from the OS CSPRNG (:mod:`fragrelease.rng.secure`), never from a
seeded stream.
"""
from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from fragrelease.errors import InvalidParameterError, MissingDependencyError
from fragrelease.rng.secure import secure_randbelow, secure_randbits


class Messages(Protocol):
    """The message channel the comparison talks over (:class:`fragrelease.diffgen.two_party.Channel`)."""

    def send(self, kind: str, **payload) -> None: ...

    def recv(self, kind: str) -> dict: ...


#: Statistical hiding of the additive masks (bits).
MASK_SIGMA = 40
#: Fixed-point scale of the noisy maxima compared (bits after the binary point).
CMP_FRACTION_BITS = 32
#: Smallest Paillier modulus the protocol accepts outside tests.
MIN_RELEASE_KEY_BITS = 2048


#: The one line a two-party DistDiffGen run prints when ``phe`` (setup.py's ``diffgen`` extra) is missing.
MISSING_PHE = ("DistDiffGen's two-party protocol needs phe (Paillier encryption), which is not installed: "
               "pip install 'fragrelease[diffgen]'")


def paillier_module():
    """``phe.paillier``, the Paillier implementation of the two-party protocol (setup.py's ``diffgen`` extra).

    Raises
    ------
    MissingDependencyError
        ``phe`` is not installed (:data:`MISSING_PHE`, one line naming the extra to install).
    """
    try:
        from phe import paillier
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "phe":
            raise
        raise MissingDependencyError(MISSING_PHE) from None
    return paillier


def public_key_msg(pk) -> dict:
    return {"n": format(pk.n, "x")}


def public_key(msg: dict):
    paillier = paillier_module()

    return paillier.PaillierPublicKey(int(msg["n"], 16))


def keypair(key_bits: int, allow_small_key: bool):
    paillier = paillier_module()

    if key_bits < MIN_RELEASE_KEY_BITS and not allow_small_key:
        raise InvalidParameterError(f"Paillier key must have >= {MIN_RELEASE_KEY_BITS} bits, not {key_bits}")
    return paillier.generate_paillier_keypair(n_length=key_bits)


def log_uniform_int(lo_bits: int, hi_bits: int) -> int:
    """An integer ≥ 1 whose bit length is uniform in [lo_bits, hi_bits] (OS CSPRNG)."""
    bits = lo_bits + secure_randbelow(hi_bits - lo_bits + 1)
    return (1 << (bits - 1)) | secure_randbits(bits - 1)


def fixed_point(m: float) -> int:
    if m == -math.inf:
        return -(1 << 100)  # no candidate left: below any real noisy maximum
    return int(round(m * (1 << CMP_FRACTION_BITS)))


def compare_p1(ch: Messages, sk, pk, m1: float) -> bool:
    """P1's side of the winner comparison: True when P1's noisy maximum is the larger."""
    ch.send("cmp_query", c=format(pk.encrypt(fixed_point(m1)).ciphertext(), "x"))
    reply = ch.recv("cmp_reply")
    paillier = paillier_module()

    z = sk.decrypt(paillier.EncryptedNumber(pk, int(reply["c"], 16), 0))
    return z >= 0


def compare_p2(ch: Messages, pk, m2: float) -> None:
    paillier = paillier_module()

    q = ch.recv("cmp_query")
    enc_m1 = paillier.EncryptedNumber(pk, int(q["c"], 16), 0)
    rho = log_uniform_int(2, 160)
    rho2 = secure_randbelow(rho)
    blinded = enc_m1 * rho + (rho2 - rho * fixed_point(m2))
    blinded.obfuscate()
    ch.send("cmp_reply", c=format(blinded.ciphertext(), "x"))


def slot_layout(n: int, key_bits: int, cells: int) -> tuple[int, int, int]:
    """(slot width in bits, slots per ciphertext, ciphertexts per record) for packed counts."""
    width = max(n, 1).bit_length() + MASK_SIGMA + 2
    per_ct = (key_bits - 4) // width
    if per_ct < 1:
        raise InvalidParameterError(f"Paillier key of {key_bits} bits is too small for {n} records")
    return width, per_ct, -(-cells // per_ct)


def encrypt_codes(pk, codes, width: int, per_ct: int, blocks: int) -> list[list[str]]:
    """Per record, Enc(2**(width·slot)) in the block holding its cell and Enc(0) in the others (hex ciphertexts)."""
    out = []
    for code in codes.tolist():
        blk, slot = divmod(code, per_ct)
        row = []
        for b in range(blocks):
            row.append(format(pk.encrypt((1 << (width * slot)) if b == blk else 0).ciphertext(), "x"))
        out.append(row)
    return out


def mask_sums(pk, sums: list[list[int]], width: int, per_ct: int, blocks: int, n: int
               ) -> tuple[list[list[str]], np.ndarray]:
    """O's side: add a fresh encryption of a random mask to each per-cell sum.

    Returns (masked hex ciphertexts per own cell and block, O's shares shaped (E cells, O cells)).
    """
    paillier = paillier_module()

    own_cells = len(sums)
    shares = np.zeros((per_ct * blocks, own_cells), dtype=object)
    masked = []
    mask_bits = max(n, 1).bit_length() + MASK_SIGMA
    for k in range(own_cells):
        row = []
        for b in range(blocks):
            packed_mask = 0
            for slot in range(per_ct):
                m = secure_randbits(mask_bits)
                packed_mask |= m << (width * slot)
                shares[b * per_ct + slot, k] = -m
            total = paillier.EncryptedNumber(pk, int(sums[k][b]), 0) + pk.encrypt(packed_mask)  # re-randomized
            row.append(format(total.ciphertext(), "x"))
        masked.append(row)
    return masked, shares


def unpack_shares(sk, pk, masked: list[list[str]], width: int, per_ct: int, blocks: int) -> np.ndarray:
    paillier = paillier_module()

    o_cells = len(masked)
    shares = np.zeros((per_ct * blocks, o_cells), dtype=object)
    mask = (1 << width) - 1
    for k in range(o_cells):
        for b in range(blocks):
            v = sk.decrypt(paillier.EncryptedNumber(pk, int(masked[k][b], 16), 0))
            for s in range(per_ct):
                shares[b * per_ct + s, k] = (v >> (width * s)) & mask
    return shares
