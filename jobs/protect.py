"""IR microaggregation and noise on Spark: what a data owner runs on its fragment (SPEC.md §1-2).

Shapes: in, a fragment with the id column and the attributes to protect; out, the same ids with
every protected attribute replaced by its cluster's noisy centroid (numeric → double, categorical
→ one of the declared categories), rows in id order.

How it runs, all distributed (no step moves all rows into one partition):

1. Validation in one aggregation pass: nulls, values outside the declared domain, null or
   duplicate ids (:func:`validate_fragment`).
2. Categorical values become frequency ranks (1 = most frequent, ties by name); the ranking is a
   small aggregate, kept in memory, never logged.
3. The attributes are stacked into one long table ``(rid, attr, x)``, range-partitioned by
   ``(attr, x, rid)``, sorted within partitions and stored (``localCheckpoint``) **before** the
   per-partition counts are taken: Spark re-samples range bounds every time a plan runs, so counting
   an unstored plan gives offsets that disagree with the rows. Global rank = local position + the
   partition's offset (:func:`global_rank`).
4. Cluster = ``min(rank // k, c - 1)``; centroids by aggregation; the sensitivity (DP-IR: public
   formula; iDP-IR: four order statistics per attribute, :func:`fragrelease.sensitivity.
   idp_ir_sensitivity_from_extremes`) and the scale ``b = Δ / ε_attr`` stay inside Spark.
5. One Laplace draw per cluster in a non-deterministic pandas UDF, clamped (and rounded, for
   ranks); the noisy centroids are materialized before anything reads them twice.
6. Rows get their cluster's noisy centroid by a join; the long table is pivoted back to one row per id.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fragrelease.errors import DomainError, IdentifierError, SchemaMismatchError
from fragrelease.microaggregation import check_k, cluster_count
from fragrelease.rng import NoiseSource
from fragrelease.schemas.base import Attribute
from fragrelease.sensitivity import dp_ir_sensitivity, mechanism_k
from fragrelease.udfs.noise import noisy_centroid_udf

_POS_MASK = (1 << 33) - 1
_ROWS_PER_PARTITION = 1_000_000


@dataclass(frozen=True)
class FragmentCheck:
    """Result of :func:`validate_fragment`: the record count (public) and nothing else."""

    n_records: int


def _spark_type_ok(attr: Attribute, dtype: T.DataType) -> bool:
    if attr.type == "string" or attr.categorical:
        return isinstance(dtype, T.StringType)
    return isinstance(dtype, (T.IntegerType, T.LongType, T.ShortType, T.ByteType, T.DoubleType, T.FloatType,
                              T.DecimalType))


def check_columns(df: DataFrame, attributes: Sequence[Attribute], id_column: Optional[str]) -> None:
    """Raise SchemaMismatchError if a column is missing or has a type the schema does not allow."""
    fields = {f.name: f.dataType for f in df.schema.fields}
    wanted = list(attributes)
    for attr in wanted:
        if attr.name not in fields:
            raise SchemaMismatchError(f"fragment has no column {attr.name!r}; it has {sorted(fields)}")
        if not _spark_type_ok(attr, fields[attr.name]):
            raise SchemaMismatchError(
                f"column {attr.name!r} has type {fields[attr.name].simpleString()}, the schema declares {attr.kind or attr.type}"
            )
    if id_column is not None and id_column not in fields:
        raise SchemaMismatchError(f"fragment has no id column {id_column!r}; it has {sorted(fields)}")


def validate_fragment(df: DataFrame, attributes: Sequence[Attribute], id_column: Optional[str]) -> FragmentCheck:
    """Check a fragment before any budget is spent; one Spark aggregation pass.

    Raises
    ------
    SchemaMismatchError
        Missing column or wrong type.
    DomainError
        A null, a numeric value outside [lo, hi], or a category that is not declared; the message
        names the column and one offending value (shown to the owner only, never published).
    IdentifierError
        Null or duplicate ids (the message names a duplicated id).
    """
    check_columns(df, attributes, id_column)
    aggs = [F.count(F.lit(1)).alias("__n")]
    for i, a in enumerate(attributes):
        col = F.col(a.name)
        aggs.append(F.sum(col.isNull().cast("long")).alias(f"__null{i}"))
        if a.categorical:
            bad = ~col.isin(list(a.categories))
        else:
            lo, hi = a.bounds()
            bad = (col.cast("double") < lo) | (col.cast("double") > hi) | F.isnan(col.cast("double"))
        aggs.append(F.sum(F.when(col.isNotNull() & bad, 1).otherwise(0)).alias(f"__bad{i}"))
        aggs.append(F.first(F.when(col.isNotNull() & bad, col.cast("string")), ignorenulls=True).alias(f"__ex{i}"))
    if id_column is not None:
        aggs.append(F.sum(F.col(id_column).isNull().cast("long")).alias("__idnull"))
        aggs.append(F.approx_count_distinct(id_column).alias("__approx"))
    row = df.agg(*aggs).first()
    n = int(row["__n"])
    if n == 0:
        raise DomainError("the fragment is empty")
    for i, a in enumerate(attributes):
        if row[f"__null{i}"]:
            raise DomainError(f"column {a.name!r} has {row[f'__null{i}']} null values; nulls are not allowed")
        if row[f"__bad{i}"]:
            where = f"categories {list(a.categories)}" if a.categorical else f"domain [{a.bounds()[0]}, {a.bounds()[1]}]"
            raise DomainError(
                f"column {a.name!r} has {row[f'__bad{i}']} value(s) outside its declared {where}, e.g. {row[f'__ex{i}']!r}"
            )
    if id_column is not None:
        if row["__idnull"]:
            raise IdentifierError(f"id column {id_column!r} has {row['__idnull']} null values")
        dup = df.groupBy(id_column).count().where(F.col("count") > 1).limit(1).collect()
        if dup:
            raise IdentifierError(f"id {dup[0][id_column]!r} appears {dup[0]['count']} times in column {id_column!r}")
    return FragmentCheck(n_records=n)


def id_digest(df: DataFrame, id_column: str) -> str:
    """Order-independent digest of a fragment's id set: count and a sum of 60-bit hash prefixes."""
    h = F.conv(F.substring(F.sha2(F.col(id_column).cast("string"), 256), 1, 15), 16, 10).cast("decimal(38,0)")
    row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(h).alias("s")).first()
    return f"{row['n']}:{row['s'] or 0}"


