"""DP-IR, iDP-IR and plain iDP on one attribute, Spark-free (docs/specification.md §1-2; Del Vasto-Terrientes et al. (ICISSP 2025) §3).

:func:`noisy_centroids` (one Laplace draw per cluster) followed by
:meth:`fragrelease.idpir.stage.StageSpec.finish` is the step the Spark job applies per attribute,
in one task (:mod:`fragrelease.jobs.idpir.cluster_noise`); :func:`draw_task` is the whole draw on a
numpy array under one :class:`~fragrelease.idpir.stage.AttributeTask` and
:class:`~fragrelease.idpir.stage.StageSpec`, and :func:`protect_attribute` (the same on one
:class:`~fragrelease.idpir.stage.AttributeTask`, its stage built from the mechanism, k and the
release options, then finished) the reference the Spark job is tested against with injected noise.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, Mapping, Optional

import numpy as np

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.microaggregation import ir_centroids, ir_order
from fragrelease.idpir.sensitivity import dp_ir_sensitivity, idp_ir_sensitivity, idp_ir_sensitivity_from_extremes
from fragrelease.idpir.stage import AttributeTask, StageSpec
from fragrelease.protocol.options import DEFAULT_OPTIONS, ReleaseOptions
from fragrelease.rng.laplace import LaplaceNoise, NoiseSource
from fragrelease.validation import registered


def centroid_noise(delta: float, epsilon_attribute: Fraction | float, size: int) -> LaplaceNoise:
    """The Laplace noise of an attribute's ``size`` centroids: sensitivity Δ, budget ε_attr.

    Its scale is :func:`laplace_scale`; a mechanism differs from another only in Δ
    (:meth:`IRMechanism.sensitivity`), never in the noise. Δ is local (data-dependent) for iDP-IR and
    iDP: never log the result.

    Raises
    ------
    InvalidParameterError
        If Δ is negative or not finite, ε_attr ≤ 0, or size < 1.
    """
    if not np.isfinite(delta) or delta < 0:
        raise InvalidParameterError(f"sensitivity must be finite and non-negative, not {delta}")
    if epsilon_attribute <= 0:
        raise InvalidParameterError(f"epsilon per attribute must be > 0, not {epsilon_attribute}")
    return LaplaceNoise.calibrate(sensitivity=float(delta), epsilon=epsilon_attribute, size=size)


def laplace_scale(delta: float, epsilon_attribute: Fraction | float, size: int) -> float:
    """Laplace scale ``b`` of an attribute's ``size`` centroids: ``Δ / ε_attr`` checked by OpenDP's map.

    docs/specification.md §2 prescribes ``b = Δ / ε_attr``; the production sampler rounds to the
    grid 2**-40, which OpenDP's privacy map charges, so ``b`` is
    :func:`fragrelease.rng.laplace.calibrated_laplace_scale` ``(Δ, ε_attr, size)`` (through
    :func:`centroid_noise`, :class:`fragrelease.rng.laplace.LaplaceNoise`): the smallest float whose
    map at ``d_in = Δ`` for a vector of ``size`` values is ≤ ε_attr, about ``(Δ + size·2**-40) / ε_attr``
    (docs/privacy.md). ``size`` is the attribute's number of clusters c (the whole vector Δ is for).
    The Spark job and the numpy reference both call this, so they use the same double. Δ is local
    (data-dependent) for iDP-IR and iDP: never log the result.

    Raises
    ------
    InvalidParameterError
        If Δ is negative or not finite, ε_attr ≤ 0, or size < 1.
    """
    return centroid_noise(delta, epsilon_attribute, size).scale


@dataclass(frozen=True)
class IRMechanism:
    """One IR mechanism: the k it uses, its sensitivity Δ and its Laplace scale (docs/specification.md §2).

    The one place a mechanism is defined: configuration validation, the plan, the numpy reference,
    the evaluation, the audits and the Spark job (which calls :meth:`sensitivity_from_extremes` and :meth:`scale` on its
    executors) all ask :func:`get_mechanism`.

    Attributes
    ----------
    name : "idp-ir", "dp-ir" or "idp".
    notion : "DP" (the guarantee holds for every pair of neighbours) or "iDP" (with respect to the
        actual dataset).
    local : True when Δ is the local sensitivity of the data (iDP-IR, iDP), False when it is the
        global one from the declared domain (DP-IR).
    fixed_k : the cluster size the mechanism always uses (plain iDP: 1), or None (the plan's k).
    """

    name: str
    notion: Literal["DP", "iDP"]
    local: bool
    fixed_k: Optional[int] = None

    def k_used(self, k: int) -> int:
        """The cluster size this mechanism uses for a plan's k."""
        return self.fixed_k if self.fixed_k is not None else k

    def sensitivity(self, values: np.ndarray, k: int, lo: float, hi: float) -> float:
        """Δ of one attribute's centroid vector from its values, shape (n,), in [lo, hi]."""
        k_used = self.k_used(k)
        if not self.local:
            return dp_ir_sensitivity(lo, hi, k_used)
        return idp_ir_sensitivity(values, k_used, lo, hi)

    def sensitivity_bound(self, k: int, lo: float, hi: float) -> float:
        """Δ without any data: ``(hi - lo) / k_used`` (docs/specification.md §2).

        Exact for DP-IR (the global sensitivity it calibrates to); for iDP-IR and plain iDP an upper
        bound of the local Δ of every dataset in [lo, hi] of any size n ≥ k_used, since every gap is
        counted once with weight at most 1/k. Public (k and the declared domain only).
        """
        return dp_ir_sensitivity(lo, hi, self.k_used(k))

    def sensitivity_from_extremes(self, min_first: float, min_last: float, max_second_last: float,
                                  max_last: float, *, k: int, size_last: int, n_clusters: int, lo: float,
                                  hi: float) -> float:
        """Δ from four order statistics of the sorted attribute (what a distributed job aggregates).

        ``min_first`` the smallest value, ``min_last``/``max_last`` the extremes of the last
        cluster, ``max_second_last`` the largest value of the second-to-last cluster (any value
        when there is one cluster), ``size_last`` the last cluster's size. DP-IR ignores them.
        """
        k_used = self.k_used(k)
        if not self.local:
            return dp_ir_sensitivity(lo, hi, k_used)
        return idp_ir_sensitivity_from_extremes(min_first, min_last, max_second_last, max_last, k_used,
                                                size_last, n_clusters, lo, hi)

    def noise(self, delta: float, epsilon_attribute: Fraction | float, size: int) -> LaplaceNoise:
        """The Laplace noise of ``size`` centroids at this mechanism's Δ (:func:`centroid_noise`): the same for every mechanism."""
        return centroid_noise(delta, epsilon_attribute, size)

    def scale(self, delta: float, epsilon_attribute: Fraction | float, size: int) -> float:
        """Laplace scale of ``size`` centroids, ``b ≈ Δ / ε`` calibrated by OpenDP's map (:meth:`noise`)."""
        return self.noise(delta, epsilon_attribute, size).scale


#: The mechanisms the project implements, by name (docs/specification.md §2).
MECHANISMS: Mapping[str, IRMechanism] = {
    m.name: m for m in (
        IRMechanism("idp-ir", "iDP", local=True),
        IRMechanism("dp-ir", "DP", local=False),
        IRMechanism("idp", "iDP", local=True, fixed_k=1),
    )
}
MECHANISM_NAMES = tuple(MECHANISMS)


def get_mechanism(name: str) -> IRMechanism:
    """The registered mechanism called ``name``.

    Raises
    ------
    InvalidParameterError
        Unknown name (the message lists the known ones).
    """
    return registered(MECHANISMS, name, "mechanism")


def mechanism_k(mechanism: str, k: int) -> int:
    """The cluster size ``mechanism`` uses (plain iDP: 1); see :meth:`IRMechanism.k_used`."""
    return get_mechanism(mechanism).k_used(k)


def sensitivity(mechanism: str, values: np.ndarray, k: int, lo: float, hi: float) -> float:
    """Δ of one attribute under ``mechanism``; see :meth:`IRMechanism.sensitivity`."""
    return get_mechanism(mechanism).sensitivity(values, k, lo, hi)


def noisy_centroids(*, centroids: np.ndarray, scales: np.ndarray, attributes: np.ndarray, clusters: np.ndarray,
                    noise: NoiseSource) -> np.ndarray:
    """Centroids plus one Laplace draw each (scale ``scales``), unclamped; all arrays shape (m,), keyword-only."""
    return noise.perturb(np.asarray(centroids, float), np.asarray(scales, float), attributes, clusters)


def draw_task(values: np.ndarray, task: AttributeTask, stage: StageSpec, noise: NoiseSource, *,
              tiebreak: np.ndarray | None = None,
              sort: str = "packed") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The randomized part of the mechanism on one attribute: the one definition of the draw.

    ``values`` shape (n,) with n = ``stage.n``, in ``[task.lo, task.hi]``; ``task`` and ``stage``
    (:mod:`fragrelease.idpir.stage`) give the domain, the centroid budget, the mechanism, its k and
    c; ``tiebreak`` (n,) orders ties (record ids); ``sort`` how the values are ranked
    (:func:`fragrelease.idpir.microaggregation.ir_order`: ``packed`` or ``lexsort``, the same order).
    Returns ``(order, clusters, noisy, sizes)``: the rank order (n,), each value's cluster (n,,
    original order; :meth:`StageSpec.cluster_of` of its rank), the raw noisy centroids (c,,
    unclamped) and the cluster sizes (c,). ``stage.finish(noisy, sizes, task)`` then gives the
    released value of every cluster (post-processing). The Spark plans draw through it
    (:func:`fragrelease.udfs.noise.draw_ranked_attribute`) or through the same
    :func:`noisy_centroids` with the same :meth:`StageSpec.noise`.

    Raises
    ------
    InvalidParameterError
        A value outside [lo, hi], or not n values.
    """
    values = np.asarray(values, dtype=float)
    if np.any(values < task.lo) or np.any(values > task.hi):
        raise InvalidParameterError(f"values of {task.name!r} must lie in [{task.lo}, {task.hi}]")
    n = values.size
    if n != stage.n:
        raise InvalidParameterError(f"attribute {task.name!r} has {n} values, the stage {stage.n}")
    order = ir_order(values, tiebreak, sort=sort)
    clusters = np.empty(n, dtype=np.int64)
    clusters[order] = stage.cluster_of(np.arange(n))  # as ir_clusters
    centroids = ir_centroids(values, clusters)
    c = stage.c
    lap = stage.noise(stage.mechanism.sensitivity(values, stage.k, task.lo, task.hi), task)
    # the draw goes through noisy_centroids, the one function every centroid draw calls (Spark tasks included)
    noisy = noisy_centroids(centroids=centroids, scales=lap.scales(c), attributes=np.full(c, task.name, dtype=object),
                            clusters=np.arange(c), noise=noise)
    return order, clusters, noisy, np.bincount(clusters, minlength=c)


def _checked_stage(values: np.ndarray, task: AttributeTask, *, k: int, mechanism: str,
                   options: ReleaseOptions = DEFAULT_OPTIONS) -> tuple[np.ndarray, StageSpec]:
    """The values as floats (checked against ``task``'s domain first) and the stage of ``mechanism``
    under the plan's ``k`` for them (:meth:`StageSpec.build`)."""
    values = np.asarray(values, dtype=float)
    if np.any(values < task.lo) or np.any(values > task.hi):
        raise InvalidParameterError(f"values of {task.name!r} must lie in [{task.lo}, {task.hi}]")
    return values, StageSpec.build(get_mechanism(mechanism), k, values.size, options)


def draw_attribute(
    values: np.ndarray,
    task: AttributeTask,
    *,
    k: int,
    mechanism: str,
    noise: NoiseSource,
    tiebreak: np.ndarray | None = None,
    sort: str = "packed",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The randomized part of :func:`protect_attribute`: IR clusters and their raw noisy centroids.

    Parameters as :func:`protect_attribute` (the plan's k; :func:`draw_task` on ``task`` and the
    stage they make); ``sort`` is how the values are ranked
    (:func:`fragrelease.idpir.microaggregation.ir_order`: ``packed`` or ``lexsort``, the same clusters). Returns
    ``(clusters, noisy, sizes)``: the cluster index
    of every value (shape (n,), original order), the noisy centroids before any post-processing
    (shape (c,), unclamped, in the values' unit) and the cluster sizes (shape (c,)).
    :func:`fragrelease.idpir.postprocess.finish_centroids` on ``(noisy, sizes)`` then gives the
    released value of every cluster (post-processing: no further access to the values).

    Raises
    ------
    InvalidParameterError
        A value outside [task.lo, task.hi], an unknown mechanism or k out of range.
    """
    x, stage = _checked_stage(values, task, k=k, mechanism=mechanism)
    _, clusters, noisy, sizes = draw_task(x, task, stage, noise, tiebreak=tiebreak, sort=sort)
    return clusters, noisy, sizes


def protect_attribute(
    values: np.ndarray,
    task: AttributeTask,
    *,
    k: int,
    mechanism: str,
    noise: NoiseSource,
    tiebreak: np.ndarray | None = None,
    options: ReleaseOptions = DEFAULT_OPTIONS,
    sort: str = "packed",
) -> np.ndarray:
    """Protect one attribute with IR microaggregation and Laplace noise on the centroids.

    The numpy reference the Spark job is tested against: it takes the attribute as the job does, one
    :class:`~fragrelease.idpir.stage.AttributeTask`, builds the job's
    :class:`~fragrelease.idpir.stage.StageSpec` from ``mechanism``, ``k``, the value count and
    ``options`` (:meth:`StageSpec.build <fragrelease.idpir.stage.StageSpec.build>`), then runs
    :func:`draw_task` and :meth:`StageSpec.finish <fragrelease.idpir.stage.StageSpec.finish>`.

    Parameters
    ----------
    values : array of shape (n,)
        Numeric values in [task.lo, task.hi], or categorical ranks in [1, |dom|]
        (fragrelease.idpir.category_order).
    task : AttributeTask
        The attribute: its name (handed to the noise source), declared domain ``lo, hi`` (ranks use
        [1, |dom|]), ``categorical`` (round the clamped noisy centroid) and the centroids' budget
        ``epsilon`` (ε_j / l_j; a Fraction, or a float in the reference).
    k : int
        Cluster size (ignored by plain iDP, which uses k = 1).
    mechanism : {"idp-ir", "dp-ir", "idp"}
    noise : NoiseSource
    tiebreak : array of shape (n,), optional
        Order of ties (record ids).
    options : ReleaseOptions
        The release options; the post-processing reads ``options.postprocess``: ``isotonic``
        (default), the isotonic projection of the noisy centroid vector before clamping and
        rounding (docs/specification.md §9), or ``none``, the paper's release.
    sort : {"packed", "lexsort"}
        How the values are ranked (:func:`fragrelease.idpir.microaggregation.ir_order`); the same
        clusters either way. ``lexsort`` is the slower reference sort.

    Returns
    -------
    array of shape (n,): each value replaced by its cluster's released value, original order kept.

    Raises
    ------
    InvalidParameterError
        A value outside [task.lo, task.hi], an unknown mechanism, k out of range.
    """
    x, stage = _checked_stage(values, task, k=k, mechanism=mechanism, options=options)
    _, clusters, noisy, sizes = draw_task(x, task, stage, noise, tiebreak=tiebreak, sort=sort)
    return stage.finish(noisy, sizes, task)[clusters]
