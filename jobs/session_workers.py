"""The embedded local session's Python workers, started in the background (:func:`warm_python_workers`).

An embedded session on a ``local`` master starts its Python workers in the background: one throw-away
``mapInPandas`` task per core imports pandas, Arrow and the modules the release's tasks run (the
executor draws of :mod:`fragrelease.udfs.noise`, and through them the mechanism's modules) while the first
steps of a release run Spark SQL only, instead of in the release's first Python stage.
``WARM_PYTHON_WORKERS = False`` (here, in this module) turns it off (benchmarks compare).
"""
from __future__ import annotations

import atexit
import logging
import os
import re
import threading
from typing import Iterator

#: The session's one logger: the messages of every session module keep the name they had when these were one module.
log = logging.getLogger("fragrelease.jobs.session")

#: Start the Python workers of an embedded local session in the background (:func:`warm_python_workers`).
WARM_PYTHON_WORKERS = True


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
    """A Python worker's first task: import what the protection's tasks import, pass the rows on.

    The tasks' functions live in :mod:`fragrelease.udfs.noise`, which imports the mechanism's modules
    (its draws, stages and post-processing) and :mod:`fragrelease.rng.laplace`; the session names no
    release kind (docs/architecture.md, "Release kinds")."""
    import scipy.optimize  # noqa: F401 - the isotonic fit's, imported by the post-processing when used

    import fragrelease.rng.laplace  # noqa: F401 - the import is the point
    import fragrelease.udfs.noise  # noqa: F401

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

