"""Helper run in its own process by test_spark_connect.py: a small horizontal release and a small
DiffGen release through a local Spark Connect server (SPARK_REMOTE=local[2]). Prints the release's
version and row count, and the DiffGen release's cell and synthetic record counts."""
import json
import os
import sys


def main(tmp: str) -> None:
    from fragrelease.idpir.config import config_from_dict
    from fragrelease.jobs.idpir.release import run_local_release
    from fragrelease.jobs.session import get_spark
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
    dg = jd.run_diffgen_release(spark, epsilon="1", specializations=2, score="max",
                                attributes=["age", "fnlwgt", "sex"], output=os.path.join(tmp, "diffgen"))
    print(json.dumps({"version": result["version"], "rows": DeltaTable(cfg.output).to_pyarrow_table().num_rows,
                      "session": type(spark).__module__, "diffgen_cells": dg["cells"],
                      "diffgen_synthetic_rows": DeltaTable(dg["synthetic"]).to_pyarrow_table().num_rows}))


if __name__ == "__main__":
    main(sys.argv[1])
