"""The accuracy preview's figures per attribute (:mod:`fragrelease.idpir.preview`, whose docstring gives the
formulas and sources): each owner's budgets, the Laplace scale, the 95 % interval, the rank-move
chances and the expected released error simulated on data drawn from the declared domain."""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

from fragrelease.accuracy import laplace_half_width
from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.category_order import AttributeBudget, histogram_scale
from fragrelease.idpir.mechanisms import get_mechanism
from fragrelease.idpir.microaggregation import cluster_count
from fragrelease.idpir.preview_error import (
    DEFAULT_RUNS,
    ErrorEstimate,
    combine,
    domain_counts,
    domain_values,
    simulate_categorical,
    simulate_numeric,
)
from fragrelease.idpir.preview_types import DEFAULT_THRESHOLD, AttributePreview, OwnerPlan, PreviewParams
from fragrelease.idpir.spec import attribute_budgets
from fragrelease.idpir.stage import resolve_k
from fragrelease.protocol.fragmentation import fragmentation_of
from fragrelease.protocol.options import ReleaseOptions
from fragrelease.rng.simulation import SecureSimulation, SimulationRandomness


def _bounds(spec: Mapping[str, Any]) -> tuple[float, float, bool]:
    """(lo, hi, categorical) of a public attribute spec; ranks [1, |dom|] for categorical ones."""
    if spec.get("kind") == "categorical":
        cats = spec.get("categories") or ()
        if len(cats) < 2:
            raise InvalidParameterError(f"categorical attribute {spec.get('name')!r} needs at least 2 categories")
        return 1.0, float(len(cats)), True
    dom = spec.get("domain")
    if dom is None or len(dom) != 2:
        raise InvalidParameterError(f"numeric attribute {spec.get('name')!r} needs a declared domain [lo, hi]")
    return float(dom[0]), float(dom[1]), False


def owner_budgets(p: PreviewParams) -> dict[str, tuple[AttributeBudget, ...]]:
    """Each owner's per-attribute budgets: as given, or derived (docs/specification.md §2-3, the plan's rules)."""
    if p.budgets is not None:
        return {o.name: tuple(p.budgets[o.name]) for o in p.owners}
    # parallel composition: the full ε each; sequential: ε split over the owners
    eps_owner = fragmentation_of(p.fragmentation).owner_epsilons(p.epsilon, {o.name: o.attributes for o in p.owners},
                                                                 p.epsilon_split)
    # the plan's own split (fragrelease.idpir.spec.attribute_budgets), never a copy of it
    options = ReleaseOptions.of(category_order=p.category_order, category_order_share=p.category_order_share)
    return {o.name: attribute_budgets([(a, _bounds(p.specs[a])[2]) for a in o.attributes], eps_owner[o.name],
                                      options=options)
            for o in p.owners}

def _domain_error(p: PreviewParams, name: str, held: Sequence[tuple[OwnerPlan, AttributeBudget]], *, runs: int,
                  randomness: SimulationRandomness) -> Optional[ErrorEstimate]:
    """The expected released error of attribute ``name`` on data drawn from its declared domain (None: an n unknown).

    Every owner holding it simulates its own n records (public: declared); categorical records are dealt
    evenly over the categories, so every category order ranks them alike and the order is not simulated.
    The scale is Δ/ε_centroids of the simulated data (the calibrated one is larger by at most c·2⁻⁴⁰/ε).
    """
    if any(o.n is None for o, _ in held):
        return None
    lo, hi, categorical = _bounds(p.specs[name])
    k_used = resolve_k(get_mechanism(p.mechanism), p.k)
    parts = []
    for o, b in held:
        assert o.n is not None
        if o.n < k_used:
            raise InvalidParameterError(f"owner {o.name!r}: k = {k_used} exceeds its record count n = {o.n}")
        if categorical:
            parts.append(simulate_categorical(domain_counts(o.n, int(hi)), mechanism=p.mechanism, k=p.k,
                                              epsilon_centroids=b.centroids, postprocess=p.postprocess, runs=runs,
                                              randomness=randomness, calibrate=False))
        else:
            parts.append(simulate_numeric(domain_values(o.n, lo, hi), mechanism=p.mechanism, k=p.k, lo=lo, hi=hi,
                                          epsilon_centroids=b.centroids, postprocess=p.postprocess, runs=runs,
                                          randomness=randomness, calibrate=False))
    return combine(name, categorical, parts)


