"""The embedded session's logging options and persistent catalog (jobs/session.py), and the release
database check of jobs/storage/catalog.py (issue 37, items 3 and 5)."""
import os
import uuid
from pathlib import Path

import pytest
import yaml

from fragrelease.errors import ConfigError
from fragrelease.jobs import session, session_jvm, storage
from fragrelease.protocol.config import config_from_dict


def test_log4j_options_name_the_shipped_file_and_the_level(monkeypatch):
    monkeypatch.delenv("FRAGRELEASE_SPARK_LOG_LEVEL", raising=False)
    monkeypatch.setattr(session, "_default_log_level", "ERROR")  # a CLI test in this process may have set another
    assert os.path.isfile(session.LOG4J_CONFIG)
    assert session.log4j_java_options() == (f"-Dlog4j.configurationFile={Path(session.LOG4J_CONFIG).as_uri()} "
                                           "-Dfragrelease.log.level=error")
    session.set_default_log_level("FATAL")  # the command line's default: a failed job's Java traces stay out
    assert session.log4j_java_options().endswith(" -Dfragrelease.log.level=fatal")
    monkeypatch.setenv("FRAGRELEASE_SPARK_LOG_LEVEL", "WARN")
    assert session.log4j_java_options().endswith(" -Dfragrelease.log.level=warn")
    monkeypatch.setenv("FRAGRELEASE_SPARK_LOG_LEVEL", "warn -Xmx1g")  # not a level: no option smuggled in
    assert session.log4j_java_options() == ""


def test_the_shipped_log4j_file_gives_the_gateway_the_root_level():
    props = dict(line.split(" = ", 1) for line in Path(session.LOG4J_CONFIG).read_text().splitlines()
                 if " = " in line and not line.startswith("#"))
    level = "${sys:fragrelease.log.level:-error}"
    assert props["rootLogger.level"] == props["logger.gateway.level"] == props["logger.repl.level"] == level
    assert props["logger.gateway.name"] == "org.apache.spark.api.python.PythonGatewayServer"


def test_only_the_jvm_startup_warning_is_dropped():
    assert session_jvm._is_startup_noise(b"WARNING: Using incubator modules: jdk.incubator.vector\n")
    assert not session_jvm._is_startup_noise(b"26/11/27 18:00:00 ERROR Executor: Exception in task 0.0\n")
    assert not session_jvm._is_startup_noise(b"WARNING: something else\n")


def test_the_catalog_folder(monkeypatch, tmp_path):
    monkeypatch.delenv(session.CATALOG_DIR_ENV, raising=False)
    assert session.catalog_dir() == os.path.expanduser("~/.fragrelease/catalog")
    monkeypatch.setenv(session.CATALOG_DIR_ENV, str(tmp_path / "cat"))
    assert session.check_catalog_dir() == str(tmp_path / "cat")
    assert (tmp_path / "cat").is_dir() and (tmp_path / "cat").stat().st_mode & 0o777 == 0o700
    assert session.catalog_warehouse() == str(tmp_path / "cat" / "warehouse")
    monkeypatch.setenv(session.CATALOG_DIR_ENV, str(tmp_path / "a b"))
    with pytest.raises(ConfigError, match=r"must not contain spaces"):
        session.check_catalog_dir()
    assert not (tmp_path / "a b").exists()


def _cfg(tmp_path, **extra):
    conf = yaml.safe_load((Path(__file__).resolve().parents[2] / "conf" / "wine-horizontal.yaml").read_text())
    conf.pop("output")
    return config_from_dict({**conf, "work_dir": str(tmp_path / "work"), **extra})


def test_ensure_database_refuses_or_creates_the_missing_database(spark, tmp_path):
    db = f"cat_{uuid.uuid4().hex[:8]}"
    cfg = _cfg(tmp_path, output_table=f"{db}.x")
    with pytest.raises(ConfigError) as info:
        storage.ensure_database(spark, cfg)
    assert str(info.value) == (f"output_table '{db}.x': database '{db}' does not exist in the session's catalog; "
                               "set create_schema: true in the configuration to create it, or create it first")
    assert not spark.catalog.databaseExists(db)
    storage.ensure_database(spark, _cfg(tmp_path, output_table=f"{db}.x", create_schema=True))
    assert spark.catalog.databaseExists(db)
    storage.ensure_database(spark, cfg)  # it exists now: nothing to refuse
    spark.sql(f"DROP DATABASE {db}")


def test_the_local_connect_server_is_configured_like_the_embedded_session(monkeypatch):
    """What the local Connect server's session gets (pyspark passes the builder's options to it): no console
    progress, the JVM's logging, and Delta's classes from the jar folder when there is one."""
    monkeypatch.delenv("FRAGRELEASE_SPARK_LOG_LEVEL", raising=False)
    monkeypatch.setenv("FRAGRELEASE_DELTA", "auto")
    options = session._local_connect_builder("t")._options
    assert options["spark.ui.showConsoleProgress"] == "false"
    assert options["spark.driver.defaultJavaOptions"] == session.log4j_java_options()
    if session._delta_jars():
        assert options["spark.sql.extensions"] == session.DELTA_EXTENSION
        assert options["spark.sql.catalog.spark_catalog"] == session.DELTA_CATALOG
    monkeypatch.setenv("FRAGRELEASE_DELTA", "off")
    assert "spark.sql.extensions" not in session._local_connect_builder("t")._options
