"""``scripts/setup.sh`` fetches Delta's jars without leaving Maven state a user's own Spark trips on (issue 53,
"After scripts/setup.sh, the user's own Spark session fails").

Setup's Maven step (``scripts/fetch-delta-jars.sh``) once resolved into ``~/.m2/repository``. Resolving
delta-spark's dependencies downloads POMs whose jars Maven never fetches (slf4j-api 2.0.13, snappy-java
1.1.10.7); Spark's Ivy resolver reads ``~/.m2`` as a repository, finds such a POM, and the standard
``configure_spark_with_delta_pip`` session stopped in 10 s with ``download failed:
org.slf4j#slf4j-api;2.0.13!slf4j-api.jar``. Now Maven resolves in a throw-away repository of its own.

The test runs the fetch as setup does, for this venv's pyspark and delta-spark, into a jar folder of its own
(``FRAGRELEASE_DELTA_JARS``) under a throw-away home: ``HOME`` and, for every JVM (Maven's and Spark's),
``-Duser.home`` through ``JAVA_TOOL_OPTIONS``, since Java takes ``user.home`` from the password database,
not from ``$HOME``. The real ``~/.m2`` and ``~/.ivy2`` are never read or written. Then the standard recipe of
Delta's documentation (``configure_spark_with_delta_pip``: ``spark.jars.packages`` through Ivy) starts a
session in that home and writes and reads a Delta table. Needs Maven and network (Maven Central).

Cost: a few minutes (the fetch, then Ivy downloading Delta's jars for the session); 17 minutes on 2 cores
shared with five other test runs.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FETCH = ROOT / "scripts" / "fetch-delta-jars.sh"
#: Variables of this test process's own Spark and venv that must not leak into the other processes.
_SPARK_ENV = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET",
              "SPARK_HOME", "SPARK_REMOTE", "PYTHONPATH", "JAVA_TOOL_OPTIONS", "FRAGRELEASE_DELTA_JARS",
              "MAVEN_OPTS", "MAVEN_ARGS")
#: Delta's documented recipe (docs.delta.io, "Quickstart", Python with pip): a user's own session.
STANDARD_SESSION = """
import sys
import pyspark
from delta import configure_spark_with_delta_pip

builder = (pyspark.sql.SparkSession.builder.appName("users-own").master("local[1]")
           .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
           .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
           .config("spark.ui.enabled", "false"))
spark = configure_spark_with_delta_pip(builder).getOrCreate()
spark.range(5).write.format("delta").save(sys.argv[1])
print("rows", spark.read.format("delta").load(sys.argv[1]).count())
spark.stop()
"""


def pom_only_folders(root: Path) -> list[str]:
    """Folders under ``root`` holding a Maven POM but no jar: what stops Spark's Ivy resolver."""
    found = []
    for folder, _, files in os.walk(root):
        if any(f.endswith(".pom") for f in files) and not any(f.endswith(".jar") for f in files):
            found.append(os.path.relpath(folder, root))
    return sorted(found)


def test_pom_only_folders_finds_what_ivy_trips_on(tmp_path):
    """The check below can fail: it finds the state the old setup left (a POM, no jar)."""
    bad = tmp_path / ".m2" / "repository" / "org" / "slf4j" / "slf4j-api" / "2.0.13"
    bad.mkdir(parents=True)
    (bad / "slf4j-api-2.0.13.pom").write_text("<project/>")
    good = tmp_path / ".m2" / "repository" / "io" / "delta" / "delta-storage" / "4.4.0"
    good.mkdir(parents=True)
    (good / "delta-storage-4.4.0.pom").write_text("<project/>")
    (good / "delta-storage-4.4.0.jar").write_bytes(b"")
    assert pom_only_folders(tmp_path) == [os.path.join(".m2", "repository", "org", "slf4j", "slf4j-api", "2.0.13")]


