"""IR microaggregation and noise on Spark: what a data owner runs on its fragment (docs/specification.md §1-2).

Shapes: in, a fragment with the id column and the attributes to protect; out, the same ids with
every protected attribute replaced by its cluster's noisy centroid (numeric → double, categorical
→ one of the declared categories), rows in id order within each output group, never in value order.

How it runs, all distributed (no step moves more than ``_VALUES_PER_BUCKET`` = 500,000 values of
one attribute into one task; the steps are detailed in :func:`microaggregate_and_noise`). A fragment
of at most that many rows skips steps 3-4 and 6's routing: one task per attribute runs the numpy
mechanism (:func:`fragrelease.idpir.mechanisms.draw_attribute`), its raw noisy centroids are stored
at once and then post-processed (:func:`_protect_whole_attributes`); the output is the same.

1. Validation in one aggregation pass: nulls, values outside the declared domain, null or
   duplicate ids (:func:`validate_fragment`).
2. Categorical values become ranks in an order that is public (``declared``) or bought with budget
   (``dp-frequency``: a Laplace histogram of the category counts, :func:`category_orders`); the
   category → rank map is a broadcast join and the rank → label map runs in the Python workers, so
   no order appears as a literal in the Spark plan.
3. Each attribute's ``(value, id)`` order is cut into buckets by splitters estimated from a sample;
   values travel to their bucket as packed arrays (a few rows of many values, each a cell of
   little-endian bytes, not one row per value), each bucket is sorted in one task (about four
   buckets per task), and counts per bucket give its first global rank.
4. Cluster = ``min(rank // k, c - 1)``; per-cluster sums, counts and extremes are combined; the
   sensitivity and the scale ``b = Δ / ε_attr`` come from the mechanism registry's own function
   (:meth:`fragrelease.idpir.mechanisms.IRMechanism.sensitivity_from_extremes`, four order statistics
   per attribute), called on the executors, and stay inside Spark.
5. One Laplace draw per cluster in a non-deterministic pandas UDF, clamped (and rounded, for
   ranks); the noisy centroids are materialized before anything reads them twice.
6. Each bucket maps its ids to their cluster's noisy centroid; ids are regrouped by a hash and each
   group lines its attributes up by id into wide rows.

:func:`global_rank` (range partitioning + stored sort + offsets) ranks single keys elsewhere
(:mod:`fragrelease.jobs.idpir.simulate`).
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping, Optional, Sequence

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.storagelevel import StorageLevel

from fragrelease.errors import DomainError, IdentifierError, InvalidParameterError, SchemaMismatchError
from fragrelease.idpir.category_order import (
    CATEGORY_ORDERS,
    DEFAULT_CATEGORY_ORDER,
    DEFAULT_ORDER_SHARE,
    AttributeBudget,
    declared_order,
    dp_frequency_order,
    ranks_of,
    split_attribute_budget,
)
from fragrelease.idpir.mechanisms import IRMechanism, get_mechanism
from fragrelease.idpir.microaggregation import check_k, cluster_count
from fragrelease.idpir.postprocess import DEFAULT_POSTPROCESS, check_postprocess, finish_centroids
from fragrelease.rng.laplace import NoiseSource, SecureLaplace, float_at_most
from fragrelease.rng.secure import secure_random_keys
from fragrelease.schemas.base import Attribute
from fragrelease.udfs.noise import noisy_centroid_udf

log = logging.getLogger(__name__)

_POS_MASK = (1 << 33) - 1
_ROWS_PER_PARTITION = 1_000_000


class _StageClock:
    """DEBUG log of each stage's wall time (timings only: nothing data-dependent is logged)."""

    def __init__(self) -> None:
        self._t = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        log.debug("protect stage %s: %.2f s", stage, now - self._t)
        self._t = now


@dataclass(frozen=True)
class FragmentCheck:
    """Result of :func:`validate_fragment`: the record count (public) and nothing else."""

    n_records: int


@dataclass(frozen=True)
class FragmentContext:
    """Whose fragment is validated and where it was read: every data error starts with it.

    ``owner`` is the data owner's name; ``source`` a description of where the fragment was read (a
    path, ``table db.name``, ``DataFrame``; :func:`describe_source`). Errors read like
    ``owner 'clinic-a' (source /data/a.csv): column 'age' value 'abc' (record id 17) is not a number``.
    """

    owner: str
    source: str

    def where(self) -> str:
        return f"owner {self.owner!r} (source {self.source})"


def describe_source(source) -> str:
    """A :class:`fragrelease.idpir.config.SourceConfig` as the owner knows it: its path, or ``table <name>``.

    A DataFrame handed to :class:`fragrelease.jobs.api.Release` (a temporary view) reads ``DataFrame``.
    """
    if getattr(source, "path", None) is not None:
        return str(source.path)
    table = str(getattr(source, "table", source))
    return "DataFrame" if table.startswith("fragrelease_src_") else f"table {table}"


_NUMERIC_TYPES = (T.IntegerType, T.LongType, T.ShortType, T.ByteType, T.DoubleType, T.FloatType, T.DecimalType)
_INTEGRAL_TYPES = (T.IntegerType, T.LongType, T.ShortType, T.ByteType)


def _spark_type_ok(attr: Attribute, dtype: T.DataType) -> bool:
    if attr.type == "string" or attr.categorical:
        return isinstance(dtype, T.StringType)
    return isinstance(dtype, _NUMERIC_TYPES)


def _checkable(attr: Attribute, dtype: T.DataType) -> bool:
    """A type whose values :func:`validate_fragment` checks one by one (strings in numeric columns, numbers
    in categorical ones); other wrong types (dates, booleans, structs) are refused by type alone."""
    return _spark_type_ok(attr, dtype) or isinstance(dtype, (T.StringType, *_NUMERIC_TYPES))


def _where(context: Optional[FragmentContext]) -> str:
    return context.where() if context is not None else "fragment"


def check_columns(df: DataFrame, attributes: Sequence[Attribute], id_column: Optional[str],
                  context: Optional[FragmentContext] = None, *, types: bool = True) -> None:
    """Raise SchemaMismatchError if a column is missing or has a type no value of it could fit; no Spark job.

    Strings in numeric columns and numbers in categorical columns pass here: :func:`validate_fragment`
    names one offending value and its record id. ``types=False`` checks the names only
    (:func:`validate_fragment` then refuses a wrong type naming one value).

    Raises
    ------
    SchemaMismatchError
        ``<owner (source)>: the fragment has no column 'x'; it has [...]`` or a type such as a date
        where the schema declares a number.
    """
    where = _where(context)
    fields = {f.name: f.dataType for f in df.schema.fields}
    for attr in attributes:
        if attr.name not in fields:
            raise SchemaMismatchError(f"{where}: the fragment has no column {attr.name!r}; it has {sorted(fields)}")
        if types and not _checkable(attr, fields[attr.name]):
            raise SchemaMismatchError(f"{where}: column {attr.name!r} has type {fields[attr.name].simpleString()}, "
                                      f"the schema declares {attr.kind or attr.type} ({attr.type})")
    if id_column is not None and id_column not in fields:
        raise SchemaMismatchError(f"{where}: the fragment has no id column {id_column!r}; it has {sorted(fields)}")


