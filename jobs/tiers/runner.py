"""The tiers job: a chain of releases with increasing privacy (docs/specification.md §6; Chang & Wu (SPME 2014)).

From a source table ``T_0``, δ and a chain length ``l``, the job computes ``T_1..T_l`` with
``P(T_i) < (l - i + 1)·δ``, each from ``T_{i-1}`` alone, and commits each as its own Delta table
``<output>/tier_<i>`` with ``P(T_i)`` in the commit's provenance (``UL(T_i)``, which involves the
source's dispersion, is returned to the operator only). The row ids are replaced by CSPRNG
surrogates before ``T_1``, and a chain whose loosest threshold ``l·δ`` is at or above the
disclosure of singleton classes is refused (docs/specification.md §6).

How the work is spread (the math is :mod:`fragrelease.tiers`; nothing here re-implements it):

- per node of TDA's top-down tree, ``groupBy("node").applyInPandas`` runs
  :func:`fragrelease.tiers.node_step`: nodes above ``max_node_rows`` rows are split once per pass
  (level by level), smaller nodes are solved whole in one call (TDA: phase I + PLSA; FLA: the
  BUA-or-TDA choice in every node). BUA merges groups across the whole table, so its one group
  is the whole table (one task holds all rows: fine for tables up to ~10^5 rows; use TDA or FLA
  beyond);
- the table facts every group needs (the sensitive distribution, each quasi-identifier's range
  and mean) are Spark aggregates;
- ``P(T)`` is a per-class grouped UDF over the class × sensitive-value counts, then a ``max``;
  ``UL`` and FLA's utilities ``U`` are sums of per-row distances (Spark aggregates).

No row-level data reaches the driver. Each pass is materialized (``localCheckpoint``) so the loop's
plan stays short. The output of every step is deterministic (ties by row number), so running the
same chain twice gives identical tables (the paper's Theorem 2).
"""
from __future__ import annotations

import logging
import posixpath
from fractions import Fraction
from typing import Callable, Mapping, Optional

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fragrelease import tiers as tm
from fragrelease.errors import ConfigError, DomainError, InvalidParameterError, SchemaMismatchError
from fragrelease.udfs.noise import secure_random_key_udf

from ..frames import aggregate_row
from ..storage import absolute, commit_release, read_source, refuse_existing

log = logging.getLogger(__name__)

#: Built-in sources: dataset → (sensitive attribute default, quasi-identifiers default, row id).
GERMAN_DEFAULT_SENSITIVE = "credit_class"
ADULT_DEFAULT_SENSITIVE = "occupation"
ADULT_DEFAULT_QUASI_IDENTIFIERS = ("age", "education-num", "capital-gain", "capital-loss", "hours-per-week")

_NUMERIC = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DecimalType)
_INTEGER = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def load_source(spark, dataset: str, *, fmt: str = "parquet", sensitive: Optional[str] = None,
                quasi_identifiers: Optional[list[str]] = None, row_id: str = "record_id"):
    """The source table ``T_0`` and its default roles.

    ``dataset``: ``german`` (UCI German Credit, all 24 attributes as quasi-identifiers, credit
    class sensitive), ``adult`` (numeric quasi-identifiers, default sensitive ``occupation``) or a
    path read as ``fmt`` (parquet, delta or csv; ``quasi_identifiers`` and ``sensitive`` required).

    Returns
    -------
    (DataFrame, quasi_identifiers, sensitive, row_id)

    Raises
    ------
    ConfigError
        A path without ``quasi_identifiers`` / ``sensitive``.
    """
    from fragrelease.schemas.datasets import GERMAN_COLUMNS, load_builtin, load_german_credit_pandas

    if dataset == "german":
        df = spark.createDataFrame(load_german_credit_pandas())
        qi = quasi_identifiers or [c for c in GERMAN_COLUMNS if c != GERMAN_DEFAULT_SENSITIVE]
        return df, list(qi), sensitive or GERMAN_DEFAULT_SENSITIVE, row_id
    if dataset == "adult":
        return (load_builtin(spark, "adult"), list(quasi_identifiers or ADULT_DEFAULT_QUASI_IDENTIFIERS),
                sensitive or ADULT_DEFAULT_SENSITIVE, row_id)
    if not quasi_identifiers or not sensitive:
        raise ConfigError(f"source {dataset!r} is not built in (german, adult): give --qi and --sensitive")
    return read_source(spark, dataset, fmt), list(quasi_identifiers), sensitive, row_id


