"""The built wheel installed clean next to a Spark runtime's own pyspark (issue 37, "A wheel that
installs clean anywhere"; earlier: "The Databricks bundle would break a cluster", "run the API
end-to-end test in CI on the lowest supported pyspark").

A virtual environment is created NEW for every run (``python -m venv`` under pytest's tmp folder,
removed afterwards). pyspark at the lowest supported version (:data:`LOWEST_PYSPARK`, the Spark of
Databricks Runtime 17.x) is installed into it first, as a runtime has its own pre-installed; pip's
cache may serve that one. Then the wheel built from this checkout is installed the ordinary way,
WITH its dependencies and ``--no-cache-dir``, so every requirement comes from the wheel's own
metadata and nothing an earlier environment or cache held can hide an undeclared one (0.8.4's
``import click``, which typer >= 0.26 no longer brings, crashed every console script this way).
pip must leave the runtime's pyspark in place: the wheel depends on neither pyspark nor delta-spark
(setup.py's ``local`` extra does). Then every console script of the wheel answers ``--help`` and a
two-owner release runs end to end and commits, on that pyspark.

Cost on 2 cores: the environment takes 1-3 minutes (pyspark from pip's cache, the rest downloaded),
the release 1-3 minutes.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HELPER = ROOT / "tests" / "helpers" / "two_owner_release.py"
#: The lowest supported pyspark (fragrelease.jobs.SUPPORTED_PYSPARK[0]): its newest patch release.
LOWEST_PYSPARK = "4.0.5"
#: Variables of this test process's own Spark and venv that must not leak into the other environment.
_SPARK_ENV = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET",
              "SPARK_HOME", "SPARK_REMOTE", "PYTHONPATH", "VIRTUAL_ENV", "PIP_FIND_LINKS", "PIP_NO_INDEX")


def _run(cmd, **kw):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{cmd}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


def build_wheel(dest: Path) -> Path:
    """The wheel of this checkout, built into ``dest`` (``pip wheel --no-deps``)."""
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", dest, ROOT], timeout=600)
    return next(dest.glob("fragrelease-*.whl"))


def console_scripts(wheel: Path) -> list[str]:
    """The names of the wheel's console scripts (its ``entry_points.txt``)."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt"))
        text = zf.read(name).decode()
    section, names = None, []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]")
        elif line and section == "console_scripts":
            names.append(line.split("=")[0].strip())
    return names


@pytest.fixture(scope="module")
def runtime_venv(tmp_path_factory):
    """A venv made new for this run: pyspark LOWEST_PYSPARK first, then this checkout's wheel with its
    dependencies, none of them from pip's cache. Yields (python, env, pip's install log, wheel)."""
    from fragrelease.jobs import SUPPORTED_PYSPARK

    assert tuple(int(x) for x in LOWEST_PYSPARK.split(".")[:2]) == SUPPORTED_PYSPARK[0]
    wheel = build_wheel(tmp_path_factory.mktemp("dist"))
    env = {k: v for k, v in os.environ.items() if k not in _SPARK_ENV}
    venv = tmp_path_factory.mktemp("runtime") / "venv"
    _run([sys.executable, "-m", "venv", venv], timeout=300)
    py = venv / "bin" / "python"
    _run([py, "-m", "pip", "install", "--quiet", "--progress-bar", "off", f"pyspark[sql,connect]=={LOWEST_PYSPARK}"],
         env=env, timeout=2400)
    install = _run([py, "-m", "pip", "install", "--no-cache-dir", "--progress-bar", "off", wheel], env=env,
                   timeout=1800)
    yield py, env, install.stdout, wheel
    shutil.rmtree(venv, ignore_errors=True)  # about 1 GB, made by this fixture


