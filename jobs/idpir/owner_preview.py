"""An owner's private accuracy preview: the released error its own fragment can expect, before anything is spent.

``fragrelease owner preview --config CONF --owner NAME`` (and :func:`owner_preview`): the owner reads and
validates its own fragment (as ``owner metadata`` would, nothing written), takes the budgets the
configuration gives it (docs/specification.md §2-3, the plan's rules, with its own record count) and
simulates its release many times (:mod:`fragrelease.idpir.preview_error`): its actual local
sensitivity and calibrated scale (iDP-IR), its own IR clusters, the default post-processing, and
under ``dp-frequency`` a fresh simulated noisy category order per run. Per attribute it returns
the expected released error (numeric: RMSE per record; categorical: share of changed categories)
beside the error of releasing the **owner's own** mean or most frequent category, and warns when
the first is at least the second.

Everything here is computed from the owner's data and is for that owner only: the result is
returned to the caller (the command prints it) and is never written to ``work_dir``, a manifest, a
table, a report or a log. It spends no budget and draws no noise that is released.

Shapes on Spark: numeric attributes go to one task each (``groupBy(attr).applyInPandas``: the task
sorts the attribute's n values, simulates and returns one row of aggregates: the per-run error sums,
the baseline and the local scale); categorical attributes need only their category counts (Σ |dom|
numbers, from the validation pass) and are simulated on the driver. No row-level data reaches the
driver.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Optional

import numpy as np
import pandas as pd
from pyspark.sql import functions as F

from fragrelease.errors import ConfigError
from fragrelease.idpir.postprocess import DEFAULT_POSTPROCESS
from fragrelease.idpir.preview import error_text, owner_budgets, params_from_config
from fragrelease.idpir.preview_error import (
    DEFAULT_RUNS,
    ErrorEstimate,
    FragmentError,
    combine,
    simulate_categorical,
)
from fragrelease.idpir.spec import required_k
from fragrelease.rng.simulation import SecureSimulation, SimulationRandomness
from fragrelease.udfs.preview import simulated_attribute

from ..protocol.context import OwnerContext

#: The owner's warning: the expected released error is at least the error of its own constant release.
OWNER_THRESHOLD = 1.0

#: The statement every owner preview carries.
PRIVATE_NOTE = ("private: computed from this owner's own data; shown to this owner only, nothing written to shared "
                "storage, reports or logs; no budget spent")


@dataclass(frozen=True)
class OwnerAttributePreview:
    """One attribute of the owner's preview: its budget, the local scale b, and the expected error.

    ``scale``: the Laplace scale the release would use on this fragment (iDP-IR: from the local
    sensitivity; under ``dp-frequency``, the largest over the simulated orders); ``error``: the
    :class:`~fragrelease.idpir.preview_error.ErrorEstimate` on the owner's data (``baseline``: its own
    mean's RMSE or 1 − its most frequent category's share); ``warn``: released ≥ baseline.
    """

    attribute: str
    kind: str
    epsilon: Fraction
    scale: float
    error: ErrorEstimate
    warn: bool


@dataclass(frozen=True)
class OwnerPreview:
    """An owner's private preview (:func:`owner_preview`): n, the attributes and the warnings."""

    owner: str
    source: str
    n: int
    postprocess: str
    attributes: tuple[OwnerAttributePreview, ...]
    notes: tuple[str, ...] = field(default=(PRIVATE_NOTE,))

    @property
    def warnings(self) -> tuple[OwnerAttributePreview, ...]:
        return tuple(a for a in self.attributes if a.warn)

    def warning_text(self) -> Optional[str]:
        """One line naming the attributes no better than the owner's own constant release, or None."""
        if not self.warnings:
            return None
        worst = max(self.warnings, key=lambda a: (a.error.ratio, a.attribute))
        return (f"owner {self.owner!r}: {len(self.warnings)} of {len(self.attributes)} attributes are expected to be "
                f"released with an error at least that of releasing the mean (numeric) or most frequent category "
                f"(categorical) of this owner's data (worst: {worst.attribute}, expected error "
                f"{error_text(worst.kind, worst.error.released)} against {error_text(worst.kind, worst.error.baseline)})")

    def ranking(self) -> tuple[str, ...]:
        """Attributes from the best kept (smallest expected error relative to the constant release) to the worst."""
        return tuple(a.attribute for a in sorted(self.attributes, key=lambda a: (a.error.ratio, a.attribute)))

    def header(self) -> list[str]:
        return ["attribute", "kind", "ε_attr", "local b", "released error", "own constant's", "check"]

    def rows(self) -> list[list[str]]:
        """The table as text cells (:meth:`header`)."""
        return [[a.attribute, "cat" if a.kind == "categorical" else "num", str(a.epsilon), f"{a.scale:.4g}",
                 error_text(a.kind, a.error.released), error_text(a.kind, a.error.baseline),
                 "WARN" if a.warn else "ok"] for a in self.attributes]


