"""spread: rows with key v land in shuffle partition v exactly, and the grouping after it adds no shuffle."""
import pytest
from pyspark.sql import functions as F

from fragrelease.jobs.partitioning import murmur3_int, partition_salts, spread


def test_murmur3_int_is_sparks_hash(spark):
    rows = (spark.range(-3000, 3000).select(F.col("id").cast("int").alias("v"))
            .union(spark.createDataFrame([(-(2**31),), (2**31 - 1,)], "v int"))
            .select("v", F.hash("v").alias("h")).collect())
    assert len(rows) == 6002
    assert [murmur3_int(r["v"]) for r in rows] == [r["h"] for r in rows]


def test_salts_reach_every_partition():
    for parts in (1, 2, 3, 7, 10, 20, 64):
        salts = partition_salts(parts)
        assert [murmur3_int(s) % parts for s in salts] == list(range(parts))
    with pytest.raises(ValueError):
        partition_salts(0)


@pytest.mark.parametrize("parts", [2, 3, 10, 20])
def test_spread_puts_key_v_in_partition_v_and_the_grouping_reuses_it(spark, parts):
    # a plain repartition(parts, key) puts keys 0 and 1 in one of two partitions, and 10 keys in 7 of 10
    plain = spark.range(0, 40 * parts).select((F.col("id") % parts).cast("int").alias("g")).repartition(parts, "g")
    plain_used = plain.select(F.spark_partition_id().alias("p")).distinct().count()
    df = spark.range(0, 40 * parts).select((F.col("id") % parts).cast("int").alias("g"), F.col("id"))
    frame, slot = spread(df, "g", parts)
    placed = frame.select("g", F.spark_partition_id().alias("p")).distinct().collect()
    assert sorted((r["g"], r["p"]) for r in placed) == [(v, v) for v in range(parts)]
    assert plain_used == len({murmur3_int(v) % parts for v in range(parts)}) < parts  # the collision spread avoids
    grouped = frame.groupBy(slot, "g").applyInPandas(lambda pdf: pdf[["g"]].assign(n=len(pdf)).head(1), "g int, n long")
    assert grouped._jdf.queryExecution().executedPlan().toString().count("Exchange") == 1  # no second shuffle
    assert sorted((r["g"], r["n"]) for r in grouped.collect()) == [(v, 40) for v in range(parts)]
