"""A crash or a full disk during the aggregator's commit no longer wedges the output (issue 36 item 2, 4).

Before the fix, on the Spark Delta path an aggregator killed during the commit left ``_delta_log/``
with no commit and a 0-byte part file, and every later run of the release failed with
``[TABLE_OR_VIEW_ALREADY_EXISTS]`` after every owner had spent its ε; a full disk printed
``(An error occurred while calling o1252.create.)`` and hundreds of lines of Java stack traces.
Now the next run of the same configuration finds its own marker beside the output, clears exactly
the crashed write's leftovers and commits version 0; it resumes the killed attempt's plan (the owners
re-publish what they kept, issue 49), so each owner's ledger holds one spend for the one release.
"""
import glob
import json
import os
import signal
import subprocess
import sys
from fractions import Fraction

import pytest
import yaml
from deltalake import DeltaTable

from fragrelease.jobs.protocol import ledger
from fragrelease.jobs.protocol.release import run_local_release
from fragrelease.jobs.storage import marker_path, marker_text
from fragrelease.protocol.config import config_from_dict

HELPERS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers")


class Killed(BaseException):
    """Stands for the process dying at that point: no ``except Exception`` handler runs."""


def _config(tmp_path, source, output, name="recover"):
    from signing_keys import with_keys

    return with_keys(config_from_dict({
        "name": name, "dataset": "wine", "fragmentation": "horizontal", "epsilon": "1", "k": 10,
        "source": {"path": source, "format": "parquet"}, "reports": False,
        "owners": [{"name": "a", "rows": 100, "ledger": {"path": str(tmp_path / "ledger-a"), "lifetime_epsilon": "10"}},
                   {"name": "b", "rows": 100, "ledger": {"path": str(tmp_path / "ledger-b"), "lifetime_epsilon": "10"}}],
        "work_dir": str(tmp_path / "work"), "output": output}), tmp_path / "keys")


@pytest.fixture
def wine_source(spark, wine_pdf, tmp_path):
    from fragrelease.schemas.wine import SCHEMA

    path = str(tmp_path / "wine")
    spark.createDataFrame(wine_pdf.sample(200, random_state=5), SCHEMA.struct_type()).write.parquet(path)
    return path


def _spends(tmp_path, owner):
    return ledger.spent(str(tmp_path / f"ledger-{owner}"), owner, "wine")


def _assert_committed_once(output, rows=200):
    dt = DeltaTable(output)
    assert dt.version() == 0 and dt.to_pyarrow_table().num_rows == rows
    data = {os.path.realpath(f) for f in glob.glob(os.path.join(output, "**", "*.parquet"), recursive=True)}
    assert data == {os.path.realpath(u.removeprefix("file://")) for u in dt.file_uris()}  # no leftover part file
    assert not os.path.exists(marker_path(output))


@pytest.mark.slow  # two whole releases and an aggregator in its own interpreter
def test_an_aggregator_killed_during_the_spark_delta_commit_does_not_wedge_the_output(spark, tmp_path, wine_source,
                                                                                      monkeypatch):
    from fragrelease.jobs.protocol import aggregator
    from fragrelease.jobs.session import delta_available

    if not delta_available(spark):
        pytest.skip("the Spark Delta path needs Delta's classes in this session")
    output = str(tmp_path / "out" / "release")
    beside = tmp_path / "out" / "notes.txt"
    beside.parent.mkdir()
    beside.write_text("a user file beside the output")
    cfg = _config(tmp_path, wine_source, output)
    real_release = aggregator.release
    killed = {}

    def release_in_a_killed_process(spark_, ctx_, **kwargs):
        conf = tmp_path / "aggregator.json"
        conf.write_text(json.dumps(ctx_.config.model_dump(mode="json", exclude_none=True)))
        proc = subprocess.run([sys.executable, os.path.join(HELPERS, "kill_during_commit.py"), str(conf),
                               kwargs["plan"].plan_id],
                              capture_output=True, text=True, timeout=900)
        killed.update(returncode=proc.returncode, stdout=proc.stdout, stderr=proc.stderr[-3000:])
        raise Killed

    monkeypatch.setattr(aggregator, "release", release_in_a_killed_process)
    with pytest.raises(Killed):
        run_local_release(spark, cfg)
    assert killed["returncode"] == -signal.SIGKILL, killed
    left = sorted(os.listdir(output))
    assert any(n.startswith("part-") for n in left), left  # the killed write's data file(s)
    assert not DeltaTable.is_deltatable(output)  # and no committed version
    first_plan = marker_text(output)["plan_id"]
    assert marker_text(output) == {"system": "idpir", "config": "recover", "dataset": "wine", "output": output,
                                   "plan_id": first_plan}
    assert _spends(tmp_path, "a") == _spends(tmp_path, "b") == [Fraction(1)]

    monkeypatch.setattr(aggregator, "release", real_release)
    result = run_local_release(spark, cfg)  # the same configuration, nothing removed by hand
    assert result.version == 0 and result.plan.plan_id == first_plan  # the killed attempt's plan, resumed
    _assert_committed_once(output)
    assert _spends(tmp_path, "a") == _spends(tmp_path, "b") == [Fraction(1)]  # before issue 49: [1, 1]
    assert beside.read_text() == "a user file beside the output"