def validate_source(df: DataFrame, cols: tm.TierColumns) -> None:
    """Check the source's columns, types, nulls and row ids with Spark aggregates.

    Raises
    ------
    SchemaMismatchError
        A missing column, a non-numeric quasi-identifier or a non-integer row id.
    DomainError
        Nulls or NaN in a used column, duplicate row ids, or an empty table.
    """
    fields = {f.name: f.dataType for f in df.schema.fields}
    for c in (*cols.quasi_identifiers, cols.sensitive, cols.row_id):
        if c not in fields:
            raise SchemaMismatchError(f"column {c!r} is not in the source (columns: {list(fields)})")
    for c in cols.quasi_identifiers:
        if not isinstance(fields[c], _NUMERIC):
            raise SchemaMismatchError(f"quasi-identifier {c!r} must be numeric, not {fields[c].simpleString()}")
    if not isinstance(fields[cols.row_id], _INTEGER):
        raise SchemaMismatchError(f"row id {cols.row_id!r} must be an integer column, not {fields[cols.row_id].simpleString()}")
    used = [*cols.quasi_identifiers, cols.sensitive, cols.row_id]
    aggs = [F.count(F.lit(1)).alias("__n"), F.countDistinct(F.col(cols.row_id)).alias("__ids")]
    for i, c in enumerate(used):
        bad = F.col(c).isNull()
        if c in cols.quasi_identifiers and isinstance(fields[c], (T.FloatType, T.DoubleType)):
            bad = bad | F.isnan(F.col(c)) | F.col(c).isin(float("inf"), float("-inf"))
        aggs.append(F.sum(F.when(bad, 1).otherwise(0)).alias(f"__bad{i}"))
    row = aggregate_row(df.agg(*aggs))
    if row["__n"] == 0:
        raise DomainError("the source table has no rows")
    for i, c in enumerate(used):
        if row[f"__bad{i}"]:
            raise DomainError(f"column {c!r} has {row[f'__bad{i}']} null or non-finite value(s)")
    if row["__ids"] != row["__n"]:
        raise DomainError(f"row id {cols.row_id!r} has duplicate values ({row['__n'] - row['__ids']} duplicates)")


def prepare(df: DataFrame, cols: tm.TierColumns, standardize: bool) -> DataFrame:
    """``T_0``: the row id, the quasi-identifiers as doubles (z-scores when ``standardize``) and the sensitive value.

    Standardizing uses the table's mean and population standard deviation (aggregates; never
    published); a constant column becomes 0.
    """
    qi = list(cols.quasi_identifiers)
    out = df.select(F.col(cols.row_id).cast("long").alias(cols.row_id),
                    *[F.col(c).cast("double").alias(c) for c in qi], F.col(cols.sensitive))
    if not standardize:
        return out
    # the one-row table of means and deviations is joined, not inlined: statistics of the table
    # never become literals of a Spark plan (explain output, the UI, event logs)
    stats = out.agg(*[F.avg(c).alias(f"__m{i}") for i, c in enumerate(qi)],
                    *[F.stddev_pop(c).alias(f"__s{i}") for i, c in enumerate(qi)])
    cols_out = [F.col(cols.row_id)]
    for i, c in enumerate(qi):
        m, sd = F.col(f"__m{i}"), F.col(f"__s{i}")
        cols_out.append(F.when(sd > 0, (F.col(c) - m) / sd).otherwise(F.lit(0.0)).alias(c))
    return out.crossJoin(F.broadcast(stats)).select(*cols_out, F.col(cols.sensitive))


