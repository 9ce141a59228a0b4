"""The Spark side of fragrelease (repository folder ``jobs/``): jobs that apply the Spark-free math.

- :mod:`~fragrelease.jobs.cli`: the ``fragrelease`` command line and the party entry points;
- :mod:`~fragrelease.jobs.protocol`: the fragmented-release protocol every release kind shares (the owner and
  aggregator steps, the local driver, ledgers, manifests, reports) and the kinds' interface
  (:mod:`~fragrelease.jobs.protocol.kind`);
- :mod:`~fragrelease.jobs.idpir`, :mod:`~fragrelease.jobs.synthesis`: the release kinds' Spark halves (IR,
  marginal synthesis), reached through the registry :mod:`fragrelease.kinds`;
- :mod:`~fragrelease.jobs.publications`, :mod:`~fragrelease.jobs.tiers`, :mod:`~fragrelease.jobs.diffgen`:
  the other three systems' Spark jobs (DiffGen's party processes included);
- :mod:`~fragrelease.jobs.api` (:mod:`~fragrelease.jobs.release_api`, :mod:`~fragrelease.jobs.api_common`):
  the Python API;
- :mod:`~fragrelease.jobs.session`: the SparkSession (its parts: ``session_delta``, ``session_catalog``,
  ``session_jvm``, ``session_workers``);
- :mod:`~fragrelease.jobs.storage`: every read and write of shared storage behind one public face
  (fragments, protocol text files, Delta commits, catalog tables, the output's state and the one
  commit and provenance contract of every system).

pyspark is not a dependency of the wheel (a Spark runtime brings its own; ``pip install
'fragrelease[local]'`` brings the embedded stack): :func:`require_pyspark` checks it at the first
Spark use (:mod:`~fragrelease.jobs.api`, :func:`~fragrelease.jobs.session.get_spark`, the CLI).
"""
from __future__ import annotations

import logging
import re

from fragrelease.errors import MissingDependencyError

#: The supported pyspark (= Spark) releases, (major, minor) inclusive: 4.0 is the first with
#: ``spark.api.mode`` (Spark Connect in classic-looking code, as Databricks serverless runs it);
#: 4.2 is the newest that delta-spark (4.4.x) supports. README, "Supported Spark versions".
SUPPORTED_PYSPARK = ((4, 0), (4, 2))
#: How to get a supported pyspark, named in every message.
INSTALL_HINT = "pip install 'fragrelease[local]' or run on a Spark 4.0-4.2 runtime (e.g. Databricks 17.x)"

#: The one line when pyspark is not installed.
MISSING_PYSPARK = f"fragrelease needs pyspark >= 4.0, and none is installed: {INSTALL_HINT}"

_checked: str | None = None


def _major_minor(version: str) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def require_pyspark() -> str:
    """The installed pyspark's version, once checked against :data:`SUPPORTED_PYSPARK`.

    A pyspark newer than the tested range only logs a warning (it may well work).

    Raises
    ------
    MissingDependencyError
        pyspark is not installed, or older than 4.0 (one line naming what was found and the fix).
    """
    global _checked
    if _checked is not None:
        return _checked
    try:
        import pyspark
    except ImportError:
        raise MissingDependencyError(MISSING_PYSPARK) from None
    version = str(getattr(pyspark, "__version__", "") or "")
    found = _major_minor(version)
    low, high = SUPPORTED_PYSPARK
    if found is None or found < low:
        raise MissingDependencyError(f"fragrelease needs pyspark >= 4.0, not pyspark {version or '(unknown version)'}: "
                                     f"{INSTALL_HINT}")
    if found > high:
        logging.getLogger(__name__).warning("pyspark %s is newer than the tested range %d.%d-%d.%d", version,
                                            *low, *high)
    _checked = version
    return version
