"""The privacy-budget ledger: a Delta table per data owner recording every spend on each dataset.

Releases of the same records compose sequentially, so an owner declares a lifetime budget per
dataset and every release's ε_j is recorded **before** any noise is drawn (a crash after the
record wastes budget, never under-counts it). A spend that would take the total past the lifetime
budget is refused.

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

What a ledger cannot detect (a whole folder deleted or replaced by an older copy, a last commit
removed cleanly): docs/known-limitations.md, "Budget ledger scope".
"""
from __future__ import annotations

import json
import logging
import os
import posixpath
import re
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction
from typing import Optional
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from fragrelease.budget import check_lifetime, format_epsilon, parse_epsilon
from fragrelease.errors import (
    FragReleaseError,
    InvalidParameterError,
    LedgerDamagedError,
    LedgerStorageError,
    PlanAlreadySpentError,
)

from ..storage import absolute, is_storage_failure, path_cause
from ..storage import fs_path as _fs_path

log = logging.getLogger(__name__)

LEDGER_SCHEMA = pa.schema([
    ("owner", pa.string()), ("dataset", pa.string()), ("plan_id", pa.string()),
    ("epsilon", pa.string()), ("recorded_at", pa.string()),
])
MAX_ATTEMPTS = 20


def _row(owner: str, dataset: str, plan_id: str, epsilon: Fraction) -> pa.Table:
    return pa.table({"owner": [owner], "dataset": [dataset], "plan_id": [plan_id],
                     "epsilon": [format_epsilon(epsilon)],
                     "recorded_at": [datetime.now(timezone.utc).isoformat()]}, schema=LEDGER_SCHEMA)


def _storage_error(path: str, doing: str, exc: BaseException) -> LedgerStorageError:
    return LedgerStorageError(f"budget ledger {path!r} cannot be {doing}: {path_cause(path, exc)}; nothing was spent")


_COMMIT = re.compile(r"(\d{20})\.json")
_CHECKPOINT = re.compile(r"(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet")
_REFUSED = "every spend is refused until it is restored from a backup; nothing was spent"


def _damaged(path: str, what: str) -> LedgerDamagedError:
    return LedgerDamagedError(f"budget ledger {path!r} is damaged: {what}; {_REFUSED}")


def _first_line(exc: BaseException) -> str:
    line = next((x.strip() for x in str(exc).splitlines() if x.strip()), type(exc).__name__)
    return line if len(line) <= 120 else line[:117] + "..."


@dataclass(frozen=True)
class LogCheck:
    """A ``_delta_log`` that :func:`verify_log` found intact.

    ``version``: the latest version N (versions 0..N exist, the early ones possibly folded into
    ``checkpoint``); ``live``: the data files (paths relative to the ledger root, unquoted) of version
    N, from the checkpoint and the commits after it; ``added_in``: per data file, the version whose
    commit added it (the checkpoint's version for files only the checkpoint lists).
    """

    version: int
    checkpoint: Optional[int]
    live: frozenset[str]
    added_in: dict[str, int]


@dataclass(frozen=True)
class Spend:
    """One ledger row: the version that recorded it, when, whose, on what, for which plan, how much."""

    version: int
    recorded_at: str
    owner: str
    dataset: str
    plan_id: str
    epsilon: Fraction


