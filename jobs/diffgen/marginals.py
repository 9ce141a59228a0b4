"""DiffGen's value x class marginals on Spark (docs/specification.md §7), for a release and for a party.

:func:`marginal_counts_spark` computes every predictor's ``groupBy(attribute, class).count()``; a
numeric predictor with many distinct values keeps its counts in Spark (:class:`SparkNumericCounts`)
and draws its split points there with a distributed Gumbel-max (the noise from the OS CSPRNG on the
executors). Used by :mod:`fragrelease.jobs.diffgen.runner` and by a DistDiffGen party
(:mod:`fragrelease.jobs.diffgen.party`).
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from fragrelease.diffgen.engine import PredictorCounts
from fragrelease.diffgen.predictors import NumericDomain, counts_from_pairs
from fragrelease.rng.diffgen import DiffGenRandomness

#: A numeric predictor with more distinct values than this keeps its value × class counts in Spark
#: (:class:`SparkNumericCounts`) instead of collecting them to the driver.
MAX_DRIVER_VALUES = 200_000
#: Distinct values per range partition of a :class:`SparkNumericCounts` table.
VALUES_PER_PARTITION = 1_000_000


def _col(a: str) -> str:
    return "c_" + a.replace("-", "_")


class SparkNumericCounts:
    """Value × class counts of one numeric predictor kept in Spark: split points by a distributed Gumbel-max.

    ``table`` has one row per distinct value: ``v`` (double) and ``n0`` … ``n{C-1}`` (long, records
    per class), range-partitioned by ``v``, sorted within partitions and materialized once
    (``localCheckpoint``). :meth:`choose_split` has the contract of
    :func:`fragrelease.diffgen.engine.choose_split_point` and the same distribution: the exponential
    mechanism over the sub-intervals between consecutive distinct values (weight
    ``exp(ε'u/(2Δu)) × length``) is drawn as the argmax of log-weight + Gumbel noise, each partition
    reporting only its own noisy maximum (one row), so no per-value data reaches the driver. The
    executors' Gumbel noise always comes from the OS CSPRNG (:func:`fragrelease.udfs.noise.gumbel_noise`),
    whatever ``randomness`` the driver uses for the first sub-interval and the uniform draw.
    Two Spark jobs per draw (partition totals, then the partitions' maxima).
    """

    def __init__(self, wide, n_classes: int, partitions: int) -> None:
        from pyspark.sql import functions as F

        self.n_classes = int(n_classes)
        self._ncols = [f"n{i}" for i in range(self.n_classes)]
        self.table = (wide.repartitionByRange(max(1, int(partitions)), "v").sortWithinPartitions("v")
                      .withColumn("pid", F.spark_partition_id()).localCheckpoint(eager=True))

    def _interval(self, lo: float, hi: float, top: bool):
        from pyspark.sql import functions as F

        return self.table.where((F.col("v") >= F.lit(float(lo))) &
                                ((F.col("v") <= F.lit(float(hi))) if top else (F.col("v") < F.lit(float(hi)))))

    def _plan(self, lo: float, hi: float, top: bool):
        """One Spark job, one row per partition → (class counts before each partition by pid, first inner value
        after each partition by pid (else hi), first inner value of the interval (else hi), class counts at
        ``v == lo``, class counts of the interval)."""
        from pyspark.sql.types import DoubleType, LongType, StructField, StructType

        ncols = self._ncols
        schema = StructType([StructField("pid", LongType()), StructField("first_inner", DoubleType())] +
                            [StructField(f"lo_{c}", LongType()) for c in ncols] +
                            [StructField(f"tot_{c}", LongType()) for c in ncols])

        def totals(batches):
            batches = list(batches)
            pdf = pd.concat(batches, ignore_index=True) if batches else pd.DataFrame()
            if pdf.empty:
                return
            v = pdf["v"].to_numpy(float)
            inner = (v > lo) & (v < hi)
            row = {"pid": [int(pdf["pid"].iloc[0])], "first_inner": [float(v[inner].min()) if inner.any() else np.nan]}
            for c in ncols:
                row[f"lo_{c}"] = [int(pdf[c].to_numpy()[v == lo].sum())]
                row[f"tot_{c}"] = [int(pdf[c].sum())]
            yield pd.DataFrame(row)

        parts = self._interval(lo, hi, top).mapInPandas(totals, schema).toPandas().sort_values("pid")
        tot = parts[[f"tot_{c}" for c in ncols]].to_numpy(np.int64).reshape(-1, self.n_classes)
        before = np.cumsum(tot, axis=0) - tot
        offsets = {int(p): before[i] for i, p in enumerate(parts["pid"])}
        firsts = parts["first_inner"].to_numpy(float)
        nxt, following = {}, float(hi)
        for i in range(len(parts) - 1, -1, -1):  # first inner value of any later partition, else hi
            nxt[int(parts["pid"].iloc[i])] = following
            if not np.isnan(firsts[i]):
                following = float(firsts[i])
        lo_counts = parts[[f"lo_{c}" for c in ncols]].to_numpy(np.int64).sum(axis=0).reshape(self.n_classes)
        return offsets, nxt, following, lo_counts, tot.sum(axis=0).reshape(self.n_classes)

    def _scored(self, lo: float, hi: float, top: bool, score: str, eps_prime: Optional[Fraction]):
        """Every sub-interval from an inner value, scored; with ``eps_prime`` only each partition's noisy maximum."""
        from pyspark.sql.types import DoubleType, StructField, StructType

        from fragrelease.diffgen.engine import split_log_weights
        from fragrelease.diffgen.predictors import score_children

        offsets, nxt, first, lo_counts, total = self._plan(lo, hi, top)
        ncols = self._ncols
        schema = StructType([StructField(x, DoubleType()) for x in ("left_pt", "right_pt", "u", "noisy")])

        def scored(batches):
            from fragrelease.udfs.noise import gumbel_noise

            batches = list(batches)
            pdf = pd.concat(batches, ignore_index=True) if batches else pd.DataFrame()
            if pdf.empty:
                return
            pdf = pdf.sort_values("v", kind="stable")
            pid = int(pdf["pid"].iloc[0])
            v = pdf["v"].to_numpy(float)
            cum = offsets[pid] + np.cumsum(pdf[ncols].to_numpy(np.int64), axis=0)
            inner = (v > lo) & (v < hi)
            if not inner.any():
                return
            left_pt, left = v[inner], cum[inner]
            right_pt = np.append(left_pt[1:], nxt[pid])
            u = score_children(np.stack([left, total - left], axis=1), score)
            if eps_prime is None:
                yield pd.DataFrame({"left_pt": left_pt, "right_pt": right_pt, "u": u, "noisy": np.nan})
                return
            noisy = split_log_weights(u, right_pt - left_pt, eps_prime) + gumbel_noise(u.size)
            j = int(np.argmax(noisy))
            yield pd.DataFrame({"left_pt": [left_pt[j]], "right_pt": [right_pt[j]], "u": [u[j]], "noisy": [noisy[j]]})

        rows = self._interval(lo, hi, top).mapInPandas(scored, schema).toPandas()
        u0 = float(score_children(np.stack([lo_counts, total - lo_counts])[None], score)[0])
        return rows, (float(lo), float(first), u0)

    def split_intervals(self, lo: float, hi: float, *, top: bool, score: str) -> tuple[np.ndarray, np.ndarray]:
        """Same as :func:`fragrelease.diffgen.engine.split_intervals` (collects one row per distinct value: for checks on small data)."""
        rows, (lo0, first, u0) = self._scored(lo, hi, top, score, None)
        rows = rows.sort_values("left_pt")
        return (np.concatenate([[lo0], rows["left_pt"].to_numpy(float), [float(hi)]]),
                np.concatenate([[u0], rows["u"].to_numpy(float)]))

    def choose_split(self, lo: float, hi: float, *, top: bool, eps_prime: Fraction, score: str,
                     randomness: DiffGenRandomness) -> tuple[float, float]:
        """:func:`fragrelease.diffgen.engine.choose_split_point` on the Spark-held counts: (split point, its score)."""
        from fragrelease.diffgen.engine import split_log_weights
        from fragrelease.errors import InvalidParameterError

        if not lo < hi:
            raise InvalidParameterError(f"numeric interval [{lo}, {hi}) cannot be split")
        rows, (lo0, first, u0) = self._scored(lo, hi, top, score, Fraction(eps_prime))
        best = (float(split_log_weights(np.array([u0]), np.array([first - lo0]), eps_prime)[0] +
                      randomness.gumbel(1)[0]), lo0, first, u0)
        for r in rows.itertuples(index=False):  # one row per partition
            if r.noisy > best[0]:
                best = (float(r.noisy), float(r.left_pt), float(r.right_pt), float(r.u))
        _, a, b, u = best
        return randomness.uniform(a, b), u


def _spark_numeric_counts(grouped, p, class_values: Sequence[str]) -> SparkNumericCounts:
    """Validate a numeric predictor's ``(v, y, count)`` aggregate with aggregates and keep it in Spark."""
    from pyspark.sql import functions as F

    from fragrelease.errors import DomainError

    chk = grouped.agg(F.min("v").alias("lo"), F.max("v").alias("hi"),
                      F.sum(F.when(F.col("v").isNull() | F.col("y").isNull(), 1).otherwise(0)).alias("nulls")).collect()[0]
    if chk["nulls"]:
        raise DomainError(f"{p.attribute} or the class has null values")
    for x in (chk["lo"], chk["hi"]):
        if not p.lo <= float(x) <= p.hi:
            raise DomainError(f"{p.attribute} value {x} outside its declared domain [{p.lo}, {p.hi}]")
    seen = [r["y"] for r in grouped.select("y").distinct().limit(len(class_values) + 1).collect()]
    unknown = sorted(set(map(str, seen)) - set(class_values))
    if unknown:
        raise DomainError(f"class value {unknown[0]!r} is not one of {list(class_values)}")
    wide = grouped.groupBy(F.col("v").cast("double").alias("v")).agg(
        *[F.sum(F.when(F.col("y") == c, F.col("count")).otherwise(0)).cast("long").alias(f"n{i}")
          for i, c in enumerate(class_values)])
    m = wide.count()
    return SparkNumericCounts(wide, len(class_values), math.ceil(m / VALUES_PER_PARTITION))


def marginal_counts_spark(df, predictors, class_col: str, class_values: Sequence[str]):
    """Value × class counts per predictor from Spark aggregations.

    Categorical predictors and numeric ones with at most :data:`MAX_DRIVER_VALUES` distinct values:
    :class:`fragrelease.diffgen.predictors.AttributeCounts` on the driver (one row per value and class). A
    numeric predictor with more distinct values stays in Spark as :class:`SparkNumericCounts`.

    Raises
    ------
    DomainError
        A null, a numeric value outside the declared domain, a category that is not a taxonomy leaf,
        or an unknown class value (checked on the aggregated values, naming the value).
    """
    from pyspark.sql import functions as F

    from fragrelease.errors import DomainError

    out: dict[str, PredictorCounts] = {}
    for p in predictors:
        grouped = df.groupBy(F.col(f"`{p.attribute}`").alias("v"), F.col(class_col).alias("y")).count()
        if isinstance(p, NumericDomain):
            cap = MAX_DRIVER_VALUES * len(class_values) + 1
            rows = grouped.limit(cap).toPandas()
            if len(rows) >= cap:
                out[p.attribute] = _spark_numeric_counts(grouped, p, class_values)
                continue
        else:
            rows = grouped.toPandas()
        if rows["v"].isna().any() or rows["y"].isna().any():
            raise DomainError(f"{p.attribute} or {class_col} has null values")
        if isinstance(p, NumericDomain):
            v = rows["v"].astype(float)
            bad = v[(v < p.lo) | (v > p.hi)]
            if len(bad):
                raise DomainError(f"{p.attribute} value {bad.iloc[0]} outside its declared domain [{p.lo}, {p.hi}]")
        else:
            unknown = sorted(set(rows["v"].astype(str)) - set(p.leaves[p.root]))
            if unknown:
                raise DomainError(f"{p.attribute} value {unknown[0]!r} is not a leaf of its taxonomy")
        out[p.attribute] = counts_from_pairs(rows["v"].to_numpy(), rows["y"].to_numpy(), rows["count"].to_numpy(),
                                             class_values, numeric=isinstance(p, NumericDomain))
    return out