def _example(cond, value, rid):
    """One ``(value as written, record id)`` pair of the rows where ``cond`` holds (or null)."""
    return F.first(F.when(cond, F.struct(value.cast("string").alias("v"), rid.alias("id"))), ignorenulls=True)


def _id_problem(id_type: Optional[str], dtype: T.DataType):
    """(condition on the id column flagging a value the declared id type cannot hold, what it should be)."""
    if id_type in ("integer", "long"):
        if isinstance(dtype, _INTEGRAL_TYPES):
            return None
        if isinstance(dtype, T.StringType):
            c = F.col("__id_raw")
            parsed = c.try_cast("decimal(38,6)")
            bound = 2**31 - 1 if id_type == "integer" else 2**63 - 1
            return (parsed.isNull() | (parsed != F.floor(parsed)) | (F.abs(parsed) > bound)), "an integer"
        if isinstance(dtype, _NUMERIC_TYPES):
            c = F.col("__id_raw").cast("double")
            return (F.isnan(c) | (c != F.floor(c))), "an integer"
        return F.lit(True), "an integer"
    if id_type == "double":
        if isinstance(dtype, _NUMERIC_TYPES):
            return None
        if isinstance(dtype, T.StringType):
            return F.col("__id_raw").try_cast("double").isNull(), "a number"
        return F.lit(True), "a number"
    return None  # string ids (or none declared): every value has a text form


def validate_fragment(df: DataFrame, attributes: Sequence[Attribute], id_column: Optional[str],
                      context: Optional[FragmentContext] = None, *, id_type: Optional[str] = None) -> FragmentCheck:
    """Check a fragment before any budget is spent or any noise drawn; one Spark aggregation pass
    (plus one grouped count for duplicate ids).

    Every error is one line that starts with ``context`` (the owner and its source) and names the
    column, one offending value as written and its record id, e.g. ``owner 'clinic-a' (source
    /data/a.csv): column 'age' value 'abc' (record id 17) is not a number``. The value is shown to
    the owner only, never published or logged.

    Parameters
    ----------
    df : the fragment: ``id_column`` and every attribute (other columns are ignored).
    attributes : the attributes to check against their declared domains or categories.
    id_column : the record id column.
    context : whose fragment and where it was read (:class:`FragmentContext`).
    id_type : the id column's declared type (``integer``, ``long``, ``double``, ``string``): ids the
        type cannot hold (``'x17'`` where the schema says ``long``) are refused here, before any noise,
        not at the aggregator.

    Raises
    ------
    SchemaMismatchError
        Missing column, or a type no value could fit; a string column declared numeric whose
        values all parse (named with one value and its record id).
    DomainError
        The fragment is empty (also an empty CSV, read as no or string columns); a null; a value that
        is not a number; a numeric value outside [lo, hi] or NaN/infinite; a non-integer in an integer
        column; a category that is not declared.
    IdentifierError
        Null or duplicate ids, or ids that the declared id type cannot hold.
    """
    where = _where(context)
    try:
        check_columns(df, attributes, id_column, context, types=False)
    except SchemaMismatchError:
        # an empty CSV reads as string columns (or none): say "empty", not "wrong type"
        if df.isEmpty():
            raise DomainError(f"{where}: the fragment is empty: it has no records") from None
        raise
    fields = {f.name: f.dataType for f in df.schema.fields}
    rid = F.col(id_column) if id_column is not None else F.lit(None).cast("string")  # shown with repr: 17, 'x17'
    aggs = [F.count(F.lit(1)).alias("__n")]
    for i, a in enumerate(attributes):
        col = F.col(a.name)
        dtype = fields[a.name]
        aggs.append(F.sum(col.isNull().cast("long")).alias(f"__null{i}"))
        aggs.append(_example(col.isNull(), col, rid).alias(f"__nullex{i}"))
        if not _checkable(a, dtype):  # a date, a boolean, a struct, ...: refused by type, naming one value
            aggs.append(_example(col.isNotNull(), col, rid).alias(f"__type{i}"))
            continue
        if a.categorical:
            bad = ~col.cast("string").isin(list(a.categories))
        else:
            num = col.try_cast("double") if isinstance(dtype, T.StringType) else col.cast("double")
            if isinstance(dtype, T.StringType):
                aggs.append(_example(col.isNotNull() & num.isNull(), col, rid).alias(f"__nan{i}"))
            lo, hi = a.bounds()
            bad = num.isNotNull() & ((num < lo) | (num > hi) | F.isnan(num))
        aggs.append(F.sum(F.when(col.isNotNull() & bad, 1).otherwise(0)).alias(f"__bad{i}"))
        aggs.append(_example(col.isNotNull() & bad, col, rid).alias(f"__ex{i}"))
        if not a.categorical and a.type in ("integer", "long"):  # e.g. a CSV column read as double
            frac = num != F.floor(num)
            aggs.append(_example(col.isNotNull() & num.isNotNull() & frac, col, rid).alias(f"__frac{i}"))
        if not _spark_type_ok(a, dtype):
            aggs.append(_example(col.isNotNull(), col, rid).alias(f"__type{i}"))
    id_check = None
    if id_column is not None:
        aggs.append(F.sum(F.col(id_column).isNull().cast("long")).alias("__idnull"))
        id_check = _id_problem(id_type, fields[id_column])
        if id_check is not None:
            cond = id_check[0]
            aggs.append(F.first(F.when(F.col(id_column).isNotNull() & cond, F.col(id_column).cast("string")),
                                ignorenulls=True).alias("__idbad"))
    frame = df.withColumn("__id_raw", F.col(id_column)) if id_check is not None else df
    row = frame.agg(*aggs).first()
    n = int(row["__n"])
    if n == 0:
        raise DomainError(f"{where}: the fragment is empty: it has no records")
    names = row.asDict()
    for i, a in enumerate(attributes):
        if row[f"__null{i}"]:
            ex = row[f"__nullex{i}"]
            raise DomainError(f"{where}: column {a.name!r} has {row[f'__null{i}']} null value(s), e.g. record id "
                              f"{ex['id']!r}; nulls are not allowed")
        if names.get(f"__nan{i}") is not None:
            ex = row[f"__nan{i}"]
            raise DomainError(f"{where}: column {a.name!r} value {ex['v']!r} (record id {ex['id']!r}) is not a number; "
                              f"the schema declares {a.type} in [{a.bounds()[0]}, {a.bounds()[1]}]")
        if names.get(f"__bad{i}"):
            ex = row[f"__ex{i}"]
            if a.categorical:
                what = f"is not a declared category of {list(a.categories)}"
            else:
                what = f"is outside its declared domain [{a.bounds()[0]}, {a.bounds()[1]}]"
            raise DomainError(f"{where}: column {a.name!r} value {ex['v']!r} (record id {ex['id']!r}) {what} "
                              f"({row[f'__bad{i}']} such value(s))")
        if names.get(f"__frac{i}") is not None:
            ex = row[f"__frac{i}"]
            raise DomainError(f"{where}: column {a.name!r} value {ex['v']!r} (record id {ex['id']!r}) is not an "
                              f"integer; the schema declares {a.type}")
        if names.get(f"__type{i}") is not None:
            ex = row[f"__type{i}"]
            raise SchemaMismatchError(f"{where}: column {a.name!r} has type {fields[a.name].simpleString()}, the schema "
                                      f"declares {a.kind} ({a.type}); e.g. value {ex['v']!r} (record id {ex['id']!r})")
    if id_column is not None:
        if row["__idnull"]:
            raise IdentifierError(f"{where}: id column {id_column!r} has {row['__idnull']} null value(s); "
                                  "every record needs an id")
        if id_check is not None and row["__idbad"] is not None:
            raise IdentifierError(f"{where}: id column {id_column!r} value {row['__idbad']!r} is not {id_check[1]}; "
                                  f"the schema declares the id {id_type} (column type "
                                  f"{fields[id_column].simpleString()})")
        dup = df.groupBy(id_column).count().where(F.col("count") > 1).limit(1).collect()
        if dup:
            raise IdentifierError(f"{where}: id column {id_column!r}: record id {dup[0][id_column]!r} appears "
                                  f"{dup[0]['count']} times; ids must be unique")
    return FragmentCheck(n_records=n)


