"""``fragrelease`` experiment commands of the IR mechanisms (the paper's evaluation, docs/specification.md §5;
the empirical privacy audit), registered in ``jobs/cli/__init__.py``.

    fragrelease evaluate ...                    the paper's (ε, k) grid: MeanSSE and category TVD
    fragrelease audit ...                       empirical privacy audit of iDP-IR / DP-IR on one attribute

These are experiments on the IR mechanisms themselves, not steps of a release: they import
:mod:`fragrelease.experiments` and the IR math inside each command, and no release path imports them.
"""
from __future__ import annotations

from typing import Optional

import typer
from rich.table import Table

from fragrelease.errors import FragReleaseError

from . import _common
from ._common import MASTER, console


def evaluate(
    dataset: list[str] = typer.Option(["adult", "wine"], "--dataset", help="Built-in dataset(s): adult, wine, wine-2max."),
    out: str = typer.Option("docs/evaluation", help="Folder for results.csv, runs.csv.gz and the figures."),
    runs: int = typer.Option(50, help="Runs per cell."),
    scenario: list[str] = typer.Option(["centralized", "horizontal", "vertical"], "--scenario"),
    split: list[str] = typer.Option(["equal", "by-attributes"], "--split", help="Vertical budget split(s)."),
    mechanism: list[str] = typer.Option(["idp-ir", "dp-ir"], "--mechanism"),
    epsilon: Optional[list[str]] = typer.Option(None, "--epsilon", help="ε grid (default 0.01 0.1 0.5 1)."),
    convention: str = typer.Option("authors", help="MeanSSE: authors (default) or paper."),
    category_order: Optional[list[str]] = typer.Option(
        None, "--category-order",
        help="Category order(s), repeatable: dp-frequency, declared, or data-frequency (the paper's exact-count "
             "order, not private, evaluation only). The first is the figures' main series. Default: the release "
             "default, then data-frequency beside it."),
    order_share: Optional[list[str]] = typer.Option(
        None, "--order-share",
        help="Share(s) of a categorical attribute's ε spent on the dp-frequency histogram, repeatable; one "
             "series per share (default: the release default)."),
    postprocess: Optional[list[str]] = typer.Option(
        None, "--postprocess",
        help="Post-processing of the noisy centroids, repeatable: isotonic (the release default) and/or none (the "
             "paper's). Both are scored on the same noise draw of each run. Default: both."),
    master: Optional[str] = MASTER,
):
    """Reproduce the paper's §5: MeanSSE and category TVD over the (ε, k) grid, per scenario, mechanism, order and
    post-processing (isotonic vs none, paired noise)."""
    from fragrelease.experiments.evaluate_grid import (
        ORDER_SETTINGS,
        order_settings,
        postprocess_values,
        run_evaluation,
        share_text,
    )
    from fragrelease.experiments.evaluation import EPSILONS
    from fragrelease.idpir.category_order import DEFAULT_ORDER_SHARE
    from fragrelease.idpir.postprocess import POSTPROCESS

    if category_order:
        shares = order_share if order_share else ([share_text(DEFAULT_ORDER_SHARE)]
                                                  if "dp-frequency" in category_order else [])
        orders = order_settings(category_order, shares)
    elif order_share:  # the default orders, with these dp-frequency shares
        names = ["dp-frequency"] + [o.order for o in ORDER_SETTINGS if o.order != "dp-frequency"]
        orders = order_settings(names, order_share)
    else:
        orders = list(ORDER_SETTINGS)
    posts = postprocess_values(postprocess or list(POSTPROCESS))
    epsilons = epsilon or list(EPSILONS)
    _check_evaluate(dataset, runs, scenario, split, mechanism, epsilons, convention)
    spark = _common._spark(master)
    labels = ", ".join(o.label for o in orders)
    with console.status(f"evaluating {', '.join(dataset)}: {runs} runs per cell, category orders {labels}, "
                        f"postprocess {', '.join(posts)}"):
        result = run_evaluation(spark, dataset, out, scenarios=scenario, splits=split, mechanisms=mechanism,
                                epsilons=epsilons, runs=runs, convention=convention, orders=orders,
                                postprocess=posts)
    console.print(f"{result['cells']} cells x {result['runs']} runs in {result['seconds']:.1f} s -> {result['results']}")
    console.print(f"category orders: {labels} (main series: {orders[0].label}); postprocess: {', '.join(posts)}")
    if "postprocess" in result:
        console.print(f"paired comparison isotonic vs none: {result['postprocess']}")
    for f in result["figures"]:
        console.print(f"figure: {f}")


