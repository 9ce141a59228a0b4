"""DistDiffGen: DiffGen between two parties holding different attributes of the same records (docs/specification.md §7).

Source: Sameera K. M. et al. (IJIRST 2015) Algorithm 1, which restates Mohammed et al. (TDSC 2014).
The two parties (here "hospital" = P1 and "insurer" = P2) share the record ids and the class; each
holds only its own predictors and runs in its own process. They exchange only the protocol messages
below over a :class:`Channel` (a local socket), which counts messages and bytes:

``hello``            public parameters: attribute names and kinds, n, a SHA-256 digest of the sorted
                     ids, ε, h, score, class values (checked to agree).
``cmp_key``          P1's Paillier public key for the winner comparisons.
``cmp_query``        Enc(M1): P1's noisy maximum (fixed point) under its key.
``cmp_reply``        Enc(ρ·(M1 − M2) + ρ'), blinded by P2 (ρ ≥ 1 log-uniform up to 2**160, 0 ≤ ρ' < ρ).
``winner``           which party won (P1 decides from the sign).
``instruction``      the winner's specialization: attribute, value, children labels, split point.
``count_key``        the encrypting party's Paillier public key for the leaf counts.
``count_cipher``     per record, Enc(packed one-hot of its own cell × class) (one or more ciphertexts).
``count_masked``     per own cell of the other party, Enc(packed counts + mask R).
``noisy_share``      X_i = C_i + Lap(2/ε) for every leaf × class (default ``laplace-each``), or, opt-in
                     ``gaussian-squares``, X_i = C_i + Y_a² − Y_b², Y ~ N(0, 1/ε).

Distributed exponential mechanism: each party draws its own candidates' Gumbel-max (the exponential
mechanism in Gumbel form, :func:`fragrelease.rng.gumbel_max`); the party with the larger noisy maximum
wins, and its local winner is the global one. This is exactly ``Pr ∝ exp(ε'·u/(2Δu))`` over both
parties' candidates. The comparison uses Paillier (``phe``) with multiplicative and additive
blinding; P1 learns the sign and a blinded value, which is **not** a formally secure comparison
(Mohammed et al. use a Yao circuit): see docs/diffgen.md, "Known limitations".

Leaf counts (secure scalar product): the party E with fewer own cells × classes encrypts, per record,
its one-hot cell vector packed into Paillier plaintext slots; the other party O adds the ciphertexts of
the records in each of its own cells (a homomorphic scalar product of indicator vectors), adds a
random mask R (40 bits of statistical hiding per slot) and returns the sums; E decrypts C_E = C + R and
O keeps C_O = −R, so C_E + C_O = C for every leaf. Each party then publishes its noisy share X_i
(:data:`NOISE_MODES`). By default (``laplace-each``) X_i = C_i + Lap(2/ε): each party's own noise
makes the counts ε/2-DP against the *other* party, who knows its own noise. The paper's construction,
``gaussian-squares`` (opt-in), publishes X_i = C_i + Y_a² − Y_b² (Y ~ N(0, 1/ε)), so that X_1 + X_2 =
C + Lap(2/ε) because Y_1² + Y_2² − Y_3² − Y_4² ~ Lap(2σ²); but the other party can subtract its own
half and sees C + Y_c² − Y_d², which is only about (ε/2, 0.22)-DP at ε = 1
(:func:`gaussian_squares_peer_delta`): not DP against the other party. :func:`share_noise_guarantee`
states both guarantees for the release's provenance.
"""
from __future__ import annotations

import hashlib
import json
import math
import secrets
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping, Optional, Protocol, Sequence

import numpy as np

from fragrelease.diffgen.engine import (
    BudgetSpend,
    Cut,
    DiffGenEngine,
    Predictor,
    epsilon_prime,
    leaf_count_scale,
    marginal_counts,
)
from fragrelease.errors import IdentifierError, InvalidParameterError, ProtocolError
from fragrelease.rng import DiffGenRandomness

