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
mechanism in Gumbel form, :func:`fragrelease.rng.diffgen.gumbel_max`); the party with the larger noisy maximum
wins, and its local winner is the global one. This is exactly ``Pr ∝ exp(ε'·u/(2Δu))`` over both
parties' candidates. The comparison uses Paillier (``phe``) with multiplicative and additive
blinding; P1 learns the sign and a blinded value, which is **not** a formally secure comparison
(Mohammed et al. use a Yao circuit): see docs/diffgen.md, "Known limitations".

Leaf counts (secure scalar product): the party E with fewer own cells × classes encrypts, per record,
its one-hot cell vector packed into Paillier plaintext slots; the other party O adds the ciphertexts of
the records in each of its own cells (a homomorphic scalar product of indicator vectors), adds a
random mask R (40 bits of statistical hiding per slot) and returns the sums; E decrypts C_E = C + R and
O keeps C_O = −R, so C_E + C_O = C for every leaf. Each party then publishes its noisy share X_i
(:data:`~fragrelease.diffgen.share_noise.NOISE_MODES`). By default (``laplace-each``) X_i = C_i + Lap(2/ε): each party's own noise
makes the counts ε/2-DP against the *other* party, who knows its own noise. The paper's construction,
``gaussian-squares`` (opt-in), publishes X_i = C_i + Y_a² − Y_b² (Y ~ N(0, 1/ε)), so that X_1 + X_2 =
C + Lap(2/ε) because Y_1² + Y_2² − Y_3² − Y_4² ~ Lap(2σ²); but the other party can subtract its own
half and sees C + Y_c² − Y_d², which is only about (ε/2, 0.22)-DP at ε = 1
(:func:`~fragrelease.diffgen.share_noise.gaussian_squares_peer_delta`): not DP against the other party.
:func:`~fragrelease.diffgen.share_noise.share_noise_guarantee`
states both guarantees for the release's provenance.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Mapping, Optional, Protocol, Sequence, Union

import numpy as np

from fragrelease.diffgen.engine import BudgetSpend, Cut, DiffGenEngine, SplitChooser, epsilon_prime
from fragrelease.diffgen.paillier_ops import (
    compare_p1,
    compare_p2,
    encrypt_codes,
    keypair,
    mask_sums,
    paillier_module,
    public_key,
    public_key_msg,
    slot_layout,
    unpack_shares,
)
from fragrelease.diffgen.params import ProtocolParams
from fragrelease.diffgen.predictors import AttributeCounts, Predictor, marginal_counts
from fragrelease.diffgen.release import leaf_count_scale
from fragrelease.diffgen.share_noise import DEFAULT_NOISE, NOISE_MODES
from fragrelease.errors import IdentifierError, InvalidParameterError, ProtocolError
from fragrelease.rng.diffgen import DiffGenRandomness

PARTIES = ("hospital", "insurer")


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
    ``fragrelease.jobs.diffgen.party.SparkParty`` (a DataFrame in the party's own SparkSession).
    ``prepare`` runs first and raises :class:`IdentifierError` on null or duplicated ids; ``n`` and
    ``ids_digest`` are then the record count and a digest both parties compare in ``hello``.
    ``marginal_counts`` returns attribute → value × class counts (:func:`fragrelease.diffgen.predictors.marginal_counts`);
    ``encrypt_cells`` the ``count_cipher`` payload; ``sum_cells`` one list of ``blocks`` raw
    ciphertexts per own cell. Source: Sameera K. M. et al. (IJIRST 2015) Algorithm 1; docs/specification.md §7.
    """

    @property
    def predictors(self) -> Sequence[Predictor]: ...

    @property
    def n(self) -> int: ...

    def prepare(self) -> None: ...

    def ids_digest(self) -> str: ...

    def marginal_counts(self, class_values: Sequence[str]) -> Mapping[str, Union[AttributeCounts, SplitChooser]]: ...

    def encrypt_cells(self, pk, cut: Cut, class_values: Sequence[str], width: int, per_ct: int,
                      blocks: int) -> Mapping[str, Any]: ...

    def sum_cells(self, pk, cut: Cut, payload: Mapping[str, Any], blocks: int) -> list[list[int]]: ...


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

    def marginal_counts(self, class_values: Sequence[str]) -> Mapping[str, Union[AttributeCounts, SplitChooser]]:
        return {p.attribute: marginal_counts(p, self._columns[p.attribute], self._classes, class_values)
                for p in self.predictors}

    def _codes(self, cut: Cut) -> np.ndarray:
        attrs = cut.attributes
        shape = tuple(cut.size(a) for a in attrs)
        return np.ravel_multi_index([cut.cell_codes(a, self._columns[a]) for a in attrs], shape).astype(np.int64)

    def encrypt_cells(self, pk, cut: Cut, class_values: Sequence[str], width: int, per_ct: int,
                      blocks: int) -> Mapping[str, Any]:
        """Payload of ``count_cipher``: per record (sorted by id), its packed one-hot cell ciphertexts."""
        cidx = {v: i for i, v in enumerate(class_values)}
        codes = self._codes(cut) * len(class_values) + np.array([cidx[v] for v in self._classes], dtype=np.int64)
        return {"rows": encrypt_codes(pk, codes, width, per_ct, blocks)}

    def sum_cells(self, pk, cut: Cut, payload: Mapping[str, Any], blocks: int) -> list[list[int]]:
        """Per own cell, the homomorphic sum (raw ciphertext) of the received rows of its records."""
        paillier = paillier_module()

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


def _apply_instruction(labels: dict[str, list[str]], instr: dict) -> None:
    cur = labels[instr["attribute"]]
    i = cur.index(instr["node"])
    cur[i:i + 1] = list(instr["children"])


def run_party(party: PartyData, ch: Channel, *, role: str, protocol: ProtocolParams, class_values: Sequence[str],
              randomness: DiffGenRandomness) -> PartyResult:
    """Run one party of DistDiffGen (Sameera K. M. et al. (IJIRST 2015) Algorithm 1; docs/specification.md §7) over channel ``ch``.

    Parameters
    ----------
    party : this party's ids, classes and own predictor columns (:class:`PartyData`: a
        :class:`PartyInput` or a Spark-backed party).
    role : "hospital" (P1: holds the comparison key, decides winners) or "insurer" (P2).
    protocol : the parameters both parties must agree on (:class:`~fragrelease.diffgen.params.ProtocolParams`):
    protocol.epsilon, .specializations, .score : as in :func:`fragrelease.diffgen.engine.specialize_cut`.
    protocol.key_bits : Paillier modulus size (≥ 2048 unless ``protocol.allow_small_key``, for tests only).
    protocol.noise : how the parties perturb their count shares (:data:`NOISE_MODES`; must agree).
        ``"laplace-each"`` (the default): ``X_i = C_i + Lap(2/ε)``; each party's own noise alone makes
        the counts ε/2-DP against the other party (and the release at least that against everyone),
        at twice the variance of the released counts. ``"gaussian-squares"`` (opt-in; Mohammed et al.
        Algorithm 1 line 22): ``X_i = C_i + Y_a² − Y_b²``, Y ~ N(0, 1/ε), so ``X_1 + X_2 = C + Lap(2/ε)``;
        but each party knows its own half, so against the *other party* the counts carry only the
        other half: not Laplace and **not DP against the other party** (about (ε/2, 0.22)-DP at ε = 1,
        :func:`~fragrelease.diffgen.share_noise.gaussian_squares_peer_delta`).
        :func:`~fragrelease.diffgen.share_noise.share_noise_guarantee` states both.

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
    epsilon, specializations, score, noise = protocol.epsilon, protocol.specializations, protocol.score, protocol.noise
    key_bits, allow_small_key = protocol.key_bits, protocol.allow_small_key
    if role not in PARTIES:
        raise InvalidParameterError(f"role must be one of {PARTIES}, not {role!r}")
    if noise not in NOISE_MODES:
        raise InvalidParameterError(f"noise must be one of {NOISE_MODES}, not {noise!r}")
    t0 = time.perf_counter()
    session = _handshake(party, ch, role=role, eps=Fraction(epsilon), specializations=specializations, score=score,
                         class_values=class_values, noise=noise, randomness=randomness)
    seconds = {"setup": time.perf_counter() - t0}
    t1 = time.perf_counter()
    winners, ledger = _specialize(session, ch, specializations=specializations, key_bits=key_bits,
                                  allow_small_key=allow_small_key)
    seconds["specialization"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    share, i_encrypt = _count_shares(session, party, ch, class_values=class_values, key_bits=key_bits,
                                     allow_small_key=allow_small_key)
    seconds["scalar_product"] = time.perf_counter() - t2
    t3 = time.perf_counter()
    x_own, total = _noisy_shares(share, ch, eps=session.eps, noise=noise, randomness=randomness)
    seconds["noise"] = time.perf_counter() - t3
    ledger.append(BudgetSpend(
        "Laplace noise on leaf counts (gaussian-squares: X1 + X2 = C + Lap(2/epsilon); "
        "NOT DP against the other party)" if noise == "gaussian-squares" else
        "Laplace noise on leaf counts (laplace-each: each party's share + Lap(2/epsilon); "
        "epsilon/2-DP against the other party too)", "leaves", session.eps / 2, "sequential"))
    labels, order_attrs, arr, own_share, own_x = _canonical_layout(session, share, x_own, total, i_encrypt,
                                                                   len(class_values))
    return PartyResult(role, labels, order_attrs, tuple(class_values), arr, ledger, ch.stats(), seconds, winners,
                       session.engine.cut, own_share, own_x, noise)


@dataclass
class _Session:
    """What the handshake settles: the agreed parameters, this party's engine and the other's public cut."""

    role: str
    n: int
    eps: Fraction
    eps_p: Fraction
    engine: DiffGenEngine
    other_attributes: list[dict]  # the other party's public attribute names, kinds and roots
    foreign: dict[str, list[str]]  # the other party's cut, as public labels

    @property
    def p1(self) -> bool:
        return self.role == "hospital"

    @property
    def other_attrs(self) -> list[str]:
        return [a["name"] for a in self.other_attributes]


def _handshake(party: PartyData, ch: Channel, *, role: str, eps: Fraction, specializations: int, score: str,
               class_values: Sequence[str], noise: str, randomness: DiffGenRandomness) -> _Session:
    """Phase 1 (``hello``): exchange and check the public parameters; build this party's engine."""
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
    clash = {a["name"] for a in other["attributes"]} & set(own_names)
    if clash:
        raise ProtocolError(f"vertical split: attribute {sorted(clash)[0]!r} is held by both parties")
    n_numeric = sum(a["kind"] == "numeric" for a in own + other["attributes"])
    eps_p = epsilon_prime(eps, n_numeric, specializations)
    counts = party.marginal_counts(class_values)
    engine = DiffGenEngine(party.predictors, counts, eps_prime=eps_p, score=score, randomness=randomness)
    foreign = {a["name"]: [a["root"]] for a in other["attributes"]}
    return _Session(role, n, eps, eps_p, engine, list(other["attributes"]), foreign)


def _specialize(s: _Session, ch: Channel, *, specializations: int, key_bits: int, allow_small_key: bool
                ) -> tuple[list[str], list[BudgetSpend]]:
    """Phase 2: h specializations with the distributed exponential mechanism; (winners, ε ledger)."""
    engine, eps_p = s.engine, s.eps_p
    sk = None
    if s.p1:
        pk, sk = keypair(key_bits, allow_small_key)
        ch.send("cmp_key", **public_key_msg(pk))
    else:
        pk = public_key(ch.recv("cmp_key"))
    winners = []
    foreign_ledger: list[BudgetSpend] = []
    for step in range(specializations):
        cand, m = engine.draw() if engine.candidates else (None, -math.inf)
        if s.p1:
            mine = compare_p1(ch, sk, pk, m)
            ch.send("winner", winner="hospital" if mine else "insurer")
        else:
            compare_p2(ch, pk, m)
            mine = ch.recv("winner")["winner"] == "insurer"
        if mine:
            if cand is None:
                raise ProtocolError("no candidate is left on either side")
            instr = engine.specialize(cand)
            ch.send("instruction", **instr)
            winners.append(s.role)
        else:
            instr = ch.recv("instruction")
            if instr["attribute"] not in s.foreign:
                raise ProtocolError(f"instruction for unknown attribute {instr['attribute']!r}")
            _apply_instruction(s.foreign, instr)
            if instr.get("split") is not None:
                foreign_ledger.append(BudgetSpend(f"split points of the children of {instr['node']}",
                                                  instr["attribute"], eps_p, "parallel"))
            winners.append(PARTIES[1] if s.p1 else PARTIES[0])
        engine.ledger.append(BudgetSpend(f"selection {step + 1}", "∪Cut", eps_p, "sequential"))
    ledger = list(engine.ledger)
    for a in s.other_attributes:
        if a["kind"] == "numeric":
            ledger.append(BudgetSpend("split point of the root interval", a["name"], eps_p, "sequential"))
    return winners, ledger + foreign_ledger


def _count_shares(s: _Session, party: PartyData, ch: Channel, *, class_values: Sequence[str], key_bits: int,
                  allow_small_key: bool) -> tuple[np.ndarray, bool]:
    """Phase 3: leaf counts by the secure scalar product into additive shares.

    Returns (this party's share, shaped (E cells × classes, O cells), whether this party encrypted);
    both shares are laid out (E attributes..., class, O attributes...).
    """
    own_cut = s.engine.cut
    own_shape = tuple(own_cut.size(a) for a in own_cut.attributes)
    own_cells = int(np.prod(own_shape, dtype=np.int64)) if own_shape else 1
    other_cells = 1
    for a in s.other_attrs:
        other_cells *= len(s.foreign[a])
    c = len(class_values)
    i_encrypt = (own_cells * c, 0 if s.p1 else 1) <= (other_cells * c, 1 if s.p1 else 0)
    if i_encrypt:
        e_cells = own_cells * c
        kp, ks = keypair(key_bits, allow_small_key)
        width, per_ct, blocks = slot_layout(s.n, key_bits, e_cells)
        ch.send("count_key", **public_key_msg(kp))
        payload = party.encrypt_cells(kp, own_cut, class_values, width, per_ct, blocks)
        ch.send("count_cipher", **payload)
        if payload.get("file_bytes"):  # ciphertexts exchanged as a file: count its bytes too
            ch.sent_bytes += int(payload["file_bytes"])
        masked = ch.recv("count_masked")["rows"]
        return unpack_shares(ks, kp, masked, width, per_ct, blocks)[:e_cells, :], True
    kp = public_key(ch.recv("count_key"))
    e_cells = other_cells * c
    width, per_ct, blocks = slot_layout(s.n, key_bits, e_cells)
    payload = ch.recv("count_cipher")
    sums = party.sum_cells(kp, own_cut, payload, blocks)
    if payload.get("file_bytes"):
        ch.received_bytes += int(payload["file_bytes"])
    masked, share = mask_sums(kp, sums, width, per_ct, blocks, s.n)
    ch.send("count_masked", rows=masked)
    return share[:e_cells, :], False


def _noisy_shares(share: np.ndarray, ch: Channel, *, eps: Fraction, noise: str, randomness: DiffGenRandomness
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Phase 4: X_i = C_i + Lap(2/ε) (or, gaussian-squares, X_i = C_i + Y_a² − Y_b²), exchanged.

    Returns (this party's noisy share, flat; X_1 + X_2 shaped as ``share``).
    """
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
    return x_own, (x_own + x_other).reshape(share_f.shape)


def _canonical_layout(s: _Session, share: np.ndarray, x_own: np.ndarray, total: np.ndarray, i_encrypt: bool,
                      n_classes: int):
    """Phase 5: every array in the canonical layout (hospital attributes, insurer attributes, class).

    Returns (labels per attribute, attribute order, noisy counts, this party's share, its noisy share).
    """
    own_cut = s.engine.cut
    own_attrs, other_attrs = own_cut.attributes, s.other_attrs
    labels = {**{a: own_cut.labels(a) for a in own_attrs}, **s.foreign}
    e_attrs, o_attrs = (own_attrs, other_attrs) if i_encrypt else (other_attrs, own_attrs)
    layout = list(e_attrs) + ["\x00class"] + list(o_attrs)
    layout_shape = tuple(len(labels[a]) if a in labels else n_classes for a in layout)
    hosp_attrs, ins_attrs = (own_attrs, other_attrs) if s.p1 else (other_attrs, own_attrs)
    order_attrs = list(hosp_attrs) + list(ins_attrs)
    perm = [layout.index(a) for a in order_attrs + ["\x00class"]]
    arr = np.transpose(total.reshape(layout_shape), perm)
    own_share = np.transpose(np.asarray(share, dtype=object).reshape(layout_shape), perm)
    own_x = np.transpose(x_own.reshape(layout_shape), perm)
    return {a: list(labels[a]) for a in order_attrs}, order_attrs, arr, own_share, own_x
