"""Test-only observer loaded by the executors' Python workers (tests/jobs/test_standalone_cluster.py).

The cluster test puts this folder on the executors' PYTHONPATH (``spark.executorEnv.PYTHONPATH``),
so Python imports it at the start of every worker. It changes nothing in the release: when
``FRAGRELEASE_TEST_DRAW_LOG`` names a folder it wraps, as the modules are imported from wherever
they come from (the shipped wheel), two functions the protect step calls on the executors:

- ``fragrelease.idpir.mechanisms.noisy_centroids`` (the Laplace draws of every cluster centroid):
  each call appends its draws (attribute, cluster, value), the worker's pid, the pid of the
  executor JVM that runs it and the file the package was imported from to ``draws-*.jsonl``;
- ``fragrelease.idpir.postprocess.finish_centroids`` (the isotonic post-processing that runs right
  after the noisy centroids are materialized): each call appends its input and output to
  ``finish-*.jsonl``. With ``FRAGRELEASE_TEST_PAUSE_AFTER_NOISE`` set, the call first creates
  ``noise-done`` and waits (at most 180 s) for a ``go`` file, the window in which the test kills
  an executor.

The UDFs reach both functions by reference (cloudpickle pickles importable functions by module and
name), so the wrapped versions are the ones the tasks call. The draws logged are therefore every
draw any task made, retried or not.
"""
import importlib.abc
import json
import os
import sys
import time
import uuid

_LOG = os.environ.get("FRAGRELEASE_TEST_DRAW_LOG")
_TARGETS = {"fragrelease.idpir.mechanisms", "fragrelease.idpir.postprocess"}


def _executor_pid() -> int:
    """The pid of the executor JVM above this Python worker (worker → daemon → JVM)."""
    pid = os.getpid()
    for _ in range(6):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"CoarseGrainedExecutorBackend" in f.read():
                    return pid
            with open(f"/proc/{pid}/status") as f:
                pid = int(next(line.split()[1] for line in f if line.startswith("PPid:")))
        except (OSError, StopIteration, ValueError):
            break
    return -1


def _append(prefix: str, record: dict) -> None:
    record.update(pid=os.getpid(), executor_pid=_executor_pid())
    path = os.path.join(_LOG, f"{prefix}-{os.getpid()}.jsonl")
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def _patch(name: str, module) -> None:
    import numpy as np

    if name == "fragrelease.idpir.mechanisms":
        original = module.noisy_centroids

        def noisy_centroids(*, centroids, scales, attributes, clusters, noise):  # keyword-only, as the original
            out = original(centroids=centroids, scales=scales, attributes=attributes, clusters=clusters, noise=noise)
            package = sys.modules.get("fragrelease")
            _append("draws", {"attribute": [str(a) for a in np.asarray(attributes)],
                              "cluster": [int(c) for c in np.asarray(clusters)],
                              "value": [float(v) for v in np.asarray(out)],
                              "package_file": os.path.abspath(getattr(package, "__file__", "") or "")})
            return out

        module.noisy_centroids = noisy_centroids
    else:
        original_finish = module.finish_centroids

        def finish_centroids(noisy, sizes, lo, hi, categorical, postprocess):
            if os.environ.get("FRAGRELEASE_TEST_PAUSE_AFTER_NOISE"):
                marker = os.path.join(_LOG, "noise-done")
                if not os.path.exists(marker):
                    with open(f"{marker}.{uuid.uuid4().hex}", "w") as f:
                        f.write(str(_executor_pid()))
                        tmp = f.name
                    os.replace(tmp, marker)
                deadline = time.monotonic() + 180
                while not os.path.exists(os.path.join(_LOG, "go")) and time.monotonic() < deadline:
                    time.sleep(0.1)
            out = original_finish(noisy, sizes, lo, hi, categorical, postprocess)
            _append("finish", {"input": [float(v) for v in np.asarray(noisy)],
                               "output": [float(v) for v in np.asarray(out)]})
            return out

        module.finish_centroids = finish_centroids


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, name):
        self._inner, self._name = inner, name

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        _patch(self._name, module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in _TARGETS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, name)
                return spec
        return None


if _LOG:
    os.makedirs(_LOG, exist_ok=True)
    sys.meta_path.insert(0, _Finder())
