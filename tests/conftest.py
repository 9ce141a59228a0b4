"""Shared fixtures: one session-scoped local SparkSession (local[2], few shuffle partitions, UI off, UTC).

The tests mirror the source tree (``tests/fragrelease/idpir/`` tests ``fragrelease/idpir/``, ...).
Test-only helpers (noise injection, the retry and Spark Connect scripts) live in ``tests/helpers/``,
which goes on ``sys.path`` and ``PYTHONPATH`` (Python workers and subprocesses import them too). Only
that folder goes on the path: ``tests/`` itself holds folders named ``fragrelease`` and ``jobs`` that
would shadow the installed package as namespace packages. Every test that uses the ``spark`` fixture,
directly or through another fixture, gets the ``spark`` marker, so ``pytest -m "not spark"`` runs the
Spark-free tests alone.

Commit paths: the session has Delta Lake's Spark classes (jars from ``scripts/setup.sh``; the
default, ``FRAGRELEASE_DELTA=auto``), so tables are written through Delta's Spark API. One process
holds one SparkSession, so the path without Delta's classes (delta-rs) runs in a second process:
``FRAGRELEASE_DELTA=off pytest ...`` runs any selection that way, and
``tests/jobs/test_lakehouse.py::test_the_same_release_runs_without_delta_classes`` does so for the
two-owner release in CI. The report header names the path.
"""
from __future__ import annotations

import os
import shlex
import sys
from collections import Counter

import pytest

_HELPERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers")
sys.path.insert(0, _HELPERS)
# Python workers must import the test-only helpers (noise injection) too.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_HELPERS, os.environ.get("PYTHONPATH")) if p)


#: The modules that take longest, longest first (docs/benchmarks.md, "Test suite (issue 26, session 9)" and
#: "Issue 41, session 5: the quick loop"): first those that start their own JVMs (a standalone cluster, a
#: second Python with the lowest pyspark, the notebook's kernel, Spark Connect servers) and those that
#: run several whole releases (CI's full suite), then the quick loop's longest modules, by their seconds
#: in an idle quick loop. xdist's ``--dist loadscope`` hands the modules out in collection order (its
#: reordering is turned off in :func:`pytest_configure`), so both workers draw the short modules last and
#: end together; by default loadscope would send the modules with the most tests first, which put the
#: one-test cluster and notebook modules, and in the quick loop the two-test synthesis audit (14 s), last,
#: with one worker idle. The order only schedules: every test runs either way.
HEAVY_FIRST = (
    "tests/jobs/test_standalone_cluster.py",
    "tests/jobs/idpir/test_pseudonyms_release.py",
    "tests/test_wheel_install.py",
    "tests/test_setup_delta_jars.py",  # a Maven fetch in a throw-away home, then Delta's own pip recipe
    "tests/jobs/test_databricks_bundle.py",  # the synthetic demo job, run locally
    "tests/test_notebook.py",
    "tests/jobs/test_lakehouse.py",
    "tests/jobs/test_api.py",
    "tests/jobs/idpir/test_signed_manifests.py",
    "tests/jobs/idpir/test_workspace_safety.py",
    "tests/jobs/idpir/test_release_e2e.py",
    "tests/jobs/tiers/test_runner.py",
    "tests/jobs/test_spark_connect.py",
    "tests/jobs/idpir/test_spark_protect.py",
    "tests/jobs/diffgen/test_runner.py",
    "tests/jobs/idpir/test_no_redraw.py",
    "tests/fragrelease/idpir/test_category_order.py",
    # the quick loop's (-m "not cluster and not slow") longest modules not named above, 4 s and more each
    "tests/jobs/idpir/test_report_passes.py",
    "tests/jobs/test_bad_input_matrix.py",
    "tests/jobs/idpir/test_unlink.py",
    "tests/jobs/idpir/test_ids_as_values.py",
    "tests/jobs/publications/test_runner.py",
    "tests/experiments/test_audit_synthesis.py",
    "tests/fragrelease/tiers/test_tiers.py",
    "tests/experiments/test_audit_release.py",
    "tests/test_packaging.py",
    "tests/jobs/idpir/test_owner_rerun.py",
    "tests/jobs/idpir/test_committed_rows.py",
    "tests/test_architecture.py",
    "tests/fragrelease/diffgen/test_diffgen.py",
    "tests/jobs/idpir/test_fragment_reuse.py",
    "tests/experiments/test_audit_spark.py",
    "tests/jobs/test_cli_options.py",
    "tests/jobs/test_cli_plan.py",
    "tests/jobs/test_owner_preview.py",
    "tests/jobs/test_output_recovery.py",
    "tests/jobs/test_pandas_input.py",
    "tests/jobs/test_cli_local_catalog.py",
    "tests/jobs/test_partitioning.py",
)


