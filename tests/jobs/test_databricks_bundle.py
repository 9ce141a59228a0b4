"""The Databricks bundle's tasks, run locally in dependency order with exactly the entry points and
parameters the bundle passes (python_wheel_task: named_parameters become --key=value)."""
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


def _run_bundle(conf, variables: dict) -> None:
    """Every task in dependency order, ``${var.X}`` replaced by ``variables`` or the bundle's default."""
    bundle = yaml.safe_load((ROOT / "databricks.yml").read_text())
    values = {k: str(v.get("default", "")) for k, v in bundle["variables"].items()}
    values.update({"config": str(conf), **variables})

    def sub(v):
        return re.sub(r"\$\{var\.([a-z0-9_]+)\}", lambda m: values[m.group(1)], str(v))

    tasks = bundle["resources"]["jobs"]["fragrelease_release"]["tasks"]
    scripts = {ep.name: ep for ep in entry_points(group="console_scripts")}
    for task in _ordered(tasks):
        wheel = task["python_wheel_task"]
        assert wheel["package_name"] == "fragrelease"
        if "named_parameters" in wheel:
            args = [f"--{k}={sub(v)}" for k, v in wheel["named_parameters"].items()]
        else:
            args = [sub(a) for a in wheel["parameters"]]
        status = scripts[wheel["entry_point"]].load()(args)
        assert status in (0, None), (task["task_key"], status)


def _conf(spark, wine_pdf, tmp_path):
    from fragrelease.schemas.wine import SCHEMA

    src = str(tmp_path / "src")
    spark.createDataFrame(wine_pdf.head(400), SCHEMA.struct_type()).write.parquet(src)
    conf = tmp_path / "conf.yaml"
    conf.write_text(yaml.safe_dump(dict(
        name="bundle", dataset="wine", fragmentation="horizontal", epsilon="1", k=10, reports=False,
        source={"path": src, "format": "parquet"},
        owners=[{"name": f"owner-{i}", "rows": 100} for i in range(1, 5)],
        work_dir=str(tmp_path / "work"), output=str(tmp_path / "release"))))
    return conf


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_bundle_tasks_run_locally(spark, wine_pdf, tmp_path):
    _run_bundle(_conf(spark, wine_pdf, tmp_path), {})
    table = DeltaTable(str(tmp_path / "release"))
    assert table.version() == 0 and table.to_pyarrow_table().num_rows == 400


@pytest.mark.slow  # whole releases end to end (minutes with the suite's load); CI runs it
def test_bundle_tasks_take_catalog_table_names(spark, wine_pdf, tmp_path):
    """Owners' sources and the release given as table names through the bundle's variables."""
    from fragrelease.schemas.wine import SCHEMA

    spark.sql(f"CREATE DATABASE IF NOT EXISTS fr_bundle LOCATION '{tmp_path / 'warehouse'}'")
    try:
        whole = spark.createDataFrame(wine_pdf.head(400), SCHEMA.struct_type())
        ids = SCHEMA.id_column
        for i in range(1, 5):
            whole.where(f"{ids} % 4 = {i - 1}").write.saveAsTable(f"fr_bundle.owner_{i}")
        _run_bundle(_conf(spark, wine_pdf, tmp_path),
                    {"output_table": "fr_bundle.release",
                     **{f"owner_{i}_source_table": f"fr_bundle.owner_{i}" for i in range(1, 5)}})
        assert not (tmp_path / "release").exists()  # the configuration's path was replaced by the table
        released = spark.table("fr_bundle.release")
        assert released.count() == 400
        from fragrelease.jobs.catalog import table_location  # either commit path (tests/jobs/test_lakehouse.py)

        assert DeltaTable(table_location(spark, "fr_bundle.release")).version() == 0
        plan = json.loads((tmp_path / "work" / "plan.json").read_text())
        assert sorted(o["n_records"] for o in plan["owners"]) == [100, 100, 100, 100]
    finally:
        spark.sql("DROP DATABASE IF EXISTS fr_bundle CASCADE")
