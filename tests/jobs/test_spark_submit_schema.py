"""spark-submit.sh ships the schema file a configuration names (issue: "spark-submit.sh in cluster mode
does not ship the schema file the configuration names"); dry runs, no cluster needed."""
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "spark-submit.sh"


def _dry_run(cwd, *args):
    r = subprocess.run(["bash", str(SCRIPT), "--dry-run", *args], capture_output=True, text=True, cwd=cwd, timeout=120)
    return r, (shlex.split(r.stdout) if r.returncode == 0 else [])


def _setup(tmp_path):
    """``release.yaml`` naming the schema ``schemas/clinic.yaml`` (a copy of conf/schema-example.yaml)."""
    (tmp_path / "schemas").mkdir()
    shutil.copy(ROOT / "conf" / "schema-example.yaml", tmp_path / "schemas" / "clinic.yaml")
    conf = dict(name="clinics", dataset="schemas/clinic.yaml", fragmentation="horizontal", epsilon="1", k=10,
                owners=[{"name": "clinic-a", "source": {"path": "s3a://bucket/a", "format": "parquet"}},
                        {"name": "clinic-b", "source": {"path": "s3a://bucket/b", "format": "parquet"}}],
                work_dir="s3a://bucket/work", output="s3a://bucket/release")
    (tmp_path / "release.yaml").write_text(yaml.safe_dump(conf))
    return conf


def test_cluster_mode_ships_the_schema_and_a_copy_of_the_config_naming_it(tmp_path):
    conf = _setup(tmp_path)
    r, argv = _dry_run(tmp_path, "--deploy-mode", "cluster", "--", "owner", "protect", "--config", "release.yaml",
                       "--owner", "clinic-a")
    assert r.returncode == 0, r.stderr
    shipped = argv[argv.index("--files") + 1].split(",")
    schema_name = Path(conf["dataset"]).name
    assert shipped[0] == conf["dataset"]  # the schema file, as the configuration names it
    copy = Path(shipped[1])
    assert copy.name == "release.yaml" and copy.parent == ROOT / "dist" / "cluster-files"
    assert yaml.safe_load(copy.read_text())["dataset"] == schema_name  # where --files puts it on the driver
    rest = {k: v for k, v in yaml.safe_load(copy.read_text()).items() if k != "dataset"}
    assert rest == {k: v for k, v in conf.items() if k != "dataset"}
    assert argv[-4:] == ["--config", "release.yaml", "--owner", "clinic-a"]
    # the driver's working folder as --files lays it out: both files side by side, the config validates
    driver = tmp_path / "driver"
    driver.mkdir()
    for f in shipped:
        shutil.copy(tmp_path / f if not Path(f).is_absolute() else f, driver / Path(f).name)
    check = subprocess.run([sys.executable, "-m", "fragrelease.jobs.cli", "validate", "release.yaml", "--owner",
                            "clinic-a"], capture_output=True, text=True, cwd=driver, timeout=120)
    assert check.returncode == 0 and check.stdout.startswith("OK release.yaml"), check.stderr


def test_client_mode_ships_the_schema_and_keeps_the_paths(tmp_path):
    conf = _setup(tmp_path)
    r, argv = _dry_run(tmp_path, "--", "run", "release.yaml")
    assert r.returncode == 0, r.stderr
    assert argv[argv.index("--files") + 1] == f"{conf['dataset']},release.yaml"
    assert argv[-2:] == ["run", "release.yaml"]


def test_a_missing_schema_file_is_refused_with_status_2(tmp_path):
    _setup(tmp_path)
    shutil.rmtree(tmp_path / "schemas")
    r, _ = _dry_run(tmp_path, "--deploy-mode", "cluster", "--", "run", "release.yaml")
    assert r.returncode == 2 and "names dataset 'schemas/" in r.stderr and "not a file here" in r.stderr


def test_a_built_in_dataset_ships_the_config_alone(tmp_path):
    r, argv = _dry_run(ROOT, "--deploy-mode", "cluster", "--", "run", "conf/wine-horizontal.yaml")
    assert r.returncode == 0, r.stderr
    assert argv[argv.index("--files") + 1] == "conf/wine-horizontal.yaml"