#: Statistical hiding of the additive masks (bits).
MASK_SIGMA = 40
#: Fixed-point scale of the noisy maxima compared (bits after the binary point).
CMP_FRACTION_BITS = 32
#: Smallest Paillier modulus the protocol accepts outside tests.
MIN_RELEASE_KEY_BITS = 2048
PARTIES = ("hospital", "insurer")
#: How the parties perturb their count shares (:func:`run_party`); the first is the default. ``gaussian-squares``
#: is the construction of Mohammed et al. (docs/specification.md §7), opt-in only: not DP against the other party.
NOISE_MODES = ("laplace-each", "gaussian-squares")
DEFAULT_NOISE = NOISE_MODES[0]


def gaussian_squares_peer_delta(epsilon) -> float:
    """δ of the other party's view of a leaf count under ``gaussian-squares`` at privacy loss ε/2.

    The other party knows its own Y_a² − Y_b², so it sees C + Z with Z = Y_c² − Y_d², Y ~ N(0, 1/ε).
    Z = (Y_c − Y_d)(Y_c + Y_d) is a product of two independent N(0, 2/ε) variables, whose density is
    ``f(z) = ε/(2π) · K0(ε|z|/2)`` (unbounded at 0, so no finite ε gives δ = 0). One record added or
    removed changes one count by 1, and the returned value is
    ``δ = ∫ max(0, f(z) − e^{ε/2} f(z − 1)) dz``, the smallest δ for which that view is
    (ε/2, δ)-DP (numerical quadrature; about 0.222 at ε = 1, 0.152 at ε = 1/2, 0.307 at ε = 2).

    Parameters
    ----------
    epsilon : the release's total ε (> 0, finite; int, float, Fraction or str).

    Raises
    ------
    InvalidParameterError
        ε not finite or ≤ 0.

    Source: Mohammed et al., "Secure Two-Party Differentially Private Data Release for Vertically
    Partitioned Data" (TDSC 2014), Algorithm 1 line 22; docs/specification.md §7.
    """
    from scipy import integrate, special

    eps = float(Fraction(epsilon))
    if not math.isfinite(eps) or eps <= 0:
        raise InvalidParameterError(f"epsilon must be finite and > 0, not {epsilon!r}")

    def f(z: float) -> float:
        return eps / (2 * math.pi) * float(special.k0(eps * abs(z) / 2)) if z != 0 else math.inf

    def excess(z: float) -> float:
        return max(0.0, f(z) - math.exp(eps / 2) * f(z - 1))

    # f has logarithmic singularities at 0 and 1: integrate piecewise between them
    pieces = ((-math.inf, -1.0), (-1.0, 0.0), (0.0, 1.0), (1.0, math.inf))
    return float(sum(integrate.quad(excess, a, b, limit=200)[0] for a, b in pieces))