def conform_id(df: DataFrame, id_column: str, id_type: Optional[str]) -> DataFrame:
    """``df`` with its id column cast to the declared ``id_type`` (after :func:`validate_fragment` passed).

    Every owner then hands the same id type to the protocol (a CSV read with string ids and a Parquet
    table with long ids line up). Returns ``df`` unchanged when the type already matches or none is declared.
    """
    spark_type = {"integer": T.IntegerType(), "long": T.LongType(), "double": T.DoubleType(),
                  "string": T.StringType()}.get(id_type or "")
    if spark_type is None or df.schema[id_column].dataType == spark_type:
        return df
    return df.withColumn(id_column, F.col(id_column).cast(spark_type))


def _hash60(value):
    """The first 60 bits of SHA-256 of a string column, as decimal(38,0), for order-independent sums."""
    return F.conv(F.substring(F.sha2(value, 256), 1, 15), 16, 10).cast("decimal(38,0)")


def _row_json(df: DataFrame):
    """Each row as JSON with its columns in sorted name order (digest independent of column order)."""
    return F.to_json(F.struct(*[F.col(c) for c in sorted(df.columns)]))


def id_digest(df: DataFrame, id_column: str) -> str:
    """Order-independent digest of a fragment's id set: count and a sum of 60-bit hash prefixes."""
    row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(_hash60(F.col(id_column).cast("string"))).alias("s")).first()
    return f"{row['n']}:{row['s'] or 0}"


def content_digest(df: DataFrame) -> str:
    """Order-independent digest of a table's content: row count and a sum of per-row SHA-256 prefixes.

    Columns are taken by name in sorted order, so the digest does not depend on column order either.
    """
    row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(_hash60(_row_json(df))).alias("s")).first()
    return f"sha256-sum60:{row['n']}:{row['s'] or 0}"


def fragment_digests(df: DataFrame, id_column: str) -> tuple[str, str]:
    """``(content_digest(df), id_digest(df, id_column))`` computed in one aggregation pass."""
    row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(_hash60(_row_json(df))).alias("s"),
                 F.sum(_hash60(F.col(id_column).cast("string"))).alias("i")).first()
    return f"sha256-sum60:{row['n']}:{row['s'] or 0}", f"{row['n']}:{row['i'] or 0}"


def category_orders(
    df: DataFrame,
    attributes: Sequence[Attribute],
    budgets: Sequence[AttributeBudget],
    category_order: str,
    noise: Optional[NoiseSource] = None,
) -> dict[str, tuple[str, ...]]:
    """The rank order of every categorical attribute, public or bought with budget (docs/specification.md §1).

    ``declared``: the schema's order, no Spark job. ``dp-frequency``: one aggregation pass counts
    every categorical attribute's categories (a table of Σ |dom| rows, the owner's own driver, kept
    in memory only, never logged or written); each histogram gets Laplace noise of scale
    ``2 / ε_order`` from :func:`fragrelease.idpir.category_order.dp_frequency_order` (the secure sampler
    unless a test injects ``noise``), drawn once on the driver, so no task retry can redraw it.
    The returned orders are ε_order-DP (noised with budget).

    Raises
    ------
    InvalidParameterError
        Unknown order, or a budget without ε_order for a categorical attribute under ``dp-frequency``.
    """
    cats = [(j, a) for j, a in enumerate(attributes) if a.categorical]
    if category_order not in CATEGORY_ORDERS:
        raise InvalidParameterError(f"category_order must be one of {CATEGORY_ORDERS}, not {category_order!r}")
    if not cats or category_order == "declared":
        return {a.name: declared_order(a.categories) for _, a in cats}
    by_name = {b.attribute: b for b in budgets}
    pairs = F.explode(F.array(*[F.struct(F.lit(j).alias("attr"), F.col(a.name).alias("value")) for j, a in cats]))
    counts: dict[int, dict[str, int]] = {j: {} for j, _ in cats}
    for r in df.select(pairs.alias("p")).groupBy("p.attr", "p.value").count().collect():
        counts[int(r["attr"])][r["value"]] = int(r["count"])
    source = noise if noise is not None else SecureLaplace()
    orders = {}
    for j, a in cats:
        eps_order = by_name[a.name].order
        if eps_order <= 0:
            raise InvalidParameterError(f"attribute {a.name!r} has no budget for its dp-frequency category order")
        orders[a.name] = dp_frequency_order(counts[j], a.categories, eps_order, source, attribute=a.name)
    return orders


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