def heavy_first(items) -> None:
    """Reorder ``items`` in place: the modules of :data:`HEAVY_FIRST` in its order, then every other
    module by its number of tests, most first (xdist's own loadscope order; equal counts in the order
    the modules were collected); the tests of one module keep their order (a stable sort)."""
    rank = {path: i for i, path in enumerate(HEAVY_FIRST)}

    def module(item) -> str:
        return getattr(item, "nodeid", "").split("::")[0]

    counts = Counter(module(item) for item in items)
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        first.setdefault(module(item), i)

    def key(item) -> tuple[int, int, int]:
        name = module(item)
        if name in rank:
            return rank[name], 0, 0
        return len(rank), -counts[name], first[name]

    items.sort(key=key)


def pytest_configure(config):
    """Turn off xdist's loadscope reordering (``--no-loadscope-reorder``) for every run: the modules go
    out in the order :func:`heavy_first` collects them, longest first (CI's command also says so)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    """Mark every test whose fixture closure includes ``spark`` (directly or through another fixture),
    and collect the longest modules first (:func:`heavy_first`)."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
    heavy_first(items)


def pytest_report_header(config):
    mode = os.environ.get("FRAGRELEASE_DELTA") or "auto"
    path = "delta-rs (no Delta classes)" if mode == "off" else "Delta's Spark API when its jars load"
    return f"fragrelease commit path: FRAGRELEASE_DELTA={mode}: {path}"


@pytest.fixture(scope="session", autouse=True)
def private_root(tmp_path_factory):
    """Owners' private folders (reports, simulated fragments) go to a temporary root, not ~/."""
    root = str(tmp_path_factory.mktemp("owner-private"))
    os.environ["FRAGRELEASE_PRIVATE_ROOT"] = root
    return root


#: The test session's driver JVM compiles with C1 only (docs/benchmarks.md, "Issue 41, session 3: the
#: quick loop"): the tests run thousands of small Spark jobs, each on tiny data, and C2 spent most of the
#: JVM's CPU compiling code that ran a few times (one third of the JVM's CPU time of
#: ``tests/jobs/idpir/test_spark_protect.py`` saved). Java's arithmetic is the same in C1, C2 and the
#: interpreter (strict IEEE 754 since Java 17), so every equality test still compares the same values.
#: C1 alone would get a 48 MB code cache (the JVM's default without C2), which a whole suite's session may
#: fill (the JIT then stops): the cache keeps the tiered default, 240 MB. Test-only: releases keep the
#: JVM's default (the 10M benchmarks need C2). ``FRAGRELEASE_TEST_JAVA_OPTIONS`` replaces these options
#: (empty: the JVM's default); a ``PYSPARK_SUBMIT_ARGS`` of the caller's own is left alone.
TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"


def jvm_submit_args(environ=os.environ):
    """The ``PYSPARK_SUBMIT_ARGS`` that start the test session's driver JVM with the test's Java options
    (:data:`TEST_JAVA_OPTIONS`, or ``FRAGRELEASE_TEST_JAVA_OPTIONS``), or None: options turned off, or the
    caller already set ``PYSPARK_SUBMIT_ARGS``."""
    options = environ.get("FRAGRELEASE_TEST_JAVA_OPTIONS", TEST_JAVA_OPTIONS).strip()
    if not options or "PYSPARK_SUBMIT_ARGS" in environ:
        return None
    return f"--conf {shlex.quote('spark.driver.extraJavaOptions=' + options)} pyspark-shell"


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from fragrelease.jobs.session import get_spark

    os.environ.setdefault("FRAGRELEASE_SPARK_LOG_LEVEL", "ERROR")
    submit_args = jvm_submit_args()
    if submit_args:  # for this JVM only: the suite's own subprocesses start theirs as users do
        os.environ["PYSPARK_SUBMIT_ARGS"] = submit_args
    try:
        session = get_spark("fragrelease-tests", master="local[2]", shuffle_partitions=4)
    finally:
        if submit_args:
            os.environ.pop("PYSPARK_SUBMIT_ARGS", None)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def anonymeter_numba_cache():
    """anonymeter's two numba kernels (``gower_distance``, ``_nearest_neighbors``) cached on disk.

    anonymeter 1.1.0 compiles them with ``@jit`` without ``cache=True``: every process that runs an
    attack paid 4.3–5.4 s of compilation on its first one (issue 41). With caching enabled the compiled
    code is written next to anonymeter's module (numba's ``__pycache__`` in the environment; invalidated
    when the source changes) and later sessions load it (0.3 s). Tests only; the modules that attack
    ask for it (``pytestmark`` or ``usefixtures``). Returns the kernels, or None without anonymeter.
    """
    try:
        import anonymeter.evaluators  # noqa: F401  (imports the kernels' module without its import cycle)
        from anonymeter.neighbors import mixed_types_kneighbors as knn
    except ImportError:
        return None
    kernels = (knn.gower_distance, knn._nearest_neighbors)
    try:
        for kernel in kernels:
            kernel.enable_caching()
    except RuntimeError:  # numba finds no writable cache folder: compile per process, as before
        return None
    return kernels


@pytest.fixture(scope="session")
def adult_pdf():
    from fragrelease.schemas.datasets import load_builtin_pandas

    return load_builtin_pandas("adult")


@pytest.fixture(scope="session")
def wine_pdf():
    from fragrelease.schemas.datasets import load_builtin_pandas

    return load_builtin_pandas("wine")
