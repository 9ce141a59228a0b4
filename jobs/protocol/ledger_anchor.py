"""This machine's private anchor of a budget ledger: the latest spend it recorded there (Spark-free).

A ledger lies on shared storage; whoever can write there can remove its last commit cleanly or put
an older copy back, and the ledger alone cannot tell (its hash chain,
:mod:`fragrelease.jobs.protocol.ledger_chain`, is recomputable by anyone). So every spend this machine
records also writes, after its commit, the spend's version, chain hash, owner, dataset and running
total to a file outside shared storage:
``<private root>/ledger-anchors/<sha256 of the ledger's absolute location>.json`` (private root:
``$FRAGRELEASE_PRIVATE_ROOT`` or ``~/.fragrelease/private``, :func:`fragrelease.protocol.config.private_root`;
the folder 0700 and the files 0600, :mod:`fragrelease.private_files`). Every read of the ledger
compares the two (:func:`fragrelease.jobs.protocol.ledger_chain.read_spends`): a ledger whose chain no
longer holds the anchored spend is damaged; a ledger ahead of the anchor (another machine spent) is fine.

The write is atomic (a temporary file in the same folder, fsynced, renamed over the anchor, the folder
fsynced) and never goes back: under an exclusive lock (``flock`` on ``<name>.lock``) the anchor is
replaced only by a later version. A crash between the commit and the anchor write leaves the anchor
one spend behind, which reads as a ledger ahead of its anchor (the next spend writes it again).

Not detected (docs/known-limitations.md, "Budget ledger scope"): a rollback on a machine that never
spent on the ledger (it has no anchor), and an attacker who can also write this machine's private folder.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

from fragrelease.errors import ConfigError, LedgerStorageError
from fragrelease.private_files import check_owner_only_mode, make_private_dir
from fragrelease.protocol.config import private_root

from ..storage import absolute

#: The anchors' folder under the private root.
ANCHOR_FOLDER = "ledger-anchors"
FORMAT = "fragrelease-ledger-anchor-1"
_HASH = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Anchor:
    """The latest spend this machine recorded in ledger ``ledger`` (its absolute location): the commit
    ``version`` that holds it, its ``chain`` hash (64 hex digits), its owner and dataset and the owner's
    running ``total`` on the dataset after it; ``file``: where the anchor is kept."""

    ledger: str
    version: int
    chain: str
    owner: str
    dataset: str
    total: Fraction
    file: str

    def describe(self) -> str:
        return (f"this machine recorded the spend of owner {self.owner!r} on {self.dataset!r} at its version "
                f"{self.version} (anchor {self.file!r})")


def anchor_folder() -> str:
    """``<private root>/ledger-anchors`` (not created here)."""
    return os.path.join(os.path.abspath(os.path.expanduser(private_root())), ANCHOR_FOLDER)


def location(ledger: str) -> str:
    """The ledger's absolute location, the anchor's key: a local path made absolute (``file://`` URIs as
    delta-rs names a local table turned into that path), other URIs as written."""
    if ledger.startswith("file://"):
        from urllib.parse import unquote, urlparse

        ledger = unquote(urlparse(ledger).path).rstrip("/") or "/"
    return absolute(ledger)


def anchor_file(ledger: str) -> str:
    """The anchor file of the ledger at ``ledger`` (keyed by its absolute location; not created here)."""
    key = hashlib.sha256(location(ledger).encode("utf-8")).hexdigest()
    return os.path.join(anchor_folder(), key + ".json")


def _who(ledger: str) -> str:
    return f"budget ledger {location(ledger)!r}"


def ensure_anchor_folder(ledger: str) -> None:
    """Create the anchors' folder (0700) when it is missing, before a spend: a private root that cannot
    hold the anchor refuses the spend before anything is recorded.

    Raises
    ------
    ConfigError
        The folder cannot be created, is a file, or is open to group or others (one line naming it).
    """
    make_private_dir(anchor_folder(), who=_who(ledger))


def read_anchor(ledger: str) -> Optional[Anchor]:
    """This machine's anchor of the ledger at ``ledger``, or None when it recorded no spend there.

    Raises
    ------
    ConfigError
        The anchors' folder or the anchor file is open to group or others, cannot be read, or does not
        hold an anchor of this ledger (one line naming the file; remove it deliberately only after
        restoring the ledger from a backup, as this machine then forgets where the ledger stood).
    """
    folder, file = anchor_folder(), anchor_file(ledger)
    who = _who(ledger)
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{who}: anchor folder {folder!r} cannot be read: {exc.strerror or type(exc).__name__}") from None
    check_owner_only_mode(st.st_mode, who=who, what="anchor folder", path=folder, fix=f"chmod 700 {folder}")
    try:
        with open(file, "rb") as f:
            check_owner_only_mode(os.fstat(f.fileno()).st_mode, who=who, what="anchor file", path=file,
                                  fix=f"chmod 600 {file}")
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{who}: anchor file {file!r} cannot be read: {exc.strerror or type(exc).__name__}") from None
    return _parse(ledger, file, data)


def _parse(ledger: str, file: str, data: bytes) -> Anchor:
    where = location(ledger)
    bad = f"{_who(ledger)}: anchor file {file!r} is not an anchor of this ledger"
    try:
        doc = json.loads(data.decode("utf-8"))
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError("format")
        version, chain, total = doc["version"], doc["chain"], Fraction(doc["total"])
        owner, dataset = doc["owner"], doc["dataset"]
    except (ValueError, KeyError, TypeError, ZeroDivisionError):
        raise ConfigError(f"{bad} (not readable as {FORMAT})") from None
    if doc.get("ledger") != where:
        raise ConfigError(f"{bad} (it names {doc.get('ledger')!r})")
    if (not isinstance(version, int) or isinstance(version, bool) or version < 1 or not isinstance(chain, str)
            or not _HASH.fullmatch(chain) or not isinstance(owner, str) or not isinstance(dataset, str)):
        raise ConfigError(f"{bad} (a field is out of range)")
    return Anchor(where, version, chain, owner, dataset, total, file)


def _text(anchor: Anchor) -> bytes:
    doc = {"format": FORMAT, "ledger": anchor.ledger, "version": anchor.version, "chain": anchor.chain,
           "owner": anchor.owner, "dataset": anchor.dataset, "total": str(anchor.total)}
    return (json.dumps(doc, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")


def write_anchor(ledger: str, *, version: int, chain: str, owner: str, dataset: str, total: Fraction) -> bool:
    """Record the spend at ``version`` (chain hash ``chain``) as this machine's anchor of ``ledger``,
    unless the anchor already names a later version (or this one): a late writer never takes it back.
    Returns whether the anchor was replaced.

    Atomic: a temporary file (0600) in the anchors' folder, written and fsynced, renamed over the
    anchor, the folder fsynced; under an exclusive ``flock`` on ``<anchor>.lock``. Called after the
    spend's commit (:func:`fragrelease.jobs.protocol.ledger.try_record`).

    Raises
    ------
    LedgerStorageError
        The anchor cannot be written (the spend stays recorded; the message says so).
    ConfigError
        The existing anchor cannot be read (:func:`read_anchor`).
    """
    import fcntl

    new = Anchor(location(ledger), version, chain, owner, dataset, total, anchor_file(ledger))
    folder = anchor_folder()
    tmp = os.path.join(folder, f".{os.path.basename(new.file)}.{uuid.uuid4().hex}.tmp")
    try:
        make_private_dir(folder, who=_who(ledger))
        lock = os.open(new.file[:-len(".json")] + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            old = read_anchor(ledger)
            if old is not None and old.version >= version:
                return False
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                data = _text(new)
                while data:
                    data = data[os.write(fd, data):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, new.file)
            dir_fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
            return True
        finally:
            os.close(lock)  # releases the lock
    except OSError as exc:
        try:
            os.remove(tmp)  # this call's own temporary file, if it made one
        except OSError:
            pass
        raise LedgerStorageError(f"{_who(ledger)}: the spend at version {version} was recorded but this machine's "
                                 f"anchor {new.file!r} cannot be written: {exc.strerror or type(exc).__name__}; "
                                 "no noise was drawn") from None
    except ConfigError as exc:
        raise LedgerStorageError(f"{exc}; the spend at version {version} was recorded, no noise was drawn") from None
