"""The reports' statistics of a table, computed in Spark (:mod:`.report`): per attribute the mean,
standard deviation, quantiles, a histogram over the declared domain or the category counts, and the
numeric correlation matrix. Only aggregates (a few numbers per attribute and partition) reach the driver.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fragrelease.schemas.base import Attribute

from ..frames import aggregate_row

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
BINS = 20


_RELATIVE_ERROR = 1e-4  # of the quantiles (Spark's Greenwald-Khanna sketch, percentile_approx)
#: A table of fewer records than this has its quantiles computed exactly, in the summary pass, when it is
#: one partition: Spark's sketch at ``_RELATIVE_ERROR`` keeps every value of fewer than
#: ``1 / (2 * _RELATIVE_ERROR)`` records (no sample merged, none inserted with a rank uncertainty), so
#: ``percentile_approx`` returns exactly :func:`_rank_quantiles` there (tests/jobs/idpir/test_report_passes.py).
EXACT_QUANTILE_RECORDS = int(round(1 / (2 * _RELATIVE_ERROR)))


def _rank_quantiles(values: np.ndarray, probabilities: Sequence[float]) -> Optional[list[float]]:
    """The ``probabilities`` quantiles of ``values`` (NaN ignored) as Spark's ``percentile_approx`` gives them
    from an exact sketch: the value of rank ``ceil(p * n)`` (1-based, at least 1) in sorted order; ``None``
    when there is no value."""
    x = np.sort(values[~np.isnan(values)])
    n = len(x)
    if not n:
        return None
    return [float(x[max(math.ceil(q * n), 1) - 1]) for q in probabilities]


def _combine(a: tuple, b: tuple) -> tuple:
    """Merge two (count, mean vector, co-moment matrix) summaries (Chan, Golub & LeVeque's pairwise update)."""
    n_a, mean_a, c_a = a
    n_b, mean_b, c_b = b
    if n_a == 0:
        return b
    if n_b == 0:
        return a
    n = n_a + n_b
    delta = mean_b - mean_a
    return n, mean_a + delta * (n_b / n), c_a + c_b + np.outer(delta, delta) * (n_a * n_b / n)


def _partial_summaries(attrs: Sequence[Attribute], quantiles: bool = False):
    """A ``mapInPandas`` function: per partition, one row per table in it (column ``_SIDE``) with its
    count, means, co-moments, bins and category counts (no row for a table the partition lacks);
    with ``quantiles``, also the :data:`QUANTILES` of each numeric attribute over the partition's rows
    of that table (:func:`_rank_quantiles`; NaN where it has no value), which are the table's own when
    the partition holds all of its rows."""
    numeric = [a for a in attrs if not a.categorical]
    categorical = [a for a in attrs if a.categorical]
    lo = np.array([a.bounds()[0] for a in numeric], dtype=float)
    width = np.array([(a.bounds()[1] - a.bounds()[0]) / BINS for a in numeric], dtype=float)
    p = len(numeric)

    def empty() -> list:
        return [(0, np.zeros(p), np.zeros((p, p))), np.zeros((p, BINS), dtype=np.int64),
                [np.zeros(len(a.categories or ()), dtype=np.int64) for a in categorical]]

    def add(state: list, pdf: pd.DataFrame) -> None:
        m = len(pdf)
        if p:
            x = pdf[[a.name for a in numeric]].to_numpy(dtype=float)
            mean = x.mean(axis=0)
            d = x - mean
            state[0] = _combine(state[0], (m, mean, d.T @ d))
            b = np.minimum(np.floor((x - lo) / width), BINS - 1)
            for i in range(p):
                ok = b[:, i] >= 0
                state[1][i] += np.bincount(b[ok, i].astype(np.int64), minlength=BINS)[:BINS]
        for f, a in zip(state[2], categorical):
            codes = pd.Categorical(pdf[a.name], categories=list(a.categories or ())).codes
            f += np.bincount(codes[codes >= 0], minlength=len(a.categories or ()))
        if not p:
            state[0] = (state[0][0] + m, state[0][1], state[0][2])

    def ranked(blocks: list) -> np.ndarray:
        # every numeric attribute's quantiles over the partition's rows of one table, attribute-major
        x = np.concatenate(blocks) if blocks else np.zeros((0, p))
        out = [_rank_quantiles(x[:, i], QUANTILES) for i in range(p)]
        return np.array([v for q in out for v in (q if q is not None else [np.nan] * len(QUANTILES))], dtype=float)

    def summarize(batches):
        # one summary per table (the _SIDE tag of each row) present in this partition
        states: dict[int, list] = {}
        values: dict[int, list] = {}
        for pdf in batches:
            if len(pdf) == 0:
                continue
            for side, rows in pdf.groupby(_SIDE, sort=True):
                add(states.setdefault(int(side), empty()), rows)
                if quantiles and p:
                    values.setdefault(int(side), []).append(rows[[a.name for a in numeric]].to_numpy(dtype=float))
        for side, (acc, hist, freq) in sorted(states.items()):
            row = {"side": [side], "n": [acc[0]], "mean": [acc[1]], "comoment": [acc[2].ravel()],
                   "hist": [hist.ravel()], "freq": [np.concatenate(freq) if freq else np.zeros(0, np.int64)]}
            if quantiles:
                row["quantiles"] = [ranked(values.get(side, []))]
            yield pd.DataFrame(row)

    return summarize


def table_summary(df: DataFrame, attrs: Sequence[Attribute]) -> tuple[Mapping[str, Any], Optional[np.ndarray]]:
    """Per-attribute statistics and the numeric correlation matrix of ``df``, in two Spark passes.

    Numeric attribute → mean, sample standard deviation, the 5/25/50/75/95 % quantiles
    (approximate, relative rank error 1e-4) and a 20-bin histogram over the declared domain;
    categorical attribute → the count of every declared category. The correlation matrix (Pearson,
    numeric attributes in declared order; ``None`` with fewer than two) comes from the same pass.

    How: each partition summarizes its rows (count, means, co-moments, bin and category counts) in
    one ``mapInPandas`` task, and the driver merges these few numbers per partition (never rows);
    the quantiles are one ``percentile_approx`` aggregation. A handful of small plans instead of one aggregate
    expression per statistic, whose planning and code generation dominated small releases.
    """
    stats, corr, _ = _counted_summary_pass(df, attrs)
    return _with_quantiles(stats, _quantiles(df, attrs)), corr


def _counted_summary_pass(df: DataFrame, attrs: Sequence[Attribute]) -> tuple[dict, Optional[np.ndarray], int]:
    """:func:`table_summary` without the quantiles (``None`` each), with the row count of ``df``: the one
    ``mapInPandas`` pass. Returns ``(stats, corr, n)``; the histograms and category counts the plots draw
    are complete."""
    return _summary_passes([df], attrs)[0]


_SIDE = "__fragrelease_side"


def _summary_passes(frames: Sequence[DataFrame], attrs: Sequence[Attribute], *,
                    quantiles: bool = False) -> list[tuple[dict, Optional[np.ndarray], int]]:
    """:func:`_counted_summary_pass` of each of ``frames`` (each with the columns of ``attrs``), in order,
    from one Spark job: ``mapInPandas`` over their union (which moves no rows), each row tagged with its
    frame; every partition summarizes each frame's rows apart, and the driver merges each frame's
    partial summaries only (a frame with no rows: n = 0, no means).

    ``quantiles``: the caller made each frame one partition of fewer than :data:`EXACT_QUANTILE_RECORDS`
    records (public or the owner's own counts); the same job then also gives each numeric attribute's
    :data:`QUANTILES`, exactly those of :func:`_quantiles` (one Spark job instead of two). A frame found in
    more than one partition raises RuntimeError (a programming error: the caller's promise broken)."""
    attrs = list(attrs)
    schema = T.StructType([
        T.StructField("side", T.IntegerType()),
        T.StructField("n", T.LongType()), T.StructField("mean", T.ArrayType(T.DoubleType())),
        T.StructField("comoment", T.ArrayType(T.DoubleType())), T.StructField("hist", T.ArrayType(T.LongType())),
        T.StructField("freq", T.ArrayType(T.LongType())),
        *([T.StructField("quantiles", T.ArrayType(T.DoubleType()))] if quantiles else []),
    ])
    # numeric columns as doubles (as each partition reads them) so the union's column types agree
    tagged = [df.select(*[F.col(a.name).cast("double").alias(a.name) if not a.categorical else F.col(a.name)
                          for a in attrs], F.lit(i).alias(_SIDE)) for i, df in enumerate(frames)]
    union = functools.reduce(DataFrame.union, tagged)
    # per-partition aggregates only (one row each), no record-level data reaches the driver
    parts = union.mapInPandas(_partial_summaries(attrs, quantiles), schema).collect()
    out = []
    for i in range(len(frames)):
        mine = [r for r in parts if r["side"] == i]
        stats, corr, n = _merged(attrs, mine)
        if quantiles:
            if len(mine) > 1:
                raise RuntimeError(f"frame {i} of the summary pass spans {len(mine)} partitions, not one")
            flat = np.asarray(mine[0]["quantiles"], dtype=float) if mine else np.zeros(0)
            numeric = [a.name for a in attrs if not a.categorical]
            k = len(QUANTILES)
            # an attribute without a value has no quantiles (as :func:`_quantiles`): its entries stay None
            _with_quantiles(stats, {name: [float(v) for v in flat[j * k:(j + 1) * k]] for j, name in enumerate(numeric)
                                    if len(flat) and not np.isnan(flat[j * k:(j + 1) * k]).any()})
        out.append((stats, corr, n))
    return out


def _merged(attrs: list[Attribute], parts: Sequence[Any]) -> tuple[dict, Optional[np.ndarray], int]:
    """One table's ``(stats, corr, n)`` from its partitions' summaries (rows of :func:`_partial_summaries`)."""
    numeric = [a for a in attrs if not a.categorical]
    categorical = [a for a in attrs if a.categorical]
    p = len(numeric)
    acc: tuple = (0, np.zeros(p), np.zeros((p, p)))
    hist = np.zeros(p * BINS, dtype=np.int64)
    freq = np.zeros(sum(len(a.categories or ()) for a in categorical), dtype=np.int64)
    for r in parts:
        acc = _combine(acc, (int(r["n"]), np.asarray(r["mean"], dtype=float),
                             np.asarray(r["comoment"], dtype=float).reshape(p, p)))
        hist += np.asarray(r["hist"], dtype=np.int64)
        freq += np.asarray(r["freq"], dtype=np.int64)
    n, mean, com = acc
    stats: dict = {}
    offset, i = 0, 0
    for a in attrs:
        if a.categorical:
            m = len(a.categories or ())
            stats[a.name] = {"kind": "categorical",
                             "freq": {cat: int(v) for cat, v in zip((a.categories or ()), freq[offset:offset + m])}}
            offset += m
            continue
        lo, hi = a.bounds()
        w = (hi - lo) / BINS
        stats[a.name] = {"kind": "numeric", "mean": float(mean[i]) if n else None,
                         "std": float(np.sqrt(com[i, i] / (n - 1))) if n > 1 else None,
                         "quantiles": [None] * len(QUANTILES),
                         "edges": [lo + j * w for j in range(BINS + 1)],
                         "hist": [int(v) for v in hist[i * BINS:(i + 1) * BINS]]}
        i += 1
    corr = None
    if p >= 2:
        with np.errstate(invalid="ignore", divide="ignore"):
            sd = np.sqrt(np.diag(com))
            corr = com / np.outer(sd, sd)
        np.fill_diagonal(corr, 1.0)
    return stats, corr, int(n)


def _quantiles(df: DataFrame, attrs: Sequence[Attribute]) -> Mapping[str, Any]:
    """The :data:`QUANTILES` of every numeric attribute of ``df``: one aggregation (none for an empty ``df``).

    ``percentile_approx`` with accuracy ``1 / _RELATIVE_ERROR``: the same Greenwald-Khanna sketch as
    ``DataFrame.approxQuantile``, as one SQL aggregate instead of an RDD ``treeAggregate`` (0.17-0.32 s
    against 0.25-2.2 s for 1,000 rows x 14 columns in a warm session; docs/benchmarks.md, "Issue 26,
    session 12"). Values as doubles.
    """
    names = [a.name for a in attrs if not a.categorical]
    if not names:
        return {}
    accuracy = int(round(1 / _RELATIVE_ERROR))
    row = aggregate_row(df.agg(*[F.percentile_approx(F.col(name).cast("double"), list(QUANTILES), accuracy)
                                 .alias(f"q{i}") for i, name in enumerate(names)]))
    # an empty table (or a column of nulls) has no quantiles: its entries stay None
    return {name: [float(v) for v in row[f"q{i}"]] for i, name in enumerate(names) if row[f"q{i}"] is not None}


def _with_quantiles(stats: dict, quantiles: Mapping[str, Any]) -> Mapping[str, Any]:
    for name, q in quantiles.items():
        stats[name]["quantiles"] = q
    return stats


def _numeric_rows(attrs, stats, suffix=""):
    return [[f"{a.name}{suffix}", stats[a.name]["mean"], stats[a.name]["std"], *stats[a.name]["quantiles"]]
            for a in attrs if stats[a.name]["kind"] == "numeric"]


NUMERIC_HEADER = ["attribute", "mean", "std", *[f"q{int(q * 100)}" for q in QUANTILES]]
