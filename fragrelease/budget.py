"""Exact privacy-budget arithmetic (docs/specification.md §2-3; Del Vasto-Terrientes et al. (ICISSP 2025) §3.3 and §4.2).

Budgets are :class:`fractions.Fraction` values so that splitting ε among owners and attributes and
adding it back up is exact: ``sum(per-attribute ε) == total ε`` holds with ``==``, not ``isclose``.
Floats are produced only at the last step, when a Laplace scale ``b = Δ / ε_attr`` is computed.

:data:`Epsilon` is the one type of a budget between the configuration and the noise: a
:class:`~fractions.Fraction` in Python, exact text (``"1/10"``) on the wire (plans, manifests,
provenance). :data:`EpsilonPart` is the same for a part of a budget that may be 0 (a numeric
attribute's category-histogram share).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Annotated, Literal, Mapping, Sequence

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

from .errors import InvalidParameterError

#: Vertical budget split rules (docs/specification.md §3).
EPSILON_SPLITS = ("equal", "by-attributes")


def parse_epsilon(value: object, *, name: str = "epsilon") -> Fraction:
    """Turn a user-given ε into an exact positive Fraction.

    Parameters
    ----------
    value : str, int, float or Fraction
        ``"0.1"``, ``"1/3"``, ``1``, ``0.5``. Floats are taken by their shortest decimal repr
        (``0.1`` becomes exactly 1/10, not the binary double nearest to it).
    name : str
        Name used in error messages.

    Raises
    ------
    InvalidParameterError
        If the value is not a finite number > 0 (the message repeats it).
    """
    if isinstance(value, bool):
        raise InvalidParameterError(f"{name} must be a number > 0, not {value!r}")
    try:
        if isinstance(value, Fraction):
            eps = value
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise InvalidParameterError(f"{name} must be finite and > 0, not {value!r}")
            eps = Fraction(repr(value))
        else:
            eps = Fraction(str(value).strip())
    except (ValueError, ZeroDivisionError) as exc:
        raise InvalidParameterError(f"{name} must be a number > 0, not {value!r}") from exc
    if eps <= 0:
        raise InvalidParameterError(f"{name} must be > 0, not {value!r}")
    return eps


def format_epsilon(eps: Fraction) -> str:
    """Exact text form of a budget: ``"1"``, ``"1/10"``, ``"3/40"``."""
    return str(eps)


def parse_epsilon_part(value: object, *, name: str = "epsilon") -> Fraction:
    """Like :func:`parse_epsilon` but also accepts 0: a part of a budget that may be unspent.

    Raises
    ------
    InvalidParameterError
        If the value is not a finite number >= 0 (the message repeats it).
    """
    if isinstance(value, float) and value == 0:
        return Fraction(0)
    if isinstance(value, (str, int, Fraction)) and not isinstance(value, bool):
        try:
            if Fraction(str(value).strip()) == 0:
                return Fraction(0)
        except (ValueError, ZeroDivisionError):
            pass
    return parse_epsilon(value, name=name)


_EXACT_TEXT = PlainSerializer(format_epsilon, return_type=str, when_used="json")
_TEXT_SCHEMA = WithJsonSchema({"type": "string", "description": "exact rational, e.g. \"1/10\""})

#: A budget ε > 0: a Fraction in Python, exact text on the wire (pydantic fields of plans and manifests).
Epsilon = Annotated[Fraction, PlainValidator(lambda v: parse_epsilon(v)), _EXACT_TEXT, _TEXT_SCHEMA]
#: A part of a budget, ε >= 0 (e.g. the category histogram's share of a numeric attribute: 0).
EpsilonPart = Annotated[Fraction, PlainValidator(lambda v: parse_epsilon_part(v)), _EXACT_TEXT, _TEXT_SCHEMA]


def split_epsilon_vertical(
    epsilon: Fraction, attributes_per_owner: Mapping[str, int], split: str = "equal"
) -> dict[str, Fraction]:
    """Budget ε_j of each owner of a vertical fragmentation (sequential composition, docs/specification.md §3).

    Parameters
    ----------
    epsilon : Fraction
        Total budget ε > 0 of the release.
    attributes_per_owner : mapping owner -> l_j
        Number of protected attributes each owner holds (l_j ≥ 1).
    split : {"equal", "by-attributes"}
        ``equal``: ε_j = ε / m (Del Vasto-Terrientes et al. (ICISSP 2025) §4.2.2). ``by-attributes``:
        ε_j = ε · l_j / l, so every attribute receives ε / l, as in the centralized release.

    Returns
    -------
    dict owner -> ε_j with ``sum(values) == epsilon`` exactly.

    Raises
    ------
    InvalidParameterError
        Unknown split, no owners, or an owner with l_j < 1.
    """
    if split not in EPSILON_SPLITS:
        raise InvalidParameterError(f"epsilon split must be one of {EPSILON_SPLITS}, not {split!r}")
    if not attributes_per_owner:
        raise InvalidParameterError("a vertical release needs at least one owner, got none")
    for owner, l_j in attributes_per_owner.items():
        if l_j < 1:
            raise InvalidParameterError(f"owner {owner!r} must hold at least one attribute, holds {l_j}")
    m = len(attributes_per_owner)
    total_l = sum(attributes_per_owner.values())
    if split == "equal":
        return {owner: epsilon / m for owner in attributes_per_owner}
    return {owner: epsilon * l_j / total_l for owner, l_j in attributes_per_owner.items()}


def per_attribute_epsilon(epsilon_owner: Fraction, n_attributes: int) -> Fraction:
    """ε per protected attribute, ε_j / l_j (sequential composition over attributes, docs/specification.md §2).

    Raises
    ------
    InvalidParameterError
        If ``n_attributes`` < 1 or ``epsilon_owner`` ≤ 0.
    """
    if n_attributes < 1:
        raise InvalidParameterError(f"the number of protected attributes must be >= 1, not {n_attributes}")
    if epsilon_owner <= 0:
        raise InvalidParameterError(f"epsilon must be > 0, not {epsilon_owner}")
    return Fraction(epsilon_owner) / n_attributes


@dataclass(frozen=True)
class BudgetStep:
    """One spend of a release: who spent how much on which attribute."""

    owner: str
    attribute: str
    epsilon: Fraction


@dataclass(frozen=True)
class ReleaseBudget:
    """The full accounting of one release (docs/specification.md §3): every step, its ε and the composition used.

    ``composition`` is ``"parallel"`` (horizontal: every owner holds disjoint records and spends the
    full ε) or ``"sequential"`` (vertical and centralized: the per-attribute spends add up).
    """

    total: Fraction
    composition: Literal["parallel", "sequential"]
    steps: tuple[BudgetStep, ...]

    def spent(self) -> Fraction:
        """Total ε the release spends on any one individual, recomputed from the steps.

        Horizontal: the maximum over owners of each owner's sum (records are disjoint).
        Vertical: the sum of all steps (every record is in every fragment).
        """
        per_owner: dict[str, Fraction] = {}
        for s in self.steps:
            per_owner[s.owner] = per_owner.get(s.owner, Fraction(0)) + s.epsilon
        if not per_owner:
            return Fraction(0)
        if self.composition == "parallel":
            return max(per_owner.values())
        return sum(per_owner.values(), Fraction(0))


def horizontal_budget(epsilon: Fraction, owners: Sequence[str], attributes: Sequence[str]) -> ReleaseBudget:
    """Budget of a horizontal release: every owner spends the full ε, ε/l per attribute."""
    eps_attr = per_attribute_epsilon(epsilon, len(attributes))
    steps = tuple(BudgetStep(o, a, eps_attr) for o in owners for a in attributes)
    budget = ReleaseBudget(epsilon, "parallel", steps)
    assert budget.spent() == epsilon
    return budget


def vertical_budget(
    epsilon: Fraction, attributes_by_owner: Mapping[str, Sequence[str]], split: str = "equal"
) -> ReleaseBudget:
    """Budget of a vertical release: owner j spends ε_j, ε_j / l_j per attribute, Σ ε_j = ε."""
    eps_owner = split_epsilon_vertical(epsilon, {o: len(a) for o, a in attributes_by_owner.items()}, split)
    steps = tuple(
        BudgetStep(o, a, per_attribute_epsilon(eps_owner[o], len(attrs)))
        for o, attrs in attributes_by_owner.items()
        for a in attrs
    )
    budget = ReleaseBudget(epsilon, "sequential", steps)
    assert budget.spent() == epsilon
    return budget


def check_lifetime(spent: Sequence[Fraction], new: Fraction, lifetime: Fraction, *, owner: str, dataset: str) -> Fraction:
    """Refuse a spend that would exceed the lifetime budget (sequential composition over releases).

    Returns the total after the spend. Raises :class:`BudgetExceededError` naming the figures.
    """
    from .errors import BudgetExceededError

    total = sum(spent, Fraction(0))
    if total + new > lifetime:
        raise BudgetExceededError(
            f"owner {owner!r} has spent ε = {total} of its lifetime budget {lifetime} on dataset {dataset!r}; "
            f"a release with ε = {new} would exceed it"
        )
    return total + new
