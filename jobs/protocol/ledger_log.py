"""The budget ledger's ``_delta_log``, verified by listing and reading it (delta-rs is not trusted with this).

Split from :mod:`fragrelease.jobs.protocol.ledger` (which re-exports :class:`LogCheck` and
:func:`verify_log`): the log's versions must be contiguous (0..N, or from the latest checkpoint on),
each commit a non-empty file of JSON lines that parse, the checkpoint readable. Before the log is
listed, this machine's anchor of the ledger is read (:mod:`fragrelease.jobs.protocol.ledger_anchor`): an
anchor read first names a version that was committed before the listing, so a ledger that does not
hold it was rolled back (:func:`fragrelease.jobs.protocol.ledger_chain.read_spends` compares the two).
The damage messages are one line each: ``budget ledger '<path>' is damaged: <what>; every spend is
refused until it is restored from a backup; nothing was spent``.
"""
from __future__ import annotations

import json
import os
import posixpath
import re
from dataclasses import dataclass
from typing import Optional
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from fragrelease.errors import FragReleaseError, LedgerDamagedError, LedgerStorageError

from ..storage import fs_path as _fs_path
from ..storage import is_storage_failure, path_cause
from .ledger_anchor import Anchor, read_anchor


def _storage_error(path: str, doing: str, exc: BaseException) -> LedgerStorageError:
    return LedgerStorageError(f"budget ledger {path!r} cannot be {doing}: {path_cause(path, exc)}; nothing was spent")


_COMMIT = re.compile(r"(\d{20})\.json")
_CHECKPOINT = re.compile(r"(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet")
REFUSED = "every spend is refused until it is restored from a backup; nothing was spent"


def _damaged(path: str, what: str) -> LedgerDamagedError:
    return LedgerDamagedError(f"budget ledger {path!r} is damaged: {what}; {REFUSED}")


def _first_line(exc: BaseException) -> str:
    line = next((x.strip() for x in str(exc).splitlines() if x.strip()), type(exc).__name__)
    return line if len(line) <= 120 else line[:117] + "..."


@dataclass(frozen=True)
class LogCheck:
    """A ``_delta_log`` that :func:`verify_log` found intact.

    ``version``: the latest version N (versions 0..N exist, the early ones possibly folded into
    ``checkpoint``); ``live``: the data files (paths relative to the ledger root, unquoted) of version
    N, from the checkpoint and the commits after it; ``added_in``: per data file, the version whose
    commit added it (the checkpoint's version for files only the checkpoint lists).
    """

    version: int
    checkpoint: Optional[int]
    live: frozenset[str]
    added_in: dict[str, int]
    #: This machine's anchor of the ledger, read before the log was listed (None: it never spent here).
    anchor: Optional[Anchor] = None


def verify_log(path: str) -> Optional[LogCheck]:
    """Verify the ledger's ``_delta_log`` by listing and reading it (delta-rs is not trusted with this).

    Returns None when there is no ledger yet: ``path`` does not exist, is an empty folder, or holds
    only a ``_delta_log`` without any commit (a creator about to commit version 0). Otherwise the
    commit versions must run without a gap from 0 (or from the latest checkpoint) to the latest N,
    every commit be a non-empty file of JSON lines that parse, and the checkpoint be readable Parquet.

    Raises
    ------
    LedgerDamagedError
        The folder holds files but no ``_delta_log``; a commit version is missing; a commit is empty,
        not UTF-8 or not JSON lines (truncated, half-written); the checkpoint is unreadable. One line
        naming ``path`` and the damage.
        Or there is no ledger at ``path`` while this machine's anchor records a spend in it (the
        ledger was deleted): the message names the owner and the anchored version.
    LedgerStorageError
        The folder or a log file cannot be read (permission denied, ...), or ``path`` is a file.
    ConfigError
        This machine's anchor file of the ledger is open to others or unreadable
        (:func:`fragrelease.jobs.protocol.ledger_anchor.read_anchor`).
    """
    anchor = read_anchor(path)  # first: what it names was committed before the log is listed below
    check = _listed_log(path)
    if check is None:
        if anchor is not None:
            raise _damaged(path, f"it is gone (no folder, or an empty one), but {anchor.describe()}")
        return None
    return LogCheck(check.version, check.checkpoint, check.live, check.added_in, anchor)


