"""The privacy-budget ledger: a Delta table per data owner recording every spend on each dataset.

Releases of the same records compose sequentially, so an owner declares a lifetime budget per
dataset and every release's ε_j is recorded **before** any noise is drawn (never under-counted; a
crashed attempt resumes on its recorded spend, :mod:`.draws`); a spend past the lifetime is refused.

Concurrency: the check and the record are one optimistic transaction, on the first spend too.

1. A missing ledger is first created **empty** (``DeltaTable.create(mode="ignore")`` without commit
   retries): of several releases creating it at once, one commits version 0 and the others find the
   table; no create path ever records a spend.
2. The spend is then checked against one pinned table version and appended to exactly that version
   with ``max_commit_retries=0``: delta-rs commits it as the next version or refuses it when another
   release committed in the meantime; the check then runs again against the new version. Two
   concurrent releases therefore cannot both pass a check that only one of them fits in.

The spend's data file is written by this module under a fresh name and removed again when its commit
is refused, so the ledger folder holds only the files of its committed rows (a catalog ledger is
registered over exactly those files, :func:`fragrelease.jobs.storage.register`).

Storage failures (disk full, read-only folder, permission denied, a file where the ledger folder must
be) raise :class:`fragrelease.errors.LedgerStorageError` naming the ledger and the OS cause, with
nothing spent; only a real commit conflict (the table moved past the pinned version) is retried.

Fail closed: a damaged ledger would forget spends, so every read verifies the ledger itself rather
than trusting delta-rs (which reads a truncated last commit as "no such version").
:func:`verify_log` lists ``_delta_log/``: the commit versions must be contiguous (0..N, or from the
latest checkpoint on), each commit a non-empty file of JSON lines that parse, the checkpoint
readable; then every data file the pinned version references is read (:func:`read_spends`): a missing
file, a file that is not Parquet or a row without owner, dataset, plan id or a parseable ε raises
:class:`fragrelease.errors.LedgerDamagedError` (one line: the ledger and the damage) and nothing is
spent. Only a path that does not exist, or an empty folder, is created as a new ledger; a folder
holding anything without a ``_delta_log`` is damaged. A plan is spent once: a second spend of the
same owner on the same plan and dataset is refused in the same pinned-version transaction
(:class:`fragrelease.errors.PlanAlreadySpentError`).

Durability: when :func:`record_spend` returns, the spend is on disk where the ledger is local: the
data file is fsynced before the commit, the new commit file and the ``_delta_log`` folder after it.
On object stores (s3a://, abfss://) durability is the store's: a completed PUT is durable.

Tamper evidence: every row carries its commit version, the owner's running total on the dataset
and a SHA-256 hash chain (:mod:`fragrelease.jobs.protocol.ledger_chain`; every read recomputes both),
and every spend this machine records also writes this machine's private anchor of the ledger after
its commit (:mod:`fragrelease.jobs.protocol.ledger_anchor`). Every read (a spend, :func:`check_spend`,
:func:`spent`, :func:`check_intact`, ``fragrelease ledger check``) refuses a ledger whose chain no
longer holds the anchored spend (a last commit removed, the folder deleted or replaced by an older
copy) as damaged, before any spend. What stays undetected (a machine that never spent there, an
attacker who also writes the owner's private folder, rows of 0.16.0 before the chain began):
docs/known-limitations.md, "Budget ledger scope".

Layout: the log's verification is :mod:`.ledger_log`, the rows' :mod:`.ledger_chain` (re-exported here).
"""
from __future__ import annotations

import logging
import posixpath
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction
from typing import Optional
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from fragrelease.budget import check_lifetime, format_epsilon
from fragrelease.errors import FragReleaseError, LedgerStorageError, PlanAlreadySpentError

from ..storage import absolute, is_storage_failure, path_cause
from ..storage import fs_path as _fs_path
from .ledger_anchor import Anchor, anchor_file, ensure_anchor_folder, write_anchor
from .ledger_chain import (
    CHAIN_COLUMNS,
    LEDGER_SCHEMA,
    LEGACY_COLUMNS,
    Chain,
    Spend,
    chain_hash,
    read_chain,
    read_spends,
)
from .ledger_log import LogCheck, _damaged, _first_line, _fsync, _storage_error, verify_log

