"""A class-data-sharing archive of Spark's classes for the embedded session's JVM (docs/benchmarks.md, issue 26).

A new JVM spends a large part of its first release loading and verifying the ~14,000 classes of
Spark, Hadoop, Parquet and Jackson that a release uses, looking each one up in ~250 jars. A
dynamic CDS archive (JDK 13+: ``-XX:ArchiveClassesAtExit``, then ``-XX:SharedArchiveFile``) holds
those classes already parsed and verified; every later JVM maps it read-only. ``scripts/setup.sh``
builds it once (:func:`fragrelease.jobs.class_archive_build.build`, ``python -m
fragrelease.jobs.class_archive_build``) by running a small release on the shipped Wine sample in a
throw-away JVM, and :func:`fragrelease.jobs.session.get_spark`
passes it to the embedded session's driver JVM (``spark.driver.defaultJavaOptions``, so a user's
``spark.driver.extraJavaOptions`` is kept). Sessions from spark-submit, Spark Connect or Databricks
are not touched.

The archive holds class metadata only, no data: the build's release runs on the public Wine sample
shipped with the package, in a temporary folder that is removed afterwards. The JVM checks the archive itself (the same JDK build,
the same class path prefix) and ignores one that does not match, silently: its CDS log is turned
off (``-Xlog:cds*=off``). ``FRAGRELEASE_CLASS_ARCHIVE=off`` turns the archive off; any other value
is the archive's path.
"""
from __future__ import annotations

import os
import sys
from typing import Optional

#: Silences the JVM's CDS messages (an archive of another JDK build or class path is ignored quietly).
QUIET = "-Xlog:cds*=off"


def archive_path() -> str:
    """Where the archive lives: ``$FRAGRELEASE_CLASS_ARCHIVE``, else ``<sys.prefix>/fragrelease-jars/spark-classes.jsa``."""
    given = os.environ.get("FRAGRELEASE_CLASS_ARCHIVE")
    if given and given != "off":
        return os.path.abspath(given)
    return os.path.join(sys.prefix, "fragrelease-jars", "spark-classes.jsa")


def java_options() -> Optional[str]:
    """The driver JVM's options that map the archive, or None (no archive built, or turned off)."""
    if os.environ.get("FRAGRELEASE_CLASS_ARCHIVE") == "off":
        return None
    path = archive_path()
    if not os.path.isfile(path) or " " in path:  # a path with a space cannot travel in one option string
        return None
    return f"-XX:SharedArchiveFile={path} {QUIET}"