def share_noise_guarantee(noise: str, epsilon) -> dict:
    """What a two-party release guarantees against the public and against the other party (public facts only).

    Returns a JSON-ready dict: ``mode``, ``construction``, ``against_public``, ``against_other_party``,
    ``dp_against_other_party`` (bool), ``other_party_delta`` (the δ of
    :func:`gaussian_squares_peer_delta` for ``gaussian-squares``, else None) and ``assumptions``. It depends only on
    the mode and ε. Neighbours: add/remove one record. Both statements assume semi-honest parties and
    an ideal winner comparison (see docs/diffgen.md, "Known limitations").

    Raises
    ------
    InvalidParameterError
        ``noise`` not in :data:`NOISE_MODES`, or a bad ε.

    Source: docs/specification.md §7; docs/diffgen.md, "Noise on the count shares".
    """
    if noise not in NOISE_MODES:
        raise InvalidParameterError(f"noise must be one of {NOISE_MODES}, not {noise!r}")
    eps = Fraction(epsilon)
    if eps <= 0:
        raise InvalidParameterError(f"epsilon must be > 0, not {epsilon!r}")
    half = eps / 2
    assumptions = ("semi-honest parties; the winner comparison is not a formally secure comparison "
                   "(docs/diffgen.md, Known limitations)")
    public = (f"epsilon-DP (epsilon = {eps}): the selections spend at most epsilon/2 and the leaf counts "
              f"epsilon/2 = {half}")
    if noise == "laplace-each":
        return {"mode": noise,
                "construction": ("X_i = C_i + Lap(2/epsilon) from each party; "
                                 "released C + Lap(2/epsilon) + Lap(2/epsilon)"),
                "against_public": public + " (C + Lap(2/epsilon), plus the other party's independent noise)",
                "against_other_party": (f"epsilon-DP (epsilon = {eps}): a party that subtracts its own noise sees "
                                        f"C + Lap(2/epsilon), epsilon/2-DP = {half} for the leaf counts, plus the "
                                        "selections (epsilon/2)"),
                "dp_against_other_party": True, "other_party_delta": None, "assumptions": assumptions}
    delta = gaussian_squares_peer_delta(eps)
    return {"mode": noise,
            "construction": "X_i = C_i + Y_a^2 - Y_b^2, Y ~ N(0, 1/epsilon); released C + Lap(2/epsilon)",
            "against_public": public + " (X_1 + X_2 = C + Lap(2/epsilon))",
            "against_other_party": (f"NOT differentially private against the other party: it can subtract its own "
                                    f"Y_a^2 - Y_b^2 and sees C + Y_c^2 - Y_d^2 (not Laplace), which is only "
                                    f"(epsilon/2, {delta:.3f})-DP = ({half}, {delta:.3f}) for the leaf counts "
                                    f"(about (1/2, 0.22) at epsilon = 1)"),
            "dp_against_other_party": False, "other_party_delta": round(delta, 4), "assumptions": assumptions}


class Channel:
    """One end of a message channel (JSON over a ``multiprocessing.connection.Connection``-like object).

    Counts the messages and bytes it sends and receives; with ``keep_transcript`` it also keeps every
    raw message (for the test that no raw attribute values travel).
    """

    def __init__(self, conn, *, keep_transcript: bool = False) -> None:
        self.conn = conn
        self.sent_messages = 0
        self.sent_bytes = 0
        self.received_messages = 0
        self.received_bytes = 0
        self.transcript: Optional[list[bytes]] = [] if keep_transcript else None

    def send(self, kind: str, **payload) -> None:
        raw = json.dumps({"kind": kind, **payload}, separators=(",", ":")).encode("utf-8")
        self.conn.send_bytes(raw)
        self.sent_messages += 1
        self.sent_bytes += len(raw)
        if self.transcript is not None:
            self.transcript.append(raw)

    def recv(self, kind: str) -> dict:
        raw = self.conn.recv_bytes()
        self.received_messages += 1
        self.received_bytes += len(raw)
        if self.transcript is not None:
            self.transcript.append(raw)
        msg = json.loads(raw)
        if msg.get("kind") != kind:
            raise ProtocolError(f"expected a {kind!r} message, received {msg.get('kind')!r}")
        return msg

    def stats(self) -> dict:
        return {"sent_messages": self.sent_messages, "sent_bytes": self.sent_bytes,
                "received_messages": self.received_messages, "received_bytes": self.received_bytes}


class PartyData(Protocol):
    """What :func:`run_party` needs from one party's records, wherever they are held.

    Two implementations: :class:`PartyInput` (numpy arrays in this process) and
    ``fragrelease.jobs.distdiffgen_party.SparkParty`` (a DataFrame in the party's own SparkSession).
    ``prepare`` runs first and raises :class:`IdentifierError` on null or duplicated ids; ``n`` and
    ``ids_digest`` are then the record count and a digest both parties compare in ``hello``.
    ``marginal_counts`` returns attribute → value × class counts (:func:`fragrelease.diffgen.marginal_counts`);
    ``encrypt_cells`` the ``count_cipher`` payload; ``sum_cells`` one list of ``blocks`` raw
    ciphertexts per own cell. Source: Sameera K. M. et al. (IJIRST 2015) Algorithm 1; docs/specification.md §7.
    """

    @property
    def predictors(self) -> Sequence[Predictor]: ...

    @property
    def n(self) -> int: ...

    def prepare(self) -> None: ...

    def ids_digest(self) -> str: ...

    def marginal_counts(self, class_values: Sequence[str]) -> dict: ...

    def encrypt_cells(self, pk, cut: Cut, class_values: Sequence[str], width: int, per_ct: int,
                      blocks: int) -> dict: ...

    def sum_cells(self, pk, cut: Cut, payload: dict, blocks: int) -> list[list[int]]: ...


