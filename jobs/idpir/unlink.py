"""Unlinking on Spark: every column in its own uniformly random order, lined up by position (docs/specification.md §2).

``linkage: unlinked`` releases a table that is a function of its columns' multisets alone: no row
links one record's values across attributes. This module builds such a table with two shuffles of
packed arrays, without sorting rows and without a join per column:

1. **Scatter** (map only): every value gets a 63-bit key from the OS CSPRNG
   (:func:`fragrelease.udfs.keys.random_keys`, drawn in the task); its key bucket is the key's top bits, so
   the buckets are balanced without a sample. Each input chunk leaves as one packed row per
   (column, bucket). Stored at once: the keys are drawn once, whatever reads them later.
2. **Count**: one aggregation gives each (column, bucket)'s number of values (a table of columns ×
   buckets numbers on the driver; they depend on n and the keys only). A bucket's first position is
   the number of its column's values in lower buckets.
3. **Place**: one task per (column, bucket) sorts its keys; the value of the i-th smallest key gets
   position ``first + i``; the positions are cut at the output blocks' boundaries.
4. **Line up**: one task per output block (about :data:`BLOCK_VALUES` positions) concatenates each
   column's pieces in position order; output row p holds every column's value at position p.

Each column's positions are the ranks of its own independent uniform keys: a uniformly random
permutation, independent of every other column's (two equal 63-bit keys, probability below
n² / 2⁶⁴, keep their arrival order). The output rows come in the first column's random order.

Entry points: :func:`unlink_released` (an owner's released values, before any line-up by id:
the ids never travel) and :func:`unlink_frames` / :func:`unlink_columns` (tables of rows, the
aggregator's union or its vertical fragments).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fragrelease.errors import InvalidParameterError, SchemaMismatchError
from fragrelease.schemas.base import Attribute
from fragrelease.udfs.keys import random_keys

from ..partitioning import spread
from .bucket_sort import F8, I8, STORED, coalesced, pack, unpack

#: Values per key bucket and positions per output block (about 4 MB of packed values each).
BLOCK_VALUES = 500_000
#: Input rows gathered before a chunk is scattered (fewer, larger packed rows).
_SCATTER_ROWS = 262_144
#: Key buckets sorted by one task.
_BUCKETS_PER_TASK = 4

_PIECES = T.StructType([
    T.StructField("col", T.IntegerType()), T.StructField("bucket", T.IntegerType()),
    T.StructField("key", T.BinaryType()),  # packed <i8 keys
    T.StructField("num", T.BinaryType()),  # packed <f8 / <i8 values (numeric columns)
    T.StructField("txt", T.ArrayType(T.StringType())),  # values of string columns
])
_PLACED = T.StructType([
    T.StructField("block", T.IntegerType()), T.StructField("col", T.IntegerType()),
    T.StructField("pos", T.LongType()),  # position of the piece's first value
    T.StructField("num", T.BinaryType()), T.StructField("txt", T.ArrayType(T.StringType())),
])


@dataclass(frozen=True)
class UnlinkColumn:
    """One column to unlink: its output ``name``, how its values travel (``kind``) and its output type.

    ``kind``: ``"f8"`` (float/double, packed ``<f8``), ``"i8"`` (integral, packed ``<i8``), ``"str"``
    (string) or ``"rank"`` (a categorical attribute's rank 1 .. m as ``<f8``, output as
    ``labels[rank - 1]``; the labels are public or noised with budget).
    """

    name: str
    kind: str
    dtype: T.DataType
    labels: tuple[str, ...] = ()

    @property
    def wire_type(self) -> T.DataType:
        return {"f8": T.DoubleType(), "i8": T.LongType()}.get(self.kind, T.StringType())


def column_of(name: str, dtype: T.DataType) -> UnlinkColumn:
    """The :class:`UnlinkColumn` of a table column of type ``dtype``.

    Raises InvalidParameterError for a type other than a number or a string.
    """
    if isinstance(dtype, (T.DoubleType, T.FloatType)):
        return UnlinkColumn(name, "f8", dtype)
    if isinstance(dtype, (T.LongType, T.IntegerType, T.ShortType, T.ByteType)):
        return UnlinkColumn(name, "i8", dtype)
    if isinstance(dtype, T.StringType):
        return UnlinkColumn(name, "str", dtype)
    raise InvalidParameterError(f"column {name!r} has type {dtype.simpleString()}; only numbers and strings are unlinked")


def layout(n: int) -> tuple[int, np.ndarray]:
    """``(bits, boundaries)`` for n values per column: 2**bits key buckets, and the output blocks'
    first positions ``boundaries[t] = t * n // blocks`` (``boundaries[-1] = n``). Public: n alone."""
    blocks = max(1, math.ceil(n / BLOCK_VALUES))
    bits = (blocks - 1).bit_length()
    return bits, np.asarray([t * n // blocks for t in range(blocks + 1)], dtype=np.int64)


def scatter(col: int, values: np.ndarray, bits: int) -> list[tuple[int, int, bytes, Optional[bytes], Optional[list]]]:
    """One column's values with fresh CSPRNG keys, cut by key bucket: ``(col, bucket, key, num, txt)`` rows.

    ``values``: a numeric array (packed as its own dtype, ``<f8`` or ``<i8``) or an object array of
    strings (``txt``). The bucket is the key's top ``bits`` bits.
    """
    keys = random_keys(values.size)
    bucket = (keys >> np.int64(63 - bits)) if bits else np.zeros(values.size, dtype=np.int64)
    order = np.argsort(bucket.astype(np.uint16) if bits <= 16 else bucket, kind="stable")
    bounds = np.flatnonzero(np.diff(bucket[order])) + 1
    text = values.dtype == object
    dtype = I8 if values.dtype.kind in "iu" else F8
    return [(col, int(bucket[part[0]]), pack(keys[part], I8), None if text else pack(values[part], dtype),
             values[part].tolist() if text else None)
            for part in np.split(order, bounds) if part.size]


def place(key: np.ndarray, values: np.ndarray, first: int, boundaries: np.ndarray
          ) -> list[tuple[int, int, np.ndarray]]:
    """One (column, bucket): its values in key order, cut at the output blocks: ``(block, pos, values)``.

    ``first`` is the bucket's first position; the value with the i-th smallest key goes to position
    ``first + i``, in block t when ``boundaries[t] <= first + i < boundaries[t + 1]``.
    """
    ordered = values[np.argsort(key, kind="stable")]
    out = []
    pos = first
    while pos < first + ordered.size:
        t = int(np.searchsorted(boundaries, pos, side="right")) - 1
        stop = min(int(boundaries[t + 1]), first + ordered.size)
        out.append((t, pos, ordered[pos - first:stop - first]))
        pos = stop
    return out


def first_positions(counts: Mapping[tuple[int, int], int], names: Sequence[str],
                    n: Optional[int]) -> tuple[int, dict[tuple[int, int], int]]:
    """``(n, first)``: every column's length and each (column, bucket)'s first position.

    Raises SchemaMismatchError when the columns differ in length, or from ``n`` when it is given.
    """
    first: dict[tuple[int, int], int] = {}
    totals = []
    for j in range(len(names)):
        running = 0
        for b in sorted(bb for (jj, bb) in counts if jj == j):
            first[(j, b)] = running
            running += counts[(j, b)]
        totals.append(running)
    expected = totals[0] if n is None else n
    for name, total in zip(names, totals):
        if total != expected:
            raise SchemaMismatchError(f"column {name!r} has {total} values, expected {expected}: the columns to "
                                      "unlink differ in length (the fragment changed while it was read)")
    return expected, first


def _decode(col: UnlinkColumn, values: np.ndarray) -> Any:
    if col.kind == "rank":
        return np.asarray(col.labels, dtype=object)[values.astype(np.int64) - 1]
    return values


def _values(part: Any, kind: str) -> np.ndarray:
    if kind == "str":
        return np.asarray(part.txt, dtype=object)
    return np.frombuffer(part.num, dtype=I8 if kind == "i8" else F8)


def _place_fn(cols: Sequence[UnlinkColumn], first: Mapping[tuple[int, int], int],
              boundaries: np.ndarray) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def place_bucket(pdf: pd.DataFrame) -> pd.DataFrame:
        j, b = int(pdf["col"].iloc[0]), int(pdf["bucket"].iloc[0])
        kind = cols[j].kind
        key = unpack(pdf["key"], I8)
        parts = [_values(p, kind) for p in pdf.itertuples(index=False)]
        values = np.concatenate(parts) if parts else np.empty(0)
        rows = [(t, j, pos, None if kind == "str" else pack(v, I8 if kind == "i8" else F8),
                 v.tolist() if kind == "str" else None)
                for t, pos, v in place(key, values, first[(j, b)], boundaries)]
        return pd.DataFrame(rows, columns=["block", "col", "pos", "num", "txt"])

    return place_bucket


def _line_up_fn(cols: Sequence[UnlinkColumn], boundaries: np.ndarray) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def line_up_block(pdf: pd.DataFrame) -> pd.DataFrame:
        t = int(pdf["block"].iloc[0])
        size = int(boundaries[t + 1] - boundaries[t])
        out: dict[str, Any] = {}
        for j, col in enumerate(cols):
            part = pdf[pdf["col"] == j].sort_values("pos")
            pieces = [_values(p, col.kind) for p in part.itertuples(index=False)]
            values = np.concatenate(pieces) if pieces else np.empty(0)
            if values.size != size:
                raise SchemaMismatchError(f"column {col.name!r} has {values.size} values at block {t}, expected {size}")
            out[f"v{j}"] = _decode(col, values)
        return pd.DataFrame(out)

    return line_up_block


def unlink_pieces(scattered: DataFrame, cols: Sequence[UnlinkColumn], n: int) -> DataFrame:
    """Steps 2-4 on scattered pieces (``(col, bucket, key, num, txt)``, :func:`scatter`): the unlinked table.

    ``scattered`` is stored here before anything reads it (its keys are drawn once). ``n``: the
    number of values of every column (public; every column's count is checked against it; the
    buckets and blocks are :func:`layout` of it, as for the scatter). Out: one column per ``cols``
    entry, named and typed as it says.
    """
    stored = scattered.localCheckpoint(eager=True, storageLevel=STORED)
    # counts per (column, bucket): functions of n and the random keys only (no value); driver memory only
    counts = {(int(r["col"]), int(r["bucket"])): int(r["m"]) for r in stored.groupBy("col", "bucket").agg(
        (F.sum(F.length("key")) / 8).cast("long").alias("m")).collect()}
    n, first = first_positions(counts, [c.name for c in cols], n)
    bits, boundaries = layout(n)
    blocks = boundaries.size - 1
    if bits:
        stored = stored.repartition(max(1, -(-len(counts) // _BUCKETS_PER_TASK)), "col", "bucket")
    placed = stored.groupBy("col", "bucket").applyInPandas(_place_fn(cols, first, boundaries), _PLACED)
    wide_schema = T.StructType([T.StructField(f"v{j}", c.wire_type) for j, c in enumerate(cols)])
    by_block, slot = spread(placed, "block", blocks) if blocks > 1 else (placed, None)
    keys = [slot, "block"] if slot is not None else ["block"]
    wide = by_block.groupBy(*keys).applyInPandas(_line_up_fn(cols, boundaries), wide_schema)
    return wide.select(*[F.col(f"v{j}").cast(c.dtype).alias(c.name) for j, c in enumerate(cols)])


def unlink_frames(frames: Sequence[tuple[DataFrame, Sequence[str]]], n: Optional[int] = None) -> DataFrame:
    """Every listed column of every frame in its own uniformly random order, lined up by position.

    Shapes: each ``(frame, columns)`` names columns of that frame (numbers or strings, no nulls);
    every frame has ``n`` rows (counted from the first frame when not given); the names are distinct. Out: one row per position, the
    columns in the order listed, each with its input type and the same multiset of values.

    Raises
    ------
    InvalidParameterError
        A name listed twice, or a column neither a number nor a string.
    SchemaMismatchError
        The frames differ in length, or a numeric column holds a null.
    """
    names = [c for _, columns in frames for c in columns]
    if len(set(names)) != len(names):
        raise InvalidParameterError(f"columns to unlink must have distinct names, not {names}")
    if not frames or not names:
        raise InvalidParameterError("unlinking needs at least one column")
    if n is None:
        n = frames[0][0].count()  # sizes the buckets; every column is checked against it after the scatter
    cols: list[UnlinkColumn] = []
    scattered = None
    bits, _ = layout(n)
    for frame, columns in frames:
        mine = [(len(cols) + i, column_of(c, frame.schema[c].dataType)) for i, c in enumerate(columns)]
        cols += [c for _, c in mine]
        part = frame.select(*columns).mapInPandas(_scatter_rows_fn(mine, bits), _PIECES)
        scattered = part if scattered is None else scattered.unionByName(part)
    assert scattered is not None
    return unlink_pieces(scattered, cols, n)


def unlink_columns(df: DataFrame, columns: Sequence[str], n: Optional[int] = None) -> DataFrame:
    """``columns`` of ``df``, each in its own uniformly random order (``linkage: unlinked``; docs/specification.md §2).

    Shapes: in, any DataFrame holding ``columns`` (numbers or strings, no nulls in numeric ones);
    out, exactly those columns with the same multiset of values per column and the same types, each
    column in its own uniformly random order (keys from the OS CSPRNG), lined up by position. After
    this the table is a function of the columns' multisets alone. ``n``: the row count when known
    (public), else counted first.
    How: the module docstring (:mod:`fragrelease.jobs.idpir.unlink`).
    """
    return unlink_frames([(df, list(columns))], n)


def _scatter_rows_fn(cols: Sequence[tuple[int, UnlinkColumn]], bits: int
                     ) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    def scatter_rows(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for chunk in coalesced(batches, _SCATTER_ROWS):
            rows: list[tuple] = []
            for j, col in cols:
                s = chunk[col.name]
                if col.kind != "str" and s.isna().any():
                    raise SchemaMismatchError(f"column {col.name!r} holds a null value; a released column has none")
                values = s.to_numpy(object) if col.kind == "str" else s.to_numpy(np.int64 if col.kind == "i8" else float)
                rows += scatter(j, values, bits)
            yield pd.DataFrame(rows, columns=["col", "bucket", "key", "num", "txt"])

    return scatter_rows


def unlink_released(values: DataFrame, attrs: Sequence[Attribute], rank_orders: Mapping[str, Sequence[str]],
                    n: int) -> DataFrame:
    """An owner's released values as an unlinked table, without lining them up by id first.

    In: ``(group, attr, rid, value)`` rows (:func:`fragrelease.jobs.idpir.assembly.values_schema`;
    ``value`` packed ``<f8``, categorical values as their rank in ``rank_orders``, public or noised
    with budget); the ids are dropped before anything moves. ``n``: the validated record count
    (public). Out: ``(*attribute names)`` (numeric double, categorical string), each column in its
    own uniformly random order (the module docstring). Raises SchemaMismatchError when an attribute
    does not have n values.
    """
    cols = [UnlinkColumn(a.name, "rank", T.StringType(), tuple(rank_orders[a.name])) if a.categorical
            else UnlinkColumn(a.name, "f8", T.DoubleType()) for a in attrs]
    bits, _ = layout(n)

    def scatter_values(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for pdf in batches:
            rows: list[tuple] = []
            rec: Any
            for rec in pdf.itertuples(index=False):
                rows += scatter(int(rec.attr), np.frombuffer(rec.value, dtype=F8), bits)
            yield pd.DataFrame(rows, columns=["col", "bucket", "key", "num", "txt"])

    return unlink_pieces(values.select("attr", "value").mapInPandas(scatter_values, _PIECES), cols, n)
