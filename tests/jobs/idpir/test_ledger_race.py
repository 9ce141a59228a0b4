"""The budget ledger under racing OS processes and failing storage (issue 22, items 2 and 8).

Races use separate processes (``spawn``), as releases on one machine do: 8 releases record ε = 1 at
once on a ledger that does not exist yet. Before the fix, the losers of the create race were
retried by delta-rs as plain appends without a budget check (a lifetime of 1.5 recorded 2).
"""
import multiprocessing as mp
import os
import shutil
import subprocess
import time
from fractions import Fraction

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from fragrelease.errors import BudgetExceededError, FragReleaseError, LedgerStorageError
from fragrelease.jobs.protocol.ledger import record_spend, spent

N_PROCESSES = 8


def _racer(path: str, i: int, lifetime: str, start: float) -> str:
    while time.time() < start:  # all processes are started (interpreters imported) before anyone spends
        time.sleep(0.001)
    try:
        record_spend(path, owner="o", dataset="d", plan_id=f"r{i}", epsilon=Fraction(1), lifetime=Fraction(lifetime))
        return "ok"
    except BudgetExceededError:
        return "refused"
    except Exception as exc:  # anything else fails the test with its text
        return f"{type(exc).__name__}: {exc}"


def _race(pool, path: str, lifetime: str) -> list[str]:
    start = time.time() + 2.0
    return pool.starmap(_racer, [(path, i, lifetime, start) for i in range(N_PROCESSES)])


def _parquet_files(path: str) -> set[str]:
    return {f for f in os.listdir(path) if f.endswith(".parquet")}


def _assert_only_committed_files(path: str) -> None:
    active = {os.path.basename(u) for u in DeltaTable(path).file_uris()}
    assert _parquet_files(path) == active  # refused commits removed their own data files


@pytest.fixture(scope="module")
def pool():
    with mp.get_context("spawn").Pool(N_PROCESSES) as p:
        yield p


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
@pytest.mark.parametrize("lifetime, winners", [("3/2", 1), ("3", 3)])
def test_racing_processes_on_a_new_ledger_never_overspend(tmp_path, pool, lifetime, winners):
    for round_ in range(5):  # a double spend showed in 2 of 8 rounds before the fix
        path = str(tmp_path / f"ledger-{round_}")
        outcomes = _race(pool, path, lifetime)
        assert sorted(outcomes) == ["ok"] * winners + ["refused"] * (N_PROCESSES - winners), (round_, outcomes)
        assert sum(spent(path, "o", "d")) == winners
        assert len(spent(path, "o", "d")) == winners
        _assert_only_committed_files(path)


def _read_only(folder: str):
    """Make ``folder`` and its contents unwritable: chmod for users, ``chattr +i`` for root (whom
    chmod does not stop). Returns an undo function, or None when neither works here."""
    if os.geteuid() != 0:
        for root, _, files in os.walk(folder):
            for name in files:
                os.chmod(os.path.join(root, name), 0o444)
            os.chmod(root, 0o555)
        return lambda: subprocess.run(["chmod", "-R", "u+w", folder], check=True)
    if shutil.which("chattr") is None or subprocess.run(["chattr", "-R", "+i", folder],
                                                        capture_output=True).returncode != 0:
        return None

    def undo():
        subprocess.run(["chattr", "-R", "-i", folder], check=True)

    probe = os.path.join(folder, "probe")
    try:
        with open(probe, "w"):
            pass
    except OSError:
        return undo
    undo()
    os.remove(probe)
    return None


def test_a_read_only_ledger_is_reported_as_such_and_nothing_is_spent(tmp_path):
    path = str(tmp_path / "ledger")
    record_spend(path, owner="o", dataset="d", plan_id="a", epsilon=Fraction(1, 2), lifetime=Fraction(3))
    version, files = DeltaTable(path).version(), _parquet_files(path)
    undo = _read_only(path)
    if undo is None:
        pytest.skip("cannot make a folder read-only here (root without chattr)")
    try:
        with pytest.raises(LedgerStorageError) as info:
            record_spend(path, owner="o", dataset="d", plan_id="b", epsilon=Fraction(1, 2), lifetime=Fraction(3))
    finally:
        undo()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"budget ledger {path!r} cannot be written: ")
    assert ("Permission denied" in message or "Operation not permitted" in message), message
    assert message.endswith("nothing was spent")
    assert DeltaTable(path).version() == version and _parquet_files(path) == files
    assert spent(path, "o", "d") == [Fraction(1, 2)]


