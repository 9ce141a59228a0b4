"""Noise on Spark: per-attribute noisy centroids and their way back to the ids (docs/specification.md §1-2).

Two plans share the mechanism's arithmetic (:mod:`fragrelease.idpir.mechanisms`):

- **distributed** (after :func:`fragrelease.jobs.idpir.bucket_sort.sort_buckets`):
  :func:`noise_per_attribute` combines each attribute's partial cluster statistics in one task,
  computes the sensitivity and scale, draws one Laplace value per cluster and post-processes the
  vector (stored at once); :func:`route_centroids` pairs every bucket's ids (already cut by
  assembly group with their cluster numbers, :meth:`fragrelease.idpir.stage.StageSpec.cluster_of`,
  ``min(rank // k, c - 1)``) with the slice of released centroids of its cluster range.
- **small fragments** (records × attributes at most a constant: :data:`fragrelease.jobs.idpir.protect.SMALL_VALUES`):
  :func:`draw_small_fragment` runs the same :func:`fragrelease.idpir.mechanisms.draw_task` and
  :meth:`~fragrelease.idpir.stage.StageSpec.finish` for every attribute in one task over the
  fragment in one partition (no exchange), and stores each attribute's ids, clusters and released
  centroids together: one Spark job.
- **whole attributes** (fragments of at most 2,000,000 rows): :func:`draw_whole_attributes`
  runs :func:`fragrelease.idpir.mechanisms.draw_task` in one task per attribute and
  stores the raw noisy centroids beside the ids' clusters; :func:`whole_values` post-processes them.

Every function takes the owner's stage as objects (:mod:`fragrelease.idpir.stage`): the attributes'
:class:`~fragrelease.idpir.stage.AttributeTask` (attribute j is ``tasks[j]``) and one
:class:`~fragrelease.idpir.stage.StageSpec` (mechanism, k used, c, n, options).
Both give :class:`fragrelease.jobs.idpir.assembly.RoutedIds` (each id's cluster, the clusters' released
values apart): :func:`fragrelease.jobs.idpir.assembly.line_up` gathers the values in its own task, so
no pass of its own maps ids to values.
Local sensitivities, scales and raw draws never leave their task (never on the driver, never logged).
The draws themselves are written in :mod:`fragrelease.udfs.noise`; this module keeps the plans.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from fragrelease.errors import SchemaMismatchError
from fragrelease.idpir.category_order import ranks_of
from fragrelease.idpir.stage import AttributeTask, StageSpec
from fragrelease.rng.laplace import NoiseSource
from fragrelease.udfs.noise import draw_ranked_attribute, noisy_cluster_centroids

from ..partitioning import spread
from .assembly import RoutedIds
from .bucket_sort import CL, F8, I8, STATS, KeyedValues, as_numpy, group_rows, pack, unpack

#: From this many values per attribute each attribute's noise task runs alone (:func:`spread`); below it,
#: the grouping's own shuffle, which adaptive execution packs into few tasks: for small fragments one
#: Python task per attribute costs more than it parallelizes (measured in docs/benchmarks.md).
SPREAD_VALUES = 100_000


def _by_attribute(df: DataFrame, attrs: int, values: int) -> tuple[DataFrame, list[str]]:
    """``df`` ready for ``groupBy(*keys)``: one partition per attribute when ``values`` (per attribute) is large."""
    if values < SPREAD_VALUES:
        return df, ["attr"]
    spread_df, slot = spread(df, "attr", attrs)
    return spread_df, [slot, "attr"]


def _released_fn(tasks: Sequence[AttributeTask], stage: StageSpec,
                 noise: Optional[NoiseSource]) -> Callable[[pd.DataFrame], pd.DataFrame]:
    c = stage.c

    def draw(pdf: pd.DataFrame) -> pd.DataFrame:
        j = int(pdf["attr"].iloc[0])
        task = tasks[j]
        part = np.concatenate([np.frombuffer(s, dtype=STATS) for s in pdf.sort_values("bucket")["stats"]])
        firsts = np.concatenate(([0], np.flatnonzero(np.diff(part["cluster"])) + 1))
        if firsts.size != c:
            raise SchemaMismatchError(f"attribute {task.name!r} has {firsts.size} clusters, expected {c}")
        size = np.add.reduceat(part["size"], firsts)
        mins = np.minimum.reduceat(part["min"], firsts)
        maxs = np.maximum.reduceat(part["max"], firsts)
        centroid = np.add.reduceat(part["sum"], firsts) / size
        # local sensitivity (data-dependent): stays in this task, never logged
        delta = stage.mechanism.sensitivity_from_extremes(
            float(mins[0]), float(mins[-1]), float(maxs[-2]) if c > 1 else task.lo, float(maxs[-1]), k=stage.k,
            size_last=int(size[-1]), n_clusters=c, lo=task.lo, hi=task.hi)
        # the scale from the one Laplace noise object (OpenDP's map); the draw in udfs (noisy_centroids, as in numpy)
        lap = stage.noise(delta, task)
        raw = noisy_cluster_centroids(centroid, lap.scales(c), task.name, noise)
        value = stage.finish(raw, size.astype(float), task)
        return pd.DataFrame({"attr": [j], "value": [pack(value, F8)]})

    return draw


def noise_per_attribute(ranked: DataFrame, tasks: Sequence[AttributeTask], stage: StageSpec, *,
                        noise: Optional[NoiseSource]) -> DataFrame:
    """One task per attribute: its c released centroids, stored before anything reads them.

    In: ``tasks`` (attribute j is ``tasks[j]``) and the owner's ``stage`` (:mod:`fragrelease.idpir.stage`); ``ranked`` with ``(attr, bucket, group, stats)`` (:func:`fragrelease.jobs.idpir.bucket_sort.sort_buckets`; its ``group`` = -1 rows).
    The partials of a cluster cut by a bucket boundary are combined in bucket order; the sensitivity
    comes from four order statistics through the registry's
    :meth:`fragrelease.idpir.mechanisms.IRMechanism.sensitivity_from_extremes` and
    :meth:`~fragrelease.idpir.mechanisms.IRMechanism.scale`, as in the numpy reference; one draw
    per cluster (:func:`fragrelease.udfs.noise.noisy_cluster_centroids`, the secure sampler unless a
    test injects ``noise``), then :meth:`fragrelease.idpir.stage.StageSpec.finish` (the stage's options).
    Out (stored): ``(attr, value)``, ``value`` the c released centroids as packed ``<f8`` in
    cluster order. Memory per task: one attribute's c clusters, about 100 bytes each (plain iDP,
    k = 1: c = n).
    """
    stats = ranked.where(F.col("group") == -1).select("attr", "bucket", "stats")
    by_attr, keys = _by_attribute(stats, len(tasks), stage.c * stage.k)
    return (by_attr.groupBy(*keys)
            .applyInPandas(_released_fn(tasks, stage, noise), "attr int, value binary")
            .localCheckpoint(eager=True))  # materialize the noise once: nothing may re-run the draw


def route_centroids(released: DataFrame, ranked: DataFrame, first_rank: Mapping[tuple[int, int], int],
                    counts: Mapping[tuple[int, int], int], stage: StageSpec, *, carry_rid: bool, rid_type: T.DataType,
                    broadcast: bool) -> RoutedIds:
    """Every bucket's ids (cut by assembly group, with their clusters) and the slice of released centroids they fall in.

    In: ``released`` (:func:`noise_per_attribute`) and ``ranked`` (its ``group`` ≥ 0 rows,
    :func:`fragrelease.jobs.idpir.bucket_sort.sort_buckets`). Out:
    :class:`fragrelease.jobs.idpir.assembly.RoutedIds` with slices ``(attr, bucket, centroids)``,
    ``centroids`` packed ``<f8`` for clusters ``stage.cluster_of(first_rank) ..
    stage.cluster_of(first_rank + count - 1)`` of the bucket, so an id's ``cl`` indexes its value.
    The cluster ranges are attributes × buckets numbers (public: n, k and the bucket counts).
    ``broadcast``: ship the slices to the ids (when the centroids are few enough) rather than
    shuffling them together.
    """
    ranges: dict[int, list[tuple[int, int, int]]] = {}
    for (j, b), r0 in first_rank.items():
        ranges.setdefault(j, []).append((b, int(stage.cluster_of(r0)), int(stage.cluster_of(r0 + counts[(j, b)] - 1))))

    def slices(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for pdf in batches:
            rows = []
            rec: Any
            for rec in pdf.itertuples(index=False):
                for b, lo_c, hi_c in ranges.get(int(rec.attr), []):
                    rows.append((int(rec.attr), b, rec.value[8 * lo_c:8 * (hi_c + 1)]))
            yield pd.DataFrame(rows, columns=["attr", "bucket", "centroids"])

    routed = released.mapInPandas(slices, "attr int, bucket int, centroids binary")
    rows = ranked.where(F.col("group") >= 0).select("group", "attr", "bucket", "rid", "cl")
    return RoutedIds(rows, routed, broadcast, carry_rid, rid_type)


def _draw_one_fn(tasks: Sequence[AttributeTask], stage: StageSpec, *, noise: Optional[NoiseSource],
                 carry_rid: bool, groups: int) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def draw_one(pdf: pd.DataFrame) -> pd.DataFrame:
        j = int(pdf["attr"].iloc[0])
        x = unpack(pdf["x"], F8)
        key = unpack(pdf["key"], I8)
        task = tasks[j]
        if x.size != stage.n:
            raise SchemaMismatchError(f"attribute {task.name!r} has {x.size} values, expected {stage.n} rows")
        order, noisy, size = draw_ranked_attribute(x, key, task, stage, noise)
        # ids leave in rank order, cut by assembly group, each with its cluster (stage.cluster_of of its rank)
        rid = np.concatenate(pdf["rid"].to_list())[order] if carry_rid else key[order]
        cluster = stage.cluster_of(np.arange(stage.n, dtype=np.int64))
        rows = group_rows(j, key[order], rid, cluster, groups, pack_rid=not carry_rid, dtype=CL)
        out = pd.DataFrame(rows + [(-1, j, None, None)], columns=["group", "attr", "rid", "cl"])
        last = [None] * len(rows)  # the statistics row is the last one
        return out.assign(noisy=pd.Series(last + [pack(noisy, F8)], dtype=object),
                          size=pd.Series(last + [pack(size, I8)], dtype=object))

    return draw_one


def draw_whole_attributes(runs: DataFrame, keyed: KeyedValues, tasks: Sequence[AttributeTask], stage: StageSpec, *,
                          noise: Optional[NoiseSource], groups: int) -> DataFrame:
    """One task per attribute runs the numpy mechanism on all its n values; the raw draws are stored at once.

    In: ``runs`` = ``(attr, bucket, x, key[, rid])`` with one bucket per attribute
    (:func:`fragrelease.jobs.idpir.bucket_sort.cut_into_runs`). Each task concatenates its
    attribute's values and calls :func:`fragrelease.idpir.mechanisms.draw_task` (with ``tasks[j]`` and
    ``stage``, :mod:`fragrelease.idpir.stage`) through
    :func:`fragrelease.udfs.noise.draw_ranked_attribute` (the one
    definition of the mechanism, the same the numpy reference
    :func:`~fragrelease.idpir.mechanisms.protect_attribute` draws with: ranking with ties broken by the
    tie key, centroids, sensitivity, calibrated scale, one Laplace draw per cluster from the secure
    sampler). Out (stored): ``(group, attr, rid, cl, noisy, size)``: per attribute, one row with
    ``group`` = -1 and the raw noisy centroids and cluster sizes (packed ``<f8`` / ``<i8``), and per
    assembly group one row with its ids and each one's cluster (packed ``<i4``), the rows of
    :class:`fragrelease.jobs.idpir.assembly.RoutedIds`. Memory per task: the attribute's n values
    (about 80 bytes each at the peak of the sort).
    """
    schema = T.StructType([
        T.StructField("group", T.IntegerType()), T.StructField("attr", T.IntegerType()),
        T.StructField("rid", T.ArrayType(keyed.rid_type) if keyed.carry_rid else T.BinaryType()),
        T.StructField("cl", T.BinaryType()),  # packed <i4, the id's cluster
        T.StructField("noisy", T.BinaryType()), T.StructField("size", T.BinaryType()),  # <f8 / <i8, per cluster
    ])
    fn = _draw_one_fn(tasks, stage, noise=noise, carry_rid=keyed.carry_rid, groups=groups)
    # Materialize the raw noise once: nothing downstream may re-run draw_one.
    by_attr, keys = _by_attribute(runs, len(tasks), stage.n)  # large attributes: one task each
    return by_attr.groupBy(*keys).applyInPandas(fn, schema).localCheckpoint(eager=True)


def whole_values(drawn: DataFrame, keyed: KeyedValues, tasks: Sequence[AttributeTask], stage: StageSpec, *,
                 broadcast: bool) -> RoutedIds:
    """Post-processing of the stored raw draws (public sizes and domain only) beside each id's cluster.

    In: :func:`draw_whole_attributes`. Out: :class:`fragrelease.jobs.idpir.assembly.RoutedIds`,
    one slice per attribute (bucket 0: all its c released values, :meth:`fragrelease.idpir.stage.StageSpec.finish`);
    ``broadcast`` as in :func:`route_centroids`.
    """

    def finish(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for pdf in batches:
            rows = []
            rec: Any
            for rec in pdf.itertuples(index=False):
                released = stage.finish(np.frombuffer(rec.noisy, dtype=F8),
                                        np.frombuffer(rec.size, dtype=I8).astype(float), tasks[int(rec.attr)])
                rows.append((int(rec.attr), 0, pack(released, F8)))
            yield pd.DataFrame(rows, columns=["attr", "bucket", "centroids"])

    slices = drawn.where(F.col("group") == -1).select("attr", "noisy", "size").mapInPandas(
        finish, "attr int, bucket int, centroids binary")
    rows = drawn.where(F.col("group") >= 0).select("group", "attr", F.lit(0).alias("bucket"), "rid", "cl")
    return RoutedIds(rows, slices, broadcast, keyed.carry_rid, keyed.rid_type)


def _together_schema(keyed: KeyedValues, *, drawn: bool) -> T.StructType:
    """``drawn``: the stored rows, with the raw noisy centroids and cluster sizes; else the finished rows,
    with the released centroids."""
    values = ([T.StructField("noisy", T.BinaryType()),  # packed <f8, the attribute's c raw noisy centroids
               T.StructField("size", T.BinaryType())]  # packed <i8, its c cluster sizes
              if drawn else [T.StructField("centroids", T.BinaryType())])  # packed <f8, its c released values
    return T.StructType([
        T.StructField("group", T.IntegerType()), T.StructField("attr", T.IntegerType()),
        T.StructField("bucket", T.IntegerType()),
        T.StructField("rid", T.ArrayType(keyed.rid_type) if keyed.carry_rid else T.BinaryType()),
        T.StructField("cl", T.BinaryType()),  # packed <i4, the id's cluster
        *values,
    ])


def _draw_all_fn(keyed: KeyedValues, tasks: Sequence[AttributeTask], stage: StageSpec,
                 rank_orders: Mapping[str, Sequence[str]], noise: Optional[NoiseSource],
                 schema: T.StructType) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    carry_rid = keyed.carry_rid
    ranks = {j: ranks_of(rank_orders[t.name]) for j, t in enumerate(tasks) if t.categorical}
    # the input's Arrow schema, made on the driver (the task must not hold the DataFrame)
    in_schema = pa.schema([pa.field(f.name, to_arrow_type(f.dataType)) for f in keyed.frame.schema.fields])

    def values_of(table: pa.Table, j: int) -> np.ndarray:
        column = table.column(f"x{j}")
        if j not in ranks:
            return as_numpy(column, np.float64)
        # the rank order (public or noised with budget) applied here, in the task: no plan literal;
        # a label outside it is dropped, as the large plans' inner join drops it (then refused by count)
        mapped = pd.Series(column.to_pandas(), dtype=object).map(ranks[j]).to_numpy(dtype=float)
        return mapped[~np.isnan(mapped)]

    def draw_all(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        read = list(batches)
        # no rows reaching the task: every attribute is then refused by its count
        table = (pa.Table.from_batches(read) if read else in_schema.empty_table()).combine_chunks()
        key = as_numpy(table.column("key"), np.int64)
        rid_all = table.column("rid").to_numpy(zero_copy_only=False) if carry_rid else None
        group: list[int] = []
        attr: list[int] = []
        rids: list[Any] = []
        cls: list[bytes] = []
        noisies: list[bytes] = []
        sizes: list[bytes] = []
        for j, task in enumerate(tasks):
            x = values_of(table, j)
            if x.size != stage.n or key.size != stage.n:
                raise SchemaMismatchError(f"attribute {task.name!r} has {x.size} values, expected {stage.n} rows")
            # the one definition of the mechanism (ranking, centroids, sensitivity, scale, one draw per
            # cluster), then the stage's post-processing: the same calls as the whole-attribute plan
            order, noisy, size = draw_ranked_attribute(x, key, task, stage, noise)
            rid = rid_all[order] if rid_all is not None else key[order]
            cluster = stage.cluster_of(np.arange(stage.n, dtype=np.int64))
            for g, a, r, cl in group_rows(j, key[order], rid, cluster, 1, pack_rid=not carry_rid, dtype=CL):
                group.append(g)
                attr.append(a)
                rids.append(r)
                cls.append(cl)
                noisies.append(pack(noisy, F8))  # raw: post-processed only after it is stored
                sizes.append(pack(size, I8))
        yield pa.RecordBatch.from_arrays(
            [pa.array(group, pa.int32()), pa.array(attr, pa.int32()), pa.array([0] * len(attr), pa.int32()),
             pa.array(rids, type=to_arrow_type(schema["rid"].dataType)), pa.array(cls, pa.binary()),
             pa.array(noisies, pa.binary()), pa.array(sizes, pa.binary())], names=schema.names)

    return draw_all


def _finish_fn(tasks: Sequence[AttributeTask],
               stage: StageSpec) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Rows ``(.., noisy, size)`` to ``(.., centroids)``: :meth:`fragrelease.idpir.stage.StageSpec.finish` per row."""

    def finish(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            attrs = batch.column("attr").to_pylist()
            noisy, size = batch.column("noisy").to_pylist(), batch.column("size").to_pylist()
            centroids = [pack(stage.finish(np.frombuffer(v, dtype=F8), np.frombuffer(s, dtype=I8).astype(float),
                                           tasks[int(j)]), F8) for j, v, s in zip(attrs, noisy, size)]
            keep = [batch.column(name) for name in ("group", "attr", "bucket", "rid", "cl")]
            yield pa.RecordBatch.from_arrays([*keep, pa.array(centroids, pa.binary())],
                                             names=["group", "attr", "bucket", "rid", "cl", "centroids"])

    return finish


def draw_small_fragment(keyed: KeyedValues, tasks: Sequence[AttributeTask], stage: StageSpec, *,
                        rank_orders: Mapping[str, Sequence[str]], noise: Optional[NoiseSource]) -> RoutedIds:
    """A small fragment's whole protection in one task: every attribute drawn and stored, one Spark job.

    In: ``keyed`` = ``(key[, rid], x0 .. x{l-1})`` (:func:`fragrelease.jobs.idpir.bucket_sort.labelled_values`:
    categorical attributes as labels, mapped to ranks here by ``rank_orders``, public or noised with
    budget), ``tasks`` (attribute j is ``tasks[j]``) and the owner's ``stage``. The fragment is read in
    one partition (``coalesce(1)``: no exchange, so no stage job of adaptive execution) by one
    ``mapInArrow`` task that calls, per attribute, :func:`fragrelease.udfs.noise.draw_ranked_attribute`
    (:func:`fragrelease.idpir.mechanisms.draw_task`: the one definition of the mechanism the numpy
    reference and the other plans draw with; the secure sampler unless a test injects ``noise``) and
    then stores the raw draws at once (``localCheckpoint(eager=True)``: nothing downstream re-runs the
    draw); :meth:`fragrelease.idpir.stage.StageSpec.finish` post-processes the stored draws in the task
    that reads them, as :func:`whole_values` does. The caller gates it on the size (records ×
    attributes, public): the task holds every value of the fragment.

    Out: :class:`fragrelease.jobs.idpir.assembly.RoutedIds` with ``together`` = ``(group, attr, bucket,
    rid, cl, centroids)``, one row per attribute (group 0, bucket 0: its ids in rank order with each
    one's cluster, packed ``<i4``, and its c released centroids, packed ``<f8``): the stored raw draws,
    post-processed where they are read. The line-up
    (:func:`fragrelease.jobs.idpir.assembly.line_up`) reads it in one more map, without a shuffle.

    Raises
    ------
    SchemaMismatchError
        An attribute whose value count differs from n (the fragment changed while it was read).
    InvalidParameterError
        A value outside its declared domain (:func:`fragrelease.idpir.mechanisms.draw_task`).
    """
    schema = _together_schema(keyed, drawn=True)
    fn = _draw_all_fn(keyed, tasks, stage, rank_orders, noise, schema)
    # one partition declared, no data moved: the draw runs as one task of one job, and is stored at once;
    # nothing downstream re-runs it (a lost executor after the draw fails the step, never redraws)
    drawn = keyed.frame.coalesce(1).mapInArrow(fn, schema).localCheckpoint(eager=True)
    # post-processing of the stored raw draws (public sizes and domain only), as whole_values does: a
    # narrow map, run in the task that reads it (the line-up's); deterministic, so a re-run gives the same values
    together = drawn.mapInArrow(_finish_fn(tasks, stage), _together_schema(keyed, drawn=False))
    rows = together.select("group", "attr", "bucket", "rid", "cl")
    slices = together.select("attr", "bucket", "centroids")
    return RoutedIds(rows, slices, True, keyed.carry_rid, keyed.rid_type, together=together)