def _check_evaluate(datasets, runs, scenarios, splits, mechanisms, epsilons, convention) -> None:
    """Refuse bad evaluation parameters before Spark starts, naming the option and the value; warn on ε > 10."""
    from fragrelease.budget import EPSILON_SPLITS, parse_epsilon
    from fragrelease.errors import ConfigError
    from fragrelease.experiments.evaluate_grid import scenarios_for
    from fragrelease.idpir.mechanisms import get_mechanism
    from fragrelease.idpir.metrics import CONVENTIONS
    from fragrelease.schemas.datasets import BUILTIN_SCHEMAS
    from fragrelease.validation import warn_if_large_epsilon

    if runs < 1:
        raise ConfigError(f"--runs: must be >= 1, not {runs}")
    for d in datasets:
        if d not in BUILTIN_SCHEMAS:
            raise ConfigError(f"--dataset: the evaluation runs on the built-in datasets {sorted(BUILTIN_SCHEMAS)}, "
                              f"not {d!r}")
        scenarios_for(d, scenarios, splits)
    for s in splits:
        if s not in EPSILON_SPLITS:
            raise ConfigError(f"--split: must be one of {EPSILON_SPLITS}, not {s!r}")
    for m in mechanisms:
        get_mechanism(m)
    for e in epsilons:
        parse_epsilon(e, name="--epsilon")
        warn_if_large_epsilon(e, what="--epsilon")
    if convention not in CONVENTIONS:
        raise ConfigError(f"--convention: must be one of {CONVENTIONS}, not {convention!r}")


def audit(
    dataset: str = typer.Option("adult", help="Built-in dataset to take the records from."),
    attribute: str = typer.Option("age", help="Numeric attribute to audit."),
    n: int = typer.Option(24, help="Number of records (the first n)."),
    k: list[int] = typer.Option([4], "--k"),
    epsilon: list[str] = typer.Option(["1"], "--epsilon", help="ε as exact text (e.g. 1, 0.5, 1/4); repeatable."),
    mechanism: list[str] = typer.Option(["idp-ir", "dp-ir"], "--mechanism"),
    runs: int = typer.Option(200_000, help="Runs on each of D and D'."),
    alpha: float = typer.Option(1e-6, help="Probability that a correct mechanism's lower bound exceeds ε."),
):
    """Empirical privacy audit: estimate ε on (D, worst-case neighbour D') from many runs."""
    from fragrelease.budget import format_epsilon, parse_epsilon
    from fragrelease.experiments.audit import audit as run_audit
    from fragrelease.rng.laplace import FAST_SAMPLER_NAME, FastLaplace
    from fragrelease.schemas.datasets import load_builtin_pandas, resolve_schema

    epsilons = [parse_epsilon(e, name="--epsilon") for e in epsilon]  # exact, as every other command takes it
    attr = resolve_schema(dataset).attribute(attribute)
    if attr.categorical or not attr.protected:
        raise FragReleaseError(f"attribute {attribute!r} must be a released numeric attribute")
    lo, hi = attr.bounds()
    x = load_builtin_pandas(dataset)[attribute].to_numpy(float)[:n]
    table = Table(title=f"audit of {dataset}.{attribute}, n = {n}, {runs:,} runs per side, α = {alpha:g}")
    for col in ("mechanism", "k", "ε", "Δ used", "worst shift", "ε lower bound", "ε point estimate"):
        table.add_column(col, justify="right")
    for mech in mechanism:
        for kk in k:
            for eps in epsilons:
                r = run_audit(x, k=kk, lo=lo, hi=hi, epsilon=eps, mechanism=mech, runs=runs, noise=FastLaplace(),
                              alpha=alpha)
                table.add_row(mech, str(kk), format_epsilon(eps), f"{r.sensitivity:.3f}", f"{r.neighbour_shift:.3f}",
                              f"{r.epsilon_lower_bound:.3f}", f"{r.epsilon_point_estimate:.3f}")
    console.print(table)
    console.print(f"sampler: {FAST_SAMPLER_NAME}")
