"""IR microaggregation and noise on Spark: what a data owner runs on its fragment (docs/specification.md §1-2).

Shapes: in, a fragment with the id column and the attributes to protect; out, the same ids with
every protected attribute replaced by its cluster's noisy centroid (numeric → double, categorical
→ one of the declared categories), rows in id order within each output group, never in value order.

:func:`released_values` runs these steps (each a named function of its own module):

1. Budgets and rank orders checked; categorical values become ranks in an order that is public
   (``declared``) or bought with budget (``dp-frequency``, :func:`category_orders`), through a
   broadcast join (:func:`fragrelease.jobs.idpir.bucket_sort.keyed_values`), so no order appears
   as a literal in the Spark plan.
2. The plan for the size: up to :data:`SMALL_VALUES` values (records × attributes, 1,000,000), the
   whole fragment in one task (:func:`~fragrelease.jobs.idpir.cluster_noise.draw_small_fragment`:
   every attribute drawn and stored in one Spark job, post-processed and lined up by one map over
   that one partition, steps 3-5 skipped); up to ``_WHOLE_ATTRIBUTE_ROWS`` rows (2,000,000), one
   task per attribute; above, buckets of about ``_VALUES_PER_BUCKET`` = 500,000 values.
3. One map-only pass cuts each input chunk into packed arrays per (attribute, bucket)
   (:func:`~fragrelease.jobs.idpir.bucket_sort.cut_into_runs`; splitters from a sample,
   :func:`~fragrelease.jobs.idpir.bucket_sort.splitters`).
4. Whole attributes: one task per attribute runs the numpy mechanism and stores its raw draws
   beside its ids cut by assembly group, each with its cluster
   (:func:`~fragrelease.jobs.idpir.cluster_noise.draw_whole_attributes`), then the post-processed
   centroids (:func:`~fragrelease.jobs.idpir.cluster_noise.whole_values`).
5. Distributed: bucket counts give first ranks
   (:func:`~fragrelease.jobs.idpir.bucket_sort.bucket_first_ranks`); each bucket is sorted in one
   task with its partial cluster statistics and its ids cut by assembly group, each with its
   cluster (:func:`~fragrelease.jobs.idpir.bucket_sort.sort_buckets`, stored); one task per
   attribute combines the statistics and draws and post-processes the noise
   (:func:`~fragrelease.jobs.idpir.cluster_noise.noise_per_attribute`, stored); every bucket's ids
   are paired with its slice of centroids (:func:`~fragrelease.jobs.idpir.cluster_noise.route_centroids`).
6. :func:`released_values` stops here (:class:`ReleasedValues`); :meth:`ReleasedValues.lined_up`
   moves the ids to their group, where each group gathers its ids' values from the centroid
   slices and lines its attributes up by id into wide rows
   (:func:`fragrelease.jobs.idpir.assembly.line_up`); :meth:`ReleasedValues.unlinked` (``linkage:
   unlinked``) puts every column in its own random order instead, without the ids
   (:func:`fragrelease.jobs.idpir.unlink.unlink_released`).

No task of the distributed plan holds more than a few buckets of values, except the noise step,
which holds one attribute's c = n/k cluster statistics. The noise is materialized (stored) before
anything reads it twice. Fragment checks live in :mod:`fragrelease.jobs.protocol.fragment`, digests
in :mod:`fragrelease.jobs.protocol.digests`, global ranks in :mod:`fragrelease.jobs.protocol.ranking`.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.category_order import (
    CATEGORY_ORDERS,
    AttributeBudget,
    declared_order,
    dp_frequency_order,
)
from fragrelease.idpir.spec import ProtectionSpec
from fragrelease.idpir.stage import AttributeTask, StageSpec
from fragrelease.rng.laplace import NoiseSource, SecureLaplace
from fragrelease.schemas.base import Attribute

from . import bucket_sort, cluster_noise
from .assembly import RoutedIds, line_up
from .unlink import unlink_released

log = logging.getLogger(__name__)

# The plan's sizes (tests shrink them to force the distributed plan on small fragments).
#: Up to this many rows, one task per attribute protects the whole attribute (measured in
#: docs/benchmarks.md: faster than the distributed plan at 1M, slower at 4M, crossing near 3M;
#: memory per task about 80 bytes per value at the peak of the packed sort).
_WHOLE_ATTRIBUTE_ROWS = 2_000_000
_VALUES_PER_BUCKET = 500_000
_ROWS_PER_ASSEMBLY = 500_000
_RUN_ROWS = 262_144
_BROADCAST_CENTROIDS = 4_000_000
#: Up to this many values (records × attributes, both public: the plan's n and the spec's attributes),
#: the whole protection runs in one task over the fragment in one partition
#: (:func:`~fragrelease.jobs.idpir.cluster_noise.draw_small_fragment`): one Spark job, no exchange,
#: against a dozen stage jobs of the whole-attribute plan (docs/benchmarks.md, "Issue 41, session 4").
#: Memory of that task: about 100 bytes per value. The gate's value is never written anywhere.
SMALL_VALUES = 1_000_000


class _StageClock:
    """DEBUG log of each stage's wall time (timings only: nothing data-dependent is logged)."""

    def __init__(self) -> None:
        self._t = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        log.debug("protect stage %s: %.2f s", stage, now - self._t)
        self._t = now


