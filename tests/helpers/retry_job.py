"""Helper run in its own process by test_no_redraw.py: a Spark session that allows task retries
(local[2,4]), a protected fragment, and a downstream task that fails on its first attempt after
recording the noisy values it saw. Prints JSON: values seen by the failed attempt and the final ones."""
import json
import os
import sys
from fractions import Fraction


def main(out_dir: str) -> None:
    from pyspark import TaskContext
    from pyspark.sql import SparkSession
    from specs import protect_with

    from fragrelease.schemas.base import Attribute

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2,4]").appName("retry")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
             .config("spark.log.level", "ERROR").getOrCreate())
    attr = Attribute(name="x", type="double", role="quasi-identifier", kind="numeric", domain=(0, 1000))
    df = spark.range(2000).withColumnRenamed("id", "record_id").selectExpr("record_id", "cast(record_id % 997 as double) as x")
    out = protect_with(df, [attr], id_column="record_id", k=20, epsilon_per_attribute=Fraction(1), mechanism="idp-ir")
    seen_path = os.path.join(out_dir, "seen.json")

    def flaky(batches):
        ctx = TaskContext.get()
        for pdf in batches:
            if ctx.attemptNumber() == 0 and ctx.partitionId() == 0:
                with open(seen_path, "w") as f:
                    json.dump(dict(zip(pdf["record_id"].astype(str), pdf["x"], strict=True)), f)
                raise RuntimeError("injected failure on the first attempt")
            yield pdf

    final = out.mapInPandas(flaky, schema=out.schema).toPandas()
    seen = json.load(open(seen_path))
    again = out.toPandas()  # a recomputed plan
    print(json.dumps({
        "seen": seen,
        "final": dict(zip(final["record_id"].astype(str), final["x"], strict=True)),
        "again_equal": bool((again.sort_values("record_id")["x"].to_numpy() ==
                             final.sort_values("record_id")["x"].to_numpy()).all()),
    }))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
