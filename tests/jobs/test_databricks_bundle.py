"""The Databricks bundle's tasks, run locally in dependency order with exactly the entry points and
parameters the bundle passes (python_wheel_task: named_parameters become --key=value; job parameters
``{{job.parameters.X}}`` are filled from the parameters' defaults or a run's values; a for_each task
runs its nested task once per element of its ``inputs``, with ``{{input.KEY}}`` filled from it)."""
import json
import re
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import yaml
from deltalake import DeltaTable

ROOT = Path(__file__).resolve().parents[2]


def _ordered(tasks):
    done, order = set(), []
    while len(order) < len(tasks):
        for t in tasks:
            deps = {d["task_key"] for d in t.get("depends_on", [])}
            if t["task_key"] not in done and deps <= done:
                order.append(t)
                done.add(t["task_key"])
    return order


def _bundle() -> dict:
    return yaml.safe_load((ROOT / "databricks.yml").read_text())


def _job(bundle: dict) -> dict:
    return bundle["resources"]["jobs"]["fragrelease_release"]


def _substitute(value, variables: dict, params: dict, item=None) -> str:
    """Databricks' references: ``${var.X}`` (bundle variables, at deploy), ``{{job.parameters.X}}`` (at run)
    and, inside a for_each task, ``{{input}}`` / ``{{input.KEY}}`` (the current element of ``inputs``)."""
    text = re.sub(r"\$\{var\.([a-z0-9_]+)\}", lambda m: variables[m.group(1)], str(value))
    text = re.sub(r"\{\{job\.parameters\.([a-z0-9_]+)\}\}", lambda m: params[m.group(1)], text)

    def element(m):
        assert item is not None, f"{{{{input}}}} outside a for_each task: {value!r}"
        return str(item[m.group(1)]) if m.group(1) else (item if isinstance(item, str) else json.dumps(item))

    return re.sub(r"\{\{input(?:\.([a-z0-9_]+))?\}\}", element, text)


def _run_wheel_task(task: dict, variables: dict, params: dict, item=None) -> None:
    scripts = {ep.name: ep for ep in entry_points(group="console_scripts")}
    wheel = task["python_wheel_task"]
    assert wheel["package_name"] == "fragrelease"
    assert task["libraries"] == [{"whl": "./dist/*.whl"}] and task["job_cluster_key"] == "release"
    if "named_parameters" in wheel:
        args = [f"--{k}={_substitute(v, variables, params, item)}" for k, v in wheel["named_parameters"].items()]
    else:
        args = [_substitute(a, variables, params, item) for a in wheel["parameters"]]
    status = scripts[wheel["entry_point"]].load()(args)
    assert status in (0, None), (task["task_key"], item, status)


def _run_bundle(params: dict) -> list[str]:
    """Every task in dependency order, as a job run with ``params`` over the job parameters' defaults:
    a for_each task runs its nested task once per element of its ``inputs`` (a JSON array). Returns the
    run's task keys (for_each iterations as ``key[element]``)."""
    bundle = _bundle()
    variables = {k: str(v.get("default", "")) for k, v in bundle["variables"].items()}
    job = _job(bundle)
    values = {p["name"]: _substitute(p["default"], variables, {}) for p in job["parameters"]}
    unknown = set(params) - set(values)
    assert not unknown, f"not job parameters: {unknown}"
    values.update(params)
    ran = []
    for task in _ordered(job["tasks"]):
        if "for_each_task" in task:
            loop = task["for_each_task"]
            for item in json.loads(_substitute(loop["inputs"], variables, values)):
                _run_wheel_task(loop["task"], variables, values, item)
                ran.append(f"{loop['task']['task_key']}[{item.get('owner')}]")
        else:
            _run_wheel_task(task, variables, values)
            ran.append(task["task_key"])
    return ran


def _keys(tmp_path, owner):
    """The owner's signing key pair (the owner and aggregator tasks run apart: keys come from the config)."""
    from fragrelease.signing import write_key_pair

    path, public = write_key_pair(str(tmp_path / "keys"), owner)
    return {"signing_key": path, "public_key": public}


