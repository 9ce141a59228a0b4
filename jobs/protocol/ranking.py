"""Global ranks of rows on Spark: range partitioning, a stored sort and per-partition offsets.

Public helpers for any job that needs a row's position in a total order without moving all rows
to one partition: the aggregator and the simulator (random row orders, :mod:`fragrelease.jobs.protocol.shuffle`)
and the tests of the plans. docs/specification.md §2 (random row orders).
"""
from __future__ import annotations

import math
from typing import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

_POS_MASK = (1 << 33) - 1
#: Rows per partition above which :func:`num_partitions` adds partitions.
ROWS_PER_PARTITION = 1_000_000


def num_partitions(spark: SparkSession, rows: int) -> int:
    """Partitions for ``rows`` rows: the session's ``spark.sql.shuffle.partitions``, or more for
    large inputs (one per ``ROWS_PER_PARTITION`` rows)."""
    try:
        base = int(spark.conf.get("spark.sql.shuffle.partitions") or 8)
    except Exception:  # pragma: no cover
        base = 8
    return max(base, math.ceil(rows / ROWS_PER_PARTITION))


def range_sorted(df: DataFrame, keys: Sequence[str], num_partitions: int) -> DataFrame:
    """Range-partition and sort by ``keys``; add ``__pid`` (partition) and ``__pos`` (position in it)."""
    return (
        df.repartitionByRange(num_partitions, *keys)
        .sortWithinPartitions(*keys)
        .withColumn("__pid", F.spark_partition_id())
        .withColumn("__pos", F.monotonically_increasing_id().bitwiseAND(F.lit(_POS_MASK)))
    )


def global_rank(df: DataFrame, group_col: str, order_cols: Sequence[str], num_partitions: int) -> DataFrame:
    """Add ``rank`` (0-based, long): the row's position within its ``group_col`` group by ``order_cols``.

    Distributed: range partitioning, a stored sort, per-partition counts (a table of at most
    partitions × groups rows) and a broadcast join of the offsets. ``order_cols`` must make the order
    total (end with a unique id).
    """
    spark = df.sparkSession
    keys = [group_col, *order_cols]
    # Store before counting: re-running an unstored range-partitioned plan re-samples its bounds.
    part = range_sorted(df, keys, num_partitions).localCheckpoint(eager=True)
    counts = part.groupBy("__pid", group_col).agg(F.count(F.lit(1)).alias("cnt"), F.min("__pos").alias("first")).collect()
    offsets = []
    running: dict[object, int] = {}
    for r in sorted(counts, key=lambda r: (r[group_col], r["__pid"])):
        g = r[group_col]
        start = running.get(g, 0)
        offsets.append((int(r["__pid"]), g, start - int(r["first"])))
        running[g] = start + int(r["cnt"])
    group_type = part.schema[group_col].dataType
    adj = spark.createDataFrame(
        offsets, T.StructType([T.StructField("__pid", T.IntegerType()), T.StructField(group_col, group_type),
                               T.StructField("__adj", T.LongType())])
    )
    return (part.join(F.broadcast(adj), ["__pid", group_col])
            .withColumn("rank", F.col("__pos") + F.col("__adj"))
            .drop("__pid", "__pos", "__adj"))
