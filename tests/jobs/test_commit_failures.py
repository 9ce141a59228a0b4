"""A failed commit on the delta-rs path leaves nothing readable behind (issue 22, item 6).

Spark writes a release's Parquet files into a ``part-<uuid>`` folder of the table and delta-rs then
commits them. Before the fix, a commit that failed (disk full, a second release creating the same
table) left those files as orphan Parquet readable by any Parquet reader, and raised a raw delta-rs
error (a long traceback, exit code 1).
"""
import errno
import glob
import os
import threading

import pytest
from deltalake import DeltaTable

from fragrelease.errors import ConcurrentCommitError, FragReleaseError, TableWriteError
from fragrelease.jobs import storage
from fragrelease.jobs.storage import files as storage_files  # monkeypatched: delta_available as files.py sees it


@pytest.fixture(autouse=True)
def delta_rs_path(monkeypatch):
    # these tests are about the delta-rs commit path, whatever classes the session has
    monkeypatch.setattr(storage_files, "delta_available", lambda spark: False)


def _parquet_files(table: str) -> set[str]:
    return {os.path.realpath(f) for f in glob.glob(os.path.join(table, "**", "*.parquet"), recursive=True)}


def _active_files(table: str) -> set[str]:
    return {os.path.realpath(u.removeprefix("file://")) for u in DeltaTable(table).file_uris()}


def _frame(spark, tag: int, n: int = 40):
    return spark.range(n).selectExpr("id", f"id * {tag} AS value").repartition(2)


def test_two_releases_creating_the_same_table_one_wins_and_the_other_leaves_nothing(spark, tmp_path, monkeypatch):
    import deltalake.transaction as tx

    real = tx.create_table_with_add_actions
    for round_ in range(3):
        table = str(tmp_path / f"release-{round_}")
        barrier = threading.Barrier(2, timeout=120)

        def racing_create(*args, _barrier=barrier, **kwargs):
            _barrier.wait()  # both releases passed the existence check and wrote their files
            return real(*args, **kwargs)

        monkeypatch.setattr(tx, "create_table_with_add_actions", racing_create)
        frames = [_frame(spark, 2), _frame(spark, 3)]
        for f in frames:
            f.cache().count()
        outcomes: list = [None, None]

        def release(i, frames=frames, table=table, outcomes=outcomes):
            try:
                outcomes[i] = storage.commit_delta(frames[i], table, provenance={"role": "release", "i": i})
            except Exception as exc:  # the outcome is asserted below
                outcomes[i] = exc

        threads = [threading.Thread(target=release, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        monkeypatch.setattr(tx, "create_table_with_add_actions", real)
        winners = [o for o in outcomes if o == 0]
        losers = [o for o in outcomes if isinstance(o, Exception)]
        assert len(winners) == 1 and len(losers) == 1, outcomes
        assert isinstance(losers[0], ConcurrentCommitError), repr(losers[0])
        message = str(losers[0])
        assert "\n" not in message
        assert message == (f"another release created Delta table {table!r} at the same time; this release was not "
                           "committed and the files it wrote were removed")
        dt = DeltaTable(table)
        assert dt.version() == 0 and dt.to_pyarrow_table().num_rows == 40
        assert _parquet_files(table) == _active_files(table)  # no orphan Parquet file of the loser


def test_a_full_disk_at_the_commit_removes_the_written_files(spark, tmp_path, monkeypatch):
    import deltalake.transaction as tx

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    real = tx.create_table_with_add_actions
    table = str(tmp_path / "release")
    monkeypatch.setattr(tx, "create_table_with_add_actions", disk_full)
    with pytest.raises(TableWriteError) as info:
        storage.commit_delta(_frame(spark, 2), table, provenance={"role": "release"})
    assert str(info.value) == (f"writing Delta table {table!r} failed: No space left on device (ENOSPC); nothing was "
                               "committed and the files it wrote were removed")
    assert not glob.glob(os.path.join(table, "**", "*.parquet"), recursive=True)
    assert not os.path.exists(table)  # the folder this call created, now empty, is gone too
    monkeypatch.setattr(tx, "create_table_with_add_actions", real)
    assert storage.commit_delta(_frame(spark, 2), table, provenance={"role": "release"}) == 0  # a rerun works


def test_a_failed_new_version_keeps_the_earlier_version_and_only_its_files(spark, tmp_path, monkeypatch):
    """An overwrite commit that fails removes only its own folder: version 0's files and a planted file stay."""
    table = str(tmp_path / "release")
    storage.commit_delta(_frame(spark, 2), table, provenance={"role": "release"})
    before = _parquet_files(table)
    planted = os.path.join(table, "not-ours.txt")
    with open(planted, "w") as f:
        f.write("keep")

    def read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(DeltaTable, "create_write_transaction", read_only)
    with pytest.raises(TableWriteError, match=r"failed: Read-only file system \(EROFS\); nothing was committed and "
                                              r"the files it wrote were removed$"):
        storage.commit_delta(_frame(spark, 3), table, provenance={"role": "release"}, if_exists="new-version")
    assert _parquet_files(table) == before == _active_files(table)
    assert open(planted).read() == "keep"
    assert DeltaTable(table).version() == 0


def test_a_spark_write_failure_removes_the_partial_folder(spark, tmp_path):
    """A failure inside Spark's write (here a task error) leaves no part folder behind and is one line."""
    from pyspark.sql import functions as F

    table = str(tmp_path / "release")
    bad = spark.range(10).select("id", F.raise_error(F.lit("boom")).cast("long").alias("value"))
    with pytest.raises(TableWriteError) as info:
        storage.commit_delta(bad, table, provenance={"role": "release"})
    assert "\n" not in str(info.value) and str(info.value).startswith(f"writing Delta table {table!r} failed: ")
    assert not glob.glob(os.path.join(table, "**", "*.parquet"), recursive=True)
    assert not glob.glob(os.path.join(table, "part-*"))


def test_the_cli_prints_a_commit_failure_as_one_line_with_exit_code_2(spark, tmp_path, monkeypatch, capsys):
    import deltalake.transaction as tx
    import typer

    from fragrelease.jobs import cli

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    table = str(tmp_path / "release")

    def publish():
        storage.commit_delta(_frame(spark, 2), table, provenance={"role": "release"})

    probe = typer.Typer()
    probe.command("publish")(publish)
    probe.command("noop")(lambda: None)
    monkeypatch.setattr(cli, "app", probe)
    monkeypatch.setattr(tx, "create_table_with_add_actions", disk_full)
    assert cli.run_cli(["publish"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: writing Delta table {table!r} failed: No space left on device (ENOSPC); nothing was "
                   "committed and the files it wrote were removed"), err
    assert issubclass(ConcurrentCommitError, FragReleaseError)


def test_a_table_path_under_a_regular_file_is_one_line_and_the_file_is_kept(spark, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    table = str(blocker / "release")
    with pytest.raises(TableWriteError) as info:
        storage.commit_delta(_frame(spark, 2), table, provenance={"role": "release"})
    assert str(info.value) == (f"writing Delta table {table!r} failed: Not a directory (ENOTDIR); nothing was "
                               "committed and the files it wrote were removed")
    assert blocker.read_text() == "x"