def test_owners_sources_and_output_are_job_parameters_not_tasks():
    """No owner name or table is written into a task: they come from the job's parameters."""
    job = _job(_bundle())
    assert {p["name"] for p in job["parameters"]} == {"config", "owners", "output_table"}
    tasks_text = json.dumps(job["tasks"])
    assert "owner-1" not in tasks_text and "${var." not in tasks_text
    loops = [t for t in job["tasks"] if "for_each_task" in t]
    assert [t["task_key"] for t in loops] == ["owners_metadata", "owners_protect"]
    for t in loops:
        assert t["for_each_task"]["inputs"] == "{{job.parameters.owners}}"
        assert t["for_each_task"]["task"]["python_wheel_task"]["named_parameters"]["owner"] == "{{input.owner}}"
    defaults = json.loads(next(p["default"] for p in job["parameters"] if p["name"] == "owners"))
    assert [o["owner"] for o in defaults] == ["owner-1", "owner-2", "owner-3", "owner-4"]


def test_the_bundle_targets_a_runtime_in_the_supported_spark_range():
    """Databricks Runtime 17.x runs Spark 4.0 (16.4 LTS runs Spark 3.5, outside the range)."""
    from fragrelease.jobs import SUPPORTED_PYSPARK

    version = _job(_bundle())["job_clusters"][0]["new_cluster"]["spark_version"]
    major = int(version.split(".")[0])
    assert major >= 17 and SUPPORTED_PYSPARK[0] == (4, 0), version


def _conf(spark, wine_pdf, tmp_path, owners=tuple(f"owner-{i}" for i in range(1, 5))):
    from fragrelease.schemas.wine import SCHEMA

    src = str(tmp_path / "src")
    spark.createDataFrame(wine_pdf.head(100 * len(owners)), SCHEMA.struct_type()).write.parquet(src)
    conf = tmp_path / "conf.yaml"
    conf.write_text(yaml.safe_dump(dict(
        name="bundle", dataset="wine", fragmentation="horizontal", epsilon="1", k=10, reports=False,
        source={"path": src, "format": "parquet"},
        owners=[{"name": name, "rows": 100, **_keys(tmp_path, name)} for name in owners],
        work_dir=str(tmp_path / "work"), output=str(tmp_path / "release"))))
    return conf


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_bundle_tasks_run_locally(spark, wine_pdf, tmp_path):
    ran = _run_bundle({"config": str(_conf(spark, wine_pdf, tmp_path))})  # the default owners parameter
    assert ran == ["simulate_owners", *(f"owner_metadata[owner-{i}]" for i in range(1, 5)), "aggregator_plan",
                   *(f"owner_protect[owner-{i}]" for i in range(1, 5)), "aggregator_release"]
    table = DeltaTable(str(tmp_path / "release"))
    assert table.version() == 0 and table.to_pyarrow_table().num_rows == 400


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_bundle_tasks_take_catalog_table_names(spark, wine_pdf, tmp_path):
    """Other owners (three, with other names), their sources and the release given as table names, all
    through the job's parameters: the same bundle, no task changed."""
    from fragrelease.schemas.wine import SCHEMA

    names = ("north", "south", "east")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS fr_bundle LOCATION '{tmp_path / 'warehouse'}'")
    try:
        whole = spark.createDataFrame(wine_pdf.head(300), SCHEMA.struct_type())
        ids = SCHEMA.id_column
        for i, name in enumerate(names):
            whole.where(f"{ids} % 3 = {i}").write.saveAsTable(f"fr_bundle.{name}")
        owners = [{"owner": name, "source_table": f"fr_bundle.{name}"} for name in names]
        ran = _run_bundle({"config": str(_conf(spark, wine_pdf, tmp_path, names)), "owners": json.dumps(owners),
                           "output_table": "fr_bundle.release"})
        assert "owner_protect[east]" in ran and not any("owner-" in r for r in ran)
        assert not (tmp_path / "release").exists()  # the configuration's path was replaced by the table
        released = spark.table("fr_bundle.release")
        assert released.count() == 300
        from fragrelease.jobs.catalog import table_location  # either commit path (tests/jobs/test_lakehouse.py)

        assert DeltaTable(table_location(spark, "fr_bundle.release")).version() == 0
        plan = json.loads((tmp_path / "work" / "plan.json").read_text())
        assert sorted(o["name"] for o in plan["owners"]) == sorted(names)
        assert sorted(o["n_records"] for o in plan["owners"]) == [100, 100, 100]
    finally:
        spark.sql("DROP DATABASE IF EXISTS fr_bundle CASCADE")