def assign_surrogate_ids(df: DataFrame, cols: tm.TierColumns) -> DataFrame:
    """``df`` with its row-id column replaced by CSPRNG surrogates, materialized.

    Each row gets a uniform 63-bit key from the OS CSPRNG (:func:`fragrelease.udfs.noise.secure_random_key_udf`,
    drawn on the executors); the keys are materialized at once (``localCheckpoint``) so that no later
    action recomputes different ones, and redrawn if two collide (probability < n² / 2⁶⁴; checked with
    a Spark aggregate). Other columns are kept. The map back to the input's ids is not kept
    (docs/tiers.md, Limits). Source: docs/specification.md §6.
    """
    key = secure_random_key_udf()
    for _ in range(3):
        out = df.withColumn(cols.row_id, key(F.col(cols.row_id))).localCheckpoint(eager=True)
        row = aggregate_row(out.agg(F.count(F.lit(1)).alias("n"), F.countDistinct(cols.row_id).alias("d")))
        if row["n"] == row["d"]:
            return out
    raise DomainError(f"surrogate ids for {cols.row_id!r} collided three times; the key source is broken")


def table_context(df: DataFrame, cols: tm.TierColumns, values: tuple) -> tm.TableContext:
    """:class:`fragrelease.tiers.TableContext` of a table from Spark aggregates."""
    qi = list(cols.quasi_identifiers)
    row = aggregate_row(df.agg(*[F.min(c).alias(f"lo{i}") for i, c in enumerate(qi)],
                               *[F.max(c).alias(f"hi{i}") for i, c in enumerate(qi)],
                               *[F.avg(c).alias(f"m{i}") for i, c in enumerate(qi)]))
    per_value = aggregate_row(df.agg(*[F.sum(F.when(F.col(cols.sensitive) == F.lit(v), 1).otherwise(0)).alias(f"c{j}")
                                       for j, v in enumerate(values)]))
    c = np.array([float(per_value[f"c{j}"] or 0) for j in range(len(values))])
    lo = np.array([float(row[f"lo{i}"]) for i in range(len(qi))])
    hi = np.array([float(row[f"hi{i}"]) for i in range(len(qi))])
    mean = np.array([float(row[f"m{i}"]) for i in range(len(qi))])
    return tm.TableContext(tuple(values), c / c.sum(), np.asarray(cols.weights, dtype=float), hi - lo, mean)


def sensitive_values(df: DataFrame, cols: tm.TierColumns) -> tuple:
    """The sensitive attribute's distinct values (an aggregate), in the order of :func:`fragrelease.tiers.sensitive_values`."""
    vals = [r[0] for r in df.select(cols.sensitive).distinct().collect()]
    return tm.sensitive_values(pd.Series(vals, dtype=object))


def sanitize_df(df: DataFrame, cols: tm.TierColumns, ctx: tm.TableContext, theta: float, algorithm: str, *,
                max_node_rows: int = tm.DEFAULT_MAX_NODE_ROWS, reading: str = "tree") -> DataFrame:
    """One sanitization of ``df`` at θ on Spark: :func:`fragrelease.tiers.solve`, node by node.

    Columns in and out: row id (long), quasi-identifiers (double), sensitive (unchanged type). The
    output's quasi-identifiers are class means; the result is materialized.
    """
    schema = df.schema
    step_schema = T.StructType(list(schema.fields) + [T.StructField("node", T.LongType()),
                                                      T.StructField("__done", T.BooleanType())])
    names = [f.name for f in schema.fields]

    def step(pdf: pd.DataFrame) -> pd.DataFrame:
        out, done = tm.node_step(pdf[names], cols, ctx, theta, algorithm, max_node_rows, reading)
        if "node" not in out.columns:
            out["node"] = np.int64(-1)
        out["__done"] = done
        return out[names + ["node", "__done"]]

    work = df.withColumn("node", F.lit(-1).cast("long"))
    finished: list[DataFrame] = []
    while True:
        out = work.groupBy("node").applyInPandas(step, schema=step_schema).localCheckpoint(eager=True)
        finished.append(out.where(F.col("__done")).select(*names))
        work = out.where(~F.col("__done")).drop("__done")
        if work.limit(1).count() == 0:
            break
    if len(finished) == 1:
        return finished[0]
    result = finished[0]
    for part in finished[1:]:
        result = result.unionByName(part)
    return result.localCheckpoint(eager=True)