__all__ = ["LEDGER_SCHEMA", "LEGACY_COLUMNS", "CHAIN_COLUMNS", "MAX_ATTEMPTS", "Anchor", "Chain", "LedgerSummary",
           "LogCheck", "Spend", "check_intact", "check_ledger", "check_spend", "ensure_ledger", "ledger_history",
           "read_spends", "record_spend", "spent", "try_record", "verify_log"]

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 20


def _row(owner: str, dataset: str, plan_id: str, epsilon: Fraction, *, version: int, total: Fraction,
         prev: str) -> tuple[pa.Table, str]:
    """The spend's one-row table, to be committed as ``version`` after the chain head ``prev``, and its
    chain hash (:func:`fragrelease.jobs.protocol.ledger_chain.chain_hash`)."""
    fields = (owner, dataset, plan_id, format_epsilon(epsilon), format_epsilon(total),
              datetime.now(timezone.utc).isoformat())
    chain = chain_hash(prev, version, fields)
    columns: dict[str, object] = dict(zip(("owner", "dataset", "plan_id", "epsilon", "total", "recorded_at"), fields))
    columns.update(commit_version=version, prev_chain=prev, chain=chain)
    return pa.table({c: [columns[c]] for c in LEDGER_SCHEMA.names}, schema=LEDGER_SCHEMA), chain


def _pinned(path: str) -> Optional[tuple]:
    """The ledger verified and pinned: ``(DeltaTable at version N, LogCheck)``, None when there is no
    ledger yet; delta-rs must read the same data files as the verified log lists, or the ledger is damaged."""
    from deltalake import DeltaTable

    log_check = verify_log(path)
    if log_check is None:
        return None
    try:
        dt = DeltaTable(path, version=log_check.version)
        read = {unquote(u.rstrip("/").rsplit("/", 1)[-1]) for u in dt.file_uris()}
    except BaseException as exc:
        if not is_storage_failure(exc):
            raise
        raise _damaged(path, f"delta-rs cannot load its version {log_check.version} ({_first_line(exc)})") from None
    if read != {posixpath.basename(n) for n in log_check.live}:
        raise _damaged(path, f"delta-rs reads other data files at version {log_check.version} than its log lists")
    return dt, log_check


def _spends(path: str) -> list:
    """Every spend row of the verified ledger at ``path`` (empty when there is no ledger yet)."""
    pinned = _pinned(absolute(path))
    return [] if pinned is None else list(read_spends(path, pinned[1]))


def spent(path: str, owner: str, dataset: str) -> list[Fraction]:
    """Every ε recorded for (owner, dataset), exact, in version order (empty when there is no ledger yet).

    Raises LedgerDamagedError / LedgerStorageError as :func:`verify_log` and :func:`read_spends`.
    """
    return [s.epsilon for s in _spends(path) if s.owner == owner and s.dataset == dataset]


def records_plan(path: str, owner: str, dataset: str, plan_id: str) -> bool:
    """Whether the ledger at ``path`` records a spend of ``owner`` on ``plan_id`` for ``dataset`` (False
    when there is no ledger yet). Raises LedgerDamagedError / LedgerStorageError as :func:`spent`."""
    return any(s.owner == owner and s.dataset == dataset and s.plan_id == plan_id for s in _spends(path))


def check_intact(path: str) -> None:
    """Verify the ledger at ``path`` before Spark starts (preflight): its log and every data file.

    A ledger that does not exist yet passes (the spend creates it). Raises LedgerDamagedError /
    LedgerStorageError as :func:`verify_log` and :func:`read_spends`; the spend verifies again, in its
    transaction.
    """
    path = absolute(path)
    pinned = _pinned(path)
    if pinned is not None:
        read_spends(path, pinned[1])


