"""Assembly of the released values into wide rows, one per id (docs/specification.md §1-2, the owner's output).

Shapes: every attribute's released values arrive as ``(group, attr, rid, value)`` rows
(:func:`values_schema`; ``value`` packed ``<f8``, ``rid`` packed ``<i8`` for integral ids, else an
array of the id's type), or as each id's cluster and the clusters' values apart (:class:`RoutedIds`),
cut by assembly group, a well-mixed hash of the tie key
(:func:`fragrelease.jobs.idpir.bucket_sort.assembly_bucket`); one task per group puts each attribute's values in id order
and lines them up (:func:`line_up`). Out: ``(id_column, *attribute names)``. A group holds about
``n / groups`` ids (about 500,000 for the default), whatever the fragment's size.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Optional, Sequence

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fragrelease.errors import IdentifierError
from fragrelease.idpir.microaggregation import ir_order
from fragrelease.schemas.base import Attribute

from ..partitioning import spread
from .bucket_sort import CL, F8, I8, pack, unpack


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


def routed_schema(rid_type: T.DataType, carry_rid: bool) -> T.StructType:
    """``(group, attr, bucket, rid, cl)``: one attribute's ids of one assembly group and (attribute, bucket),
    each with its cluster number ``cl`` (packed :data:`CL`) relative to the first cluster of the
    bucket's centroid slice. ``rid`` as in :func:`values_schema`."""
    return T.StructType([
        T.StructField("group", T.IntegerType()), T.StructField("attr", T.IntegerType()),
        T.StructField("bucket", T.IntegerType()),
        T.StructField("rid", T.ArrayType(rid_type) if carry_rid else T.BinaryType()),
        T.StructField("cl", T.BinaryType()),
    ])


def gathered(centroids: bytes, cl: bytes) -> np.ndarray:
    """Each id's released value: ``centroids`` (packed ``<f8``, a bucket's slice) indexed by its ids'
    cluster numbers ``cl`` (packed :data:`fragrelease.jobs.idpir.bucket_sort.CL`), in the ids' order."""
    return np.frombuffer(centroids, dtype=F8)[np.frombuffer(cl, dtype=CL)]


#: The line-up places an attribute's ids by a table of positions (one ``<i4`` per id in the group's
#: range) when that range spans at most this many times the group's ids (dense integral ids such as
#: row numbers: about 20 times at 10M rows in 20 groups), and by a sort of the ids otherwise.
_TABLE_SPAN = 32


class _Places:
    """Where each id goes among a group's sorted, distinct integral ids ``ids`` (m,): a direct-address
    table ``id - ids[0] → position`` built once per group, so the other attributes' ids are placed
    by a gather instead of a sort each."""

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = ids
        self.lo = int(ids[0])
        self.table = np.full(int(ids[-1]) - self.lo + 1, -1, dtype=np.int32)
        self.table[ids - self.lo] = np.arange(ids.size, dtype=np.int32)

    @staticmethod
    def usable(ids: np.ndarray) -> bool:
        """Integral, sorted ``ids`` whose range is short enough (:data:`_TABLE_SPAN`) and holds no id twice."""
        return (ids.dtype == np.int64 and 0 < ids.size < 2**31
                and int(ids[-1]) - int(ids[0]) < _TABLE_SPAN * ids.size
                and not bool((ids[1:] == ids[:-1]).any()))

    def of(self, rid: np.ndarray) -> np.ndarray | None:
        """Each of ``rid``'s position in ``ids`` (shape (m,)), or None unless ``rid`` holds exactly the ids of ``ids``."""
        if rid.size != self.ids.size or rid.dtype != np.int64:
            return None
        off = rid - self.lo
        if int(off.min()) < 0 or int(off.max()) >= self.table.size:
            return None
        where = self.table[off]
        if int(where.min()) < 0:
            return None
        seen = np.zeros(self.ids.size, dtype=bool)
        seen[where] = True
        return where if bool(seen.all()) else None


