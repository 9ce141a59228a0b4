"""The built wheel on a Spark runtime, and the lowest supported pyspark (issue: "The Databricks bundle
would break a cluster"; "run the API end-to-end test in CI on the lowest supported pyspark").

A NEW virtual environment (under the test's temporary folder) first gets pyspark at the lowest
supported version (:data:`LOWEST_PYSPARK`), as a Spark runtime holds its own; then the wheel built from
this checkout is installed the ordinary way, WITH its dependencies. pip must leave that pyspark in
place (the wheel does not depend on pyspark or delta-spark: setup.py's ``local`` extra does). Then a
two-owner release runs end to end in that environment, on that pyspark.

Cost: pip's own cache (``~/.cache/pip``, outside the repository) holds the built pyspark wheel after
the first run, so the venv takes about 1-2 minutes (mostly copying pyspark and the scientific stack),
and the release about 1 minute on 2 cores; the first run on a new machine also downloads pyspark's
434 MB source once. Nothing is written inside the repository.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HELPER = ROOT / "tests" / "helpers" / "two_owner_release.py"
#: The lowest supported pyspark (fragrelease.jobs.SUPPORTED_PYSPARK[0]): its newest patch release.
LOWEST_PYSPARK = "4.0.5"
#: Variables of this test process's own Spark that must not leak into the other environment.
_SPARK_ENV = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET",
              "SPARK_HOME", "SPARK_REMOTE", "PYTHONPATH", "VIRTUAL_ENV")


def _run(cmd, **kw):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{cmd}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def runtime_venv(tmp_path_factory):
    """A new venv holding pyspark LOWEST_PYSPARK, then the wheel of this checkout installed with its deps."""
    from fragrelease.jobs import SUPPORTED_PYSPARK

    assert tuple(int(x) for x in LOWEST_PYSPARK.split(".")[:2]) == SUPPORTED_PYSPARK[0]
    base = tmp_path_factory.mktemp("runtime")
    dist = base / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", dist, ROOT], timeout=600)
    wheel = next(dist.glob("fragrelease-*.whl"))
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", venv], timeout=300)
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in _SPARK_ENV}
    _run([py, "-m", "pip", "install", "--quiet", f"pyspark[sql,connect]=={LOWEST_PYSPARK}"], env=env, timeout=1800)
    install = _run([py, "-m", "pip", "install", "--progress-bar", "off", wheel], env=env, timeout=1800)
    return py, env, install.stdout


def _version(py, env, dist: str):
    proc = subprocess.run([str(py), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                          capture_output=True, text=True, env=env, timeout=120)
    return proc.stdout.strip() if proc.returncode == 0 else None


@pytest.mark.slow  # builds a venv (1-2 minutes from pip's cache)
def test_installing_the_wheel_leaves_the_runtime_pyspark_alone(runtime_venv):
    py, env, log = runtime_venv
    assert _version(py, env, "fragrelease") is not None
    assert _version(py, env, "pyspark") == LOWEST_PYSPARK, log
    assert _version(py, env, "delta-spark") is None  # a runtime's Delta is its own too
    installed = [ln for ln in log.splitlines() if ln.startswith("Successfully installed")]
    assert installed and "fragrelease-" in installed[0] and "pyspark" not in installed[0], log[-2000:]
    _run([py, "-m", "pip", "check"], env=env, timeout=300)


@pytest.mark.slow  # a whole two-owner release on the lowest supported pyspark (about a minute)
@pytest.mark.spark  # starts its own local Spark session in the other environment
def test_a_two_owner_release_runs_on_the_lowest_supported_pyspark(runtime_venv, tmp_path):
    py, env, _ = runtime_venv
    env = {**env, "FRAGRELEASE_DRIVER_MEMORY": "1g"}
    proc = subprocess.run([str(py), str(HELPER), str(tmp_path)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["pyspark"] == LOWEST_PYSPARK and out["spark"].startswith("4.0."), out
    assert str(ROOT) not in out["fragrelease_file"]  # the installed wheel, not this checkout
    assert out["protected_rows"] == 100
    assert (out["version"], out["rows"], out["read_back"], out["owners"]) == (0, 300, 300, ["a", "b"])
    assert len(out["progress"]) == 6 and out["progress"][-1].startswith("step 6/6 aggregator: verifying")
