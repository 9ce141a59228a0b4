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
registered over exactly those files, :func:`fragrelease.jobs.catalog.register`).

Storage failures (disk full, read-only folder, permission denied, a file where the ledger folder must
be) raise :class:`fragrelease.errors.LedgerStorageError` naming the ledger and the OS cause, with
nothing spent; only a real commit conflict (the table moved past the pinned version) is retried.
"""
from __future__ import annotations

import logging
import posixpath
import time
import uuid
from datetime import datetime, timezone
from fractions import Fraction
from typing import Optional

import pyarrow as pa
import pyarrow.parquet as pq

from fragrelease.budget import check_lifetime, format_epsilon, parse_epsilon
from fragrelease.errors import FragReleaseError, LedgerStorageError
from fragrelease.jobs.storage import _fs_path, absolute
from fragrelease.jobs.storage_errors import is_storage_failure, path_cause

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


def spent(path: str, owner: str, dataset: str) -> list[Fraction]:
    """Every ε recorded for (owner, dataset), exact (empty when the ledger does not exist yet)."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(absolute(path)):
        return []
    return _spent_in(DeltaTable(absolute(path)), owner, dataset)


def _spent_in(dt, owner: str, dataset: str) -> list[Fraction]:
    t = dt.to_pyarrow_table(columns=["owner", "dataset", "epsilon"])
    return [parse_epsilon(e) for o, d, e in zip(t["owner"].to_pylist(), t["dataset"].to_pylist(),
                                                t["epsilon"].to_pylist(), strict=True)
            if o == owner and d == dataset]


def ensure_ledger(path: str) -> None:
    """Create the ledger at ``path`` as an empty table unless a Delta table is already there.

    Racing creators are safe: the create commits version 0 with no retries (``mode="ignore"`` when the
    table already exists), and a create that lost the race is recognised by the table now existing.
    No row is ever written here.

    Raises
    ------
    LedgerStorageError
        The table can neither be found nor created (the message names the OS cause).
    """
    from deltalake import DeltaTable
    from deltalake.schema import Schema
    from deltalake.transaction import CommitProperties

    path = absolute(path)
    try:
        if DeltaTable.is_deltatable(path):
            return
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


def try_record(dt, owner: str, dataset: str, plan_id: str, epsilon: Fraction, lifetime: Fraction) -> Fraction:
    """Check against the snapshot ``dt`` and append to exactly that version (no retries).

    The row's Parquet file is written first under a fresh name in the ledger folder and removed again
    if the commit does not happen.

    Raises
    ------
    BudgetExceededError
        The spend does not fit the lifetime budget as recorded in ``dt``'s version.
    deltalake.exceptions.CommitFailedError
        The table moved on since ``dt``'s version (or storage refused the commit; :func:`record_spend`
        tells the two apart).
    OSError, deltalake.exceptions.DeltaError
        Storage refused the data file.
    """
    from deltalake.transaction import AddAction, CommitProperties

    total = check_lifetime(_spent_in(dt, owner, dataset), epsilon, lifetime, owner=owner, dataset=dataset)
    fs, root = _fs_path(dt.table_uri)
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    file = posixpath.join(root, name)
    row = _row(owner, dataset, plan_id, epsilon)
    try:
        pq.write_table(row, file, filesystem=fs, compression="snappy")
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
            return total
        if committed is False:
            try:
                fs.delete_file(file)  # this call's own file only; its row was not committed
            except OSError:
                pass
        raise
    return total


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


def record_spend(path: str, *, owner: str, dataset: str, plan_id: str, epsilon: Fraction, lifetime: Fraction) -> Fraction:
    """Record a spend if it fits the lifetime budget; return the owner's total on the dataset after it.

    The check and the append are one transaction against a pinned ledger version (module docstring),
    on the first spend too.

    Raises
    ------
    BudgetExceededError
        The spend does not fit (checked against the latest committed version).
    LedgerStorageError
        The ledger cannot be created, read or written (disk full, read-only, permission denied, a
        file in the way); one line naming the ledger and the OS cause. Nothing was spent.
    FragReleaseError
        The ledger stayed contended for MAX_ATTEMPTS attempts (nothing was spent).
    """
    from deltalake import DeltaTable
    from deltalake.exceptions import CommitFailedError

    path = absolute(path)
    ensure_ledger(path)
    for attempt in range(MAX_ATTEMPTS):
        try:
            dt = DeltaTable(path)
            pinned = dt.version()
        except BaseException as exc:
            if not is_storage_failure(exc):
                raise
            raise _storage_error(path, "read", exc) from None
        try:
            return try_record(dt, owner, dataset, plan_id, epsilon, lifetime)
        except FragReleaseError:
            raise
        except BaseException as exc:
            if not (isinstance(exc, CommitFailedError) or is_storage_failure(exc)):
                raise
            if not _moved_on(path, pinned):  # storage refused it: no other release committed meanwhile
                raise _storage_error(path, "written", exc) from None
            time.sleep(0.05 * (attempt + 1))  # a real conflict: check again against the new version
    raise FragReleaseError(f"budget ledger {path!r} stayed contended for {MAX_ATTEMPTS} attempts; "
                           "nothing was spent; retry later")


def _moved_on(path: str, pinned: int) -> bool:
    """Whether another commit followed version ``pinned`` (a real conflict, not a storage failure)."""
    from deltalake import DeltaTable

    try:
        return DeltaTable(path).version() > pinned
    except BaseException as exc:
        if not is_storage_failure(exc):
            raise
        return False
