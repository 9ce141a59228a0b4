"""Owner-only folders and files on the local disk (Spark-free): create them 0700, refuse others' modes.

One rule for every private thing a party keeps (the private root and folders, the pseudonym key,
the signing key): what this run creates is 0700 (folders) or 0600 (files) whatever the umask; what
exists already is never chmod-ed (the project's safety rule: never change a file the current run
did not create) but refused when group or others have any permission on it. Used by
:func:`fragrelease.jobs.protocol.workspace.ensure_private_dir`,
:func:`fragrelease.pseudonyms.write_key_file`, :func:`fragrelease.pseudonyms.read_key_file` and
:func:`fragrelease.signing.check_private_key_file`. Key files are read by :func:`read_private_file`,
which never blocks on a FIFO or a device put where a key file should be.
"""
from __future__ import annotations

import os
import stat
import uuid
from typing import Type

from .errors import ConfigError, FragReleaseError

#: Permission bits of group and others; a private folder or file has none of them.
OTHERS_BITS = 0o077


def check_owner_only_mode(mode: int, *, who: str, what: str, path: str, fix: str,
                          error: Type[FragReleaseError] = ConfigError) -> None:
    """Refuse a ``mode`` (``st_mode``) that grants group or others any permission.

    Raises
    ------
    error
        ``<who>: <what> '<path>' is readable or writable by group or others (mode 0644); run '<fix>'``.
    """
    bits = stat.S_IMODE(mode)
    if bits & OTHERS_BITS:
        raise error(f"{who}: {what} {path!r} is readable or writable by group or others (mode {bits:04o}); "
                    f"run '{fix}'")


def make_private_dir(path: str, *, who: str, error: Type[FragReleaseError] = ConfigError) -> list[str]:
    """Create the local folder ``path`` and its missing parents with mode 0700; return those created.

    Folders this call creates get 0700 whatever the umask. A ``path`` that exists already keeps its
    mode (it is never chmod-ed: this run did not create it) and is refused if group or others have
    any permission on it; its existing parents are left as they are.

    Raises
    ------
    error
        ``path`` exists and is not a folder, or is open to group or others (:func:`check_owner_only_mode`;
        names ``who`` and the path), or a folder cannot be created (the operating system's cause).
    """
    local = os.path.abspath(os.path.expanduser(path))
    missing = []
    cur = local
    while not os.path.lexists(cur):
        missing.append(cur)
        cur = os.path.dirname(cur)
    created = []
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            continue  # a concurrent step created it: checked below if it is ``path``
        except OSError as exc:
            raise error(f"{who}: cannot create private folder {d!r}: {exc.strerror or type(exc).__name__}") from None
        os.chmod(d, 0o700)  # mkdir's mode is masked by the umask
        created.append(d)
    if local not in created:
        try:
            st = os.stat(local)
        except OSError as exc:
            raise error(f"{who}: private folder {path!r} cannot be read: {exc.strerror or type(exc).__name__}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise error(f"{who}: private folder {path!r} is a file, not a folder")
        check_owner_only_mode(st.st_mode, who=who, what="private folder", path=path, fix=f"chmod 700 {path}",
                              error=error)
    return created


def file_kind(mode: int) -> str:
    """What a non-regular ``st_mode`` is, for a message: ``a FIFO``, ``a socket``, ``a folder``, ``a device``."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def read_private_file(path: str, *, who: str, what: str, error: Type[FragReleaseError] = ConfigError) -> bytes:
    """The bytes of a private file (a key) that must be a regular file only its owner may use.

    Opened without blocking (``O_NONBLOCK``: a FIFO or a device at ``path`` would otherwise make the
    open or the read wait for ever) and checked on the open descriptor (``fstat``: the file read is
    the file checked, no name swapped in between): a regular file whose mode grants group and others
    nothing (:func:`check_owner_only_mode`, fix ``chmod 600``). ``~`` is expanded; a symbolic link is
    followed to the file it names.

    Raises
    ------
    error
        ``<who>: <what> '<path>' is not a regular file (a FIFO (named pipe))``, the mode
        (:func:`check_owner_only_mode`), or ``... cannot be read: <the operating system's cause>``.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(os.path.expanduser(path), flags)
    except OSError as exc:
        raise error(f"{who}: {what} {path!r} cannot be read: {exc.strerror or type(exc).__name__}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{who}: {what} {path!r} is not a regular file ({file_kind(st.st_mode)})")
        check_owner_only_mode(st.st_mode, who=who, what=what, path=path, fix=f"chmod 600 {path}", error=error)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise error(f"{who}: {what} {path!r} cannot be read: {exc.strerror or type(exc).__name__}") from None
    finally:
        os.close(fd)


def fsync_path(path: str) -> None:
    """fsync the local file or folder ``path`` (a folder: its entries, so a new name in it survives a crash)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_once(path: str, data: bytes) -> bool:
    """Create the local file ``path`` (0600) holding ``data``, exclusively and atomically; True when created.

    The bytes go to a new temporary file beside ``path`` (``O_CREAT | O_EXCL``, 0600), which is
    fsynced and then hard-linked to ``path``: ``link(2)`` fails when ``path`` exists, as ``O_EXCL``
    does, so of two writers exactly one creates it, and a reader never sees a half-written file. The
    folder is fsynced after the link, so once this returns True the file survives a crash. Returns
    False, writing nothing, when ``path`` exists already (its content is the earlier writer's).

    Raises
    ------
    OSError
        The folder is missing or not writable, or the disk is full (the temporary file is removed).
    """
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        fsync_path(folder)
        return True
    finally:
        os.unlink(tmp)


def fsync_tree(path: str) -> None:
    """fsync every file and folder under the local folder ``path``, and ``path`` itself."""
    for root, _dirs, files in os.walk(path, topdown=False):
        for name in files:
            fsync_path(os.path.join(root, name))
        fsync_path(root)
