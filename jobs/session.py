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

An embedded session on a ``local`` master whose declared inputs are small (``get_spark(..., small_inputs=True)``: every
input a local file or folder, :data:`SMALL_INPUT_BYTES` in all, :func:`inputs_are_small`, measured before
the JVM starts) runs its driver JVM with the C1 compiler only (:data:`SMALL_INPUT_JAVA_OPTIONS`). A
new JVM's first small release spends most of its CPU in the JVM (its JIT compilers about half of
it, docs/benchmarks.md, "Where a new JVM's first release spends its CPU (a flight recording)"), on
code that C2 would optimize only after the release is over; a session over larger inputs keeps
the JVM's default tiered compilation (C2), which large fragments need. The sizes decide one JVM
option and are written nowhere (docs/benchmarks.md, "Issue 41, session 4: the first release's warm-up").

An embedded session on a ``local`` master also starts its Python workers in the background
(:func:`warm_python_workers`): one throw-away ``mapInPandas`` task per core imports pandas, Arrow and
the mechanism's modules while the first steps of a release run Spark SQL only, instead of in the
release's first Python stage. ``WARM_PYTHON_WORKERS = False`` turns it off (benchmarks compare).

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

import atexit
import contextlib
import logging
import os
import re
import shutil
import sys
import threading
import warnings
from pathlib import Path
from typing import Iterable, Iterator
from urllib.parse import unquote, urlparse

from fragrelease.errors import ConfigError, DeltaUnavailableError, FragReleaseError

from .class_archive import java_options

log = logging.getLogger(__name__)

#: The embedded session's Spark (log4j) log level when ``FRAGRELEASE_SPARK_LOG_LEVEL`` is unset. The
#: command line sets ``FATAL`` (``WARN`` with ``--verbose``, :func:`set_default_log_level`): a failed
#: job's Java stack traces (hundreds of ``ERROR`` lines) would bury the one line it prints instead.
_default_log_level = "ERROR"


def set_default_log_level(level: str) -> None:
    """The Spark log level of sessions this process creates from now on, unless ``FRAGRELEASE_SPARK_LOG_LEVEL`` is set."""
    global _default_log_level
    _default_log_level = level

#: Delta's Spark session extension and catalog (the names delta-spark documents).
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
#: Tasks of Delta's state reconstruction in the embedded session (``spark.databricks.delta.snapshotPartitions``):
#: the logs fragrelease reads hold a few commits; one task replays them (Delta's default is 50).
DELTA_SNAPSHOT_PARTITIONS = 1
#: Compiled classes the embedded session keeps (``spark.sql.codegen.cache.maxEntries``, a static
#: setting; Spark's default is 100): a release compiles about 200, so with 100 every release compiled
#: them all again. A generated class is tens of kilobytes.
CODEGEN_CACHE_ENTRIES = 1000
#: PySpark's DataFrame debugging (call-site capture on every Column function) in the sessions
#: fragrelease builds: off (the module docstring says why).
DATAFRAME_DEBUGGING = ("spark.python.sql.dataFrameDebugging.enabled", "false")
#: Start the Python workers of an embedded local session in the background (:func:`warm_python_workers`).
WARM_PYTHON_WORKERS = True
#: The embedded driver JVM's extra options (``spark.driver.defaultJavaOptions``): the class archive
#: ``scripts/setup.sh`` builds, when there is one (:mod:`fragrelease.jobs.class_archive`).
driver_java_options = java_options
#: Declared inputs of at most this many bytes in all (local files and folders) make the embedded session
#: "small" (:func:`inputs_are_small`): its driver JVM gets :data:`SMALL_INPUT_JAVA_OPTIONS`.
SMALL_INPUT_BYTES = 16 << 20
#: The driver JVM's options for small inputs: the C1 compiler only, with a code cache large enough for a
#: release's compiled methods (the default 48 MB of a C1-only JVM fills, and the JVM then stops compiling).
SMALL_INPUT_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
#: The embedded driver JVM's log4j2 configuration (shipped beside this module; :func:`log4j_java_options`).
LOG4J_CONFIG = os.path.join(os.path.dirname(os.path.realpath(__file__)), "log4j2.properties")
#: Lines the JVM prints on start-up whatever its logging configuration (Spark's launcher always adds
#: ``--add-modules=jdk.incubator.vector``): dropped from standard error while the session starts
#: (:func:`jvm_startup_filtered`).
JVM_STARTUP_NOISE = ("WARNING: Using incubator modules: ",)
#: The environment variable naming the embedded session's persistent catalog folder (:func:`catalog_dir`).
CATALOG_DIR_ENV = "FRAGRELEASE_CATALOG_DIR"
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