def verify_log(path: str) -> Optional[LogCheck]:
    """Verify the ledger's ``_delta_log`` by listing and reading it (delta-rs is not trusted with this).

    Returns None when there is no ledger yet: ``path`` does not exist, is an empty folder, or holds
    only a ``_delta_log`` without any commit (a creator about to commit version 0). Otherwise the
    commit versions must run without a gap from 0 (or from the latest checkpoint) to the latest N,
    every commit be a non-empty file of JSON lines that parse, and the checkpoint be readable Parquet.

    Raises
    ------
    LedgerDamagedError
        The folder holds files but no ``_delta_log``; a commit version is missing; a commit is empty,
        not UTF-8 or not JSON lines (truncated, half-written); the checkpoint is unreadable. One line
        naming ``path`` and the damage.
    LedgerStorageError
        The folder or a log file cannot be read (permission denied, ...), or ``path`` is a file.
    """
    import pyarrow.fs as pafs

    fs, root = _fs_path(path)
    try:
        info = fs.get_file_info(root)
        if info.type == pafs.FileType.NotFound:
            return None
        if info.type != pafs.FileType.Directory:
            raise LedgerStorageError(f"budget ledger {path!r} cannot be read: it is a file, not a folder; "
                                     "nothing was spent")
        entries = fs.get_file_info(pafs.FileSelector(root))
        log_dir = posixpath.join(root, "_delta_log")
        logs = [e for e in entries if e.base_name == "_delta_log"]
        if not logs:
            if not entries:
                return None
            names = sorted(e.base_name for e in entries)
            raise _damaged(path, f"it holds {', '.join(names[:3])}{', ...' if len(names) > 3 else ''} "
                                 "but no _delta_log (its log is missing)")
        if logs[0].type != pafs.FileType.Directory:
            raise _damaged(path, "its _delta_log is a file, not a folder")
        log_entries = fs.get_file_info(pafs.FileSelector(log_dir))
    except FragReleaseError:
        raise
    except BaseException as exc:
        if not is_storage_failure(exc):
            raise
        raise _storage_error(path, "read", exc) from None
    commits: dict[int, str] = {}
    parts: dict[int, dict[int, set[str]]] = {}
    for e in log_entries:
        if (m := _COMMIT.fullmatch(e.base_name)) is not None and e.type == pafs.FileType.File:
            commits[int(m[1])] = e.path
        elif (m := _CHECKPOINT.fullmatch(e.base_name)) is not None and e.type == pafs.FileType.File:
            parts.setdefault(int(m[1]), {}).setdefault(int(m[3] or 1), set()).add(e.path)
    # a checkpoint counts when all of its parts are there (a writer may be writing a later one)
    complete = [v for v, by_n in parts.items() for n, files in by_n.items() if len(files) == n]
    checkpoint = max(complete, default=None)
    if not commits and checkpoint is None:
        if len(entries) == 1:
            return None  # only an empty _delta_log: a new ledger whose creator has not committed yet
        raise _damaged(path, "its _delta_log holds no commit (its log is missing)")
    latest = max([*commits, *([checkpoint] if checkpoint is not None else [])])
    first = 0 if checkpoint is None else checkpoint + 1
    missing = [v for v in range(first, latest + 1) if v not in commits]
    if missing:
        raise _damaged(path, f"commit version {missing[0]} is missing from its _delta_log (a gap in versions "
                             f"{first}..{latest})")
    live: set[str] = set()
    added_in: dict[str, int] = {}
    if checkpoint is not None:
        n = next(n for n, files in parts[checkpoint].items() if len(files) == n)
        for file in sorted(parts[checkpoint][n]):
            for add in _checkpoint_adds(path, fs, file):
                live.add(add)
                added_in.setdefault(add, checkpoint)
    for version in sorted(commits):
        for action in _commit_actions(path, fs, commits[version], version):
            if isinstance(action.get("add"), dict) and isinstance(action["add"].get("path"), str):
                name = unquote(action["add"]["path"])
                added_in[name] = version
                if version >= first:
                    live.add(name)
            elif isinstance(action.get("remove"), dict) and isinstance(action["remove"].get("path"), str):
                if version >= first:
                    live.discard(unquote(action["remove"]["path"]))
    return LogCheck(version=latest, checkpoint=checkpoint, live=frozenset(live), added_in=added_in)


def _read_bytes(path: str, fs, file: str) -> bytes:
    try:
        with fs.open_input_stream(file) as f:
            return f.read()
    except FileNotFoundError:
        raise _damaged(path, f"{posixpath.basename(file)} vanished from its _delta_log while it was read") from None
    except BaseException as exc:
        if not is_storage_failure(exc):
            raise
        raise _storage_error(path, "read", exc) from None