def _listed_log(path: str) -> Optional[LogCheck]:
    """:func:`verify_log` without the anchor."""
    import pyarrow.fs as pafs

    fs, root = _fs_path(path)
    try:
        info = fs.get_file_info(root)
        if info.type == pafs.FileType.NotFound:
            return None
        if info.type != pafs.FileType.Directory:
            raise LedgerStorageError(f"budget ledger {path!r} cannot be read: it is a file, not a folder; "
                                     "nothing was spent")
        entries = fs.get_file_info(pafs.FileSelector(root))
        log_dir = posixpath.join(root, "_delta_log")
        logs = [e for e in entries if e.base_name == "_delta_log"]
        if not logs:
            if not entries:
                return None
            names = sorted(e.base_name for e in entries)
            raise _damaged(path, f"it holds {', '.join(names[:3])}{', ...' if len(names) > 3 else ''} "
                                 "but no _delta_log (its log is missing)")
        if logs[0].type != pafs.FileType.Directory:
            raise _damaged(path, "its _delta_log is a file, not a folder")
        log_entries = fs.get_file_info(pafs.FileSelector(log_dir))
    except FragReleaseError:
        raise
    except BaseException as exc:
        if not is_storage_failure(exc):
            raise
        raise _storage_error(path, "read", exc) from None
    commits: dict[int, str] = {}
    parts: dict[int, dict[int, set[str]]] = {}
    for e in log_entries:
        if (m := _COMMIT.fullmatch(e.base_name)) is not None and e.type == pafs.FileType.File:
            commits[int(m[1])] = e.path
        elif (m := _CHECKPOINT.fullmatch(e.base_name)) is not None and e.type == pafs.FileType.File:
            parts.setdefault(int(m[1]), {}).setdefault(int(m[3] or 1), set()).add(e.path)
    # a checkpoint counts when all of its parts are there (a writer may be writing a later one)
    complete = [v for v, by_n in parts.items() for n, files in by_n.items() if len(files) == n]
    checkpoint = max(complete, default=None)
    if not commits and checkpoint is None:
        if len(entries) == 1:
            return None  # only an empty _delta_log: a new ledger whose creator has not committed yet
        raise _damaged(path, "its _delta_log holds no commit (its log is missing)")
    latest = max([*commits, *([checkpoint] if checkpoint is not None else [])])
    first = 0 if checkpoint is None else checkpoint + 1
    missing = [v for v in range(first, latest + 1) if v not in commits]
    if missing:
        raise _damaged(path, f"commit version {missing[0]} is missing from its _delta_log (a gap in versions "
                             f"{first}..{latest})")
    live: set[str] = set()
    added_in: dict[str, int] = {}
    if checkpoint is not None:
        n = next(n for n, files in parts[checkpoint].items() if len(files) == n)
        for file in sorted(parts[checkpoint][n]):
            for add in _checkpoint_adds(path, fs, file):
                live.add(add)
                added_in.setdefault(add, checkpoint)
    for version in sorted(commits):
        for action in _commit_actions(path, fs, commits[version], version):
            if isinstance(action.get("add"), dict) and isinstance(action["add"].get("path"), str):
                name = unquote(action["add"]["path"])
                added_in[name] = version
                if version >= first:
                    live.add(name)
            elif isinstance(action.get("remove"), dict) and isinstance(action["remove"].get("path"), str):
                if version >= first:
                    live.discard(unquote(action["remove"]["path"]))
    return LogCheck(version=latest, checkpoint=checkpoint, live=frozenset(live), added_in=added_in)


def _read_bytes(path: str, fs, file: str) -> bytes:
    try:
        with fs.open_input_stream(file) as f:
            return f.read()
    except FileNotFoundError:
        raise _damaged(path, f"{posixpath.basename(file)} vanished from its _delta_log while it was read") from None
    except BaseException as exc:
        if not is_storage_failure(exc):
            raise
        raise _storage_error(path, "read", exc) from None


def _commit_actions(path: str, fs, file: str, version: int) -> list[dict]:
    """The actions of one commit file, each line parsed; a damaged commit raises LedgerDamagedError."""
    name = f"commit {posixpath.basename(file)} (version {version})"
    data = _read_bytes(path, fs, file)
    if not data.strip():
        raise _damaged(path, f"{name} is empty (a crash before it reached the disk?)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _damaged(path, f"{name} is not UTF-8 text") from None
    actions = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError:
            raise _damaged(path, f"{name} is not valid JSON at line {number} (truncated or half-written)") from None
        if not isinstance(action, dict):
            raise _damaged(path, f"{name} line {number} is not a Delta action")
        actions.append(action)
    return actions


def _checkpoint_adds(path: str, fs, file: str) -> list[str]:
    """The data files a checkpoint part lists as added (relative, unquoted)."""
    try:
        with fs.open_input_file(file) as f:
            table = pq.read_table(f, columns=["add"])
    except FileNotFoundError:
        raise _damaged(path, f"checkpoint {posixpath.basename(file)} vanished while it was read") from None
    except (pa.ArrowInvalid, KeyError) as exc:
        raise _damaged(path, f"checkpoint {posixpath.basename(file)} is not readable ({_first_line(exc)})") from None
    except BaseException as exc:
        if not is_storage_failure(exc):
            raise
        raise _storage_error(path, "read", exc) from None
    return [unquote(a["path"]) for a in table.column("add").to_pylist() if a and isinstance(a.get("path"), str)]


def _fsync(fs, *paths: str) -> None:
    """fsync files and folders of a local ledger (object stores: a completed write is durable)."""
    import pyarrow.fs as pafs

    if not isinstance(fs, pafs.LocalFileSystem):
        return
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
