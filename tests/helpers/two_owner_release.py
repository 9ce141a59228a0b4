"""Run in its own interpreter by tests/test_wheel_install.py (a venv holding the lowest supported pyspark
and the built wheel): ``fragrelease.protect`` and a two-owner ``Release.run()`` end to end on a local
Spark session, then the release read back. Prints one JSON line: the pyspark version in use, the
protected rows, the release's version, rows and owners, and the progress lines it logged."""
import json
import logging
import os
import sys


def main(tmp: str) -> None:
    import pyspark

    import fragrelease
    from fragrelease.jobs.session import get_spark
    from fragrelease.schemas.datasets import load_builtin_pandas

    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("fragrelease.progress").addHandler(handler)
    logging.getLogger("fragrelease.progress").setLevel(logging.INFO)

    spark = get_spark("lowest-pyspark", "local[2]")
    wine = load_builtin_pandas("wine").head(300)
    one = fragrelease.protect(spark.createDataFrame(wine.head(100)), "wine", epsilon="1", k=10)
    release = fragrelease.Release("wine", epsilon="1", k=10, output=os.path.join(tmp, "release"), reports=False,
                                  work_dir=os.path.join(tmp, "work"), spark=spark)
    release.add_owner("a", wine.iloc[:120]).add_owner("b", spark.createDataFrame(wine.iloc[120:]))
    result = release.run()
    back = result.dataframe(spark)
    print(json.dumps({"pyspark": pyspark.__version__, "spark": spark.version, "protected_rows": one.dataframe.count(),
                      "version": result.version, "rows": result.rows, "read_back": back.count(),
                      "owners": [o.name for o in result.owners], "progress": lines,
                      "fragrelease_file": fragrelease.__file__}))


if __name__ == "__main__":
    main(sys.argv[1])
