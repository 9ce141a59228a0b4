"""Getting a SparkSession that works on a laptop, under spark-submit, on Databricks and via Connect.

- An active session (Databricks, notebooks, a test fixture) is reused as it is.
- Under ``spark-submit`` (``PYSPARK_GATEWAY_PORT`` set), ``SPARK_REMOTE`` (Spark Connect) or a
  Databricks runtime, the session comes from the environment's configuration.
- Otherwise an embedded local session (``local[*]``) is started with a small, quiet configuration;
  this needs a Java runtime (``JAVA_HOME`` or ``java`` on ``PATH``).
"""
from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys

from fragrelease.errors import FragReleaseError

log = logging.getLogger(__name__)


def ensure_java() -> str:
    """Return JAVA_HOME or the java on PATH; raise a clear error when there is none.

    Raises
    ------
    FragReleaseError
        No Java runtime (Spark 4 needs Java 17 or 21).
    """
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return home
    java = shutil.which("java")
    if java:
        return java
    raise FragReleaseError(
        "no Java runtime found: Spark needs Java 17 or 21. Install one (e.g. 'sudo apt-get install "
        "openjdk-17-jre-headless') and set JAVA_HOME or put java on PATH, then retry"
    )


def _managed_environment() -> bool:
    return any(v in os.environ for v in ("PYSPARK_GATEWAY_PORT", "SPARK_REMOTE", "DATABRICKS_RUNTIME_VERSION"))


def get_spark(app_name: str = "fragrelease", master: str | None = None, *, shuffle_partitions: int = 8):
    """A SparkSession (see the module docstring for which one).

    Parameters
    ----------
    app_name : name shown in the Spark UI and logs.
    master : e.g. ``"local[2]"``; forces a new local/standalone session when no session is active.
    shuffle_partitions : for embedded local sessions only.

    Raises
    ------
    MissingDependencyError
        pyspark is missing or older than 4.0 (:func:`fragrelease.jobs.require_pyspark`).
    FragReleaseError
        No Java runtime for an embedded session.
    """
    from fragrelease.jobs import require_pyspark

    require_pyspark()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if master is None and _managed_environment():
        if os.environ.get("SPARK_REMOTE", "").startswith("local"):
            # pyspark starts a local Spark Connect server; its Python workers must run this interpreter
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            return _stopped_at_exit(SparkSession.builder.appName(app_name).getOrCreate())
        return SparkSession.builder.appName(app_name).getOrCreate()
    ensure_java()
    # Local Python workers must run this interpreter (with pandas, numpy and opendp installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master or os.environ.get("FRAGRELEASE_SPARK_MASTER", "local[*]"))
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", os.environ.get("FRAGRELEASE_DRIVER_MEMORY", "4g"))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.log.level", os.environ.get("FRAGRELEASE_SPARK_LOG_LEVEL", "ERROR"))
    )
    return _stopped_at_exit(builder.getOrCreate())


def _stopped_at_exit(spark):
    """Stop a session this module started when the process exits (a local Connect server included)."""
    atexit.register(spark.stop)
    return spark


def delta_available(spark) -> bool:
    """True when Delta Lake's Spark classes are configured (clusters with delta-spark, Databricks)."""
    if "DATABRICKS_RUNTIME_VERSION" in os.environ:
        return True
    try:
        ext = spark.conf.get("spark.sql.extensions", "") or ""
    except Exception:  # pragma: no cover - conf not readable under some Connect servers
        ext = ""
    return "io.delta.sql.DeltaSparkSessionExtension" in ext
