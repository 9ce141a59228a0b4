"""Whether a local release output can be created and written, checked without Spark before any spend.

:func:`fragrelease.jobs.storage.check_output` classifies what is at the output; this module checks the
way to it on the local disk, which Delta's commit otherwise meets only after every owner has spent
(``DELTA_CANNOT_CREATE_LOG_PATH``, a permission error), leaving a pending marker behind:

- :func:`check_output_way`: no dangling symbolic link (the output itself or a folder on the way,
  a link whose target is missing or a loop) and no file where a folder must be created. A symbolic
  link to an existing folder is followed, as Delta follows it;
- :func:`check_output_writable`: the folders the release writes into are writable by this user
  (the output folder or, where it does not exist yet, its nearest existing ancestor, where it is
  created; the output's parent for the pending marker; a committed table's ``_delta_log``).

Remote URIs (``s3a://``, ``abfss://``, ``dbfs:/``) are not checked here: their storage decides.

Source: docs/specification.md §3 (the plan's checks run before any owner spends); issue 49 item 6.
"""
from __future__ import annotations

import os

from fragrelease.errors import OutputConflictError


def _nearest_existing(local: str) -> str:
    """``local`` or its nearest ancestor that exists (symbolic links followed)."""
    cur = local
    while not os.path.exists(cur) and os.path.dirname(cur) != cur:
        cur = os.path.dirname(cur)
    return cur


def check_output_way(path: str, local: str) -> None:
    """Refuse a local output ``local`` (absolute; ``path`` as written, for the message) that cannot be created.

    Raises
    ------
    OutputConflictError
        ``output '<path>': '<link>' is a symbolic link to '<target>', which does not resolve ...`` for
        the output or a folder on the way that is a dangling link (or a loop of links), or
        ``output '<path>': '<file>' is a file, not a folder ...`` for a file on the way.
    """
    cur = local
    while not os.path.exists(cur):
        if os.path.islink(cur):
            raise OutputConflictError(
                f"output {path!r}: {cur!r} is a symbolic link to {os.readlink(cur)!r}, which does not resolve to "
                "an existing folder; nothing was written: create its target, remove the link or choose another output")
        parent = os.path.dirname(cur)
        if parent == cur:
            return
        cur = parent
    if cur != local and not os.path.isdir(cur):
        raise OutputConflictError(f"output {path!r}: {cur!r} is a file, not a folder, so the output cannot be "
                                  "created under it; nothing was written: choose another output")


def check_output_writable(path: str, local: str, *, committed: bool) -> None:
    """Refuse a local output whose folders this user cannot write (the commit would fail after the spends).

    ``committed``: the output holds a committed Delta table (a new version writes into the folder and its
    ``_delta_log``); otherwise the release creates the folder (or fills an empty one) and writes its
    pending marker beside it, into the output's parent.

    Raises
    ------
    OutputConflictError
        ``output '<path>': folder '<folder>' is not writable by this user ...``.
    """
    if committed:
        folders = [local, os.path.join(local, "_delta_log")]
    else:
        folders = [_nearest_existing(local), _nearest_existing(os.path.dirname(local))]
    for folder in dict.fromkeys(folders):
        if os.path.isdir(folder) and not os.access(folder, os.W_OK | os.X_OK):
            raise OutputConflictError(f"output {path!r}: folder {folder!r} is not writable by this user (its mode "
                                      f"or a read-only disk); nothing was written: fix its permissions or choose "
                                      "another output")