@dataclass
class PartyInput:
    """What one party holds: its records' ids, the shared class, and its own predictors' values.

    ``columns[attr]`` and ``classes`` are arrays of shape (n,) aligned with ``ids`` (any order; the
    protocol sorts by id). ``predictors`` are this party's predictors only.
    """

    name: str
    ids: np.ndarray
    classes: np.ndarray
    columns: Mapping[str, np.ndarray]
    predictors: Sequence[Predictor]


    # ---- the party-data backend used by :func:`run_party` (pandas/numpy, in this process) ----
    def prepare(self) -> None:
        ids = np.asarray(self.ids).astype(np.int64)
        if np.unique(ids).size != ids.size:
            raise IdentifierError(f"party {self.name!r} has duplicated record ids")
        order = np.argsort(ids, kind="stable")
        self._ids = ids[order]
        self._classes = np.asarray(self.classes).astype(str)[order]
        self._columns = {p.attribute: np.asarray(self.columns[p.attribute])[order] for p in self.predictors}

    @property
    def n(self) -> int:
        return int(self._ids.size)

    def ids_digest(self) -> str:
        return _ids_digest(self._ids)

    def marginal_counts(self, class_values: Sequence[str]) -> dict:
        return {p.attribute: marginal_counts(p, self._columns[p.attribute], self._classes, class_values)
                for p in self.predictors}

    def _codes(self, cut: Cut) -> np.ndarray:
        attrs = cut.attributes
        shape = tuple(cut.size(a) for a in attrs)
        return np.ravel_multi_index([cut.cell_codes(a, self._columns[a]) for a in attrs], shape).astype(np.int64)

    def encrypt_cells(self, pk, cut: Cut, class_values: Sequence[str], width: int, per_ct: int,
                      blocks: int) -> dict:
        """Payload of ``count_cipher``: per record (sorted by id), its packed one-hot cell ciphertexts."""
        cidx = {v: i for i, v in enumerate(class_values)}
        codes = self._codes(cut) * len(class_values) + np.array([cidx[v] for v in self._classes], dtype=np.int64)
        return {"rows": encrypt_codes(pk, codes, width, per_ct, blocks)}

    def sum_cells(self, pk, cut: Cut, payload: dict, blocks: int) -> list[list[int]]:
        """Per own cell, the homomorphic sum (raw ciphertext) of the received rows of its records."""
        from phe import paillier

        rows = payload.get("rows")
        if rows is None or len(rows) != self.n:
            raise ProtocolError(f"expected {self.n} encrypted rows, received {None if rows is None else len(rows)}")
        own_cells = math.prod(cut.size(a) for a in cut.attributes)
        by_cell: list[list[int]] = [[] for _ in range(own_cells)]
        for r, k in enumerate(self._codes(cut).tolist()):
            by_cell[k].append(r)
        sums = []
        for k in range(own_cells):
            row = []
            for b in range(blocks):
                total = paillier.EncryptedNumber(pk, 1, 0)  # 1 encrypts 0; the mask re-randomizes later
                for r in by_cell[k]:
                    total = total + paillier.EncryptedNumber(pk, int(rows[r][b], 16), 0)
                row.append(total.ciphertext(be_secure=False))
            sums.append(row)
        return sums


