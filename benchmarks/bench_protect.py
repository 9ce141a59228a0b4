"""Benchmark: protect N rows x 10 numeric attributes with iDP-IR, Spark vs single-thread numpy.

Prints, for each N: wall time, rows/s, Spark/numpy ratio and peak driver memory (RSS of this
Python process and of the Spark driver JVM). The data is generated inside Spark with DataFrame
expressions (never passes through the Python driver); numpy gets the same distribution generated
in memory. Both apply the same IR microaggregation + one Laplace draw per cluster.

    python benchmarks/bench_protect.py --rows 1000000 10000000 --k 100 --master local[2]
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import time
from fractions import Fraction

import numpy as np


def numpy_reference(n: int, n_attrs: int, k: int, eps_attr: float) -> float:
    from fragrelease.mechanisms import protect_attribute
    from fragrelease.rng import SecureLaplace

    rng = np.random.default_rng()  # benchmark data only, not a release
    noise = SecureLaplace()
    ids = np.arange(n)
    t = time.perf_counter()
    for a in range(n_attrs):
        x = np.round(rng.uniform(0, 1000, n), 2)
        protect_attribute(x, k=k, lo=0.0, hi=1000.0, epsilon_attribute=eps_attr, mechanism="idp-ir",
                          noise=noise, attribute=f"a{a}", tiebreak=ids)
    return time.perf_counter() - t


def jvm_peak_rss_mb() -> float:
    """Peak RSS (VmHWM) of the local Spark driver JVM started by this process."""
    try:
        out = subprocess.run(["pgrep", "-P", str(os.getpid()), "java"], capture_output=True, text=True).stdout.split()
        peak = 0
        for pid in out:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmHWM"):
                    peak = max(peak, int(line.split()[1]))
        return peak / 1024
    except OSError:
        return float("nan")


def spark_run(spark, n: int, n_attrs: int, k: int, eps_attr: Fraction) -> float:
    from pyspark.sql import functions as F

    from fragrelease.jobs.protect import protect_fragment
    from fragrelease.schemas.base import Attribute

    attrs = [Attribute(name=f"a{i}", type="double", role="quasi-identifier", kind="numeric", domain=(0, 1000))
             for i in range(n_attrs)]
    df = spark.range(n).withColumnRenamed("id", "record_id")
    df = df.select("record_id", *[F.round(F.rand() * 1000, 2).alias(a.name) for a in attrs])
    df = df.localCheckpoint(eager=True)  # generate once, outside the timed section
    t = time.perf_counter()
    out = protect_fragment(df, attrs, id_column="record_id", k=k, epsilon_per_attribute=eps_attr,
                           mechanism="idp-ir", n_records=n)
    out.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    p.add_argument("--attributes", type=int, default=10)
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--epsilon", default="1")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="8g")
    args = p.parse_args()
    os.environ["FRAGRELEASE_DRIVER_MEMORY"] = args.driver_memory
    from fragrelease.jobs.session import get_spark

    spark = get_spark("fragrelease-bench", args.master, shuffle_partitions=8)
    eps_attr = Fraction(args.epsilon) / args.attributes
    print(f"{'rows':>12} {'spark s':>9} {'rows/s':>12} {'numpy s':>9} {'ratio':>6} {'py RSS MB':>10} {'JVM RSS MB':>11}")
    for n in args.rows:
        ts = spark_run(spark, n, args.attributes, args.k, eps_attr)
        tn = numpy_reference(n, args.attributes, args.k, float(eps_attr))
        py_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{n:>12,} {ts:>9.1f} {n / ts:>12,.0f} {tn:>9.1f} {ts / tn:>6.2f} {py_mb:>10.0f} {jvm_peak_rss_mb():>11.0f}",
              flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
