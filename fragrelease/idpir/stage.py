"""The owner's stage as the executors see it: one frozen task per attribute and one stage spec.

An owner's :class:`~fragrelease.idpir.spec.ProtectionSpec` (verified against the plan once) is cut
here into what the mechanism needs, and nothing is unpacked again below this point:

- :class:`AttributeTask`: one attribute's name, declared domain ``[lo, hi]`` (ranks: ``[1, |dom|]``),
  kind (numeric or categorical) and centroid budget ε_attr (exact);
- :class:`StageSpec`: the mechanism object, the k it clusters with (plain iDP: 1), the cluster count
  c, the record count n and the release options (post-processing included).

Both plans of the Spark job (one task per attribute, and the distributed plan:
:mod:`fragrelease.jobs.idpir.cluster_noise`, :mod:`fragrelease.jobs.idpir.bucket_sort`), the
executor draws (:mod:`fragrelease.udfs.noise`) and the numpy reference
(:func:`fragrelease.idpir.mechanisms.draw_task`, :func:`~fragrelease.idpir.mechanisms.protect_attribute`)
take these two objects. The k a mechanism uses is resolved by :func:`resolve_k` alone; the cluster
of a rank is :meth:`StageSpec.cluster_of` (:func:`fragrelease.idpir.microaggregation.cluster_cut`).

Everything here is public: declared by the configuration or fixed by the plan (docs/specification.md
§3, "Only public parameters travel"). Source: docs/specification.md §1-2, §9.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol

import numpy as np

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.category_order import AttributeBudget
from fragrelease.idpir.microaggregation import check_k, cluster_count, cluster_cut
from fragrelease.idpir.postprocess import finish_centroids
from fragrelease.protocol.options import DEFAULT_OPTIONS, ReleaseOptions
from fragrelease.rng.laplace import LaplaceNoise


class StageMechanism(Protocol):
    """What a stage calls on its mechanism (:class:`fragrelease.idpir.mechanisms.IRMechanism` has it; that
    module builds stages for its numpy reference, so this one names it structurally)."""

    def k_used(self, k: int) -> int: ...

    def sensitivity(self, values: np.ndarray, k: int, lo: float, hi: float) -> float: ...

    def sensitivity_from_extremes(self, min_first: float, min_last: float, max_second_last: float,
                                  max_last: float, *, k: int, size_last: int, n_clusters: int, lo: float,
                                  hi: float) -> float: ...

    def noise(self, delta: float, epsilon_attribute: Fraction | float, size: int) -> LaplaceNoise: ...


class OwnerSpec(Protocol):
    """What :meth:`StageSpec.of` reads of an owner's :class:`fragrelease.idpir.spec.ProtectionSpec`."""

    @property
    def mechanism(self) -> StageMechanism: ...

    @property
    def k_used(self) -> int: ...

    @property
    def n_records(self) -> int: ...

    @property
    def options(self) -> ReleaseOptions: ...


class DeclaredAttribute(Protocol):
    """What a task reads of a declared attribute (:class:`fragrelease.schemas.base.Attribute` has it;
    the math layer names no schema module)."""

    name: str

    @property
    def categorical(self) -> bool: ...

    def bounds(self) -> tuple[float, float]: ...


def resolve_k(mechanism: StageMechanism, k: int) -> int:
    """The cluster size ``mechanism`` uses for a plan's ``k`` (plain iDP: 1; otherwise k), unchecked.

    The one place production code turns the plan's k into the k used
    (:meth:`fragrelease.idpir.mechanisms.IRMechanism.k_used` is the mechanism's rule).
    """
    return mechanism.k_used(k)


@dataclass(frozen=True)
class AttributeTask:
    """One attribute as the noise step knows it: all public (the declared domain) or budget.

    Attributes
    ----------
    name : the attribute's name (what the noise source is told).
    lo, hi : the declared domain, ``lo < hi`` (categorical ranks: ``[1, |dom|]``).
    categorical : released values are rounded ranks.
    epsilon : the centroids' budget ε_attr (exact in the release; the numpy reference also takes a
        float); the noise object calibrates the float scale from it.
    """

    name: str
    lo: float
    hi: float
    categorical: bool
    epsilon: Fraction | float

    @classmethod
    def of(cls, attribute: DeclaredAttribute, budget: AttributeBudget) -> AttributeTask:
        """The task of a declared ``attribute`` under its ``budget`` (the centroid part, exact).

        Raises
        ------
        InvalidParameterError
            ``budget`` is another attribute's.
        """
        if budget.attribute != attribute.name:
            raise InvalidParameterError(f"the budget of {budget.attribute!r} is not for attribute {attribute.name!r}")
        lo, hi = attribute.bounds()
        return cls(attribute.name, lo, hi, attribute.categorical, Fraction(budget.centroids))


@dataclass(frozen=True)
class StageSpec:
    """How one owner's stage protects every attribute: shared by all its :class:`AttributeTask` (frozen, public).

    Attributes
    ----------
    mechanism : the :class:`~fragrelease.idpir.mechanisms.IRMechanism` object.
    k : the cluster size the mechanism uses (already resolved: plain iDP 1), 1 ≤ k ≤ n.
    n : the record count (each attribute has n values).
    options : the release options (:class:`~fragrelease.protocol.options.ReleaseOptions`); the
        post-processing reads them (:meth:`finish`).
    c : the cluster count ``max(n // k, 1)`` (derived, not an argument).

    Raises
    ------
    InvalidParameterError
        (on construction) k < 1 or k > n (:func:`fragrelease.idpir.microaggregation.check_k`), n < 1.
    """

    mechanism: StageMechanism
    k: int
    n: int
    options: ReleaseOptions = DEFAULT_OPTIONS
    c: int = field(init=False)

    def __post_init__(self) -> None:
        check_k(self.k, self.n)
        object.__setattr__(self, "c", cluster_count(self.n, self.k))

    @classmethod
    def build(cls, mechanism: StageMechanism, k: int, n: int, options: ReleaseOptions = DEFAULT_OPTIONS) -> StageSpec:
        """The stage of ``mechanism`` under a plan's ``k`` (resolved by :func:`resolve_k`) for n records.

        Raises as the constructor (k out of range for n).
        """
        return cls(mechanism, resolve_k(mechanism, k), n, options)

    @classmethod
    def of(cls, spec: OwnerSpec) -> StageSpec:
        """The stage of an owner's :class:`~fragrelease.idpir.spec.ProtectionSpec`: its mechanism, k used,
        ``n_records`` and options. Raises as the constructor."""
        return cls(spec.mechanism, spec.k_used, spec.n_records, spec.options)

    def cluster_of(self, rank):
        """The cluster of each 0-based rank (int or int array, same shape out):
        :func:`fragrelease.idpir.microaggregation.cluster_cut` with this stage's k and c."""
        return cluster_cut(rank, self.k, self.c)

    def noise(self, delta: float, task: AttributeTask) -> LaplaceNoise:
        """The Laplace noise of ``task``'s c centroids at sensitivity Δ (local for iDP-IR: never log it)."""
        return self.mechanism.noise(delta, task.epsilon, self.c)

    def finish(self, noisy: np.ndarray, sizes: np.ndarray, task: AttributeTask) -> np.ndarray:
        """The released values of ``task``'s clusters, shape (c,), from the raw noisy centroids and the
        cluster sizes: :func:`fragrelease.idpir.postprocess.finish_centroids` under this stage's options.

        Raises as :func:`~fragrelease.idpir.postprocess.finish_centroids`.
        """
        return finish_centroids(noisy, sizes, task.lo, task.hi, task.categorical, self.options)
