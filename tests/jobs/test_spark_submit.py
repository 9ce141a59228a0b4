"""spark-submit.sh: argument handling and the dry run (no cluster needed)."""
import shlex
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "spark-submit.sh"


def run(*args):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT)


def test_dry_run_prints_the_command_with_delta_and_config():
    r = run("--dry-run", "--master", "yarn", "--deploy-mode", "cluster", "--delta", "--delta-version", "4.4.0",
            "--conf", "spark.executor.memory=4g", "--", "owner", "protect", "--config", "conf/adult-horizontal.yaml",
            "--owner", "owner-1")
    assert r.returncode == 0, r.stderr
    argv = shlex.split(r.stdout)
    assert argv[0] == "spark-submit"
    assert argv[argv.index("--master") + 1] == "yarn"
    assert argv[argv.index("--packages") + 1] == "io.delta:delta-spark_4.2_2.13:4.4.0"
    assert "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension" in argv
    assert "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog" in argv
    assert "spark.executor.memory=4g" in argv
    from fragrelease import __version__

    # the wheel under a .zip name: PySpark puts only .zip/.egg/.jar py-files on the executors' path
    assert argv[argv.index("--py-files") + 1].endswith(f"dist/fragrelease-{__version__}-py3-none-any.zip")
    assert argv[argv.index("--files") + 1] == "conf/adult-horizontal.yaml"
    entry = [a for a in argv if a.endswith("spark_entry.py")][0]
    tail = argv[argv.index(entry) + 1:]
    assert tail == ["owner", "protect", "--config", "adult-horizontal.yaml", "--owner", "owner-1"]  # cluster mode: shipped copy


def test_client_mode_keeps_config_path_and_no_delta_by_default():
    r = run("--dry-run", "--", "run", "conf/wine-horizontal.yaml")
    argv = shlex.split(r.stdout)
    assert r.returncode == 0 and "--packages" not in argv
    assert argv[argv.index("--master") + 1] == "local[*]"
    assert argv[-2:] == ["run", "conf/wine-horizontal.yaml"]


def test_bad_arguments_are_refused_with_status_2():
    for args, msg in [(("--deploy-mode", "foo", "--", "run", "x"), "client or cluster, not 'foo'"),
                      (("--bogus",), "unknown option '--bogus'"),
                      (("--dry-run",), "no fragrelease arguments"),
                      (("--conf", "novalue", "--", "run"), "KEY=VALUE, not 'novalue'")]:
        r = run(*args)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)


def test_help():
    r = run("--help")
    assert r.returncode == 0 and "usage: ./spark-submit.sh" in r.stdout
