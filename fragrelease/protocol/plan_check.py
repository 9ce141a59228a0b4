"""An owner's check of the aggregator's plan against its own configuration, Spark-free.

The plan (``plan.json``) lies in the shared work folder and comes from the aggregator: an owner must
not spend what a plan says without checking it. Before its ledger or any noise is touched, each owner
recomputes from its own configuration what the plan must say for it (:func:`expected_plan_terms`)
and refuses a plan that differs in any field (:func:`check_plan_for_owner`): the dataset, the
fragmentation, the owners, the release's ε, the composition and vertical split, its own ε_j (horizontal: ε, parallel composition; vertical:
``equal`` ε/m or ``by-attributes`` ε·l_j/l) and ε_j/l_j, the mechanism, k (plain ``idp`` fixes k = 1), its attributes with their declared domains
and categories, the id column, ``keep_id``, each attribute's budget split and every release option
(:data:`fragrelease.protocol.options.OPTION_NAMES`: the category order and its share, the linkage, the
post-processing, and any option added there later, compared without naming it here).

Source: docs/specification.md §3 (the plan and the owners' checks); Del Vasto-Terrientes et al.
(ICISSP 2025) §4.2 (each owner protects with the (ε_j, k) of the plan).
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, Optional, Protocol, Sequence

from fragrelease.errors import ManifestMismatchError
from fragrelease.idpir.category_order import AttributeBudget
from fragrelease.idpir.mechanisms import get_mechanism
from fragrelease.idpir.spec import ProtectionSpec, attribute_budgets
from fragrelease.protocol.config import OwnerConfig, ReleaseConfig
from fragrelease.protocol.difference import first_difference, shown
from fragrelease.protocol.fragmentation import fragmentation_of
from fragrelease.protocol.messages import Plan
from fragrelease.protocol.options import OPTION_NAMES


class _Schema(Protocol):
    """What the check reads of a dataset schema (:class:`fragrelease.schemas.base.DatasetSchema`)."""

    name: str

    @property
    def id_column(self) -> Any: ...

    @property
    def protected(self) -> Sequence[Any]: ...

    def attribute(self, name: str) -> Any: ...


#: Fields compared as exact ε values (``"1/2"`` equals ``"0.5"``); the release options are typed on
#: both sides (:class:`~fragrelease.protocol.options.ReleaseOptions`), so they compare exactly as they are.
_EXACT = ("epsilon", "epsilon_j", "epsilon_per_attribute")


def _owner(cfg: ReleaseConfig, name: str) -> OwnerConfig:
    for o in cfg.owners:
        if o.name == name:
            return o
    raise ManifestMismatchError(f"owner {name!r} is not in configuration {cfg.name!r}")


def expected_plan_terms(cfg: ReleaseConfig, schema: _Schema, owner: str) -> dict[str, Any]:
    """What a plan must say for ``owner``, recomputed from the owner's configuration and schema.

    Returns a dict of field → value: ε values as Fractions, attribute specs as
    :meth:`fragrelease.schemas.base.Attribute.public_spec`, budgets in their wire form
    (:meth:`fragrelease.idpir.category_order.AttributeBudget.to_dict`) from
    :func:`fragrelease.idpir.spec.protection_spec`, the one place the split is computed.

    Raises
    ------
    ManifestMismatchError
        ``owner`` is not in the configuration.
    """
    me = _owner(cfg, owner)
    eps = cfg.epsilon
    mech = get_mechanism(cfg.mechanism)
    frag = fragmentation_of(cfg.fragmentation)
    attrs = frag.owner_attributes(schema.protected, [schema.attribute(a) for a in me.attributes or ()])
    eps_j = frag.owner_epsilons(eps, {o.name: tuple(o.attributes or ()) for o in cfg.owners}, cfg.epsilon_split)[owner]
    k = mech.fixed_k if mech.fixed_k is not None else cfg.k
    budgets = attribute_budgets([(a.name, a.categorical) for a in attrs], eps_j, options=cfg.options)
    return {
        "dataset": schema.name,
        "fragmentation": cfg.fragmentation,
        "owners": sorted(o.name for o in cfg.owners),
        "epsilon": eps,
        "composition": frag.composition,
        "epsilon_split": frag.epsilon_split(cfg.epsilon_split),
        "epsilon_j": eps_j,
        "epsilon_per_attribute": budgets[0].total,
        "mechanism": cfg.mechanism,
        "k": k,
        "attributes": [a.name for a in attrs],
        "attribute_specs": [a.public_spec() for a in attrs],
        "id_column": schema.id_column,
        "keep_id": cfg.keep_id,
        "budgets": [b.to_dict() for b in budgets],
        **cfg.option_values(),  # every release option (fragrelease.protocol.options), whatever it is
    }


def plan_terms(plan: Plan, owner: str) -> dict[str, Any]:
    """The same fields as :func:`expected_plan_terms`, as ``plan`` states them for ``owner``.

    Raises
    ------
    ManifestMismatchError
        ``owner`` is not part of the plan (naming the owner and the plan).
    """
    po = plan.owner(owner)
    specs = {a.get("name"): a for a in plan.attributes}
    return {
        "dataset": plan.dataset,
        "fragmentation": plan.fragmentation,
        "owners": sorted(o.name for o in plan.owners),
        "epsilon": plan.epsilon,
        "composition": plan.composition,
        "epsilon_split": plan.epsilon_split,
        "epsilon_j": po.epsilon,
        "epsilon_per_attribute": po.epsilon_per_attribute,
        "mechanism": plan.mechanism,
        "k": plan.k,
        "attributes": list(po.attributes),
        "attribute_specs": [specs.get(a) for a in po.attributes],
        "id_column": plan.id_column,
        "keep_id": plan.keep_id,
        "budgets": [_wire(b) for b in po.budgets],
        **{name: getattr(plan, name, None) for name in OPTION_NAMES},
    }


def _wire(budget: Any) -> Any:
    """A plan's budget in wire form (an :class:`AttributeBudget`, or as written if it is not one)."""
    return budget.to_dict() if isinstance(budget, AttributeBudget) else budget


