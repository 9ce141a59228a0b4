"""The aggregator's model of a synthetic release: Private-PGM fitted to the decoded sums, and its sampler.

Source: docs/specification.md §10; the model is Private-PGM's (McKenna, Sheldon and Miklau,
"Graphical-model based estimation and inference for differential privacy", ICML 2019), fitted with the
``mbi`` library that OpenDP's MST and AIM use. Everything here is post-processing of the decoded noisy
sums (:mod:`fragrelease.synthesis.mechanism`) and their public noise variances.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from fragrelease.errors import InvalidParameterError, MissingDependencyError
from fragrelease.synthesis.domain import SynthesisDomain, UniformSource

Clique = tuple[str, ...]

#: The one line when the model's library is missing.
MISSING_MBI = ("marginal synthesis fits its model with mbi (Private-PGM), which is not installed: "
               "pip install 'fragrelease[synthesis]'")


def _mbi():
    """The ``mbi`` package (the ``synthesis`` extra), or :class:`MissingDependencyError` (:data:`MISSING_MBI`)."""
    try:
        import mbi
        from mbi import estimation, junction_tree, marginal_oracles  # noqa: F401  (the submodules used here)
    except ImportError:
        raise MissingDependencyError(MISSING_MBI) from None
    return mbi


def require_mbi() -> None:
    """Refuse early when mbi is missing: :class:`MissingDependencyError` (:data:`MISSING_MBI`)."""
    _mbi()


@dataclass(frozen=True)
class Measured:
    """One decoded noisy sum: its clique, its cells (flattened C order) and its noise's public standard deviation."""

    clique: Clique
    values: np.ndarray
    stddev: float


def noisy_total(one_way: Sequence[Measured]) -> int:
    """The released row count from the decoded 1-way sums (post-processing), at least 1.

    Each attribute's total is an unbiased estimate of n with variance cells · σ², so the estimates are
    averaged with weights 1 / (cells · σ²): the minimum-variance unbiased combination (as mbi's
    ``minimum_variance_unbiased_total``).

    Raises
    ------
    InvalidParameterError
        No 1-way sum.
    """
    if not one_way:
        raise InvalidParameterError("no 1-way sum to estimate the row count from")
    weights = np.array([1.0 / (np.size(m.values) * m.stddev ** 2) for m in one_way])
    totals = np.array([float(np.sum(m.values)) for m in one_way])
    return max(1, int(round(float(np.sum(weights * totals) / np.sum(weights)))))


@dataclass(frozen=True)
class SamplingPlan:
    """Conditional tables of a fitted model, in sampling order (public: post-processing of noisy marginals).

    ``steps``: per attribute, ``(name, parents, cdf)`` where ``cdf`` has shape
    ``(*parent sizes, size)`` and holds the cumulative conditional distribution of the attribute
    given its parents (the last entry of each row is 1). Small (cells of the model's cliques), so a
    Spark job ships it to its executors.
    """

    steps: tuple[tuple[str, tuple[str, ...], np.ndarray], ...]


def fit_model(domain: SynthesisDomain, measured: Sequence[Measured], *, iters: int = 1000) -> SamplingPlan:
    """Fit Private-PGM to the decoded noisy sums and compile its :class:`SamplingPlan`.

    ``measured``: every decoded sum the model uses (the 1-ways, the chosen pairs of the measure round,
    the cliques), each with its public standard deviation; ``iters``: mirror-descent iterations
    (post-processing; more is closer to the noisy marginals).

    Raises
    ------
    InvalidParameterError
        ``iters < 1``, no measurement, or a measurement of the wrong size.
    MissingDependencyError
        mbi is not installed (:data:`MISSING_MBI`).
    """
    if iters < 1 or not measured:
        raise InvalidParameterError(f"iters must be >= 1 and a measurement given, not {iters} and {len(measured)}")
    mbi = _mbi()
    Domain, LinearMeasurement, estimation = mbi.Domain, mbi.LinearMeasurement, mbi.estimation
    names = list(domain.names)
    mdomain = Domain(names, [domain.sizes[a] for a in names])
    meas = []
    for m in measured:
        size = int(np.prod([domain.sizes[a] for a in m.clique]))
        if np.size(m.values) != size:
            raise InvalidParameterError(f"the sum of {m.clique} holds {np.size(m.values)} cells, not {size}")
        meas.append(LinearMeasurement(np.asarray(m.values, float).ravel(), tuple(m.clique), stddev=float(m.stddev)))
    model = estimation.mirror_descent(mdomain, meas, iters=iters)
    return compile_plan(model)


def compile_plan(model) -> SamplingPlan:
    """The :class:`SamplingPlan` of a fitted ``mbi.MarkovRandomField`` (its junction tree's elimination order).

    The order and parents are those of mbi's own sampler (``MarkovRandomField.synthetic_data``);
    the draws are not: :func:`sample_codes` samples every row i.i.d. from the caller's uniforms.
    """
    mbi = _mbi()
    junction_tree, marginal_oracles = mbi.junction_tree, mbi.marginal_oracles
    cliques = [set(cl) for cl in model.cliques]
    jtree, elimination_order = junction_tree.make_junction_tree(model.domain, cliques)
    marginals = marginal_oracles.message_passing_stable(model.potentials.expand(list(jtree.nodes)))
    order = list(elimination_order)[::-1]
    steps = []
    used: set[str] = set()
    for col in order:
        relevant = [cl for cl in cliques if col in cl]
        parents = tuple(sorted(used.intersection(set().union(*relevant)), key=order.index)) if relevant else ()
        marg = np.asarray(marginals.project(parents + (col,)).datavector(flatten=False), dtype=float)
        marg = np.clip(marg, 0.0, None)
        totals = marg.sum(axis=-1, keepdims=True)
        size = marg.shape[-1]
        cond = np.divide(marg, totals, out=np.full(marg.shape, 1.0 / size), where=totals > 0)
        cdf = np.cumsum(cond, axis=-1)
        cdf[..., -1] = 1.0
        steps.append((col, parents, cdf))
        used.add(col)
    return SamplingPlan(tuple(steps))


def sample_codes(plan: SamplingPlan, rows: int, uniforms: UniformSource, *, chunk: int = 200_000) -> dict[str, np.ndarray]:
    """``rows`` i.i.d. records from the model: {attribute: int64 codes of shape (rows,)} (post-processing).

    Each attribute in plan order is drawn by inverting its conditional CDF given its parents' codes
    at one uniform from ``uniforms`` (the OS CSPRNG in a release: :func:`fragrelease.rng.diffgen.secure_open_unit`).
    Memory: ``chunk`` rows at a time.

    Raises
    ------
    InvalidParameterError
        ``rows < 0``.
    """
    if rows < 0:
        raise InvalidParameterError(f"rows must be >= 0, not {rows}")
    out: dict[str, list[np.ndarray]] = {name: [] for name, _, _ in plan.steps}
    for start in range(0, rows, chunk):
        m = min(chunk, rows - start)
        got: dict[str, np.ndarray] = {}
        for name, parents, cdf in plan.steps:
            size = cdf.shape[-1]
            table = cdf.reshape(-1, size)
            if parents:
                flat = np.ravel_multi_index(tuple(got[p] for p in parents), cdf.shape[:-1])
            else:
                flat = np.zeros(m, dtype=np.int64)
            u = uniforms(m)
            codes = (u[:, None] >= table[flat]).sum(axis=1)
            got[name] = np.minimum(codes, size - 1).astype(np.int64)
        for name in got:
            out[name].append(got[name])
    return {name: (np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)) for name, parts in out.items()}
