"""How the embedded session gets Delta Lake's jars (no Spark started: the builder is recorded)."""
from __future__ import annotations

import logging

import pytest

from fragrelease.errors import ConfigError
from fragrelease.jobs import session, session_delta, session_workers


class _Builder:
    def __init__(self):
        self.conf = {}

    def config(self, key, value):
        self.conf[key] = value
        return self


def test_the_jar_matches_the_installed_pyspark_and_delta_spark():
    from importlib import metadata

    import pyspark

    coordinate = session.delta_jar_coordinate()
    assert coordinate == f"io.delta:delta-spark_{'.'.join(pyspark.__version__.split('.')[:2])}_2.13:" \
                         f"{metadata.version('delta-spark')}"
    assert coordinate == "io.delta:delta-spark_4.2_2.13:4.4.0"  # the pinned stack (Maven Central has this jar)


def test_a_jar_folder_is_loaded_with_spark_jars(tmp_path, monkeypatch):
    _, artifact, version = session.delta_jar_coordinate().split(":")
    folder = tmp_path / f"{artifact}-{version}"
    folder.mkdir()
    for name in (f"{artifact}-{version}.jar", f"delta-storage-{version}.jar"):
        (folder / name).write_bytes(b"")
    monkeypatch.setenv("FRAGRELEASE_DELTA_JARS", str(folder))
    conf = session._with_delta(_Builder()).conf
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    assert sorted(conf["spark.jars"].split(",")) == sorted(str(p) for p in folder.iterdir())
    assert "spark.jars.packages" not in conf


def test_delta_replays_its_log_in_one_task_in_the_embedded_session(tmp_path, monkeypatch):
    # Delta's default (50 tasks per state reconstruction) cost about half of a small release's Spark time
    monkeypatch.setenv("FRAGRELEASE_DELTA_JARS", str(tmp_path / "missing"))
    conf = session._with_delta(_Builder()).conf
    assert conf["spark.databricks.delta.snapshotPartitions"] == "1" == str(session.DELTA_SNAPSHOT_PARTITIONS)


def test_the_test_session_replays_delta_logs_in_one_task(spark):
    if not session.delta_available(spark):
        pytest.skip("the session has no Delta classes (delta-rs path)")
    assert spark.conf.get("spark.databricks.delta.snapshotPartitions") == "1"


def test_without_the_folder_spark_resolves_the_jar_with_ivy(tmp_path, monkeypatch):
    monkeypatch.setenv("FRAGRELEASE_DELTA_JARS", str(tmp_path / "missing"))
    conf = session._with_delta(_Builder()).conf
    assert conf["spark.jars.packages"] == session.delta_jar_coordinate() and "spark.jars" not in conf


def test_a_folder_without_the_matching_delta_jar_is_not_used(tmp_path, monkeypatch):
    (tmp_path / "delta-spark_4.2_2.13-4.3.0.jar").write_bytes(b"")  # another Delta version
    monkeypatch.setenv("FRAGRELEASE_DELTA_JARS", str(tmp_path))
    assert "spark.jars.packages" in session._with_delta(_Builder()).conf


def test_the_default_folder_is_inside_the_environment(monkeypatch):
    import sys

    monkeypatch.delenv("FRAGRELEASE_DELTA_JARS", raising=False)
    assert session.delta_jars_dir().startswith(sys.prefix)


@pytest.mark.parametrize("value, mode", [(None, "auto"), ("", "auto"), ("SPARK", "spark"), ("off", "off")])
def test_delta_mode(monkeypatch, value, mode):
    if value is None:
        monkeypatch.delenv("FRAGRELEASE_DELTA", raising=False)
    else:
        monkeypatch.setenv("FRAGRELEASE_DELTA", value)
    assert session.delta_mode() == mode


def test_a_bad_delta_mode_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv("FRAGRELEASE_DELTA", "maybe")
    with pytest.raises(ConfigError, match="FRAGRELEASE_DELTA must be auto, spark or off, not 'maybe'"):
        session.delta_mode()


def test_the_fallback_warns_once(monkeypatch, caplog):
    monkeypatch.setattr(session_delta, "_warned_no_delta", False)
    with caplog.at_level(logging.WARNING, logger=session.__name__):
        session_delta._warn_no_delta("no network")
        session_delta._warn_no_delta("no network")
    assert len(caplog.records) == 1 and "tables are committed with delta-rs" in caplog.records[0].getMessage()


@pytest.mark.parametrize("master, cores", [("local", 1), ("local[2]", 2), ("local[3, 2]", 3), ("spark://h:7077", 0),
                                           ("yarn", 0), ("local-cluster[2,1,1024]", 0)])
def test_local_cores_of_a_master(master, cores):
    assert session.local_cores(master) == cores


