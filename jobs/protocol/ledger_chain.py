"""The budget ledger's rows, read and verified: a hash chain with running totals, and this machine's anchor.

Every spend row carries, beside ``owner, dataset, plan_id, epsilon, recorded_at``:

- ``commit_version``: the Delta version whose commit holds it (the spend commits to exactly the next
  version of the one it checked, :func:`fragrelease.jobs.protocol.ledger.try_record`);
- ``total``: the owner's running total on the dataset after it, an exact Fraction as text (``"3/4"``);
- ``prev_chain``: the chain hash of the spend before it (in version order), and ``chain``: its own,
  ``SHA-256(JSON [TAG, prev_chain, commit_version, owner, dataset, plan_id, epsilon, total,
  recorded_at])`` in hex (:func:`chain_hash`; the texts as stored, JSON without spaces, UTF-8).

The first chained spend's ``prev_chain`` is :func:`base_chain` of the rows written before the chain
(by fragrelease 0.16.0 and earlier, which have none of these columns): ``GENESIS`` (64 zeros) when
there are none, else the hash of those rows' fields, sorted (so a checkpoint, which changes the
order in which their files are listed, does not change it). Migration: a 0.16.0 ledger is read as it
is; its first spend by a later version (once its checks pass) adds the columns to the table in a
commit of their own, then records the first chained row, which from then on covers the earlier rows too (a row added to them, removed or rewritten breaks the link).

:func:`read_spends` reads every row of the pinned version, recomputes the chain and the totals, and
compares the chain with this machine's anchor (:mod:`fragrelease.jobs.protocol.ledger_anchor`): the
anchored spend must be in the chain at its version with its hash. Any mismatch raises
:class:`fragrelease.errors.LedgerDamagedError` (one line naming the ledger and the version).
The chain has no key: whoever can write the ledger can recompute it over altered rows; only the
anchor, outside shared storage, makes a rollback or a rewrite of anchored history detectable
(docs/known-limitations.md, "Budget ledger scope").
"""
from __future__ import annotations

import hashlib
import json
import posixpath
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

import pyarrow as pa
import pyarrow.parquet as pq

from fragrelease.budget import format_epsilon, parse_epsilon
from fragrelease.errors import InvalidParameterError

from ..storage import absolute, is_storage_failure
from ..storage import fs_path as _fs_path
from .ledger_anchor import Anchor
from .ledger_log import LogCheck, _damaged, _first_line, _storage_error

LEGACY_COLUMNS = ("owner", "dataset", "plan_id", "epsilon", "recorded_at")
CHAIN_COLUMNS = ("commit_version", "total", "prev_chain", "chain")
LEDGER_SCHEMA = pa.schema([
    ("owner", pa.string()), ("dataset", pa.string()), ("plan_id", pa.string()),
    ("epsilon", pa.string()), ("recorded_at", pa.string()),
    ("commit_version", pa.int64()), ("total", pa.string()), ("prev_chain", pa.string()), ("chain", pa.string()),
])
TAG = "fragrelease-ledger-chain-1"
GENESIS = "0" * 64
_HASH = re.compile(r"[0-9a-f]{64}")


