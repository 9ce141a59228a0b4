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
:class:`fragrelease.protocol.config.OwnerConfig`):

- ``fragment/``                  the owner's raw fragment when the local driver simulates owners
- ``report.html``                the owner's private utility report (original vs protected)
- ``metadata-nonce``             the nonce of the owner's latest metadata round, which the owner
                                 checks in the plan before it spends (:func:`nonce_path`)
- ``pseudonym-key``              the release's generated pseudonym key (0600), when the
                                 configuration names none (:mod:`fragrelease.jobs.protocol.keys`)
- ``draws/``                     the owner's draw records: per plan its claims and the outputs it drew,
                                 kept before anything is shared (:mod:`fragrelease.jobs.protocol.draws`)

Private to the aggregator, under ``<private root>/<release>/_aggregator`` (:func:`aggregator_private_dir`;
no owner name starts with ``_``, so it never meets an owner's default folder):

- ``plan-pin-<work_dir tag>.json`` the id and SHA-256 of the plan the aggregator issued into that
                                 ``work_dir`` (0600): its release step refuses any other ``plan.json`` there

On a cluster the owners and the aggregator are separate job runs that share only ``work_dir``.

The functions here take the release's name, its ``work_dir`` and an owner; a party step gets every
path of its own, resolved once, from its context (:mod:`fragrelease.jobs.protocol.context`).
"""
from __future__ import annotations

import posixpath
from typing import Optional, TypeVar

from pydantic import BaseModel, ValidationError

from fragrelease.errors import ConfigError, ProtocolError
from fragrelease.protocol.config import (
    PRIVATE_ROOT_ENV,
    OwnerConfig,
    ReleaseConfig,
    SourceConfig,
    private_root,
    resolved_private_dir,
)
from fragrelease.validation import format_validation_error

__all__ = ["PRIVATE_ROOT_ENV", "aggregator_private_dir", "fragment_source", "plan_pin_path", "manifest_path", "metadata_path", "owner_private_dir",
           "owner_report_path", "plan_path", "protected_path", "read_message"]

M = TypeVar("M", bound=BaseModel)


def read_message(model: type[M], path: str, *, party: str, what: str, error: type[ProtocolError] = ProtocolError) -> M:
    """A protocol message (plan, metadata, manifest) read from shared storage and validated as ``model``.

    Nothing read from ``work_dir`` is trusted: a file that is not UTF-8, not JSON or not a valid
    ``model`` is refused with one line naming the reading party, the path and the first problem.

    Raises
    ------
    ConfigError
        The file does not exist: ``<party>: <what> '<path>' does not exist: it has not been written yet``.
    error (ProtocolError by default)
        ``<party>: <what> '<path>' is not valid JSON ...`` / ``... is not a valid <what> (<key>: <problem>)``.
    """
    from ..storage import file_exists, read_text

    try:
        text = read_text(path)
    except ConfigError:
        if file_exists(path):  # not a missing file: as read_text said
            raise
        raise ConfigError(f"{party}: {what} {path!r} does not exist: it has not been written yet") from None
    except UnicodeDecodeError:
        raise error(f"{party}: {what} {path!r} cannot be used (not UTF-8 text); it was damaged or not written by "
                    "fragrelease: refusing") from None
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        lines = format_validation_error(exc).splitlines() or [type(exc).__name__]
        more = f"; {len(lines) - 1} more problem{'s' if len(lines) > 2 else ''}" if len(lines) > 1 else ""
        raise error(f"{party}: {what} {path!r} cannot be used ({lines[0][:200]}{more}); it was damaged or not "
                    "written by fragrelease: refusing") from None


def _join(*parts: str) -> str:
    return posixpath.join(*parts)


def owner_private_dir(release: str, owner: OwnerConfig) -> str:
    """The owner's private folder: ``owner.private_dir`` or ``<private root>/<release>/<owner>``
    (:func:`fragrelease.protocol.config.resolved_private_dir`; root ``$FRAGRELEASE_PRIVATE_ROOT`` or
    ``~/.fragrelease/private``). Created 0700 by the steps that write into it."""
    return resolved_private_dir(release, owner)


#: Name of the aggregator's private folder under ``<private root>/<release>`` (owner names start with a letter or digit).
AGGREGATOR_DIR = "_aggregator"


def aggregator_private_dir(release: str) -> str:
    """The aggregator's private folder: ``<private root>/<release>/_aggregator`` (created 0700 when written)."""
    return _join(private_root(), release, AGGREGATOR_DIR)


def plan_pin_path(release: str, work_dir: str) -> str:
    """Where the aggregator pins the plan it issued (:func:`fragrelease.jobs.protocol.aggregator.issue_plan`):
    ``plan-pin-<first 16 hex of SHA-256(work_dir)>.json``, one pin per work folder, so two releases
    of one name in different work folders do not replace each other's pin."""
    import hashlib

    from ..storage import absolute

    tag = hashlib.sha256(absolute(work_dir).encode("utf-8")).hexdigest()[:16]
    return _join(aggregator_private_dir(release), f"plan-pin-{tag}.json")


def fragment_source(release: str, owner: OwnerConfig) -> SourceConfig:
    """The owner's own table, or the simulated fragment the local driver cut for it (owner-private)."""
    if owner.source is not None:
        return owner.source
    return SourceConfig(path=_join(owner_private_dir(release, owner), "fragment"), format="parquet")


def metadata_path(work_dir: str, owner: str) -> str:
    return _join(work_dir, "metadata", f"{owner}.json")


def id_digests_path(work_dir: str, owner: str, nonce: str) -> str:
    """A horizontal owner's id digests of the metadata round with ``nonce`` (a new table every round)."""
    return _join(work_dir, "metadata", "ids", owner, nonce)


def nonce_path(release: str, owner: OwnerConfig) -> str:
    """The owner's own record of its latest metadata nonce, in its private folder."""
    return _join(owner_private_dir(release, owner), "metadata-nonce")


def plan_path(work_dir: str) -> str:
    return _join(work_dir, "plan.json")


def protected_path(work_dir: str, owner: str) -> str:
    return _join(work_dir, "owners", owner, "protected")


def pseudonyms_path(work_dir: str, owner: str) -> str:
    """``linkage: unlinked``: the owner's pseudonym set, apart from its unlinked rows."""
    return _join(work_dir, "owners", owner, "pseudonyms")


def manifest_path(work_dir: str, owner: str) -> str:
    return _join(work_dir, "owners", owner, "manifest.json")


def owner_report_path(release: str, owner: OwnerConfig) -> str:
    """The owner's private utility report, in its private folder (never under ``work_dir``)."""
    return _join(owner_private_dir(release, owner), "report.html")


#: File name of a generated release key.
KEY_FILE = "pseudonym-key"


def shared_private_root(cfg: ReleaseConfig) -> Optional[str]:
    """``<private root>/<release>`` when no owner sets ``private_dir`` (all owners share one root), else None."""
    if any(o.private_dir is not None for o in cfg.owners):
        return None
    return _join(private_root(), cfg.name)


def generated_key_path(cfg: ReleaseConfig, owner: OwnerConfig) -> str:
    """Where the release's generated key for ``owner`` lives (:mod:`fragrelease.jobs.protocol.keys`)."""
    shared = shared_private_root(cfg)
    return _join(shared if shared is not None else owner_private_dir(cfg.name, owner), KEY_FILE)