@dataclass(frozen=True)
class LedgerSummary:
    """What ``fragrelease ledger check`` reports: the latest version and every spend, verified, the
    hash chain (:class:`fragrelease.jobs.protocol.ledger_chain.Chain`: its head, the spends before it began,
    this machine's anchor; ``anchor_file``: where that anchor is or would be kept), and the Parquet files
    in the ledger folder that no version references (a spend killed before its commit, or a commit that
    was removed: only this machine's anchor tells a removed spend it recorded, so they are only reported)."""

    path: str
    version: int
    spends: list[Spend]
    unreferenced: list[str]
    chain: Optional[Chain] = None
    anchor_file: Optional[str] = None

    @property
    def versions(self) -> int:
        return self.version + 1


def check_ledger(path: str) -> LedgerSummary:
    """Verify the whole ledger at ``path`` (its log, every data file, its hash chain and running totals,
    and this machine's anchor) and return what it holds. Creates nothing.

    Raises
    ------
    LedgerStorageError
        There is no ledger at ``path`` (missing or an empty folder), or it cannot be read.
    LedgerDamagedError
        As :func:`verify_log` and :func:`fragrelease.jobs.protocol.ledger_chain.read_chain` (a removed last
        commit this machine recorded: one line naming the owner, the ledger and the missing version).
    """
    path = absolute(path)
    pinned = _pinned(path)
    if pinned is None:
        raise LedgerStorageError(f"budget ledger {path!r} does not exist (no folder, or an empty one); "
                                 "no spend was ever recorded there")
    log_check = pinned[1]
    chain = read_chain(path, log_check)
    import pyarrow.fs as pafs

    fs, root = _fs_path(path)
    try:
        names = [e.base_name for e in fs.get_file_info(pafs.FileSelector(root)) if e.type == pafs.FileType.File]
    except BaseException as exc:
        if not is_storage_failure(exc):
            raise
        raise _storage_error(path, "read", exc) from None
    live = {posixpath.basename(n) for n in log_check.live}
    unreferenced = sorted(n for n in names if n.endswith(".parquet") and n not in live)
    return LedgerSummary(path, log_check.version, chain.spends, unreferenced, chain, anchor_file(path))


def ledger_history(path: str, *, owner: Optional[str] = None, dataset: Optional[str] = None
                   ) -> list[tuple[Spend, Fraction]]:
    """Every spend (optionally of one owner and/or dataset), in version order, each with the running
    total of its (owner, dataset) after it. Errors: :func:`check_ledger`."""
    totals: dict[tuple[str, str], Fraction] = {}
    rows = []
    for s in check_ledger(path).spends:
        totals[s.owner, s.dataset] = totals.get((s.owner, s.dataset), Fraction(0)) + s.epsilon
        if (owner is None or s.owner == owner) and (dataset is None or s.dataset == dataset):
            rows.append((s, totals[s.owner, s.dataset]))
    return rows


def ensure_ledger(path: str) -> None:
    """Create the ledger at ``path`` as an empty table when there is none (the path does not exist, or
    is an empty folder); a folder holding anything else is verified, never replaced.

    Racing creators are safe: the create commits version 0 with no retries (``mode="ignore"`` when the
    table already exists), and a create that lost the race is recognised by the table now existing.
    No row is ever written here. On local storage version 0 is fsynced.

    Raises
    ------
    LedgerDamagedError
        Something is at ``path`` that is not an intact ledger (:func:`verify_log`).
    LedgerStorageError
        The table can neither be found nor created (the message names the OS cause).
    """
    from deltalake import DeltaTable
    from deltalake.schema import Schema
    from deltalake.transaction import CommitProperties

    path = absolute(path)
    if verify_log(path) is not None:
        return
    try:
        DeltaTable.create(path, Schema.from_arrow(LEDGER_SCHEMA), mode="ignore",
                          commit_properties=CommitProperties(max_commit_retries=0))
    except BaseException as exc:
        if not is_storage_failure(exc):
            raise
        try:
            if DeltaTable.is_deltatable(path):
                return  # another release created it first
        except BaseException as again:
            if not is_storage_failure(again):
                raise
        raise _storage_error(path, "created", exc) from None
    fs, root = _fs_path(path)
    log_dir = posixpath.join(root, "_delta_log")
    try:
        _fsync(fs, posixpath.join(log_dir, f"{0:020d}.json"), log_dir, root)
    except FileNotFoundError:
        pass  # another creator's version 0 (mode="ignore" found the table): its creator syncs it
    except OSError as exc:
        raise _storage_error(path, "created", exc) from None


