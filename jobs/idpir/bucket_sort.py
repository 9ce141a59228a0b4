"""The bucket sort of IR ranking on Spark: each attribute's ``(value, tie key)`` order cut into buckets (docs/specification.md §1).

Shapes: :func:`keyed_values` turns a fragment into ``(key[, rid], x0 .. x{l-1})`` (one double per
attribute, categorical values as their public or noised rank); :func:`cut_into_runs` writes each
input chunk as packed rows ``(attr, bucket, x, key[, rid])`` (``x``/``key`` little-endian ``<f8``/``<i8``
bytes, a few rows of up to ~260,000 values, not one row per value); :func:`bucket_first_ranks`
counts every bucket and gives its first global rank; :func:`sort_buckets` sorts each bucket in one
task (exact packed sort, :func:`fragrelease.idpir.microaggregation.ir_order`) and emits its tie keys
cut by assembly group with their cluster numbers, and its per-cluster partial statistics. No task holds more than one bucket's values
(about 500,000 per bucket, a few buckets per task). Splitters only balance work: the output does not
depend on them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.storagelevel import StorageLevel

from fragrelease.errors import SchemaMismatchError
from fragrelease.idpir.category_order import ranks_of
from fragrelease.idpir.microaggregation import ir_order
from fragrelease.idpir.stage import StageSpec
from fragrelease.schemas.base import Attribute
from fragrelease.udfs.keys import bernoulli_sample

_SAMPLE_PER_BUCKET = 2_000
_KEY_SAMPLE_FRACTIONS = [i / 64 for i in range(1, 64)]
#: Buckets (about 8 MB each) sorted by one task, whatever the fragment's size.
BUCKETS_PER_TASK = 4
# Stored intermediates are kept serialized (memory, then disk): their memory is accounted in
# bytes, and a block that went to disk is not deserialized back into the heap on every read.
STORED = StorageLevel.MEMORY_AND_DISK

# Value arrays travel between the JVM and the Python workers as little-endian bytes (BinaryType):
# Arrow moves a binary cell with one copy, where an array<double> cell is converted value by
# value (measured: 100M values Python → JVM in 2.9 s as bytes against 11.8 s as arrays). Spark
# never looks inside them; ids that are not integers still travel as arrays of their type.
F8 = np.dtype("<f8")
I8 = np.dtype("<i8")
#: One cluster's partial statistics within a bucket, packed (40 bytes).
STATS = np.dtype([("cluster", "<i8"), ("sum", "<f8"), ("size", "<i8"), ("min", "<f8"), ("max", "<f8")])
#: A cluster number relative to the first cluster of its centroid slice, packed (4 bytes).
CL = np.dtype("<i4")


def pack(values: np.ndarray, dtype: np.dtype) -> bytes:
    """``values`` as contiguous bytes of ``dtype`` (a BinaryType cell)."""
    return np.ascontiguousarray(values, dtype=dtype).tobytes()


def unpack(blobs: Sequence[bytes] | pd.Series, dtype: np.dtype) -> np.ndarray:
    """Concatenate packed cells (a pandas Series or list of bytes) into one array of ``dtype``."""
    parts = [np.frombuffer(b, dtype=dtype) for b in blobs]
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


def pack_stats(cluster: np.ndarray, total: np.ndarray, size: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bytes:
    """Per-cluster partial statistics of one bucket as packed :data:`STATS` records; all arrays shape (m,)."""
    out = np.empty(cluster.size, dtype=STATS)
    out["cluster"], out["sum"], out["size"], out["min"], out["max"] = cluster, total, size, lo, hi
    return out.tobytes()


def assembly_bucket(key: np.ndarray, groups: int) -> np.ndarray:
    """A well-mixed bucket in [0, groups) per tie key (Fibonacci hashing), for reassembling rows."""
    mixed = (key.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)
    return (mixed % np.uint64(groups)).astype(np.int32)


def group_rows(attr: int, key: np.ndarray, rid: np.ndarray, value: np.ndarray, groups: int,
               pack_rid: bool, dtype: np.dtype = F8) -> list[tuple[int, int, object, bytes]]:
    """One attribute's values cut by assembly group: ``(group, attr, rid, value)`` tuples.

    ``key``, ``rid``, ``value`` shape (m,). ``value`` is packed as ``dtype``
    (:func:`fragrelease.jobs.idpir.bucket_sort.pack`: ``<f8`` released values, or ``<i4`` cluster
    numbers, :data:`CL`); ``rid`` too when ``pack_rid`` (integral ids, ``<i8``), else an array.
    """
    g = assembly_bucket(key, groups)
    # stable radix sort for 16-bit keys (numpy), about 3x faster than on int32; the same order
    order = np.argsort(g.astype(np.uint16) if groups <= 1 << 16 else g, kind="stable")
    bounds = np.flatnonzero(np.diff(g[order])) + 1
    return [(int(g[part[0]]), attr, pack(rid[part], I8) if pack_rid else rid[part], pack(value[part], dtype))
            for part in np.split(order, bounds) if part.size]


@dataclass(frozen=True)
class KeyedValues:
    """The values to rank: ``frame`` = ``(key[, rid], x0 .. x{n_attrs-1})``.

    ``key`` is the tie key (a long: the integral id, else the id's 64-bit xxhash); ``rid`` the id
    itself when it is not integral (``carry_rid``), of type ``rid_type``; ``x{j}`` attribute j as a double.
    """

    frame: DataFrame
    n_attrs: int
    carry_rid: bool
    rid_type: T.DataType


def integral_id(df: DataFrame, id_column: str) -> bool:
    return isinstance(df.schema[id_column].dataType, (T.LongType, T.IntegerType, T.ShortType, T.ByteType))


def tie_key(df: DataFrame, id_column: str) -> Column:
    """The tie-break key, a long: the id itself when it is integral, else its 64-bit xxhash."""
    if integral_id(df, id_column):
        return F.col(id_column).cast("long")
    return F.xxhash64(F.col(id_column))


def keyed_values(df: DataFrame, attrs: Sequence[Attribute], id_column: str,
                 rank_orders: Mapping[str, Sequence[str]]) -> KeyedValues:
    """The fragment's tie keys and attribute values as doubles (:class:`KeyedValues`).

    Categorical values become their rank (1 = first of ``rank_orders[name]``, which is public or
    noised with budget) through a broadcast join of a small table: the order is data, not a plan
    literal (it would otherwise show in explain output, the UI and event logs).
    """
    spark = df.sparkSession
    # An integral id is its own tie key; any other id travels beside its hash.
    carry_rid = not integral_id(df, id_column)
    cols = [tie_key(df, id_column).alias("key")] + ([F.col(id_column).alias("rid")] if carry_rid else [])
    frame = df
    for j, a in enumerate(attrs):
        if a.categorical:
            ranks = spark.createDataFrame([(cat, float(r)) for cat, r in ranks_of(rank_orders[a.name]).items()],
                                          f"`__c{j}` string, `x{j}` double")
            frame = frame.join(F.broadcast(ranks), F.col(a.name) == F.col(f"__c{j}"), "inner")
            cols.append(F.col(f"x{j}"))
        else:
            cols.append(F.col(a.name).cast("double").alias(f"x{j}"))
    frame = frame.select(*cols)
    rid_type = frame.schema["rid"].dataType if carry_rid else T.LongType()
    return KeyedValues(frame, len(attrs), carry_rid, rid_type)


def labelled_values(df: DataFrame, attrs: Sequence[Attribute], id_column: str) -> KeyedValues:
    """The fragment's tie keys and attribute values, categorical attributes left as their labels (:class:`KeyedValues`).

    As :func:`keyed_values`, except that a categorical ``x{j}`` is the string label, not its rank:
    the small-fragment plan (:func:`fragrelease.jobs.idpir.cluster_noise.draw_small_fragment`) maps
    labels to ranks inside its Python task (:func:`fragrelease.idpir.category_order.ranks_of`), so
    the order needs no broadcast join and appears as no literal in the plan. A projection: no job.
    """
    carry_rid = not integral_id(df, id_column)
    cols = [tie_key(df, id_column).alias("key")] + ([F.col(id_column).alias("rid")] if carry_rid else [])
    cols += [(F.col(a.name).cast("string") if a.categorical else F.col(a.name).cast("double")).alias(f"x{j}")
             for j, a in enumerate(attrs)]
    frame = df.select(*cols)
    rid_type = frame.schema["rid"].dataType if carry_rid else T.LongType()
    return KeyedValues(frame, len(attrs), carry_rid, rid_type)


def splitters(keyed: KeyedValues, n: int, buckets: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per attribute, sorted composite splitters ``(x, key)`` cutting ``(x, key)`` order into ``buckets`` ranges.

    Estimated from a Bernoulli sample (about 2,000 rows per bucket, :func:`fragrelease.udfs.keys.bernoulli_sample`) with ``percentile_approx``; they
    only balance the work between tasks, the output does not depend on them. A value that fills
    several quantiles (heavy ties, e.g. a categorical rank) is cut by quantiles of the tie key, so
    its rows spread over several buckets too. Splitters stay in driver memory (at most
    ``buckets`` values per attribute) and are never logged or written.
    """
    if buckets <= 1:
        return [(np.empty(0), np.empty(0, np.int64)) for _ in range(keyed.n_attrs)]
    fraction = min(1.0, _SAMPLE_PER_BUCKET * buckets / n)
    n_attrs = keyed.n_attrs
    sample = bernoulli_sample(keyed.frame, fraction)  # work balancing only; the release does not depend on it
    qs = [i / buckets for i in range(1, buckets)]
    row = sample.agg(
        *[F.percentile_approx(f"x{j}", qs, 10_000).alias(f"q{j}") for j in range(n_attrs)],
        F.percentile_approx("key", _KEY_SAMPLE_FRACTIONS, 10_000).alias("kq"),
    ).collect()[0]
    key_q = np.asarray(row["kq"] or [], dtype=np.int64)
    out: list[tuple[np.ndarray, np.ndarray]] = []
    for j in range(n_attrs):
        values = np.asarray(row[f"q{j}"] or [], dtype=float)
        xs: list[float] = []
        ks: list[int] = []
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


#: Up to this many splitters, :func:`bucket_of` counts them with one vectorized comparison each
#: (about 10x faster than ``np.searchsorted`` of unsorted float64 keys into a short array:
#: docs/benchmarks.md, "Issue 41, session 3"); above, a binary search.
_COMPARE_SPLITTERS = 48


def _below(sx: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``np.searchsorted(sx, x, side="left")`` (int64): the number of splitters strictly below each x; NaN last."""
    if sx.size > _COMPARE_SPLITTERS or x.dtype != np.float64 or sx.dtype != np.float64:
        return np.searchsorted(sx, x, side="left").astype(np.int64, copy=False)
    count = np.zeros(x.shape[0], dtype=np.uint8)  # at most _COMPARE_SPLITTERS < 256
    for s in sx.tolist():
        count += (x > s).view(np.uint8)
    lo = count.astype(np.int64)
    nan = np.isnan(x)
    if nan.any():  # numpy sorts NaN after every number (the splitters are never NaN)
        lo[nan] = sx.size
    return lo


def bucket_of(x: np.ndarray, key: np.ndarray, sx: np.ndarray, sk: np.ndarray) -> np.ndarray:
    """Number of splitters strictly below each ``(x, key)`` in lexicographic order.

    Shapes: ``x``, ``key`` (m,); ``sx``, ``sk`` the sorted splitters (s,) of :func:`splitters`.
    Returns (m,) int64, the same as two ``np.searchsorted`` calls resolving ties of ``x`` with a
    splitter by ``key``.
    """
    if sx.size == 0:
        return np.zeros(x.shape[0], dtype=np.int64)
    bucket = _below(sx, x)
    # x equal to a splitter: the rows whose tie must be cut by the key
    tied = np.flatnonzero(sx[np.minimum(bucket, sx.size - 1)] == x)
    if tied.size:
        hi = np.searchsorted(sx, x[tied], side="right")
        lo = bucket[tied]
        for start in np.unique(lo):
            mine = lo == start
            rows = tied[mine]
            stop = int(hi[mine][0])
            bucket[rows] = start + np.searchsorted(sk[start:stop], key[rows], side="left")
    return bucket


def _run_schema(keyed: KeyedValues) -> T.StructType:
    return T.StructType([
        T.StructField("attr", T.IntegerType()), T.StructField("bucket", T.IntegerType()),
        T.StructField("x", T.BinaryType()), T.StructField("key", T.BinaryType()),  # packed <f8 / <i8
        *([T.StructField("rid", T.ArrayType(keyed.rid_type))] if keyed.carry_rid else []),
    ])


def cut_into_runs(keyed: KeyedValues, cuts: Sequence[tuple[np.ndarray, np.ndarray]], buckets: int,
                  run_rows: int) -> DataFrame:
    """Map-only pass: every chunk of about ``run_rows`` input rows becomes one packed row per (attribute, bucket).

    Out: ``(attr, bucket, x, key[, rid])`` (not stored; the caller stores or consumes it). ``cuts``
    are the splitters of :func:`splitters` (empty: one bucket per attribute). The rows reach the
    Python worker as Arrow record batches (``mapInArrow``): the columns become numpy arrays without
    a pandas frame per batch (measured: docs/benchmarks.md, "Issue 41, session 3").
    """
    l, carry_rid = keyed.n_attrs, keyed.carry_rid
    bucket_dtype = np.int16 if buckets < 2**15 else np.int32
    schema = _run_schema(keyed)

    def flush(chunk: pa.Table) -> pa.RecordBatch:
        chunk = chunk.combine_chunks()  # one buffer per column (measured: faster than per-chunk conversion)
        key = as_numpy(chunk.column("key"), np.int64)
        rid = chunk.column("rid").to_numpy() if carry_rid else None
        attr: list[int] = []
        bucket: list[int] = []
        xs: list[bytes] = []
        keys: list[bytes] = []
        rids: list[object] = []
        for j in range(l):
            x = as_numpy(chunk.column(f"x{j}"), np.float64)
            b = bucket_of(x, key, *cuts[j]).astype(bucket_dtype)
            order = np.argsort(b, kind="stable")  # radix sort for 16-bit bucket numbers
            bounds = np.flatnonzero(np.diff(b[order])) + 1
            for part in np.split(order, bounds):
                if part.size:
                    attr.append(j)
                    bucket.append(int(b[part[0]]))
                    xs.append(pack(x[part], F8))
                    keys.append(pack(key[part], I8))
                    if rid is not None:
                        rids.append(rid[part])
        columns = [pa.array(attr, pa.int32()), pa.array(bucket, pa.int32()),
                   pa.array(xs, pa.binary()), pa.array(keys, pa.binary())]
        if carry_rid:
            columns.append(pa.array(rids, type=to_arrow_type(schema["rid"].dataType)))
        return pa.RecordBatch.from_arrays(columns, names=schema.names)

    def runs_of(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for chunk in coalesced(batches, run_rows, pa.Table.from_batches):
            yield flush(chunk)

    return keyed.frame.mapInArrow(runs_of, schema)


def as_numpy(column: pa.ChunkedArray, dtype: type) -> np.ndarray:
    """One Arrow column (of a table whose chunks are combined) as a numpy array of ``dtype``, as pandas
    converts it (a null double is NaN); one chunk converts without a copy."""
    if column.num_chunks == 1:
        return np.asarray(column.chunk(0).to_numpy(zero_copy_only=False), dtype=dtype)
    return np.asarray(column.to_numpy(), dtype=dtype)


def _frames(batches: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(batches, ignore_index=True)


def coalesced(batches: Iterator[Any], rows: int, join: Callable[[list[Any]], Any] = _frames) -> Iterator[Any]:
    """Batches gathered into chunks of at least ``rows`` rows (the last one smaller), same columns.

    ``batches``: pandas frames (``mapInPandas``; joined by ``pd.concat``) or, with ``join`` =
    ``pa.Table.from_batches``, Arrow record batches (``mapInArrow``)."""
    pending: list[Any] = []
    size = 0
    for batch in batches:
        pending.append(batch)
        size += len(batch)
        if size >= rows:
            yield join(pending)
            pending, size = [], 0
    if pending:
        yield join(pending)


def bucket_first_ranks(runs: DataFrame, names: Sequence[str],
                       n: int) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    """``(counts, first_rank)`` per ``(attr, bucket)``: its number of values and its first global rank.

    One aggregation of the stored runs (a table of attributes × buckets numbers reaches the driver;
    they depend only on n and the public splitters' balance and are never logged or written).

    Raises SchemaMismatchError when an attribute's values do not add up to n (the fragment changed
    while it was read).
    """
    counts = {(int(r["attr"]), int(r["bucket"])): int(r["m"])
              for r in runs.groupBy("attr", "bucket").agg((F.sum(F.length("x")) / 8).cast("long").alias("m")).collect()}
    first_rank: dict[tuple[int, int], int] = {}
    for j, name in enumerate(names):
        running = 0
        for b in sorted(bb for (jj, bb) in counts if jj == j):
            first_rank[(j, b)] = running
            running += counts[(j, b)]
        if running != n:
            raise SchemaMismatchError(f"attribute {name!r} has {running} values, expected {n} rows")
    return counts, first_rank


def _ranked_schema(keyed: KeyedValues) -> T.StructType:
    return T.StructType([
        T.StructField("attr", T.IntegerType()), T.StructField("bucket", T.IntegerType()),
        T.StructField("group", T.IntegerType()),  # -1: the bucket's statistics row
        T.StructField("rid", T.ArrayType(keyed.rid_type) if keyed.carry_rid else T.BinaryType()),
        T.StructField("cl", T.BinaryType()),  # packed CL: cluster - the bucket's first cluster
        T.StructField("stats", T.BinaryType()),  # packed STATS records, one per cluster of the bucket
    ])


def _rank_bucket_fn(first_rank: Mapping[tuple[int, int], int], stage: StageSpec, carry_rid: bool,
                    groups: int) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def rank_bucket(pdf: pd.DataFrame) -> pd.DataFrame:
        j, b = int(pdf["attr"].iloc[0]), int(pdf["bucket"].iloc[0])
        x = unpack(pdf["x"], F8)
        key = unpack(pdf["key"], I8)
        order = ir_order(x, key)  # exact (value, key) order from packed 64-bit sorts; as np.lexsort((key, x))
        x, key = x[order], key[order]
        start = first_rank[(j, b)]
        cluster = stage.cluster_of(start + np.arange(x.size, dtype=np.int64))
        cuts = np.flatnonzero(np.diff(cluster)) + 1
        firsts = np.concatenate(([0], cuts))
        lasts = np.concatenate((cuts - 1, [x.size - 1]))
        stats = pack_stats(cluster[firsts], np.add.reduceat(x, firsts), lasts - firsts + 1, x[firsts], x[lasts])
        rid = np.concatenate(pdf["rid"].to_list())[order] if carry_rid else key
        # the ids leave cut by assembly group, each with its cluster (relative to the bucket's first)
        rows = group_rows(j, key, rid, cluster - cluster[0], groups, pack_rid=not carry_rid, dtype=CL)
        out = pd.DataFrame(rows + [(-1, j, None, None)], columns=["group", "attr", "rid", "cl"])
        return out.assign(bucket=b, stats=pd.Series([None] * len(rows) + [stats], dtype=object))

    return rank_bucket


def sort_buckets(runs: DataFrame, keyed: KeyedValues, first_rank: Mapping[tuple[int, int], int],
                 stage: StageSpec, *, groups: int) -> DataFrame:
    """Sort every bucket in one task and store the result.

    In: the stored runs (:func:`cut_into_runs`) and each bucket's first global rank. Out (stored,
    serialized): ``(attr, bucket, group, rid, cl, stats)``. Per bucket, one row with ``group`` = -1
    and, per cluster (the cut :meth:`fragrelease.idpir.stage.StageSpec.cluster_of`,
    ``min(rank // k, c - 1)`` with the ``stage``'s k used and c) it touches, the partial sum, size,
    minimum and maximum (``stats``, :func:`pack_stats`); and per assembly group g in [0, ``groups``)
    one row with the bucket's ids of that group (:func:`assembly_bucket`) and each one's cluster
    relative to the bucket's first cluster (``cl``, packed :data:`CL`): the rows of
    :class:`fragrelease.jobs.idpir.assembly.RoutedIds`, so no later pass reads the values or the
    ranks again. A few buckets per task (:data:`BUCKETS_PER_TASK`).
    """
    tasks = max(1, -(-len(first_rank) // BUCKETS_PER_TASK))
    return (runs.repartition(tasks, "attr", "bucket").groupBy("attr", "bucket")
            .applyInPandas(_rank_bucket_fn(first_rank, stage, keyed.carry_rid, groups), _ranked_schema(keyed))
            .localCheckpoint(eager=True, storageLevel=STORED))
