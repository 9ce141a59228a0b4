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


def known_os_cause(exc: BaseException) -> str | None:
    """The operating system's cause of a storage failure (its text and symbol, e.g. ``"No space left on
    device (ENOSPC)"``) when ``exc`` carries an errno or names one in its text (Java's IOExceptions
    through py4j do: ``java.io.IOException: No space left on device``), else None."""
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
    return None


def os_cause(exc: BaseException) -> str:
    """The cause of a storage failure as one line: the OS error's text and symbol when one is known
    (:func:`known_os_cause`), else the first line of the exception's message (at most 200 characters)."""
    return known_os_cause(exc) or _first_line(exc)


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
    return is_spark_failure(exc)


_ERROR_CLASS = re.compile(r"\[[A-Z][A-Z0-9_.]*\] [^\n]+")


def is_spark_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a failed Spark query or job (pyspark's own errors, a Java exception through py4j)."""
    if type(exc).__name__ == "Py4JJavaError":
        return True
    try:
        from pyspark.errors import PySparkException
    except ImportError:  # no pyspark: nothing can be a Spark failure
        return False
    return isinstance(exc, PySparkException)


def spark_failure_cause(exc: BaseException) -> str | None:
    """One line naming why a Spark job failed, or ``None`` when ``exc`` is not a Spark failure.

    The innermost ``[ERROR_CLASS] message`` Spark names (e.g. ``[CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND]
    Checkpoint block rdd_26_0 not found!`` when the executor holding stored noise was lost), the last
    line of a Python worker's traceback (``RuntimeError: ...``), else the first line of the Java
    exception's message; at most 300 characters.
    """
    if not is_spark_failure(exc):
        return None
    text = str(exc)
    classes = _ERROR_CLASS.findall(text)
    if type(exc).__name__ == "PythonException":  # a Python worker's traceback: its last line names the error
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        line = lines[-1] if lines else type(exc).__name__
    elif classes:
        line = classes[-1].strip()
    else:  # py4j: "An error occurred while calling o12.save.\n: org.apache.spark.SparkException: ..."
        lines = [ln.strip().lstrip(": ").strip() for ln in text.splitlines() if ln.strip()]
        line = next((ln for ln in lines if not ln.startswith("An error occurred while calling")), type(exc).__name__)
    return line if len(line) <= 300 else line[:297] + "..."


def path_cause(path: str, exc: BaseException) -> str:
    """:func:`os_cause`, made precise for a local ``path`` when the exception carries no OS error code
    (delta-rs's "Could not create local directory"): a regular file where a folder must be, or an
    unwritable folder, is named; otherwise a failed Spark job's own cause (:func:`spark_failure_cause`,
    e.g. the lost executor's checkpoint block), not the first line of py4j's message."""
    cause = os_cause(exc)
    if cause != _first_line(exc):
        return cause
    cause = spark_failure_cause(exc) or cause
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
