"""Benchmark: protect N rows x 10 attributes with iDP-IR, Spark vs single-thread numpy.

Prints, for each N: wall time, rows/s, Spark/numpy ratio and peak driver memory (RSS of this
Python driver process, and of the local Spark JVM, which in local mode is driver and executor at
once). The numpy reference runs after Spark, in a child process. The data is generated inside Spark with DataFrame
expressions (never passes through the Python driver); numpy gets the same distribution generated
in memory. Both apply the same IR microaggregation + one Laplace draw per cluster.

``--data numeric``: 10 numeric attributes, uniform in [0, 1000] with 2 decimals.
``--data mixed``: 5 numeric as above + 5 categorical with 2, 5, 10, 20 and 50 categories and skewed
frequencies (category i drawn with probability falling in i), i.e. heavy ties.

    python benchmarks/bench_protect.py --rows 1000000 10000000 --k 100 --master local[2]
    python benchmarks/bench_protect.py --rows 10000000 --data mixed
"""
from __future__ import annotations

import argparse
import logging
import math
import multiprocessing
import os
import resource
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor
from fractions import Fraction

import numpy as np

CATEGORY_COUNTS = (2, 5, 10, 20, 50)


def attributes(n_attrs: int, data: str):
    from fragrelease.schemas.base import Attribute

    out = []
    for i in range(n_attrs):
        if data == "mixed" and i >= n_attrs // 2:
            m = CATEGORY_COUNTS[(i - n_attrs // 2) % len(CATEGORY_COUNTS)]
            out.append(Attribute(name=f"a{i}", type="string", role="quasi-identifier", kind="categorical",
                                 categories=tuple(f"c{j}" for j in range(m))))
        else:
            out.append(Attribute(name=f"a{i}", type="double", role="quasi-identifier", kind="numeric",
                                 domain=(0, 1000)))
    return out


def numpy_reference(n: int, attrs, k: int, eps_attr: float, postprocess: str = "isotonic") -> float:
    from fragrelease.idpir.category_order import DEFAULT_ORDER_SHARE, dp_frequency_order
    from fragrelease.idpir.mechanisms import protect_attribute
    from fragrelease.rng.laplace import SecureLaplace

    rng = np.random.default_rng()  # benchmark data only, not a release
    noise = SecureLaplace()
    ids = np.arange(n)
    t = time.perf_counter()
    for a in attrs:
        if a.categorical:
            # integer category codes; ranks from the dp-frequency order, as the release does
            m = len(a.categories)
            codes = np.floor(rng.uniform(0, 1, n) ** 2 * m).astype(np.int64)
            freq = np.bincount(codes, minlength=m)
            order = dp_frequency_order(dict(zip(a.categories, freq.tolist())), a.categories,
                                       eps_attr * DEFAULT_ORDER_SHARE, noise, attribute=a.name)
            rank_of = np.empty(m)
            rank_of[[a.categories.index(c) for c in order]] = np.arange(1, m + 1)
            x = rank_of[codes]
        else:
            x = np.round(rng.uniform(0, 1000, n), 2)
        lo, hi = a.bounds()
        protect_attribute(x, k=k, lo=lo, hi=hi, epsilon_attribute=eps_attr, mechanism="idp-ir",
                          noise=noise, attribute=a.name, tiebreak=ids, categorical=a.categorical,
                          postprocess=postprocess)
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


class StageTimes(logging.Handler):
    """Collects ``protect_fragment``'s DEBUG stage timings; prints each as it ends."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.logger = logging.getLogger("fragrelease.jobs.idpir.protect")
        self.logger.setLevel(logging.DEBUG)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        self.lines.append(line)
        print(f"    {line}  (as it ends)", flush=True)  # a run that fails still shows how far it got

    def done(self, total: float) -> None:
        self.logger.removeHandler(self)
        seconds = [float(line.rsplit(": ", 1)[1].split()[0]) for line in self.lines]
        print(f"    protect stage map values to noisy centroids, line up by id, write (noop): {total - sum(seconds):.2f} s")


def spark_run(spark, n: int, attrs, k: int, eps_attr: Fraction, postprocess: str = "isotonic") -> float:
    from pyspark.sql import functions as F

    from fragrelease.jobs.idpir.protect import protect_fragment

    def column(a):
        if a.categorical:
            m = len(a.categories)
            pick = (F.floor(F.pow(F.rand(), 2) * m) + 1).cast("int")
            return F.element_at(F.array(*[F.lit(c) for c in a.categories]), pick).alias(a.name)
        return F.round(F.rand() * 1000, 2).alias(a.name)

    # about 1M rows per input partition, like a table stored in files of ~100 MB
    df = spark.range(0, n, 1, max(2, math.ceil(n / 1_000_000))).withColumnRenamed("id", "record_id")
    df = df.select("record_id", *[column(a) for a in attrs])
    t = time.perf_counter()
    df = df.localCheckpoint(eager=True)  # generate once, outside the timed section
    print(f"    generated {n:,} rows (stored, not timed): {time.perf_counter() - t:.2f} s", flush=True)
    stages = StageTimes()
    t = time.perf_counter()
    out = protect_fragment(df, attrs, id_column="record_id", k=k, epsilon_per_attribute=eps_attr,
                           mechanism="idp-ir", n_records=n, postprocess=postprocess)
    out.write.format("noop").mode("overwrite").save()
    total = time.perf_counter() - t
    stages.done(total)
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    p.add_argument("--attributes", type=int, default=10)
    p.add_argument("--data", choices=["numeric", "mixed"], default="numeric")
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--epsilon", default="1")
    p.add_argument("--postprocess", choices=["isotonic", "none"], default="isotonic")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--skip-numpy", action="store_true", help="Spark only (e.g. 100M rows, where numpy needs GBs)")
    args = p.parse_args()
    os.environ["FRAGRELEASE_DRIVER_MEMORY"] = args.driver_memory
    from fragrelease.jobs.session import get_spark

    spark = get_spark("fragrelease-bench", args.master, shuffle_partitions=8)
    eps_attr = Fraction(args.epsilon) / args.attributes
    attrs = attributes(args.attributes, args.data)
    print(f"data {args.data}, {args.attributes} attributes, k {args.k}, eps {args.epsilon}, "
          f"postprocess {args.postprocess}, {args.master}")
    print(f"{'rows':>12} {'spark s':>9} {'rows/s':>12} {'numpy s':>9} {'ratio':>6} {'py RSS MB':>10} {'JVM RSS MB':>11}")
    for n in args.rows:
        ts = spark_run(spark, n, attrs, args.k, eps_attr, args.postprocess)
        py_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the Spark driver's Python only
        # numpy runs afterwards in a child process, alone, so its arrays do not count as driver memory
        tn = float("nan")
        if not args.skip_numpy:
            with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
                tn = pool.submit(numpy_reference, n, attrs, args.k, float(eps_attr), args.postprocess).result()
        print(f"{n:>12,} {ts:>9.1f} {n / ts:>12,.0f} {tn:>9.1f} {ts / tn:>6.2f} {py_mb:>10.0f} {jvm_peak_rss_mb():>11.0f}",
              flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
