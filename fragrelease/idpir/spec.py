"""One owner's protection spec: everything the mechanism needs, typed and exact, from the plan to the UDF.

The per-attribute budget split is computed in exactly one place, :func:`protection_spec`: the
aggregator's plan calls it for every owner (:func:`fragrelease.protocol.messages.make_plan`), the
owner's check of the plan recomputes it from its own configuration
(:func:`fragrelease.protocol.plan_check.verified_spec`) and the single-owner API calls it for its own
parameters. Everything downstream (the ledger spend, the category histograms, the Spark stages, the
numpy reference) reads the frozen :class:`ProtectionSpec` and recomputes nothing; the Spark stages and
the executors get it cut into one :class:`~fragrelease.idpir.stage.AttributeTask` per attribute and
one :class:`~fragrelease.idpir.stage.StageSpec` (:mod:`fragrelease.idpir.stage`).

Every field is public: declared by the configuration or fixed by the plan (docs/specification.md §3,
"Only public parameters travel"). Nothing in a spec depends on the data.

Source: docs/specification.md §1-3; Del Vasto-Terrientes et al. (ICISSP 2025) §4.2 (each owner
protects with the (ε_j, k) of the plan).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Optional, Sequence

from fragrelease.budget import per_attribute_epsilon
from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.category_order import AttributeBudget, parse_share, split_attribute_budget
from fragrelease.idpir.mechanisms import IRMechanism, get_mechanism
from fragrelease.idpir.stage import resolve_k
from fragrelease.protocol.options import ReleaseOptions


@dataclass(frozen=True)
class ProtectionSpec:
    """What one data owner protects under one plan, and how (frozen; all values public and exact).

    Attributes
    ----------
    owner, dataset, plan_id : who protects which dataset under which plan (``plan_id`` is ``"local"``
        for the single-owner API, which has no plan).
    mechanism : the :class:`~fragrelease.idpir.mechanisms.IRMechanism` object (DP-IR, iDP-IR or plain iDP).
    k : the plan's cluster size; :attr:`k_used` is what the mechanism clusters with (plain iDP: 1).
    epsilon : ε_j, what this owner records in its ledger (Fraction > 0).
    budgets : one :class:`~fragrelease.idpir.category_order.AttributeBudget` per protected attribute,
        in the fragment's order; their totals add up to ``epsilon`` exactly.
    options : the release options (:class:`~fragrelease.protocol.options.ReleaseOptions`: category
        order and share, linkage, post-processing; validated when built). The properties
        :attr:`category_order`, :attr:`category_order_share`, :attr:`linkage` and :attr:`postprocess`
        read them; a new option is read as ``spec.options.<name>``.
    n_records : the owner's record count (public under substitution neighbourhood).

    Raises
    ------
    InvalidParameterError
        (on construction) budgets that do not add up to ``epsilon``, a repeated attribute, k > n.
    """

    owner: str
    dataset: str
    plan_id: str
    mechanism: IRMechanism
    k: int
    epsilon: Fraction
    budgets: tuple[AttributeBudget, ...]
    options: ReleaseOptions
    n_records: int

    def __post_init__(self) -> None:
        names = [b.attribute for b in self.budgets]
        if not names:
            raise InvalidParameterError(f"owner {self.owner!r} protects no attribute")
        if len(set(names)) != len(names):
            raise InvalidParameterError(f"owner {self.owner!r} lists an attribute twice: {names}")
        total = sum((b.total for b in self.budgets), Fraction(0))
        if total != self.epsilon:
            raise InvalidParameterError(f"owner {self.owner!r}: the attribute budgets add up to {total}, not its ε = {self.epsilon}")
        if not isinstance(self.options, ReleaseOptions):
            raise InvalidParameterError(f"owner {self.owner!r}: the spec needs ReleaseOptions, not {type(self.options).__name__}")
        if self.k_used > self.n_records:
            raise InvalidParameterError(f"k = {self.k_used} exceeds the {self.n_records} records of owner {self.owner!r}")

    @property
    def category_order(self) -> str:
        """How categorical ranks are ordered: ``"dp-frequency"`` or ``"declared"``."""
        return self.options.category_order

    @property
    def category_order_share(self) -> Fraction:
        """The dp-frequency histogram's share of a categorical attribute's ε (exact, in (0, 1))."""
        return self.options.category_order_share

    @property
    def postprocess(self) -> str:
        """``"isotonic"`` or ``"none"`` (docs/specification.md §9)."""
        return self.options.postprocess

    @property
    def linkage(self) -> str:
        """``"linked"`` or ``"unlinked"`` (docs/privacy.md)."""
        return self.options.linkage

    @property
    def attributes(self) -> tuple[str, ...]:
        """The protected attributes' names, in order."""
        return tuple(b.attribute for b in self.budgets)

    @property
    def k_used(self) -> int:
        """The cluster size the mechanism uses (plain iDP: 1; otherwise the plan's k): :func:`fragrelease.idpir.stage.resolve_k`."""
        return resolve_k(self.mechanism, self.k)

    @property
    def epsilon_per_attribute(self) -> Fraction:
        """ε_j / l_j, each attribute's total (sequential composition over attributes)."""
        return self.epsilon / len(self.budgets)

    def budget(self, attribute: str) -> AttributeBudget:
        """The budget of ``attribute``.

        Raises
        ------
        InvalidParameterError
            ``attribute`` is not protected by this spec.
        """
        for b in self.budgets:
            if b.attribute == attribute:
                return b
        raise InvalidParameterError(f"owner {self.owner!r} does not protect attribute {attribute!r}")


