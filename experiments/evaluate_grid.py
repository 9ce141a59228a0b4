"""The information-loss evaluation of the fragmented-data paper's §5 on Spark (docs/specification.md §3-4).

For each dataset, scenario (centralized, horizontal with records reshuffled among owners on every
run, vertical with the ``equal`` and/or ``by-attributes`` split), category order (``dp-frequency``
with a share, ``declared``, or the paper's labelled ``data-frequency``), mechanism (iDP-IR, DP-IR;
k = 1 of iDP-IR is plain iDP), ε and k of the grid, and run: MeanSSE and the category total
variation distance of one protection against the original. One Spark task evaluates one (dataset,
scenario, split, run) for every category order and the whole (mechanism, ε, k) grid with
:func:`fragrelease.experiments.evaluation.run_once`, which sorts each fragment's attributes once and reuses them
for every cell. The per-cell mean and standard deviation are aggregated in Spark.

Every cell is scored with and without the isotonic post-processing of the noisy centroids
(``postprocess``: ``isotonic``, the release default, and ``none``, the paper's release), on the same
noise draw per run (:func:`fragrelease.experiments.evaluation.run_once`), so their ratio is measured
with paired noise; ``postprocess.csv`` holds the per-cell ratio and the paired standard error of
the difference. The paper's reproduction is the ``data-frequency`` / ``none`` series.

Every result row names its category order and share; the first order setting is the main series
of the figures (default: the release default of :mod:`fragrelease.idpir.category_order`), and the others
(by default the paper's ``data-frequency``) are kept beside it in the tables.

Noise: the evaluation uses :class:`fragrelease.rng.laplace.FastLaplace` (same Laplace distribution, numpy
PCG64 seeded from the OS CSPRNG, evaluation only) and says so in every result row; releases always
use the secure sampler.

Outputs (under ``--out``): ``results.csv`` (one row per dataset, scenario, mechanism, split, order,
post-processing, ε, k, with mean, std and runs), ``runs.csv.gz`` (one row per run),
``postprocess.csv`` (paired comparison) and the figures as PNG (:mod:`.figures`).
"""
from __future__ import annotations

import functools
import logging
import os
import time
from fractions import Fraction
from typing import Iterator, Sequence, cast

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fragrelease.errors import ConfigError, InvalidParameterError
from fragrelease.idpir.category_order import DEFAULT_CATEGORY_ORDER, DEFAULT_ORDER_SHARE
from fragrelease.idpir.postprocess import POSTPROCESS, check_postprocess
from fragrelease.rng.laplace import FAST_SAMPLER_NAME, FastLaplace
from fragrelease.schemas import adult
from fragrelease.schemas.datasets import BUILTIN_SCHEMAS, load_builtin_pandas

from .evaluation import (
    EPSILONS,
    K_GRID,
    AttributeSpec,
    OrderSetting,
    Scenario,
    postprocess_comparison,
    run_once,
)
from .paper_order import PAPER_ORDER

log = logging.getLogger(__name__)

#: Owners of Del Vasto-Terrientes et al. (ICISSP 2025) §5 (the same as conf/*-horizontal.yaml and conf/*-vertical.yaml).
HORIZONTAL_ROWS = {"adult": (11_100, 15_000, 12_000, 7_122), "wine": (500, 1_000, 4_997)}
VERTICAL_GROUPS = {
    "adult": tuple((a,) for a in adult.RELEASED),
    "wine": (("fixed_acidity", "volatile_acidity", "citric_acid"),
             ("residual_sugar", "chlorides", "free_sulfur_dioxide", "total_sulfur_dioxide"),
             ("density", "pH", "sulphates", "alcohol")),
}
MECHANISMS = ("idp-ir", "dp-ir")


def share_text(share: Fraction) -> str:
    """A share as the shortest decimal text that parses back to it exactly ("0.1"), else "a/b"."""
    text = repr(float(share))
    return text if Fraction(text) == share else str(share)


#: Default order settings: the release default (main series) and the paper's reading beside it.
ORDER_SETTINGS = (OrderSetting.parse(DEFAULT_CATEGORY_ORDER, share_text(DEFAULT_ORDER_SHARE))
                  if DEFAULT_CATEGORY_ORDER == "dp-frequency" else OrderSetting.parse(DEFAULT_CATEGORY_ORDER),
                  OrderSetting.parse(PAPER_ORDER))

RUN_SCHEMA = T.StructType([
    T.StructField("dataset", T.StringType()), T.StructField("scenario", T.StringType()),
    T.StructField("split", T.StringType()), T.StructField("run", T.IntegerType()),
    T.StructField("mechanism", T.StringType()), T.StructField("epsilon", T.StringType()),
    T.StructField("k", T.IntegerType()), T.StructField("postprocess", T.StringType()),
    T.StructField("category_order", T.StringType()),
    T.StructField("order_share", T.StringType()), T.StructField("mean_sse", T.DoubleType()),
    T.StructField("category_tvd", T.DoubleType()),
])


