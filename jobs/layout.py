"""Where each party reads and writes, under a release's ``work_dir`` (one folder per party).

- ``fragments/<owner>/``         the owner's raw fragment when the local driver simulates owners
- ``metadata/<owner>.json``      owner → aggregator: public metadata (:class:`OwnerMetadata`)
- ``plan.json``                  aggregator → owners: the plan (:class:`Plan`)
- ``owners/<owner>/protected``   the owner's protected fragment (a Delta table)
- ``owners/<owner>/manifest.json`` the owner's manifest (:class:`Manifest`)
- ``owners/<owner>/report.html`` the owner's private utility report (original vs protected)

On a cluster the owners and the aggregator are separate job runs that share only these paths
(never the raw ``fragments``, which stay with each owner or are the owner's own tables).
"""
from __future__ import annotations

import posixpath

from fragrelease.config import OwnerConfig, ReleaseConfig, SourceConfig


def _join(*parts: str) -> str:
    return posixpath.join(*parts)


def fragment_source(cfg: ReleaseConfig, owner: OwnerConfig) -> SourceConfig:
    """The owner's own table, or the simulated fragment the local driver cut for it."""
    if owner.source is not None:
        return owner.source
    return SourceConfig(path=_join(cfg.work_dir, "fragments", owner.name), format="parquet")


def metadata_path(cfg: ReleaseConfig, owner: str) -> str:
    return _join(cfg.work_dir, "metadata", f"{owner}.json")


def plan_path(cfg: ReleaseConfig) -> str:
    return _join(cfg.work_dir, "plan.json")


def protected_path(cfg: ReleaseConfig, owner: str) -> str:
    return _join(cfg.work_dir, "owners", owner, "protected")


def manifest_path(cfg: ReleaseConfig, owner: str) -> str:
    return _join(cfg.work_dir, "owners", owner, "manifest.json")


def owner_report_path(cfg: ReleaseConfig, owner: str) -> str:
    return _join(cfg.work_dir, "owners", owner, "report.html")