def test_setup_names_the_pom_only_folders_an_earlier_setup_left_and_removes_nothing(tmp_path):
    """A machine an earlier setup left broken (docs/deployment.md) is told which folders to remove; the
    folders are not this run's, so they stay. The jars are already there: no Maven, no network."""
    from fragrelease.jobs.session import delta_jar_coordinate

    _, artifact, version = delta_jar_coordinate().split(":")
    home, jars = tmp_path / "home", tmp_path / "jars" / f"{artifact}-{version}"
    jars.mkdir(parents=True)
    (jars / f"{artifact}-{version}.jar").write_bytes(b"")
    left = home / ".m2" / "repository" / "org" / "slf4j" / "slf4j-api" / "2.0.13"
    left.mkdir(parents=True)
    (left / "slf4j-api-2.0.13.pom").write_text("<project/>")
    whole = home / ".m2" / "repository" / "org" / "xerial" / "snappy" / "snappy-java" / "1.1.10.7"
    whole.mkdir(parents=True)
    for name in ("snappy-java-1.1.10.7.pom", "snappy-java-1.1.10.7.jar"):
        (whole / name).write_bytes(b"")
    env = {k: v for k, v in os.environ.items() if k not in _SPARK_ENV}
    env.update(HOME=str(home), FRAGRELEASE_DELTA_JARS=str(jars))
    proc = subprocess.run(["bash", str(FETCH), sys.executable], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{left} holds a POM without its jar" in lines[0], proc.stderr  # not the whole one
    assert sorted(p.name for p in left.iterdir()) == ["slf4j-api-2.0.13.pom"]  # left as it was


@pytest.mark.slow  # Maven's fetch and a session that resolves Delta through Ivy (2-3 minutes, network)
@pytest.mark.spark  # starts its own local Spark session in another process
def test_after_setups_fetch_the_standard_delta_pip_session_writes_a_delta_table(tmp_path):
    from fragrelease.jobs.session import delta_jar_coordinate

    if shutil.which("mvn") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but Maven (mvn) is not installed: setup's jar fetch is not checked")
        pytest.skip("Maven (mvn) is not installed")
    _, artifact, version = delta_jar_coordinate().split(":")
    home, jars = tmp_path / "home", tmp_path / "jars" / f"{artifact}-{version}"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in _SPARK_ENV}
    env.update(HOME=str(home), JAVA_TOOL_OPTIONS=f"-Duser.home={home}", FRAGRELEASE_DELTA_JARS=str(jars))
    fetch = subprocess.run(["bash", str(FETCH), sys.executable], capture_output=True, text=True, env=env,
                           cwd=tmp_path, timeout=1200)
    assert fetch.returncode == 0, fetch.stdout + fetch.stderr[-3000:]
    assert (jars / f"{artifact}-{version}.jar").is_file(), sorted(p.name for p in jars.iterdir())
    # the user's Maven repository untouched: nothing under ~/.m2, let alone a POM without its jar
    assert pom_only_folders(home) == []
    assert not (home / ".m2").exists(), sorted(str(p.relative_to(home)) for p in (home / ".m2").rglob("*"))[:20]
    # a second run finds the jars and fetches nothing
    again = subprocess.run(["bash", str(FETCH), sys.executable], capture_output=True, text=True, env=env,
                           cwd=tmp_path, timeout=300)
    assert again.returncode == 0 and again.stdout == "", again.stdout + again.stderr

    table = tmp_path / "users-table"
    session = subprocess.run([sys.executable, "-c", STANDARD_SESSION, str(table)], capture_output=True, text=True,
                             env=env, cwd=tmp_path, timeout=1500)
    assert session.returncode == 0, session.stderr[-3000:]
    assert "rows 5" in session.stdout.splitlines(), session.stdout
    assert (table / "_delta_log" / "00000000000000000000.json").is_file()
    assert not (home / ".m2").exists()  # Ivy keeps its own cache (~/.ivy2*); Maven's repository was never made
