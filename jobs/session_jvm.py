"""The embedded session's driver JVM: its JIT for small declared inputs and its start-up lines on standard error.

An embedded session on a ``local`` master whose declared inputs are small (``get_spark(..., small_inputs=True)``: every
input a local file or folder, :data:`SMALL_INPUT_BYTES` in all, :func:`inputs_are_small`, measured before
the JVM starts) runs its driver JVM with the C1 compiler only (:data:`SMALL_INPUT_JAVA_OPTIONS`). A
new JVM's first small release spends most of its CPU in the JVM (its JIT compilers about half of
it, docs/benchmarks.md, "Where a new JVM's first release spends its CPU (a flight recording)"), on
code that C2 would optimize only after the release is over; a session over larger inputs keeps
the JVM's default tiered compilation (C2), which large fragments need. The sizes decide one JVM
option and are written nowhere (docs/benchmarks.md, "Issue 41, session 4: the first release's warm-up").

While the JVM starts, standard error goes through a filter that drops the lines every JVM prints on
start-up whatever its logging configuration (:data:`JVM_STARTUP_NOISE`, :func:`jvm_startup_filtered`).
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Iterable, Iterator
from urllib.parse import unquote, urlparse

#: Declared inputs of at most this many bytes in all (local files and folders) make the embedded session
#: "small" (:func:`inputs_are_small`): its driver JVM gets :data:`SMALL_INPUT_JAVA_OPTIONS`.
SMALL_INPUT_BYTES = 16 << 20
#: The driver JVM's options for small inputs: the C1 compiler only, with a code cache large enough for a
#: release's compiled methods (the default 48 MB of a C1-only JVM fills, and the JVM then stops compiling).
SMALL_INPUT_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
#: Lines the JVM prints on start-up whatever its logging configuration (Spark's launcher always adds
#: ``--add-modules=jdk.incubator.vector``): dropped from standard error while the session starts
#: (:func:`jvm_startup_filtered`).
JVM_STARTUP_NOISE = ("WARNING: Using incubator modules: ",)


def _tree_bytes(path: str, limit: int) -> int | None:
    """Bytes of the regular files at or under the local ``path`` (symbolic links not followed), counted
    up to just over ``limit``; None when ``path`` is neither a regular file nor a folder, or cannot be read."""
    try:
        if os.path.isfile(path):
            return os.path.getsize(path)
        if not os.path.isdir(path):
            return None
        total = 0
        for top, _dirs, files in os.walk(path, onerror=_raise):
            for name in files:
                full = os.path.join(top, name)
                if not os.path.islink(full):
                    total += os.path.getsize(full)
                if total > limit:
                    return total
        return total
    except OSError:
        return None


def _raise(exc: OSError) -> None:
    raise exc


def inputs_are_small(paths: Iterable[str | None], limit: int = SMALL_INPUT_BYTES) -> bool:
    """True when every path of ``paths`` is a local file or folder (a plain path or a ``file:`` URI, no
    glob) and they hold at most ``limit`` bytes in all; False for an empty list, a ``None`` (an input
    that is not a path: a catalog table), a remote URI, a glob, a missing path or one that cannot be read.

    Reads file sizes only (``os.stat``), never contents; the answer is used for a JVM option and is
    written nowhere (:data:`SMALL_INPUT_JAVA_OPTIONS`).
    """
    total, seen = 0, 0
    for raw in paths:
        seen += 1
        if raw is None or any(c in raw for c in "*?[{"):
            return False
        parsed = urlparse(raw)
        if parsed.scheme == "file":
            path = unquote(parsed.path)
        elif parsed.scheme == "" or (len(parsed.scheme) == 1 and os.name == "nt"):
            path = raw
        else:
            return False
        size = _tree_bytes(path, limit - total)
        if size is None:
            return False
        total += size
        if total > limit:
            return False
    return seen > 0

def _is_startup_noise(line: bytes) -> bool:
    text = line.decode("utf-8", "replace").rstrip("\r\n")
    return any(text.startswith(prefix) for prefix in JVM_STARTUP_NOISE)


def _forward(read_fd: int, write_fd: int) -> None:
    """Copy the lines of ``read_fd`` to ``write_fd``, without the lines of :data:`JVM_STARTUP_NOISE`."""
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        for line in iter(pipe.readline, b""):
            if not _is_startup_noise(line):
                try:
                    os.write(write_fd, line)
                except OSError:  # standard error closed: nothing to forward to
                    return


@contextlib.contextmanager
def jvm_startup_filtered() -> Iterator[None]:
    """Standard error (file descriptor 2), while the embedded session's JVM starts, goes through a pipe that
    drops the lines of :data:`JVM_STARTUP_NOISE` and forwards everything else; the JVM keeps the pipe (its
    later errors are forwarded by a daemon thread), this process writes to standard error directly again
    afterwards. Not on Windows, nor when file descriptor 2 is not open."""
    if os.name != "posix":
        yield
        return
    try:
        sys.stderr.flush()
        original = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    threading.Thread(target=_forward, args=(read_fd, original), name="fragrelease-jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(original, 2)  # `original` stays open: the forwarding thread writes to it