def attribute_budgets(attributes: Sequence[tuple[str, bool]], epsilon: Fraction, *,
                      options: ReleaseOptions) -> tuple[AttributeBudget, ...]:
    """The one split of an owner's ε_j: ε_j / l_j per attribute (:func:`fragrelease.budget.per_attribute_epsilon`),
    each divided between its category histogram and its centroids
    (:func:`fragrelease.idpir.category_order.split_attribute_budget`). docs/specification.md §1-2.

    ``attributes`` are ``(name, categorical)`` pairs in the fragment's order; ``options`` give the
    category order and the histogram's share. Returns one budget per attribute, in that order; their
    totals add up to ``epsilon`` exactly.

    Raises
    ------
    InvalidParameterError
        ε_j ≤ 0 or no attributes.
    """
    share = parse_share(options.category_order_share)
    eps_attr = per_attribute_epsilon(Fraction(epsilon), len(attributes))
    return tuple(split_attribute_budget(name, eps_attr, categorical=categorical, category_order=options.category_order,
                                        share=share) for name, categorical in attributes)


def required_k(k: Optional[int], *, linkage: str) -> int:
    """A configuration's or plan's ``k`` where microaggregation needs it.

    Raises
    ------
    InvalidParameterError
        ``k`` is None (the configuration of an IR kind refuses that before; a plan without k is another
        kind's: ``linkage`` names it).
    """
    if k is None:
        raise InvalidParameterError(f"k: required by linkage: {linkage} (the cluster size of individual-ranking "
                                    "microaggregation); none given")
    return k


def protection_spec(
    *,
    owner: str,
    dataset: str,
    plan_id: str,
    attributes: Sequence[tuple[str, bool]],
    mechanism: str | IRMechanism,
    k: int,
    epsilon: Fraction,
    options: ReleaseOptions,
    n_records: int,
) -> ProtectionSpec:
    """Build an owner's spec, its budgets split by :func:`attribute_budgets` (docs/specification.md §1-3).

    ``attributes`` are ``(name, categorical)`` pairs in the fragment's order; ``epsilon`` is ε_j (exact);
    ``options`` the release options (:class:`~fragrelease.protocol.options.ReleaseOptions`).

    Raises
    ------
    InvalidParameterError
        ε_j ≤ 0, no attributes, an unknown mechanism, k > n.
    """
    mech = get_mechanism(mechanism) if isinstance(mechanism, str) else mechanism
    budgets = attribute_budgets(attributes, epsilon, options=options)
    return ProtectionSpec(owner=owner, dataset=dataset, plan_id=plan_id, mechanism=mech, k=k, epsilon=Fraction(epsilon),
                          budgets=budgets, options=options.options, n_records=n_records)