@dataclass
class PartyResult:
    """One party's view at the end: the released cut and noisy counts, the ε ledger and the cost."""

    party: str
    cut_labels: dict[str, list[str]]
    attribute_order: list[str]
    class_values: tuple[str, ...]
    noisy_counts: np.ndarray
    ledger: list[BudgetSpend]
    channel: dict
    seconds: dict = field(default_factory=dict)
    winners: list[str] = field(default_factory=list)
    own_cut: Optional[Cut] = None
    #: this party's additive share C_i of the true counts (same layout as ``noisy_counts``); never sent
    share: Optional[np.ndarray] = None
    #: this party's noisy share X_i as sent to the other party (same layout as ``noisy_counts``)
    noisy_share: Optional[np.ndarray] = None
    #: the share-noise mode that ran (:data:`NOISE_MODES`; both parties agreed on it in ``hello``)
    noise: str = DEFAULT_NOISE

    def spent(self) -> Fraction:
        return sum((s.epsilon for s in self.ledger), Fraction(0))


def _ids_digest(ids: np.ndarray) -> str:
    h = hashlib.sha256()
    for i in np.sort(np.asarray(ids).astype(np.int64)):
        h.update(int(i).to_bytes(8, "little", signed=True))
    return h.hexdigest()


def _public_key_msg(pk) -> dict:
    return {"n": format(pk.n, "x")}


def _public_key(msg: dict):
    from phe import paillier

    return paillier.PaillierPublicKey(int(msg["n"], 16))


def _keypair(key_bits: int, allow_small_key: bool):
    from phe import paillier

    if key_bits < MIN_RELEASE_KEY_BITS and not allow_small_key:
        raise InvalidParameterError(f"Paillier key must have >= {MIN_RELEASE_KEY_BITS} bits, not {key_bits}")
    return paillier.generate_paillier_keypair(n_length=key_bits)


def _log_uniform_int(lo_bits: int, hi_bits: int) -> int:
    """An integer ≥ 1 whose bit length is uniform in [lo_bits, hi_bits] (OS CSPRNG)."""
    bits = lo_bits + secrets.randbelow(hi_bits - lo_bits + 1)
    return (1 << (bits - 1)) | secrets.randbits(bits - 1)


def _fixed_point(m: float) -> int:
    if m == -math.inf:
        return -(1 << 100)  # no candidate left: below any real noisy maximum
    return int(round(m * (1 << CMP_FRACTION_BITS)))


def _compare_p1(ch: Channel, sk, pk, m1: float) -> bool:
    """P1's side of the winner comparison: True when P1's noisy maximum is the larger."""
    ch.send("cmp_query", c=format(pk.encrypt(_fixed_point(m1)).ciphertext(), "x"))
    reply = ch.recv("cmp_reply")
    from phe import paillier

    z = sk.decrypt(paillier.EncryptedNumber(pk, int(reply["c"], 16), 0))
    return z >= 0


def _compare_p2(ch: Channel, pk, m2: float) -> None:
    from phe import paillier

    q = ch.recv("cmp_query")
    enc_m1 = paillier.EncryptedNumber(pk, int(q["c"], 16), 0)
    rho = _log_uniform_int(2, 160)
    rho2 = secrets.randbelow(rho)
    blinded = enc_m1 * rho + (rho2 - rho * _fixed_point(m2))
    blinded.obfuscate()
    ch.send("cmp_reply", c=format(blinded.ciphertext(), "x"))


def _apply_instruction(labels: dict[str, list[str]], instr: dict) -> None:
    cur = labels[instr["attribute"]]
    i = cur.index(instr["node"])
    cur[i:i + 1] = list(instr["children"])


def _slot_layout(n: int, key_bits: int, cells: int) -> tuple[int, int, int]:
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


