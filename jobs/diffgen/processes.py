"""DistDiffGen's two parties as separate OS processes over a local socket (docs/specification.md §7).

The protocol itself (messages, :class:`~fragrelease.diffgen.two_party.Channel`,
:func:`~fragrelease.diffgen.two_party.run_party`) is Spark-free math in
:mod:`fragrelease.diffgen.two_party`. This module is the runner: it starts the hospital and the
insurer as two ``spawn`` processes, each loading only its own Adult attributes, either in memory
(``backend="pandas"``) or in its own SparkSession (``backend="spark"``,
:class:`fragrelease.jobs.diffgen.party.SparkParty`), and collects their :class:`PartyResult` views.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional, Sequence

from fragrelease.diffgen.params import ProtocolParams
from fragrelease.diffgen.two_party import (
    NOISE_MODES,
    PARTIES,
    Channel,
    PartyData,
    PartyInput,
    PartyResult,
    run_party,
)
from fragrelease.errors import InvalidParameterError, ProtocolError
from fragrelease.rng.secure import secure_token_bytes


def load_adult_party(attributes: Sequence[str], rows: Optional[tuple[int, int]] = None) -> PartyInput:
    """A party's own holdings from the built-in Adult table: ids, income class and its attributes only.

    ``rows`` = (start, stop) selects cleaned rows (30,162 training rows are (0, 30162)).
    """
    from fragrelease.schemas.datasets import load_builtin_pandas
    from fragrelease.schemas.taxonomies import ADULT_CLASS, adult_predictors

    df = load_builtin_pandas("adult")
    if rows is not None:
        df = df.iloc[rows[0]:rows[1]]
    preds = adult_predictors(attributes)
    df = df[["record_id", ADULT_CLASS, *attributes]]
    return PartyInput(name="", ids=df["record_id"].to_numpy(), classes=df[ADULT_CLASS].to_numpy(),
                      columns={a: df[a].to_numpy() for a in attributes}, predictors=preds)


@dataclass(frozen=True)
class PartyProcess:
    """What one party's OS process needs besides the shared protocol parameters.

    ``role``: hospital or insurer; ``attributes``: its own Adult attributes; ``rows``: (start, stop)
    of the cleaned rows or None; ``out_path``: where its :class:`PartyResult` is pickled;
    ``listen``: the hospital listens, the insurer connects; ``backend``: ``pandas`` or ``spark``
    (its own SparkSession on ``master``, ciphertexts through ``exchange_dir``).
    """

    role: str
    attributes: tuple[str, ...]
    out_path: str
    listen: bool
    rows: Optional[tuple[int, int]] = None
    backend: str = "pandas"
    exchange_dir: Optional[str] = None
    master: str = "local[1]"


def _party_process(spec: PartyProcess, address, authkey: bytes, protocol: ProtocolParams) -> None:
    """Entry point of one party's OS process: load only its own attributes, run the protocol, save its view.

    ``spec.backend == "spark"`` starts the party's own SparkSession (``spec.master``) in this process.

    Raises
    ------
    InvalidParameterError
        ``backend == "spark"`` without an ``exchange_dir`` (before any SparkSession starts).
    ProtocolError
        The hospital could not be reached.
    """
    import os
    import pickle
    from multiprocessing.connection import Client, Listener

    from fragrelease.rng.diffgen import SecureDiffGenRandomness
    from fragrelease.schemas.taxonomies import ADULT_CLASS_VALUES

    role, attributes, rows, backend, master = spec.role, list(spec.attributes), spec.rows, spec.backend, spec.master
    exchange_dir = spec.exchange_dir
    spark = None
    party: PartyData
    if backend == "spark":
        if exchange_dir is None:
            raise InvalidParameterError("backend 'spark' needs an exchange_dir shared by both parties, not None")
        os.environ.setdefault("FRAGRELEASE_DRIVER_MEMORY", "1g")
        from ..session import get_spark
        from .party import adult_spark_party

        spark = get_spark(f"fragrelease-{role}", master, shuffle_partitions=2)
        party = adult_spark_party(spark, role, attributes, rows, exchange_dir)
    else:
        party = load_adult_party(attributes, rows)
        party.name = role
    if spec.listen:
        with Listener(address, authkey=authkey) as lst:
            conn = lst.accept()
    else:
        for _attempt in range(600):  # the hospital may not listen yet
            try:
                conn = Client(address, authkey=authkey)
                break
            except ConnectionRefusedError:
                time.sleep(0.1)
        else:
            raise ProtocolError(f"could not reach the hospital at {address}")
    with conn:
        ch = Channel(conn)
        res = run_party(party, ch, role=role, protocol=protocol, class_values=ADULT_CLASS_VALUES,
                        randomness=SecureDiffGenRandomness())
    res.own_cut = None
    res.share = res.noisy_share = None  # the party's share and its noisy share stay in its process
    with open(spec.out_path, "wb") as f:
        pickle.dump(res, f)
    if spark is not None:
        spark.stop()


def run_adult_two_party(hospital_attributes: Sequence[str], insurer_attributes: Sequence[str],
                        protocol: ProtocolParams, *, rows: Optional[tuple[int, int]] = None,
                        work_dir: Optional[str] = None, backend: str = "pandas",
                        master: str = "local[1]") -> tuple[PartyResult, PartyResult]:
    """Run DistDiffGen on Adult with the hospital and the insurer in two OS processes (local socket).

    Each process loads only its own attributes (plus ids and class); they talk only through the
    protocol (socket messages, and with ``backend="spark"`` one ciphertext file in a shared exchange
    folder). ``protocol``: the parameters both parties agree on
    (:class:`fragrelease.diffgen.params.ProtocolParams`: ε, h, score, key size, share noise; its
    default noise is ``laplace-each``; ``gaussian-squares`` is not DP against the other party, see
    :func:`fragrelease.diffgen.two_party.run_party`). ``backend``: ``"pandas"`` (in-process numpy)
    or ``"spark"`` (each party its own SparkSession on ``master``). Returns both parties'
    :class:`PartyResult` (same cut and counts).

    Raises
    ------
    InvalidParameterError
        A bad backend or noise mode.
    ProtocolError
        An attribute given to both parties, or a party process failed (its exit code is named).
    """
    import multiprocessing as mp
    import os
    import pickle
    import socket
    import tempfile

    if backend not in ("pandas", "spark"):
        raise InvalidParameterError(f"backend must be 'pandas' or 'spark', not {backend!r}")
    if protocol.noise not in NOISE_MODES:
        raise InvalidParameterError(f"noise must be one of {NOISE_MODES}, not {protocol.noise!r}")
    overlap = set(hospital_attributes) & set(insurer_attributes)
    if overlap:
        raise ProtocolError(f"vertical split: attribute {sorted(overlap)[0]!r} given to both parties")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = ("127.0.0.1", port)
    authkey = secure_token_bytes(32)
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        outs = {r: os.path.join(tmp, f"{r}.pkl") for r in PARTIES}
        procs = {}
        for role, attrs, listen in (("hospital", hospital_attributes, True), ("insurer", insurer_attributes, False)):
            spec = PartyProcess(role=role, attributes=tuple(attrs), out_path=outs[role], listen=listen, rows=rows,
                                backend=backend, exchange_dir=tmp, master=master)
            procs[role] = ctx.Process(target=_party_process, args=(spec, address, authkey, protocol))
        procs["hospital"].start()
        procs["insurer"].start()
        while any(p.is_alive() for p in procs.values()):
            if any(p.exitcode not in (None, 0) for p in procs.values()):
                for p in procs.values():  # the peer would wait forever on the socket: stop it
                    if p.is_alive():
                        p.terminate()
            time.sleep(0.2)
        for p in procs.values():
            p.join()
        bad = {r: p.exitcode for r, p in procs.items() if p.exitcode != 0}
        if bad:
            raise ProtocolError(f"party process failed: {bad}")
        results = []
        for r in PARTIES:
            with open(outs[r], "rb") as f:
                results.append(pickle.load(f))
    return results[0], results[1]
