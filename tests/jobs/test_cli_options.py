"""Global options (--version, --verbose, --quiet), ``validate`` (no Spark), ``inspect``'s one-line
errors and catalog names, and the one-line message when pyspark is missing or too old."""
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import fragrelease
from fragrelease.errors import MissingDependencyError
from fragrelease.jobs.cli import main

ROOT = Path(__file__).resolve().parents[2]
#: Runs the CLI with pyspark made unimportable (``sys.modules['pyspark'] = None``), as on a machine
#: where the wheel was installed without the ``local`` extra and without a Spark runtime.
NO_PYSPARK = ("import sys; sys.modules['pyspark'] = None; from fragrelease.jobs.cli import main; "
              "sys.exit(main(sys.argv[1:]))")


def _cli(*args, code=NO_PYSPARK):
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def test_version_prints_the_package_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"fragrelease {fragrelease.__version__}"


def test_verbose_and_quiet_set_the_log_levels(capsys):
    assert main(["--verbose", "--version"]) == 0  # eager --version: the levels stay the default
    capsys.readouterr()
    assert main(["-v", "validate", "conf/wine-horizontal.yaml"]) == 0
    assert logging.getLogger("fragrelease").getEffectiveLevel() == logging.DEBUG
    capsys.readouterr()
    assert main(["--quiet", "validate", "conf/wine-horizontal.yaml"]) == 0
    assert logging.getLogger("fragrelease.progress").getEffectiveLevel() == logging.ERROR
    assert "OK" not in capsys.readouterr().out  # quiet: errors only
    assert main(["validate", "conf/wine-horizontal.yaml"]) == 0  # every run starts from the defaults
    assert logging.getLogger("fragrelease.progress").getEffectiveLevel() == logging.INFO
    assert capsys.readouterr().out.startswith("OK conf/wine-horizontal.yaml: horizontal release of wine, 3 owners")
    assert main(["-v", "-q", "validate", "conf/wine-horizontal.yaml"]) == 2


def test_validate_runs_without_pyspark_and_reports_ok():
    r = _cli("validate", "conf/adult-horizontal.yaml")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("OK conf/adult-horizontal.yaml: horizontal release of adult, 4 owners, ε 1, k 50")


@pytest.mark.parametrize("change, message", [
    ({"k": 2}, "k"),
    ({"owners": [{"name": "a", "rows": 100}, {"name": "a", "rows": 100}]}, "'a'"),
    ({"source": {"path": "/nonexistent/raw.parquet", "format": "parquet"}}, "/nonexistent/raw.parquet"),
])
def test_validate_prints_the_problem_on_one_line_with_status_2(tmp_path, change, message):
    conf = yaml.safe_load((ROOT / "conf" / "wine-horizontal.yaml").read_text())
    conf.update(change)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(conf))
    r = _cli("validate", str(path))
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], r.stderr
    assert "Traceback" not in r.stderr and "OK" not in r.stdout


def test_validate_checks_an_owner_step(tmp_path):
    r = _cli("validate", "conf/wine-horizontal.yaml", "--owner", "nobody")
    assert r.returncode == 2 and "'nobody' is not an owner" in r.stderr


def test_a_command_that_needs_spark_says_how_to_get_pyspark_in_one_line():
    r = _cli("run", "conf/wine-horizontal.yaml")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        "error: fragrelease needs pyspark >= 4.0, and none is installed: pip install 'fragrelease[local]' or run "
        "on a Spark 4.0-4.2 runtime (e.g. Databricks 17.x)"]


def test_the_python_api_without_pyspark_raises_one_clear_import_error():
    r = subprocess.run([sys.executable, "-c", "import sys; sys.modules['pyspark'] = None; import fragrelease; "
                        "fragrelease.protect"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (
        "fragrelease.errors.MissingDependencyError: fragrelease needs pyspark >= 4.0, and none is installed: pip "
        "install 'fragrelease[local]' or run on a Spark 4.0-4.2 runtime (e.g. Databricks 17.x)")


def test_an_old_pyspark_is_refused(monkeypatch):
    import pyspark

    import fragrelease.jobs as jobs

    monkeypatch.setattr(jobs, "_checked", None)
    monkeypatch.setattr(pyspark, "__version__", "3.5.2")
    with pytest.raises(MissingDependencyError, match=r"needs pyspark >= 4.0, not pyspark 3.5.2: pip install"):
        jobs.require_pyspark()
    monkeypatch.setattr(pyspark, "__version__", "4.0.5")
    assert jobs.require_pyspark() == "4.0.5"


def test_inspect_prints_one_line_for_a_wrong_path(tmp_path):
    for target, message in [(str(tmp_path / "missing"), "does not exist"),
                            (str(tmp_path), "is not a Delta table (no _delta_log)")]:
        r = _cli("inspect", target)
        assert r.returncode == 2, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: inspect: ") and message in lines[0], r.stderr


def test_inspect_reads_a_catalog_table_name(spark, tmp_path, capsys):
    from fragrelease.jobs.storage import PROP_LOCATION, commit_delta

    folder = tmp_path / "rel"
    commit_delta(spark.createDataFrame([(1.0,), (2.0,)], "x double"), str(folder),
                 provenance={"epsilon": "1", "k": 3, "owners": []})
    spark.sql("CREATE DATABASE IF NOT EXISTS fr_inspect")
    try:
        spark.sql(f"CREATE TABLE fr_inspect.rel (x DOUBLE) USING parquet LOCATION '{folder}' "
                  f"TBLPROPERTIES ('{PROP_LOCATION}' = '{folder}')")
        for args in (["inspect", "fr_inspect.rel"], ["inspect", "--table", "fr_inspect.rel"]):
            assert main(args) == 0
            out = capsys.readouterr().out
            assert "version 0" in out and "ε 1" in out and "k 3" in out, out
        assert main(["inspect", "fr_inspect.missing"]) == 2
        assert "table 'fr_inspect.missing' is not in the catalog" in capsys.readouterr().err
    finally:
        spark.sql("DROP DATABASE IF EXISTS fr_inspect CASCADE")
    assert os.path.isdir(folder)