def order_settings(orders: Sequence[str], shares: Sequence[str]) -> list[OrderSetting]:
    """Order settings from order names and ``dp-frequency`` shares: each share gives one setting.

    Raises
    ------
    ConfigError
        Unknown order, a share outside (0, 1), shares without ``dp-frequency``, or duplicates.
    """
    out = []
    try:
        for o in orders:
            if o == "dp-frequency":
                if not shares:
                    raise ConfigError("category order 'dp-frequency' needs at least one --order-share")
                out += [OrderSetting.parse(o, s) for s in shares]
            else:
                out.append(OrderSetting.parse(o))
    except InvalidParameterError as e:
        raise ConfigError(str(e)) from e
    if shares and "dp-frequency" not in orders:
        raise ConfigError(f"order shares {list(shares)} given but no 'dp-frequency' category order")
    labels = [o.label for o in out]
    if len(set(labels)) != len(labels) or not out:
        raise ConfigError(f"category order settings must be distinct and non-empty, not {labels}")
    return out


def postprocess_values(values: Sequence[str]) -> list[str]:
    """Validate the post-processing values of the grid: distinct, non-empty, each in ``POSTPROCESS``.

    Raises
    ------
    ConfigError
        An unknown value (named), a repeated value or an empty list.
    """
    values = list(values)
    try:
        for p in values:
            check_postprocess(p)
    except InvalidParameterError as e:
        raise ConfigError(str(e)) from e
    if not values or len(set(values)) != len(values):
        raise ConfigError(f"postprocess values must be distinct and non-empty, not {values}")
    return values


def scenarios_for(dataset: str, names: Sequence[str], splits: Sequence[str]) -> list[Scenario]:
    """The scenarios of Del Vasto-Terrientes et al. (ICISSP 2025) §5 for a built-in dataset."""
    base = "wine" if dataset.startswith("wine") else dataset
    out = []
    for name in names:
        if name == "centralized":
            out.append(Scenario("centralized"))
        elif name == "horizontal":
            out.append(Scenario("horizontal", owner_rows=HORIZONTAL_ROWS[base]))
        elif name == "vertical":
            out += [Scenario("vertical", owner_attributes=VERTICAL_GROUPS[base], split=s) for s in splits]
        else:
            raise ConfigError(f"scenario must be centralized, horizontal or vertical, not {name!r}")
    return out


@functools.lru_cache(maxsize=4)
def _dataset_arrays(dataset: str):
    schema = BUILTIN_SCHEMAS[dataset]
    pdf = load_builtin_pandas(dataset)
    specs = [AttributeSpec.from_attribute(a) for a in schema.protected]
    data = {s.name: pdf[s.name].to_numpy(object if s.categorical else float) for s in specs}
    return data, pdf[schema.id_column].to_numpy(), specs


def _evaluate_tasks(batches: Iterator[pd.DataFrame], grid: dict) -> Iterator[pd.DataFrame]:
    for tasks in batches:
        rows = []
        for t in tasks.itertuples(index=False):
            dataset, scenario = str(t.dataset), str(t.scenario)
            data, ids, specs = _dataset_arrays(dataset)
            scen = scenarios_for(dataset, [scenario], [cast(str, t.split)])[0]  # a string column
            cache: dict = {}
            noise = FastLaplace()
            for setting in grid["orders"]:
                for r in run_once(data, ids, specs, scen, mechanisms=grid["mechanisms"], epsilons=grid["epsilons"],
                                  ks=grid["ks"][dataset], noise=noise, convention=grid["convention"],
                                  sorted_cache=cache, category_order=setting, postprocess=grid["postprocess"]):
                    rows.append((dataset, scenario, t.split, int(str(t.run)), r["mechanism"], r["epsilon"], r["k"],
                                 r["postprocess"], r["category_order"], r["order_share"], r["mean_sse"], r["category_tvd"]))
        yield pd.DataFrame(rows, columns=[f.name for f in RUN_SCHEMA.fields])