def test_a_ledger_path_under_a_regular_file_is_a_storage_error(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    path = str(blocker / "ledger")
    with pytest.raises(LedgerStorageError) as info:
        record_spend(path, owner="o", dataset="d", plan_id="a", epsilon=Fraction(1), lifetime=Fraction(3))
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"budget ledger {path!r} cannot be created: ")
    assert "Not a directory" in message or "File exists" in message, message
    assert blocker.read_text() == "x"


def test_a_full_disk_is_reported_and_leaves_no_row(tmp_path, monkeypatch):
    import errno

    path = str(tmp_path / "ledger")
    record_spend(path, owner="o", dataset="d", plan_id="a", epsilon=Fraction(1, 2), lifetime=Fraction(3))
    real = pq.write_table

    def disk_full(table, where, **kw):
        real(table, where, **kw)  # the file is created, then the disk fills up
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "write_table", disk_full)
    with pytest.raises(LedgerStorageError, match=r"cannot be written: No space left on device \(ENOSPC\); "
                                                 r"nothing was spent$"):
        record_spend(path, owner="o", dataset="d", plan_id="b", epsilon=Fraction(1, 2), lifetime=Fraction(3))
    monkeypatch.undo()
    assert spent(path, "o", "d") == [Fraction(1, 2)]
    _assert_only_committed_files(path)


def test_only_a_real_conflict_is_retried(tmp_path, monkeypatch):
    """A commit refused by storage (the table did not move on) is reported at once, not retried 20 times."""
    from deltalake.exceptions import CommitFailedError

    path = str(tmp_path / "ledger")
    record_spend(path, owner="o", dataset="d", plan_id="a", epsilon=Fraction(1, 2), lifetime=Fraction(3))
    calls = []

    def refused(self, *args, **kwargs):
        calls.append(1)
        raise CommitFailedError("Failed to commit transaction: Generic LocalFileSystem error: Permission denied "
                                "(os error 13)")

    monkeypatch.setattr(DeltaTable, "create_write_transaction", refused)
    with pytest.raises(LedgerStorageError, match=r"cannot be written: Permission denied \(EACCES\)"):
        record_spend(path, owner="o", dataset="d", plan_id="b", epsilon=Fraction(1, 2), lifetime=Fraction(3))
    assert len(calls) == 1
    monkeypatch.undo()
    _assert_only_committed_files(path)


def test_the_cli_prints_a_ledger_storage_error_as_one_line(tmp_path, monkeypatch, capsys):
    """A LedgerStorageError reaching the command line is one line and exit code 2."""
    import typer

    from fragrelease.jobs import cli

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    path = str(blocker / "ledger")

    def spend():
        record_spend(path, owner="o", dataset="d", plan_id="a", epsilon=Fraction(1), lifetime=Fraction(3))

    probe = typer.Typer()
    probe.command("spend")(spend)
    probe.command("noop")(lambda: None)
    monkeypatch.setattr(cli, "app", probe)
    assert cli.run_cli(["spend"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "budget ledger" in err and "nothing was spent" in err, err
    assert isinstance(LedgerStorageError("x"), FragReleaseError)


def test_a_failure_after_the_commit_still_counts_the_spend(tmp_path, monkeypatch):
    """A step after the commit failing (e.g. writing a checkpoint on a full disk) never un-records a spend."""
    import errno

    path = str(tmp_path / "ledger")
    record_spend(path, owner="o", dataset="d", plan_id="a", epsilon=Fraction(1, 2), lifetime=Fraction(3))
    real = DeltaTable.create_write_transaction

    def commit_then_fail(self, *args, **kwargs):
        real(self, *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(DeltaTable, "create_write_transaction", commit_then_fail)
    assert record_spend(path, owner="o", dataset="d", plan_id="b", epsilon=Fraction(1, 2), lifetime=Fraction(3)) == 1
    monkeypatch.undo()
    assert spent(path, "o", "d") == [Fraction(1, 2), Fraction(1, 2)]
    _assert_only_committed_files(path)