def _version(py, env, dist: str):
    proc = subprocess.run([str(py), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                          capture_output=True, text=True, env=env, timeout=120)
    return proc.stdout.strip() if proc.returncode == 0 else None


@pytest.mark.slow  # a new venv (1-3 minutes)
def test_installing_the_wheel_leaves_the_runtime_pyspark_alone(runtime_venv):
    py, env, log, _ = runtime_venv
    assert _version(py, env, "fragrelease") is not None
    assert _version(py, env, "pyspark") == LOWEST_PYSPARK, log
    assert _version(py, env, "delta-spark") is None  # a runtime's Delta is its own too
    installed = [ln for ln in log.splitlines() if ln.startswith("Successfully installed")]
    assert installed and "fragrelease-" in installed[0] and "pyspark" not in installed[0], log[-2000:]
    # DistDiffGen's Paillier library is the diffgen extra's, not the base's
    assert _version(py, env, "phe") is None and _version(py, env, "gmpy2") is None, log[-2000:]
    _run([py, "-m", "pip", "check"], env=env, timeout=300)


@pytest.mark.slow  # a new venv (1-3 minutes)
def test_every_console_script_of_the_wheel_answers_help(runtime_venv):
    py, env, _, wheel = runtime_venv
    scripts = console_scripts(wheel)
    assert scripts == ["fragrelease", "fragrelease-aggregator-plan", "fragrelease-aggregator-release",
                       "fragrelease-owner-metadata", "fragrelease-owner-protect"]
    for name in scripts:
        proc = subprocess.run([str(py.parent / name), "--help"], capture_output=True, text=True, env=env,
                              timeout=300)
        assert proc.returncode == 0, f"{name} --help:\n{proc.stderr[-3000:]}"
        assert "Usage:" in proc.stdout and "--help" in proc.stdout, proc.stdout
    # usage errors are typer's own (typer >= 0.26 has its own click): exit 2, click's message, no traceback
    # (typer 0.29 words it "No such option: --owners", typer 0.23 "No such option '--owners'")
    for argv, message in ((["fragrelease-owner-metadata", "--owners=x"], r"Error: No such option:? '?--owners\b"),
                          (["fragrelease", "--verbose", "--quiet", "validate", "x"],
                           r"Error: --verbose and --quiet exclude each other")):
        proc = subprocess.run([str(py.parent / argv[0]), *argv[1:]], capture_output=True, text=True, env=env,
                              timeout=300)
        assert proc.returncode == 2 and re.search(message, proc.stderr), proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
    # the module form too (spark-submit.sh runs scripts/spark_entry.py, which calls the same main)
    proc = subprocess.run([str(py), "-m", "fragrelease.jobs.cli", "--version"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0 and proc.stdout.startswith("fragrelease "), proc.stderr[-3000:]


@pytest.mark.slow  # a new venv (1-3 minutes)
def test_the_wheel_carries_the_report_templates(runtime_venv):
    """Every Jinja2 template of the reports is in the wheel and loads from the installed package."""
    from fragrelease.jobs.idpir.report import TEMPLATES

    py, env, _, wheel = runtime_venv
    names = sorted(p.name for p in TEMPLATES.iterdir())
    prefix = "fragrelease/jobs/idpir/templates/"
    with zipfile.ZipFile(wheel) as zf:
        assert sorted(n[len(prefix):] for n in zf.namelist() if n.startswith(prefix)) == names
    code = ("from fragrelease.jobs.idpir.report import TEMPLATES, environment; "
            f"[environment().get_template(n) for n in {names!r}]; print(TEMPLATES)")
    proc = subprocess.run([str(py), "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert str(ROOT) not in proc.stdout and "site-packages" in proc.stdout  # the wheel's own copy


@pytest.mark.slow  # a whole two-owner release on the lowest supported pyspark (about a minute)
@pytest.mark.spark  # starts its own local Spark session in the other environment
def test_a_two_owner_release_commits_on_the_lowest_supported_pyspark(runtime_venv, tmp_path):
    py, env, _, _ = runtime_venv
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
    assert (tmp_path / "release" / "_delta_log" / "00000000000000000000.json").is_file()  # committed