def _commit_actions(path: str, fs, file: str, version: int) -> list[dict]:
    """The actions of one commit file, each line parsed; a damaged commit raises LedgerDamagedError."""
    name = f"commit {posixpath.basename(file)} (version {version})"
    data = _read_bytes(path, fs, file)
    if not data.strip():
        raise _damaged(path, f"{name} is empty (a crash before it reached the disk?)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _damaged(path, f"{name} is not UTF-8 text") from None
    actions = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError:
            raise _damaged(path, f"{name} is not valid JSON at line {number} (truncated or half-written)") from None
        if not isinstance(action, dict):
            raise _damaged(path, f"{name} line {number} is not a Delta action")
        actions.append(action)
    return actions


def _checkpoint_adds(path: str, fs, file: str) -> list[str]:
    """The data files a checkpoint part lists as added (relative, unquoted)."""
    try:
        with fs.open_input_file(file) as f:
            table = pq.read_table(f, columns=["add"])
    except FileNotFoundError:
        raise _damaged(path, f"checkpoint {posixpath.basename(file)} vanished while it was read") from None
    except (pa.ArrowInvalid, KeyError) as exc:
        raise _damaged(path, f"checkpoint {posixpath.basename(file)} is not readable ({_first_line(exc)})") from None
    except BaseException as exc:
        if not is_storage_failure(exc):
            raise
        raise _storage_error(path, "read", exc) from None
    return [unquote(a["path"]) for a in table.column("add").to_pylist() if a and isinstance(a.get("path"), str)]


def read_spends(path: str, log_check: LogCheck) -> list[Spend]:
    """Every row of the verified version ``log_check.version``, read from each data file it references.

    Every file is read (a bad file raises, it is never skipped), in the order of the versions that added them.

    Raises
    ------
    LedgerDamagedError
        A referenced data file is missing or not readable Parquet, lacks a ledger column, or holds a
        row with an empty owner, dataset or plan id or an ε that does not parse as a number > 0.
    LedgerStorageError
        A data file cannot be read (permission denied, ...).
    """
    fs, root = _fs_path(path)
    spends: list[Spend] = []
    for name in sorted(log_check.live, key=lambda n: (log_check.added_in.get(n, 0), n)):
        version = log_check.added_in.get(name, log_check.version)
        what = f"data file {name!r} (version {version})"
        file = posixpath.join(root, name)
        try:
            with fs.open_input_file(file) as f:
                table = pq.read_table(f)
        except FileNotFoundError:
            raise _damaged(path, f"{what} is missing") from None
        except pa.ArrowInvalid as exc:
            raise _damaged(path, f"{what} is not readable Parquet ({_first_line(exc)})") from None
        except BaseException as exc:
            if not is_storage_failure(exc):
                raise
            raise _storage_error(path, "read", exc) from None
        absent = [c for c in LEDGER_SCHEMA.names if c not in table.column_names]
        if absent:
            raise _damaged(path, f"{what} has no column {absent[0]!r}")
        columns = [table[c].to_pylist() for c in LEDGER_SCHEMA.names]
        for owner, dataset, plan_id, epsilon, recorded_at in zip(*columns, strict=True):
            for column, value in (("owner", owner), ("dataset", dataset), ("plan_id", plan_id)):
                if not isinstance(value, str) or not value:
                    raise _damaged(path, f"{what} holds a row whose {column} is {value!r}")
            try:
                eps = parse_epsilon(epsilon if isinstance(epsilon, str) else repr(epsilon))
            except InvalidParameterError:
                raise _damaged(path, f"{what} holds a row whose ε is {epsilon!r}, not a number > 0") from None
            spends.append(Spend(version, str(recorded_at), owner, dataset, plan_id, eps))
    return spends


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


def spent(path: str, owner: str, dataset: str) -> list[Fraction]:
    """Every ε recorded for (owner, dataset), exact, in version order (empty when there is no ledger yet).

    Raises LedgerDamagedError / LedgerStorageError as :func:`verify_log` and :func:`read_spends`.
    """
    pinned = _pinned(absolute(path))
    if pinned is None:
        return []
    log_check = pinned[1]
    return [s.epsilon for s in read_spends(path, log_check) if s.owner == owner and s.dataset == dataset]


def records_plan(path: str, owner: str, dataset: str, plan_id: str) -> bool:
    """Whether the ledger at ``path`` records a spend of ``owner`` on ``plan_id`` for ``dataset`` (False
    when there is no ledger yet). Raises LedgerDamagedError / LedgerStorageError as :func:`spent`."""
    pinned = _pinned(absolute(path))
    if pinned is None:
        return False
    return any(s.owner == owner and s.dataset == dataset and s.plan_id == plan_id
               for s in read_spends(path, pinned[1]))


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
    """What ``fragrelease ledger check`` reports: the latest version and every spend, verified, and the
    Parquet files in the ledger folder that no version references (a spend killed before its commit,
    or a commit that was removed: the ledger cannot tell the two apart, so they are only reported)."""

    path: str
    version: int
    spends: list[Spend]
    unreferenced: list[str]

    @property
    def versions(self) -> int:
        return self.version + 1


def check_ledger(path: str) -> LedgerSummary:
    """Verify the whole ledger at ``path`` (its log and every data file) and return what it holds.

    Raises
    ------
    LedgerStorageError
        There is no ledger at ``path`` (missing or an empty folder), or it cannot be read.
    LedgerDamagedError
        As :func:`verify_log` and :func:`read_spends`.
    """
    path = absolute(path)
    pinned = _pinned(path)
    if pinned is None:
        raise LedgerStorageError(f"budget ledger {path!r} does not exist (no folder, or an empty one); "
                                 "no spend was ever recorded there")
    log_check = pinned[1]
    spends = read_spends(path, log_check)
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
    return LedgerSummary(path, log_check.version, spends, unreferenced)


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


def _fsync(fs, *paths: str) -> None:
    """fsync files and folders of a local ledger (object stores: a completed write is durable)."""
    import pyarrow.fs as pafs

    if not isinstance(fs, pafs.LocalFileSystem):
        return
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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

    The ledger is verified first (:func:`verify_log`, :func:`read_spends`; ``log_check`` when the
    caller verified it already); ``dt`` must be its latest version. The row's Parquet file is written
    under a fresh name in the ledger folder and fsynced before the commit, and removed again if the
    commit does not happen; after the commit the commit file and the folders are fsynced (local storage).

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
        The spend was committed but could not be fsynced (it counts; no noise may be drawn).
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
    total = _check_spend(where, log_check, owner, dataset, plan_id, epsilon, lifetime)
    fs, root = _fs_path(dt.table_uri)
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    file = posixpath.join(root, name)
    row = _row(owner, dataset, plan_id, epsilon)
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
        if committed:  # a step after the commit failed (e.g. a checkpoint): the spend counts
            log.warning("budget ledger %s: the spend was recorded, then %s", dt.table_uri, exc)
            _durable(where, fs, root, pinned + 1)
            return total
        if committed is False:
            try:
                fs.delete_file(file)  # this call's own file only; its row was not committed
            except OSError:
                pass
        raise
    _durable(where, fs, root, pinned + 1)
    return total


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
                 lifetime: Fraction) -> Fraction:
    """The spend's checks against the verified version ``log_check``: the plan not spent yet, the
    lifetime budget not exceeded; returns the owner's total on ``dataset`` after the spend."""
    spends = [s for s in read_spends(where, log_check) if s.owner == owner and s.dataset == dataset]
    if any(s.plan_id == plan_id for s in spends):
        raise PlanAlreadySpentError(
            f"owner {owner!r} already spent on plan {plan_id!r} (dataset {dataset!r}, budget ledger {where!r}); "
            "a plan is spent once; ask the aggregator for a new plan")
    return check_lifetime([s.epsilon for s in spends], epsilon, lifetime, owner=owner, dataset=dataset)


