"""The jobs use only the DataFrame API, so whole releases run through Spark Connect."""
import json
import os
import socket
import subprocess
import sys

import pytest


@pytest.mark.slow  # whole releases end to end through a local Connect server (about a minute); CI runs it
@pytest.mark.spark  # a Spark Connect server in a subprocess
def test_releases_through_a_local_spark_connect_server(tmp_path):
    """One process, one local Connect server (tests/helpers/connect_release.py): first ``SPARK_REMOTE=local[2]``
    and a release from a configuration plus a DiffGen release; then, as Databricks serverless runs code,
    the Python API on a session built with ``spark.api.mode=connect`` with ``SPARK_REMOTE`` removed (a
    Connect client of the running local server: no classic session in the driver)."""
    pytest.importorskip("grpc", reason="Spark Connect needs pyspark[connect] (grpcio) installed")
    with socket.socket() as probe:  # pyspark's local Connect server always binds localhost:15002
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if probe.connect_ex(("127.0.0.1", 15002)) == 0:
            pytest.skip("port 15002 is taken (another Spark Connect server?): the local server cannot start")
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "helpers")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "SPARK_CONNECT_MODE_ENABLED")}
    env["SPARK_REMOTE"] = "local[2]"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, os.path.join(here, "connect_release.py"), str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode != 0 and "Connection refused" in proc.stderr and "SparkConnectServer" in proc.stderr:
        pytest.skip("the local Spark Connect server could not start: " + proc.stderr[-500:])
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # 1. SPARK_REMOTE=local[2]: get_spark's Connect session, a release from a configuration, DiffGen
    assert result["session"].startswith("pyspark.sql.connect")
    assert result["version"] == 0 and result["rows"] == 300
    from fragrelease.jobs.session import _delta_jars

    if _delta_jars():  # the jar folder scripts/setup.sh fills: the Connect server has Delta's classes (issue 37)
        assert result["delta_classes"] and result["operation"] == "CREATE TABLE AS SELECT"
        props = result["properties"]
        assert (props["fragrelease.dataset"], props["fragrelease.epsilon"], props["fragrelease.k"],
                props["fragrelease.owners"], props["fragrelease.role"]) == ("wine", "1", "10", "a, b", "release")
        assert result["description"].startswith("fragrelease release of dataset wine (horizontal fragments")
        assert result["comments"]["alcohol"].startswith("iDP-IR, eps_attr = 1/11 (a, b)")
    elif os.environ.get("CI") == "true":
        pytest.fail("CI=true but scripts/setup.sh fetched no Delta jars: the Connect path is not checked")
    assert result["diffgen_cells"] >= 2 and result["diffgen_synthetic_rows"] > 40_000  # ~45,222 Adult records
    # 2. spark.api.mode=connect: the Python API
    assert result["api_session"].startswith("pyspark.sql.connect"), result  # a Connect client
    assert result["protected_session"].startswith("pyspark.sql.connect") and result["get_spark_reuses_it"]
    assert result["protected_rows"] == 100
    assert (result["api_version"], result["api_rows"], result["read_back"]) == (0, 300, 300)
    assert [s.split(":")[0] for s in result["steps"]] == [
        "step 1/6 owner a", "step 2/6 owner b", "step 3/6 aggregator", "step 4/6 owner a", "step 5/6 owner b",
        "step 6/6 aggregator"]
