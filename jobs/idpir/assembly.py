"""Assembly of the released values into wide rows, one per id (docs/specification.md §1-2, the owner's output).

Shapes: every attribute's released values arrive as ``(group, attr, rid, value)`` rows
(:func:`values_schema`; ``value`` packed ``<f8``, ``rid`` packed ``<i8`` for integral ids, else an
array of the id's type), cut by assembly group, a well-mixed hash of the tie key
(:func:`assembly_bucket`); one task per group sorts each attribute by id and lines them up
(:func:`line_up`). Out: ``(id_column, *attribute names)``. A group holds about
``n / groups`` ids (about 500,000 for the default), whatever the fragment's size.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fragrelease.errors import IdentifierError
from fragrelease.idpir.microaggregation import ir_order
from fragrelease.schemas.base import Attribute

from ..partitioning import spread
from .bucket_sort import F8, I8, pack, unpack


def assembly_bucket(key: np.ndarray, groups: int) -> np.ndarray:
    """A well-mixed bucket in [0, groups) per tie key (Fibonacci hashing), for reassembling rows."""
    mixed = (key.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)
    return (mixed % np.uint64(groups)).astype(np.int32)


def group_rows(attr: int, key: np.ndarray, rid: np.ndarray, value: np.ndarray, groups: int,
               pack_rid: bool) -> list[tuple[int, int, object, bytes]]:
    """One attribute's released values cut by assembly group: ``(group, attr, rid, value)`` tuples.

    ``value`` is packed (:func:`fragrelease.jobs.idpir.bucket_sort.pack`); ``rid`` too when ``pack_rid``
    (integral ids), else an array.
    """
    g = assembly_bucket(key, groups)
    # stable radix sort for 16-bit keys (numpy), about 3x faster than on int32; the same order
    order = np.argsort(g.astype(np.uint16) if groups <= 1 << 16 else g, kind="stable")
    bounds = np.flatnonzero(np.diff(g[order])) + 1
    return [(int(g[part[0]]), attr, pack(rid[part], I8) if pack_rid else rid[part], pack(value[part], F8))
            for part in np.split(order, bounds) if part.size]


def values_schema(rid_type: T.DataType, carry_rid: bool) -> T.StructType:
    """``(group, attr, rid, value)``: one attribute's released values for the ids of one assembly group.

    ``value`` is packed ``<f8`` bytes; ``rid`` is packed ``<i8`` bytes for integral ids, else an
    array of the id's type (``carry_rid``).
    """
    return T.StructType([
        T.StructField("group", T.IntegerType()), T.StructField("attr", T.IntegerType()),
        T.StructField("rid", T.ArrayType(rid_type) if carry_rid else T.BinaryType()),
        T.StructField("value", T.BinaryType()),
    ])


def line_up(values: DataFrame, attrs: Sequence[Attribute], *, groups: int, carry_rid: bool, rid_type: T.DataType,
            rank_orders: Mapping[str, Sequence[str]], id_type: T.DataType, id_column: str) -> DataFrame:
    """One task per assembly group sorts each attribute's ``(rid, value)`` arrays by id and lines them up.

    In: ``(group, attr, rid, value)`` (:func:`values_schema`), every attribute's values for every id
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
        columns: dict[str, np.ndarray] = {}
        ids = None
        j: Any
        for j, part in pdf.groupby("attr"):
            rid = np.concatenate(part["rid"].to_list()) if carry_rid else unpack(part["rid"], I8)
            value = unpack(part["value"], F8)
            order = ir_order(rid)  # packed sort of integral ids; other id types: stable argsort
            if ids is None:
                ids = rid[order]
            elif not np.array_equal(ids, rid[order]):
                raise IdentifierError("protected attributes disagree on the set of ids; the fragment changed while it was read")
            value = value[order]
            columns[f"v{int(j)}"] = labels[int(j)][value.astype(np.int64) - 1] if int(j) in labels else value
        return pd.DataFrame({"rid": ids, **{f"v{j}": columns[f"v{j}"] for j in range(l)}})

    # one task per assembly group (about 500,000 ids), whatever the fragment's size: exactly, not by a
    # hash of the group number (which puts groups 0 and 1 in the same one of two partitions)
    by_group, slot = spread(values, "group", groups)
    wide = by_group.groupBy(slot, "group").applyInPandas(assemble, out_schema)
    out_cols = [F.col("rid").cast(id_type).alias(id_column)]
    out_cols += [F.col(f"v{j}").alias(a.name) for j, a in enumerate(attrs)]
    return wide.select(*out_cols)
