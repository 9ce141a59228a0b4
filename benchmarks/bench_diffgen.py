"""Benchmark: DiffGen on Spark at scale (docs/specification.md §7), marginals -> specialization -> noisy leaf counts.

Generates N Adult-shaped records inside Spark (never through the Python driver): age and
hours-per-week (integers), fnlwgt (integers uniform in [10,000, 1,490,000], so up to ~1.48M distinct
values), sex, and an income class that depends on all four. Then runs the release's steps with the
secure sampler and prints per-stage seconds, the peak RSS of this Python driver, and which numeric
predictors stayed in Spark (:class:`fragrelease.jobs.diffgen.marginals.SparkNumericCounts`, more than
``--max-driver-values`` distinct values) instead of being collected as value x class counts.

    python benchmarks/bench_diffgen.py --rows 1000000 10000000 --h 6
    python benchmarks/bench_diffgen.py --rows 10000000 --max-driver-values 2000000   # collect everything
"""
from __future__ import annotations

import argparse
import resource
import time
from fractions import Fraction

ATTRS = ["age", "fnlwgt", "hours-per-week", "sex"]


def adult_like(spark, n: int):
    from pyspark.sql import functions as F

    df = spark.range(n).withColumnRenamed("id", "record_id")
    df = (df.withColumn("age", (F.lit(17) + F.floor(F.rand() * 74)).cast("long"))
            .withColumn("fnlwgt", (F.lit(10_000) + F.floor(F.rand() * 1_480_000)).cast("long"))
            .withColumn("hours-per-week", (F.lit(1) + F.floor(F.rand() * 99)).cast("long"))
            .withColumn("sex", F.when(F.rand() < 0.67, "Male").otherwise("Female")))
    logit = ((F.col("age") - 40) / 10 + (F.col("hours-per-week") - 40) / 15 +
             F.when(F.col("sex") == "Male", 0.8).otherwise(-0.8) + (F.col("fnlwgt") - 750_000) / 1_500_000 - 1.2)
    return df.withColumn("income", F.when(F.rand() < 1 / (1 + F.exp(-logit)), ">50K").otherwise("<=50K"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--h", type=int, default=6)
    ap.add_argument("--epsilon", default="1")
    ap.add_argument("--score", default="max")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--max-driver-values", type=int, default=None)
    a = ap.parse_args()

    import fragrelease.jobs.diffgen.marginals as marginals
    import fragrelease.jobs.diffgen.runner as jd
    from fragrelease.diffgen.engine import specialize_cut
    from fragrelease.jobs.session import get_spark
    from fragrelease.rng.diffgen import SecureDiffGenRandomness
    from fragrelease.schemas.taxonomies import ADULT_CLASS, ADULT_CLASS_VALUES, adult_predictors

    if a.max_driver_values is not None:
        marginals.MAX_DRIVER_VALUES = a.max_driver_values
    spark = get_spark("bench-diffgen", a.master)
    preds = adult_predictors(ATTRS)
    eps = Fraction(a.epsilon)
    for n in a.rows:
        df = adult_like(spark, n).localCheckpoint(eager=True)
        t0 = time.perf_counter()
        counts = marginals.marginal_counts_spark(df, preds, ADULT_CLASS, ADULT_CLASS_VALUES)
        t1 = time.perf_counter()
        cut, ledger = specialize_cut(preds, counts, epsilon=eps, specializations=a.h, score=a.score,
                                     randomness=SecureDiffGenRandomness())
        t2 = time.perf_counter()
        noisy = jd.noisy_generalized_table(spark, df, cut, eps)
        cells = noisy.count()
        t3 = time.perf_counter()
        in_spark = [k for k, v in counts.items() if isinstance(v, marginals.SparkNumericCounts)]
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"rows {n:,}, h {a.h}, ε {a.epsilon}, score {a.score}, "
              f"max driver values {marginals.MAX_DRIVER_VALUES:,}: "
              f"marginals {t1 - t0:.1f} s, specialization {t2 - t1:.1f} s ({len(ledger)} ε steps), "
              f"noisy leaf counts {t3 - t2:.1f} s ({cells:,} cells); total {t3 - t0:.1f} s; "
              f"kept in Spark: {', '.join(in_spark) or 'none'}; driver Python peak RSS {rss_mb:.0f} MB", flush=True)
        df.unpersist()


if __name__ == "__main__":
    main()
