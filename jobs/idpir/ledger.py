"""The privacy-budget ledger: a Delta table per data owner recording every spend on each dataset.

Releases of the same records compose sequentially, so an owner declares a lifetime budget per
dataset and every release's ε_j is recorded **before** any noise is drawn (a crash after the
record wastes budget, never under-counts it). A spend that would take the total past the lifetime
budget is refused.

Concurrency: the check and the record are one optimistic transaction. The spend is appended to the
exact table version that was checked, with no commit retries; if another release committed in the
meantime, Delta refuses the commit and the check runs again against the new version. Two
concurrent releases therefore cannot both pass a check that only one of them fits in.
"""
from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from fractions import Fraction

import pyarrow as pa

from fragrelease.budget import check_lifetime, format_epsilon, parse_epsilon
from fragrelease.errors import FragReleaseError
from fragrelease.jobs.storage import absolute

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


def spent(path: str, owner: str, dataset: str) -> list[Fraction]:
    """Every ε recorded for (owner, dataset), exact."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(absolute(path)):
        return []
    return _spent_in(DeltaTable(absolute(path)), owner, dataset)


def _spent_in(dt, owner: str, dataset: str) -> list[Fraction]:
    t = dt.to_pyarrow_table(columns=["owner", "dataset", "epsilon"])
    return [parse_epsilon(e) for o, d, e in zip(t["owner"].to_pylist(), t["dataset"].to_pylist(),
                                                t["epsilon"].to_pylist(), strict=True)
            if o == owner and d == dataset]


def try_record(dt, owner: str, dataset: str, plan_id: str, epsilon: Fraction, lifetime: Fraction) -> Fraction:
    """Check against the snapshot ``dt`` and append to exactly that version (no retries).

    Raises BudgetExceededError, or deltalake's CommitFailedError when the table moved on.
    """
    from deltalake import write_deltalake
    from deltalake.transaction import CommitProperties

    total = check_lifetime(_spent_in(dt, owner, dataset), epsilon, lifetime, owner=owner, dataset=dataset)
    write_deltalake(dt, _row(owner, dataset, plan_id, epsilon), mode="append",
                    commit_properties=CommitProperties(max_commit_retries=0))
    return total


def record_spend(path: str, *, owner: str, dataset: str, plan_id: str, epsilon: Fraction, lifetime: Fraction) -> Fraction:
    """Record a spend if it fits the lifetime budget; return the owner's total on the dataset after it.

    Raises
    ------
    BudgetExceededError
        The spend does not fit (checked against the latest committed version).
    FragReleaseError
        The ledger stayed contended for MAX_ATTEMPTS attempts.
    """
    from deltalake import DeltaTable, write_deltalake
    from deltalake.exceptions import CommitFailedError, DeltaError

    path = absolute(path)
    for attempt in range(MAX_ATTEMPTS):
        if not DeltaTable.is_deltatable(path):
            check_lifetime([], epsilon, lifetime, owner=owner, dataset=dataset)
            try:
                write_deltalake(path, _row(owner, dataset, plan_id, epsilon), mode="error")
                return epsilon
            except (DeltaError, CommitFailedError, OSError):
                continue  # another release created the ledger first: check again against it
        try:
            return try_record(DeltaTable(path), owner, dataset, plan_id, epsilon, lifetime)
        except CommitFailedError:
            time.sleep(0.05 * (attempt + 1))
    raise FragReleaseError(f"budget ledger {path!r} stayed contended for {MAX_ATTEMPTS} attempts; retry later")
