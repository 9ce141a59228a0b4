"""The budget ledger: exact sums, refusal past the lifetime budget, and no double pass under concurrency."""
import threading
from fractions import Fraction

import pytest
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError

from fragrelease.errors import BudgetExceededError
from fragrelease.jobs.protocol.ledger import record_spend, spent, try_record


def test_spends_add_up_exactly_and_refuse_past_lifetime(tmp_path):
    path = str(tmp_path / "ledger")
    for i in range(10):
        total = record_spend(path, owner="o", dataset="adult", plan_id=f"p{i}", epsilon=Fraction(1, 10), lifetime=Fraction(1))
    assert total == 1 and sum(spent(path, "o", "adult")) == 1
    with pytest.raises(BudgetExceededError, match=r"spent ε = 1 of its lifetime budget 1.*ε = 1/100"):
        record_spend(path, owner="o", dataset="adult", plan_id="p10", epsilon=Fraction(1, 100), lifetime=Fraction(1))
    # other datasets and owners have their own budgets
    assert record_spend(path, owner="o", dataset="wine", plan_id="w", epsilon=Fraction(1), lifetime=Fraction(1)) == 1
    assert record_spend(path, owner="p", dataset="adult", plan_id="x", epsilon=Fraction(1, 2), lifetime=Fraction(1)) == Fraction(1, 2)
    assert len(spent(path, "o", "adult")) == 10


def test_a_stale_snapshot_cannot_commit(tmp_path):
    path = str(tmp_path / "ledger")
    record_spend(path, owner="o", dataset="d", plan_id="a", epsilon=Fraction(1, 2), lifetime=Fraction(1))
    first, second = DeltaTable(path), DeltaTable(path)  # two releases checking the same version
    try_record(first, "o", "d", "b", Fraction(1, 2), Fraction(1))
    with pytest.raises(CommitFailedError):
        try_record(second, "o", "d", "c", Fraction(1, 2), Fraction(1))  # its check is stale: refused
    with pytest.raises(BudgetExceededError):  # checked again against the new version
        record_spend(path, owner="o", dataset="d", plan_id="c", epsilon=Fraction(1, 2), lifetime=Fraction(1))


def test_concurrent_releases_do_not_both_pass(tmp_path):
    path = str(tmp_path / "ledger")
    barrier = threading.Barrier(6)
    outcomes = []

    def release(i):
        barrier.wait()
        try:
            record_spend(path, owner="o", dataset="d", plan_id=f"r{i}", epsilon=Fraction(3, 10), lifetime=Fraction(1))
            outcomes.append("ok")
        except BudgetExceededError:
            outcomes.append("refused")

    threads = [threading.Thread(target=release, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["ok"] * 3 + ["refused"] * 3
    assert sum(spent(path, "o", "d")) == Fraction(9, 10)