def utility_df(df: DataFrame, cols: tm.TierColumns, mean: np.ndarray) -> float:
    """``U(T) = Σ_rows d(t, T~)`` with ``T~`` every row at ``mean`` (a Spark sum).

    ``mean`` (the source table's mean, data-dependent) is joined as a one-row table rather than
    written into the expression, so it never becomes a literal of a Spark plan; the weights are
    public parameters.
    """
    qi = list(cols.quasi_identifiers)
    centre = df.sparkSession.createDataFrame([tuple(float(m) for m in mean)],
                                             ", ".join(f"`__c{i}` double" for i in range(len(qi))))
    terms = [F.lit(float(w)) * (F.col(c) - F.col(f"__c{i}")) ** 2
             for i, (c, w) in enumerate(zip(qi, cols.weights))]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return float(aggregate_row(df.crossJoin(F.broadcast(centre)).agg(F.sum(F.sqrt(total))))[0] or 0.0)


def disclosure_df(df: DataFrame, cols: tm.TierColumns, values: tuple, p: np.ndarray) -> float:
    """``P(T)``: max over classes (identical quasi-identifiers) of JS(table, class), per-class grouped UDF."""
    qi = list(cols.quasi_identifiers)
    counts = df.groupBy(*qi, cols.sensitive).count()

    def js(pdf: pd.DataFrame) -> pd.DataFrame:
        c = np.zeros(len(values))
        for v, n in zip(pdf[cols.sensitive].tolist(), pdf["count"].tolist()):
            c[values.index(v)] += n
        return pd.DataFrame({"js": [tm.disclosure(c[None, :], p)]})

    return float(aggregate_row(counts.groupBy(*qi).applyInPandas(js, schema="js double").agg(F.max("js")))[0])


def tier_guarantee(tier: int, threshold) -> str:
    """What tier ``tier`` states in its provenance: the paper's disclosure bound, from the public threshold.

    Chang & Wu (SPME 2014), docs/specification.md §6: every class's sensitive distribution is within
    the threshold of the table's (max Jensen-Shannon divergence, log2). Not differential privacy.
    """
    return (f"tier {tier}: the disclosure P(T) (max Jensen-Shannon divergence, log2, between a class's and the "
            f"table's sensitive distribution) is below the threshold {threshold} (Chang & Wu, SPME 2014); "
            "not differential privacy")


def sanitize_tier(df: DataFrame, cols: tm.TierColumns, values: tuple, theta: float, algorithm: str,
                  next_theta: Optional[float], *, max_node_rows: int = tm.DEFAULT_MAX_NODE_ROWS,
                  reading: str = "tree") -> DataFrame:
    """One hop on Spark; the same as :func:`fragrelease.tiers.sanitize` (FLA's look-ahead included)."""
    ctx = table_context(df, cols, values)
    if algorithm != "fla" or next_theta is None:
        return sanitize_df(df, cols, ctx, theta, algorithm, max_node_rows=max_node_rows, reading=reading)
    strict = sanitize_df(df, cols, ctx, next_theta, "fla", max_node_rows=max_node_rows, reading=reading)
    current = sanitize_df(df, cols, ctx, theta, "fla", max_node_rows=max_node_rows, reading=reading)
    following = sanitize_df(current, cols, table_context(current, cols, values), next_theta, "fla",
                            max_node_rows=max_node_rows, reading=reading)
    u = [utility_df(t, cols, ctx.mean) for t in (strict, current, following)]
    return strict if tm.fla_choose(*u) else current


