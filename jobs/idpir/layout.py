"""Where each party reads and writes.

Shared, under a release's ``work_dir`` (the aggregator reads it; only protocol messages and
protected data go here):

- ``metadata/<owner>.json``      owner → aggregator: public metadata (:class:`OwnerMetadata`)
- ``metadata/ids/<owner>/<nonce>`` horizontal owners → aggregator: the keyed digests of the
                                 owner's ids (a Delta table, one column ``pseudonym``, context
                                 ``metadata``), one table per metadata round, for the disjointness
                                 check before the plan
- ``plan.json``                  aggregator → owners: the plan (:class:`Plan`)
- ``owners/<owner>/protected``   the owner's protected fragment (a Delta table): ``pseudonym`` and
                                 the attributes, rows in a random order (``linkage: unlinked``:
                                 the attributes only, every column in its own random order)
- ``owners/<owner>/pseudonyms``  ``linkage: unlinked`` only: the owner's set of pseudonyms (a Delta
                                 table, one column ``pseudonym``, random order)
- ``owners/<owner>/manifest.json`` the owner's manifest (:class:`Manifest`)

Private to each owner, under its ``private_dir`` (never under ``work_dir`` or ``output``; see
:class:`fragrelease.idpir.config.OwnerConfig`):

- ``fragment/``                  the owner's raw fragment when the local driver simulates owners
- ``report.html``                the owner's private utility report (original vs protected)
- ``metadata-nonce``             the nonce of the owner's latest metadata round, which the owner
                                 checks in the plan before it spends (:func:`nonce_path`)
- ``pseudonym-key``              the release's generated pseudonym key (0600), when the
                                 configuration names none (:mod:`fragrelease.jobs.idpir.keys`)

On a cluster the owners and the aggregator are separate job runs that share only ``work_dir``.
"""
from __future__ import annotations

import posixpath

from fragrelease.idpir.config import PRIVATE_ROOT_ENV, OwnerConfig, ReleaseConfig, SourceConfig, resolved_private_dir

__all__ = ["PRIVATE_ROOT_ENV", "fragment_source", "manifest_path", "metadata_path", "owner_private_dir",
           "owner_report_path", "plan_path", "protected_path"]


def _join(*parts: str) -> str:
    return posixpath.join(*parts)


def owner_private_dir(cfg: ReleaseConfig, owner: OwnerConfig) -> str:
    """The owner's private folder: ``owner.private_dir`` or ``<private root>/<release>/<owner>``
    (:func:`fragrelease.idpir.config.resolved_private_dir`; root ``$FRAGRELEASE_PRIVATE_ROOT`` or
    ``~/.fragrelease/private``). Created 0700 by the steps that write into it."""
    return resolved_private_dir(cfg.name, owner)


def fragment_source(cfg: ReleaseConfig, owner: OwnerConfig) -> SourceConfig:
    """The owner's own table, or the simulated fragment the local driver cut for it (owner-private)."""
    if owner.source is not None:
        return owner.source
    return SourceConfig(path=_join(owner_private_dir(cfg, owner), "fragment"), format="parquet")


def metadata_path(cfg: ReleaseConfig, owner: str) -> str:
    return _join(cfg.work_dir, "metadata", f"{owner}.json")


def id_digests_path(cfg: ReleaseConfig, owner: str, nonce: str) -> str:
    """A horizontal owner's id digests of the metadata round with ``nonce`` (a new table every round)."""
    return _join(cfg.work_dir, "metadata", "ids", owner, nonce)


def nonce_path(cfg: ReleaseConfig, owner: OwnerConfig) -> str:
    """The owner's own record of its latest metadata nonce, in its private folder."""
    return _join(owner_private_dir(cfg, owner), "metadata-nonce")


def plan_path(cfg: ReleaseConfig) -> str:
    return _join(cfg.work_dir, "plan.json")


def protected_path(cfg: ReleaseConfig, owner: str) -> str:
    return _join(cfg.work_dir, "owners", owner, "protected")


def pseudonyms_path(cfg: ReleaseConfig, owner: str) -> str:
    """``linkage: unlinked``: the owner's pseudonym set, apart from its unlinked rows."""
    return _join(cfg.work_dir, "owners", owner, "pseudonyms")


def manifest_path(cfg: ReleaseConfig, owner: str) -> str:
    return _join(cfg.work_dir, "owners", owner, "manifest.json")


def owner_report_path(cfg: ReleaseConfig, owner: OwnerConfig) -> str:
    """The owner's private utility report, in its private folder (never under ``work_dir``)."""
    return _join(owner_private_dir(cfg, owner), "report.html")
