"""Accuracy preview of an IR release from public quantities only, before any data is read.

For each released attribute: its budget ε_attr (and the part ε_μ left for the centroids), the
Laplace scale b of its noisy centroids, the expected absolute noise E|Lap(b)| = b, the 95 %
interval ±b·ln 20 of a released centroid around the exact one (P(|Lap(b)| ≥ t) = exp(−t/b), so
t = b·ln 20 leaves 5 %), in the attribute's units and as the share of the declared domain it covers,
and for a categorical attribute the chance that a cluster's released rank differs from its exact
rank. Sources: docs/specification.md §1 (ranks), §2 (mechanisms, budget) and §3 (fragmented budgets);
Del Vasto-Terrientes et al. (ICISSP 2025) §3.3; Sánchez et al. (Information Fusion 2016).

**What it reads.** The mechanism, k, ε, the fragmentation and ε split, the category order and its
share, the declared domains / categories and, when declared, each owner's record count n (all public:
n is public under substitution neighbourhood). Never the data, never a local sensitivity of anyone's
data (the simulation's Δ is that of the public data it draws), and it spends no budget. Every figure below is a function of these public quantities.

**Scale.** Δ is :meth:`~fragrelease.idpir.mechanisms.IRMechanism.sensitivity_bound`, ``(hi − lo)/k``
(ranks: ``(|dom| − 1)/k``; plain iDP: k = 1). For DP-IR it is the Δ the release uses, so b is exact;
for iDP-IR and plain iDP it is an upper bound of the local Δ of any fragment (docs/specification.md
§2: Δ ≤ (hi − lo)/k), so b, the expected noise, the interval and the rank-move chance are upper bounds.
With n known, b is :meth:`~fragrelease.idpir.mechanisms.IRMechanism.scale` of Δ for the c = max(⌊n/k⌋, 1)
centroids (the production calibration, ≈ (Δ + c·2⁻⁴⁰)/ε_μ); without n, b = Δ/ε_μ, below the
calibrated value by at most c·2⁻⁴⁰/ε_μ.

**Categorical attributes.** The noisy mean rank z = μ + Lap(b) is clamped to [1, |dom|] and rounded
half up (docs/specification.md §1). For a cluster whose exact mean rank μ is a whole interior rank
(every record of the cluster in one category, the usual case for clusters of sorted ranks) the
released rank differs from μ exactly when |Lap(b)| ≥ ½: probability ``exp(−1/(2b))``; it moves by
two ranks or more with probability ``exp(−3/(2b))`` (when μ lies at least two ranks from either end).
This is the smallest chance over interior clusters (an interval of length 1 centred on the mode holds
the most Laplace mass); a cluster at rank
1 or |dom| moves with half of it (clamping keeps one side). Under ``dp-frequency`` the category order
itself is bought with a Laplace histogram of scale ``2/ε_order``
(:func:`~fragrelease.idpir.category_order.histogram_scale`); the preview gives that scale too.

**Released error (the default post-processing).** The figures above describe the Laplace draw on each
centroid; clamping and the isotonic projection (``postprocess: isotonic``, docs/specification.md §9)
act after it and usually remove most of it. With every owner's n declared, the preview also gives
the *expected released error* of each attribute by simulation
(:mod:`fragrelease.idpir.preview_error`): the release's own steps run ``runs`` times with fresh noise
on data drawn from the declared domain (n values spread evenly over [lo, hi], or n records dealt
evenly over the declared categories), scored against those data: the RMSE per record for numeric
attributes, the share of changed categories for categorical ones. Beside it stands the error of
the best constant release on the same data: releasing the mean (RMSE = its standard deviation,
(hi − lo)/√12 for data filling the domain) or the most frequent category (1 − 1/|dom|). These
data are public (the declared domain and n), so the figure is too; an owner's figure on its own
data is :func:`fragrelease.jobs.idpir.owner_preview.owner_preview` (private to that owner).

**Warning and suggestions.** An attribute warns when its expected released error is at least
``threshold`` (default 0.5) times the constant release's on data drawn from the declared domain. At 1
the release would tell no more than that constant about data filling the domain; real data are usually
more concentrated (Adult's age and hours-per-week: standard deviations 0.13 and 0.12 of the domain
width, against 0.29 for data filling it) while their released error is close to the prediction, so the
default 0.5 stands for "about as useless as the constant on typical data". Without every
n declared nothing is simulated and nothing warns (a note says so). :func:`suggest` then finds,
by simulation, the smallest k (≥ 3 and ≤ every declared n), the smallest ε with two significant
digits, and the attributes to keep (dropping the attribute with the largest expected error relative
to its constant release first, budgets recomputed each time) that bring every attribute under the
threshold.

The module is the preview's face: its objects live in :mod:`fragrelease.idpir.preview_types`, the
per-attribute figures in :mod:`fragrelease.idpir.preview_figures`, the suggestions in
:mod:`fragrelease.idpir.preview_suggest` and the simulation in :mod:`fragrelease.idpir.preview_error`;
every public name is importable from here.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from fragrelease.budget import parse_epsilon
from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.category_order import AttributeBudget, parse_share
from fragrelease.idpir.mechanisms import get_mechanism
from fragrelease.idpir.postprocess import DEFAULT_POSTPROCESS
from fragrelease.idpir.preview_error import DEFAULT_RUNS
from fragrelease.idpir.preview_figures import attribute_previews, owner_budgets
from fragrelease.idpir.preview_suggest import suggest
from fragrelease.idpir.preview_types import (
    DEFAULT_THRESHOLD,
    ERROR_NOTE,
    PUBLIC_NOTE,
    AttributePreview,
    OwnerPlan,
    PreviewParams,
    ReleasePreview,
    Suggestions,
    error_text,
)
from fragrelease.idpir.spec import required_k
from fragrelease.protocol.fragmentation import fragmentation_of
from fragrelease.rng.simulation import SimulationRandomness

#: The preview's public names, its parts' included.
__all__ = [
    "DEFAULT_THRESHOLD", "ERROR_NOTE", "PUBLIC_NOTE", "AttributePreview", "OwnerPlan", "PreviewParams",
    "ReleasePreview", "Suggestions", "attribute_previews", "error_text", "owner_budgets", "params_from_config",
    "preview", "preview_from_provenance", "preview_params", "suggest",
]


def preview_params(p: PreviewParams, threshold: float = DEFAULT_THRESHOLD, *, with_suggestions: bool = True,
                   runs: int = DEFAULT_RUNS, randomness: Optional[SimulationRandomness] = None) -> ReleasePreview:
    """The whole preview of ``p``: per-attribute figures, warnings and (if any warns) suggestions.

    ``runs`` and ``randomness``: the simulation's (:func:`attribute_previews`). Raises as :func:`attribute_previews`.
    """
    attrs = attribute_previews(p, threshold, runs=runs, randomness=randomness)
    notes = [PUBLIC_NOTE]
    if get_mechanism(p.mechanism).local:
        notes.append(f"{p.mechanism}: every figure is an upper bound (the DP-IR value; the local sensitivity never "
                     "exceeds it, docs/specification.md §2)")
    if not all(o.n is not None for o in p.owners):
        notes.append("record counts not declared: b = Δ/ε_centroids, without the sampler's grid allowance "
                     "(at most n/k·2^-40/ε_centroids)")
    if all(a.error is not None for a in attrs):
        notes.append(ERROR_NOTE if p.postprocess == "isotonic" else ERROR_NOTE.replace(
            "clamping and the isotonic projection", "clamping (postprocess none)"))
    else:
        notes.append("record counts not declared: the released error is not simulated and nothing is checked "
                     "against the constant release (declare each owner's rows, or --rows N)")
    notes.append("b, 95 % ± and P(rank moves) describe the Laplace draw on each centroid, before clamping and the "
                 "isotonic projection")
    return ReleasePreview(params=p, threshold=threshold, attributes=attrs,
                          suggestions=(suggest(p, threshold, randomness=randomness, previews=attrs)
                                       if with_suggestions else None), notes=tuple(notes))


def params_from_config(config: Any, specs: Sequence[Mapping[str, Any]], *, rows: Optional[int] = None) -> PreviewParams:
    """:class:`PreviewParams` of a release configuration (:class:`fragrelease.protocol.config.ReleaseConfig`).

    ``specs`` are the public specs of the dataset's released attributes in schema order
    (``[a.public_spec() for a in schema.protected]``). Horizontal owners release all of them and
    their n is their ``rows`` (simulation) or ``rows`` given here; vertical owners release their
    ``attributes`` and share one n (``rows``), None when not given.

    Raises
    ------
    InvalidParameterError
        A vertical owner names an attribute the dataset does not release.
    """
    by_name = {s["name"]: s for s in specs}
    owners = []
    for o in config.owners:
        if not fragmentation_of(config.fragmentation).by_attributes:
            attrs = tuple(by_name)
            n = o.rows if o.rows is not None else rows
        else:
            attrs = tuple(o.attributes or ())
            unknown = [a for a in attrs if a not in by_name]
            if unknown:
                raise InvalidParameterError(f"owner {o.name!r}: attribute {unknown[0]!r} is not a released attribute "
                                            f"of dataset {config.dataset!r}")
            n = rows
        owners.append(OwnerPlan(o.name, attrs, n))
    return PreviewParams(mechanism=config.mechanism, k=required_k(config.k, linkage=config.linkage), epsilon=config.epsilon,
                         fragmentation=config.fragmentation, owners=tuple(owners), specs=by_name,
                         epsilon_split=config.epsilon_split, category_order=config.category_order,
                         category_order_share=config.category_order_share, postprocess=config.postprocess)


def preview(config: Any, specs: Sequence[Mapping[str, Any]], *, rows: Optional[int] = None,
            threshold: float = DEFAULT_THRESHOLD, randomness: Optional[SimulationRandomness] = None,
            with_suggestions: bool = True) -> ReleasePreview:
    """Accuracy preview of a release configuration before any data is read (module docstring).

    Parameters
    ----------
    config : fragrelease.protocol.config.ReleaseConfig
    specs : the dataset's released attributes as public specs (see :func:`params_from_config`).
    rows : record count of every owner whose configuration declares none (optional, public).
    threshold : float > 0: warn when an attribute's expected released error is at least this multiple of the
        error of releasing its mean or most frequent category (data drawn from the declared domain).
    randomness : the simulation's draws (default the OS CSPRNG; tests only pass a seeded source).
    with_suggestions : search for the k, ε and attributes that fit when an attribute warns (seconds).

    Returns
    -------
    ReleasePreview: one row per attribute, the warnings and, if any, :class:`Suggestions`.
    """
    return preview_params(params_from_config(config, specs, rows=rows), threshold, randomness=randomness,
                          with_suggestions=with_suggestions)


def preview_from_provenance(provenance: Mapping[str, Any], threshold: float = DEFAULT_THRESHOLD, *,
                            randomness: Optional[SimulationRandomness] = None) -> ReleasePreview:
    """The same per-attribute table for a committed release, from its provenance (public parameters only).

    Uses the provenance's ``mechanism``, ``k``, ``epsilon``, ``fragmentation``, ``attributes`` (public
    specs), ``postprocess`` and ``owners`` (names, ``attributes``, ``n_records`` and the exact ``budgets``); no
    suggestions. ``randomness``: the simulation's draws (tests only).
    """
    specs = {a["name"]: a for a in provenance["attributes"]}
    owners, budgets = [], {}
    for o in provenance["owners"]:
        owners.append(OwnerPlan(o["name"], tuple(o["attributes"]), int(o["n_records"])))
        budgets[o["name"]] = tuple(AttributeBudget.model_validate(b) for b in o["budgets"])
    p = PreviewParams(mechanism=provenance["mechanism"], k=int(provenance["k"]),
                      epsilon=parse_epsilon(provenance["epsilon"]), fragmentation=provenance["fragmentation"],
                      owners=tuple(owners), specs=specs, category_order=provenance.get("category_order", "declared"),
                      category_order_share=parse_share(provenance.get("category_order_share") or "1/10"),
                      budgets=budgets, postprocess=provenance.get("postprocess") or DEFAULT_POSTPROCESS)
    return preview_params(p, threshold, with_suggestions=False, randomness=randomness)
