"""The built wheel on a Spark runtime, and the lowest supported pyspark (issue: "The Databricks bundle
would break a cluster"; "run the API end-to-end test in CI on the lowest supported pyspark").

A virtual environment that holds pyspark at the lowest supported version (:data:`LOWEST_PYSPARK`),
as a Spark runtime holds its own, gets the wheel built from this checkout installed the ordinary way,
WITH its dependencies. pip must leave that pyspark in place (the wheel does not depend on pyspark or
delta-spark: setup.py's ``local`` extra does). Then a two-owner release runs end to end in that
environment, on that pyspark.

The environment is created NEW, with pyspark first, the first time (and whenever its pyspark is no
longer LOWEST_PYSPARK), and kept under ``~/.cache/fragrelease-ci`` (``FRAGRELEASE_CI_CACHE``), outside
the repository; every run uninstalls fragrelease from it and installs the freshly built wheel with its
dependencies again, so the check that pip keeps pyspark runs every time. Cost on 2 cores: creating
it takes 3-8 minutes (pyspark 4.0.5 is a 434 MB source download, built once into pip's cache, plus
the scientific stack), after that about 30 s per run; the release takes 1-3 minutes.
"""
import json
import os
import shutil
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


#: Where the environment is kept (outside the repository).
CACHE = Path(os.environ.get("FRAGRELEASE_CI_CACHE") or Path.home() / ".cache" / "fragrelease-ci")
#: Written into an environment this test created: only such a folder is ever replaced.
MARKER = ".fragrelease-ci-venv"


def _new_runtime_venv(venv: Path, env: dict) -> None:
    """A NEW venv at ``venv`` holding pyspark LOWEST_PYSPARK. A half-made one (an interrupted run) has
    the marker but not that pyspark, so the next run makes it again."""
    if venv.exists():
        assert (venv / MARKER).exists(), f"{venv} was not created by this test; remove it or set FRAGRELEASE_CI_CACHE"
        shutil.rmtree(venv)
    _run([sys.executable, "-m", "venv", venv], timeout=300)
    (venv / MARKER).write_text("created by tests/test_wheel_install.py\n")
    _run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--progress-bar", "off",
          f"pyspark[sql,connect]=={LOWEST_PYSPARK}"], env=env, timeout=2400)


@pytest.fixture(scope="module")
def runtime_venv(tmp_path_factory):
    """The cached venv holding pyspark LOWEST_PYSPARK, with this checkout's wheel installed with its deps."""
    from fragrelease.jobs import SUPPORTED_PYSPARK

    assert tuple(int(x) for x in LOWEST_PYSPARK.split(".")[:2]) == SUPPORTED_PYSPARK[0]
    dist = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", dist, ROOT], timeout=600)
    wheel = next(dist.glob("fragrelease-*.whl"))
    env = {k: v for k, v in os.environ.items() if k not in _SPARK_ENV}
    venv = CACHE / f"venv-pyspark-{LOWEST_PYSPARK}-py{sys.version_info.major}{sys.version_info.minor}"
    py = venv / "bin" / "python"
    if not py.exists() or _version(py, env, "pyspark") != LOWEST_PYSPARK:
        CACHE.mkdir(parents=True, exist_ok=True)
        _new_runtime_venv(venv, env)
    assert _version(py, env, "pyspark") == LOWEST_PYSPARK
    _run([py, "-m", "pip", "uninstall", "--yes", "--quiet", "fragrelease"], env=env, timeout=300)
    install = _run([py, "-m", "pip", "install", "--progress-bar", "off", wheel], env=env, timeout=1800)
    return py, env, install.stdout


def _version(py, env, dist: str):
    proc = subprocess.run([str(py), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                          capture_output=True, text=True, env=env, timeout=120)
    return proc.stdout.strip() if proc.returncode == 0 else None


@pytest.mark.slow  # a venv (created once: minutes; then about 30 s per run)
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