@pytest.mark.slow  # two whole releases
def test_an_aggregator_killed_during_the_delta_rs_commit_does_not_wedge_the_output(spark, tmp_path, wine_source,
                                                                                   monkeypatch):
    import deltalake.transaction as tx

    from fragrelease.jobs.storage import delta as delta_write
    from fragrelease.jobs.storage import files

    monkeypatch.setattr(files, "delta_available", lambda spark: False)
    output = str(tmp_path / "release")
    cfg = _config(tmp_path, wine_source, output)

    real_create, real_discard = tx.create_table_with_add_actions, delta_write._discard_uncommitted

    def at_the_output(real):
        def die_there(path, *args, **kwargs):  # the owners' tables commit through the same calls
            if os.path.abspath(str(path)) == output:
                raise Killed
            return real(path, *args, **kwargs)
        return die_there

    monkeypatch.setattr(tx, "create_table_with_add_actions", at_the_output(real_create))  # killed at the commit ...
    monkeypatch.setattr(delta_write, "_discard_uncommitted", at_the_output(real_discard))  # ... so no clean-up runs
    with pytest.raises(Killed):
        run_local_release(spark, cfg)
    assert glob.glob(os.path.join(output, "part-*", "*.parquet")) and not DeltaTable.is_deltatable(output)
    monkeypatch.setattr(tx, "create_table_with_add_actions", real_create)
    monkeypatch.setattr(delta_write, "_discard_uncommitted", real_discard)
    assert run_local_release(spark, cfg).version == 0
    _assert_committed_once(output)
    assert _spends(tmp_path, "a") == _spends(tmp_path, "b") == [Fraction(1)]  # the killed attempt's plan, resumed


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs at ``tmp_path/disk`` (root and ``mount`` needed; skipped otherwise), unmounted after."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("a full disk needs a small tmpfs: mount -t tmpfs is not allowed here")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.slow  # a whole `fragrelease run` in its own interpreter (its Spark log on standard error), then another
def test_a_full_disk_during_the_spark_delta_commit_is_one_line_and_the_rerun_commits(spark, tmp_path, wine_source,
                                                                                     small_disk):
    from fragrelease.jobs.cli import run_cli

    output = str(small_disk / "release")
    cfg = _config(tmp_path, wine_source, output, name="full-disk")
    conf = tmp_path / "release.yaml"
    conf.write_text(yaml.safe_dump(cfg.model_dump(mode="json", exclude_none=True)))
    env = {k: v for k, v in os.environ.items() if k != "FRAGRELEASE_SPARK_LOG_LEVEL"}  # the CLI's own default
    proc = subprocess.run([sys.executable, os.path.join(HELPERS, "full_disk_run.py"), str(conf), str(small_disk)],
                          capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: the Delta write to {output!r} failed and was not "
                                                     "committed (No space left on device (ENOSPC)); "), lines[-20:]
    assert not any(ln.lstrip().startswith("at ") or " ERROR " in ln for ln in lines), lines  # no Java log or trace
    assert len(lines) < 40, lines  # Spark's start-up notices, the preview's warning and the progress lines
    assert not DeltaTable.is_deltatable(output)
    assert marker_text(output)["config"] == "full-disk"
    assert _spends(tmp_path, "a") == [Fraction(1)]  # the failed attempt's spend stays (the safe direction)
    os.remove(small_disk / "filler")  # the operator frees space; nothing of the release is removed by hand
    assert run_cli(["run", str(conf)]) == 0  # resumes the failed attempt's plan: the owners re-publish
    _assert_committed_once(output)
    assert _spends(tmp_path, "a") == _spends(tmp_path, "b") == [Fraction(1)]  # before issue 49: [1, 1]