def _same(field: str, got: Any, want: Any) -> bool:
    if field in _EXACT:
        try:
            return Fraction(str(got)) == Fraction(str(want))
        except (ValueError, ZeroDivisionError):
            return False
    return bool(got == want)


def check_plan_for_owner(plan: Plan, owner: str, expected: dict[str, Any]) -> None:
    """Refuse ``plan`` unless it says for ``owner`` exactly what ``expected`` (its configuration) says.

    ``expected`` comes from :func:`expected_plan_terms`. Fields are compared in the order of
    ``expected``; ε values exactly (``1/2`` equals ``0.5``).

    Raises
    ------
    ManifestMismatchError
        One line naming the owner, the plan, the first field that differs and both values, e.g.
        ``owner 'clinic-a' refuses plan 1234…: epsilon_j is 50 in the plan, its configuration says 1``;
        in a list of attribute specs or budgets, the first attribute and key that differ and both
        values there (``attribute_specs: attribute 'age' domain is [0.0, 1000.0] in the plan, its
        configuration says [0.0, 120.0]``; :func:`fragrelease.protocol.difference.first_difference`),
        each value at most :data:`~fragrelease.protocol.difference.MAX_SHOWN` characters; or the owner
        is not part of the plan.
    """
    stated = plan_terms(plan, owner)
    for field, want in expected.items():
        got = stated.get(field)
        if not _same(field, got, want):
            where, said, says = _first_difference(field, got, want)
            raise ManifestMismatchError(f"owner {owner!r} refuses plan {plan.plan_id}: {where} is {said} in the plan, "
                                        f"its configuration says {says}")


def _first_difference(field: str, got: Any, want: Any) -> tuple[str, str, str]:
    """(where, the plan's value, the configuration's value) for the message of a field that differs.

    A short value is shown whole (``owners is ['a', 'b', 'mallory']``); a long list or a list of
    attribute specs or budgets by its first difference (``attribute_specs: attribute 'age' domain is
    [0.0, 1000.0] ...``, ``attribute_specs: attribute 'city' categories item 7 is ...``), never whole
    (:func:`fragrelease.protocol.difference.first_difference`)."""
    diff = first_difference(got, want)
    if diff is None:  # equal items in another container type: say so shortly
        return field, shown(got), shown(want)
    return (f"{field}: {diff.where}" if diff.where else field), diff.got, diff.want


def verified_spec(plan: Plan, cfg: ReleaseConfig, schema: _Schema, owner: str) -> Optional[ProtectionSpec]:
    """Check ``plan`` for ``owner`` against its configuration once, then return the owner's spec from it
    (None for a plan without k, a kind without microaggregation: its k is checked equal to the
    configuration's, which only such a kind leaves unset).

    The one check an owner makes before its ledger, its data or any noise is touched
    (docs/specification.md §3). Everything downstream takes the returned
    :class:`~fragrelease.idpir.spec.ProtectionSpec` and recomputes nothing.

    Raises
    ------
    ManifestMismatchError
        From :func:`check_plan_for_owner` (one line naming the first field that differs).
    InvalidParameterError
        The plan's k exceeds the owner's records as the plan states them.
    """
    check_plan_for_owner(plan, owner, expected_plan_terms(cfg, schema, owner))
    return None if plan.k is None else plan.spec_for(owner)
