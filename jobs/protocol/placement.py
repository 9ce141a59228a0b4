"""Where a release's folders lie relative to each other, and the private folders' modes: before Spark and any spend.

:func:`fragrelease.jobs.protocol.workspace.check_work_dir` refuses every user path inside ``work_dir``;
this module refuses the other placements that fail only later, after owners have spent, or that
mix a ledger with other files (:func:`check_placement`, called by ``check_work_dir``, so by
``fragrelease validate``, every CLI step and ``Release.run()``):

- the ``output`` equal to, inside or around an owner's budget ledger (``owners[i].ledger.path``):
  the release's commit would write into the ledger's table, or the ledger's into the release's;
- ``work_dir`` inside the ``output`` (its metadata would be written into the release's folder, which
  the plan then refuses as other files) or inside a ledger (the reverse, a ledger inside
  ``work_dir``, is refused by ``check_work_dir``);
- two owners' ledgers one inside the other (one ledger shared by owners, the same path, is fine:
  its rows name the owner);
- an owner's private folder (or the aggregator's) equal to or inside a ledger; a ledger inside an
  owner's private folder is fine.

Local paths are compared after resolving symbolic links (:func:`within`, which the work folder's checks use too);
URIs as text. :func:`check_private_dirs` refuses an existing private folder that group or others
may use, before anything (a signing key, a pseudonym key) is written into it.

Source: docs/specification.md §3 (the parties share only ``work_dir``; every check that needs no
data runs before any spend); issue 49 item 6.
"""
from __future__ import annotations

import os
import stat
from typing import Iterable, Optional

from fragrelease.errors import ConfigError
from fragrelease.private_files import check_owner_only_mode
from fragrelease.protocol.config import ReleaseConfig, resolved_private_dir


def _is_uri(path: str) -> bool:
    return "://" in path or path.startswith("dbfs:")


def _local(path: str) -> Optional[str]:
    """The local path of ``path`` (``file:`` prefixes removed, ``~`` expanded), or None for a remote URI."""
    if path.startswith("file://"):
        path = path[len("file://"):]
    elif path.startswith("file:"):
        path = path[len("file:"):]
    elif _is_uri(path):
        return None
    return os.path.expanduser(path)


def _norm(path: str) -> str:
    local = _local(path)
    return path.rstrip("/") if local is None else os.path.realpath(local)


def within(path: str, folder: str) -> bool:
    """True if ``path`` is ``folder`` or lies under it (local paths resolved, symlinks too; URIs as text)."""
    a, b = _norm(path), _norm(folder)
    return a == b or a.startswith(b.rstrip("/") + "/")


def _ledgers(cfg: ReleaseConfig) -> list[tuple[str, str, str]]:
    """``(key, path, owner)`` of every owner's ledger given as a path."""
    return [(f"owners[{i}].ledger.path", o.ledger.path, o.name) for i, o in enumerate(cfg.owners)
            if o.ledger is not None and o.ledger.path is not None]


def _refuse_inside(key: str, path: str, other_key: str, other: str, why: str) -> None:
    """Refuse ``path`` equal to or inside ``other``; one line naming both keys and paths."""
    if within(path, other) and within(other, path):
        raise ConfigError(f"{key}: {path!r} is also {other_key}; {why}")
    if within(path, other):
        raise ConfigError(f"{key}: {path!r} lies inside {other_key} {other!r}; {why}")


def check_placement(cfg: ReleaseConfig) -> None:
    """Refuse an ``output``, ``work_dir``, ledger or private folder placed in another of them (module doc).

    Raises
    ------
    ConfigError
        One line naming both keys and both paths as written, e.g. ``output: '/d/l' is also
        owners[0].ledger.path; a release and the budget ledger of owner 'a' are ...`` or ``work_dir: '/r/w' lies inside
        output '/r'; ...``.
    """
    ledgers = _ledgers(cfg)
    if cfg.output is not None:
        for key, ledger, owner in ledgers:
            why = (f"a release and the budget ledger of owner {owner!r} are separate Delta tables: choose another "
                   "output or ledger path")
            _refuse_inside("output", cfg.output, key, ledger, why)
            _refuse_inside(key, ledger, "output", cfg.output, why)
        _refuse_inside("work_dir", cfg.work_dir, "output", cfg.output,
                       "the release's folder holds only the release (the plan would refuse the work files): choose a "
                       "work_dir outside the output")
    for key, ledger, owner in ledgers:
        _refuse_inside("work_dir", cfg.work_dir, key, ledger,
                       f"the budget ledger of owner {owner!r} holds only its Delta table: choose a work_dir outside it")
        for other_key, other, other_owner in ledgers:
            if other_key != key and not (within(ledger, other) and within(other, ledger)):
                _refuse_inside(key, ledger, other_key, other,
                               f"the budget ledger of owner {other_owner!r} holds only its Delta table: give each "
                               "ledger its own folder (or the same path)")
        for private_key, private, _ in _private_dirs(cfg):
            _refuse_inside(private_key, private, key, ledger,
                           f"the budget ledger of owner {owner!r} holds only its Delta table: keep private folders out "
                           "of it")


def _private_dirs(cfg: ReleaseConfig, owners: Optional[Iterable[str]] = None,
                  aggregator: bool = True) -> list[tuple[str, str, str]]:
    """``(key, folder, who)`` of the private folders of ``owners`` (default: every owner) and of the aggregator."""
    from .layout import aggregator_private_dir

    out = [(f"owners[{i}].private_dir", resolved_private_dir(cfg.name, o), f"owner {o.name!r}")
           for i, o in enumerate(cfg.owners) if owners is None or o.name in owners]
    if aggregator:
        out.append(("the aggregator's private folder (FRAGRELEASE_PRIVATE_ROOT)", aggregator_private_dir(cfg.name),
                    "aggregator"))
    return out


def check_private_dirs(cfg: ReleaseConfig, owners: Optional[Iterable[str]] = None, *, aggregator: bool) -> None:
    """Refuse an existing local private folder that is not a folder or that group or others may use.

    ``owners``: the owners whose folders this party writes (default: every owner); ``aggregator``:
    also the aggregator's (:func:`fragrelease.jobs.protocol.layout.aggregator_private_dir`). A folder that
    does not exist yet passes (it is created 0700 when needed); nothing is created or changed here.

    Raises
    ------
    ConfigError
        As :func:`fragrelease.private_files.make_private_dir` would, but before anything is written:
        ``owner 'a': private folder '/p' is readable or writable by group or others (mode 0750); run
        'chmod 700 /p'``, or ``... is a file, not a folder``.
    """
    for _, folder, who in _private_dirs(cfg, owners, aggregator):
        local = _local(folder)
        if local is None or not os.path.lexists(local):
            continue
        try:
            st = os.stat(local)
        except OSError as exc:
            raise ConfigError(f"{who}: private folder {folder!r} cannot be read: "
                              f"{exc.strerror or type(exc).__name__}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise ConfigError(f"{who}: private folder {folder!r} is a file, not a folder")
        check_owner_only_mode(st.st_mode, who=who, what="private folder", path=folder, fix=f"chmod 700 {folder}")