def try_record(dt, owner: str, dataset: str, plan_id: str, epsilon: Fraction, lifetime: Fraction, *,
               path: Optional[str] = None, log_check: Optional[LogCheck] = None) -> Fraction:
    """Check against the snapshot ``dt`` and append to exactly that version (no retries).

    The ledger is verified first (:func:`verify_log`, :func:`read_spends`: its chain and this
    machine's anchor; ``log_check`` when the caller verified it already); ``dt`` must be its latest
    version N. The row (committed as version N + 1, chained to the head of N,
    :func:`fragrelease.jobs.protocol.ledger_chain.chain_hash`) is written as a Parquet file under a fresh
    name in the ledger folder and fsynced before the commit, and removed again if the commit does not
    happen; after the commit the commit file and the folders are fsynced (local storage) and then this
    machine's anchor is moved to the new spend (:func:`fragrelease.jobs.protocol.ledger_anchor.write_anchor`).
    A ledger of 0.16.0 gets the chain's columns first, in a commit of their own (:func:`record_spend`).

    Raises
    ------
    PlanAlreadySpentError
        The ledger already records a spend of ``owner`` on ``plan_id`` for ``dataset``.
    BudgetExceededError
        The spend does not fit the lifetime budget as recorded in ``dt``'s version.
    LedgerDamagedError
        The ledger is damaged (nothing is written).
    deltalake.exceptions.CommitFailedError
        The table moved on since ``dt``'s version (or storage refused the commit; :func:`record_spend`
        tells the two apart).
    LedgerStorageError
        The spend was committed but could not be fsynced, or this machine's anchor could not be
        written (it counts; no noise may be drawn).
    OSError, deltalake.exceptions.DeltaError
        Storage refused the data file.
    """
    from deltalake.exceptions import CommitFailedError
    from deltalake.transaction import AddAction, CommitProperties

    where = path or dt.table_uri
    pinned = dt.version()
    if log_check is None:
        log_check = verify_log(where)
        if log_check is None:
            raise _damaged(where, "its _delta_log vanished")
    if log_check.version != pinned:
        raise CommitFailedError(f"the ledger moved on from version {pinned} to {log_check.version}")
    total, head = _check_spend(where, log_check, owner, dataset, plan_id, epsilon, lifetime)
    fs, root = _fs_path(dt.table_uri)
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    file = posixpath.join(root, name)
    version = pinned + 1
    row, chain = _row(owner, dataset, plan_id, epsilon, version=version, total=total, prev=head)
    try:
        pq.write_table(row, file, filesystem=fs, compression="snappy")
        _fsync(fs, file, root)  # the commit never references a file that is not on disk
        info = fs.get_file_info(file)
        add = AddAction(path=name, size=info.size, partition_values={},
                        modification_time=int((info.mtime.timestamp() if info.mtime else time.time()) * 1000),
                        data_change=True, stats=f'{{"numRecords":{row.num_rows}}}')
        dt.create_write_transaction([add], mode="append", schema=dt.schema(),
                                    commit_properties=CommitProperties(max_commit_retries=0))
    except BaseException as exc:
        committed = _committed(dt.table_uri, name)
        if not committed:
            if committed is False:
                try:
                    fs.delete_file(file)  # this call's own file only; its row was not committed
                except OSError:
                    pass
            raise
        # a step after the commit failed (e.g. a checkpoint): the spend counts
        log.warning("budget ledger %s: the spend was recorded, then %s", dt.table_uri, exc)
    _durable(where, fs, root, version)
    write_anchor(where, version=version, chain=chain, owner=owner, dataset=dataset, total=total)
    return total