@pytest.mark.slow  # a whole release up to the owners' spend
def test_a_read_only_output_is_refused_before_any_spend(spark, tmp_path, wine_source, small_disk, capsys):
    from fragrelease.jobs.cli import run_cli

    output = str(small_disk / "release")
    cfg = _config(tmp_path, wine_source, output, name="read-only")
    conf = tmp_path / "release.yaml"
    conf.write_text(yaml.safe_dump(cfg.model_dump(mode="json", exclude_none=True)))
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    assert run_cli(["run", str(conf)]) == 2
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    # refused by the output's placement check (run's preflight, before Spark starts), not at its marker
    assert errors == [f"error: output {output!r}: folder {str(small_disk)!r} is not writable by this user (its mode "
                      "or a read-only disk); nothing was written: fix its permissions or choose another output"], errors
    assert not os.path.exists(tmp_path / "ledger-a") or _spends(tmp_path, "a") == []
    assert os.listdir(small_disk) == []


def _frame(spark, tag: int):
    return spark.range(20).selectExpr("id", f"id * {tag} AS value")


def test_a_failed_attempts_leftovers_do_not_block_the_next_spark_delta_version(spark, tmp_path):
    from fragrelease.jobs import storage
    from fragrelease.jobs.session import delta_available

    if not delta_available(spark):
        pytest.skip("the Spark Delta path needs Delta's classes in this session")
    table = str(tmp_path / "release")
    assert storage.commit_delta(_frame(spark, 2), table, provenance={"role": "release"}) == 0
    stray = os.path.join(table, "part-00000-killed-attempt-c000.snappy.parquet")
    open(stray, "wb").close()  # a 0-byte part file of a killed attempt
    tmp_commit = os.path.join(table, "_delta_log", ".00000000000000000001.json.5f1e.tmp")
    open(tmp_commit, "w").write('{"add"')  # a commit file a full disk cut short
    assert storage.commit_delta(_frame(spark, 3), table, provenance={"role": "release"}, if_exists="new-version") == 1
    assert spark.read.format("delta").load(table).selectExpr("sum(value)").first()[0] == 3 * sum(range(20))
    assert spark.read.format("delta").option("versionAsOf", 0).load(table).selectExpr("sum(value)").first()[0] == (
        2 * sum(range(20)))  # the earlier version untouched
    assert os.path.exists(stray) and os.path.exists(tmp_commit)  # not this run's files: left in place


def test_losing_a_create_race_on_the_spark_delta_path_is_one_line(spark, tmp_path, monkeypatch):
    import pyarrow as pa
    from deltalake import write_deltalake
    from pyspark.sql.readwriter import DataFrameWriterV2

    from fragrelease.errors import ConcurrentCommitError
    from fragrelease.jobs import storage
    from fragrelease.jobs.session import delta_available

    if not delta_available(spark):
        pytest.skip("the Spark Delta path needs Delta's classes in this session")
    table = str(tmp_path / "release")
    real = DataFrameWriterV2.create

    def other_release_first(self):
        write_deltalake(table, pa.table({"id": pa.array([1], pa.int64()), "value": pa.array([1], pa.int64())}))
        return real(self)

    monkeypatch.setattr(DataFrameWriterV2, "create", other_release_first)
    with pytest.raises(ConcurrentCommitError) as info:
        storage.commit_delta(_frame(spark, 2), table, provenance={"role": "release"})
    assert str(info.value) == (f"another release committed to {table!r} at the same time; run again for a new version "
                               "(this write was not committed; 0 file(s) it had written were removed)")
    assert DeltaTable(table).version() == 0 and DeltaTable(table).to_pyarrow_table().num_rows == 1  # the winner's


def test_a_java_disk_full_or_permission_error_is_named_by_its_os_cause(tmp_path):
    from fragrelease.errors import DeltaWriteError
    from fragrelease.jobs.storage.delta import _spark_commit_error

    class Py4JJavaError(Exception):  # what py4j raises: the Java stack trace in its text
        pass

    for java, cause in (("java.io.IOException: No space left on device", "No space left on device (ENOSPC)"),
                        ("java.io.FileNotFoundException: /x/part-0 (Permission denied)", "Permission denied (EACCES)")):
        exc = Py4JJavaError(f"An error occurred while calling o1252.create.\n: org.apache.spark.SparkException: "
                            f"Job aborted.\n\tat org.apache.spark.X.y(X.scala:1)\nCaused by: {java}\n\tat a.b(c:2)")
        err = _spark_commit_error(str(tmp_path / "release"), exc, None, 2)
        assert isinstance(err, DeltaWriteError)
        assert str(err) == (f"the Delta write to {str(tmp_path / 'release')!r} failed and was not committed ({cause}); "
                            "2 file(s) it had written were removed")


def test_the_cli_keeps_sparks_log_for_verbose_runs():
    """Spark's own log (a failed job's Java stack traces) is FATAL-only unless --verbose (then WARN)."""
    from fragrelease.jobs import cli, session

    try:
        for verbosity, level in ((0, "FATAL"), (-1, "FATAL"), (1, "WARN")):
            cli._configure_output(verbosity)
            assert session._default_log_level == level
    finally:
        cli._configure_output(0)