def catalog_dir() -> str:
    """The embedded session's persistent catalog folder: ``$FRAGRELEASE_CATALOG_DIR``, else
    ``~/.fragrelease/catalog`` (absolute). It holds ``warehouse/`` (managed tables, one folder per
    database ``<db>.db``), ``metastore_db/`` (Spark's Derby metastore) and ``derby.log``."""
    given = os.environ.get(CATALOG_DIR_ENV)
    return os.path.abspath(os.path.expanduser(given or os.path.join("~", ".fragrelease", "catalog")))


def catalog_warehouse(folder: str | None = None) -> str:
    """The warehouse (``spark.sql.warehouse.dir``) of the persistent catalog in ``folder`` (default
    :func:`catalog_dir`); database ``db`` lives in ``<warehouse>/db.db``, ``default`` in the warehouse itself."""
    return os.path.join(folder or catalog_dir(), "warehouse")


def check_catalog_dir() -> str:
    """:func:`catalog_dir`, checked before any JVM starts; created (0700) when missing.

    Raises
    ------
    ConfigError
        A folder whose path cannot travel in a JDBC URL and a JVM option, or that cannot be created.
    """
    folder = catalog_dir()
    if re.search(r"[\s;'\"\\]", folder):
        raise ConfigError(f"{CATALOG_DIR_ENV}: the catalog folder {folder!r} must not contain spaces, ';', quotes "
                          "or backslashes (it travels in a JDBC URL and a JVM option); choose another folder")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{CATALOG_DIR_ENV}: cannot create the catalog folder {folder!r}: "
                          f"{exc.strerror or type(exc).__name__}") from None
    return folder


def _with_catalog(builder):
    """``builder`` with a catalog that outlives the process: Spark's Hive catalog (the Hive classes ship
    with pyspark) over a Derby metastore and a warehouse in :func:`catalog_dir`."""
    folder = catalog_dir()
    return (builder.config("spark.sql.catalogImplementation", "hive")
            .config("spark.sql.warehouse.dir", Path(catalog_warehouse(folder)).as_uri())
            .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                    f"jdbc:derby:;databaseName={os.path.join(folder, 'metastore_db')};create=true"))


def _tree_bytes(path: str, limit: int) -> int | None:
    """Bytes of the regular files at or under the local ``path`` (symbolic links not followed), counted
    up to just over ``limit``; None when ``path`` is neither a regular file nor a folder, or cannot be read."""
    try:
        if os.path.isfile(path):
            return os.path.getsize(path)
        if not os.path.isdir(path):
            return None
        total = 0
        for top, _dirs, files in os.walk(path, onerror=_raise):
            for name in files:
                full = os.path.join(top, name)
                if not os.path.islink(full):
                    total += os.path.getsize(full)
                if total > limit:
                    return total
        return total
    except OSError:
        return None


def _raise(exc: OSError) -> None:
    raise exc


def inputs_are_small(paths: Iterable[str | None], limit: int = SMALL_INPUT_BYTES) -> bool:
    """True when every path of ``paths`` is a local file or folder (a plain path or a ``file:`` URI, no
    glob) and they hold at most ``limit`` bytes in all; False for an empty list, a ``None`` (an input
    that is not a path: a catalog table), a remote URI, a glob, a missing path or one that cannot be read.

    Reads file sizes only (``os.stat``), never contents; the answer is used for a JVM option and is
    written nowhere (:data:`SMALL_INPUT_JAVA_OPTIONS`).
    """
    total, seen = 0, 0
    for raw in paths:
        seen += 1
        if raw is None or any(c in raw for c in "*?[{"):
            return False
        parsed = urlparse(raw)
        if parsed.scheme == "file":
            path = unquote(parsed.path)
        elif parsed.scheme == "" or (len(parsed.scheme) == 1 and os.name == "nt"):
            path = raw
        else:
            return False
        size = _tree_bytes(path, limit - total)
        if size is None:
            return False
        total += size
        if total > limit:
            return False
    return seen > 0


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


def _is_startup_noise(line: bytes) -> bool:
    text = line.decode("utf-8", "replace").rstrip("\r\n")
    return any(text.startswith(prefix) for prefix in JVM_STARTUP_NOISE)


