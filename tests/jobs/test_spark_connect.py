"""The jobs use only the DataFrame API, so a whole release runs through Spark Connect."""
import json
import os
import socket
import subprocess
import sys

import pytest


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
@pytest.mark.spark  # a Spark Connect server in a subprocess
def test_small_release_through_a_local_spark_connect_server(tmp_path):
    pytest.importorskip("grpc", reason="Spark Connect needs pyspark[connect] (grpcio) installed")
    with socket.socket() as probe:  # pyspark's local Connect server always binds localhost:15002
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if probe.connect_ex(("127.0.0.1", 15002)) == 0:
            pytest.skip("port 15002 is taken (another Spark Connect server?): the local server cannot start")
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "helpers")
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")}
    env["SPARK_REMOTE"] = "local[2]"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, os.path.join(here, "connect_release.py"), str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0 and "Connection refused" in proc.stderr and "SparkConnectServer" in proc.stderr:
        pytest.skip("the local Spark Connect server could not start: " + proc.stderr[-500:])
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["session"].startswith("pyspark.sql.connect")
    assert result["version"] == 0 and result["rows"] == 300
    assert result["diffgen_cells"] >= 2 and result["diffgen_synthetic_rows"] > 40_000  # ~45,222 Adult records
