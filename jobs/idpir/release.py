"""One driver plays every party: the local (laptop) run of a whole fragmented release.

Steps, each the same function a separate party runs on a cluster:
simulate owners' fragments if the configuration asks for it (:mod:`.simulate`) → every owner writes
its metadata (:func:`.owner.describe_fragment`) → the aggregator issues the plan
(:func:`.aggregator.issue_plan`) → every owner protects its fragment
(:func:`.owner.protect_owner_fragment`) → the aggregator verifies, combines and commits
(:func:`.aggregator.release`) → the driver, which holds the originals here, reports MeanSSE.

The driver is :meth:`fragrelease.jobs.api.Release.run` (the Python API); :func:`run_local_release`,
which the CLI's ``fragrelease run`` calls, runs it and returns the summary as a dict.
"""
from __future__ import annotations

from typing import Callable, Optional

from fragrelease.idpir.config import ReleaseConfig
from fragrelease.jobs.api import Release
from fragrelease.jobs.progress import ProgressEvent
from fragrelease.rng.laplace import NoiseSource


def run_local_release(spark, cfg: ReleaseConfig, *, noise: Optional[NoiseSource] = None,
                      progress: Optional[Callable[[ProgressEvent], None]] = None, fresh_work_dir: bool = True,
                      config_path: Optional[str] = None) -> dict:
    """Run every step of the release in this driver; return a summary (path, version, owners, ε, k, MeanSSE).

    The same path as the Python API: ``Release.from_config(cfg).run(evaluate=True)``
    (:class:`fragrelease.jobs.api.Release`), its typed result flattened into the dict the CLI prints:
    ``path``, ``table``, ``version``, ``rows``, ``provenance``, ``report``, ``mean_sse``, ``owners``
    (name, records, ε_j text, number of attributes) and ``plan``. ``fresh_work_dir`` removes what an
    earlier run of this release left in the work folder first (protected fragments of an earlier run are
    never reused: each run spends a new budget), and only that (:mod:`.workspace`); ``config_path``, the
    configuration file, must not lie inside ``work_dir``.
    ``progress`` receives each step's start and end (:class:`~fragrelease.jobs.progress.ProgressEvent`);
    default: the logger ``fragrelease.progress``, one INFO line per finished step.
    """
    result = Release.from_config(cfg, spark=spark).run(noise=noise, progress=progress, evaluate=True,
                                                       fresh_work_dir=fresh_work_dir, config_path=config_path)
    return {
        "path": cfg.output if cfg.output is not None else result.path, "table": result.table,
        "version": result.version, "rows": result.rows, "provenance": dict(result.provenance),
        "report": result.report, "mean_sse": result.mean_sse,
        "owners": [{"name": o.name, "records": o.n_records, "epsilon": str(o.epsilon), "attributes": len(o.attributes)}
                   for o in result.plan.owners],
        "plan": result.plan,
    }
