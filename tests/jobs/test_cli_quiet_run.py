"""``--quiet run`` prints nothing (no JVM start-up lines, no progress, no summary), and ``run`` prints each
owner's private report path on a line of its own, labelled with the owner (issue 37, item 5)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CLI = "import sys; from fragrelease.jobs.cli import main; sys.exit(main(sys.argv[1:]))"


def _run(tmp_path, *args):
    env = {**os.environ, "FRAGRELEASE_PRIVATE_ROOT": str(tmp_path / "private")}
    env.pop("FRAGRELEASE_SPARK_LOG_LEVEL", None)
    return subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=600)


@pytest.mark.slow
def test_quiet_run_prints_nothing_and_a_run_prints_each_owners_private_report(tmp_path):
    conf = {"name": "quiet-wine", "dataset": "wine", "fragmentation": "horizontal", "mechanism": "idp-ir",
            "epsilon": "1", "k": 10, "owners": [{"name": "owner-1", "rows": 200}, {"name": "owner-2", "rows": 6297}],
            "work_dir": "work", "output": "release", "if_exists": "new-version"}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(conf))
    quiet = _run(tmp_path, "--quiet", "run", "c.yaml")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    reports = [tmp_path / "private" / "quiet-wine" / o / "report.html" for o in ("owner-1", "owner-2")]
    assert all(r.is_file() for r in reports)
    assert (tmp_path / "release" / "_delta_log" / "00000000000000000000.json").is_file()

    loud = _run(tmp_path, "run", "c.yaml", "--new-plan")  # a second version (the first plan is committed)
    assert loud.returncode == 0, loud.stderr
    assert "WARNING: Using incubator modules" not in loud.stderr and "log4j" not in loud.stderr
    lines = loud.stdout.splitlines()
    assert [line for line in lines if "private report" in line] == [
        f"owner owner-1: private report {reports[0]}", f"owner owner-2: private report {reports[1]}"]
    assert (tmp_path / "release" / "_delta_log" / "00000000000000000001.json").is_file()