def _mask_sums(pk, sums: list[list[int]], width: int, per_ct: int, blocks: int, n: int
               ) -> tuple[list[list[str]], np.ndarray]:
    """O's side: add a fresh encryption of a random mask to each per-cell sum.

    Returns (masked hex ciphertexts per own cell and block, O's shares shaped (E cells, O cells)).
    """
    from phe import paillier

    own_cells = len(sums)
    shares = np.zeros((per_ct * blocks, own_cells), dtype=object)
    masked = []
    mask_bits = max(n, 1).bit_length() + MASK_SIGMA
    for k in range(own_cells):
        row = []
        for b in range(blocks):
            packed_mask = 0
            for slot in range(per_ct):
                m = secrets.randbits(mask_bits)
                packed_mask |= m << (width * slot)
                shares[b * per_ct + slot, k] = -m
            total = paillier.EncryptedNumber(pk, int(sums[k][b]), 0) + pk.encrypt(packed_mask)  # re-randomized
            row.append(format(total.ciphertext(), "x"))
        masked.append(row)
    return masked, shares


def _unpack(sk, pk, masked: list[list[str]], own_cells_e: int, width: int, per_ct: int, blocks: int) -> np.ndarray:
    from phe import paillier

    o_cells = len(masked)
    shares = np.zeros((per_ct * blocks, o_cells), dtype=object)
    mask = (1 << width) - 1
    for k in range(o_cells):
        for b in range(blocks):
            v = sk.decrypt(paillier.EncryptedNumber(pk, int(masked[k][b], 16), 0))
            for s in range(per_ct):
                shares[b * per_ct + s, k] = (v >> (width * s)) & mask
    return shares


