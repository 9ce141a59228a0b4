"""One driver plays every party: the local (laptop) run of a whole fragmented release.

Steps, each the same function a separate party runs on a cluster:
simulate owners' fragments if the configuration asks for it (:mod:`.simulate`) → every owner writes
its metadata (:func:`.owner.describe_fragment`) → the aggregator issues the plan
(:func:`.aggregator.issue_plan`) → every owner protects its fragment
(:func:`.owner.protect_owner_fragment`) → the aggregator verifies, combines and commits
(:func:`.aggregator.release`) → the driver, which holds the originals here, reports MeanSSE.

The driver is :meth:`fragrelease.jobs.api.Release.run` (the Python API); :func:`run_local_release`,
which the CLI's ``fragrelease run`` calls, runs it and returns its typed result.
"""
from __future__ import annotations

from typing import Callable, Optional

from fragrelease.idpir.config import ReleaseConfig
from fragrelease.rng.laplace import NoiseSource

from ..api import Release
from ..progress import ProgressEvent
from ..release_api import ReleaseResult


def run_local_release(spark, cfg: ReleaseConfig, *, noise: Optional[NoiseSource] = None,
                      progress: Optional[Callable[[ProgressEvent], None]] = None, fresh_work_dir: bool = True,
                      config_path: Optional[str] = None) -> ReleaseResult:
    """Run every step of the release in this driver; return its typed result (path, version, owners, ε, MeanSSE).

    The same path as the Python API: ``Release.from_config(cfg).run(evaluate=True)``
    (:class:`fragrelease.jobs.api.Release`); the CLI prints the
    :class:`~fragrelease.jobs.release_api.ReleaseResult` as it is. ``fresh_work_dir`` removes what an
    earlier run of this release left in the work folder first (protected fragments of an earlier run are
    never reused: each run spends a new budget), and only that (:mod:`.workspace`); ``config_path``, the
    configuration file, must not lie inside ``work_dir``.
    ``progress`` receives each step's start and end (:class:`~fragrelease.jobs.progress.ProgressEvent`);
    default: the logger ``fragrelease.progress``, one INFO line per finished step.
    """
    return Release.from_config(cfg, spark=spark).run(_noise=noise, progress=progress, evaluate=True,
                                                      fresh_work_dir=fresh_work_dir, config_path=config_path)
