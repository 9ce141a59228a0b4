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
two-owner release runs end to end and commits, on that pyspark. Last, the synthetic kind (issue 53): the
bare wheel refuses a synthetic configuration (mbi comes with the ``synthesis`` extra), then the same venv
gets what databricks.yml installs for its synthetic jobs (the wheel and the extra's requirement), validates
the configuration and runs the synthetic demo job's steps through the wheel's entry points.

Cost on 2 cores: the environment takes 1-3 minutes (pyspark from pip's cache, the rest downloaded),
the release 1-3 minutes; the synthesis extra (OpenDP, JAX) about a minute, the synthetic release 1-3.
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
import yaml

ROOT = Path(__file__).resolve().parents[1]
HELPER = ROOT / "tests" / "helpers" / "two_owner_release.py"
SYNTHETIC_HELPER = ROOT / "tests" / "helpers" / "synthetic_job.py"
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
    from fragrelease.jobs.protocol.report import TEMPLATES

    py, env, _, wheel = runtime_venv
    names = sorted(p.name for p in TEMPLATES.iterdir())
    prefix = "fragrelease/jobs/protocol/templates/"
    with zipfile.ZipFile(wheel) as zf:
        assert sorted(n[len(prefix):] for n in zf.namelist() if n.startswith(prefix)) == names
    code = ("from fragrelease.jobs.protocol.report import TEMPLATES, environment; "
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
    steps = [line for line in out["progress"] if line.startswith("step ")]
    assert len(steps) == 6 and steps[-1].startswith("step 6/6 aggregator: verifying")
    # the run's cost line (resume, don't respend), logged to the same logger before any owner spends
    others = [line for line in out["progress"] if not line.startswith("step ")]
    assert len(others) == 1 and others[0].startswith("new plan ") and "(no earlier attempt to resume)" in others[0]
    assert (tmp_path / "release" / "_delta_log" / "00000000000000000000.json").is_file()  # committed


# ---------------------------------------------------------------- the synthetic kind as databricks.yml installs it


def bundle_synthetic_installs() -> list[str]:
    """What databricks.yml's classic target installs on the synthetic jobs' tasks, as pip arguments
    (``./dist/*.whl`` for the wheel, then PyPI requirements), the variables filled in. Every synthetic task of
    either target installs the same (tests/jobs/test_databricks_bundle.py)."""
    bundle = yaml.safe_load((ROOT / "databricks.yml").read_text())
    variables = {k: str(v.get("default", "")) for k, v in bundle["variables"].items()}
    tasks = bundle["targets"]["classic"]["resources"]["jobs"]["fragrelease_synthetic"]["tasks"]
    task = next(t for t in tasks if t["task_key"] == "aggregator_release")
    libs = [lib.get("whl") or lib["pypi"]["package"] for lib in task["libraries"]]
    return [re.sub(r"\$\{var\.(\w+)\}", lambda m: variables[m.group(1)], x) for x in libs]


def _synthetic_conf(tmp: Path) -> Path:
    """A small synthetic configuration: the first 800 rows of Adult with income (a Parquet file), cut into two
    simulated owners with signing keys."""
    from fragrelease.schemas.datasets import load_builtin_pandas
    from fragrelease.signing import write_key_pair

    source = tmp / "adult-income.parquet"
    load_builtin_pandas("adult-income").head(800).to_parquet(source, index=False)

    owners = []
    for name in ("owner-1", "owner-2"):
        path, public = write_key_pair(str(tmp / "keys"), name)
        owners.append({"name": name, "rows": 400, "signing_key": path, "public_key": public})
    conf = tmp / "synthetic.yaml"
    conf.write_text(yaml.safe_dump(dict(
        name="wheel-synthetic", dataset="adult-income", fragmentation="horizontal", linkage="synthetic",
        synthesis_target="income", epsilon="1", reports=False, owners=owners,
        source={"path": str(source), "format": "parquet"},
        work_dir=str(tmp / "work"), output=str(tmp / "release"))))
    return conf


@pytest.fixture(scope="module")
def synthetic_venv(runtime_venv, tmp_path_factory):
    """runtime_venv after the bare wheel's answer to ``fragrelease validate`` of a synthetic configuration,
    with what databricks.yml installs for the synthetic jobs added (the wheel again: already there).
    Yields (python, env, the configuration, the bare wheel's validate process, pip's install log)."""
    py, env, _, wheel = runtime_venv
    tmp = tmp_path_factory.mktemp("synthetic")
    conf = _synthetic_conf(tmp)
    bare = subprocess.run([str(py.parent / "fragrelease"), "validate", str(conf)], capture_output=True, text=True,
                          env=env, cwd=tmp, timeout=300)
    wanted = [str(wheel) if x == "./dist/*.whl" else x for x in bundle_synthetic_installs()]
    install = _run([py, "-m", "pip", "install", "--progress-bar", "off", *wanted], env=env, timeout=1800)
    yield py, env, conf, bare, install.stdout


@pytest.mark.slow  # a new venv (1-3 minutes) and the synthesis extra (about a minute)
def test_the_bundle_installs_what_a_synthetic_configuration_needs(synthetic_venv):
    py, env, conf, bare, log = synthetic_venv
    # the bare wheel (what the bundle installed before issue 53): refused before Spark, one line, exit 2
    assert bare.returncode == 2, bare.stdout + bare.stderr
    assert "mbi (Private-PGM), which is not installed" in bare.stderr and len(bare.stderr.strip().splitlines()) == 1
    assert bundle_synthetic_installs()[0] == "./dist/*.whl" and len(bundle_synthetic_installs()) == 2
    proc = subprocess.run([str(py.parent / "fragrelease"), "validate", str(conf)], capture_output=True, text=True,
                          env=env, cwd=conf.parent, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _version(py, env, "pyspark") == LOWEST_PYSPARK, log[-2000:]  # the runtime's pyspark stays
    assert _version(py, env, "delta-spark") is None
    _run([py, "-m", "pip", "check"], env=env, timeout=300)


@pytest.mark.slow  # a whole two-owner synthetic release, three rounds, on the lowest supported pyspark
@pytest.mark.spark  # starts its own local Spark session in the other environment
def test_the_synthetic_demo_job_runs_on_the_lowest_supported_pyspark(synthetic_venv):
    py, env, conf, _, _ = synthetic_venv
    env = {**env, "FRAGRELEASE_DRIVER_MEMORY": "1g"}
    c, owners = str(conf), ("owner-1", "owner-2")
    owner_step = [["--config", c, "--owner", o, "--source-table", ""] for o in owners]
    aggregator_step = ["--config", c, "--output-table", ""]
    # the tasks of fragrelease_synthetic_demo, in order, with the arguments they receive (the bundle test
    # checks this order and these arguments against databricks.yml)
    steps = [["fragrelease", ["split", c]],
             *(["fragrelease-owner-metadata", a] for a in owner_step),
             ["fragrelease-aggregator-plan", aggregator_step],
             *(["fragrelease-owner-protect", a] for a in owner_step),  # round 1: the keys
             *(["fragrelease-owner-protect", a] for a in owner_step),  # round 2
             *(["fragrelease-owner-protect", a] for a in owner_step),  # round 3
             ["fragrelease-aggregator-release", aggregator_step]]
    proc = subprocess.run([str(py), str(SYNTHETIC_HELPER), json.dumps(steps), str(conf.parent / "release")],
                          capture_output=True, text=True, env=env, cwd=conf.parent, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["statuses"] == [0] * len(steps), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert str(ROOT) not in out["fragrelease_file"]  # the installed wheel, not this checkout
    assert (out["version"], out["linkage"]) == (0, "synthetic") and out["rows"] > 0
    assert out["guarantee"].startswith("fragrelease synthetic release of dataset adult-income"), out["guarantee"]
    for o in owners:
        assert (conf.parent / "work" / "owners" / o / "synthesis-round-3.json").is_file()