def chain_hash(prev: str, version: int, fields: tuple[str, str, str, str, str, str]) -> str:
    """The chain hash of a row: ``fields`` = (owner, dataset, plan_id, epsilon, total, recorded_at) as
    stored, ``prev`` the previous row's hash, ``version`` its commit version; 64 hex digits."""
    text = json.dumps([TAG, prev, version, *fields], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def base_chain(legacy: list[tuple[str, str, str, str, str]]) -> str:
    """Where the chain starts: GENESIS without rows from before the chain, else the hash of those
    rows' (owner, dataset, plan_id, epsilon, recorded_at), sorted."""
    if not legacy:
        return GENESIS
    text = json.dumps([TAG + "-legacy", sorted(list(r) for r in legacy)], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Spend:
    """One ledger row: the version that recorded it, when, whose, on what, for which plan, how much;
    for a chained row also the owner's running ``total`` on the dataset after it and its ``chain`` hash
    (None for a row written before the chain). ``version`` of an unchained row that only a checkpoint
    lists is the checkpoint's."""

    version: int
    recorded_at: str
    owner: str
    dataset: str
    plan_id: str
    epsilon: Fraction
    total: Optional[Fraction] = None
    chain: Optional[str] = None


@dataclass(frozen=True)
class Chain:
    """A verified ledger version: its spends (those before the chain first, then the chain in version
    order), the chain's head hash (``base`` when nothing is chained yet) and this machine's anchor."""

    spends: list[Spend]
    base: str
    head: str
    anchor: Optional[Anchor]

    @property
    def legacy(self) -> int:
        return sum(1 for s in self.spends if s.chain is None)

    @property
    def chained(self) -> list[Spend]:
        return [s for s in self.spends if s.chain is not None]


def _rows(path: str, fs, root: str, name: str, what: str) -> list[dict]:
    """The rows of one data file, as dicts; damage raises LedgerDamagedError."""
    try:
        with fs.open_input_file(posixpath.join(root, name)) as f:
            table = pq.read_table(f)
    except FileNotFoundError:
        raise _damaged(path, f"{what} is missing") from None
    except pa.ArrowInvalid as exc:
        raise _damaged(path, f"{what} is not readable Parquet ({_first_line(exc)})") from None
    except BaseException as exc:
        if not is_storage_failure(exc):
            raise
        raise _storage_error(path, "read", exc) from None
    absent = [c for c in LEGACY_COLUMNS if c not in table.column_names]
    if absent:
        raise _damaged(path, f"{what} has no column {absent[0]!r}")
    has = [c for c in CHAIN_COLUMNS if c in table.column_names]
    if has and len(has) < len(CHAIN_COLUMNS):
        lacks = next(c for c in CHAIN_COLUMNS if c not in has)
        raise _damaged(path, f"{what} has column {has[0]!r} but no {lacks!r}")
    return table.select([*LEGACY_COLUMNS, *has]).to_pylist()


def _spend(path: str, what: str, row: dict, version: int) -> Spend:
    for column in ("owner", "dataset", "plan_id"):
        if not isinstance(row[column], str) or not row[column]:
            raise _damaged(path, f"{what} holds a row whose {column} is {row[column]!r}")
    epsilon = row["epsilon"]
    try:
        eps = parse_epsilon(epsilon if isinstance(epsilon, str) else repr(epsilon))
    except InvalidParameterError:
        raise _damaged(path, f"{what} holds a row whose ε is {epsilon!r}, not a number > 0") from None
    if "chain" not in row:
        return Spend(version, str(row["recorded_at"]), row["owner"], row["dataset"], row["plan_id"], eps)
    for column in ("prev_chain", "chain"):
        if not isinstance(row[column], str) or not _HASH.fullmatch(row[column]):
            raise _damaged(path, f"{what} holds a row whose {column} is {row[column]!r}, not a SHA-256 hash")
    total = row["total"]
    try:
        parsed = parse_epsilon(total) if isinstance(total, str) else None
    except InvalidParameterError:
        parsed = None
    if parsed is None:
        raise _damaged(path, f"{what} holds a row whose total is {total!r}, not a number > 0")
    at = row["commit_version"]
    if not isinstance(at, int) or at < 1:
        raise _damaged(path, f"{what} holds a row whose commit_version is {at!r}")
    return Spend(at, str(row["recorded_at"]), row["owner"], row["dataset"], row["plan_id"], eps, parsed, row["chain"])


def read_chain(path: str, log_check: LogCheck) -> Chain:
    """Every row of the verified version ``log_check.version``, read from each data file it references,
    the hash chain and running totals recomputed and compared with this machine's anchor.

    Every file is read (a bad file raises, it is never skipped).

    Raises
    ------
    LedgerDamagedError
        A referenced data file is missing or not readable Parquet, lacks a ledger column, or holds a
        row with an empty owner, dataset or plan id, an ε that does not parse as a number > 0, or bad
        chain fields; a chained row lies in another version than it was recorded for, or two share a
        version; a row does not match its chain hash (rewritten), does not link to the row before it
        (a row removed, inserted or rewritten before it) or carries a total that is not the sum of
        its owner's spends on its dataset; this machine's anchored spend is not in the chain at its
        version (the ledger rolled back, its last commit removed, or rewritten). One line.
    LedgerStorageError
        A data file cannot be read (permission denied, ...).
    """
    fs, root = _fs_path(path)
    legacy: list[Spend] = []
    chained: dict[int, Spend] = {}
    texts: dict[int, tuple[str, str, str, str, str, str, str]] = {}
    legacy_fields: list[tuple[str, str, str, str, str]] = []
    for name in sorted(log_check.live, key=lambda n: (log_check.added_in.get(n, 0), n)):
        added = log_check.added_in.get(name, log_check.version)
        what = f"data file {name!r} (version {added})"
        for row in _rows(path, fs, root, name, what):
            spend = _spend(path, what, row, added)
            if spend.chain is None:
                legacy.append(spend)
                legacy_fields.append(tuple(str(row[c]) for c in LEGACY_COLUMNS))  # type: ignore[arg-type]
                continue
            from_checkpoint = log_check.checkpoint is not None and added <= log_check.checkpoint
            if spend.version > added or (spend.version != added and not from_checkpoint):
                raise _damaged(path, f"{what} holds a spend recorded at version {spend.version} (moved or copied "
                                     "from another commit)")
            if spend.version in chained:
                raise _damaged(path, f"two data files hold a spend recorded at version {spend.version}")
            chained[spend.version] = spend
            texts[spend.version] = (row["prev_chain"], row["owner"], row["dataset"], row["plan_id"], row["epsilon"],
                                    row["total"], str(row["recorded_at"]))
    base = base_chain(legacy_fields)
    totals: dict[tuple[str, str], Fraction] = {}
    for s in legacy:
        totals[s.owner, s.dataset] = totals.get((s.owner, s.dataset), Fraction(0)) + s.epsilon
    prev, prev_version = base, None
    for version in sorted(chained):
        s, (linked, *fields) = chained[version], texts[version]
        at = f"the spend at version {version} (owner {s.owner!r}, dataset {s.dataset!r}, plan {s.plan_id!r})"
        if chain_hash(linked, version, tuple(fields)) != s.chain:  # type: ignore[arg-type]
            raise _damaged(path, f"{at} does not match its chain hash (rewritten after it was recorded)")
        if linked != prev:
            before = (f"version {prev_version}'s" if prev_version is not None else
                      f"the hash of the {len(legacy)} spends written before the chain" if legacy else "the chain's start")
            raise _damaged(path, f"{at} does not link to {before} (a spend removed, inserted or rewritten before it)")
        total = totals.get((s.owner, s.dataset), Fraction(0)) + s.epsilon
        if s.total != total:
            raise _damaged(path, f"{at} carries the running total {texts[version][5]} but the spends up to it "
                                 f"add up to {format_epsilon(total)}")
        totals[s.owner, s.dataset] = total
        prev, prev_version = s.chain, version
    _compare_anchor(path, log_check, chained)
    return Chain([*legacy, *(chained[v] for v in sorted(chained))], base, prev, log_check.anchor)


def _compare_anchor(path: str, log_check: LogCheck, chained: dict[int, Spend]) -> None:
    anchor = log_check.anchor
    if anchor is None:
        return
    version = anchor.version
    if version > log_check.version:
        raise _damaged(path, f"version {version} is missing: the ledger ends at version {log_check.version} (rolled "
                             f"back, or its last commit removed), but {anchor.describe()}")
    spend = chained.get(version)
    if spend is None or spend.chain != anchor.chain:
        holds = "no spend" if spend is None else "another spend"
        raise _damaged(path, f"its version {version} holds {holds}, but {anchor.describe()} (rolled back and rewritten)")


def read_spends(path: str, log_check: LogCheck) -> list[Spend]:
    """:attr:`Chain.spends` of :func:`read_chain`: every row, verified. Errors: :func:`read_chain`."""
    return read_chain(absolute(path), log_check).spends