def _unchained(dt) -> bool:
    """Whether the table ``dt`` lacks the chain's columns (a ledger of 0.16.0 or earlier)."""
    return not set(CHAIN_COLUMNS) <= {f.name for f in dt.schema().fields}


def _add_chain_columns(path: str, dt) -> None:
    """Migrate a ledger of 0.16.0 or earlier: add the chain's columns (nullable) to its table schema, in a
    commit of its own that records no spend, with no commit retries. A concurrent commit (another
    spend, or its migration) wins: the caller pins the new version and looks again.

    Raises LedgerStorageError when storage refuses the commit (the table did not move on)."""
    from deltalake.exceptions import CommitFailedError
    from deltalake.schema import Field, PrimitiveType
    from deltalake.transaction import CommitProperties

    names = {f.name for f in dt.schema().fields}
    fields = [Field(c, PrimitiveType("long" if c == "commit_version" else "string"), nullable=True)
              for c in CHAIN_COLUMNS if c not in names]
    try:
        dt.alter.add_columns(fields, commit_properties=CommitProperties(max_commit_retries=0))
    except BaseException as exc:
        if not (isinstance(exc, CommitFailedError) or is_storage_failure(exc)):
            raise
        if not _moved_on(path, dt.version()):
            raise _storage_error(path, "written", exc) from None


def _durable(path: str, fs, root: str, version: int) -> None:
    """fsync commit ``version`` and the ``_delta_log`` folder (local storage); a failure leaves the
    spend counted and raises, so that no noise is drawn on a spend that may not survive a crash."""
    log_dir = posixpath.join(root, "_delta_log")
    try:
        _fsync(fs, posixpath.join(log_dir, f"{version:020d}.json"), log_dir)
    except OSError as exc:
        raise LedgerStorageError(f"budget ledger {path!r}: the spend was recorded but cannot be made durable: "
                                 f"{path_cause(path, exc)}; no noise was drawn") from None


def _committed(uri: str, name: str) -> Optional[bool]:
    """Whether data file ``name`` is part of the ledger's latest version; None when that cannot be read
    (the file is then kept: removing a committed row's file would break the ledger)."""
    from deltalake import DeltaTable

    try:
        return any(u.rstrip("/").endswith("/" + name) for u in DeltaTable(uri).file_uris())
    except BaseException as exc:
        if not is_storage_failure(exc):
            raise
        return None


def _check_spend(where: str, log_check: LogCheck, owner: str, dataset: str, plan_id: str, epsilon: Fraction,
                 lifetime: Fraction) -> tuple[Fraction, str]:
    """The spend's checks against the verified version ``log_check``: the chain intact and holding this
    machine's anchor, the plan not spent yet, the lifetime budget not exceeded; returns the owner's
    total on ``dataset`` after the spend and the chain's head hash."""
    chain = read_chain(absolute(where), log_check)
    spends = [s for s in chain.spends if s.owner == owner and s.dataset == dataset]
    if any(s.plan_id == plan_id for s in spends):
        raise PlanAlreadySpentError(
            f"owner {owner!r} already spent on plan {plan_id!r} (dataset {dataset!r}, budget ledger {where!r}); "
            "a plan is spent once; ask the aggregator for a new plan")
    return check_lifetime([s.epsilon for s in spends], epsilon, lifetime, owner=owner, dataset=dataset), chain.head


def check_spend(path: str, *, owner: str, dataset: str, plan_id: str, epsilon: Fraction, lifetime: Fraction) -> None:
    """Every check of :func:`record_spend`, without the spend: raises what it would raise, records nothing.

    Creates the ledger when there is none (an empty table, as :func:`record_spend` does first:
    :func:`ensure_ledger`), verifies it and checks the spend against its latest version. The local
    driver runs it for every owner before any owner of a phase spends
    (:func:`fragrelease.jobs.protocol.release.play_release`), so an owner's refused spend (no room, the
    plan spent, a damaged or unwritable ledger) stops the run before another owner spends. The
    spend itself checks again, in its own transaction: a spend another process records in between is
    still refused there.

    Raises
    ------
    PlanAlreadySpentError, BudgetExceededError, LedgerDamagedError, LedgerStorageError, ConfigError
        As :func:`record_spend`, with the same messages.
    """
    path = absolute(path)
    ensure_anchor_folder(path)
    ensure_ledger(path)
    pinned = _pinned(path)
    if pinned is None:
        raise _damaged(path, "its _delta_log vanished after it was created")
    _check_spend(path, pinned[1], owner, dataset, plan_id, epsilon, lifetime)