@dataclass(frozen=True)
class ReleasedValues:
    """An owner's released values before any line-up: ``routed`` = each id's cluster and the clusters' values.

    ``routed`` (:class:`fragrelease.jobs.idpir.assembly.RoutedIds`): ``(group, attr, bucket, rid, cl)``
    rows, the ids (packed ``<i8`` when integral, else an array of ``rid_type``) cut by assembly
    group with each one's cluster, beside the released centroids per (attribute, bucket) (packed
    ``<f8``; categorical attributes as their rank in ``rank_orders``, public or noised with budget).
    Recomputing them is exact: the noise under them is stored. ``n`` is the validated record count
    (public).
    """

    routed: RoutedIds
    attributes: tuple[Attribute, ...]
    n: int
    groups: int
    carry_rid: bool
    rid_type: DataType
    rank_orders: Mapping[str, Sequence[str]]
    id_type: DataType
    id_column: str

    @property
    def values(self) -> DataFrame:
        """``(group, attr, rid, value)`` rows (:func:`fragrelease.jobs.idpir.assembly.values_schema`): each id's value gathered in one map."""
        return self.routed.values()

    def lined_up(self) -> DataFrame:
        """``(id_column, *attribute names)``, one row per id (step 6, :func:`fragrelease.jobs.idpir.assembly.line_up`).

        The values are gathered inside the line-up's tasks when the centroid slices are broadcast
        (``routed.broadcast``); otherwise they are gathered in a map of their own first."""
        source = self.routed if self.routed.broadcast else self.routed.values()
        return line_up(source, self.attributes, groups=self.groups, carry_rid=self.carry_rid,
                       rid_type=self.rid_type, rank_orders=self.rank_orders, id_type=self.id_type,
                       id_column=self.id_column)

    def unlinked(self) -> DataFrame:
        """``(*attribute names)``, each column in its own uniformly random order, without a line-up by id
        (``linkage: unlinked``; :func:`fragrelease.jobs.idpir.unlink.unlink_released`)."""
        return unlink_released(self.values, self.attributes, self.rank_orders, self.n)


