"""Getting a SparkSession that works on a laptop, under spark-submit, on Databricks and via Connect.

- An active session (Databricks, notebooks, a test fixture) is reused as it is.
- Under ``spark-submit`` (``PYSPARK_GATEWAY_PORT`` set), ``SPARK_REMOTE`` (Spark Connect) or a
  Databricks runtime, the session comes from the environment's configuration.
- Otherwise an embedded local session (``local[*]``) is started with a small, quiet configuration;
  this needs a Java runtime (``JAVA_HOME`` or ``java`` on ``PATH``).

The embedded session rebuilds a Delta table's state from its log in
:data:`DELTA_SNAPSHOT_PARTITIONS` task (Delta's default, 50 tasks, is sized for clusters: on a laptop
the first read of every new table paid three jobs of 50 tasks, about half of a small release's
Spark time; docs/benchmarks.md, "Small release fixed cost (issue 26, session 9)").

The embedded session keeps :data:`CODEGEN_CACHE_ENTRIES` compiled classes
(``spark.sql.codegen.cache.maxEntries``; Spark's default, 100, is fewer than the about 200 classes one
small release compiles, so every release compiled them all again: about 1.5 s of a 10-11 s warm
release; docs/benchmarks.md, "Issue 26, session 10").

The embedded session's driver JVM maps the class-data-sharing archive of Spark's classes that
``scripts/setup.sh`` builds (:mod:`fragrelease.jobs.class_archive`; ``spark.driver.defaultJavaOptions``),
so a new JVM does not load and verify them from the jars again.

Embedded and ``spark-submit`` sessions turn PySpark's DataFrame debugging off
(:data:`DATAFRAME_DEBUGGING`, ``spark.python.sql.dataFrameDebugging.enabled = false``; Spark's
documentation: "enabled by default, but has a non-trivial performance overhead because of the stack
trace collection"). With it on, every Column function the jobs call (``F.sum``, ``.cast``,
``.alias``, ...) also walks the Python stack and makes four to five more Py4J calls to record the
call site for error messages: 49,500 Py4J calls in a warm 1,000-row release against 19,600
without, 1-3 s of its 9-10 s warm and 3-4 s of its first run in a new JVM (docs/benchmarks.md,
"Issue 26, session 12"). fragrelease reports its own errors in one line naming the step, so the call
site in Spark's message is not needed. A session that is already active (a notebook, Databricks)
keeps its own setting.

The session's other parts are modules of their own, whose public names this module re-exports:
Delta Lake's classes (:mod:`.session_delta`), the persistent catalog (:mod:`.session_catalog`), the
driver JVM's JIT for small inputs and its start-up lines (:mod:`.session_jvm`) and the Python workers
started in the background (:mod:`.session_workers`; its switch ``WARM_PYTHON_WORKERS`` is read there).
"""
from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import sys
import warnings
from pathlib import Path

from fragrelease.errors import DeltaUnavailableError, FragReleaseError

from .class_archive import java_options
from .session_catalog import CATALOG_DIR_ENV, _with_catalog, catalog_dir, catalog_warehouse, check_catalog_dir
from .session_delta import (
    DELTA_CATALOG,
    DELTA_EXTENSION,
    DELTA_SNAPSHOT_PARTITIONS,
    _delta_jars,
    _warn_no_delta,
    _with_delta,
    delta_available,
    delta_jar_coordinate,
    delta_jars_dir,
    delta_mode,
)
from .session_jvm import (
    JVM_STARTUP_NOISE,
    SMALL_INPUT_BYTES,
    SMALL_INPUT_JAVA_OPTIONS,
    inputs_are_small,
    jvm_startup_filtered,
)
from .session_workers import local_cores, warm_python_workers, warm_workers

#: What this module gives the rest of the project (its own names and its parts' public ones).
__all__ = [
    "CATALOG_DIR_ENV", "CODEGEN_CACHE_ENTRIES", "DATAFRAME_DEBUGGING", "DELTA_CATALOG", "DELTA_EXTENSION",
    "DELTA_SNAPSHOT_PARTITIONS", "JVM_STARTUP_NOISE", "LOG4J_CONFIG", "SMALL_INPUT_BYTES", "SMALL_INPUT_JAVA_OPTIONS",
    "active_session_exists", "catalog_dir", "catalog_warehouse", "check_catalog_dir",
    "delta_available", "delta_jar_coordinate", "delta_jars_dir", "delta_mode", "driver_java_options", "ensure_java",
    "get_spark", "inputs_are_small", "jvm_startup_filtered", "local_cores", "log4j_java_options",
    "set_default_log_level", "warm_python_workers", "warm_workers",
]

log = logging.getLogger(__name__)

