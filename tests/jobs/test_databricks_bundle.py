"""The Databricks bundle's tasks, run locally in dependency order with exactly the entry points and
parameters the bundle passes (python_wheel_task: named_parameters become --key=value)."""
from importlib.metadata import entry_points
from pathlib import Path

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


def test_bundle_tasks_run_locally(spark, wine_pdf, tmp_path):
    from fragrelease.schemas.wine import SCHEMA

    src = str(tmp_path / "src")
    spark.createDataFrame(wine_pdf.head(400), SCHEMA.struct_type()).write.parquet(src)
    conf = tmp_path / "conf.yaml"
    conf.write_text(yaml.safe_dump(dict(
        name="bundle", dataset="wine", fragmentation="horizontal", epsilon="1", k=10, reports=False,
        source={"path": src, "format": "parquet"},
        owners=[{"name": f"owner-{i}", "rows": 100} for i in range(1, 5)],
        work_dir=str(tmp_path / "work"), output=str(tmp_path / "release"))))
    bundle = yaml.safe_load((ROOT / "databricks.yml").read_text())
    tasks = bundle["resources"]["jobs"]["fragrelease_release"]["tasks"]
    scripts = {ep.name: ep for ep in entry_points(group="console_scripts")}
    for task in _ordered(tasks):
        wheel = task["python_wheel_task"]
        assert wheel["package_name"] == "fragrelease"
        if "named_parameters" in wheel:
            args = [f"--{k}={str(v).replace('${var.config}', str(conf))}" for k, v in wheel["named_parameters"].items()]
        else:
            args = [str(a).replace("${var.config}", str(conf)) for a in wheel["parameters"]]
        status = scripts[wheel["entry_point"]].load()(args)
        assert status in (0, None), (task["task_key"], status)
    table = DeltaTable(str(tmp_path / "release"))
    assert table.version() == 0 and table.to_pyarrow_table().num_rows == 400