def content_digest(df: DataFrame) -> str:
    """Order-independent digest of a table's content: row count and a sum of per-row SHA-256 prefixes.

    Columns are taken by name in sorted order, so the digest does not depend on column order either.
    """
    cols = sorted(df.columns)
    row_json = F.to_json(F.struct(*[F.col(c) for c in cols]))
    h = F.conv(F.substring(F.sha2(row_json, 256), 1, 15), 16, 10).cast("decimal(38,0)")
    row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(h).alias("s")).first()
    return f"sha256-sum60:{row['n']}:{row['s'] or 0}"


def category_ranks(df: DataFrame, attr: Attribute) -> list[str]:
    """Declared categories in frequency-rank order (rank 1 first; ties by name). Data-dependent."""
    counts = {r[attr.name]: r["count"] for r in df.groupBy(attr.name).count().collect()}
    return sorted(attr.categories, key=lambda c: (-counts.get(c, 0), c))


def _num_partitions(spark, rows: int) -> int:
    try:
        base = int(spark.conf.get("spark.sql.shuffle.partitions"))
    except Exception:  # pragma: no cover
        base = 8
    return max(base, math.ceil(rows / _ROWS_PER_PARTITION))


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
    running: dict = {}
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


def protect_fragment(
    df: DataFrame,
    attributes: Sequence[Attribute],
    *,
    id_column: str,
    k: int,
    epsilon_per_attribute: Fraction,
    mechanism: str,
    n_records: Optional[int] = None,
    noise: Optional[NoiseSource] = None,
) -> DataFrame:
    """Protect a fragment with IR microaggregation + Laplace noise (DP-IR, iDP-IR or plain iDP).

    Parameters
    ----------
    df : DataFrame with ``id_column`` (unique, non-null) and every attribute in ``attributes``.
    attributes : the attributes to protect, with declared domains/categories.
    id_column : record id; ties between equal values are ordered by it.
    k : cluster size (plain iDP uses 1).
    epsilon_per_attribute : ε_j / l_j, exact.
    mechanism : "idp-ir", "dp-ir" or "idp".
    n_records : the fragment's row count if already known (validated), else counted.
    noise : test-only noise injection; ``None`` = the secure sampler.

    Returns
    -------
    DataFrame ``(id_column, *attribute names)``, one row per input row, ordered by id; numeric
    attributes as double, categorical as string. The noise is already materialized.
    """
    spark = df.sparkSession
    attrs = list(attributes)
    n = n_records if n_records is not None else df.count()
    k_used = mechanism_k(mechanism, k)
    check_k(k_used, n)
    c = cluster_count(n, k_used)
    eps = float(epsilon_per_attribute)
    rank_orders = {a.name: category_ranks(df, a) for a in attrs if a.categorical}

    parts = []
    for i, a in enumerate(attrs):
        if a.categorical:
            mapping = F.create_map(*[x for r, cat in enumerate(rank_orders[a.name], 1) for x in (F.lit(cat), F.lit(float(r)))])
            value = mapping[F.col(a.name)]
        else:
            value = F.col(a.name).cast("double")
        parts.append(df.select(F.col(id_column).alias("rid"), F.lit(i).alias("attr"), value.alias("x")))
    long = parts[0]
    for p in parts[1:]:
        long = long.unionByName(p)

    ranked = global_rank(long, "attr", ["x", "rid"], _num_partitions(spark, n * len(attrs)))
    ranked = ranked.withColumn("cluster", F.least(F.floor(F.col("rank") / k_used), F.lit(c - 1)).cast("long"))

    params = spark.createDataFrame(
        [(i, *a.bounds(), a.categorical) for i, a in enumerate(attrs)],
        "attr int, lo double, hi double, categorical boolean",
    )
    stats = ranked.groupBy("attr", "cluster").agg(
        F.sum("x").alias("sum"), F.count(F.lit(1)).alias("size"), F.min("x").alias("min"), F.max("x").alias("max")
    )
    if mechanism == "dp-ir":
        scales = spark.createDataFrame(
            [(i, dp_ir_sensitivity(*a.bounds(), k_used) / eps) for i, a in enumerate(attrs)], "attr int, scale double"
        )
    else:
        scales = _idp_scales(stats, params, k_used, c, eps)
    noisy_udf = noisy_centroid_udf([a.name for a in attrs], noise)
    noisy = (
        stats.join(F.broadcast(params), "attr").join(F.broadcast(scales), "attr")
        .withColumn("centroid", F.col("sum") / F.col("size"))
        .select("attr", "cluster", noisy_udf("attr", "cluster", "centroid", "scale", "lo", "hi", "categorical").alias("value"))
    )
    # Materialize the noise once: nothing downstream may re-run the UDF.
    noisy = noisy.localCheckpoint(eager=True)

    values = ranked.join(noisy, ["attr", "cluster"]).select("rid", "attr", "value")
    wide = values.groupBy("rid").pivot("attr", list(range(len(attrs)))).agg(F.first("value"))
    out_cols = [F.col("rid").alias(id_column)]
    for i, a in enumerate(attrs):
        v = F.col(str(i))
        if a.categorical:
            order = F.array(*[F.lit(cat) for cat in rank_orders[a.name]])
            out_cols.append(F.element_at(order, v.cast("int")).alias(a.name))
        else:
            out_cols.append(v.cast("double").alias(a.name))
    return wide.select(*out_cols).orderBy(id_column)