def check_spend(path: str, *, owner: str, dataset: str, plan_id: str, epsilon: Fraction, lifetime: Fraction) -> None:
    """Every check of :func:`record_spend`, without the spend: raises what it would raise, records nothing.

    Creates the ledger when there is none (an empty table, as :func:`record_spend` does first:
    :func:`ensure_ledger`), verifies it and checks the spend against its latest version. The local
    driver runs it for every owner before any owner of a phase spends
    (:func:`fragrelease.jobs.idpir.release.play_release`), so an owner's refused spend (no room, the
    plan spent, a damaged or unwritable ledger) stops the run before another owner spends. The
    spend itself checks again, in its own transaction: a spend another process records in between is
    still refused there.

    Raises
    ------
    PlanAlreadySpentError, BudgetExceededError, LedgerDamagedError, LedgerStorageError
        As :func:`record_spend`, with the same messages.
    """
    path = absolute(path)
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
        a data file missing or unreadable, a row with an unparseable ε (:func:`verify_log`,
        :func:`read_spends`). One line; nothing was spent.
    LedgerStorageError
        The ledger cannot be created, read or written (disk full, read-only, permission denied, a
        file in the way); one line naming the ledger and the OS cause. Nothing was spent.
    FragReleaseError
        The ledger stayed contended for MAX_ATTEMPTS attempts (nothing was spent).
    """
    from deltalake.exceptions import CommitFailedError

    path = absolute(path)
    ensure_ledger(path)
    for attempt in range(MAX_ATTEMPTS):
        pinned = _pinned(path)
        if pinned is None:
            raise _damaged(path, "its _delta_log vanished after it was created")
        dt, log_check = pinned
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
