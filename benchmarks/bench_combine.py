"""Benchmark: the aggregator's vertical join of F protected fragments of N rows each.

Prints wall times for ``jobs.idpir.combine.join_vertical`` (a chain of inner joins on the id, which
keeps the hash partitioning so each fragment is shuffled once), the same followed by the release's
CSPRNG row shuffle (``shuffle_rows``, what ``aggregator release`` commits), and, for comparison, a
chain of full outer joins on the id (the previous implementation, before its null check). Each fragment is ``(record_id, a<i>)``,
every second one categorical (string), generated inside Spark and stored before timing.

    python benchmarks/bench_combine.py --rows 1000000 10000000 --fragments 10 --master local[2]
"""
from __future__ import annotations

import argparse
import os
import time

from pyspark.sql import functions as F


def fragments(spark, n: int, count: int):
    out = []
    for i in range(count):
        df = spark.range(n).withColumnRenamed("id", "record_id")
        if i % 2:
            col = F.element_at(F.array(*[F.lit(f"c{j}") for j in range(8)]), (F.floor(F.rand() * 8) + 1).cast("int"))
        else:
            col = F.round(F.rand() * 100, 3)
        # each owner's table arrives in its own order
        out.append(df.select("record_id", col.alias(f"a{i}")).repartition(8, F.rand()).localCheckpoint(eager=True))
    return out


def timed(df) -> float:
    t = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    p.add_argument("--fragments", type=int, default=10)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--skip-baseline", action="store_true", help="do not time the chain of full outer joins")
    args = p.parse_args()
    os.environ["FRAGRELEASE_DRIVER_MEMORY"] = args.driver_memory
    from fragrelease.jobs.idpir.combine import join_vertical
    from fragrelease.jobs.protocol.shuffle import shuffle_rows
    from fragrelease.jobs.session import get_spark

    spark = get_spark("fragrelease-bench", args.master, shuffle_partitions=8)
    print(f"{args.fragments} vertical fragments, {args.master}")
    print(f"{'rows':>12} {'join s':>8} {'join+shuffle s':>15} {'outer-join chain s':>19}")
    for n in args.rows:
        frames = fragments(spark, n, args.fragments)
        t_join = timed(join_vertical(frames, "record_id"))
        t_release = timed(shuffle_rows(join_vertical(frames, "record_id"), "record_id"))
        t_chain = float("nan")
        if not args.skip_baseline:
            chain = frames[0]
            for f in frames[1:]:
                chain = chain.join(f, "record_id", "full_outer")
            t_chain = timed(chain)
        print(f"{n:>12,} {t_join:>8.1f} {t_release:>15.1f} {t_chain:>19.1f}", flush=True)
        for f in frames:
            f.unpersist()
    spark.stop()


if __name__ == "__main__":
    main()
