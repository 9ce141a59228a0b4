"""Benchmark of the "values cross once" plan tried for issue 41: IR ranking, statistics and map-back in the JVM.

Not the release's plan: a measurement of what the JVM alone costs for the steps the packed-array
plan (:mod:`fragrelease.jobs.idpir.protect`) does in Python workers, on the same data as
``bench_protect.py`` (N rows x 10 numeric attributes, uniform in [0, 1000] with 2 decimals, k = 100).
Each value crosses between the JVM and Python at most once (here: not at all; only the c = n/k
cluster rows per attribute go to the Python noise function):

1. ``explode`` the wide rows into ``(key, attr, x)`` (N x l rows, no Python);
2. ``repartitionByRange(attr, x, key)`` + ``sortWithinPartitions``, stored; ranks from a
   per-(partition, attribute) count and ``monotonically_increasing_id`` (:mod:`fragrelease.jobs.protocol.ranking`);
3. cluster ``min(rank // k, c - 1)``; cluster sums, sizes and extremes with Spark aggregates (c x l rows);
4. one ``applyInPandas`` task per attribute draws the noise from the c cluster rows, stored;
5. the noisy centroids back to every (id, attribute) by a broadcast join on (attribute, cluster);
6. the line-up by id: ``groupBy(key).pivot(attr)`` (a shuffle of N x l rows) into a ``noop`` sink.

Prints each stage's wall time and the load average; compare with ``bench_protect.py`` run beside it.

    python benchmarks/bench_jvm_plan.py --rows 1000000 --master local[2]
"""
from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
import pandas as pd


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--attributes", type=int, default=10)
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="5g")
    p.add_argument("--partitions", type=int, default=0, help="range partitions (0: one per 1M long rows)")
    args = p.parse_args()
    os.environ["FRAGRELEASE_DRIVER_MEMORY"] = args.driver_memory
    from pyspark.sql import functions as F
    from pyspark.storagelevel import StorageLevel

    from fragrelease.jobs.session import get_spark
    from fragrelease.udfs.noise import noisy_cluster_centroids

    spark = get_spark("fragrelease-bench-jvm", args.master, shuffle_partitions=8)
    n, l, k = args.rows, args.attributes, args.k
    c = max(n // k, 1)
    print(f"{n:,} rows x {l} attributes, k {k}, {args.master}, load average {os.getloadavg()[0]:.1f}", flush=True)
    df = spark.range(0, n, 1, max(2, math.ceil(n / 1_000_000))).withColumnRenamed("id", "key")
    df = df.select("key", *[F.round(F.rand() * 1000, 2).alias(f"x{j}") for j in range(l)]).localCheckpoint(eager=True)

    t0 = t = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal t
        now = time.perf_counter()
        print(f"    {stage}: {now - t:.2f} s", flush=True)
        t = now

    parts = args.partitions or max(2, math.ceil(n * l / 1_000_000))
    long = df.select("key", F.explode(F.array(*[F.struct(F.lit(j).alias("attr"), F.col(f"x{j}").alias("x"))
                                               for j in range(l)])).alias("p")).select("key", "p.attr", "p.x")
    part = (long.repartitionByRange(parts, "attr", "x", "key").sortWithinPartitions("attr", "x", "key")
            .withColumn("pid", F.spark_partition_id())
            .withColumn("pos", F.monotonically_increasing_id().bitwiseAND(F.lit((1 << 33) - 1)))
            .localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK))
    lap("explode, range partition, sort (stored)")
    counts = part.groupBy("pid", "attr").agg(F.count(F.lit(1)).alias("m"), F.min("pos").alias("first")).collect()
    offsets, running = [], {}
    for r in sorted(counts, key=lambda r: (r["attr"], r["pid"])):
        start = running.get(r["attr"], 0)
        offsets.append((int(r["pid"]), int(r["attr"]), start - int(r["first"])))
        running[r["attr"]] = start + int(r["m"])
    adj = spark.createDataFrame(offsets, "pid int, attr int, adj long")
    lap("counts per (partition, attribute)")
    ranked = (part.join(F.broadcast(adj), ["pid", "attr"])
              .withColumn("cluster", F.least(F.floor((F.col("pos") + F.col("adj")) / k), F.lit(c - 1)).cast("long")))
    stats = ranked.groupBy("attr", "cluster").agg(F.sum("x").alias("s"), F.count(F.lit(1)).alias("m"),
                                                  F.min("x").alias("lo"), F.max("x").alias("hi"))

    def draw(pdf: pd.DataFrame) -> pd.DataFrame:
        pdf = pdf.sort_values("cluster")
        centroid = pdf["s"].to_numpy() / pdf["m"].to_numpy()
        noisy = noisy_cluster_centroids(centroid, np.full(centroid.size, 10.0), "a", None)  # secure sampler
        return pd.DataFrame({"attr": pdf["attr"].to_numpy(), "cluster": pdf["cluster"].to_numpy(),
                             "value": np.clip(noisy, 0, 1000)})

    noised = stats.groupBy("attr").applyInPandas(draw, "attr int, cluster long, value double").localCheckpoint(eager=True)
    lap("cluster statistics (Spark aggregates), noise per attribute from c rows (stored)")
    back = ranked.select("key", "attr", "cluster").join(F.broadcast(noised), ["attr", "cluster"])
    wide = back.groupBy("key").pivot("attr", list(range(l))).agg(F.first("value"))
    wide.write.format("noop").mode("overwrite").save()
    lap("map back (broadcast join on attribute, cluster), line up by id (pivot), write (noop)")
    print(f"  total {time.perf_counter() - t0:.1f} s, load average {os.getloadavg()[0]:.1f}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