def evaluate_grid(
    spark,
    datasets: Sequence[str],
    *,
    scenarios: Sequence[str] = ("centralized", "horizontal", "vertical"),
    splits: Sequence[str] = ("equal",),
    mechanisms: Sequence[str] = MECHANISMS,
    epsilons: Sequence[str] = EPSILONS,
    ks: dict | None = None,
    runs: int = 50,
    convention: str = "authors",
    orders: Sequence[OrderSetting] = ORDER_SETTINGS,
    postprocess: Sequence[str] = POSTPROCESS,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run the grid on Spark; return (per-cell summary, per-run results) as pandas (small tables).

    ``orders``: the category-order settings, each evaluated on every (dataset, scenario, run); every
    row names its ``category_order`` and ``order_share``. ``postprocess``: the finishing steps, each
    scored on the same noise draw of a run; every row names its ``postprocess``. Summary columns: ``mean_sse`` and ``std``
    (MeanSSE over the runs), ``category_tvd`` and ``category_tvd_std`` (mean TVD over the
    categorical attributes; empty for an all-numeric dataset), ``runs``, ``convention``, ``sampler``.

    Raises
    ------
    ConfigError
        Unknown dataset, scenario or post-processing, or runs < 1.
    """
    postprocess = postprocess_values(postprocess)
    if runs < 1:
        raise ConfigError(f"runs must be >= 1, not {runs}")
    for d in datasets:
        if d not in BUILTIN_SCHEMAS:
            raise ConfigError(f"the evaluation runs on the built-in datasets {sorted(BUILTIN_SCHEMAS)}, not {d!r}")
    ks = ks or {d: K_GRID["wine" if d.startswith("wine") else d] for d in datasets}
    orders = list(orders)
    if not orders or not all(isinstance(o, OrderSetting) for o in orders):
        raise ConfigError(f"orders must be a non-empty list of OrderSetting, not {orders!r}")
    grid = {"mechanisms": list(mechanisms), "epsilons": list(epsilons), "ks": ks, "convention": convention,
            "orders": orders, "postprocess": postprocess}
    tasks = [(d, s.name, s.split, r) for d in datasets for s in scenarios_for(d, scenarios, splits)
             for r in range(runs)]
    task_df = spark.createDataFrame(tasks, "dataset string, scenario string, split string, run int")
    task_df = task_df.repartition(max(1, min(len(tasks), 4 * _parallelism(spark))))
    per_run = task_df.mapInPandas(lambda it: _evaluate_tasks(it, grid), schema=RUN_SCHEMA)
    per_run = per_run.localCheckpoint(eager=True)
    tvd = F.when(F.isnan("category_tvd"), None).otherwise(F.col("category_tvd"))
    summary_pdf = (per_run.groupBy("dataset", "scenario", "mechanism", "split", "category_order", "order_share",
                                   "postprocess", "epsilon", "k")
                   .agg(F.avg("mean_sse").alias("mean_sse"), F.stddev_samp("mean_sse").alias("std"),
                        F.avg(tvd).alias("category_tvd"), F.stddev_samp(tvd).alias("category_tvd_std"),
                        F.count(F.lit(1)).alias("runs"))
                   .toPandas())
    summary_pdf["convention"] = convention
    summary_pdf["sampler"] = FAST_SAMPLER_NAME
    rank = {(o.order, o.share): i for i, o in enumerate(orders)}
    summary_pdf["_order"] = [rank[(o, s)] for o, s in zip(summary_pdf["category_order"], summary_pdf["order_share"],
                                                          strict=True)]
    summary_pdf["_post"] = [postprocess.index(p) for p in summary_pdf["postprocess"]]
    summary_pdf = (summary_pdf.sort_values(["dataset", "_order", "_post", "scenario", "split", "mechanism", "epsilon",
                                            "k"], key=_sort_key).drop(columns=["_order", "_post"])
                   .reset_index(drop=True))
    return summary_pdf, per_run.toPandas()


def _sort_key(col: pd.Series) -> pd.Series:
    if col.name == "epsilon":
        return col.astype(float)
    return col


def _parallelism(spark) -> int:
    try:
        return int(spark.conf.get("spark.default.parallelism"))
    except Exception:
        return os.cpu_count() or 2


def run_evaluation(spark, datasets: Sequence[str], out_dir: str, **kwargs) -> dict:
    """Evaluate, write ``results.csv`` / ``runs.csv`` and the figures; return paths and the runtime."""
    from .figures import plot_all

    os.makedirs(out_dir, exist_ok=True)
    t0 = time.perf_counter()
    summary, per_run = evaluate_grid(spark, datasets, **kwargs)
    seconds = time.perf_counter() - t0
    summary.to_csv(os.path.join(out_dir, "results.csv"), index=False)
    per_run.to_csv(os.path.join(out_dir, "runs.csv.gz"), index=False, compression="gzip")
    paired = postprocess_comparison(per_run)
    paths = {}
    if len(paired):
        paths["postprocess"] = os.path.join(out_dir, "postprocess.csv")
        paired.sort_values(["dataset", "category_order", "scenario", "split", "mechanism", "epsilon", "k"],
                           key=_sort_key).to_csv(paths["postprocess"], index=False)
    main = kwargs.get("orders", ORDER_SETTINGS)[0]
    posts = list(kwargs.get("postprocess", POSTPROCESS))
    # The paper's figures show the paper's finishing step when it was evaluated; the comparison figures both.
    main_post = "none" if "none" in posts else posts[0]
    figures = plot_all(summary, out_dir, main=(main.order, main.share), main_postprocess=main_post, paired=paired)
    log.warning("evaluation of %s took %.1f s", ",".join(datasets), seconds)
    return {"seconds": seconds, "results": os.path.join(out_dir, "results.csv"), "figures": figures, **paths,
            "cells": len(summary), "runs": int(summary["runs"].max()) if len(summary) else 0}