def category_orders(
    df: DataFrame,
    attributes: Sequence[Attribute],
    budgets: Sequence[AttributeBudget],
    category_order: str,
    noise: Optional[NoiseSource] = None,
    counts: Optional[Mapping[str, Mapping[str, int]]] = None,
) -> Mapping[str, tuple[str, ...]]:
    """The rank order of every categorical attribute, public or bought with budget (docs/specification.md §1).

    ``declared``: the schema's order, no Spark job. ``dp-frequency``: one aggregation pass counts
    every categorical attribute's categories (a table of Σ |dom| rows, the owner's own driver, kept
    in memory only, never logged or written), unless ``counts`` (attribute → category → exact count,
    from the validation pass: :attr:`fragrelease.jobs.protocol.fragment.FragmentCheck.category_counts`)
    already holds them for every categorical attribute; each histogram gets Laplace noise of scale
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
        return {a.name: declared_order(a.categories or ()) for _, a in cats}
    by_name = {b.attribute: b for b in budgets}
    exact: dict[int, Mapping[str, int]]
    if counts is not None and all(a.name in counts for _, a in cats):
        exact = {j: counts[a.name] for j, a in cats}  # counted in the validation pass: no pass of its own
    else:
        pairs = F.explode(F.array(*[F.struct(F.lit(j).alias("attr"), F.col(a.name).alias("value")) for j, a in cats]))
        found: dict[int, dict[str, int]] = {j: {} for j, _ in cats}
        for r in df.select(pairs.alias("p")).groupBy("p.attr", "p.value").count().collect():
            found[int(r["attr"])][r["value"]] = int(r["count"])
        exact = dict(found)
    source = noise if noise is not None else SecureLaplace()
    orders = {}
    for j, a in cats:
        eps_order = by_name[a.name].order
        if eps_order <= 0:
            raise InvalidParameterError(f"attribute {a.name!r} has no budget for its dp-frequency category order")
        orders[a.name] = dp_frequency_order(exact[j], a.categories or (), eps_order, source, attribute=a.name)
    return orders


def rank_orders_of(attrs: Sequence[Attribute], orders: Mapping[str, Sequence[str]]) -> Mapping[str, tuple[str, ...]]:
    """Each categorical attribute's rank order from ``orders`` (public or noised with budget).

    Raises InvalidParameterError when an order does not list the declared categories once each.
    """
    rank_orders: dict[str, tuple[str, ...]] = {}
    for a in attrs:
        if a.categorical:
            order = tuple(orders[a.name]) if a.name in orders else ()
            if sorted(order) != sorted(a.categories or ()):
                raise InvalidParameterError(f"the rank order of {a.name!r} must list its declared categories once each")
            rank_orders[a.name] = order
    return rank_orders


def protect_fragment(
    df: DataFrame,
    attributes: Sequence[Attribute],
    spec: ProtectionSpec,
    *,
    id_column: str,
    noise: Optional[NoiseSource] = None,
    category_counts: Optional[Mapping[str, Mapping[str, int]]] = None,
) -> DataFrame:
    """:func:`released_fragment` lined up by id: the protected fragment ``(id_column, *attribute names)``.

    Parameters, shapes and errors: :func:`released_fragment` and :func:`released_values`.
    """
    return released_fragment(df, attributes, spec, id_column=id_column, noise=noise,
                             category_counts=category_counts).lined_up()


def released_fragment(
    df: DataFrame,
    attributes: Sequence[Attribute],
    spec: ProtectionSpec,
    *,
    id_column: str,
    noise: Optional[NoiseSource] = None,
    category_counts: Optional[Mapping[str, Mapping[str, int]]] = None,
) -> ReleasedValues:
    """One owner's whole protection step under ``spec``: category orders, then :func:`released_values`.

    ``category_counts``: the exact category counts of ``df`` when the caller has them from its
    validation pass (:func:`fragrelease.jobs.protocol.fragment.validate_fragment` with
    ``count_categories=True``); ``dp-frequency`` then runs no counting pass (:func:`category_orders`).

    ``spec`` (:class:`fragrelease.idpir.spec.ProtectionSpec`, verified against the plan once) fixes
    k, the mechanism, each attribute's budget split (numeric attributes and the ``declared`` order
    spend it all on the centroids; ``dp-frequency`` spends ``category_order_share · ε_attr`` on a
    Laplace histogram that fixes the rank order (:func:`category_orders`) and the rest on the
    centroids), the post-processing and n. Nothing is recomputed here. docs/specification.md §1-2.

    Shapes and the rest of the errors: :func:`released_values`.

    Raises
    ------
    InvalidParameterError
        ``attributes`` are not the spec's, in its order; k > n.
    """
    attrs = list(attributes)
    if tuple(a.name for a in attrs) != spec.attributes:
        raise InvalidParameterError(f"owner {spec.owner!r}: attributes {[a.name for a in attrs]} are not the spec's "
                                    f"{list(spec.attributes)}")
    StageSpec.of(spec)  # k ≤ n checked before any budget is spent on the histograms
    orders = category_orders(df, attrs, spec.budgets, spec.category_order, noise, counts=category_counts)
    return released_values(df, attrs, spec, id_column=id_column, orders=orders, noise=noise)


def released_values(
    df: DataFrame,
    attributes: Sequence[Attribute],
    spec: ProtectionSpec,
    *,
    id_column: str,
    orders: Mapping[str, Sequence[str]],
    noise: Optional[NoiseSource] = None,
) -> ReleasedValues:
    """IR microaggregation + Laplace noise (DP-IR, iDP-IR or plain iDP) under ``spec``, with given category orders.

    Parameters
    ----------
    df : DataFrame with ``id_column`` (unique, non-null) and every attribute in ``attributes``.
    attributes : the attributes to protect, with declared domains/categories.
    spec : the owner's :class:`fragrelease.idpir.spec.ProtectionSpec` (cut into one
        :class:`~fragrelease.idpir.stage.StageSpec` and one
        :class:`~fragrelease.idpir.stage.AttributeTask` per attribute, which reach every executor): k (plain iDP uses 1), the
        mechanism, one budget per attribute in order (the Laplace scale uses its ``centroids`` part),
        the post-processing (``isotonic``: the noisy centroid vector of each attribute is projected
        onto the non-decreasing vectors in [lo, hi], weighted by cluster size, before rounding,
        docs/specification.md §9; ``none``: the paper's release) and n, the validated row count.
    id_column : record id; ties between equal values are ordered by it (by its 64-bit xxhash when
        the id is not an integer).
    orders : categorical attribute name → its categories in rank order (rank 1 first). Must be
        public or noised with budget (:func:`category_orders`); the map is applied inside Python
        workers, so it appears as no literal in the Spark plan.
    noise : test-only noise injection; ``None`` = the secure sampler.

    Returns
    -------
    :class:`ReleasedValues`: every attribute's released values per id, not yet lined up (steps 1-5 of
    the module docstring); :meth:`ReleasedValues.lined_up` gives the DataFrame ``(id_column,
    *attribute names)``, one row per input row, numeric attributes as double, categorical as string,
    rows in id order within each output group (one group per ~500,000 rows, grouped by a hash of the
    id), never in value order; :meth:`ReleasedValues.unlinked` the attributes only, each column in
    its own random order. The noise is already materialized. docs/specification.md §1-2;
    Del Vasto-Terrientes et al. (ICISSP 2025) Alg. 1.

    Raises
    ------
    InvalidParameterError
        ``budgets`` not one per attribute in order, or an order that does not list the declared
        categories once each; k < 1 or k > n (:func:`fragrelease.idpir.microaggregation.check_k`).
    SchemaMismatchError
        An attribute whose value count differs from n (the fragment changed while it was read).

    How it runs: the numbered steps of the module docstring (:mod:`fragrelease.jobs.idpir.protect`).
    """
    clock = _StageClock()
    # 1. parameters, budgets and rank orders (all public or noised with budget): the spec's, nothing recomputed;
    #    the stage (mechanism, k used, c, n, options) and one task per attribute reach every executor as objects
    attrs = list(attributes)
    stage = StageSpec.of(spec)
    n, c, budgets = stage.n, stage.c, spec.budgets
    if [b.attribute for b in budgets] != [a.name for a in attrs]:
        raise InvalidParameterError(f"budgets are for {[b.attribute for b in budgets]}, attributes are {[a.name for a in attrs]}")
    tasks = tuple(AttributeTask.of(a, b) for a, b in zip(attrs, budgets))  # exact budgets: the noise object scales
    rank_orders = rank_orders_of(attrs, orders)
    id_type = df.schema[id_column].dataType
    if n * len(attrs) <= SMALL_VALUES:
        # 2. small (public: n and the attribute count): the whole protection in one task, stored at once
        labelled = bucket_sort.labelled_values(df, attrs, id_column)
        together = cluster_noise.draw_small_fragment(labelled, tasks, stage, rank_orders=rank_orders, noise=noise)
        clock.lap("draw every attribute in one task (stored)")
        return ReleasedValues(together, tuple(attrs), n, 1, labelled.carry_rid, labelled.rid_type, rank_orders,
                              id_type, id_column)
    keyed = bucket_sort.keyed_values(df, attrs, id_column, rank_orders)
    groups = max(1, math.ceil(n / _ROWS_PER_ASSEMBLY))

    # 2. the plan for the size (public: n and the plan's constants)
    whole = n <= _WHOLE_ATTRIBUTE_ROWS
    buckets = 1 if whole else max(1, math.ceil(n / _VALUES_PER_BUCKET))
    broadcast = c * len(attrs) <= _BROADCAST_CENTROIDS

    # 3. cut into packed runs per (attribute, bucket)
    cuts = bucket_sort.splitters(keyed, n, buckets)
    runs = bucket_sort.cut_into_runs(keyed, cuts, buckets, _RUN_ROWS)
    clock.lap("plan, splitters (sample)")

    routed: RoutedIds
    if whole:
        # 4. one task per attribute: the numpy mechanism, raw draws and the ids' clusters stored; then post-processing
        drawn = cluster_noise.draw_whole_attributes(runs, keyed, tasks, stage, noise=noise, groups=groups)
        clock.lap("cut, draw each attribute's noisy centroids in one task (stored)")
        routed = cluster_noise.whole_values(drawn, keyed, tasks, stage, broadcast=broadcast)
    else:
        # 5. distributed: counts and first ranks, sorted buckets (ids cut by group with their clusters),
        #    noise per attribute, centroid slices per bucket
        runs = runs.localCheckpoint(eager=True, storageLevel=bucket_sort.STORED)
        clock.lap("cut into bucket arrays (map, stored)")
        counts, first_rank = bucket_sort.bucket_first_ranks(runs, [a.name for a in attrs], n)
        clock.lap("counts per bucket")
        ranked = bucket_sort.sort_buckets(runs, keyed, first_rank, stage, groups=groups)
        clock.lap("sort buckets, ranks, partial cluster statistics, ids by group with their clusters (stored)")
        released = cluster_noise.noise_per_attribute(ranked, tasks, stage, noise=noise)
        clock.lap("combine cluster statistics, sensitivity, scale, noise, post-processing (stored)")
        routed = cluster_noise.route_centroids(released, ranked, first_rank, counts, stage,
                                               carry_rid=keyed.carry_rid, rid_type=keyed.rid_type,
                                               broadcast=broadcast)

    return ReleasedValues(routed, tuple(attrs), n, groups, keyed.carry_rid, keyed.rid_type, rank_orders, id_type,
                          id_column)