def record_spend(path: str, *, owner: str, dataset: str, plan_id: str, epsilon: Fraction, lifetime: Fraction) -> Fraction:
    """Record a spend if it fits the lifetime budget; return the owner's total on the dataset after it.

    The check and the append are one transaction against a pinned, verified ledger version (module
    docstring), on the first spend too. When this returns, the spend is durable on local storage
    (data file, commit file and ``_delta_log`` folder fsynced); on object stores, as the store's writes are.

    Raises
    ------
    PlanAlreadySpentError
        ``owner`` already spent on ``plan_id`` for ``dataset`` (a plan is spent once; nothing was spent).
    BudgetExceededError
        The spend does not fit (checked against the latest committed version).
    LedgerDamagedError
        The ledger is damaged: its log missing, a gap in its versions, an empty or unparseable commit,
        a data file missing or unreadable, a row with an unparseable ε, a broken hash chain or running
        total, or this machine's anchored spend no longer in the ledger (a last commit removed, the
        ledger rolled back or deleted: the message names the owner and the missing version)
        (:func:`verify_log`, :func:`read_spends`). One line; nothing was spent.
    LedgerStorageError
        The ledger cannot be created, read or written (disk full, read-only, permission denied, a
        file in the way); one line naming the ledger and the OS cause. Nothing was spent. Or the spend
        was recorded but cannot be made durable or anchored (it counts; the message says so).
    ConfigError
        This machine's anchors' folder or anchor file is open to others, unreadable, or cannot be
        created (:mod:`fragrelease.jobs.protocol.ledger_anchor`); checked before the spend.
    FragReleaseError
        The ledger stayed contended for MAX_ATTEMPTS attempts (nothing was spent).
    """
    from deltalake.exceptions import CommitFailedError

    path = absolute(path)
    ensure_anchor_folder(path)
    ensure_ledger(path)
    for attempt in range(MAX_ATTEMPTS):
        pinned = _pinned(path)
        if pinned is None:
            raise _damaged(path, "its _delta_log vanished after it was created")
        dt, log_check = pinned
        if _unchained(dt):  # a ledger of 0.16.0: its schema gets the chain's columns once the spend would pass
            _check_spend(path, log_check, owner, dataset, plan_id, epsilon, lifetime)
            _add_chain_columns(path, dt)
            continue
        try:
            return try_record(dt, owner, dataset, plan_id, epsilon, lifetime, path=path, log_check=log_check)
        except FragReleaseError:
            raise
        except BaseException as exc:
            if not (isinstance(exc, CommitFailedError) or is_storage_failure(exc)):
                raise
            if not _moved_on(path, log_check.version):  # storage refused it: no other release committed meanwhile
                raise _storage_error(path, "written", exc) from None
            time.sleep(0.05 * (attempt + 1))  # a real conflict: check again against the new version
    raise FragReleaseError(f"budget ledger {path!r} stayed contended for {MAX_ATTEMPTS} attempts; "
                           "nothing was spent; retry later")


def _moved_on(path: str, pinned: int) -> bool:
    """Whether another commit followed version ``pinned`` (a real conflict, not a storage failure)."""
    import pyarrow.fs as pafs

    fs, root = _fs_path(path)
    try:
        return fs.get_file_info(posixpath.join(root, "_delta_log", f"{pinned + 1:020d}.json")).type == pafs.FileType.File
    except BaseException as exc:
        if not is_storage_failure(exc):
            raise
        return False
