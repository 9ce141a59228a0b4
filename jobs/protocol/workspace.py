"""The shared work folder: what a release owns in it, what it refuses, and what it may delete.

A release owns only what it creates under ``work_dir`` (:data:`OWNED_ENTRIES`): ``metadata/``,
``plan.json``, ``owners/`` and the marker file ``.fragrelease-work.json`` (:data:`MARKER`), which names
the release (its ``name``) and is written when the release first claims the folder. Everything
else in the folder belongs to the user and is never deleted, overwritten or moved.

Refused before Spark starts (:func:`check_work_dir`, called by
:func:`fragrelease.jobs.protocol.preflight.preflight` and by :meth:`fragrelease.jobs.api.Release.run`):

- ``work_dir`` inside the output or a ledger, and the other misplacements of
  :func:`fragrelease.jobs.protocol.placement.check_placement` (the output and a ledger one inside
  the other, a private folder inside a ledger);
- a user path inside ``work_dir`` or equal to it (:func:`user_paths`: the configuration file, the
  schema file, every local source, the output, every ledger, every owner's private folder and the
  private root as resolved for it). Clearing the release's entries would not touch them, but the
  aggregator reads the shared folder and other parties write to it, and an earlier version of
  fragrelease deleted the whole folder: the placement itself is the mistake;
- an entry of ``work_dir`` that no release wrote (a foreign file or folder);
- a marker naming another release.

Clearing what an earlier run of the same release left (:func:`clear_work_dir`) removes only
:data:`OWNED_ENTRIES` and keeps the marker. Only local folders are checked and cleared: listing a
``s3a://`` or ``abfss://`` folder needs the cluster's credentials; there the paths are compared as
text only.

Private folders of owners are created 0700 and private files 0600, whatever the umask
(:func:`ensure_private_dir`, :func:`write_private_text`, :func:`restrict_private_tree`); a private
folder that exists already is never chmod-ed, and refused if group or others may use it.

Source: docs/specification.md §3 (the parties share only ``work_dir``); the project's safety rule
(never delete a file the current run did not create).
"""
from __future__ import annotations

import json
import os
import shutil
import stat
from datetime import datetime, timezone
from typing import Any, Mapping, Optional

from fragrelease.errors import ConfigError
from fragrelease.private_files import make_private_dir
from fragrelease.protocol.config import ReleaseConfig, private_root, resolved_private_dir

from .placement import _local, check_placement, within

#: The marker file naming the release that owns a work folder.
MARKER = ".fragrelease-work.json"
#: What a release writes under ``work_dir`` (besides :data:`MARKER`); the only entries it ever deletes.
OWNED_ENTRIES = ("metadata", "plan.json", "owners")


def user_paths(cfg: ReleaseConfig, config_path: Optional[str] = None) -> list[tuple[str, str]]:
    """Every path of the user's that a release reads or keeps, as ``(key, path)`` pairs.

    ``key`` names where the path comes from (a configuration key such as ``owners[0].source.path``,
    ``config`` for the configuration file, ``dataset`` for a schema file); none of these may lie
    inside ``work_dir`` (:func:`check_work_dir`). Extend this list when a release reads a new kind of
    user file (a key file, a signature key): the checks and the clearing follow.

    Returns pairs in configuration order: ``config``, ``dataset`` (a schema YAML), ``source.path``,
    ``output``, then per owner ``owners[i].source.path``, ``owners[i].ledger.path``,
    ``owners[i].private_dir`` (explicit, or the default ``<private root>/<release>/<owner>``) and
    ``FRAGRELEASE_PRIVATE_ROOT`` (the private root that default lies in), and last the aggregator's
    private folder (its plan pin, :func:`fragrelease.jobs.protocol.layout.aggregator_private_dir`).
    """
    out: list[tuple[str, str]] = []
    if config_path is not None:
        out.append(("config", str(config_path)))
    if cfg.dataset.endswith((".yaml", ".yml")) or os.sep in cfg.dataset:
        out.append(("dataset", cfg.dataset))
    if cfg.source is not None and cfg.source.path is not None:
        out.append(("source.path", cfg.source.path))
    if cfg.output is not None:
        out.append(("output", cfg.output))
    for i, o in enumerate(cfg.owners):
        if o.source is not None and o.source.path is not None:
            out.append((f"owners[{i}].source.path", o.source.path))
        if o.ledger is not None and o.ledger.path is not None:
            out.append((f"owners[{i}].ledger.path", o.ledger.path))
        out.append((f"owners[{i}].private_dir", resolved_private_dir(cfg.name, o)))
        if o.private_dir is None:
            out.append((f"owners[{i}].private_dir: FRAGRELEASE_PRIVATE_ROOT", private_root()))
    from .layout import aggregator_private_dir

    out.append(("aggregator's private folder (FRAGRELEASE_PRIVATE_ROOT)", aggregator_private_dir(cfg.name)))
    return out


def read_marker(work_dir: str) -> Optional[Mapping[str, Any]]:
    """The marker of a local ``work_dir`` as a dict, or None when there is none.

    Raises
    ------
    ConfigError
        The marker cannot be read as a JSON object with a ``name``.
    """
    local = _local(work_dir)
    if local is None:
        return None
    path = os.path.join(local, MARKER)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"work_dir: marker {path!r} cannot be read ({type(exc).__name__}); "
                          "it was not written by fragrelease: choose another work_dir") from None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ConfigError(f"work_dir: marker {path!r} names no release; it was not written by fragrelease: "
                          "choose another work_dir")
    return data