_VALUES_PER_BUCKET = 500_000
_ROWS_PER_ASSEMBLY = 500_000
_RUN_ROWS = 262_144
_SAMPLE_PER_BUCKET = 2_000
_BROADCAST_CENTROIDS = 4_000_000
_KEY_SAMPLE_FRACTIONS = [i / 64 for i in range(1, 64)]
_BUCKETS_PER_TASK = 4
# Stored intermediates are kept serialized (memory, then disk): their memory is accounted in
# bytes, and a block that went to disk is not deserialized back into the heap on every read.
_STORED = StorageLevel.MEMORY_AND_DISK


def _integral_id(df: DataFrame, id_column: str) -> bool:
    return isinstance(df.schema[id_column].dataType, (T.LongType, T.IntegerType, T.ShortType, T.ByteType))


def _tie_key(df: DataFrame, id_column: str):
    """The tie-break key, a long: the id itself when it is integral, else its 64-bit xxhash."""
    if _integral_id(df, id_column):
        return F.col(id_column).cast("long")
    return F.xxhash64(F.col(id_column))


def _splitters(keyed: DataFrame, n_attrs: int, n: int, buckets: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per attribute, sorted composite splitters ``(x, key)`` cutting ``(x, key)`` order into ``buckets`` ranges.

    Estimated from a Bernoulli sample (about 2,000 rows per bucket) with ``percentile_approx``; they
    only balance the work between tasks, the output does not depend on them. A value that fills
    several quantiles (heavy ties, e.g. a categorical rank) is cut by quantiles of the tie key, so
    its rows spread over several buckets too. Splitters stay in driver memory (at most
    ``buckets`` values per attribute) and are never logged or written.
    """
    if buckets <= 1:
        return [(np.empty(0), np.empty(0, np.int64)) for _ in range(n_attrs)]
    fraction = min(1.0, _SAMPLE_PER_BUCKET * buckets / n)
    seed = int(secure_random_keys(1)[0])  # work balancing only; the release does not depend on it
    sample = keyed.sample(fraction=fraction, seed=seed)
    qs = [i / buckets for i in range(1, buckets)]
    row = sample.agg(
        *[F.percentile_approx(f"x{j}", qs, 10_000).alias(f"q{j}") for j in range(n_attrs)],
        F.percentile_approx("key", _KEY_SAMPLE_FRACTIONS, 10_000).alias("kq"),
    ).first()
    key_q = np.asarray(row["kq"] or [], dtype=np.int64)
    out = []
    for j in range(n_attrs):
        values = np.asarray(row[f"q{j}"] or [], dtype=float)
        xs, ks = [], []
        for v in np.unique(values):
            m = int((values == v).sum())
            if m == 1 or key_q.size == 0:
                xs.append(v)
                ks.append(np.iinfo(np.int64).max)
            else:  # heavy tie: cut its rows by the tie key's quantiles
                picks = np.unique(key_q[np.linspace(0, key_q.size - 1, m + 2)[1:-1].round().astype(int)])
                xs.extend([v] * (picks.size + 1))
                ks.extend([*picks.tolist(), np.iinfo(np.int64).max])
        out.append((np.asarray(xs, dtype=float), np.asarray(ks, dtype=np.int64)))
    return out


def _bucket_of(x: np.ndarray, key: np.ndarray, sx: np.ndarray, sk: np.ndarray) -> np.ndarray:
    """Number of splitters strictly below each ``(x, key)`` in lexicographic order."""
    if sx.size == 0:
        return np.zeros(x.shape[0], dtype=np.int64)
    lo = np.searchsorted(sx, x, side="left")
    hi = np.searchsorted(sx, x, side="right")
    bucket = lo.astype(np.int64)
    tied = np.flatnonzero(hi > lo)
    if tied.size:
        for start in np.unique(lo[tied]):
            rows = tied[lo[tied] == start]
            stop = int(hi[rows[0]])
            bucket[rows] = start + np.searchsorted(sk[start:stop], key[rows], side="left")
    return bucket


def _assembly_bucket(key: np.ndarray, groups: int) -> np.ndarray:
    """A well-mixed bucket in [0, groups) per tie key (Fibonacci hashing), for reassembling rows."""
    mixed = (key.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)
    return (mixed % np.uint64(groups)).astype(np.int32)


# Value arrays travel between the JVM and the Python workers as little-endian bytes (BinaryType):
# Arrow moves a binary cell with one copy, where an array<double> cell is converted value by
# value (measured: 100M values Python → JVM in 2.9 s as bytes against 11.8 s as arrays). Spark
# never looks inside them; ids that are not integers still travel as arrays of their type.
_F8 = np.dtype("<f8")
_I8 = np.dtype("<i8")


def _pack(values: np.ndarray, dtype: np.dtype) -> bytes:
    return np.ascontiguousarray(values, dtype=dtype).tobytes()


def _unpack(blobs, dtype: np.dtype) -> np.ndarray:
    """Concatenate packed cells (a pandas Series or list of bytes) into one array of ``dtype``."""
    parts = [np.frombuffer(b, dtype=dtype) for b in blobs]
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


def _group_rows(attr: int, key: np.ndarray, rid: np.ndarray, value: np.ndarray, groups: int,
                pack_rid: bool) -> list[tuple]:
    """One attribute's released values cut by assembly group: ``(group, attr, rid, value)`` tuples.

    ``value`` is packed (:func:`_pack`); ``rid`` too when ``pack_rid`` (integral ids), else an array.
    """
    g = _assembly_bucket(key, groups)
    order = np.argsort(g, kind="stable")
    bounds = np.flatnonzero(np.diff(g[order])) + 1
    return [(int(g[part[0]]), attr, _pack(rid[part], _I8) if pack_rid else rid[part], _pack(value[part], _F8))
            for part in np.split(order, bounds) if part.size]


def protect_fragment(
    df: DataFrame,
    attributes: Sequence[Attribute],
    *,
    id_column: str,
    k: int,
    epsilon_per_attribute: Fraction,
    mechanism: str,
    category_order: str = DEFAULT_CATEGORY_ORDER,
    category_order_share: Fraction = DEFAULT_ORDER_SHARE,
    n_records: Optional[int] = None,
    noise: Optional[NoiseSource] = None,
    postprocess: str = DEFAULT_POSTPROCESS,
) -> DataFrame:
    """One owner's whole protection step: category orders, then :func:`microaggregate_and_noise`.

    Each attribute's budget ``epsilon_per_attribute`` (ε_j / l_j, exact) is split by
    :func:`fragrelease.idpir.category_order.split_attribute_budget`: numeric attributes and the
    ``declared`` order spend it all on the centroids; ``dp-frequency`` spends
    ``category_order_share · ε_attr`` on a Laplace histogram that fixes the rank order
    (:func:`category_orders`) and the rest on the centroids. docs/specification.md §1-2.

    Shapes, errors and the rest of the parameters: :func:`microaggregate_and_noise`.
    """
    check_postprocess(postprocess)
    attrs = list(attributes)
    budgets = [split_attribute_budget(a.name, Fraction(epsilon_per_attribute), categorical=a.categorical,
                                      category_order=category_order, share=category_order_share) for a in attrs]
    n = n_records if n_records is not None else df.count()
    check_k(get_mechanism(mechanism).k_used(k), n)  # before any budget is spent on the histograms
    orders = category_orders(df, attrs, budgets, category_order, noise)
    return microaggregate_and_noise(df, attrs, id_column=id_column, k=k, budgets=budgets, orders=orders,
                                    mechanism=mechanism, n_records=n, noise=noise, postprocess=postprocess)


def microaggregate_and_noise(
    df: DataFrame,
    attributes: Sequence[Attribute],
    *,
    id_column: str,
    k: int,
    budgets: Sequence[AttributeBudget],
    orders: Mapping[str, Sequence[str]],
    mechanism: str,
    n_records: Optional[int] = None,
    noise: Optional[NoiseSource] = None,
    postprocess: str = DEFAULT_POSTPROCESS,
) -> DataFrame:
    """IR microaggregation + Laplace noise (DP-IR, iDP-IR or plain iDP) with given budgets and category orders.

    Parameters
    ----------
    df : DataFrame with ``id_column`` (unique, non-null) and every attribute in ``attributes``.
    attributes : the attributes to protect, with declared domains/categories.
    id_column : record id; ties between equal values are ordered by it (by its 64-bit xxhash when
        the id is not an integer).
    k : cluster size (plain iDP uses 1).
    budgets : one :class:`fragrelease.idpir.category_order.AttributeBudget` per attribute, in order; the
        Laplace scale uses its ``centroids`` part.
    orders : categorical attribute name → its categories in rank order (rank 1 first). Must be
        public or noised with budget (:func:`category_orders`); the map is applied inside Python
        workers, so it appears as no literal in the Spark plan.
    mechanism : "idp-ir", "dp-ir" or "idp".
    postprocess : "isotonic" (default: the noisy centroid vector of each attribute is projected onto
        the non-decreasing vectors in [lo, hi], weighted by cluster size, before rounding;
        post-processing, docs/specification.md §9) or "none" (the paper's release).
    n_records : the fragment's row count if already known (validated), else counted.
    noise : test-only noise injection; ``None`` = the secure sampler.

    Returns
    -------
    DataFrame ``(id_column, *attribute names)``, one row per input row; numeric attributes as
    double, categorical as string. Rows come in id order within each output group (one group per
    ~500,000 rows, grouped by a hash of the id), never in value order. The noise is already
    materialized. docs/specification.md §1-2; Del Vasto-Terrientes et al. (ICISSP 2025) Alg. 1.

    Raises
    ------
    InvalidParameterError
        ``budgets`` not one per attribute in order, or an order that does not list the declared
        categories once each; k < 1 or k > n (:func:`fragrelease.idpir.microaggregation.check_k`).
    SchemaMismatchError
        An attribute whose value count differs from n (the fragment changed while it was read).

    How it runs (every step distributed; no step moves all rows, or all values of one attribute,
    into one task; Spark moves values as packed byte cells of up to ~260,000 values, not row by row,
    and no task's data grows with the fragment):

    1. Each attribute's ``(x, id)`` order is cut into buckets of about 500,000 values by splitters
       estimated from a sample (:func:`_splitters`); a map-only pass writes each input chunk's
       values as one packed row per (attribute, bucket), stored once (serialized).
    2. Counts per (attribute, bucket) give each bucket's first global rank (a table of
       attributes × buckets numbers). Each bucket is sorted in one task; rank → cluster
       ``min(rank // k, c - 1)``; the task emits its ids in rank order and per-cluster partial sums,
       counts, minima and maxima. This is stored (``localCheckpoint``).
    3. Partial statistics are combined per (attribute, cluster); sensitivity, scale and one Laplace
       draw per cluster as before; the noisy centroids are materialized.
    4. Each bucket gets the noisy centroids of its cluster range, maps its ids to values, and cuts
       them by a hash of the id; one task per hash group lines the attributes up by id.
    """
    spark = df.sparkSession
    clock = _StageClock()
    check_postprocess(postprocess)
    attrs = list(attributes)
    l = len(attrs)
    n = n_records if n_records is not None else df.count()
    mech = get_mechanism(mechanism)
    k_used = mech.k_used(k)
    check_k(k_used, n)
    c = cluster_count(n, k_used)
    if [b.attribute for b in budgets] != [a.name for a in attrs]:
        raise InvalidParameterError(f"budgets are for {[b.attribute for b in budgets]}, attributes are {[a.name for a in attrs]}")
    eps = [float_at_most(b.centroids) for b in budgets]  # Fraction → float (rounded down) only here, for the scale
    rank_orders: dict[str, tuple[str, ...]] = {}
    for a in attrs:
        if a.categorical:
            order = tuple(orders[a.name]) if a.name in orders else ()
            if sorted(order) != sorted(a.categories):
                raise InvalidParameterError(f"the rank order of {a.name!r} must list its declared categories once each")
            rank_orders[a.name] = order

    # An integral id is its own tie key; any other id travels beside its hash.
    carry_rid = not _integral_id(df, id_column)
    cols = [_tie_key(df, id_column).alias("key")] + ([F.col(id_column).alias("rid")] if carry_rid else [])
    keyed = df
    for j, a in enumerate(attrs):
        if a.categorical:
            # category → rank through a broadcast join of a small table: the order is data, not a
            # plan literal (it would otherwise show in explain output, the UI and event logs)
            ranks = spark.createDataFrame([(cat, float(r)) for cat, r in ranks_of(rank_orders[a.name]).items()],
                                          f"`__c{j}` string, `x{j}` double")
            keyed = keyed.join(F.broadcast(ranks), F.col(a.name) == F.col(f"__c{j}"), "inner")
            cols.append(F.col(f"x{j}"))
        else:
            cols.append(F.col(a.name).cast("double").alias(f"x{j}"))
    keyed = keyed.select(*cols)
    rid_type = keyed.schema["rid"].dataType if carry_rid else T.LongType()
    rid_field = [T.StructField("rid", T.ArrayType(rid_type))] if carry_rid else []

    buckets = max(1, math.ceil(n / _VALUES_PER_BUCKET))
    bucket_dtype = np.int16 if buckets < 2**15 else np.int32
    splitters = _splitters(keyed, l, n, buckets)
    clock.lap("splitters (sample)")

    run_schema = T.StructType([
        T.StructField("attr", T.IntegerType()), T.StructField("bucket", T.IntegerType()),
        T.StructField("x", T.BinaryType()), T.StructField("key", T.BinaryType()),  # packed <f8 / <i8
        *rid_field,
    ])

    def runs_of(batches):
        pending, size = [], 0

        def flush(chunk):
            key = chunk["key"].to_numpy(np.int64)
            rid = chunk["rid"].to_numpy() if carry_rid else None
            rows = []
            for j in range(l):
                x = chunk[f"x{j}"].to_numpy(float)
                b = _bucket_of(x, key, *splitters[j]).astype(bucket_dtype)
                order = np.argsort(b, kind="stable")  # radix sort for 16-bit bucket numbers
                bounds = np.flatnonzero(np.diff(b[order])) + 1
                for part in np.split(order, bounds):
                    if part.size:
                        rows.append((j, int(b[part[0]]), _pack(x[part], _F8), _pack(key[part], _I8),
                                     *([rid[part]] if carry_rid else [])))
            return pd.DataFrame(rows, columns=["attr", "bucket", "x", "key", *(["rid"] if carry_rid else [])])

        for batch in batches:
            pending.append(batch)
            size += len(batch)
            if size >= _RUN_ROWS:
                yield flush(pd.concat(pending, ignore_index=True))
                pending, size = [], 0
        if pending:
            yield flush(pd.concat(pending, ignore_index=True))

    if buckets == 1:
        # every attribute fits one task (<= _VALUES_PER_BUCKET values): protect it there in one call
        # of the numpy mechanism, skipping the distributed ranking and its stored intermediates
        return _protect_whole_attributes(
            keyed.mapInPandas(runs_of, run_schema), attrs, budgets=budgets, k=k, n=n, mechanism=mechanism,
            noise=noise, postprocess=postprocess, carry_rid=carry_rid, rid_type=rid_type, rank_orders=rank_orders,
            id_type=df.schema[id_column].dataType, id_column=id_column, clock=clock)
    runs = keyed.mapInPandas(runs_of, run_schema).localCheckpoint(eager=True, storageLevel=_STORED)
    clock.lap("cut into bucket arrays (map, stored)")
    counts = {(int(r["attr"]), int(r["bucket"])): int(r["m"])
              for r in runs.groupBy("attr", "bucket").agg((F.sum(F.length("x")) / 8).cast("long").alias("m")).collect()}
    first_rank: dict[tuple[int, int], int] = {}
    for j in range(l):
        running = 0
        for b in sorted(bb for (jj, bb) in counts if jj == j):
            first_rank[(j, b)] = running
            running += counts[(j, b)]
        if running != n:
            raise SchemaMismatchError(f"attribute {attrs[j].name!r} has {running} values, expected {n} rows")

    ranked_schema = T.StructType([
        T.StructField("attr", T.IntegerType()), T.StructField("bucket", T.IntegerType()),
        T.StructField("first_rank", T.LongType()), *rid_field,
        T.StructField("key", T.BinaryType()),
        T.StructField("cluster", T.ArrayType(T.LongType())), T.StructField("sum", T.ArrayType(T.DoubleType())),
        T.StructField("size", T.ArrayType(T.LongType())), T.StructField("min", T.ArrayType(T.DoubleType())),
        T.StructField("max", T.ArrayType(T.DoubleType())),
    ])

    def rank_bucket(pdf: pd.DataFrame) -> pd.DataFrame:
        j, b = int(pdf["attr"].iloc[0]), int(pdf["bucket"].iloc[0])
        x = _unpack(pdf["x"], _F8)
        key = _unpack(pdf["key"], _I8)
        order = np.lexsort((key, x))
        x, key = x[order], key[order]
        start = first_rank[(j, b)]
        cluster = np.minimum((start + np.arange(x.size, dtype=np.int64)) // k_used, c - 1)
        cuts = np.flatnonzero(np.diff(cluster)) + 1
        firsts = np.concatenate(([0], cuts))
        lasts = np.concatenate((cuts - 1, [x.size - 1]))
        return pd.DataFrame({
            "attr": [j], "bucket": [b], "first_rank": [start], "key": [_pack(key, _I8)],
            **({"rid": [np.concatenate(pdf["rid"].to_list())[order]]} if carry_rid else {}),
            "cluster": [cluster[firsts]], "sum": [np.add.reduceat(x, firsts)],
            "size": [(lasts - firsts + 1).astype(np.int64)], "min": [x[firsts]], "max": [x[lasts]],
        })

    clock.lap("counts per bucket")
    # a few buckets (~8 MB each) per task, whatever the fragment's size: task memory stays bounded
    sort_tasks = max(1, math.ceil(l * buckets / _BUCKETS_PER_TASK))
    ranked = (runs.repartition(sort_tasks, "attr", "bucket").groupBy("attr", "bucket")
              .applyInPandas(rank_bucket, ranked_schema).localCheckpoint(eager=True, storageLevel=_STORED))
    clock.lap("sort buckets, ranks, partial cluster statistics (stored)")

    partial = ranked.select("attr", F.explode(F.arrays_zip("cluster", "sum", "size", "min", "max")).alias("s"))
    stats = partial.groupBy("attr", F.col("s.cluster").alias("cluster")).agg(
        F.sum("s.sum").alias("sum"), F.sum("s.size").alias("size"), F.min("s.min").alias("min"),
        F.max("s.max").alias("max")).localCheckpoint(eager=True)  # read four times below; small (c · l rows)
    clock.lap("cluster statistics")

    # public: declared domains and the centroids' budget per attribute
    params = spark.createDataFrame(
        [(i, *a.bounds(), a.categorical, eps[i]) for i, a in enumerate(attrs)],
        "attr int, lo double, hi double, categorical boolean, eps double",
    )
    scales = _scales(stats, params, mech, k_used, c)
    noisy_udf = noisy_centroid_udf([a.name for a in attrs], noise, finish=postprocess == "none")
    noisy = (
        stats.join(F.broadcast(params), "attr").join(F.broadcast(scales), "attr")
        .withColumn("centroid", F.col("sum") / F.col("size"))
        .select("attr", "cluster", "size",
                noisy_udf("attr", "cluster", "centroid", "scale", "lo", "hi", "categorical").alias("value"))
    )
    # Materialize the noise once: nothing downstream may re-run the UDF.
    noisy = noisy.localCheckpoint(eager=True)
    clock.lap("sensitivity, scale, noise (stored)")
    if postprocess == "isotonic":
        noisy = _isotonic(noisy, params).localCheckpoint(eager=True)
        clock.lap("isotonic post-processing (stored)")
    noisy = noisy.select("attr", "cluster", "value")

    # Each bucket's cluster range (attributes × buckets rows) routes the noisy centroids to it.
    ranges = spark.createDataFrame(
        [(j, b, min(r0 // k_used, c - 1), min((r0 + counts[(j, b)] - 1) // k_used, c - 1))
         for (j, b), r0 in first_rank.items()],
        "attr int, bucket int, cl_lo long, cl_hi long",
    )
    routed = (noisy.join(F.broadcast(ranges), (noisy["attr"] == ranges["attr"])
                         & noisy["cluster"].between(ranges["cl_lo"], ranges["cl_hi"]))
              .select(ranges["attr"], ranges["bucket"], ranges["cl_lo"], noisy["cluster"], noisy["value"])
              .groupBy("attr", "bucket", "cl_lo")
              .agg(F.sort_array(F.collect_list(F.struct("cluster", "value"))).alias("centroids"))
              .select("attr", "bucket", "cl_lo", F.col("centroids.value").alias("centroids")))
    # Shipping the noisy centroids to the buckets (broadcast, when they are few enough) beats moving
    # the buckets' id arrays; the broadcast is capped, so driver memory stays bounded.
    if c * l <= _BROADCAST_CENTROIDS:
        routed = F.broadcast(routed)
    joined = ranked.select("attr", "bucket", "first_rank", "key", *(["rid"] if carry_rid else [])).join(
        routed, ["attr", "bucket"])

    groups = max(1, math.ceil(n / _ROWS_PER_ASSEMBLY))

    def values_of(batches):
        for pdf in batches:
            rows = []
            for rec in pdf.itertuples(index=False):
                key = np.frombuffer(rec.key, dtype=_I8)
                rid = np.asarray(rec.rid) if carry_rid else key
                centroids = np.asarray(rec.centroids, dtype=float)
                cluster = np.minimum((rec.first_rank + np.arange(rid.size, dtype=np.int64)) // k_used, c - 1)
                rows += _group_rows(int(rec.attr), key, rid, centroids[cluster - rec.cl_lo], groups,
                                    pack_rid=not carry_rid)
            yield pd.DataFrame(rows, columns=["group", "attr", "rid", "value"])

    values = joined.mapInPandas(values_of, _values_schema(rid_type, carry_rid))
    return _line_up(values, attrs, groups=groups, carry_rid=carry_rid, rid_type=rid_type, rank_orders=rank_orders,
                    id_type=df.schema[id_column].dataType, id_column=id_column)


def _values_schema(rid_type: T.DataType, carry_rid: bool) -> T.StructType:
    """``(group, attr, rid, value)``: one attribute's released values for the ids of one assembly group.

    ``value`` is packed ``<f8`` bytes; ``rid`` is packed ``<i8`` bytes for integral ids, else an
    array of the id's type (``carry_rid``).
    """
    return T.StructType([
        T.StructField("group", T.IntegerType()), T.StructField("attr", T.IntegerType()),
        T.StructField("rid", T.ArrayType(rid_type) if carry_rid else T.BinaryType()),
        T.StructField("value", T.BinaryType()),
    ])


def _line_up(values: DataFrame, attrs: Sequence[Attribute], *, groups: int, carry_rid: bool, rid_type: T.DataType,
             rank_orders: Mapping[str, Sequence[str]], id_type: T.DataType, id_column: str) -> DataFrame:
    """One task per assembly group sorts each attribute's ``(rid, value)`` arrays by id and lines them up.

    In: ``(group, attr, rid, value)`` (:func:`_values_schema`), every attribute's values for every id
    of the group. Out: ``(id_column, *attribute names)``, one row per id; categorical ranks become
    their labels here, in the Python workers (post-processing of the noisy rank; no plan literal).

    Raises IdentifierError when two attributes disagree on the ids of a group.
    """
    l = len(attrs)
    out_schema = T.StructType([T.StructField("rid", rid_type)]
                              + [T.StructField(f"v{j}", T.StringType() if a.categorical else T.DoubleType())
                                 for j, a in enumerate(attrs)])
    labels = {j: np.asarray(rank_orders[a.name], dtype=object) for j, a in enumerate(attrs) if a.categorical}

    def assemble(pdf: pd.DataFrame) -> pd.DataFrame:
        columns, ids = {}, None
        for j, part in pdf.groupby("attr"):
            rid = np.concatenate(part["rid"].to_list()) if carry_rid else _unpack(part["rid"], _I8)
            value = _unpack(part["value"], _F8)
            order = np.argsort(rid, kind="stable")
            if ids is None:
                ids = rid[order]
            elif not np.array_equal(ids, rid[order]):
                raise IdentifierError("protected attributes disagree on the set of ids; the fragment changed while it was read")
            value = value[order]
            columns[f"v{int(j)}"] = labels[int(j)][value.astype(np.int64) - 1] if int(j) in labels else value
        return pd.DataFrame({"rid": ids, **{f"v{j}": columns[f"v{j}"] for j in range(l)}})

    if groups > 1:  # one task per assembly group (about 500,000 ids), whatever the fragment's size
        values = values.repartition(groups, "group")
    wide = values.groupBy("group").applyInPandas(assemble, out_schema)
    out_cols = [F.col("rid").cast(id_type).alias(id_column)]
    out_cols += [F.col(f"v{j}").alias(a.name) for j, a in enumerate(attrs)]
    return wide.select(*out_cols)


def _protect_whole_attributes(runs: DataFrame, attrs: Sequence[Attribute], *, budgets: Sequence[AttributeBudget],
                              k: int, n: int, mechanism: str, noise: Optional[NoiseSource], postprocess: str,
                              carry_rid: bool, rid_type: T.DataType, rank_orders: Mapping[str, Sequence[str]],
                              id_type: T.DataType, id_column: str, clock: _StageClock) -> DataFrame:
    """Fragments of at most ``_VALUES_PER_BUCKET`` rows: one task per attribute runs the numpy mechanism.

    In: ``runs`` = ``(attr, bucket, x, key[, rid])`` (x and key packed bytes, one bucket per attribute). Each task
    concatenates its attribute's n values and calls
    :func:`fragrelease.idpir.mechanisms.draw_attribute` (the one definition of the mechanism, the
    same the numpy reference :func:`~fragrelease.idpir.mechanisms.protect_attribute` runs: ranking
    with ties broken by the tie key, centroids, sensitivity, calibrated scale, one Laplace draw per
    cluster from the secure sampler); the local sensitivity and the scale never leave the task. The
    raw noisy centroids are materialized at once, so the noise is drawn once; then
    :func:`fragrelease.idpir.postprocess.finish_centroids` post-processes them, as in the distributed
    path. Memory per task: the attribute's n values, as in a bucket of the distributed path.
    Out: as :func:`microaggregate_and_noise`.
    """
    from fragrelease.idpir.mechanisms import draw_attribute

    # public: declared domains and each attribute's centroid budget (exact Fraction)
    specs = {j: (a.name, *a.bounds(), a.categorical, Fraction(b.centroids)) for j, (a, b) in enumerate(zip(attrs, budgets))}
    drawn_schema = T.StructType([
        T.StructField("attr", T.IntegerType()), T.StructField("key", T.ArrayType(T.LongType())),
        *([T.StructField("rid", T.ArrayType(rid_type))] if carry_rid else []),
        T.StructField("cluster", T.ArrayType(T.LongType())), T.StructField("noisy", T.ArrayType(T.DoubleType())),
        T.StructField("size", T.ArrayType(T.LongType())),
    ])

    def draw_one(pdf: pd.DataFrame) -> pd.DataFrame:
        j = int(pdf["attr"].iloc[0])
        x = _unpack(pdf["x"], _F8)
        key = _unpack(pdf["key"], _I8)
        name, lo, hi, _, eps = specs[j]
        if x.size != n:
            raise SchemaMismatchError(f"attribute {name!r} has {x.size} values, expected {n} rows")
        cluster, noisy, size = draw_attribute(x, k=k, lo=lo, hi=hi, epsilon_attribute=eps, mechanism=mechanism,
                                              noise=noise if noise is not None else SecureLaplace(), attribute=name,
                                              tiebreak=key)
        out = {"attr": [j], "key": [key]}
        if carry_rid:
            out["rid"] = [np.concatenate(pdf["rid"].to_list())]
        out.update(cluster=[cluster], noisy=[noisy], size=[size])
        return pd.DataFrame(out)

    # Materialize the raw noise once: nothing downstream may re-run draw_one.
    drawn = runs.groupBy("attr").applyInPandas(draw_one, drawn_schema).localCheckpoint(eager=True)
    clock.lap("draw each attribute's noisy centroids in one task (stored)")
    groups = max(1, math.ceil(n / _ROWS_PER_ASSEMBLY))

    def finish(batches):
        # post-processing of the materialized noisy centroids (public sizes and domain only), then
        # each id's released value, cut by assembly group
        for pdf in batches:
            rows = []
            for rec in pdf.itertuples(index=False):
                _, lo, hi, categorical, _ = specs[int(rec.attr)]
                released = finish_centroids(np.asarray(rec.noisy, dtype=float), np.asarray(rec.size, dtype=float),
                                            lo, hi, categorical, postprocess)
                key = np.asarray(rec.key, dtype=np.int64)
                rid = np.asarray(rec.rid) if carry_rid else key
                rows += _group_rows(int(rec.attr), key, rid, released[np.asarray(rec.cluster, dtype=np.int64)], groups,
                                    pack_rid=not carry_rid)
            yield pd.DataFrame(rows, columns=["group", "attr", "rid", "value"])

    return _line_up(drawn.mapInPandas(finish, _values_schema(rid_type, carry_rid)), attrs, groups=groups,
                    carry_rid=carry_rid, rid_type=rid_type,
                    rank_orders=rank_orders, id_type=id_type, id_column=id_column)


def _scales(stats: DataFrame, params: DataFrame, mech: IRMechanism, k: int, c: int) -> DataFrame:
    """Per attribute ``scale ≈ Δ / ε_centroids`` for its c centroids (``attr int, scale double``), on the executors.

    Four order statistics per attribute (the first cluster's minimum, the last cluster's extremes
    and size, the second-to-last cluster's maximum) are aggregated in Spark; one task per attribute
    then calls the registry's own :meth:`fragrelease.idpir.mechanisms.IRMechanism.sensitivity_from_extremes`
    and :meth:`~fragrelease.idpir.mechanisms.IRMechanism.scale`, so the Spark job and the numpy reference
    compute the same double by construction. The local sensitivity is data-dependent: it stays
    inside Spark (never on the driver, never logged).
    """
    cl = F.col("cluster")
    edges = (stats.where(cl.isin(0, c - 2, c - 1)).groupBy("attr").agg(
        F.min(F.when(cl == 0, F.col("min"))).alias("min_first"),
        F.max(F.when(cl == c - 1, F.col("min"))).alias("min_last"),
        F.max(F.when(cl == c - 1, F.col("max"))).alias("max_last"),
        F.max(F.when(cl == c - 2, F.col("max"))).alias("max_second_last"),
        F.max(F.when(cl == c - 1, F.col("size"))).alias("size_last"))
        .join(F.broadcast(params), "attr"))

    def scale_of(pdf: pd.DataFrame) -> pd.DataFrame:
        r = pdf.iloc[0]
        second = float(r["max_second_last"]) if c > 1 else float(r["lo"])
        delta = mech.sensitivity_from_extremes(float(r["min_first"]), float(r["min_last"]), second,
                                               float(r["max_last"]), k=k, size_last=int(r["size_last"]),
                                               n_clusters=c, lo=float(r["lo"]), hi=float(r["hi"]))
        return pd.DataFrame({"attr": [int(r["attr"])], "scale": [mech.scale(delta, float(r["eps"]), c)]})

    return edges.groupBy("attr").applyInPandas(scale_of, "attr int, scale double")


def _isotonic(noisy: DataFrame, params: DataFrame) -> DataFrame:
    """Isotonic post-processing of each attribute's noisy centroid vector, in cluster order.

    Shapes: in ``(attr, cluster, size, value)`` with unclamped noisy values; out ``(attr, cluster,
    value)`` with :func:`fragrelease.idpir.postprocess.finish_centroids` applied (projection,
    clamping, rounding of ranks). It reads only the noisy values and public quantities (cluster
    order and sizes, the declared domain): post-processing (docs/specification.md §9).

    One task holds one attribute's c = n/k clusters (about 24 bytes each in the task's pandas
    frame, plus SciPy's linear-time pool-adjacent-violators): 100,000 clusters (10M rows, k = 100)
    is a few MB; plain iDP (k = 1) holds one value per record of the fragment, 10M rows about
    250 MB in one Python worker.
    """
    def finish(pdf: pd.DataFrame) -> pd.DataFrame:
        pdf = pdf.sort_values("cluster", kind="stable")
        r = pdf.iloc[0]
        value = finish_centroids(pdf["value"].to_numpy(float), pdf["size"].to_numpy(float), float(r["lo"]),
                                 float(r["hi"]), bool(r["categorical"]), "isotonic")
        return pd.DataFrame({"attr": pdf["attr"].to_numpy(np.int32), "cluster": pdf["cluster"].to_numpy(np.int64),
                             "value": value})

    return (noisy.join(F.broadcast(params.select("attr", "lo", "hi", "categorical")), "attr")
            .groupBy("attr").applyInPandas(finish, "attr int, cluster long, value double"))
