"""What a failed read or write on shared storage was, in one line (for :mod:`fragrelease.errors`'
storage errors).

delta-rs reports operating-system failures as ``DeltaError``/``CommitFailedError`` texts ending in
``(os error N)``, and sometimes as a Rust panic (``pyo3_runtime.PanicException``, which derives from
``BaseException``); pyarrow and Python raise ``OSError`` with an errno. :func:`os_cause` reduces all of
them to the operating system's own words, e.g. ``"No space left on device (ENOSPC)"``.
"""
from __future__ import annotations

import errno as _errno
import os
import re

_OS_ERROR = re.compile(r"os error (\d+)")
_ERRNO = re.compile(r"\[errno (\d+)\]", re.IGNORECASE)
#: causes recognised by their text in messages that carry no code (Java's IOExceptions through Spark)
_KNOWN = (_errno.ENOSPC, _errno.EDQUOT, _errno.EROFS, _errno.EACCES, _errno.EPERM, _errno.ENOTDIR, _errno.EISDIR,
          _errno.ENOENT)


def _named(code: int) -> str:
    name = _errno.errorcode.get(code)
    return f"{os.strerror(code)} ({name})" if name else os.strerror(code)


def os_cause(exc: BaseException) -> str:
    """The cause of a storage failure as one line: the OS error's text and symbol when one is known,
    else the first line of the exception's message (at most 200 characters)."""
    if isinstance(exc, OSError) and exc.errno:
        return _named(exc.errno)
    text = str(exc)
    for pattern in (_OS_ERROR, _ERRNO):
        codes = pattern.findall(text)
        if codes:
            return _named(int(codes[-1]))
    for code in _KNOWN:
        if os.strerror(code).lower() in text.lower():
            return _named(code)
    return _first_line(exc)


def _first_line(exc: BaseException) -> str:
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return first if len(first) <= 200 else first[:197] + "..."


def is_storage_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure of the storage layer (OSError, a delta-rs error or a delta-rs panic)
    rather than a programming error or an interrupt."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
        return False
    if isinstance(exc, OSError):
        return True
    from deltalake.exceptions import CommitFailedError, DeltaError

    return isinstance(exc, (DeltaError, CommitFailedError)) or type(exc).__name__ == "PanicException"


def is_write_failure(exc: BaseException) -> bool:
    """:func:`is_storage_failure`, or a failed Spark job (a Spark write or read that storage refused)."""
    if is_storage_failure(exc):
        return True
    if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
        return False
    from pyspark.errors import PySparkException

    return isinstance(exc, PySparkException) or type(exc).__name__ == "Py4JJavaError"


def path_cause(path: str, exc: BaseException) -> str:
    """:func:`os_cause`, made precise for a local ``path`` when the exception carries no OS error code
    (delta-rs's "Could not create local directory"): a regular file where a folder must be, or an
    unwritable folder, is named."""
    cause = os_cause(exc)
    if cause != _first_line(exc):
        return cause
    from urllib.parse import urlparse

    if urlparse(path).scheme not in ("", "file"):
        return cause
    local = urlparse(path).path if path.startswith("file:") else path
    probe = os.path.abspath(local)
    while not os.path.lexists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    if os.path.lexists(probe) and not os.path.isdir(probe):
        return f"{_named(_errno.ENOTDIR)}: {probe!r} is a file"
    if os.path.isdir(probe) and not os.access(probe, os.W_OK):
        return f"{_named(_errno.EACCES)}: {probe!r}"
    return cause