def build_chain(source: DataFrame, cols: tm.TierColumns, delta, hops: int, algorithm: str = "fla", *,
                max_node_rows: int = tm.DEFAULT_MAX_NODE_ROWS, reading: str = "tree",
                progress: Optional[Callable[[str], None]] = None, surrogate_ids: bool = True) -> list[dict]:
    """Compute ``T_1..T_l`` from a prepared source (see :func:`prepare`); nothing is written.

    Like :func:`fragrelease.tiers.run_chain`: a chain whose loosest threshold ``l·δ`` is at or above
    the source's singleton disclosure is refused before any work, and the row ids are replaced by
    CSPRNG surrogates (:func:`assign_surrogate_ids`) before ``T_1``. ``surrogate_ids=False`` keeps
    the source's ids (tests only; :func:`run_tiers` never passes it).

    Returns
    -------
    one dict per tier: ``tier``, ``threshold`` (Fraction), ``table`` (materialized DataFrame with
    the source's columns), ``disclosure`` ``P(T_i)``, ``utility_loss`` ``UL(T_i)`` vs the source.

    Raises
    ------
    ThresholdTooLooseError
        ``l·δ`` at or above the singleton disclosure (operator output only).
    InvalidParameterError
        Bad δ, hops or algorithm; or (a bug) a tier whose ``P`` is not below its threshold.
    """
    ths = tm.thresholds(delta, hops)
    if algorithm not in tm.ALGORITHMS:
        raise InvalidParameterError(f"algorithm must be one of {list(tm.ALGORITHMS)}, not {algorithm!r}")
    if isinstance(max_node_rows, bool) or not isinstance(max_node_rows, int) or max_node_rows < 2:
        raise InvalidParameterError(f"max_node_rows must be an integer >= 2, not {max_node_rows!r}")
    values = sensitive_values(source, cols)
    ctx0 = table_context(source, cols, values)
    # the singleton disclosure is an aggregate of the source's sensitive values: the refusal goes to the
    # operator (stderr of the CLI) only; it is raised before anything is committed, so no tier's
    # provenance can hold it
    tm.refuse_loose_thresholds(ths, tm.singleton_disclosure(ctx0.p))
    if surrogate_ids:
        source = assign_surrogate_ids(source, cols)  # before T_1: no tier carries the input's ids
    base = utility_df(source, cols, ctx0.mean)
    prev, out = source, []
    for i, th in enumerate(ths, start=1):
        if progress:
            progress(f"tier {i}/{hops}: P < {float(th):g} ({algorithm})")
        nxt = float(ths[i]) if i < len(ths) else None
        table = sanitize_tier(prev, cols, values, float(th), algorithm, nxt, max_node_rows=max_node_rows, reading=reading)
        p = disclosure_df(table, cols, values, ctx0.p)
        if not p < float(th):
            raise InvalidParameterError(f"tier {i} has P = {p} which is not below its threshold {th}; refusing to release")
        ul = 1.0 - utility_df(table, cols, ctx0.mean) / base if base > 0 else 0.0
        out.append({"tier": i, "threshold": th, "table": table, "disclosure": p, "utility_loss": ul})
        prev = table
    return out


def tier_path(output: str, i: int) -> str:
    """Where tier ``i`` is written: ``<output>/tier_<i>``."""
    return posixpath.join(absolute(output), f"tier_{i}")


def tiers_provenance(params: tm.TiersParams, cols: tm.TierColumns, delta: Fraction) -> Mapping[str, object]:
    """The public facts every tier of a release carries (parameters and resolved roles only; no data).

    Stamped into each tier's commit by :func:`fragrelease.jobs.storage.commit_release` (the one
    commit and provenance contract), with the tier's ``tier``, ``threshold`` and ``disclosure`` added.
    """
    return {
        "release": "tiers", "paper": "Chang & Wu (SPME 2014); docs/specification.md §6",
        "source": params.dataset if params.builtin else "path",
        "delta": str(delta), "hops": params.hops, "algorithm": params.algorithm,
        "fla_reading": params.reading if params.algorithm == "fla" else None,
        "quasi_identifiers": list(cols.quasi_identifiers), "sensitive": cols.sensitive, "row_id": cols.row_id,
        "weights": dict(zip(cols.quasi_identifiers, cols.weights)), "standardized": bool(params.standardize),
        "max_node_rows": params.max_node_rows, "disclosure_measure": "max JS divergence (log2) class vs table",
        "row_ids": "CSPRNG surrogates drawn before tier 1 (not the source's ids; no map kept)",
    }


