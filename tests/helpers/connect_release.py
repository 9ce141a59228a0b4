"""Helper run in its own process by test_spark_connect.py: both ways the jobs meet Spark Connect, on one
local Connect server (each server is a JVM of its own, started once).

1. ``SPARK_REMOTE=local[2]`` (the CLI's way): :func:`fragrelease.jobs.session.get_spark` starts a local
   Connect server; a small horizontal release from a configuration (``run_local_release``, what
   ``fragrelease run`` runs) and a small DiffGen release run on it; the release's Delta table properties,
   description and column comments (written by Delta's Spark API when the server has Delta's classes).
2. The Python API on a session built with ``spark.api.mode=connect``, as Databricks serverless runs
   code (``SPARK_REMOTE`` is removed first; pyspark hands out a Connect session to its running local
   server): ``fragrelease.protect`` and a two-owner ``Release.run()`` with DataFrame and pandas owners.

Prints one JSON line with what the test checks."""
import json
import os
import sys


def release_from_config(tmp: str) -> dict:
    from fragrelease.jobs.protocol.release import run_local_release
    from fragrelease.jobs.session import get_spark
    from fragrelease.protocol.config import config_from_dict
    from fragrelease.schemas.datasets import load_builtin_pandas
    from fragrelease.schemas.wine import SCHEMA

    spark = get_spark("connect-test")
    assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
    src = os.path.join(tmp, "src")
    spark.createDataFrame(load_builtin_pandas("wine").head(300), SCHEMA.struct_type()).write.parquet(src)
    cfg = config_from_dict(dict(name="cx", dataset="wine", fragmentation="horizontal", epsilon="1", k=10,
                                source={"path": src, "format": "parquet"}, reports=False,
                                owners=[{"name": "a", "rows": 100}, {"name": "b", "rows": 200}],
                                work_dir=os.path.join(tmp, "work"), output=os.path.join(tmp, "release")))
    result = run_local_release(spark, cfg)
    from deltalake import DeltaTable

    # DiffGen too, with the numeric marginals forced to stay in Spark (distributed split draws)
    import fragrelease.jobs.diffgen.marginals as marginals
    import fragrelease.jobs.diffgen.runner as jd

    marginals.MAX_DRIVER_VALUES = 50
    from fragrelease.diffgen.params import DiffGenParams

    dg = jd.run_diffgen_release(spark, DiffGenParams(epsilon="1", specializations=2, score="max",
                                                     attributes=("age", "fnlwgt", "sex"),
                                                     output=os.path.join(tmp, "diffgen")))
    from fragrelease.jobs.session import delta_available

    table = DeltaTable(cfg.output)
    fields = json.loads(table.schema().to_json())["fields"]
    return {"version": result.version, "rows": table.to_pyarrow_table().num_rows,
            "delta_classes": delta_available(spark), "operation": table.history(1)[0]["operation"],
            "properties": {k: v for k, v in table.metadata().configuration.items() if k.startswith("fragrelease.")},
            "description": table.metadata().description,
            "comments": {f["name"]: f.get("metadata", {}).get("comment") for f in fields},
            "session": type(spark).__module__, "diffgen_cells": dg.cells,
            "diffgen_synthetic_rows": DeltaTable(dg.synthetic).to_pyarrow_table().num_rows}


def api_mode(tmp: str) -> dict:
    """The Python API on a session built with ``spark.api.mode=connect`` (Databricks serverless's way)."""
    from pyspark.sql import SparkSession

    import fragrelease
    from fragrelease.jobs.session import get_spark
    from fragrelease.schemas.datasets import load_builtin_pandas
    from fragrelease.schemas.wine import SCHEMA

    os.environ.pop("SPARK_REMOTE", None)
    spark = (SparkSession.builder.appName("api-mode").master("local[2]").config("spark.api.mode", "connect")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
    same = get_spark() is spark  # fragrelease reuses the active (Connect) session, as on Databricks
    wine = load_builtin_pandas("wine").head(300)
    df = spark.createDataFrame(wine, SCHEMA.struct_type())
    one = fragrelease.protect(df.where("record_id < 100"), "wine", epsilon="1", k=10)
    events: list[str] = []
    release = fragrelease.Release("wine", epsilon="1", k=10, output=os.path.join(tmp, "api-release"), reports=False,
                                  work_dir=os.path.join(tmp, "api-work"), spark=spark)
    release.add_owner("a", df.where("record_id < 150")).add_owner("b", wine.iloc[150:])
    result = release.run(progress=lambda e: events.append(str(e)) if e.done else None)
    out = {"api_session": type(spark).__module__, "get_spark_reuses_it": same,
           "protected_rows": one.dataframe.count(), "protected_session": type(one.dataframe.sparkSession).__module__,
           "api_version": result.version, "api_rows": result.rows, "read_back": result.dataframe(spark).count(),
           "steps": events}
    spark.stop()
    return out


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    first = release_from_config(sys.argv[1])
    print(json.dumps({**first, **api_mode(sys.argv[1])}))