#: The embedded session's Spark (log4j) log level when ``FRAGRELEASE_SPARK_LOG_LEVEL`` is unset. The
#: command line sets ``FATAL`` (``WARN`` with ``--verbose``, :func:`set_default_log_level`): a failed
#: job's Java stack traces (hundreds of ``ERROR`` lines) would bury the one line it prints instead.
_default_log_level = "ERROR"


def set_default_log_level(level: str) -> None:
    """The Spark log level of sessions this process creates from now on, unless ``FRAGRELEASE_SPARK_LOG_LEVEL`` is set."""
    global _default_log_level
    _default_log_level = level


#: Compiled classes the embedded session keeps (``spark.sql.codegen.cache.maxEntries``, a static
#: setting; Spark's default is 100): a release compiles about 200, so with 100 every release compiled
#: them all again. A generated class is tens of kilobytes.
CODEGEN_CACHE_ENTRIES = 1000
#: PySpark's DataFrame debugging (call-site capture on every Column function) in the sessions
#: fragrelease builds: off (the module docstring says why).
DATAFRAME_DEBUGGING = ("spark.python.sql.dataFrameDebugging.enabled", "false")
#: The embedded driver JVM's extra options (``spark.driver.defaultJavaOptions``): the class archive
#: ``scripts/setup.sh`` builds, when there is one (:mod:`fragrelease.jobs.class_archive`).
driver_java_options = java_options
#: The embedded driver JVM's log4j2 configuration (shipped beside this module; :func:`log4j_java_options`).
LOG4J_CONFIG = os.path.join(os.path.dirname(os.path.realpath(__file__)), "log4j2.properties")


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


def active_session_exists() -> bool:
    """True if this process already has an active SparkSession (a notebook, Databricks, a test fixture), which
    :func:`get_spark` reuses with its own catalog. Does not import pyspark when nothing has."""
    if sys.modules.get("pyspark") is None:
        return False
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return False
    return SparkSession.getActiveSession() is not None


def get_spark(app_name: str = "fragrelease", master: str | None = None, *, shuffle_partitions: int = 8,
              catalog: bool = False, small_inputs: bool = False):
    """A SparkSession (see the module docstring for which one).

    Parameters
    ----------
    app_name : name shown in the Spark UI and logs.
    master : e.g. ``"local[2]"``; forces a new local/standalone session when no session is active.
    shuffle_partitions : for embedded local sessions only.
    catalog : for a new embedded session: keep its catalog across processes (:func:`_with_catalog`, a
        Derby metastore and a warehouse in :func:`catalog_dir`); only one process at a time can open
        that metastore. Without it, the embedded session's catalog is Spark's in-memory one.
    small_inputs : for a new embedded session: every input the caller will read is small (the caller
        decides before the JVM starts, e.g. with :func:`inputs_are_small`); a new embedded session on a
        ``local`` master then runs its driver JVM, which is also its executor, with C1 only
        (:data:`SMALL_INPUT_JAVA_OPTIONS`). Ignored for an active, managed or Connect session and for
        other masters.

    Raises
    ------
    MissingDependencyError
        pyspark is missing or older than 4.0 (:func:`fragrelease.jobs.require_pyspark`).
    FragReleaseError
        No Java runtime for an embedded session.
    ConfigError
        ``catalog`` and a catalog folder whose path cannot be passed to the JVM.
    """
    from . import require_pyspark

    require_pyspark()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if master is None and _managed_environment():
        if os.environ.get("SPARK_REMOTE", "").startswith("local"):
            # pyspark starts a local Spark Connect server; its Python workers must run this interpreter
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            with jvm_startup_filtered(), warnings.catch_warnings():
                # pyspark sets the builder's options again on the Connect session once the server runs, and
                # warns for each static one (the server already has it): not the user's concern
                warnings.filterwarnings("ignore", message=r"Failed to set spark\.", category=UserWarning)
                return _stopped_at_exit(_local_connect_builder(app_name).getOrCreate())
        if "PYSPARK_GATEWAY_PORT" in os.environ:  # spark-submit: this process's own session
            return SparkSession.builder.appName(app_name).config(*DATAFRAME_DEBUGGING).getOrCreate()
        return SparkSession.builder.appName(app_name).getOrCreate()
    ensure_java()
    if catalog:
        check_catalog_dir()
    # Local Python workers must run this interpreter (with pandas, numpy and opendp installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    mode = delta_mode()
    the_master = master or os.environ.get("FRAGRELEASE_SPARK_MASTER", "local[*]")
    small = small_inputs and local_cores(the_master) > 0

    def builder():
        b = (
            SparkSession.builder.appName(app_name)
            .master(the_master)
            .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.driver.memory", os.environ.get("FRAGRELEASE_DRIVER_MEMORY", "4g"))
            .config("spark.sql.adaptive.enabled", "true")
            .config("spark.sql.codegen.cache.maxEntries", str(CODEGEN_CACHE_ENTRIES))
            .config(*DATAFRAME_DEBUGGING)
        )
        if os.environ.get("FRAGRELEASE_SPARK_LOG_LEVEL"):  # asked for: Spark also prints the level it sets
            b = b.config("spark.log.level", os.environ["FRAGRELEASE_SPARK_LOG_LEVEL"])
        # the class archive: public class metadata of Spark's jars, no data (fragrelease.jobs.class_archive);
        # the JVM's logging: errors only, no start-up lines (LOG4J_CONFIG)
        derby = f"-Dderby.system.home={catalog_dir()}" if catalog else None  # derby.log there, not in the cwd
        jit = SMALL_INPUT_JAVA_OPTIONS if small else None
        jvm_options = " ".join(o for o in (driver_java_options(), log4j_java_options(), derby, jit) if o)
        b = _with_catalog(b) if catalog else b
        return b.config("spark.driver.defaultJavaOptions", jvm_options) if jvm_options else b

    if mode == "off":
        with jvm_startup_filtered():
            return _warmed(_stopped_at_exit(builder().getOrCreate()), small)
    try:
        with jvm_startup_filtered():
            return _warmed(_stopped_at_exit(_with_delta(builder()).getOrCreate()), small)
    except DeltaUnavailableError as e:
        cause = str(e)
    except Exception as e:  # noqa: BLE001 - Ivy resolution failures surface as a JVM that does not start
        cause = f"Spark could not load {delta_jar_coordinate()} ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
    if mode == "spark":
        raise DeltaUnavailableError(f"FRAGRELEASE_DELTA=spark but Delta's Spark classes are unavailable: {cause}; "
                                    "run scripts/setup.sh once with network access")
    _warn_no_delta(cause)
    with jvm_startup_filtered():
        return _warmed(_stopped_at_exit(builder().getOrCreate()), small)


