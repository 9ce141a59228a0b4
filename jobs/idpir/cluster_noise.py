"""Noise on Spark: per-attribute noisy centroids and their way back to the ids (docs/specification.md §1-2).

Two plans share the mechanism's arithmetic (:mod:`fragrelease.idpir.mechanisms`):

- **distributed** (after :func:`fragrelease.jobs.idpir.bucket_sort.sort_buckets`):
  :func:`noise_per_attribute` combines each attribute's partial cluster statistics in one task,
  computes the sensitivity and scale, draws one Laplace value per cluster and post-processes the
  vector (stored at once); :func:`route_centroids` hands every bucket the slice of released
  centroids of its cluster range; :func:`map_to_values` maps each bucket's ids (in rank order) to
  their cluster's value with cluster boundaries ``min(rank // k, c - 1)`` alone.
- **whole attributes** (fragments of at most 2,000,000 rows): :func:`draw_whole_attributes`
  runs :func:`fragrelease.idpir.mechanisms.draw_attribute_ranked` in one task per attribute and
  stores the raw noisy centroids; :func:`whole_values` post-processes them and maps the ids.

Both emit ``(group, attr, rid, value)`` rows for :func:`fragrelease.jobs.idpir.assembly.line_up`.
Local sensitivities, scales and raw draws never leave their task (never on the driver, never logged).
The draws themselves are written in :mod:`fragrelease.udfs.noise`; this module keeps the plans.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Optional

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fragrelease.errors import SchemaMismatchError
from fragrelease.idpir.mechanisms import IRMechanism
from fragrelease.idpir.postprocess import finish_centroids
from fragrelease.jobs.idpir.assembly import group_rows, values_schema
from fragrelease.jobs.idpir.bucket_sort import F8, I8, STATS, KeyedValues, pack, unpack
from fragrelease.jobs.partitioning import spread
from fragrelease.rng.laplace import NoiseSource
from fragrelease.udfs.noise import draw_ranked_attribute, noisy_cluster_centroids

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


class AttributeSpec(NamedTuple):
    """What the noise step knows of an attribute: all public (the declared domain) or budget."""

    name: str
    lo: float
    hi: float
    categorical: bool
    epsilon: Fraction  # the centroids' budget ε_attr, exact (the noise object calibrates the float scale)


def _released_fn(specs: Mapping[int, AttributeSpec], mech: IRMechanism, k: int, c: int,
                 noise: Optional[NoiseSource], postprocess: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def draw(pdf: pd.DataFrame) -> pd.DataFrame:
        j = int(pdf["attr"].iloc[0])
        name, lo, hi, categorical, eps = specs[j]
        part = np.concatenate([np.frombuffer(s, dtype=STATS) for s in pdf.sort_values("bucket")["stats"]])
        firsts = np.concatenate(([0], np.flatnonzero(np.diff(part["cluster"])) + 1))
        if firsts.size != c:
            raise SchemaMismatchError(f"attribute {name!r} has {firsts.size} clusters, expected {c}")
        size = np.add.reduceat(part["size"], firsts)
        mins = np.minimum.reduceat(part["min"], firsts)
        maxs = np.maximum.reduceat(part["max"], firsts)
        centroid = np.add.reduceat(part["sum"], firsts) / size
        # local sensitivity (data-dependent): stays in this task, never logged
        delta = mech.sensitivity_from_extremes(float(mins[0]), float(mins[-1]), float(maxs[-2]) if c > 1 else lo,
                                               float(maxs[-1]), k=k, size_last=int(size[-1]), n_clusters=c,
                                               lo=lo, hi=hi)
        # the scale from the one Laplace noise object (OpenDP's map); the draw in udfs (noisy_centroids, as in numpy)
        lap = mech.noise(delta, eps, c)
        raw = noisy_cluster_centroids(centroid, lap.scales(c), name, noise)
        value = finish_centroids(raw, size.astype(float), lo, hi, categorical, postprocess)
        return pd.DataFrame({"attr": [j], "value": [pack(value, F8)]})

    return draw


def noise_per_attribute(ranked: DataFrame, specs: Mapping[int, AttributeSpec], mech: IRMechanism, *, k: int, c: int,
                        noise: Optional[NoiseSource], postprocess: str) -> DataFrame:
    """One task per attribute: its c released centroids, stored before anything reads them.

    In: ``ranked`` with ``(attr, bucket, stats)`` (:func:`fragrelease.jobs.idpir.bucket_sort.sort_buckets`).
    The partials of a cluster cut by a bucket boundary are combined in bucket order; the sensitivity
    comes from four order statistics through the registry's
    :meth:`fragrelease.idpir.mechanisms.IRMechanism.sensitivity_from_extremes` and
    :meth:`~fragrelease.idpir.mechanisms.IRMechanism.scale`, as in the numpy reference; one draw
    per cluster (:func:`fragrelease.udfs.noise.noisy_cluster_centroids`, the secure sampler unless a
    test injects ``noise``), then :func:`fragrelease.idpir.postprocess.finish_centroids`.
    Out (stored): ``(attr, value)``, ``value`` the c released centroids as packed ``<f8`` in
    cluster order. Memory per task: one attribute's c clusters, about 100 bytes each (plain iDP,
    k = 1: c = n).
    """
    by_attr, keys = _by_attribute(ranked.select("attr", "bucket", "stats"), len(specs), c * k)
    return (by_attr.groupBy(*keys)
            .applyInPandas(_released_fn(specs, mech, k, c, noise, postprocess), "attr int, value binary")
            .localCheckpoint(eager=True))  # materialize the noise once: nothing may re-run the draw


def route_centroids(released: DataFrame, ranked: DataFrame, first_rank: Mapping[tuple[int, int], int],
                    counts: Mapping[tuple[int, int], int], *, k: int, c: int, carry_rid: bool,
                    broadcast: bool) -> DataFrame:
    """Every bucket beside the slice of released centroids its ranks fall in.

    Out: ``(attr, bucket, first_rank, key[, rid], cl_lo, centroids)``; ``centroids`` packed ``<f8``
    for clusters ``cl_lo ..`` of the bucket. The cluster ranges are attributes × buckets numbers
    (public: n, k and the bucket counts). ``broadcast``: ship the slices to the buckets (when the
    centroids are few enough) rather than shuffling the buckets' id arrays.
    """
    ranges: dict[int, list[tuple[int, int, int]]] = {}
    for (j, b), r0 in first_rank.items():
        ranges.setdefault(j, []).append((b, min(r0 // k, c - 1), min((r0 + counts[(j, b)] - 1) // k, c - 1)))

    def slices(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for pdf in batches:
            rows = []
            rec: Any
            for rec in pdf.itertuples(index=False):
                for b, lo_c, hi_c in ranges.get(int(rec.attr), []):
                    rows.append((int(rec.attr), b, lo_c, rec.value[8 * lo_c:8 * (hi_c + 1)]))
            yield pd.DataFrame(rows, columns=["attr", "bucket", "cl_lo", "centroids"])

    routed = released.mapInPandas(slices, "attr int, bucket int, cl_lo long, centroids binary")
    if broadcast:
        routed = F.broadcast(routed)
    return ranked.select("attr", "bucket", "first_rank", "key", *(["rid"] if carry_rid else [])).join(
        routed, ["attr", "bucket"])


def map_to_values(joined: DataFrame, keyed: KeyedValues, *, k: int, c: int, groups: int) -> DataFrame:
    """Each bucket's ids with their released value, cut by assembly group (``(group, attr, rid, value)``).

    In: :func:`route_centroids`. The id at rank ``first_rank + i`` gets centroid
    ``min((first_rank + i) // k, c - 1) - cl_lo`` of its slice: no per-value cluster id is stored or moved.
    """
    carry_rid = keyed.carry_rid

    def values_of(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for pdf in batches:
            rows = []
            rec: Any
            for rec in pdf.itertuples(index=False):
                key = np.frombuffer(rec.key, dtype=I8)
                rid = np.asarray(rec.rid) if carry_rid else key
                centroids = np.frombuffer(rec.centroids, dtype=F8)
                cluster = np.minimum((rec.first_rank + np.arange(rid.size, dtype=np.int64)) // k, c - 1)
                rows += group_rows(int(rec.attr), key, rid, centroids[cluster - rec.cl_lo], groups,
                                   pack_rid=not carry_rid)
            yield pd.DataFrame(rows, columns=["group", "attr", "rid", "value"])

    return joined.mapInPandas(values_of, values_schema(keyed.rid_type, carry_rid))


def _draw_one_fn(specs: Mapping[int, AttributeSpec], *, k: int, n: int, mechanism: str,
                 noise: Optional[NoiseSource], carry_rid: bool) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def draw_one(pdf: pd.DataFrame) -> pd.DataFrame:
        j = int(pdf["attr"].iloc[0])
        x = unpack(pdf["x"], F8)
        key = unpack(pdf["key"], I8)
        name, lo, hi, _, eps = specs[j]
        if x.size != n:
            raise SchemaMismatchError(f"attribute {name!r} has {x.size} values, expected {n} rows")
        order, noisy, size = draw_ranked_attribute(x, key, k=k, lo=lo, hi=hi, epsilon=eps, mechanism=mechanism,
                                                   attribute=name, noise=noise)
        # ids leave in rank order: cluster boundaries (rank // k) map them back, no per-value cluster id
        out: dict[str, list[object]] = {"attr": [j], "key": [pack(key[order], I8)]}
        if carry_rid:
            out["rid"] = [np.concatenate(pdf["rid"].to_list())[order]]
        out.update(noisy=[pack(noisy, F8)], size=[pack(size, I8)])
        return pd.DataFrame(out)

    return draw_one


def draw_whole_attributes(runs: DataFrame, keyed: KeyedValues, specs: Mapping[int, AttributeSpec], *, k: int,
                          n: int, mechanism: str, noise: Optional[NoiseSource]) -> DataFrame:
    """One task per attribute runs the numpy mechanism on all its n values; the raw draws are stored at once.

    In: ``runs`` = ``(attr, bucket, x, key[, rid])`` with one bucket per attribute
    (:func:`fragrelease.jobs.idpir.bucket_sort.cut_into_runs`). Each task concatenates its
    attribute's values and calls :func:`fragrelease.idpir.mechanisms.draw_attribute_ranked` through
    :func:`fragrelease.udfs.noise.draw_ranked_attribute` (the one
    definition of the mechanism, the same the numpy reference
    :func:`~fragrelease.idpir.mechanisms.protect_attribute` runs: ranking with ties broken by the
    tie key, centroids, sensitivity, calibrated scale, one Laplace draw per cluster from the secure
    sampler). Out (stored): ``(attr, key[, rid], noisy, size)``: the tie keys (ids) in rank order,
    the raw noisy centroids and the cluster sizes, packed. Memory per task: the attribute's n values
    (about 80 bytes each at the peak of the sort).
    """
    schema = T.StructType([
        T.StructField("attr", T.IntegerType()), T.StructField("key", T.BinaryType()),  # <i8, in rank order
        *([T.StructField("rid", T.ArrayType(keyed.rid_type))] if keyed.carry_rid else []),
        T.StructField("noisy", T.BinaryType()), T.StructField("size", T.BinaryType()),  # <f8 / <i8, per cluster
    ])
    fn = _draw_one_fn(specs, k=k, n=n, mechanism=mechanism, noise=noise, carry_rid=keyed.carry_rid)
    # Materialize the raw noise once: nothing downstream may re-run draw_one.
    by_attr, keys = _by_attribute(runs, len(specs), n)  # large attributes: one task each
    return by_attr.groupBy(*keys).applyInPandas(fn, schema).localCheckpoint(eager=True)


def whole_values(drawn: DataFrame, keyed: KeyedValues, specs: Mapping[int, AttributeSpec], *, k: int, c: int,
                 n: int, groups: int, postprocess: str) -> DataFrame:
    """Post-processing of the stored raw draws (public sizes and domain only), then each id's value.

    In: :func:`draw_whole_attributes`. Out: ``(group, attr, rid, value)`` for
    :func:`fragrelease.jobs.idpir.assembly.line_up`; the id at rank r gets cluster ``min(r // k, c - 1)``.
    """
    carry_rid = keyed.carry_rid

    def finish(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        cluster = np.minimum(np.arange(n, dtype=np.int64) // k, c - 1)  # of each rank; public: n, k, c
        for pdf in batches:
            rows = []
            rec: Any
            for rec in pdf.itertuples(index=False):
                _, lo, hi, categorical, _ = specs[int(rec.attr)]
                released = finish_centroids(np.frombuffer(rec.noisy, dtype=F8),
                                            np.frombuffer(rec.size, dtype=I8).astype(float),
                                            lo, hi, categorical, postprocess)
                key = np.frombuffer(rec.key, dtype=I8)
                rid = np.asarray(rec.rid) if carry_rid else key
                rows += group_rows(int(rec.attr), key, rid, released[cluster], groups, pack_rid=not carry_rid)
            yield pd.DataFrame(rows, columns=["group", "attr", "rid", "value"])

    return drawn.mapInPandas(finish, values_schema(keyed.rid_type, carry_rid))