def _forward(read_fd: int, write_fd: int) -> None:
    """Copy the lines of ``read_fd`` to ``write_fd``, without the lines of :data:`JVM_STARTUP_NOISE`."""
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        for line in iter(pipe.readline, b""):
            if not _is_startup_noise(line):
                try:
                    os.write(write_fd, line)
                except OSError:  # standard error closed: nothing to forward to
                    return


@contextlib.contextmanager
def jvm_startup_filtered() -> Iterator[None]:
    """Standard error (file descriptor 2), while the embedded session's JVM starts, goes through a pipe that
    drops the lines of :data:`JVM_STARTUP_NOISE` and forwards everything else; the JVM keeps the pipe (its
    later errors are forwarded by a daemon thread), this process writes to standard error directly again
    afterwards. Not on Windows, nor when file descriptor 2 is not open."""
    if os.name != "posix":
        yield
        return
    try:
        sys.stderr.flush()
        original = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    threading.Thread(target=_forward, args=(read_fd, original), name="fragrelease-jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(original, 2)  # `original` stays open: the forwarding thread writes to it


def local_cores(master: str) -> int:
    """The task slots of a ``local`` master: ``local`` → 1, ``local[4]`` / ``local[4, 2]`` → 4,
    ``local[*]`` → the machine's cores; 0 for any other master (a cluster)."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if m is None:
        return 0
    if m.group(1) is None:
        return 1
    return (os.cpu_count() or 1) if m.group(1) == "*" else int(m.group(1))


def _warm_worker(batches: Iterator) -> Iterator:
    """A Python worker's first task: import what the protection's tasks import, pass the rows on."""
    import scipy.optimize  # noqa: F401 - the isotonic fit's, imported by fragrelease.idpir.postprocess when used

    import fragrelease.idpir.mechanisms  # noqa: F401 - the import is the point
    import fragrelease.idpir.postprocess  # noqa: F401
    import fragrelease.rng.laplace  # noqa: F401

    yield from batches


def warm_workers(cores: int, small_inputs: bool = False) -> int:
    """How many Python workers :func:`warm_python_workers` starts on a local master with ``cores`` task
    slots: one per slot; for small inputs (:func:`inputs_are_small`) one per slot but one, at least one.
    A small release's Python stages run in one task (one worker), and the slot left free runs its first
    JVM tasks (reading and validating the first fragment), which otherwise wait for the warm-up's
    imports: on 2 cores that step took about 1 s longer (docs/benchmarks.md, "Issue 41, session 6"). A
    large input's Python stages use every slot: a worker not warmed would import on its first task."""
    return max(1, cores - 1) if small_inputs else cores


def warm_python_workers(spark, small_inputs: bool = False) -> threading.Thread | None:
    """Start throw-away ``mapInPandas`` tasks (:func:`warm_workers` of the local cores, ``small_inputs`` as
    the session was sized) in a daemon thread; return the thread.

    A fresh local session pays for its Python workers (process start, pandas, Arrow, OpenDP and the
    mechanism's imports) and for Spark's first Arrow stage in the first Python stage of a release,
    about 2-5 s (docs/benchmarks.md, "Small release fixed cost (issue 26, session 9)"). The first
    steps of a release (reading and validating the fragments) run no Python tasks, so the warm-up
    overlaps them. A row of ``spark.range`` per task only, no data; errors are ignored (the release
    starts the workers itself). ``None`` for a non-local master or when :data:`WARM_PYTHON_WORKERS`
    is False.
    """
    try:
        cores = local_cores(spark.conf.get("spark.master", "") or "")
    except Exception:  # noqa: BLE001 - a conf that cannot be read: no warm-up
        return None
    if not WARM_PYTHON_WORKERS or cores < 1:
        return None
    tasks = warm_workers(cores, small_inputs)

    def run() -> None:
        try:
            spark.range(0, tasks, 1, tasks).mapInPandas(_warm_worker, "id long").count()
        except Exception as exc:  # noqa: BLE001 - a warm-up that failed changes nothing
            log.debug("warming the Python workers failed: %s", type(exc).__name__)

    thread = threading.Thread(target=run, name="fragrelease-warm-python-workers", daemon=True)
    thread.start()
    # at exit, let the warm-up job end before the session stops (atexit runs this before the stop
    # registered earlier): a job ending during the stop makes Spark log a rejected task result
    atexit.register(thread.join, 30)
    return thread


def _warmed(spark, small_inputs: bool = False):
    warm_python_workers(spark, small_inputs)
    return spark


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