def run_party(party: PartyData, ch: Channel, *, role: str, epsilon, specializations: int, score: str,
              class_values: Sequence[str], randomness: DiffGenRandomness, key_bits: int = MIN_RELEASE_KEY_BITS,
              allow_small_key: bool = False, noise: str = DEFAULT_NOISE) -> PartyResult:
    """Run one party of DistDiffGen (Sameera K. M. et al. (IJIRST 2015) Algorithm 1; docs/specification.md §7) over channel ``ch``.

    Parameters
    ----------
    party : this party's ids, classes and own predictor columns (:class:`PartyData`: a
        :class:`PartyInput` or a Spark-backed party).
    role : "hospital" (P1: holds the comparison key, decides winners) or "insurer" (P2).
    epsilon, specializations, score : as in :func:`fragrelease.diffgen.engine.specialize_cut`; must agree.
    key_bits : Paillier modulus size (≥ 2048 unless ``allow_small_key``, for tests only).
    noise : how the parties perturb their count shares (:data:`NOISE_MODES`; must agree).
        ``"laplace-each"`` (the default): ``X_i = C_i + Lap(2/ε)``; each party's own noise alone makes
        the counts ε/2-DP against the other party (and the release at least that against everyone),
        at twice the variance of the released counts. ``"gaussian-squares"`` (opt-in; Mohammed et al.
        Algorithm 1 line 22): ``X_i = C_i + Y_a² − Y_b²``, Y ~ N(0, 1/ε), so ``X_1 + X_2 = C + Lap(2/ε)``;
        but each party knows its own half, so against the *other party* the counts carry only the
        other half: not Laplace and **not DP against the other party** (about (ε/2, 0.22)-DP at ε = 1,
        :func:`gaussian_squares_peer_delta`). :func:`share_noise_guarantee` states both.

    Returns
    -------
    :class:`PartyResult`; both parties obtain the same cut labels and noisy counts, shaped
    (hospital cut sizes..., insurer cut sizes..., |classes|).

    Raises
    ------
    ProtocolError
        The parties disagree on parameters, records or attributes, or a message is out of order.
    IdentifierError
        Null or duplicated ids.
    """
    if role not in PARTIES:
        raise InvalidParameterError(f"role must be one of {PARTIES}, not {role!r}")
    if noise not in NOISE_MODES:
        raise InvalidParameterError(f"noise must be one of {NOISE_MODES}, not {noise!r}")
    t0 = time.perf_counter()
    eps = Fraction(epsilon)
    party.prepare()
    n = party.n
    own_names = [p.attribute for p in party.predictors]
    top = Cut.top(party.predictors)
    own = [{"name": p.attribute, "kind": p.kind, "root": top.labels(p.attribute)[0]} for p in party.predictors]
    hello = {"party": role, "attributes": own, "n": n, "ids": party.ids_digest(), "epsilon": str(eps),
             "h": specializations, "score": score, "classes": list(class_values), "noise": noise}
    ch.send("hello", **hello)
    other = ch.recv("hello")
    for key in ("n", "ids", "epsilon", "h", "score", "classes", "noise"):
        if other[key] != hello[key]:
            raise ProtocolError(f"the parties disagree on {key}: {hello[key]!r} here, {other[key]!r} there")
    if other["party"] == role:
        raise ProtocolError(f"both parties claim the role {role!r}")
    other_attrs = [a["name"] for a in other["attributes"]]
    clash = set(other_attrs) & set(own_names)
    if clash:
        raise ProtocolError(f"vertical split: attribute {sorted(clash)[0]!r} is held by both parties")
    n_numeric = sum(a["kind"] == "numeric" for a in own + other["attributes"])
    eps_p = epsilon_prime(eps, n_numeric, specializations)
    counts = party.marginal_counts(class_values)
    engine = DiffGenEngine(party.predictors, counts, eps_prime=eps_p, score=score, randomness=randomness)
    # the other party's cut, as public labels
    foreign: dict[str, list[str]] = {a["name"]: [a["root"]] for a in other["attributes"]}
    seconds = {"setup": time.perf_counter() - t0}

    # ---- h specializations with the distributed exponential mechanism -------------------------
    t1 = time.perf_counter()
    p1 = role == "hospital"
    sk = pk = None
    if p1:
        pk, sk = _keypair(key_bits, allow_small_key)
        ch.send("cmp_key", **_public_key_msg(pk))
    else:
        pk = _public_key(ch.recv("cmp_key"))
    winners = []
    foreign_ledger: list[BudgetSpend] = []
    for step in range(specializations):
        cand, m = engine.draw() if engine.candidates else (None, -math.inf)
        if p1:
            mine = _compare_p1(ch, sk, pk, m)
            ch.send("winner", winner="hospital" if mine else "insurer")
        else:
            _compare_p2(ch, pk, m)
            mine = ch.recv("winner")["winner"] == "insurer"
        if mine:
            if cand is None:
                raise ProtocolError("no candidate is left on either side")
            instr = engine.specialize(cand)
            ch.send("instruction", **instr)
            winners.append(role)
        else:
            instr = ch.recv("instruction")
            if instr["attribute"] not in foreign:
                raise ProtocolError(f"instruction for unknown attribute {instr['attribute']!r}")
            _apply_instruction(foreign, instr)
            if instr.get("split") is not None:
                foreign_ledger.append(BudgetSpend(f"split points of the children of {instr['node']}",
                                                  instr["attribute"], eps_p, "parallel"))
            winners.append(PARTIES[1] if p1 else PARTIES[0])
        engine.ledger.append(BudgetSpend(f"selection {step + 1}", "∪Cut", eps_p, "sequential"))
    seconds["specialization"] = time.perf_counter() - t1
    ledger = list(engine.ledger)
    for a in other["attributes"]:
        if a["kind"] == "numeric":
            ledger.append(BudgetSpend("split point of the root interval", a["name"], eps_p, "sequential"))
    ledger += foreign_ledger

    # ---- leaf counts: secure scalar product into additive shares -----------------------------
    t2 = time.perf_counter()
    own_cut = engine.cut
    own_attrs = own_cut.attributes
    own_shape = tuple(own_cut.size(a) for a in own_attrs)
    own_cells = int(np.prod(own_shape, dtype=np.int64)) if own_shape else 1
    other_cells = 1
    for a in other_attrs:
        other_cells *= len(foreign[a])
    c = len(class_values)
    i_encrypt = (own_cells * c, 0 if p1 else 1) <= (other_cells * c, 1 if p1 else 0)
    if i_encrypt:
        e_cells = own_cells * c
        kp, ks = _keypair(key_bits, allow_small_key)
        width, per_ct, blocks = _slot_layout(n, key_bits, e_cells)
        ch.send("count_key", **_public_key_msg(kp))
        payload = party.encrypt_cells(kp, own_cut, class_values, width, per_ct, blocks)
        ch.send("count_cipher", **payload)
        if payload.get("file_bytes"):  # ciphertexts exchanged as a file: count its bytes too
            ch.sent_bytes += int(payload["file_bytes"])
        masked = ch.recv("count_masked")["rows"]
        share = _unpack(ks, kp, masked, e_cells, width, per_ct, blocks)[:e_cells, :]
    else:
        kp = _public_key(ch.recv("count_key"))
        e_cells = other_cells * c
        width, per_ct, blocks = _slot_layout(n, key_bits, e_cells)
        payload = ch.recv("count_cipher")
        sums = party.sum_cells(kp, own_cut, payload, blocks)
        if payload.get("file_bytes"):
            ch.received_bytes += int(payload["file_bytes"])
        masked, share = _mask_sums(kp, sums, width, per_ct, blocks, n)
        ch.send("count_masked", rows=masked)
        share = share[:e_cells, :]
    # both shares are laid out (E attributes..., class, O attributes...)
    seconds["scalar_product"] = time.perf_counter() - t2

    # ---- noise: X_i = C_i + Lap(2/ε) (or, gaussian-squares, X_i = C_i + Y_a^2 - Y_b^2) -----------------
    t3 = time.perf_counter()
    share_f = np.asarray(share, dtype=float)
    if noise == "laplace-each":
        x_own = randomness.laplace(share_f.ravel(), leaf_count_scale(eps))
    else:
        std = math.sqrt(1 / float(eps))
        ya = randomness.gaussian(share_f.size, std)
        yb = randomness.gaussian(share_f.size, std)
        x_own = share_f.ravel() + ya ** 2 - yb ** 2
    ch.send("noisy_share", x=x_own.tolist())
    x_other = np.asarray(ch.recv("noisy_share")["x"], dtype=float)
    if x_other.size != x_own.size:
        raise ProtocolError(f"noisy shares differ in size: {x_own.size} here, {x_other.size} there")
    total = (x_own + x_other).reshape(share_f.shape)
    seconds["noise"] = time.perf_counter() - t3
    ledger.append(BudgetSpend(
        "Laplace noise on leaf counts (gaussian-squares: X1 + X2 = C + Lap(2/epsilon); "
        "NOT DP against the other party)" if noise == "gaussian-squares" else
        "Laplace noise on leaf counts (laplace-each: each party's share + Lap(2/epsilon); "
        "epsilon/2-DP against the other party too)", "leaves", eps / 2, "sequential"))

    # canonical layout: hospital attributes, insurer attributes, class
    labels = {**{a: own_cut.labels(a) for a in own_attrs}, **foreign}
    e_attrs, o_attrs = (own_attrs, other_attrs) if i_encrypt else (other_attrs, own_attrs)
    layout = list(e_attrs) + ["\x00class"] + list(o_attrs)
    layout_shape = tuple(len(labels[a]) if a in labels else c for a in layout)
    hosp_attrs, ins_attrs = (own_attrs, other_attrs) if p1 else (other_attrs, own_attrs)
    order_attrs = list(hosp_attrs) + list(ins_attrs)
    perm = [layout.index(a) for a in order_attrs + ["\x00class"]]
    arr = np.transpose(total.reshape(layout_shape), perm)
    own_share = np.transpose(np.asarray(share, dtype=object).reshape(layout_shape), perm)
    own_x = np.transpose(x_own.reshape(layout_shape), perm)
    return PartyResult(role, {a: list(labels[a]) for a in order_attrs}, order_attrs, tuple(class_values), arr, ledger,
                       ch.stats(), seconds, winners, own_cut, own_share, own_x, noise)

