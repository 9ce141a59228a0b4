"""The information-loss evaluation of paper 000 §5 on Spark (SPEC.md §3-4).

For each dataset, scenario (centralized, horizontal with records reshuffled among owners on every
run, vertical with the ``equal`` and/or ``by-attributes`` split), mechanism (iDP-IR, DP-IR; k = 1
of iDP-IR is plain iDP), ε and k of the grid, and run: MeanSSE of one protection against the
original. One Spark task evaluates one (dataset, scenario, split, run) for the whole (mechanism, ε,
k) grid with :func:`fragrelease.evaluation.run_once`, which sorts each fragment's attributes once
and reuses them for every cell. The per-cell mean and standard deviation are aggregated in Spark.

Noise: the evaluation uses :class:`fragrelease.rng.FastLaplace` (same Laplace distribution, numpy
PCG64 seeded from the OS CSPRNG, evaluation only) and says so in every result row; releases always
use the secure sampler.

Outputs (under ``--out``): ``results.csv`` (one row per dataset, scenario, mechanism, split, ε, k,
with mean, std and runs), ``runs.csv`` (one row per run) and the paper's figures as PNG
(:mod:`.figures`).
"""
from __future__ import annotations

import functools
import logging
import os
import time
from typing import Iterator, Sequence

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fragrelease.errors import ConfigError
from fragrelease.evaluation import EPSILONS, K_GRID, AttributeSpec, Scenario, run_once
from fragrelease.rng import FAST_SAMPLER_NAME, FastLaplace
from fragrelease.schemas import adult
from fragrelease.schemas.datasets import BUILTIN_SCHEMAS, load_builtin_pandas

log = logging.getLogger(__name__)

#: Owners of paper 000 §5 (the same as conf/*-horizontal.yaml and conf/*-vertical.yaml).
HORIZONTAL_ROWS = {"adult": (11_100, 15_000, 12_000, 7_122), "wine": (500, 1_000, 4_997)}
VERTICAL_GROUPS = {
    "adult": tuple((a,) for a in adult.RELEASED),
    "wine": (("fixed_acidity", "volatile_acidity", "citric_acid"),
             ("residual_sugar", "chlorides", "free_sulfur_dioxide", "total_sulfur_dioxide"),
             ("density", "pH", "sulphates", "alcohol")),
}
MECHANISMS = ("idp-ir", "dp-ir")

RUN_SCHEMA = T.StructType([
    T.StructField("dataset", T.StringType()), T.StructField("scenario", T.StringType()),
    T.StructField("split", T.StringType()), T.StructField("run", T.IntegerType()),
    T.StructField("mechanism", T.StringType()), T.StructField("epsilon", T.StringType()),
    T.StructField("k", T.IntegerType()), T.StructField("mean_sse", T.DoubleType()),
])


def scenarios_for(dataset: str, names: Sequence[str], splits: Sequence[str]) -> list[Scenario]:
    """The scenarios of paper 000 §5 for a built-in dataset."""
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
            data, ids, specs = _dataset_arrays(t.dataset)
            scen = scenarios_for(t.dataset, [t.scenario], [t.split])[0]
            cache = {}
            for r in run_once(data, ids, specs, scen, mechanisms=grid["mechanisms"], epsilons=grid["epsilons"],
                              ks=grid["ks"][t.dataset], noise=FastLaplace(), convention=grid["convention"],
                              sorted_cache=cache):
                rows.append((t.dataset, t.scenario, t.split, int(t.run), r["mechanism"], r["epsilon"], r["k"], r["mean_sse"]))
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
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run the grid on Spark; return (per-cell summary, per-run results) as pandas (small tables).

    Raises
    ------
    ConfigError
        Unknown dataset or scenario, or runs < 1.
    """
    if runs < 1:
        raise ConfigError(f"runs must be >= 1, not {runs}")
    for d in datasets:
        if d not in BUILTIN_SCHEMAS:
            raise ConfigError(f"the evaluation runs on the built-in datasets {sorted(BUILTIN_SCHEMAS)}, not {d!r}")
    ks = ks or {d: K_GRID["wine" if d.startswith("wine") else d] for d in datasets}
    grid = {"mechanisms": list(mechanisms), "epsilons": list(epsilons), "ks": ks, "convention": convention}
    tasks = [(d, s.name, s.split, r) for d in datasets for s in scenarios_for(d, scenarios, splits)
             for r in range(runs)]
    task_df = spark.createDataFrame(tasks, "dataset string, scenario string, split string, run int")
    task_df = task_df.repartition(max(1, min(len(tasks), 4 * _parallelism(spark))))
    per_run = task_df.mapInPandas(lambda it: _evaluate_tasks(it, grid), schema=RUN_SCHEMA)
    per_run = per_run.localCheckpoint(eager=True)
    summary_pdf = (per_run.groupBy("dataset", "scenario", "mechanism", "split", "epsilon", "k")
                   .agg(F.avg("mean_sse").alias("mean_sse"), F.stddev_samp("mean_sse").alias("std"),
                        F.count(F.lit(1)).alias("runs"))
                   .toPandas())
    summary_pdf["convention"] = convention
    summary_pdf["sampler"] = FAST_SAMPLER_NAME
    summary_pdf = summary_pdf.sort_values(["dataset", "scenario", "split", "mechanism", "epsilon", "k"],
                                          key=_sort_key).reset_index(drop=True)
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
    figures = plot_all(summary, out_dir)
    log.warning("evaluation of %s took %.1f s", ",".join(datasets), seconds)
    return {"seconds": seconds, "results": os.path.join(out_dir, "results.csv"), "figures": figures,
            "cells": len(summary), "runs": int(summary["runs"].max()) if len(summary) else 0}
