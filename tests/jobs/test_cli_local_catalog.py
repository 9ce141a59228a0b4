"""``output_table: db.name`` from ``fragrelease run`` through the embedded session's persistent catalog
(``FRAGRELEASE_CATALOG_DIR``), read back by ``fragrelease inspect db.name`` in a new process (issue 37,
item 3); ``validate`` refuses a missing database before Spark unless ``create_schema: true``."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fragrelease.jobs.cli import main

CLI = "import sys; from fragrelease.jobs.cli import main; sys.exit(main(sys.argv[1:]))"
NO_PYSPARK = "import sys; sys.modules['pyspark'] = None; " + CLI


def _conf(tmp_path: Path, **extra) -> Path:
    conf = {"name": "catalog-wine", "dataset": "wine", "fragmentation": "horizontal", "mechanism": "idp-ir",
            "epsilon": "1", "k": 10, "owners": [{"name": "owner-1", "rows": 200}, {"name": "owner-2", "rows": 6297}],
            "work_dir": str(tmp_path / "work"), "output_table": "analytics.x", **extra}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(conf))
    return path


def _cli(tmp_path, *args, code=CLI):
    env = {**os.environ, "FRAGRELEASE_CATALOG_DIR": str(tmp_path / "catalog"),
           "FRAGRELEASE_PRIVATE_ROOT": str(tmp_path / "private")}
    for managed in ("PYSPARK_GATEWAY_PORT", "SPARK_REMOTE", "DATABRICKS_RUNTIME_VERSION"):
        env.pop(managed, None)
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=600)


def test_validate_refuses_a_missing_database_before_spark(tmp_path):
    conf = _conf(tmp_path)
    r = _cli(tmp_path, "validate", str(conf), code=NO_PYSPARK)  # no pyspark: refused before any session
    assert r.returncode == 2
    assert r.stderr == (f"error: output_table 'analytics.x': database 'analytics' does not exist in the local "
                        f"catalog '{tmp_path / 'catalog'}' (FRAGRELEASE_CATALOG_DIR); set create_schema: true in "
                        f"the configuration to create it, or create it first\n")
    assert r.stdout == ""
    assert not (tmp_path / "catalog").exists()  # validate creates nothing


def test_validate_accepts_create_schema_or_an_existing_database(tmp_path):
    # in a process of its own: with a session already active (a notebook, this suite's fixture) the catalog
    # is that session's, and only the run checks it (fragrelease.jobs.storage.check_local_catalog)
    r = _cli(tmp_path, "validate", str(_conf(tmp_path, create_schema=True)), code=NO_PYSPARK)
    assert r.returncode == 0, r.stderr
    assert "-> analytics.x" in r.stdout
    (tmp_path / "catalog" / "warehouse" / "analytics.db").mkdir(parents=True)
    r = _cli(tmp_path, "validate", str(_conf(tmp_path)), code=NO_PYSPARK)
    assert r.returncode == 0, r.stderr


def test_validate_refuses_a_catalog_folder_inside_work_dir(tmp_path):
    conf = _conf(tmp_path, create_schema=True)
    env = {"FRAGRELEASE_CATALOG_DIR": str(tmp_path / "work" / "catalog")}
    r = subprocess.run([sys.executable, "-c", NO_PYSPARK, "validate", str(conf)], capture_output=True, text=True,
                       cwd=tmp_path, env={**os.environ, **env}, timeout=120)
    assert r.returncode == 2
    assert r.stderr == (
        f"error: FRAGRELEASE_CATALOG_DIR: the catalog folder '{tmp_path / 'work' / 'catalog'}' lies under work_dir "
        f"'{tmp_path / 'work'}'; choose a folder outside it\n")


def test_a_session_already_active_is_checked_by_the_run_not_before(spark, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FRAGRELEASE_CATALOG_DIR", str(tmp_path / "catalog"))
    assert main(["validate", str(_conf(tmp_path))]) == 0  # analytics is not in the folder: not this catalog
    capsys.readouterr()


@pytest.mark.slow
def test_run_to_a_catalog_table_then_inspect_it_in_a_new_process(tmp_path):
    conf = _conf(tmp_path, create_schema=True)
    run = _cli(tmp_path, "--quiet", "run", str(conf))
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")
    table = tmp_path / "catalog" / "warehouse" / "analytics.db" / "x"
    assert (table / "_delta_log" / "00000000000000000000.json").is_file()
    assert (tmp_path / "catalog" / "metastore_db").is_dir()
    assert not (tmp_path / "spark-warehouse").exists() and not (tmp_path / "derby.log").exists()

    inspect = _cli(tmp_path, "inspect", "analytics.x")  # a new process: the catalog outlived the run
    assert inspect.returncode == 0, inspect.stderr
    assert "  fragrelease.dataset = wine" in inspect.stdout.splitlines()
    assert any(line.startswith("version 0 CREATE TABLE AS SELECT: horizontal idp-ir, ε 1 (parallel), k 10")
               for line in inspect.stdout.splitlines())
    missing = _cli(tmp_path, "inspect", "analytics.y")
    assert missing.returncode == 2
    assert missing.stderr.startswith("error: inspect: table 'analytics.y' is not in the catalog")