@dataclass(frozen=True)
class RoutedIds:
    """Released values not yet gathered: each id's cluster, and each cluster's released value apart.

    ``rows``: ``(group, attr, bucket, rid, cl)`` (:func:`routed_schema`); ``slices``: ``(attr, bucket,
    centroids)``, ``centroids`` the released values (packed ``<f8``) of the clusters the bucket's ids
    fall in, in cluster order from the bucket's first cluster. The id with ``cl`` = i gets
    ``centroids[i]``: the values are gathered in the task that consumes them (:func:`line_up`), so
    they cross from Python to the JVM once, in the output rows. ``broadcast``: the slices are few
    enough to be shipped to the rows (else a shuffle join on ``(attr, bucket)``). ``together``: when
    set (a small fragment, :func:`fragrelease.jobs.idpir.cluster_noise.draw_small_fragment`), ``rows``
    already beside their slice, ``(group, attr, bucket, rid, cl, centroids)``, stored in one
    partition: :meth:`joined` and :func:`line_up` read it without a join.
    """

    rows: DataFrame
    slices: DataFrame
    broadcast: bool
    carry_rid: bool
    rid_type: T.DataType
    together: Optional[DataFrame] = None

    def joined(self) -> DataFrame:
        """``rows`` beside their slice: ``(attr, bucket, group, rid, cl, centroids)``."""
        if self.together is not None:  # stored beside each other already: no join
            return self.together.select("attr", "bucket", "group", "rid", "cl", "centroids")
        slices = F.broadcast(self.slices) if self.broadcast else self.slices
        return self.rows.join(slices, ["attr", "bucket"])

    def values(self) -> DataFrame:
        """The released values as ``(group, attr, rid, value)`` rows (:func:`values_schema`), gathered in one map."""
        def gather_rows(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            for pdf in batches:
                value = [pack(gathered(cs, cl), F8)
                         for cs, cl in zip(pdf["centroids"], pdf["cl"])]
                yield pd.DataFrame({"group": pdf["group"], "attr": pdf["attr"], "rid": pdf["rid"], "value": value})

        return self.joined().select("group", "attr", "rid", "cl", "centroids").mapInPandas(
            gather_rows, values_schema(self.rid_type, self.carry_rid))


def _assembler(attrs: Sequence[Attribute], *, carry_rid: bool, rank_orders: Mapping[str, Sequence[str]],
               gather: bool):
    """The function that lines up one assembly group's rows (a pandas frame) into wide rows ``(rid, v0 ..)``.

    ``gather``: the rows are :class:`RoutedIds` rows beside their slice (``cl``, ``centroids``), else
    ``(group, attr, rid, value)`` rows. Raises IdentifierError when two attributes disagree on the ids.
    """
    l = len(attrs)
    labels = {j: np.asarray(rank_orders[a.name], dtype=object) for j, a in enumerate(attrs) if a.categorical}

    def assemble(pdf: pd.DataFrame) -> pd.DataFrame:
        columns: dict[str, np.ndarray] = {}
        ids = None
        places: _Places | None = None
        j: Any
        for j, part in pdf.groupby("attr"):
            rid = np.concatenate(part["rid"].to_list()) if carry_rid else unpack(part["rid"], I8)
            if gather:  # each id's cluster value, from its bucket's slice (same row order as rid)
                value = np.concatenate([gathered(cs, cl)
                                        for cs, cl in zip(part["centroids"], part["cl"])])
            else:
                value = unpack(part["value"], F8)
            where = places.of(rid) if places is not None else None
            if where is not None:  # rid is a permutation of ids: scatter the values into id order
                placed = np.empty_like(value)
                placed[where] = value
                value = placed
            else:
                order = ir_order(rid)  # packed sort of integral ids; other id types: stable argsort
                if ids is None:
                    ids = rid[order]
                    places = _Places(ids) if not carry_rid and _Places.usable(ids) else None
                elif not np.array_equal(ids, rid[order]):
                    raise IdentifierError("protected attributes disagree on the set of ids; the fragment changed while it was read")
                value = value[order]
            columns[f"v{int(j)}"] = labels[int(j)][value.astype(np.int64) - 1] if int(j) in labels else value
        return pd.DataFrame({"rid": ids, **{f"v{j}": columns[f"v{j}"] for j in range(l)}})

    return assemble


def _wide_schema(attrs: Sequence[Attribute], rid_type: T.DataType) -> T.StructType:
    return T.StructType([T.StructField("rid", rid_type)]
                        + [T.StructField(f"v{j}", T.StringType() if a.categorical else T.DoubleType())
                           for j, a in enumerate(attrs)])


def _named(wide: DataFrame, attrs: Sequence[Attribute], id_type: T.DataType, id_column: str) -> DataFrame:
    out_cols = [F.col("rid").cast(id_type).alias(id_column)]
    out_cols += [F.col(f"v{j}").alias(a.name) for j, a in enumerate(attrs)]
    return wide.select(*out_cols)


def line_up(values: DataFrame | RoutedIds, attrs: Sequence[Attribute], *, groups: int, carry_rid: bool,
            rid_type: T.DataType, rank_orders: Mapping[str, Sequence[str]], id_type: T.DataType,
            id_column: str) -> DataFrame:
    """One task per assembly group puts each attribute's ``(rid, value)`` arrays in id order and lines them up.

    The first attribute's ids are sorted; when they are integral, distinct and dense (range at most
    :data:`_TABLE_SPAN` times their count) every other attribute whose ids are exactly the same set
    is placed through a table id → position (:class:`_Places`), otherwise sorted and compared.

    In: ``(group, attr, rid, value)`` (:func:`values_schema`), every attribute's values for every id
    of the group; or :class:`RoutedIds`, whose values are gathered in the same task (``centroids[cl]``)
    after the rows reach their group (a broadcast join of the slices, when they are few enough:
    no shuffle of values at all). Out: ``(id_column, *attribute names)``, one row per id; categorical
    ranks become their labels here, in the Python workers (post-processing of the noisy rank; no plan literal).
    A :class:`RoutedIds` whose rows are already beside their slices in one stored partition
    (``together``, a small fragment: :func:`fragrelease.jobs.idpir.cluster_noise.draw_small_fragment`)
    is lined up by one map over that partition: no shuffle, no join, the same function per group.

    Raises IdentifierError when two attributes disagree on the ids of a group.
    """
    out_schema = _wide_schema(attrs, rid_type)
    gather = isinstance(values, RoutedIds)
    assemble = _assembler(attrs, carry_rid=carry_rid, rank_orders=rank_orders, gather=gather)

    if isinstance(values, RoutedIds) and values.together is not None:
        def assemble_partition(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            frames = list(batches)
            if frames:  # the one partition holds every attribute's rows (one group)
                yield assemble(pd.concat(frames, ignore_index=True))

        one = values.together.select("group", "attr", "rid", "cl", "centroids").coalesce(1)
        return _named(one.mapInPandas(assemble_partition, out_schema), attrs, id_type, id_column)

    # one task per assembly group (about 500,000 ids), whatever the fragment's size: exactly, not by a
    # hash of the group number (which puts groups 0 and 1 in the same one of two partitions)
    if isinstance(values, RoutedIds):
        if values.broadcast:  # the rows move to their group once; the slices join them there (no second shuffle)
            by_group, slot = spread(values.rows, "group", groups)
            by_group = by_group.join(F.broadcast(values.slices), ["attr", "bucket"])
        else:
            by_group, slot = spread(values.joined(), "group", groups)
        by_group = by_group.select(slot, "group", "attr", "rid", "cl", "centroids")
    else:
        by_group, slot = spread(values, "group", groups)
    wide = by_group.groupBy(slot, "group").applyInPandas(assemble, out_schema)
    return _named(wide, attrs, id_type, id_column)