def _numeric_fn(specs: dict[int, tuple[str, float, float, Fraction]], *, mechanism: str, k: int, postprocess: str,
                runs: int, randomness: Optional[SimulationRandomness]):
    def simulate(pdf: pd.DataFrame) -> pd.DataFrame:
        j = int(pdf["attr"].iloc[0])
        _, lo, hi, eps = specs[j]
        xs = np.sort(pdf["x"].to_numpy(float))
        part = simulated_attribute(xs, mechanism=mechanism, k=k, lo=lo, hi=hi, epsilon_centroids=eps,
                                   postprocess=postprocess, runs=runs, randomness=randomness)
        return pd.DataFrame({"attr": [j], "n": [part.n], "errors": [part.errors.astype("<f8").tobytes()],
                             "baseline": [part.baseline], "scale": [part.scale]})

    return simulate


def owner_preview(spark, ctx: OwnerContext, *, runs: int = DEFAULT_RUNS,
                  randomness: Optional[SimulationRandomness] = None) -> OwnerPreview:
    """The owner's private preview of its own fragment (module docstring); nothing is written.

    Parameters
    ----------
    spark : the owner's session.
    ctx : the owner's context (:func:`fragrelease.jobs.protocol.context.owner_context`): its fragment and
        attributes, and the release configuration (its mechanism, k, ε, fragmentation, split, category
        order and post-processing; the owner's budgets follow the plan's rules with the fragment's own n).
    runs : simulated releases per attribute (≥ 1).
    randomness : the simulation's draws (default the OS CSPRNG; tests only pass a seeded source).

    Returns
    -------
    :class:`OwnerPreview`, one :class:`OwnerAttributePreview` per attribute the owner releases, in
    schema order. Data-dependent throughout: print it to the owner, never log or write it.

    Raises
    ------
    ConfigError
        A schema without an id column (an unknown owner is refused when ``ctx`` is built).
    SchemaMismatchError, DomainError, IdentifierError
        The fragment does not validate (:func:`fragrelease.jobs.protocol.fragment.validate_fragment`), one
        line naming the owner, the source, the column and a bad value.
    InvalidParameterError
        k above the fragment's record count, runs < 1.
    """
    from ..protocol.fragment import conform_attributes, validate_fragment
    from ..protocol.owner import read_fragment

    cfg, schema, owner = ctx.config, ctx.schema, ctx.owner
    if schema.id_column is None:
        raise ConfigError(f"dataset: schema {schema.name!r} declares no id column (role: id)")
    attrs = list(ctx.offered)
    df, context, text = read_fragment(spark, ctx)
    check = validate_fragment(df, attrs, schema.id_column, context, id_type=ctx.id_type, count_categories=True,
                              text=text)
    df = conform_attributes(df, attrs)
    n = check.n_records
    # the budgets the plan will give this owner: the configuration's rules, with its own n (public)
    params = params_from_config(cfg, [a.public_spec() for a in schema.protected], rows=n)
    params = replace(params, owners=tuple(replace(o, n=n) if o.name == owner.name else o for o in params.owners))
    budgets = {b.attribute: b for b in owner_budgets(params)[owner.name]}
    postprocess = getattr(cfg, "postprocess", DEFAULT_POSTPROCESS)
    rnd = randomness if randomness is not None else SecureSimulation()
    parts: dict[str, FragmentError] = {}
    numeric = {j: (a.name, *a.bounds(), budgets[a.name].centroids) for j, a in enumerate(attrs) if not a.categorical}
    if numeric:
        pairs = F.explode(F.array(*[F.struct(F.lit(j).alias("attr"), F.col(attrs[j].name).cast("double").alias("x"))
                                    for j in numeric]))
        long = df.select(pairs.alias("p")).select("p.attr", "p.x")
        fn = _numeric_fn(numeric, mechanism=cfg.mechanism, k=required_k(cfg.k, linkage=cfg.linkage), postprocess=postprocess, runs=runs,
                         randomness=randomness)
        out = long.groupBy("attr").applyInPandas(fn, "attr int, n long, errors binary, baseline double, scale double")
        for r in out.collect():  # one row of aggregates per numeric attribute
            parts[numeric[int(r["attr"])][0]] = FragmentError(n=int(r["n"]), errors=np.frombuffer(r["errors"], "<f8"),
                                                              baseline=float(r["baseline"]), scale=float(r["scale"]))
    counts = check.category_counts or {}
    for a in attrs:
        if a.categorical:
            b = budgets[a.name]
            parts[a.name] = simulate_categorical([counts[a.name].get(c, 0) for c in a.categories or ()],
                                                 mechanism=cfg.mechanism, k=required_k(cfg.k, linkage=cfg.linkage), epsilon_centroids=b.centroids,
                                                 epsilon_order=b.order, postprocess=postprocess, runs=runs,
                                                 randomness=rnd)
    previews = []
    for a in attrs:
        est = combine(a.name, a.categorical, [parts[a.name]])
        previews.append(OwnerAttributePreview(
            attribute=a.name, kind=est.kind, epsilon=budgets[a.name].total, scale=est.scale, error=est,
            warn=est.worse_than_constant(OWNER_THRESHOLD)))
    return OwnerPreview(owner=owner.name, source=context.source, n=n, postprocess=postprocess,
                        attributes=tuple(previews))
