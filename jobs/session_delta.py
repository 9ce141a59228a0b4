"""Delta Lake's Spark classes in the embedded session (:func:`fragrelease.jobs.session.get_spark`).

Delta Lake in the embedded session (only there: sessions from spark-submit, Spark Connect or
Databricks keep their own configuration). ``FRAGRELEASE_DELTA`` chooses:

- ``auto`` (default): configure Delta's Spark classes (``spark.sql.extensions`` =
  ``io.delta.sql.DeltaSparkSessionExtension``, ``spark.sql.catalog.spark_catalog`` =
  ``org.apache.spark.sql.delta.catalog.DeltaCatalog``) with the jars of
  :func:`delta_jar_coordinate`: from the folder :func:`delta_jars_dir` (filled once by
  ``scripts/setup.sh`` with Maven; works offline afterwards), else through ``spark.jars.packages``
  (Spark's Ivy resolver, cached in ``~/.ivy2``). If neither works, the session starts without
  Delta's classes, one warning is logged, and tables are committed with delta-rs instead
  (:mod:`fragrelease.jobs.storage`).
- ``spark``: as ``auto``, but a session without Delta's classes is an error
  (:class:`fragrelease.errors.DeltaUnavailableError`).
- ``off``: never configure Delta's classes (the delta-rs path).

``FRAGRELEASE_DELTA_JARS`` names another jar folder than ``<venv>/fragrelease-jars/<artifact>-<version>``.
"""
from __future__ import annotations

import logging
import os
import sys

from fragrelease.errors import ConfigError, DeltaUnavailableError

#: The session's one logger: the messages of every session module keep the name they had when these were one module.
log = logging.getLogger("fragrelease.jobs.session")

#: Delta's Spark session extension and catalog (the names delta-spark documents).
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
#: Tasks of Delta's state reconstruction in the embedded session (``spark.databricks.delta.snapshotPartitions``):
#: the logs fragrelease reads hold a few commits; one task replays them (Delta's default is 50).
DELTA_SNAPSHOT_PARTITIONS = 1
#: Delta's jars are built for Scala 2.13 only since Delta 4.
_SCALA = "2.13"
_warned_no_delta = False


def delta_mode() -> str:
    """``FRAGRELEASE_DELTA`` (``auto``, ``spark`` or ``off``; default ``auto``).

    Raises
    ------
    ConfigError
        Any other value.
    """
    mode = (os.environ.get("FRAGRELEASE_DELTA") or "auto").strip().lower()
    if mode not in ("auto", "spark", "off"):
        raise ConfigError(f"FRAGRELEASE_DELTA must be auto, spark or off, not {os.environ['FRAGRELEASE_DELTA']!r}")
    return mode


def delta_jar_coordinate() -> str:
    """The Maven coordinate of the delta-spark jar matching the installed pyspark and delta-spark packages.

    E.g. ``io.delta:delta-spark_4.2_2.13:4.4.0`` for pyspark 4.2.x and delta-spark 4.4.0 (the Python
    package and the jar must be the same Delta version; setup.py pins both).

    Raises
    ------
    DeltaUnavailableError
        The delta-spark Python package is not installed.
    """
    from importlib import metadata

    import pyspark

    try:
        delta = metadata.version("delta-spark")
    except metadata.PackageNotFoundError:
        raise DeltaUnavailableError("the delta-spark package is not installed (pip install delta-spark)") from None
    spark_mm = ".".join(pyspark.__version__.split(".")[:2])
    return f"io.delta:delta-spark_{spark_mm}_{_SCALA}:{delta}"


def delta_jars_dir() -> str:
    """The folder of Delta's jars ``scripts/setup.sh`` fills: ``$FRAGRELEASE_DELTA_JARS``, else
    ``<sys.prefix>/fragrelease-jars/<artifact>-<version>`` (inside the virtualenv)."""
    given = os.environ.get("FRAGRELEASE_DELTA_JARS")
    if given:
        return os.path.abspath(given)
    _, artifact, version = delta_jar_coordinate().split(":")
    return os.path.join(sys.prefix, "fragrelease-jars", f"{artifact}-{version}")


def _delta_jars() -> list[str]:
    """The jar files in :func:`delta_jars_dir` if it holds the matching delta-spark jar, else []."""
    folder = delta_jars_dir()
    _, artifact, version = delta_jar_coordinate().split(":")
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".jar"))
    except OSError:
        return []
    if f"{artifact}-{version}.jar" not in names:
        return []
    return [os.path.join(folder, n) for n in names]

def _with_delta(builder):
    """``builder`` configured with Delta's extension, catalog and jars (a jar folder, else Ivy)."""
    jars = _delta_jars()
    builder = (builder.config("spark.sql.extensions", DELTA_EXTENSION)
               .config("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
               .config("spark.databricks.delta.snapshotPartitions", str(DELTA_SNAPSHOT_PARTITIONS)))
    if jars:
        log.debug("Delta Lake jars from %s", delta_jars_dir())
        return builder.config("spark.jars", ",".join(jars))
    log.debug("Delta Lake jars through spark.jars.packages=%s", delta_jar_coordinate())
    return builder.config("spark.jars.packages", delta_jar_coordinate())


def _warn_no_delta(cause: str) -> None:
    global _warned_no_delta
    if not _warned_no_delta:
        _warned_no_delta = True
        log.warning("Delta Lake's Spark classes are unavailable (%s): tables are committed with delta-rs; "
                    "run scripts/setup.sh once with network access, or set FRAGRELEASE_DELTA=off to silence this",
                    cause)



def delta_available(spark) -> bool:
    """True when Delta Lake's Spark classes are configured (clusters with delta-spark, Databricks)."""
    if "DATABRICKS_RUNTIME_VERSION" in os.environ:
        return True
    try:
        ext = spark.conf.get("spark.sql.extensions", "") or ""
    except Exception:  # pragma: no cover - conf not readable under some Connect servers
        ext = ""
    return "io.delta.sql.DeltaSparkSessionExtension" in ext