def check_work_dir(cfg: ReleaseConfig, config_path: Optional[str] = None) -> None:
    """Refuse a ``work_dir`` that holds user files or belongs to another release; no Spark, no write.

    Raises
    ------
    ConfigError
        One line naming the key and the path: a :func:`user_paths` entry inside ``work_dir``; ``work_dir``
        inside the output or a ledger, the output and a ledger one inside the other, a private folder
        inside a ledger (:func:`fragrelease.jobs.protocol.placement.check_placement`); an entry of
        ``work_dir`` that no release wrote; a marker that names another release or is not ours.
    """
    work = cfg.work_dir
    for key, path in user_paths(cfg, config_path):
        if within(path, work):
            raise ConfigError(f"{key}: {path!r} lies inside work_dir {work!r}, whose content the release rewrites; "
                              "move it out of work_dir or choose another work_dir")
    check_placement(cfg)  # work_dir inside the output or a ledger; the output and the ledgers apart
    local = _local(work)
    if local is None or not os.path.exists(local):
        return
    if not os.path.isdir(local):
        raise ConfigError(f"work_dir: {work!r} is a file, not a folder")
    names = sorted(os.listdir(local))
    foreign = [n for n in names if n not in OWNED_ENTRIES and n != MARKER]
    if foreign:
        raise ConfigError(f"work_dir: {work!r} holds {foreign[0]!r}, which no release wrote "
                          f"({len(foreign)} such entr{'y' if len(foreign) == 1 else 'ies'}); a release writes only "
                          f"{', '.join(OWNED_ENTRIES)} and {MARKER} there: choose an empty or new work_dir")
    marker = read_marker(work)
    if marker is None and names:
        raise ConfigError(f"work_dir: {work!r} holds {names[0]!r} but no marker {MARKER}; it was not claimed by a "
                          "release: remove these entries yourself or choose another work_dir")
    if marker is not None and marker["name"] != cfg.name:
        raise ConfigError(f"work_dir: {work!r} belongs to release {marker['name']!r} (marker {MARKER}), "
                          f"not to {cfg.name!r}: choose another work_dir")


def claim_work_dir(cfg: ReleaseConfig, config_path: Optional[str] = None) -> None:
    """Check ``work_dir`` (:func:`check_work_dir`) and write the marker if it has none yet.

    Creates the folder when it does not exist. Two parties claiming at once both succeed when they
    name the same release (the marker is created exclusively; the loser reads the winner's).
    Remote ``work_dir`` URIs are only checked as text.

    Raises
    ------
    ConfigError
        From :func:`check_work_dir`.
    """
    check_work_dir(cfg, config_path)
    local = _local(cfg.work_dir)
    if local is None:
        return
    os.makedirs(local, exist_ok=True)
    path = os.path.join(local, MARKER)
    text = json.dumps({"name": cfg.name, "dataset": cfg.dataset, "owned": list(OWNED_ENTRIES),
                       "created_at": datetime.now(timezone.utc).isoformat()}, indent=2)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        check_work_dir(cfg, config_path)  # another party claimed it meanwhile: it must name this release
        return
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def clear_work_dir(cfg: ReleaseConfig, config_path: Optional[str] = None) -> list[str]:
    """Remove what an earlier run of this release left in ``work_dir``; return the removed entries.

    Checks and claims the folder first (:func:`claim_work_dir`), then removes only
    :data:`OWNED_ENTRIES`; the marker stays. A remote ``work_dir`` is not cleared.

    Raises
    ------
    ConfigError
        From :func:`check_work_dir`: nothing is removed then.
    """
    claim_work_dir(cfg, config_path)
    local = _local(cfg.work_dir)
    if local is None:
        return []
    removed = []
    for name in OWNED_ENTRIES:
        path = os.path.join(local, name)
        if os.path.islink(path) or os.path.isfile(path):
            os.unlink(path)
        elif os.path.isdir(path):
            shutil.rmtree(path)
        else:
            continue
        removed.append(name)
    return removed


# ---------------------------------------------------------------- private folders and files
def ensure_private_dir(path: str, *, who: str = "private folder") -> str:
    """Create ``path`` (and missing parents) with mode 0700 whatever the umask; return ``path``.

    Only the folders this call creates are given 0700; a ``path`` that exists already is never
    chmod-ed but refused when group or others have any permission on it
    (:func:`fragrelease.private_files.make_private_dir`). Remote URIs are returned unchanged (their
    permissions are the storage's).

    Raises
    ------
    ConfigError
        ``<who>: private folder '<path>' is readable or writable by group or others (mode 0755); run
        'chmod 700 <path>'``, or the folder cannot be created.
    """
    local = _local(path)
    if local is None:
        return path
    make_private_dir(local, who=who)
    return path


def write_private_text(path: str, text: str, *, who: str = "private folder") -> None:
    """Write ``text`` to a local private file, mode 0600 from its creation, in a 0700 folder.

    Written to a temporary name and renamed, so a reader sees the old or the new file, never half.
    Remote URIs go through :func:`fragrelease.jobs.storage.write_text`.
    """
    local = _local(path)
    if local is None:
        from ..storage import write_text

        write_text(path, text)
        return
    ensure_private_dir(os.path.dirname(os.path.abspath(local)), who=who)
    tmp = f"{local}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, local)


def restrict_private_tree(path: str) -> None:
    """Set folders under a local ``path`` to 0700 and files to 0600 (e.g. after Spark wrote them)."""
    local = _local(path)
    if local is None or not os.path.exists(local):
        return
    if not os.path.isdir(local):
        os.chmod(local, 0o600)
        return
    os.chmod(local, 0o700)
    for root, dirs, files in os.walk(local):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o700)
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                os.chmod(p, stat.S_IRUSR | stat.S_IWUSR)