def _idp_scales(stats: DataFrame, params: DataFrame, k: int, c: int, eps: float) -> DataFrame:
    """Per attribute ``scale = max(U, D) / ε_attr`` from the first, second-to-last and last clusters.

    Evaluates the expression of :func:`fragrelease.sensitivity.idp_ir_sensitivity_from_extremes`
    with the same floating-point operations. Only three cluster rows per attribute are read.
    """
    edge = stats.where(F.col("cluster").isin(0, c - 2, c - 1))
    first = edge.where(F.col("cluster") == 0).select("attr", F.col("min").alias("min_first"))
    last = edge.where(F.col("cluster") == c - 1).select(
        "attr", F.col("min").alias("min_last"), F.col("max").alias("max_last"), F.col("size").cast("double").alias("s_last"))
    if c > 1:
        second = edge.where(F.col("cluster") == c - 2).select("attr", F.col("max").alias("max_2nd"))
        j = first.join(last, "attr").join(second, "attr").join(F.broadcast(params), "attr")
        up = (F.col("min_last") - F.col("min_first")) / F.lit(float(k)) + (F.col("hi") - F.col("min_last")) / F.col("s_last")
        down = (F.col("max_2nd") - F.col("lo")) / F.lit(float(k)) + (F.col("max_last") - F.col("max_2nd")) / F.col("s_last")
    else:
        j = first.join(last, "attr").join(F.broadcast(params), "attr")
        up = (F.col("hi") - F.col("min_first")) / F.col("s_last")
        down = (F.col("max_last") - F.col("lo")) / F.col("s_last")
    return j.select("attr", (F.greatest(up, down) / F.lit(eps)).alias("scale"))