def _holders(p: PreviewParams) -> dict[str, list[tuple[OwnerPlan, AttributeBudget]]]:
    """Attribute → the owners releasing it with their budgets, attributes in first-owner order."""
    budgets = owner_budgets(p)
    held: dict[str, list[tuple[OwnerPlan, AttributeBudget]]] = {}
    for o in p.owners:
        if not o.attributes:
            raise InvalidParameterError(f"owner {o.name!r} releases no attribute")
        for b in budgets[o.name]:
            if b.attribute not in p.specs:
                raise InvalidParameterError(f"attribute {b.attribute!r} of owner {o.name!r} has no declared domain")
            held.setdefault(b.attribute, []).append((o, b))
    return held


def attribute_previews(p: PreviewParams, threshold: float = DEFAULT_THRESHOLD, *, runs: int = DEFAULT_RUNS,
                       randomness: Optional[SimulationRandomness] = None) -> tuple[AttributePreview, ...]:
    """One :class:`AttributePreview` per released attribute, in first-owner order (module docstring).

    ``runs`` simulated releases per attribute and owner give the expected released error (every owner's n
    declared); ``randomness``: the simulation's draws (default the OS CSPRNG; tests pass a seeded source).

    Raises
    ------
    InvalidParameterError
        Unknown mechanism, k out of range (also k above a declared n), ε ≤ 0, an owner without
        attributes, an attribute without a public spec, a threshold that is not > 0 or runs < 1.
    """
    if not threshold > 0:
        raise InvalidParameterError(f"threshold must be > 0 (a multiple of the constant release's error), not "
                                    f"{threshold}")
    rnd = randomness if randomness is not None else SecureSimulation()
    mech = get_mechanism(p.mechanism)
    k_used = resolve_k(mech, p.k)
    held = _holders(p)
    out = []
    for name in held:
        lo, hi, categorical = _bounds(p.specs[name])
        delta = mech.sensitivity_bound(p.k, lo, hi)  # public: k and the declared domain
        scales, eps, eps_mu, order_scale = [], None, None, None
        for o, b in held[name]:
            eps, eps_mu = b.total, b.centroids
            if o.n is None:
                scales.append(delta / float(eps_mu))
            else:  # the production calibration for the owner's c public clusters
                scales.append(mech.scale(delta, eps_mu, cluster_count(o.n, k_used)))
            if categorical and b.order > 0:
                order_scale = max(order_scale or 0.0, histogram_scale(b.order, int(hi)))
        assert eps is not None and eps_mu is not None
        scale = max(scales)
        half = laplace_half_width(scale)  # OpenDP's accuracy function: b·ln 20 at 95 %
        coverage = 2 * half / (hi - lo)
        error = _domain_error(p, name, held[name], runs=runs, randomness=rnd)
        out.append(AttributePreview(
            attribute=name, kind="categorical" if categorical else "numeric",
            owners=tuple(o.name for o, _ in held[name]), lo=lo, hi=hi, epsilon=eps, epsilon_centroids=eps_mu,
            sensitivity=delta, scale=scale, exact=not mech.local, half_width=half, coverage=coverage,
            warn=error is not None and error.worse_than_constant(threshold),
            p_move=math.exp(-0.5 / scale) if categorical else None,
            p_move2=math.exp(-1.5 / scale) if categorical else None,
            order_scale=order_scale, error=error))
    return tuple(out)