def _local_connect_builder(app_name: str):
    """The builder of a session on the local Spark Connect server pyspark starts for ``SPARK_REMOTE=local...``:
    the options given here configure that server's session. No console progress, the JVM's logging of
    :func:`log4j_java_options`, and Delta's classes from the jar folder :func:`delta_jars_dir` when it holds
    them and ``FRAGRELEASE_DELTA`` is not ``off``, so releases through Connect are written by Delta's Spark
    API with their table properties and column comments, as in the embedded session (without the folder:
    delta-rs, with one warning; ``FRAGRELEASE_DELTA=spark`` makes that an error).

    Raises
    ------
    DeltaUnavailableError
        ``FRAGRELEASE_DELTA=spark`` and no jar folder.
    """
    from pyspark.sql import SparkSession

    b = SparkSession.builder.appName(app_name).config("spark.ui.showConsoleProgress", "false")
    logging_options = log4j_java_options()
    if logging_options:
        b = b.config("spark.driver.defaultJavaOptions", logging_options)
    mode = delta_mode()
    if mode == "off":
        return b
    if _delta_jars():
        return _with_delta(b)
    cause = f"no jar folder {delta_jars_dir()} for the local Spark Connect server"
    if mode == "spark":
        raise DeltaUnavailableError(f"FRAGRELEASE_DELTA=spark but Delta's Spark classes are unavailable: {cause}; "
                                    "run scripts/setup.sh once with network access")
    _warn_no_delta(cause)
    return b


def log4j_java_options() -> str:
    """The driver JVM's logging options: the ``log4j2.properties`` beside this module (Spark's warnings and
    start-up lines off, errors to standard error) at the level ``FRAGRELEASE_SPARK_LOG_LEVEL`` (default
    ``error``; the command line sets ``fatal``, ``warn`` with ``--verbose``: :func:`set_default_log_level`); ``""`` when the file is missing or the level is not a plain word."""
    level = (os.environ.get("FRAGRELEASE_SPARK_LOG_LEVEL") or _default_log_level).strip().lower()
    if not os.path.isfile(LOG4J_CONFIG) or not re.fullmatch(r"[a-z]+", level):
        return ""
    return f"-Dlog4j.configurationFile={Path(LOG4J_CONFIG).as_uri()} -Dfragrelease.log.level={level}"



def _warmed(spark, small_inputs: bool = False):
    warm_python_workers(spark, small_inputs)
    return spark


def _stopped_at_exit(spark):
    """Stop a session this module started when the process exits (a local Connect server included)."""
    atexit.register(spark.stop)
    return spark