def test_local_star_counts_the_machines_cores():
    import os

    assert session.local_cores("local[*]") == (os.cpu_count() or 1)


class _Conf:
    def __init__(self, master):
        self.master = master

    def get(self, key, default=None):
        return self.master if key == "spark.master" else default


class _NoJobs:
    """A session stand-in whose conf names a master and which fails the test if a job is started."""

    def __init__(self, master):
        self.conf = _Conf(master)

    def range(self, *args):
        raise AssertionError("no warm-up job expected")


def test_no_warm_up_on_a_cluster_or_when_turned_off(monkeypatch):
    assert session.warm_python_workers(_NoJobs("spark://h:7077")) is None
    monkeypatch.setattr(session_workers, "WARM_PYTHON_WORKERS", False)
    assert session.warm_python_workers(_NoJobs("local[2]")) is None


class _Recording:
    """A session stand-in that records the warm-up job's ``range`` arguments (start, end, step, partitions)."""

    def __init__(self, master):
        self.conf, self.calls = _Conf(master), []

    def range(self, *args):
        self.calls.append(args)
        return self

    def mapInPandas(self, function, schema):  # noqa: N802 - PySpark's name
        return self

    def count(self):
        return 0


@pytest.mark.parametrize("master, small, tasks", [
    ("local", True, 1), ("local[2]", True, 1), ("local[4]", True, 3), ("local[8, 2]", True, 7),
    ("local", False, 1), ("local[2]", False, 2), ("local[4]", False, 4)])
def test_the_warm_up_leaves_small_inputs_one_task_slot_for_their_first_jvm_tasks(master, small, tasks):
    fake = _Recording(master)
    thread = session.warm_python_workers(fake, small)
    assert thread is not None
    thread.join(timeout=30)
    assert fake.calls == [(0, tasks, 1, tasks)]  # one row per task, one task per warmed worker
    assert session.warm_workers(2, True) == 1 and session.warm_workers(1, True) == 1
    assert session.warm_workers(16, True) == 15 and session.warm_workers(16) == 16


def test_the_warm_up_runs_python_tasks_and_ends(spark):
    thread = session.warm_python_workers(spark)
    assert thread is not None and thread.daemon
    thread.join(timeout=120)
    assert not thread.is_alive()
    # the worker function passes its rows on unchanged
    assert sorted(r.id for r in spark.range(0, 3, 1, 2).mapInPandas(session_workers._warm_worker, "id long").collect()) == [0, 1, 2]


def test_the_embedded_session_keeps_a_release_worth_of_compiled_classes(spark):
    # Spark's default cache (100 classes) is smaller than one release's ~200: every release compiled them again
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == str(session.CODEGEN_CACHE_ENTRIES) == "1000"


def test_the_embedded_session_turns_dataframe_debugging_off(spark):
    # with it on, every Column function also records its Python call site: 4-5 more Py4J calls each
    from pyspark.errors.utils import is_debugging_enabled
    from pyspark.sql import functions as F

    assert spark.conf.get(session.DATAFRAME_DEBUGGING[0]) == "false"
    F.sum(F.col("x").cast("double")).alias("s")
    assert not is_debugging_enabled()


class _SubmitBuilder(_Builder):
    def appName(self, name):
        return self

    def getOrCreate(self):
        return self


def test_a_spark_submit_session_turns_dataframe_debugging_off_and_a_managed_one_is_left_alone(monkeypatch):
    from pyspark.sql import SparkSession

    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")  # what spark-submit sets for the driver's Python
    monkeypatch.setattr(SparkSession, "builder", _SubmitBuilder())
    built = session.get_spark("t")
    assert built.conf == {"spark.python.sql.dataFrameDebugging.enabled": "false"}
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT")
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "15.4")  # a managed runtime's own session: untouched
    monkeypatch.setattr(SparkSession, "builder", _SubmitBuilder())
    assert session.get_spark("t").conf == {}


def test_the_warm_up_imports_what_the_protection_tasks_import():
    """The worker's first task imports the mechanism's modules (through the executor draws of
    ``udfs/noise.py``; the session names no release kind), none of which the session module loads itself."""
    import subprocess
    import sys

    wanted = ("fragrelease.idpir.mechanisms", "fragrelease.idpir.postprocess", "fragrelease.idpir.stage",
              "fragrelease.rng.laplace", "fragrelease.udfs.noise", "scipy.optimize")
    code = ("import sys\nfrom fragrelease.jobs.session_workers import _warm_worker\n"
            f"wanted = {wanted!r}\n"
            "before = [m for m in wanted if m in sys.modules]\n"
            "rows = list(_warm_worker(iter([1, 2])))\n"
            "print(before, [m for m in wanted if m not in sys.modules], rows)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[] [] [1, 2]", out.stdout