def run_tiers(spark, params: tm.TiersParams, *,
              progress: Optional[Callable[[str], None]] = None) -> tm.TiersResult:
    """The tiers job: read, validate, build the chain and commit one Delta table per tier.

    Parameters
    ----------
    params : the release's parameters (:class:`fragrelease.tiers.TiersParams`): the source
        (``german``, ``adult`` or a path, see :func:`load_source`), δ > 0, the chain length l ≥ 1,
        the output folder, the algorithm, roles, weights (missing ones get 0; normalized to sum 1;
        default uniform) and ``standardize`` (z-scores: the released tiers then hold z-scores).
    progress : called with one line as each step starts (optional).

    Returns
    -------
    :class:`fragrelease.tiers.TiersResult`: one :class:`~fragrelease.tiers.TierRelease` per tier
    (tier, path, version, threshold, disclosure, utility_loss) and the shared provenance.

    Raises
    ------
    InvalidParameterError, SchemaMismatchError, DomainError, ConfigError
        Bad parameters or source (the message names the value).
    ReleaseExistsError
        A tier table exists and ``if_exists == "error"`` (checked before any work).
    """
    d = tm.parse_delta(params.delta)
    hops, algorithm, reading, output = params.hops, params.algorithm, params.reading, params.output
    tm.thresholds(d, hops)
    if algorithm not in tm.ALGORITHMS:
        raise InvalidParameterError(f"algorithm must be one of {list(tm.ALGORITHMS)}, not {algorithm!r}")
    if reading not in ("tree", "leaves"):
        raise InvalidParameterError(f"FLA reading must be 'tree' or 'leaves', not {reading!r}")
    for i in range(1, hops + 1):
        refuse_existing(path=tier_path(output, i), if_exists=params.if_exists)
    raw, qi, sens, rid = load_source(spark, params.dataset, fmt=params.fmt, sensitive=params.sensitive,
                                     quasi_identifiers=list(params.quasi_identifiers or []) or None,
                                     row_id=params.row_id)
    w = None
    if params.weights:
        unknown = sorted(set(params.weights) - set(qi))
        if unknown:
            raise InvalidParameterError(f"weights given for columns that are not quasi-identifiers: {unknown}")
        w = [float(params.weights.get(c, 0.0)) for c in qi]
    cols = tm.TierColumns.make(qi, sens, rid, w)
    validate_source(raw, cols)
    source = prepare(raw, cols, params.standardize).localCheckpoint(eager=True)
    chain = build_chain(source, cols, d, hops, algorithm, max_node_rows=params.max_node_rows, reading=reading,
                        progress=progress)
    base = tiers_provenance(params, cols, d)
    written = []
    for t in chain:
        path = tier_path(output, t["tier"])
        if progress:
            progress(f"committing tier {t['tier']} to {path}")
        # P(T_i) can be recomputed from the tier itself; UL(T_i) involves the source's dispersion, so it is
        # returned and printed to the operator but never written into the release
        guarantee = tier_guarantee(t["tier"], t["threshold"])
        _, version = commit_release(t["table"], system="tiers", guarantee=guarantee, path=path,
                                    provenance={**base, "tier": t["tier"], "threshold": str(t["threshold"]),
                                                "disclosure": t["disclosure"]},
                                    if_exists=params.if_exists)
        written.append(tm.TierRelease(tier=t["tier"], path=path, version=version, threshold=t["threshold"],
                                      disclosure=t["disclosure"], utility_loss=t["utility_loss"]))
    return tm.TiersResult(tiers=tuple(written), provenance=base)
